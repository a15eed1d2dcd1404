#!/usr/bin/env bash
# The training step of two builds, stage by stage, in one run on one GPU: each build's
# step profiler (gpu_tests' BenchGpu with AE_BENCH_PROFILE_ONLY=1: CUDA events around every
# stage of one step, median of 20, and the graph replay of the whole step), run A B A B so
# drift of the machine hits both alike. Prints, per precision, the best of the repeats of
# every stage for A and B with TFLOP/s and the ratio, then the tiles each build timed its
# convolutions to. The per-layer table of docs/BENCHMARKS.md comes from here.
#   bench/step-profile-compare.sh BUILD_A BUILD_B [REPEATS=2]   (each BUILD has tests/gpu_tests)
# env: AE_BENCH_PROFILE_BATCH (256), AE_BENCH_ARCHS (the seed model), OUT_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
A="${1:?build A}" B="${2:?build B}" R="${3:-2}"
PY="${BENCH_PYTHON:-python3}"
OUT_DIR="${OUT_DIR:-/tmp/step-profile-compare}"
mkdir -p "$OUT_DIR"
export AE_BENCH_PROFILE_ONLY=1 AE_BENCH_ARCHS="${AE_BENCH_ARCHS:-3x32x32:256,128}"
echo "step-profile-compare on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  "($(date -u +%Y-%m-%dT%H:%MZ)), batch ${AE_BENCH_PROFILE_BATCH:-256}: A=$A B=$B"
for r in $(seq "$R"); do
  for side in A B; do
    build="${!side}"
    "$build/tests/gpu_tests" --gtest_also_run_disabled_tests --gtest_filter=BenchGpu.DISABLED_TrainEpochAndEncode \
      > "$OUT_DIR/profile-$side-$r.log" 2>&1 || { echo "profile $side failed, see $OUT_DIR/profile-$side-$r.log" >&2; tail -5 "$OUT_DIR/profile-$side-$r.log" >&2; }
  done
done
"$PY" - "$OUT_DIR" "$R" <<'PYEOF'
import re, sys, collections
out, R = sys.argv[1], int(sys.argv[2])
# best[side][precision][stage] = (ms, tflops); tiles[side][precision] = text
best = {s: collections.defaultdict(dict) for s in "AB"}
order = collections.defaultdict(list)
tiles = {s: {} for s in "AB"}
for side in "AB":
    for r in range(1, R + 1):
        try:
            text = open(f"{out}/profile-{side}-{r}.log").read()
        except OSError:
            continue
        prec = None
        for line in text.splitlines():
            m = re.match(r"per-kernel times, .*?(fp32|bf16)", line)
            if m:
                prec = m.group(1)
                continue
            m = re.match(r"  (.+?)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)", line)
            if prec and m and m.group(1).strip() != "stage":
                name, ms, tf = m.group(1).strip(), float(m.group(2)), float(m.group(4))
                if name not in order[prec]:
                    order[prec].append(name)
                old = best[side][prec].get(name)
                if old is None or ms < old[0]:
                    best[side][prec][name] = (ms, tf)
            m = re.match(r"  tiles: (.*)", line)
            if prec and m:
                tiles[side][prec] = m.group(1)
for prec in order:
    print(f"\n{prec}: stage, best of {R} (ms, TFLOP/s) | A | B | B/A")
    for name in order[prec]:
        a, b = best["A"][prec].get(name), best["B"][prec].get(name)
        fa = f"{a[0]:.4f} ({a[1]:.0f})" if a else "-"
        fb = f"{b[0]:.4f} ({b[1]:.0f})" if b else "-"
        ratio = f"{b[0] / a[0]:.3f}" if a and b and a[0] > 0 else "-"
        print(f"  {name:34s} {fa:>18s} {fb:>18s} {ratio:>7s}")
    for side in "AB":
        if prec in tiles[side]:
            print(f"  tiles {side}: {tiles[side][prec]}")
PYEOF
