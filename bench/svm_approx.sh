#!/usr/bin/env bash
# The exact SVM against svm-fit --approx nystroem:M (issue 63) on Fashion-MNIST's raw pixels
# (Debian's dataset-fashion-mnist: 60,000 training and 10,000 test images, 784 pixels scaled
# to [0, 1] as plain features), on the CPU: test accuracy and fit seconds of each. Usage:
#   bash bench/svm_approx.sh [M ...]        (default: 2000 4000)
# BUILD (build), THREADS (all cores), TRAIN_LIMIT (0: all), KEEP=DIR keeps the files there.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || {
  echo "svm_approx.sh: no $src (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
for t in cifar-convert svm-fit svm-eval; do
  [ -x "$BUILD/bin/$t" ] || { echo "svm_approx.sh: $BUILD/bin/$t is missing (make)" >&2; exit 1; }
done
landmarks=("$@")
[ ${#landmarks[@]} -gt 0 ] || landmarks=(2000 4000)
dir="${KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/svm_approx.XXXXXX")}"
mkdir -p "$dir"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
threads=()
[ -z "${THREADS:-}" ] || threads=(--threads "$THREADS")
limit=(--train-limit "${TRAIN_LIMIT:-0}")

if [ ! -f "$dir/pixels.h5" ]; then
  "$BUILD/bin/cifar-convert" -q --input "$src" -o "$dir/fm.h5"
  "$PYTHON" - "$dir/fm.h5" "$dir/pixels.h5.tmp" <<'PY'
import sys, h5py, numpy as np
src, out = sys.argv[1], sys.argv[2]
with h5py.File(src, "r") as f, h5py.File(out, "w") as o:
    for split in ("train", "test"):
        images = f[split + "/images"][()]
        o[split + "/features"] = images.reshape(len(images), -1).astype(np.float32) / 255
        o[split + "/labels"] = f[split + "/labels"][()]
    o.attrs["class_names"] = f.attrs["class_names"]
PY
  mv "$dir/pixels.h5.tmp" "$dir/pixels.h5"
fi

run() {  # NAME [svm-fit options...]: one line of accuracy and seconds
  local name="$1"; shift
  "$BUILD/bin/svm-fit" -q --features "$dir/pixels.h5" --device cpu "${threads[@]}" "${limit[@]}" "$@" \
    -o "$dir/$name.h5" --json > "$dir/$name.fit.json"
  "$BUILD/bin/svm-eval" -q --model "$dir/$name.h5" --features "$dir/pixels.h5" --device cpu "${threads[@]}" \
    -o "$dir/$name.eval.h5" --json > "$dir/$name.eval.json"
  "$PYTHON" - "$name" "$dir/$name.fit.json" "$dir/$name.eval.json" <<'PY'
import sys, json
name, fit, ev = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
print(f"BENCH svm_approx {name:>14}: test accuracy {100 * ev['accuracy']:.2f} %, fit {fit['fit_seconds']:.1f} s, "
      f"svm-fit {fit['seconds']:.1f} s, predict {ev['predict_seconds']:.1f} s, {fit['n_train']} rows")
PY
}

echo "svm_approx.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), files in $dir" >&2
run exact
for M in "${landmarks[@]}"; do run "nystroem:$M" --approx "nystroem:$M"; done
