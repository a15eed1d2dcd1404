#!/usr/bin/env bash
# Autoencoder on the CPU: our ae-train (batch 64 and 256) and ae-encode beside PyTorch
# running the same model with the same threads and batch, in the same run. Prints a
# markdown table of images/s and the ratio ours/PyTorch (goal >= 1.0).
#   THREADS (default: all cores), TRAIN_IMAGES (1024), ENCODE_IMAGES (4096), REPEATS (2: best of)
# Our numbers are the tools' own --json images_per_second (training or encoding passes
# only, no file I/O); PyTorch's are timed the same way in bench/ae_torch_cpu.py. Our tools
# run with --device cpu: the default (auto) would time the GPU on a GPU host.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
THREADS="${THREADS:-$(nproc)}"
TRAIN_IMAGES="${TRAIN_IMAGES:-1024}"
ENCODE_IMAGES="${ENCODE_IMAGES:-4096}"
REPEATS="${REPEATS:-2}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Real CIFAR-10 when present, else generated batches (speed does not depend on pixels).
src=../shared/cifar-10-batches-bin
if [ ! -f "$src/test_batch.bin" ]; then
  "$PYTHON" tests/helpers/gen_cifar.py "$tmp/gen" >/dev/null
  src="$tmp/gen/cifar-10-batches-bin"
fi
n=$((TRAIN_IMAGES > ENCODE_IMAGES ? TRAIN_IMAGES : ENCODE_IMAGES))
"$BUILD/bin/cifar-convert" --quiet --input "$src" --train-limit "$n" --test-limit 64 -o "$tmp/data.h5"

json_field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p"; }
best() { printf '%s\n' "$@" | sort -g | tail -1; }

ours_train() {  # batch → best images/s over REPEATS one-epoch runs
  local r=()
  for _ in $(seq "$REPEATS"); do
    r+=("$("$BUILD/bin/ae-train" --device cpu --quiet --json --data "$tmp/data.h5" --train-limit "$TRAIN_IMAGES" --epochs 1 \
      --batch-size "$1" --threads "$THREADS" -o "$tmp/m.h5" | json_field images_per_second)")
  done
  best "${r[@]}"
}
ours_encode() {
  local r=()
  for _ in $(seq "$REPEATS"); do
    r+=("$("$BUILD/bin/ae-encode" --device cpu --quiet --json --model "$tmp/m.h5" --data "$tmp/data.h5" --split train \
      --batch-size 64 --threads "$THREADS" -o "$tmp/f.h5" | json_field images_per_second)")
  done
  best "${r[@]}"
}
torch_run() {  # batch → JSON line, best of REPEATS by training speed
  local best_line="" best_v=0 line v
  for _ in $(seq "$REPEATS"); do
    line=$("$PYTHON" bench/ae_torch_cpu.py --threads "$THREADS" --batch-size "$1" --train-images "$TRAIN_IMAGES" \
      --encode-images "$ENCODE_IMAGES")
    v=$(json_field train_images_per_second <<<"$line")
    if awk -v a="$v" -v b="$best_v" 'BEGIN{exit !(a>b)}'; then best_v=$v; best_line=$line; fi
  done
  echo "$best_line"
}

# The encode run needs a model; keep the one from the bs-64 training run.
train64=$(ours_train 64)
cp "$tmp/m.h5" "$tmp/m64.h5"
train256=$(ours_train 256)
cp "$tmp/m64.h5" "$tmp/m.h5"
# ae-encode reads the whole train split of data.h5 (n images); per-image speed is what counts.
encode=$(ours_encode)
t64=$(torch_run 64)
t256=$(torch_run 256)

row() { awk -v name="$1" -v a="$2" -v b="$3" 'BEGIN{printf "| %s | %.1f | %.1f | %.2fx |\n", name, a, b, a/b}'; }
printf '\n## Autoencoder on the CPU (%s threads; %s training images, %s encoded; best of %s)\n' \
  "$THREADS" "$TRAIN_IMAGES" "$n" "$REPEATS"
printf '| images/s | ours | PyTorch %s | ours / PyTorch |\n|---|---|---|---|\n' \
  "$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
row "train, batch 64" "$train64" "$(json_field train_images_per_second <<<"$t64")"
row "train, batch 256" "$train256" "$(json_field train_images_per_second <<<"$t256")"
row "encode, batch 64" "$encode" "$(json_field encode_images_per_second <<<"$t64")"
