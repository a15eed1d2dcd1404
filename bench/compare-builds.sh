#!/usr/bin/env bash
# Two builds of the toolkit, timed in one run on one GPU: the regression check of a change
# (docs/BENCHMARKS.md records its results). For each build, alternating A B A B so drift of
# the machine hits both alike: ae-train one epoch after a warm-up epoch (the second epoch's
# img/s, training only) at bf16 batch 256 and fp32 batch 64, and ae-encode of 60,000 images
# (the tool's own encode time). Prints one table: best of the repeats and the ratio B/A.
#   bench/compare-builds.sh BUILD_A BUILD_B [REPEATS=2]      (each BUILD has bin/ae-train, bin/ae-encode)
set -uo pipefail
cd "$(dirname "$0")/.."
A="${1:?build A}" B="${2:?build B}" R="${3:-2}"
PY="${BENCH_PYTHON:-python3}"
OUT_DIR="${OUT_DIR:-/tmp/compare-builds}"
mkdir -p "$OUT_DIR"
data="$OUT_DIR/cifar10.h5"
[ -f "$data" ] || "$PY" bench/make_synthetic_cifar.py "$data" || exit 1
echo "compare-builds on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) ($(date -u +%Y-%m-%dT%H:%MZ)): A=$A B=$B"
results="$OUT_DIR/results.tsv"
: > "$results"
for r in $(seq "$R"); do
  for side in A B; do
    build="${!side}"
    for cfg in "bf16 256" "fp32 64"; do
      set -- $cfg
      log="$OUT_DIR/train-$side-$1-$2-$r.log"
      "$build/bin/ae-train" --data "$data" -o "$OUT_DIR/model-$side.h5" --device gpu --precision "$1" --batch-size "$2" \
        --epochs 2 --seed 1 > "$log" 2>&1 || { echo "ae-train failed ($side $cfg), see $log" >&2; tail -3 "$log" >&2; continue; }
      ips=$(sed -n 's/.*epoch 2\/2:.* \([0-9][0-9.]*\) img\/s.*/\1/p' "$log" | tail -1)
      echo -e "$side\ttrain $1 batch $2 (s/epoch of 50,000)\t$("$PY" -c "print(round(50000/$ips, 4))")" >> "$results"
    done
    j=$("$build/bin/ae-encode" --model "$OUT_DIR/model-$side.h5" --data "$data" -o "$OUT_DIR/features-$side.h5" \
        --device gpu --batch-size 1024 --json 2> "$OUT_DIR/encode-$side-$r.log" | tail -1)
    echo -e "$side\tencode 60,000 (s)\t$("$PY" -c "import json,sys; j=json.loads(sys.argv[1]); print(round(j['images']/j['images_per_second'], 4))" "$j")" >> "$results"
    rm -f "$OUT_DIR/features-$side.h5"
  done
done
"$PY" - "$results" <<'PYEOF'
import sys, collections
best = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    side, what, v = line.rstrip("\n").split("\t")
    best[what][side] = min(float(v), best[what].get(side, float("inf")))
print(f"{'':40} {'A':>9} {'B':>9} {'B/A':>7}")
for what, d in best.items():
    a, b = d.get("A"), d.get("B")
    ratio = f"{b / a:7.3f}" if a and b else "      -"
    print(f"{what:40} {a if a else '-':>9} {b if b else '-':>9} {ratio}")
PYEOF
