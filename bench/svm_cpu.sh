#!/usr/bin/env bash
# svm-fit on 5,000 x 8,192 and svm-eval on 10,000 test features, beside scikit-learn's SVC
# (StandardScaler + SVC(C=10, gamma='scale')) on the same features in the same run.
# scikit-learn's predict is slow (docs/BENCHMARKS.md, "CPU, 2026-11-22"), so it predicts
# the first 2,000 test rows only; the table says so and extrapolates linearly.
#
# Features, first that applies:
#   SVM_BENCH_FEATURES=file.h5      an existing ae-features file (>= 5,000 train, 10,000 test)
#   real                            ae-train/ae-encode built and ../shared CIFAR-10 present:
#                                   encoder trained 3 epochs on 5,000 images (a few minutes)
#   synthetic                       generated ReLU-like features of the same shape
# SVM_BENCH_FULL=1 also times svm-fit on 50,000 rows (goal <= 20 min; synthetic if no real file).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
BIN="$BUILD/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=5000
sk_predict=2000

features="${SVM_BENCH_FEATURES:-}"
if [ -n "$features" ]; then
  kind="given file $features"
elif [ -x "$BIN/ae-train" ] && [ -x "$BIN/ae-encode" ] && [ -f ../shared/cifar-10-batches-bin/test_batch.bin ]; then
  kind="real: encoder trained 3 epochs on 5,000 CIFAR-10 images"
  "$BIN/cifar-convert" -q --input ../shared/cifar-10-batches-bin --train-limit $train -o "$tmp/cifar.h5"
  "$BIN/ae-train" -q --data "$tmp/cifar.h5" --epochs 3 -o "$tmp/ae.h5"
  "$BIN/ae-encode" -q --model "$tmp/ae.h5" --data "$tmp/cifar.h5" -o "$tmp/features.h5"
  features="$tmp/features.h5"
else
  kind="synthetic ReLU-like features (tests/python/sklearn_parity.py make-features, noise 1.5)"
  "$PYTHON" tests/python/sklearn_parity.py make-features "$tmp/features.h5" --train $train --test 10000 \
    --dim 8192 --noise 1.5 --seed 5
  features="$tmp/features.h5"
fi

"$BIN/svm-fit" -q --json --features "$features" --train-limit $train -o "$tmp/svm.h5" > "$tmp/fit.json"
"$BIN/svm-eval" -q --json --model "$tmp/svm.h5" --features "$features" -o "$tmp/eval.h5" > "$tmp/eval.json"
"$PYTHON" bench/svm_sklearn.py "$features" --train $train --predict $sk_predict --eval "$tmp/eval.h5" > "$tmp/sk.json"

full_row=""
if [ "${SVM_BENCH_FULL:-0}" = 1 ]; then
  full="$features"
  n_full=$("$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1],'r')['/train/labels'].shape[0])" "$features")
  if [ "$n_full" -lt 50000 ]; then
    "$PYTHON" tests/python/sklearn_parity.py make-features "$tmp/full.h5" --train 50000 --test 10 --dim 8192 \
      --noise 1.5 --seed 6
    full="$tmp/full.h5"
  fi
  "$BIN/svm-fit" -q --json --features "$full" -o "$tmp/svm_full.h5" > "$tmp/full.json"
  full_row="$tmp/full.json"
fi

"$PYTHON" - "$tmp/fit.json" "$tmp/eval.json" "$tmp/sk.json" "$kind" "$full_row" <<'PY'
import json, sys
fit, ev, sk = (json.load(open(p)) for p in sys.argv[1:4])
kind, full = sys.argv[4], sys.argv[5]
sk_pred_10k = sk["predict_seconds"] * ev["n"] / sk["n_predict"]
print(f"\n## SVM on CPU ({kind})")
print(f"{fit['n_train']:,} train x {fit['n_features']:,} features ({fit['n_features_kept']:,} kept), "
      f"gamma {fit['gamma']:.6g} (sklearn {sk['gamma']:.6g}), support vectors {fit['n_sv']:,} (sklearn {sk['n_sv']:,})")
print("| step | svm-fit / svm-eval | scikit-learn SVC | speed-up | goal |")
print("|---|---|---|---|---|")
print(f"| fit {fit['n_train']:,} (whole tool: read, scale, fit, write) | {fit['seconds']:.1f} s "
      f"(solver {fit['fit_seconds']:.1f} s) | {sk['fit_seconds']:.1f} s | {sk['fit_seconds'] / fit['seconds']:.1f}x | >= 10x |")
print(f"| predict {ev['n']:,} test rows (whole tool) | {ev['seconds']:.1f} s (predict {ev['predict_seconds']:.1f} s) | "
      f"{sk['predict_seconds']:.1f} s for {sk['n_predict']:,} rows, ~{sk_pred_10k:.0f} s for {ev['n']:,} extrapolated | "
      f"~{sk_pred_10k / ev['seconds']:.0f}x | <= 30 s |")
print(f"| accuracy | {ev['accuracy'] * 100:.2f} % on {ev['n']:,}; {sk['accuracy_ours_same_rows'] * 100:.2f} % on the first "
      f"{sk['n_predict']:,} | {sk['accuracy'] * 100:.2f} % on the first {sk['n_predict']:,} "
      f"(same predictions as ours on {sk['agreement'] * 100:.2f} % of them) | | |")
if full:
    fl = json.load(open(full))
    print(f"| fit {fl['n_train']:,} (whole tool) | {fl['seconds'] / 60:.1f} min (solver {fl['fit_seconds'] / 60:.1f} min, "
          f"{fl['n_sv']:,} SVs) | not run (~2.5 h) | | <= 20 min |")
PY
