#!/usr/bin/env bats
# The report served by a process that imported its libraries first (tools/report_lib/server.py,
# `make pipeline`'s report stage): what the asking `report` gets back is what it would have
# made itself — files, stdout, stderr, exit status, its folder and umask; its signals reach the
# served report; it runs the report itself whenever the server is missing or not the same
# program and environment; an idle server ends with the process it watches.
#
# A server serves one report and then ends: one still alive after a report ran means that
# report ran by itself.

load helpers

setup_file() {
  export RUNS="$BATS_FILE_TMPDIR/runs"
  "$PYTHON" "$REPO_ROOT/tests/helpers/fake_run.py" --out "$RUNS/full" --epochs 4
}

setup() {
  [ -x "$BIN/report" ] || skip "report not built"
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/report-server.XXXXXX")"
  WATCHED= NAME=
}

teardown() {
  [ -n "$WATCHED" ] && kill "$WATCHED" 2> /dev/null
  [ -n "$NAME" ] && pkill -f -- "--serve $NAME " 2> /dev/null  # and a report it still runs
  rm -rf "$TMP"
}

# Starts `report --serve` on a fresh name, watching a sleep, and waits until it listens:
# sets NAME, SERVER and WATCHED.
start_server() {
  NAME="cae-report-test-$$-$RANDOM$RANDOM"
  sleep 600 &
  WATCHED=$!
  "$BIN/report" --serve "$NAME" "$WATCHED" < /dev/null > /dev/null 2>&1 &
  SERVER=$!
  # Listening (its abstract socket is in /proc/net/unix) before a report asks: one that asks
  # sooner finds no server and runs by itself, as it should.
  local _
  for _ in $(seq 300); do grep -q " @$NAME\$" /proc/net/unix && return 0; sleep 0.1; done
  echo "the server never listened"
  return 1
}

# Succeeds once the server runs the report whose stderr is the file $1: it has taken that
# report's streams (30 s at most: its imports on a loaded machine come first).
serving() {
  local _
  for _ in $(seq 300); do [ "$(readlink "/proc/$SERVER/fd/2")" = "$1" ] && return 0; sleep 0.1; done
  return 1
}

# The report's documents without the line that names the minute they were made.
undated() {
  grep -v -e 'UTC' "$1"
}

@test "a served report is the one report makes itself: files, stdout, stderr, status, folder and umask" {
  start_server
  cp -r "$RUNS/full" "$TMP/run"
  # Relative paths from another folder than the server's, and a umask of its own.
  (cd "$TMP" && umask 027 && REPORT_SERVER="$NAME" "$BIN/report" --run-dir run -o out-served --json \
    > served.out 2> served.err; echo $? > served.rc)
  process_ends "$SERVER" || { echo "the server is still waiting: the report ran by itself"; false; }
  (cd "$TMP" && umask 027 && "$BIN/report" --run-dir run -o out-plain --json > plain.out 2> plain.err; echo $? > plain.rc)
  [ "$(cat "$TMP/served.rc")" -eq 0 ] && [ "$(cat "$TMP/plain.rc")" -eq 0 ]
  # stderr: "report: wrote out-served/index.html (N plots, …) in S s", as the plain run's.
  [ "$(wc -l < "$TMP/served.err")" -eq 1 ] && grep -q '^report: wrote out-served/index.html (' "$TMP/served.err"
  [ "$(sed -E 's/ in [0-9.]+ s$//; s/out-served/X/' "$TMP/served.err")" = "$(sed -E 's/ in [0-9.]+ s$//; s/out-plain/X/' "$TMP/plain.err")" ]
  # The same pictures, pixel for pixel, and the same documents.
  local f n=0
  for f in "$TMP"/out-plain/*.png; do
    cmp "$f" "$TMP/out-served/${f##*/}" || { echo "${f##*/} differs"; false; }
    n=$((n + 1))
  done
  [ "$n" -ge 5 ]
  [ "$(ls "$TMP/out-served")" = "$(ls "$TMP/out-plain")" ]
  diff <(undated "$TMP/out-plain/index.html" | sed 's#out-plain#X#g') <(undated "$TMP/out-served/index.html" | sed 's#out-served#X#g')
  diff <(undated "$TMP/out-plain/report.md" | sed 's#out-plain#X#g') <(undated "$TMP/out-served/report.md" | sed 's#out-served#X#g')
  cmp "$TMP/out-plain/summary.json" "$TMP/out-served/summary.json"
  # The umask reached the served report's files; stdout is its --json line.
  [ "$(stat -c %a "$TMP/out-served/index.html")" = 640 ]
  "$PYTHON" - "$TMP/served.out" "$TMP/plain.out" <<'PY'
import json, sys
served, plain = (json.loads(open(p).read().splitlines()[-1]) for p in sys.argv[1:])
assert served["output"] == "out-served" and plain["output"] == "out-plain", (served["output"], plain["output"])
for d in (served, plain):
    del d["output"], d["seconds"], d["phases"]
assert served == plain, (served, plain)
PY
}

@test "a served report's usage errors, runtime errors, --help and --version come back as they would" {
  local args
  for args in "--run-dir" "--run-dir $TMP/nothing-here" "--help" "--version" "--info $RUNS/full/svm.h5"; do
    start_server
    # shellcheck disable=SC2086  # the words of $args, on purpose
    run env REPORT_SERVER="$NAME" "$BIN/report" $args
    process_ends "$SERVER" || { echo "report $args ran by itself"; false; }
    local served_status=$status served_output=$output
    # shellcheck disable=SC2086
    run "$BIN/report" $args
    [ "$served_status" -eq "$status" ] || { echo "report $args: $served_status served, $status itself"; false; }
    [ "$served_output" = "$output" ] || { echo "report $args:"; diff <(echo "$served_output") <(echo "$output"); false; }
    kill "$WATCHED"
  done
}

@test "SIGTERM or SIGINT to the asking report interrupts the served one: 143 or 130, no report, nothing left behind" {
  # A features file that is a FIFO nobody writes: the report waits on it until the signal.
  cp "$RUNS/full/model.h5" "$TMP/"
  mkfifo "$TMP/features.h5"
  local sig expected client
  for sig in TERM INT; do
    start_server
    # The server, a background job of this shell as of make's, started with SIGINT ignored;
    # the asker (a subshell: SIGINT as in the foreground) passes it on.
    (exec env REPORT_SERVER="$NAME" "$BIN/report" --model "$TMP/model.h5" --features "$TMP/features.h5" \
      -o "$TMP/out" 2> "$TMP/err") &
    client=$!
    serving "$TMP/err" || { echo "SIG$sig: the server never took the report"; false; }
    kill -"$sig" "$client"
    wait "$client" && status=0 || status=$?
    expected=$([ "$sig" = TERM ] && echo 143 || echo 130)
    [ "$status" -eq "$expected" ] || { cat "$TMP/err"; echo "SIG$sig: status $status"; false; }
    grep -qx "report: interrupted; no report written" "$TMP/err"
    process_ends "$SERVER"
    [ ! -e "$TMP/out" ] && [ -z "$(find "$TMP" -name '.out.tmp-*')" ]
    kill "$WATCHED"
  done
}

@test "a server that dies mid-report: the asking report says so and fails" {
  start_server
  cp "$RUNS/full/model.h5" "$TMP/"
  mkfifo "$TMP/features.h5"
  REPORT_SERVER="$NAME" "$BIN/report" --model "$TMP/model.h5" --features "$TMP/features.h5" -o "$TMP/out" \
    2> "$TMP/err" &
  local client=$!
  serving "$TMP/err" || { echo "the server never took the report"; false; }
  kill -KILL "$SERVER"
  wait "$client" && status=0 || status=$?
  [ "$status" -eq 1 ]
  [ "$(cat "$TMP/err")" = "report: error: the report server ended without an exit status" ]
}

@test "a peer that connects and says nothing holds the server 5 s at most" {
  start_server
  # Connects as soon as the server listens, then says nothing for a minute.
  "$PYTHON" -c 'import socket, sys, time
for _ in range(300):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\0" + sys.argv[1])
        break
    except OSError:
        s.close()
        time.sleep(0.05)
open(sys.argv[2], "w").close()
time.sleep(60)' "$NAME" "$TMP/connected" &
  local silent=$! _
  for _ in $(seq 200); do [ -e "$TMP/connected" ] && break; sleep 0.05; done
  [ -e "$TMP/connected" ]
  run env REPORT_SERVER="$NAME" "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/out"
  kill "$silent"
  [ "$status" -eq 0 ] && [ -s "$TMP/out/index.html" ]
  process_ends "$SERVER" || { echo "the report ran by itself"; false; }
}

@test "another environment, no server by that name, a server gone: the report runs by itself; an idle server ends with its process" {
  start_server
  # A variable the server's libraries did not see as they loaded: declined.
  run env REPORT_SERVER="$NAME" MPLBACKEND=svg "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/a"
  [ "$status" -eq 0 ] && [ -s "$TMP/a/index.html" ]
  sleep 0.5
  kill -0 "$SERVER" || { echo "the server served another environment"; false; }
  # No server by that name.
  run env REPORT_SERVER="cae-report-test-none-$$" "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/b"
  [ "$status" -eq 0 ] && [ -s "$TMP/b/index.html" ]
  # The watched process ends: so does the idle server, and the name is free again.
  kill "$WATCHED"
  process_ends "$SERVER"
  run env REPORT_SERVER="$NAME" "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/c"
  [ "$status" -eq 0 ] && [ -s "$TMP/c/index.html" ]
  # --serve's own usage.
  run "$BIN/report" --serve "$NAME"
  [ "$status" -eq 2 ] && [ "$output" = "usage: report --serve NAME PID" ]
}
