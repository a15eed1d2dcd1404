#!/usr/bin/env bats
# svm-fit on SIGUSR1/SIGTERM (docs/RELIABILITY.md, "Preemption"): the cross-validation's
# (fold, gamma) cells and the probability folds stop between units with exit 75 and
# <-o>.resume.h5; --resume ends with the model of an uninterrupted run.

load helpers

PARITY="$REPO_ROOT/tests/python/sklearn_parity.py"
GRID=(--cv 3 --C 1,10,100 --gamma 0.5x,scale,2x --threads 1 --device cpu)

setup_file() {
  export PRE_DIR="$BATS_FILE_TMPDIR/svm_preempt"
  mkdir -p "$PRE_DIR"
  # 1,500 rows of 128 features, 10 classes: a (fold, gamma) cell takes a fraction of a second.
  "$PYTHON" "$PARITY" make-features "$PRE_DIR/features.h5" --train 1500 --test 100 --dim 128 --noise 1.5 --seed 5
  # 5,000 rows of 256: a probability fold takes a fraction of a second too.
  "$PYTHON" "$PARITY" make-features "$PRE_DIR/big.h5" --train 5000 --test 100 --dim 256 --noise 1.5 --seed 5
}

setup() {
  command -v script >/dev/null || skip "script(1) (util-linux) is not installed"
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/svm_preempt.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# Every dataset of $1 byte-equal in $2, every attribute equal but the wall-clock times and
# the provenance of the run (its time, command line and input paths).
assert_same_svm_model() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names, others = [], []
a.visit(lambda n: names.append(n))
b.visit(lambda n: others.append(n))
assert names == others, (names, others)
datasets = [n for n in names if isinstance(a[n], h5py.Dataset)]
assert len(datasets) >= 10, datasets
for n in datasets:
    x, y = np.asarray(a[n][()]), np.asarray(b[n][()])
    assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), f"{n} differs after resume"
skip = {"created_at", "params", "inputs", "fit_seconds", "seconds", "probability_seconds"}
for n in ["/"] + names:
    for k, v in a[n].attrs.items():
        if k in skip:
            continue
        assert k in b[n].attrs and str(v) == str(b[n].attrs[k]), f"attribute {k} of {n} differs after resume"
PY
}

# The number of finished units of the resume file $1 under $2 (cv or probability).
resume_units() {
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1]); print(len(f[sys.argv[2]+'/units']) if sys.argv[2]+'/units' in f else 0)" "$1" "$2"
}

# Runs svm-fit --features $FEATURES (default features.h5) "$@" -o $TMP/m.h5 on a terminal
# (script(1): its progress bars are drawn, so a test can wait for a finished unit), sends it
# SIG$SIG once its output matches the extended regular expression $WAIT_FOR, and sets status
# (its exit status) and err (its log lines, the bars erased).
fit_and_signal() {
  local cmd="exec nice -n 19 '$BIN/svm-fit' --features '${FEATURES:-$PRE_DIR/features.h5}' -o '$TMP/m.h5'" a
  for a in "$@"; do cmd+=" '$a'"; done
  : >"$TMP/tty"
  COLUMNS=100 script -qfec "$cmd" "$TMP/tty" >/dev/null &
  local spid=$!
  for _ in $(seq 1 3000); do grep -aqE "$WAIT_FOR" "$TMP/tty" && break; sleep 0.02; done
  local pid
  pid="$(pgrep -P "$spid")" || { echo "svm-fit ended before it showed /$WAIT_FOR/:"; cat -v "$TMP/tty"; return 1; }
  kill -"$SIG" "$pid"  # script's child is svm-fit itself (exec)
  status=0
  wait "$spid" || status=$?
  err="$(tr '\r' '\n' <"$TMP/tty" | sed 's/\x1b\[K//g' | grep -a '^svm-fit: ')"
}

@test "svm-fit --cv grid: SIGUSR1 or SIGTERM stops between cells with exit 75; --resume ends bit-identical" {
  nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/features.h5" "${GRID[@]}" -o "$PRE_DIR/full.h5"
  for SIG in USR1 TERM; do
    rm -f "$TMP/m.h5" "$TMP/m.h5.resume.h5"
    WAIT_FOR="svm-fit cv \[[#.]*\] [1-9][0-9]*/27"  # a cell's fits are done (reported together)
    # A --resume without a resume file starts from the beginning (a requeued job always passes it).
    fit_and_signal "${GRID[@]}" --resume
    echo "$err"
    [ "$status" -eq 75 ]
    [[ "$err" == *"no resume file $TMP/m.h5.resume.h5 yet: starting from the beginning"* ]]
    line="$(grep "interrupted" <<<"$err")"
    [[ "$line" == "svm-fit: interrupted by SIG$SIG in the cross-validation ("*" of 9 (fold, gamma) cells done); resume file $TMP/m.h5.resume.h5; rerun the same command with --resume to continue" ]]
    [ ! -e "$TMP/m.h5" ]
    first="$(resume_units "$TMP/m.h5.resume.h5" cv)"
    [ "$first" -ge 1 ] && [ "$first" -lt 9 ]
    # Interrupted again while resuming: the file keeps the replayed cells and adds the new ones.
    WAIT_FOR="resuming from"
    fit_and_signal "${GRID[@]}" --resume
    [ "$status" -eq 75 ]
    [[ "$err" == *"resuming from $TMP/m.h5.resume.h5: $first cross-validation cells and 0 probability folds done"* ]]
    second="$(resume_units "$TMP/m.h5.resume.h5" cv)"
    echo "cells done: $first, then $second"
    [ "$second" -ge "$first" ]
    nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/features.h5" "${GRID[@]}" --resume -o "$TMP/m.h5"
    [ ! -e "$TMP/m.h5.resume.h5" ]  # removed once the model is written
    assert_same_svm_model "$PRE_DIR/full.h5" "$TMP/m.h5"
  done
}

@test "svm-fit --ranks 2 grid: the launcher's SIGUSR1 stops every rank, exit 75; --ranks 3 --resume ends bit-identical" {
  [ -e "$PRE_DIR/full.h5" ] || nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/features.h5" "${GRID[@]}" -o "$PRE_DIR/full.h5"
  # Rank 0 draws the bar (of its own cells); the launcher passes the signal on to the ranks.
  SIG=USR1 WAIT_FOR="svm-fit cv \[[#.]*\] [1-9][0-9]*/27"
  # --device cpu: a group of CPU processes (on a GPU host auto would ask for 2 GPUs)
  fit_and_signal --cv 3 --C 1,10,100 --gamma 0.5x,scale,2x --ranks 2 --device cpu
  echo "$err"
  [ "$status" -eq 75 ]
  [[ "$(grep "interrupted" <<<"$err")" == "svm-fit: interrupted by SIGUSR1 in the cross-validation ("*" of 9 (fold, gamma) cells done); resume file $TMP/m.h5.resume.h5; rerun the same command with --resume to continue" ]]
  cells="$(resume_units "$TMP/m.h5.resume.h5" cv)"
  [ "$cells" -ge 1 ] && [ "$cells" -lt 9 ]
  nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/features.h5" --cv 3 --C 1,10,100 --gamma 0.5x,scale,2x --ranks 3 \
    --device cpu --resume -o "$TMP/m.h5"
  [ ! -e "$TMP/m.h5.resume.h5" ]
  assert_same_svm_model "$PRE_DIR/full.h5" "$TMP/m.h5"
}

@test "svm-fit --probability: SIGUSR1 stops between probability folds with exit 75; --resume ends bit-identical" {
  popts=(--probability --threads 1)
  nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/big.h5" "${popts[@]}" -o "$TMP/full.h5"
  SIG=USR1 WAIT_FOR="svm-fit probability \[[#.]*\] [1-4]/5" FEATURES="$PRE_DIR/big.h5"
  fit_and_signal "${popts[@]}"
  echo "$err"
  [ "$status" -eq 75 ]
  [[ "$(grep "interrupted" <<<"$err")" == "svm-fit: interrupted by SIGUSR1 in the probability folds ("*" of 5 done); resume file $TMP/m.h5.resume.h5; rerun the same command with --resume to continue" ]]
  folds="$(resume_units "$TMP/m.h5.resume.h5" probability)"
  [ "$folds" -ge 1 ] && [ "$folds" -lt 5 ]
  nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/big.h5" "${popts[@]}" --resume -o "$TMP/m.h5"
  [ ! -e "$TMP/m.h5.resume.h5" ]
  assert_same_svm_model "$TMP/full.h5" "$TMP/m.h5"
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert len(f['svm/probA'][()]) == 45 and abs(f['svm/probA'][()]).min() > 0" "$TMP/m.h5"
}

@test "svm-fit --cv with --probability: a stop in the probability folds keeps the whole grid; --resume ends bit-identical" {
  opts=(--cv 3 --C 1,10 --gamma scale --probability --threads 1)
  nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/big.h5" "${opts[@]}" -o "$TMP/full.h5"
  SIG=USR1 WAIT_FOR="svm-fit probability \[[#.]*\] [1-4]/5" FEATURES="$PRE_DIR/big.h5"
  fit_and_signal "${opts[@]}"
  [ "$status" -eq 75 ]
  [ "$(resume_units "$TMP/m.h5.resume.h5" cv)" -eq 3 ]
  [ "$(resume_units "$TMP/m.h5.resume.h5" probability)" -lt 5 ]
  nice -n 19 "$BIN/svm-fit" -q --features "$PRE_DIR/big.h5" "${opts[@]}" --resume -o "$TMP/m.h5"
  assert_same_svm_model "$TMP/full.h5" "$TMP/m.h5"
}

@test "svm-fit --resume with other options is refused with one line; without --resume the file is replaced" {
  SIG=USR1 WAIT_FOR="cross-validation:"
  fit_and_signal "${GRID[@]}"
  [ "$status" -eq 75 ]
  [ -e "$TMP/m.h5.resume.h5" ]
  run nice -n 19 "$BIN/svm-fit" --features "$PRE_DIR/features.h5" --cv 3 --C 1,10,100 --gamma 0.5x,scale,2x \
    --cv-seed 2 --threads 1 --resume -o "$TMP/m.h5"
  echo "$output"
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"$TMP/m.h5.resume.h5 was written by svm-fit with other options or features; rerun without --resume"* ]]
  [ ! -e "$TMP/m.h5" ]
  run nice -n 19 "$BIN/svm-fit" --features "$PRE_DIR/features.h5" --cv 3 --C 1,10,100 --gamma 0.5x,scale,2x \
    --cv-seed 2 --threads 1 -o "$TMP/m.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$TMP/m.h5.resume.h5 is left by an interrupted run: starting from the beginning"* ]]
  [ -e "$TMP/m.h5" ]
  [ ! -e "$TMP/m.h5.resume.h5" ]
}

@test "on the GPU: the grid and the probability folds stop with exit 75 and resume bit-identical (skips without one)" {
  nvidia-smi -L >/dev/null 2>&1 || skip "no GPU"
  # 20,000 rows: a GPU cell or fold takes long enough for the signal to land inside the work.
  "$PYTHON" "$PARITY" make-features "$TMP/gpu.h5" --train 20000 --test 100 --dim 256 --noise 1.5 --seed 5
  for opts in "--cv 3 --C 1,10,100 --gamma 0.5x,scale,2x" "--probability"; do
    read -ra o <<<"$opts"
    nice -n 19 "$BIN/svm-fit" -q --features "$TMP/gpu.h5" --device gpu "${o[@]}" -o "$TMP/full.h5"
    rm -f "$TMP/m.h5" "$TMP/m.h5.resume.h5"
    SIG=USR1 WAIT_FOR="svm-fit (cv|probability) \[[#.]*\] [1-9][0-9]*/" FEATURES="$TMP/gpu.h5"
    fit_and_signal --device gpu "${o[@]}"
    echo "$err"
    [ "$status" -eq 75 ]
    [ -e "$TMP/m.h5.resume.h5" ]
    nice -n 19 "$BIN/svm-fit" -q --features "$TMP/gpu.h5" --device gpu "${o[@]}" --resume -o "$TMP/m.h5"
    [ ! -e "$TMP/m.h5.resume.h5" ]
    assert_same_svm_model "$TMP/full.h5" "$TMP/m.h5"
  done
}
