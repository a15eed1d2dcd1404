#!/usr/bin/env bash
# make bench-pipeline: the whole pipeline (make pipeline) timed stage by stage.
# Each tool runs under bench/stage-timer.sh (the pipeline's RUN prefix), which records its
# wall time and its --json summary; the summaries' "phases" split the wall time into
# start-up, reading, hashing, compute and writing (common/phases.h). Make's overhead is
# the pipeline's wall time minus the stages'.
#   DEVICE=gpu (default) | cpu | auto; CIFAR10_DIR (the real data; else a synthetic set of
#   the same shape, bench/make_synthetic_cifar.py); TRAIN_LIMIT / TEST_LIMIT / EPOCHS
#   (defaults: all, all, 20 on the GPU; 2,000 / 500 / 1 on the CPU); PIPELINE_FLAGS
#   (more make variables, e.g. "FIT_FLAGS=--C 3"); OUT_DIR (build/bench-pipeline).
# Prints one table; the stage log and Make's output are kept under OUT_DIR. On a GPU host
# it then runs every computing stage again with --device cpu on the same inputs, all cores
# (bench/pipeline_cpu.py; ae-train for CPU_EPOCHS=1 epoch, scaled per epoch) and prints
# the CPU beside the GPU with a speed-up column; BENCH_CPU=0 leaves that out.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
DEVICE="${DEVICE:-gpu}"
OUT_DIR="${OUT_DIR:-$BUILD/bench-pipeline}"
if [ "$DEVICE" = cpu ]; then
  TRAIN_LIMIT="${TRAIN_LIMIT-2000}" TEST_LIMIT="${TEST_LIMIT-500}" EPOCHS="${EPOCHS:-1}"
else
  TRAIN_LIMIT="${TRAIN_LIMIT-}" TEST_LIMIT="${TEST_LIMIT-}" EPOCHS="${EPOCHS:-20}"
fi
if [ "$DEVICE" != cpu ] && ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  echo "bench-pipeline: skipped: no NVIDIA GPU on this machine (DEVICE=cpu times the CPU pipeline)"
  exit 0
fi
rm -rf "$OUT_DIR" && mkdir -p "$OUT_DIR"
src="${CIFAR10_DIR:-}"
if [ -z "$src" ]; then
  src="$OUT_DIR/synthetic/cifar-10-batches-bin"
  # CIFAR-10's binary layout, random pixels and labels: no stage's speed depends on them.
  "$PYTHON" - "$src" <<'PY' || { echo "bench-pipeline: cannot write synthetic batches" >&2; exit 1; }
import os, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1)
for name in ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]:
    rec = rng.integers(0, 256, size=(10000, 3073), dtype=np.uint8)
    rec[:, 0] = rng.integers(0, 10, size=10000)
    rec.tofile(os.path.join(out, name))
PY
fi
export STAGE_LOG="$OUT_DIR/stages.jsonl"
: > "$STAGE_LOG"
device_name=cpu
[ "$DEVICE" != cpu ] && device_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "bench-pipeline: DEVICE=$DEVICE ($device_name), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
t0=$(date +%s.%N)
# shellcheck disable=SC2086  # PIPELINE_FLAGS is a list of make variables
make --no-print-directory pipeline PREBUILT=1 BUILD="$BUILD" DEVICE="$DEVICE" CIFAR10_DIR="$src" \
  DATA_DIR="$OUT_DIR/data" RUN_DIR="$OUT_DIR/run" TRAIN_LIMIT="$TRAIN_LIMIT" TEST_LIMIT="$TEST_LIMIT" \
  EPOCHS="$EPOCHS" RUN="$PWD/bench/stage-timer.sh" ${PIPELINE_FLAGS:-} > "$OUT_DIR/make.log" 2>&1
rc=$?
t1=$(date +%s.%N)
tail -1 "$OUT_DIR/make.log"
[ $rc -eq 0 ] || { echo "bench-pipeline: make pipeline failed (exit $rc), see $OUT_DIR/make.log" >&2; tail -5 "$OUT_DIR/make.log" >&2; exit 1; }
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
"$PYTHON" bench/pipeline_table.py "$STAGE_LOG" "$wall"
if [ "$DEVICE" != cpu ] && [ "${BENCH_CPU:-1}" != 0 ]; then
  echo
  echo "bench-pipeline: the same stages with --device cpu ($(nproc) cores), on the GPU run's inputs:"
  PYTHON="$PYTHON" "$PYTHON" bench/pipeline_cpu.py "$STAGE_LOG" "$OUT_DIR/cpu" "$wall" --epochs "${CPU_EPOCHS:-1}" ||
    { echo "bench-pipeline: the CPU pass failed" >&2; exit 1; }
fi
