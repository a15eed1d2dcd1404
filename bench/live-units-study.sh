#!/usr/bin/env bash
# How much of the autoencoder's code is alive, and what that is worth (docs/RESULTS.md,
# "Live units"). Each configuration is one `make pipeline` (default or a preset, with the
# Make variables given); after it, the latent units that vary over the training images are
# counted (a ReLU unit that never fires is a constant 0: svm-fit drops it), and the test
# accuracy and the SVM's cross-validated accuracy (when the configuration has --cv) are read
# from the run's files. The test split is only reported; a choice reads the CV column.
#
#   CIFAR10_DIR=… bash bench/live-units-study.sh NAME="MAKE VARIABLES" ...
#   e.g. default="SEED=1"  lr3e-4="SEED=1 TRAIN_FLAGS='--lr 3e-4'"  acc="PRESET=accurate EPOCHS=50"
#   BUILD (build), DEVICE (gpu), OUT_DIR ($BUILD/live-units): run folders and logs.
# Prints a table: config, live units (of the latent's), live channels, CV %, test %, seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
DEVICE="${DEVICE:-gpu}"
PYTHON="${PYTHON:-python3}"
OUT_DIR="${OUT_DIR:-$BUILD/live-units}"
: "${CIFAR10_DIR:?CIFAR10_DIR must name the CIFAR-10 batches}"
mkdir -p "$OUT_DIR"
table="$OUT_DIR/table.txt"
printf "%-24s %12s %8s %7s %7s %7s\n" config live chan cv_% test_% sec > "$table"
for spec in "$@"; do
  name="${spec%%=*}" vars="${spec#*=}"
  case "$name" in *[!A-Za-z0-9._-]*|"") echo "live-units-study: bad name '$name'" >&2; exit 2 ;; esac
  run="$OUT_DIR/$name"
  # The variables are the caller's own command-line text, split as a shell would (quotes kept).
  eval "args=($vars)"
  t0=$(date +%s.%N)
  if ! make pipeline PREBUILT=1 BUILD="$BUILD" CIFAR10_DIR="$CIFAR10_DIR" DEVICE="$DEVICE" \
       DATA_DIR="$OUT_DIR/data" RUN_DIR="$run" "${args[@]}" > "$OUT_DIR/$name.log" 2>&1; then
    echo "live-units-study: $name failed (log: $OUT_DIR/$name.log)" >&2
    tail -3 "$OUT_DIR/$name.log" >&2
    continue
  fi
  t1=$(date +%s.%N)
  "$PYTHON" - "$run" "$name" "$t0" "$t1" >> "$table" <<'PY'
import h5py, numpy as np, sys
run, name = sys.argv[1], sys.argv[2]
seconds = float(sys.argv[4]) - float(sys.argv[3])
with h5py.File(f"{run}/features.h5", "r") as f:
    X = f["train/features"]
    lo = np.full(X.shape[1], np.inf, np.float32)
    hi = np.full(X.shape[1], -np.inf, np.float32)
    for i in range(0, X.shape[0], 5000):
        b = X[i:i + 5000]
        lo, hi = np.minimum(lo, b.min(0)), np.maximum(hi, b.max(0))
    alive = hi > lo
    channels = int(f.attrs["latent_shape"][0]) if "latent_shape" in f.attrs else 1
with h5py.File(f"{run}/svm.h5", "r") as f:
    cv = f"{100 * float(f.attrs['cv_accuracy']):.2f}" if "cv_accuracy" in f.attrs else "-"
with h5py.File(f"{run}/eval.h5", "r") as f:
    test = 100 * float(f.attrs["accuracy"])
live_channels = int(alive.reshape(channels, -1).any(1).sum())
print(f"{name:<24} {int(alive.sum()):>6}/{alive.size:<5} {live_channels:>4}/{channels:<3} {cv:>7} {test:>7.2f} {seconds:>7.1f}")
PY
  tail -1 "$table"
done
cat "$table"
