#!/usr/bin/env bash
# bench/stage-timer.sh TOOL ARG... — one pipeline stage under make bench-pipeline, which
# passes it as the pipeline's RUN prefix. Runs the tool with --json and
# appends one line to $STAGE_LOG:
#   {"stage": "ae-train", "wall": s, "summary": {...} | null, "argv": [TOOL, ARG...]}
# (argv lets bench/pipeline_cpu.py run the same stage again on the CPU).
# The tool's own messages still go to stderr; its exit status is kept.
# The JSON is written by bash itself: a Python started after every stage only to encode argv
# would be counted in the table's "make overhead".
set -uo pipefail
: "${STAGE_LOG:?STAGE_LOG must name the log file}"

# json_string VALUE: VALUE as a JSON string literal in $REPLY — backslash, double quote and
# every control character (U+0001..U+001F; argv cannot hold U+0000) escaped; other bytes,
# UTF-8 included, pass through. printf -v and expansions only: no process per argument.
json_string() {
  local s=$1 code oct char esc
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  if [[ $s == *[[:cntrl:]]* ]]; then
    for ((code = 1; code < 32; code++)); do
      printf -v oct '%03o' "$code"
      printf -v char "\\$oct"
      case $code in
        9) esc='\t' ;; 10) esc='\n' ;; 13) esc='\r' ;;
        *) printf -v esc '\\u%04x' "$code" ;;
      esac
      s=${s//"$char"/$esc}
    done
  fi
  REPLY="\"$s\""
}

# json_array ARG...: the arguments as a JSON array of strings in $REPLY.
json_array() {
  local out="" arg
  for arg in "$@"; do
    json_string "$arg"
    out+="${out:+, }$REPLY"
  done
  REPLY="[$out]"
}

json_string "${1##*/}"
stage=$REPLY
json_array "$@"
argv=$REPLY
# EPOCHREALTIME: seconds with microseconds, read without starting a process (its decimal
# mark follows the locale, so only the digits are kept).
t0=${EPOCHREALTIME//[^0-9]/}
summary=$("$@" --json)
rc=$?
t1=${EPOCHREALTIME//[^0-9]/}
wall_ms=$(( (t1 - t0 + 500) / 1000 ))
printf -v wall '%d.%03d' $((wall_ms / 1000)) $((wall_ms % 1000))
# The summary is the tool's last line that starts with "{".
line=
while IFS= read -r out_line; do
  [[ $out_line == '{'* ]] && line=$out_line
done <<< "$summary"
printf '{"stage": %s, "wall": %s, "summary": %s, "argv": %s}\n' "$stage" "$wall" "${line:-null}" "$argv" >> "$STAGE_LOG"
exit $rc
