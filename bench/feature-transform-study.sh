#!/usr/bin/env bash
# What the features go through before the SVM (docs/RESULTS.md, "Live units"): a finished
# run folder's features.h5 is copied and transformed (every /train and /test features
# dataset, the mirrors' too), then svm-fit and svm-eval run with the preset's SVM settings
# (flips, 5-fold CV over C 3 and 10, test-time flips). The SVM standardises every feature
# afterwards, as always. A choice reads the CV column; the test split is only reported.
#
#   bash bench/feature-transform-study.sh RUN_DIR TRANSFORM ...
#   TRANSFORM: pow0.5 (sign(x)|x|^0.5), pow0.5l2 (then each row scaled to unit L2 norm),
#   log1p (log(1 + max(x, 0))).  BUILD (build), DEVICE (gpu), PYTHON (python3 with h5py).
# Prints a table: transform, CV %, test %, seconds of svm-fit.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
DEVICE="${DEVICE:-gpu}"
PYTHON="${PYTHON:-python3}"
run="${1:?usage: feature-transform-study.sh RUN_DIR TRANSFORM ...}"; shift
[ -s "$run/features.h5" ] || { echo "feature-transform-study: no $run/features.h5" >&2; exit 2; }
percent() { "$PYTHON" -c 'import h5py, sys; v = h5py.File(sys.argv[1], "r").attrs.get(sys.argv[2]); print("%.2f" % (100 * float(v)) if v is not None else "-")' "$1" "$2"; }
printf "%-10s %7s %7s %7s\n" transform cv_% test_% fit_s
for t in "$@"; do
  case "$t" in pow*|log1p) ;; *) echo "feature-transform-study: unknown transform '$t'" >&2; exit 2 ;; esac
  f="$run/features-$t.h5"
  "$PYTHON" - "$run/features.h5" "$f" "$t" <<'PY' || exit 1
import shutil, sys
import h5py, numpy as np
src, dst, t = sys.argv[1:4]
shutil.copyfile(src, dst)
with h5py.File(dst, "r+") as f:
    for key in ("train/features", "train/features_flip", "test/features", "test/features_flip"):
        if key not in f:
            continue
        d = f[key]
        for i in range(0, d.shape[0], 10000):
            x = d[i:i + 10000].astype(np.float64)
            if t.startswith("pow"):
                x = np.sign(x) * np.abs(x) ** float(t[3:].removesuffix("l2"))
            else:
                x = np.log1p(np.maximum(x, 0))
            if t.endswith("l2"):
                x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
            d[i:i + 10000] = x.astype(np.float32)
PY
  t0=$(date +%s.%N)
  "$BUILD/bin/svm-fit" -q --features "$f" --device "$DEVICE" --augment flip --cv 5 --C 3,10 -o "$run/svm-$t.h5" || exit 1
  t1=$(date +%s.%N)
  "$BUILD/bin/svm-eval" -q --model "$run/svm-$t.h5" --features "$f" --device "$DEVICE" --tta flip -o "$run/eval-$t.h5" || exit 1
  printf "%-10s %7s %7s %7.1f\n" "$t" "$(percent "$run/svm-$t.h5" cv_accuracy)" "$(percent "$run/eval-$t.h5" accuracy)" \
    "$("$PYTHON" -c "print($t1 - $t0)")"
  rm -f "$f"
done
