#!/usr/bin/env bash
# What the features go through before the SVM (docs/RESULTS.md, "Live units" and "What the
# features go through"): a finished run folder's features.h5 is copied and transformed by
# bench/feature_transform.py (every features dataset, the views' too), then svm-fit and
# svm-eval run on the copy. The SVM standardises every feature afterwards, as always. A
# choice reads the CV column; the test split is only reported.
#
#   bash bench/feature-transform-study.sh RUN_DIR TRANSFORM ...
#   TRANSFORM: none (the features as they are), pow0.5, pow0.5l2, log1p, pool2, quadrants,
#   whiten0.1 (bench/feature_transform.py says what each does).
#   BUILD (build), DEVICE (gpu), PYTHON (a python3 with h5py and NumPy; /usr/bin/python3
#   here), FIT_FLAGS (unset: the preset's flip SVM, --augment flip --cv 5 --C 3,10), EVAL_FLAGS
#   (unset: --tta flip; set and empty: none).
# Prints a table: transform, features per row, CV %, test %, seconds of svm-fit.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
DEVICE="${DEVICE:-gpu}"
PYTHON="${PYTHON:-python3}"
read -ra fit_flags <<< "${FIT_FLAGS---augment flip --cv 5 --C 3,10}"
read -ra eval_flags <<< "${EVAL_FLAGS---tta flip}"
run="${1:?usage: feature-transform-study.sh RUN_DIR TRANSFORM ...}"; shift
[ -s "$run/features.h5" ] || { echo "feature-transform-study: no $run/features.h5" >&2; exit 2; }
attr() { "$PYTHON" -c 'import h5py, sys; v = h5py.File(sys.argv[1], "r").attrs.get(sys.argv[2]); print("%.2f" % (100 * float(v)) if v is not None else "-")' "$1" "$2"; }
width() { "$PYTHON" -c 'import h5py, sys; print(h5py.File(sys.argv[1], "r")["train/features"].shape[1])' "$1"; }
printf "%-10s %7s %7s %7s %7s\n" transform dim cv_% test_% fit_s
for t in "$@"; do
  f="$run/features-$t.h5"
  if [ "$t" = none ]; then
    ln -sf features.h5 "$f"
  else
    "$PYTHON" bench/feature_transform.py "$run/features.h5" "$f" "$t" || exit 1
  fi
  t0=$(date +%s.%N)
  "$BUILD/bin/svm-fit" -q --features "$f" --device "$DEVICE" "${fit_flags[@]}" -o "$run/svm-$t.h5" || exit 1
  t1=$(date +%s.%N)
  "$BUILD/bin/svm-eval" -q --model "$run/svm-$t.h5" --features "$f" --device "$DEVICE" "${eval_flags[@]}" \
    -o "$run/eval-$t.h5" || exit 1
  printf "%-10s %7s %7s %7s %7.1f\n" "$t" "$(width "$f")" "$(attr "$run/svm-$t.h5" cv_accuracy)" \
    "$(attr "$run/eval-$t.h5" accuracy)" "$("$PYTHON" -c "print($t1 - $t0)")"
  rm -f "$f"
done
