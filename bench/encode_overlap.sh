#!/usr/bin/env bash
# ae-encode as a whole tool, two builds compared (the overlap of reading, encoding and
# writing: kernels/ae/encode_pipeline.h, docs/DECISIONS.md "ae-encode overlaps"). Each build
# encodes the same dataset with one model, alternating A B A B so the machine's drift hits
# both; per run: the wall time of the process (start to exit, as a shell sees it) and the
# tool's --json phases. Prints every run and the best wall time of each build, then checks
# that the two builds' outputs hold the same datasets bit for bit (and the same attributes
# but the timings and provenance).
#   bench/encode_overlap.sh BUILD_A BUILD_B [REPEATS=3]
#   DEVICE (gpu), THREADS (CPU threads; 2), TRAIN (50000), TEST (10000), OUT_DIR (/tmp/encode-overlap)
#   EXTRA (more ae-encode options, e.g. "--flip --shifts 2")
# The model is an untrained one of the default architecture (8,192 features per image):
# the weights change no timing. The dataset is bench/make_synthetic_cifar.py's random pixels.
set -euo pipefail
cd "$(dirname "$0")/.."
A="${1:?build A (holds bin/ae-encode)}" B="${2:?build B}" R="${3:-3}"
PY="${BENCH_PYTHON:-python3}"
DEVICE="${DEVICE:-gpu}" THREADS="${THREADS:-2}" TRAIN="${TRAIN:-50000}" TEST="${TEST:-10000}"
OUT_DIR="${OUT_DIR:-/tmp/encode-overlap}"
read -r -a extra <<< "${EXTRA:-}"
mkdir -p "$OUT_DIR"
data="$OUT_DIR/data-$TRAIN-$TEST.h5" model="$OUT_DIR/model.h5"
[ -f "$data" ] || "$PY" bench/make_synthetic_cifar.py "$data" --train "$TRAIN" --test "$TEST"
[ -f "$model" ] || "$A/bin/ae-train" --quiet --device cpu --data "$data" --epochs 0 -o "$model"
threads=()
[ "$DEVICE" = cpu ] && threads=(--threads "$THREADS")
results="$OUT_DIR/results.tsv"
: > "$results"
# One warm-up run: the page cache holds the inputs for every timed run alike.
"$A/bin/ae-encode" --quiet --device "$DEVICE" ${threads[@]+"${threads[@]}"} ${extra[@]+"${extra[@]}"} --model "$model" --data "$data" \
  -o "$OUT_DIR/warm.h5"
rm -f "$OUT_DIR/warm.h5"
for r in $(seq "$R"); do
  for side in A B; do
    build="${!side}" out="$OUT_DIR/features-$side.h5"
    rm -f "$out"
    start=$(date +%s.%N)
    "$build/bin/ae-encode" --quiet --json --device "$DEVICE" ${threads[@]+"${threads[@]}"} ${extra[@]+"${extra[@]}"} --model "$model" \
      --data "$data" -o "$out" > "$OUT_DIR/run-$side-$r.json"
    end=$(date +%s.%N)
    "$PY" - "$side" "$r" "$start" "$end" "$OUT_DIR/run-$side-$r.json" >> "$results" <<'PY'
import json, sys
side, r, start, end, path = sys.argv[1:]
j = json.load(open(path))
p = j["phases"]
print(side, r, f"{float(end) - float(start):.3f}", f"io_read={j['io_read_seconds']:.3f} io_write={j['io_write_seconds']:.3f}" if "io_read_seconds" in j else "io: -",
      " ".join(f"{k}={p[k]:.3f}" for k in ("startup", "read", "hash", "compute", "write", "other", "total")), sep="\t")
PY
  done
done
echo "ae-encode, $DEVICE, $((TRAIN + TEST)) images ${EXTRA:-}: A=$A B=$B ($(date -u +%Y-%m-%dT%H:%MZ))"
echo -e "build\trun\twall_s\tI/O thread busy (s; B only)\tphases (s; B: the main thread's, read/write = its waits for the I/O thread)"
cat "$results"
"$PY" - "$results" <<'PY'
import sys
best = {}
for line in open(sys.argv[1]):
    side, _, wall = line.split("\t")[:3]
    best[side] = min(best.get(side, 1e9), float(wall))
print(f"best wall: A {best['A']:.3f} s, B {best['B']:.3f} s, B/A {best['B'] / best['A']:.3f}")
PY
"$PY" - "$OUT_DIR/features-A.h5" "$OUT_DIR/features-B.h5" <<'PY'
import sys, h5py, numpy as np
timings = {"seconds", "images_per_second", "created_at", "created_by", "params", "inputs"}
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
def walk(f):
    out = {}
    f.visititems(lambda name, obj: out.__setitem__(name, obj) if isinstance(obj, h5py.Dataset) else None)
    return out
da, db = walk(a), walk(b)
assert sorted(da) == sorted(db), (sorted(da), sorted(db))
for name in da:
    x, y = da[name][...], db[name][...]
    assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
for key in set(a.attrs) | set(b.attrs):
    if key not in timings:
        assert key in a.attrs and key in b.attrs and np.array_equal(a.attrs[key], b.attrs[key]), key
print(f"outputs: the same {len(da)} datasets bit for bit ({', '.join(sorted(da))})")
PY
