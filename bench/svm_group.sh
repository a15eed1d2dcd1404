#!/usr/bin/env bash
# svm-fit on a group of ranks against one process (docs/MULTI_GPU.md): the same fit on 1 and
# 2 ranks, wall time, the speed-up and whether the two models are the same bits.
#
#   bench/svm_group.sh                      CPU rows: 1 process vs --ranks 2, one thread each
#   SVM_GROUP_DEVICE=gpu bench/svm_group.sh GPU rows: one GPU vs --gpus 2, the plain fit and
#                                           the cross-validated grid --cv 5 --C 1,3,10,30
#                                           --gamma 0.5x,scale,2x
#
# Features: SVM_GROUP_FEATURES=file.h5 (an ae-features file, e.g. make pipeline's), else
# generated ReLU-like features (tests/python/sklearn_parity.py make-features, noise 1.5) of
# SVM_GROUP_SHAPE="TRAIN TEST DIM" (default CPU "8000 500 256", GPU "50000 1000 8192").
# SVM_GROUP_CLASSES="N0 N1 ..." keeps the first N_c training rows of class c (unbalanced
# classes; TRAIN must give each class enough rows), e.g. SVM_GROUP_SHAPE="48000 500 1024"
# SVM_GROUP_CLASSES="4500 4000 3500 3000 2500 2000 1700 1300 900 600" (24,000 rows).
# SVM_GROUP_GRID=0 skips the grid rows. SVM_GROUP_KEEP=DIR keeps the files and logs.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
BIN="$BUILD/bin"
dev="${SVM_GROUP_DEVICE:-cpu}"
PY="${PYTHON:-/usr/bin/python3}"
if [ "$dev" = gpu ]; then default_shape="50000 1000 8192"; else default_shape="8000 500 256"; fi
read -r n_train n_test dim <<< "${SVM_GROUP_SHAPE:-$default_shape}"
[ -x "$BIN/svm-fit" ] || { echo "svm_group.sh: $BIN/svm-fit is missing (make BUILD=$BUILD all)" >&2; exit 1; }

if [ -n "${SVM_GROUP_KEEP:-}" ]; then
  tmp="$SVM_GROUP_KEEP"
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi
features="${SVM_GROUP_FEATURES:-}"
if [ -z "$features" ]; then
  features="$tmp/features.h5"
  "$PY" tests/python/sklearn_parity.py make-features "$features" --train "$n_train" --test "$n_test" --dim "$dim" \
    --noise 1.5 --seed 11 || exit 1
  if [ -n "${SVM_GROUP_CLASSES:-}" ]; then
    "$PY" - "$features" $SVM_GROUP_CLASSES <<'PY' || exit 1
import sys, h5py, numpy as np
path, want = sys.argv[1], [int(v) for v in sys.argv[2:]]
with h5py.File(path, "r+") as f:
    y = f["/train/labels"][()]
    keep = []
    for c, n in enumerate(want):
        rows = np.flatnonzero(y == c)[:n]
        if len(rows) < n:
            sys.exit("svm_group.sh: class %d has %d training rows, SVM_GROUP_CLASSES asks %d" % (c, len(rows), n))
        keep.append(rows)
    keep = np.sort(np.concatenate(keep))
    x = f["/train/features"][()][keep]
    del f["/train/features"], f["/train/labels"]
    f["/train/features"], f["/train/labels"] = x, y[keep]
PY
    n_train=$(( $(printf '%s+' $SVM_GROUP_CLASSES)0 ))
  fi
fi

# run NAME ARGS...: one svm-fit, its wall time and fit_seconds from --json, its log kept.
declare -A wall fit
run() {
  local name="$1"
  shift
  local t0 t1 line
  t0=$(date +%s.%N)
  line=$("$BIN/svm-fit" --json --features "$features" -o "$tmp/$name.h5" "$@" 2> "$tmp/$name.log" | tail -1)
  local rc=$?
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "svm_group.sh: $name failed:" >&2
    tail -3 "$tmp/$name.log" >&2
    wall[$name]=failed
    fit[$name]=failed
    return
  fi
  wall[$name]=$("$PY" -c "print('%.2f' % ($t1 - $t0))")
  fit[$name]=$("$PY" -c "import json,sys; d=json.loads(sys.argv[1]); print('%.2f' % d.get('fit_seconds', 0))" "$line")
}

same_bits() {  # A.h5 B.h5 -> yes / no (every dataset)
  "$PY" - "$1" "$2" <<'PY' 2>/dev/null || echo "no"
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visit(names.append)
ok = all(a[n][()].tobytes() == b[n][()].tobytes() for n in names if isinstance(a[n], h5py.Dataset))
print("yes" if ok else "no")
PY
}

rows=()
row() {  # LABEL ONE TWO
  local one="$2" two="$3" speedup="-"
  if [ "${wall[$one]}" != failed ] && [ "${wall[$two]}" != failed ]; then
    speedup=$("$PY" -c "print('%.2fx' % (${wall[$one]} / ${wall[$two]}))")
  fi
  rows+=("$(printf '| %-34s | %8s | %8s | %7s | %s |' "$1" "${wall[$one]}" "${wall[$two]}" "$speedup" \
    "$(same_bits "$tmp/$one.h5" "$tmp/$two.h5")")")
}

if [ "$dev" = gpu ]; then
  run fit1 --device gpu
  run fit2 --device gpu --gpus 2
  row "svm-fit, 1 vs 2 GPUs" fit1 fit2
  if [ "${SVM_GROUP_GRID:-1}" != 0 ]; then
    grid=(--cv 5 --C 1,3,10,30 --gamma 0.5x,scale,2x)
    run grid1 --device gpu "${grid[@]}"
    run grid2 --device gpu --gpus 2 "${grid[@]}"
    row "svm-fit --cv 5, 4 C x 3 gamma" grid1 grid2
  fi
else
  run fit1 --device cpu --threads 1
  run fit2 --device cpu --threads 1 --ranks 2
  row "svm-fit, 1 vs 2 processes x 1 thread" fit1 fit2
  if [ "${SVM_GROUP_GRID:-1}" != 0 ]; then
    grid=(--cv 3 --C 1,10 --gamma scale,2x)
    run grid1 --device cpu --threads 1 "${grid[@]}"
    run grid2 --device cpu --threads 1 --ranks 2 "${grid[@]}"
    row "svm-fit --cv 3, 2 C x 2 gamma" grid1 grid2
  fi
fi

echo "svm-fit on a group: $dev, features $features ($n_train x $dim unless given), $(date -u +%Y-%m-%dT%H:%MZ), $(hostname)"
echo "| run                                | 1 rank s | 2 ranks s | speed-up | same bits |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
