#!/usr/bin/env bash
# The report's own time: each REPORT executable (a build's bin/report, or a zip packed from
# another commit) run N times on one run folder, interleaved (A B A B …, so that a machine
# shared with other work loads every variant alike), printing per variant the median wall
# time, the median CPU time (user + system, its children included) and the median of each
# phase of its --json summary.
#   bash bench/report_bench.sh RUN_DIR N REPORT...
# Make a small run folder with the tools first, e.g.
#   make pipeline PREBUILT=1 DEVICE=cpu CIFAR10_DIR=… RUN_DIR=/tmp/run DATA_DIR=/tmp/data \
#     TRAIN_LIMIT=2000 TEST_LIMIT=500 EPOCHS=1
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 RUN_DIR N REPORT..." >&2; exit 2; }
run_dir="$1" n="$2"
shift 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$n"); do
  for v in $(seq $#); do
    report="${!v}"
    /usr/bin/time -f "%e %U %S" -o "$out/time" "$report" --run-dir "$run_dir" -o "$out/report-$v" --json -q \
      > "$out/json"
    read -r wall user sys < "$out/time"
    /usr/bin/python3 - "$out/json" "$wall" "$user" "$sys" >> "$out/rows-$v" <<'PY'
import json, sys
phases = json.load(open(sys.argv[1]))["phases"]
wall, user, system = map(float, sys.argv[2:5])
print(json.dumps({"wall": wall, "cpu": user + system, **phases}))
PY
  done
done
v=0
for report in "$@"; do
  v=$((v + 1))
  /usr/bin/python3 - "$out/rows-$v" "$report" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
keys = ["wall", "cpu", "startup", "read", "compute", "hash", "write", "other"]
med = {k: statistics.median(r[k] for r in rows) for k in keys}
print(f"{sys.argv[2]}: " + ", ".join(f"{k} {med[k]:.2f}" for k in keys)
      + f"  (median of {len(rows)}; wall {min(r['wall'] for r in rows):.2f}–{max(r['wall'] for r in rows):.2f})")
PY
done
