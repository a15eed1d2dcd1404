#!/usr/bin/env bash
# bench/stage-timer.sh TOOL ARG... — one pipeline stage under make bench-pipeline, which
# passes it as the pipeline's RUN prefix. Runs the tool with --json and
# appends one line to $STAGE_LOG:
#   {"stage": "ae-train", "wall": s, "summary": {...} | null, "argv": [TOOL, ARG...]}
# (argv lets bench/pipeline_cpu.py run the same stage again on the CPU).
# The tool's own messages still go to stderr; its exit status is kept.
set -uo pipefail
: "${STAGE_LOG:?STAGE_LOG must name the log file}"
tool=$(basename "$1")
json=(--json)
t0=$(date +%s.%N)
summary=$("$@" "${json[@]}")
rc=$?
t1=$(date +%s.%N)
line=$(printf '%s\n' "$summary" | grep '^{' | tail -1)
argv=$("${PYTHON:-/usr/bin/python3}" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@")
printf '{"stage": "%s", "wall": %s, "summary": %s, "argv": %s}\n' "$tool" \
  "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "${line:-null}" "$argv" >> "$STAGE_LOG"
exit $rc
