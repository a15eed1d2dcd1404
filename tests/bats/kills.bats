#!/usr/bin/env bats
# Kills (issue 8): ae-train SIGKILLed at 10 random points of a small CPU run and resumed
# each time ends bit-identical to an uninterrupted run; SIGKILL of any tool never leaves a
# partial file under its final output name (the rename in AtomicOutput::commit is atomic:
# the name holds a complete file or nothing). Delays come from a fixed seed and are printed,
# so a failure can be replayed.

load helpers

BADH5="$REPO_ROOT/tests/helpers/badh5.py"

setup_file() {
  export KILL_DIR="$BATS_FILE_TMPDIR/kills"
  mkdir -p "$KILL_DIR"
  "$PYTHON" "$BADH5" dataset "$KILL_DIR/data.h5" --train 40 --test 20
  "$PYTHON" "$BADH5" features "$KILL_DIR/features.h5" --train 600 --test 300 --dim 256
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/kills.XXXXXX")"
  SAN_BEFORE=$(sanitizer_reports | wc -l)
}

teardown() {
  rm -rf "$TMP"
  local now
  now=$(sanitizer_reports | wc -l)
  if [ "$now" -ne "$SAN_BEFORE" ]; then
    sanitizer_reports | tail -n $((now - SAN_BEFORE)) | while read -r f; do head -30 "$f" >&2; done
    return 1
  fi
}

sanitizer_reports() {
  [ -n "${SANITIZER_LOG_DIR:-}" ] && [ -d "$SANITIZER_LOG_DIR" ] && ls -1tr "$SANITIZER_LOG_DIR"/* 2>/dev/null
  return 0
}

need() {
  for t in "$@"; do [ -x "$BIN/$t" ] || skip "$t is not built yet"; done
}

# A random number of milliseconds, uniform in [0, $1), from bash's $RANDOM.
random_ms() { echo $(((RANDOM * 32768 + RANDOM) % $1)); }

# Milliseconds as seconds, for sleep.
ms_to_s() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# Milliseconds since the epoch.
now_ms() { date +%s%3N; }

# The file is absent, or a complete HDF5 file of the given format (never a partial one).
absent_or_complete() {
  local file="$1" format="$2"
  [ -e "$file" ] || return 0
  "$PYTHON" - "$file" "$format" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["format"] == sys.argv[2], f.attrs["format"]
    def touch(name, obj):
        if isinstance(obj, h5py.Dataset):
            obj[...]  # every byte of every dataset reads back
    f.visititems(touch)
PY
}

@test "ae-train SIGKILLed at 10 random points and resumed each time ends bit-identical to an uninterrupted run" {
  need ae-train
  epochs=10
  base=(--data "$KILL_DIR/data.h5" --train-limit 12 --batch-size 4 --seed 3 --threads 2 -q)
  opts=("${base[@]}" --epochs $epochs)
  # Start-up (reading and hashing the data, building the model, writing a model file) is
  # timed on its own: on a slow or busy machine it can outweigh ten epochs of 12 images,
  # and kills timed from a per-epoch average would then all land before the first epoch.
  t0=$(now_ms)
  "$BIN/ae-train" "${base[@]}" --epochs 0 -o "$TMP/untrained.h5"
  startup_ms=$(($(now_ms) - t0 + 1))
  t0=$(now_ms)
  "$BIN/ae-train" "${opts[@]}" -o "$TMP/ref.h5"
  epoch_ms=$(( ($(now_ms) - t0 - startup_ms) / epochs ))
  [ "$epoch_ms" -ge 1 ] || epoch_ms=1
  echo "uninterrupted run: start-up $startup_ms ms, then $epoch_ms ms per epoch"
  RANDOM=2026
  epochs_seen="" kills=0 attempts=0 done_epochs=0
  while [ "$kills" -lt 10 ]; do
    attempts=$((attempts + 1))
    [ "$attempts" -le 40 ] || { echo "only $kills of 10 kills landed in 40 attempts"; return 1; }
    # Every other kill lands during start-up; the others past it, mid-epoch or while a
    # checkpoint is written. A resumed run restarts at its last finished epoch. Early on a
    # kill may let up to 2 epochs finish; near the end at most half of one, so all 10 kills
    # land before the run is complete (see the window below).
    # The long window only with 6 epochs to spare: if the load on the machine drops, epochs
    # run up to twice as fast as measured, and 2.5 measured epochs must still not finish the run.
    remaining=$((epochs - done_epochs))
    window=$(( remaining > 6 ? epoch_ms * 5 / 2 : epoch_ms / 4 + 1 ))
    if [ $((attempts % 2)) -eq 1 ]; then
      delay=$(ms_to_s "$(random_ms "$startup_ms")")
    else
      delay=$(ms_to_s $((startup_ms + $(random_ms "$window"))))
    fi
    ASAN_OPTIONS="$KILLED_ASAN_OPTIONS" "$BIN/ae-train" "${opts[@]}" --resume -o "$TMP/m.h5" &
    pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null || true
    code=0
    wait "$pid" 2>/dev/null || code=$?
    absent_or_complete "$TMP/m.h5" ae-model
    done_epochs=0
    [ -f "$TMP/m.h5" ] && done_epochs=$("$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1]).attrs['epochs_done'])" "$TMP/m.h5")
    echo "attempt $attempts: killed after ${delay}s: exit $code, checkpoint has $done_epochs epochs"
    if [ "$done_epochs" -ge "$epochs" ]; then
      # The run finished before its kill (the machine sped up since the timing runs): the
      # chain of kills and resumes so far must still have given the uninterrupted result;
      # then it starts again from nothing, instead of failing on timing.
      same_model "$TMP/ref.h5" "$TMP/m.h5"
      rm -f "$TMP/m.h5"
      continue
    fi
    if [ "$code" -eq 137 ]; then
      kills=$((kills + 1))
      epochs_seen="$epochs_seen $done_epochs"
    fi
  done
  "$BIN/ae-train" "${opts[@]}" --resume -o "$TMP/m.h5"
  same_model "$TMP/ref.h5" "$TMP/m.h5"
  # The kills must have hit more than one stage of the run.
  [ "$(tr ' ' '\n' <<<"$epochs_seen" | sort -u | grep -c .)" -ge 2 ]
}

# Two model files hold bit-identical weights, histories and optimizer state (the wall-clock
# epoch times aside).
same_model() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
assert any(n.endswith("conv1/weight") for n in names), names
for n in names:
    if n == "history/epoch_seconds":  # wall-clock time, not a result
        continue
    x, y = a[n][...], b[n][...]
    assert x.dtype == y.dtype and x.shape == y.shape, n
    assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), f"{n} differs after 10 kills and resumes"
for k in ("epochs_done", "optimizer_step", "lr_current", "plateau_best", "plateau_bad_epochs"):
    assert a.attrs[k] == b.attrs[k], k
PY
}

# Runs TOOL ARGS... -o OUT at least six times, SIGKILLing it at random points of its usual
# runtime; after each kill OUT is absent or complete. At least one kill must land before the
# commit: on a machine whose load changes between the timing run and the kills, all six can
# come too late, so while none has landed early the window is halved and another run is
# killed (up to 14 runs), instead of failing on timing.
kill_at_random_points() {
  local format="$1" out="$2"
  shift 2
  local t0 run_ms killed_early=0 window i=0
  # Timed on a second run: the first one reads its input from a cold page cache and can
  # take twice as long, which would put most kills after the end.
  "$@" -q -o "$out"
  rm -f "$out"
  t0=$(now_ms)
  "$@" -q -o "$out"
  run_ms=$(( $(now_ms) - t0 ))
  rm -f "$out"
  window=$((run_ms * 9 / 10 + 1))
  while [ "$i" -lt 6 ] || { [ "$killed_early" -eq 0 ] && [ "$i" -lt 14 ]; }; do
    i=$((i + 1))
    [ "$i" -le 6 ] || window=$((window / 2 + 1))
    delay=$(ms_to_s "$(random_ms "$window")")
    ASAN_OPTIONS="$KILLED_ASAN_OPTIONS" "$@" -q -o "$out" &
    pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null || true
    code=0
    wait "$pid" || code=$?
    echo "$(basename "$1") killed after ${delay}s of ~${run_ms}ms: exit $code, output $([ -e "$out" ] && echo complete || echo absent)"
    absent_or_complete "$out" "$format"
    [ "$code" -eq 137 ] && [ ! -e "$out" ] && killed_early=$((killed_early + 1))
    rm -f "$out"
  done
  [ "$killed_early" -ge 1 ]
}

@test "SIGKILL of cifar-convert at random points: never a partial dataset" {
  need cifar-convert
  RANDOM=11
  kill_at_random_points image-dataset "$TMP/c.h5" "$BIN/cifar-convert" --input "$(cifar_fixture)" --train-limit 30000
}

@test "SIGKILL of ae-train during its first epoch or first checkpoint: no model" {
  need ae-train
  # Before the first checkpoint is committed there is nothing under the final name; the
  # hidden temporary file of the checkpoint being written may remain (SIGKILL cannot be caught).
  # Far more epochs than the test waits for, so the tool is still running when the kill
  # comes however loaded the machine is (with 3 it had sometimes finished already).
  ASAN_OPTIONS="$KILLED_ASAN_OPTIONS" "$BIN/ae-train" -q --data "$KILL_DIR/data.h5" --train-limit 12 --epochs 100000 --batch-size 4 --threads 2 -o "$TMP/m.h5" &
  pid=$!
  for _ in $(seq 1 3000); do
    ls -A "$TMP" | grep -q '\.m\.h5\.tmp' && break
    sleep 0.005
  done
  kill -9 "$pid" 2>/dev/null || true  # the code check below says whether it was still running
  code=0
  wait "$pid" || code=$?
  [ "$code" -eq 137 ]
  [ ! -e "$TMP/m.h5" ] || absent_or_complete "$TMP/m.h5" ae-model
}

@test "SIGKILL of ae-encode at random points: never partial features" {
  need ae-train ae-encode
  "$BIN/ae-train" -q --data "$KILL_DIR/data.h5" --train-limit 4 --epochs 1 --batch-size 4 --threads 2 -o "$TMP/m.h5"
  RANDOM=12
  kill_at_random_points ae-features "$TMP/f.h5" "$BIN/ae-encode" --model "$TMP/m.h5" --data "$KILL_DIR/data.h5"
}

@test "SIGKILL of svm-fit and svm-eval at random points: never a partial model or evaluation" {
  need svm-fit svm-eval
  RANDOM=13
  kill_at_random_points svm-model "$TMP/s.h5" "$BIN/svm-fit" --features "$KILL_DIR/features.h5"
  "$BIN/svm-fit" -q --features "$KILL_DIR/features.h5" -o "$TMP/svm.h5"
  RANDOM=14
  kill_at_random_points svm-eval "$TMP/e.h5" "$BIN/svm-eval" --model "$TMP/svm.h5" --features "$KILL_DIR/features.h5" \
    --decision-values
}
