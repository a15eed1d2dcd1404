#!/usr/bin/env bash
# make test-gpu, ae-train's group with ranks as processes (--gpus N, one process per GPU),
# which the GoogleTest cases (ranks as threads of one process) do not reach:
#   1. `ae-train --gpus 2 --batch-size B` trains what one GPU trains at batch 2·B: the
#      per-epoch training and validation losses within 1e-3 relative, fp32 (TF32) and bf16.
#   2. A rank killed with SIGKILL mid-training stops the group: the launcher exits non-zero
#      within the group deadline with one line naming the rank, and no rank is left running.
# Skips (one line) without 2 GPUs or without NCCL. Last line:
# "group-processes: N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}"
BIN="$BUILD/bin"
PY="${BENCH_PYTHON:-python3}"
source tests/gpu/nccl_env.sh
passed=0 failed=0 skipped=0
say() { echo "group-processes: $*"; }
finish() { say "$passed passed, $failed failed, $skipped skipped"; exit $((failed > 0)); }
ok() { say "ok: $*"; passed=$((passed + 1)); }
fail() { say "FAILED: $*"; failed=$((failed + 1)); }

gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -lt 2 ]; then
  say "skipped: needs 2 GPUs (this machine has $gpus)"
  skipped=2
  finish
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/group-processes.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$PY" tests/helpers/gen_cifar.py "$tmp" > /dev/null || { fail "cannot generate the dataset"; finish; }
"$BIN/cifar-convert" --quiet --input "$tmp/cifar-10-batches-bin" --train-limit 4097 --test-limit 512 -o "$tmp/data.h5" ||
  { fail "cifar-convert"; finish; }
rm -rf "$tmp/cifar-10-batches-bin"

# 1. two ranks at batch 32 against one GPU at batch 64 (4,097 images: the last global
#    batch holds one image, so rank 1 takes an empty step every epoch), at lr 3e-5: the two
#    sum each gradient in another order, and training amplifies that rounding with the step
#    size: the difference starts at rounding level and grows with each epoch (a wrong
#    gradient would show from the first), less at a smaller step (the figures:
#    docs/MULTI_GPU.md, "What was measured").
for prec in fp32 bf16; do
  common=(--data "$tmp/data.h5" --device gpu --precision "$prec" --epochs 3 --seed 3 --val-split 512 --lr 3e-5 --quiet)
  if ! "$BIN/ae-train" "${common[@]}" --batch-size 64 -o "$tmp/one-$prec.h5" 2> "$tmp/one-$prec.log"; then
    fail "$prec: one GPU at batch 64: $(tail -1 "$tmp/one-$prec.log")"; continue
  fi
  if ! "$BIN/ae-train" "${common[@]}" --batch-size 32 --gpus 2 -o "$tmp/two-$prec.h5" 2> "$tmp/two-$prec.log"; then
    fail "$prec: --gpus 2 at batch 32: $(tail -1 "$tmp/two-$prec.log")"; continue
  fi
  if msg=$("$PY" - "$tmp/one-$prec.h5" "$tmp/two-$prec.h5" <<'PYEOF'
import sys, h5py, numpy as np
one, two = (h5py.File(f, "r") for f in sys.argv[1:3])
worst = 0.0
for key in ("train_loss", "val_loss"):
    a, b = np.asarray(one["history"][key]), np.asarray(two["history"][key])
    assert a.shape == b.shape and a.size == 3, (key, a.shape, b.shape)
    worst = max(worst, float(np.max(np.abs(a - b) / np.abs(a))))
print(f"worst relative loss difference {worst:.2e}")
sys.exit(0 if worst < 1e-3 else 1)
PYEOF
  ); then ok "$prec: --gpus 2 at batch 32 follows one GPU at 64 ($msg)"; else fail "$prec: $msg"; fi
done

# 2. kill -9 of rank 1 while the group trains
"$BIN/ae-train" --data "$tmp/data.h5" --device gpu --epochs 10000 --batch-size 32 --gpus 2 --group-timeout 30 \
  -o "$tmp/killed.h5" 2> "$tmp/killed.log" &
launcher=$!
victim=""
for _ in $(seq 1 600); do  # up to 60 s for the group to form and train
  victim=$(pgrep -P "$launcher" -f -- "--rank 1 " || true)
  [ -n "$victim" ] && grep -q "epoch 1/" "$tmp/killed.log" 2>/dev/null && break
  [ -n "$victim" ] && [ -s "$tmp/killed.h5" ] && break
  sleep 0.1
done
if [ -z "$victim" ]; then
  kill -9 "$launcher" 2>/dev/null
  fail "kill: rank 1 never started: $(tail -2 "$tmp/killed.log")"
else
  sleep 2  # well inside the training loop
  t0=$(date +%s)
  kill -9 "$victim"
  ( sleep 90; kill -9 "$launcher" 2>/dev/null ) & watchdog=$!
  wait "$launcher"; rc=$?
  kill "$watchdog" 2>/dev/null
  took=$(( $(date +%s) - t0 ))
  last=$(tail -1 "$tmp/killed.log")
  if [ "$rc" -ne 0 ] && [ "$took" -le 40 ] && [[ "$last" == *"rank 1 of 2 failed"* ]] &&
     [ "$(pgrep -f -- "$tmp/killed.h5" | wc -l)" -eq 0 ]; then
    ok "kill -9 of rank 1: stopped in ${took} s, exit $rc: $last"
  else
    fail "kill -9 of rank 1: exit $rc after ${took} s, $(pgrep -f -- "$tmp/killed.h5" | wc -l) rank(s) left: $last"
  fi
fi
finish
