#!/usr/bin/env bats
# make pipeline end to end on a generated fixture (issue 5): every file and the report,
# nothing re-run when nothing changed, exactly the downstream stages re-run when something
# did, RUN placed before every tool, an interrupted training and an interrupted
# cross-validated fit resumed by the next make (stale resume files removed), run-stage.sh's
# SIGUSR1 to svm-fit, make data's download path, make install with DESTDIR.
#
# Every tool runs through RUN="env PIPELINE_MARKER=1 $WORK/logrun": logrun appends one line
# per invocation to $WORK/run.log (marker value, tool, arguments) and execs the tool, so the
# log says exactly which stages ran and that the prefix (with its environment) reached them.

load helpers

setup_file() {
  export REPO_ROOT BUILD FIXTURES PYTHON  # for the setsid'd makes of the resume tests
  export WORK="$BATS_FILE_TMPDIR/work"
  mkdir -p "$WORK"
  cat > "$WORK/logrun" <<'EOF'
#!/bin/bash
echo "marker=${PIPELINE_MARKER:-unset} $(basename "$1") ${*:2}" >> "$(dirname "$0")/run.log"
exec "$@"
EOF
  chmod +x "$WORK/logrun"
  export CIF="$(cifar_fixture)"
  # The first run, shared by the tests below (bats runs them in order).
  : > "$WORK/run.log"
  pipeline_make pipeline > "$WORK/first.out" 2>&1
  echo $? > "$WORK/first.rc"
}

# make with the fixture's parameters; extra VAR=VALUE arguments override them. Under
# `make test` the outer make's flags (-s, its variables) must not leak in: the tests read
# the commands make echoes.
pipeline_make() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" BUILD="$BUILD" RUN_DIR="$WORK/run" DATA_DIR="$WORK/data" \
    CIFAR10_DIR="$CIF" TRAIN_LIMIT=200 TEST_LIMIT=100 EPOCHS=1 BATCH=50 DEVICE=cpu \
    RUN="env PIPELINE_MARKER=1 $WORK/logrun" "$@"
}

# The tools that ran since the log was last cleared, in order, on one line.
stages_run() {
  awk '{print $2}' "$WORK/run.log" | tr '\n' ' ' | sed 's/ $//'
}

# Asserts the stages run since the log was cleared; shows what ran (and make's output) if not.
assert_stages() {
  local got
  got=$(stages_run)
  [ "$got" = "$1" ] && return 0
  echo "stages run: '$got', expected '$1'"
  printf '%s\n' "${output:-}" | tail -25
  return 1
}

h5_attr() {  # FILE ATTR
  "$PYTHON" -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs[sys.argv[2]])" "$1" "$2"
}

@test "make pipeline writes every file and a report with all its plots, each tool run through RUN" {
  [ "$(cat "$WORK/first.rc")" -eq 0 ] || { tail -30 "$WORK/first.out"; return 1; }
  for f in data/cifar10.h5 run/model.h5 run/features.h5 run/svm.h5 run/eval.h5 run/report/index.html \
           run/report/report.md run/report/loss.png run/report/reconstructions.png run/report/confusion.png \
           run/report/per_class_accuracy.png run/report/timing.png; do
    [ -s "$WORK/$f" ] || { echo "missing $f"; return 1; }
  done
  assert_stages "cifar-convert ae-train ae-encode svm-fit svm-eval report"
  # The prefix, with its environment, reached every tool...
  [ "$(grep -c '^marker=1 ' "$WORK/run.log")" -eq 6 ]
  # ...and every tool command make printed starts with it.
  local tool_lines prefixed
  tool_lines=$(grep -cE "$BUILD/bin/(cifar-convert|ae-train|ae-encode|svm-fit|svm-eval|report) " "$WORK/first.out")
  prefixed=$(grep -cF "'env' 'PIPELINE_MARKER=1' '$WORK/logrun' $BUILD/bin/" "$WORK/first.out")  # RUN's words, quoted
  [ "$tool_lines" -eq 6 ] && [ "$prefixed" -eq 6 ]
  # The parameters reached the files: 200/100 images, 1 epoch, all 100 test images evaluated.
  "$PYTHON" - "$WORK" <<'PY'
import sys, h5py
w = sys.argv[1]
d = h5py.File(f"{w}/data/cifar10.h5", "r")
assert d["train/images"].shape[0] == 200 and d["test/images"].shape[0] == 100
m = h5py.File(f"{w}/run/model.h5", "r")
assert int(m.attrs["epochs_done"]) == 1 and m["history/train_loss"].shape == (1,)
e = h5py.File(f"{w}/run/eval.h5", "r")
assert e["confusion"][()].sum() == 100
html = open(f"{w}/run/report/index.html").read()
assert "was not found" not in html and "matches model.h5" in html and "matches svm.h5" in html
PY
  # No checkpoint is left once model.h5 exists.
  [ -z "$(ls -a "$WORK/run" | grep ckpt || true)" ]
}

@test "running make pipeline again does nothing" {
  : > "$WORK/run.log"
  touch "$WORK/before"
  run pipeline_make pipeline
  [ "$status" -eq 0 ]
  assert_stages ""
  [ -z "$(find "$WORK/run" "$WORK/data" -newer "$WORK/before")" ]
  [[ "$output" == *"% test accuracy; report in $WORK/run/report/index.html"* ]]
}

@test "the closing accuracy line reads the report's summary.json, else eval.h5 by h5dump, else by Python's h5py" {
  [ "$(cat "$WORK/first.rc")" -eq 0 ] || skip "the first pipeline run failed"
  local eval_h5="$WORK/run/eval.h5" summary="$WORK/run/report/summary.json" nohdf="$WORK/path-without-h5dump" old f cmds=()
  # A known accuracy with more digits than the line shows in eval.h5 and another in
  # summary.json, to tell which was read; eval.h5's mtime is put back (nanoseconds included)
  # so that nothing downstream re-runs.
  touch -r "$eval_h5" "$WORK/eval.mtime"
  old=$(h5_attr "$eval_h5" accuracy)
  "$PYTHON" -c "import h5py, sys; h5py.File(sys.argv[1], 'r+').attrs['accuracy'] = 0.618034" "$eval_h5"
  touch -r "$WORK/eval.mtime" "$eval_h5"
  cp "$summary" "$WORK/summary.json.orig"
  grep -q '^ "accuracy": ' "$summary"
  sed -i 's/^ "accuracy": .*$/ "accuracy": 0.250049/' "$summary"
  # Every command of /usr/bin (which /bin links to) but h5dump.
  mkdir -p "$nohdf"
  for f in /usr/bin/*; do [ "${f##*/}" = h5dump ] || cmds+=("$f"); done
  ln -sf "${cmds[@]}" "$nohdf/"
  ! PATH="$nohdf" command -v h5dump
  : > "$WORK/run.log"
  # summary.json: neither h5dump nor a Python is asked.
  PATH="$nohdf" run pipeline_make pipeline PYTHON=/bin/false
  local status_summary=$status line_summary=${lines[${#lines[@]}-1]}
  # A report folder without one (an older report's): eval.h5 itself.
  rm "$summary"
  run pipeline_make pipeline
  local status_h5dump=$status line_h5dump=${lines[${#lines[@]}-1]}
  PATH="$nohdf" run pipeline_make pipeline
  local status_python=$status line_python=${lines[${#lines[@]}-1]}
  # A PYTHON without h5py (a GPU host's h5py lives in its own environment): python3 on PATH.
  PATH="$nohdf" run pipeline_make pipeline PYTHON=/bin/false
  local status_path=$status line_path=${lines[${#lines[@]}-1]}
  cp "$WORK/summary.json.orig" "$summary"
  "$PYTHON" -c "import h5py, sys; h5py.File(sys.argv[1], 'r+').attrs['accuracy'] = float(sys.argv[2])" "$eval_h5" "$old"
  touch -r "$WORK/eval.mtime" "$eval_h5"
  assert_stages ""
  local report="report in $WORK/run/report/index.html"
  [ "$status_summary" -eq 0 ] && [ "$line_summary" = "pipeline: 25.00 % test accuracy; $report" ] ||
    { echo "summary.json: $status_summary '$line_summary'"; false; }
  local expected="pipeline: 61.80 % test accuracy; $report"
  [ "$status_h5dump" -eq 0 ] && [ "$line_h5dump" = "$expected" ] || { echo "with h5dump: $status_h5dump '$line_h5dump'"; false; }
  [ "$status_python" -eq 0 ] && [ "$line_python" = "$expected" ] || { echo "without h5dump: $status_python '$line_python'"; false; }
  [ "$status_path" -eq 0 ] && [ "$line_path" = "$expected" ] || { echo "PYTHON without h5py: $status_path '$line_path'"; false; }
}

@test "touching model.h5 re-runs encode, fit, eval and report only" {
  : > "$WORK/run.log"
  sleep 1  # a visibly newer mtime on file systems with 1 s resolution
  touch "$WORK/run/model.h5"
  local model_mtime
  model_mtime=$(stat -c %Y "$WORK/run/model.h5")
  run pipeline_make pipeline
  [ "$status" -eq 0 ]
  assert_stages "ae-encode svm-fit svm-eval report"
  [ "$(stat -c %Y "$WORK/run/model.h5")" -eq "$model_mtime" ]
  [ "$WORK/run/report/index.html" -nt "$WORK/run/eval.h5" ]
}

@test "changing EPOCHS re-trains (not re-converts); the same EPOCHS again does nothing" {
  : > "$WORK/run.log"
  run pipeline_make pipeline EPOCHS=2
  [ "$status" -eq 0 ]
  assert_stages "ae-train ae-encode svm-fit svm-eval report"
  [ "$(h5_attr "$WORK/run/model.h5" epochs_done)" -eq 2 ]
  [ "$(ls "$WORK/run/.params" | grep -c '^train-')" -eq 1 ]
  : > "$WORK/run.log"
  run pipeline_make pipeline EPOCHS=2
  [ "$status" -eq 0 ]
  assert_stages ""
}

@test "changing TRAIN_LIMIT remakes the dataset and everything after it" {
  : > "$WORK/run.log"
  run pipeline_make pipeline EPOCHS=2 TRAIN_LIMIT=150
  [ "$status" -eq 0 ]
  assert_stages "cifar-convert ae-train ae-encode svm-fit svm-eval report"
  [ "$(h5_attr "$WORK/run/svm.h5" n_train)" -eq 150 ]
}

@test "an interrupted training resumes from its checkpoint on the next make pipeline" {
  : > "$WORK/run.log"
  # Start a 3-epoch training, stop make (SIGTERM to its process group) once the checkpoint
  # holds at least one epoch, then run again: ae-train resumes instead of starting over.
  setsid bash -c "$(declare -f pipeline_make); pipeline_make pipeline EPOCHS=3 TRAIN_LIMIT=150" \
    > "$WORK/interrupted.out" 2>&1 &
  local pid=$! ckpt="" i
  for i in $(seq 1 600); do
    ckpt=$(ls "$WORK"/run/.model-*.ckpt.h5 2>/dev/null | head -1 || true)
    [ -n "$ckpt" ] && break
    sleep 0.2
  done
  [ -n "$ckpt" ] || { kill -TERM -- -"$pid"; cat "$WORK/interrupted.out"; return 1; }
  kill -TERM -- -"$pid" 2>/dev/null || true
  wait "$pid" || true
  # make ends at once; ae-train (a preemption) first finishes its steps and saves: wait for it.
  for i in $(seq 1 300); do pgrep -f -- "ae-train.*$(basename "$ckpt")" > /dev/null || break; sleep 0.1; done
  [ -f "$ckpt" ]
  local done_before
  done_before=$(h5_attr "$ckpt" epochs_done)
  [ "$done_before" -ge 1 ]
  if [ "$done_before" -ge 3 ]; then skip "training finished before the signal"; fi
  : > "$WORK/run.log"
  run pipeline_make pipeline EPOCHS=3 TRAIN_LIMIT=150
  [ "$status" -eq 0 ]
  # SIGTERM is a preemption: the checkpoint holds the epochs done, or a point inside the next.
  [[ "$output" == *"resuming $ckpt after epoch $done_before"* ||
     "$output" == *"resuming $ckpt inside epoch $((done_before + 1)),"* ]]
  assert_stages "ae-train ae-encode svm-fit svm-eval report"
  [ "$(h5_attr "$WORK/run/model.h5" epochs_done)" -eq 3 ]
  [ ! -e "$ckpt" ]
}

# A cross-validated fit on a learnable fixture (tests/slurm/gen_learnable.py) in its own
# dataset and run folder, FIT_FLAGS a grid of 5 folds x 16 gammas x 3 C (a few seconds).
learnable_cifar() {
  local dir="$FIXTURES/slurm-learnable"  # the cluster tests' cache (tests/slurm/helpers.bash)
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    "$PYTHON" "$REPO_ROOT/tests/slurm/gen_learnable.py" "$dir.tmp" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir" && touch "$dir/.done"
  fi
  echo "$dir/cifar-10-batches-bin"
}
FIT_GRID="--cv 5 --C 1,10,100 --gamma 0.1x,0.15x,0.225x,0.34x,0.5x,0.75x,scale,1.5x,2.25x,3.4x,5x,7.5x,11x,17x,25x,38x"
fit_make() {
  pipeline_make RUN_DIR="$WORK/fitrun" DATA_DIR="$WORK/fitdata" CIFAR10_DIR="$(learnable_cifar)" FIT_FLAGS="$FIT_GRID" "$@"
}

# Two svm.h5 files the same fit of FIT_GRID (tests/slurm/same_svm_model.py).
same_model() {
  "$PYTHON" "$REPO_ROOT/tests/slurm/same_svm_model.py" "$1" "$2" 3 16
}

@test "an interrupted cross-validated fit resumes its finished cells on the next make pipeline, model unchanged" {
  run fit_make encode
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  : > "$WORK/run.log"
  # make fit, SIGTERMed (its process group) once svm-fit has run a moment: svm-fit finishes
  # the cell in progress, writes its resume file and exits 75.
  setsid bash -c "$(declare -f pipeline_make fit_make learnable_cifar); FIT_GRID='$FIT_GRID'; fit_make fit" \
    > "$WORK/fit-interrupted.out" 2>&1 &
  local pid=$! i
  for i in $(seq 1 300); do pgrep -f -- "svm-fit .*$WORK/fitrun/" > /dev/null && break; sleep 0.1; done
  sleep 1.5
  kill -TERM -- -"$pid" 2>/dev/null || true
  wait "$pid" || true
  for i in $(seq 1 300); do pgrep -f -- "svm-fit .*$WORK/fitrun/" > /dev/null || break; sleep 0.1; done
  local resume
  resume=$(ls "$WORK"/fitrun/.svm-*.h5.resume.h5 2>/dev/null || true)
  if [ -z "$resume" ] && [ -e "$WORK/fitrun/svm.h5" ]; then skip "the fit finished before the signal"; fi
  [ -n "$resume" ] || { cat "$WORK/fit-interrupted.out"; false; }
  grep -q "interrupted by SIGTERM in the cross-validation" "$WORK/fit-interrupted.out"
  [ ! -e "$WORK/fitrun/svm.h5" ]
  local done_before
  done_before=$("$PYTHON" -c "import h5py, sys; print(len(h5py.File(sys.argv[1], 'r')['cv/units']))" "$resume")
  [ "$done_before" -ge 1 ] && [ "$done_before" -lt 80 ]
  cp -p "$resume" "$WORK/fit-resume-file.h5"  # for the stale-file test below
  echo "$resume" > "$WORK/fit-resume-name"

  : > "$WORK/run.log"
  run fit_make pipeline
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  [[ "$output" == *"svm-fit: resuming from $resume: $done_before cross-validation cells and 0 probability folds done"* ]] \
    || { echo "$output" | grep svm-fit | head; false; }
  assert_stages "svm-fit svm-eval report"
  [ ! -e "$resume" ] && [ -z "$(ls -a "$WORK/fitrun" | grep -E '^\.svm-|interrupted' || true)" ]
  # The model and its provenance name svm.h5 (--record-output-as), not the hidden output.
  [ "$("$PYTHON" -c "import h5py, json, sys; print(json.loads(h5py.File(sys.argv[1], 'r').attrs['params'])['output'])" \
        "$WORK/fitrun/svm.h5")" = "$WORK/fitrun/svm.h5" ]
  cp "$WORK/fitrun/svm.h5" "$WORK/fit-resumed.h5"

  # The same fit, uninterrupted.
  rm "$WORK/fitrun/svm.h5"
  run fit_make fit
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  [[ "$output" == *"no resume file"*"starting from the beginning"* ]]
  same_model "$WORK/fit-resumed.h5" "$WORK/fitrun/svm.h5"
}

@test "stale fit resume files (other settings, or older than the features) are removed, never replayed" {
  [ -f "$WORK/fit-resume-file.h5" ] || skip "needs the interrupted fit of the test before"
  local resume
  resume=$(cat "$WORK/fit-resume-name")
  # One of other fit settings (another name), and this one's, but older than features.h5
  # (rewritten, here touched): svm-fit's fingerprint would refuse it (exit 2).
  cp "$WORK/fit-resume-file.h5" "$WORK/fitrun/.svm-0123456789.h5.resume.h5"
  cp -p "$WORK/fit-resume-file.h5" "$resume"
  sleep 1  # a visibly newer mtime on file systems with 1 s resolution
  touch "$WORK/fitrun/features.h5"
  : > "$WORK/run.log"
  run fit_make pipeline
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  assert_stages "svm-fit svm-eval report"
  [[ "$output" == *"no resume file $resume yet: starting from the beginning"* ]] && [[ "$output" != *"resuming"* ]]
  [ ! -e "$resume" ] && [ ! -e "$WORK/fitrun/.svm-0123456789.h5.resume.h5" ]
  same_model "$WORK/fit-resumed.h5" "$WORK/fitrun/svm.h5"
}

@test "run-stage.sh passes SIGUSR1 to svm-fit: the fit stage leaves .fit-interrupted, exits 75, and resumes when rerun" {
  [ -f "$WORK/fit-resumed.h5" ] || skip "needs the fits of the tests before"
  rm -f "$WORK/fitrun/svm.h5"
  local stage=("$REPO_ROOT/pipelines/slurm/run-stage.sh" "$WORK/fitrun" bash -c
               "$(declare -f pipeline_make fit_make learnable_cifar); FIT_GRID='$FIT_GRID'; fit_make fit")
  bash "${stage[@]}" > "$WORK/run-stage.out" 2>&1 &
  local pid=$! i
  for i in $(seq 1 300); do pgrep -f -- "svm-fit .*$WORK/fitrun/" > /dev/null && break; sleep 0.1; done
  sleep 1.5
  kill -USR1 "$pid"
  local rc=0
  wait "$pid" || rc=$?
  if [ $rc -eq 0 ] && [ -e "$WORK/fitrun/svm.h5" ]; then skip "the fit finished before the signal"; fi
  [ $rc -eq 75 ] || { cat "$WORK/run-stage.out"; false; }
  grep -q "interrupted by SIGUSR1 in the cross-validation" "$WORK/run-stage.out"
  grep -q "run-stage: the fit stage stopped resumably; run it again to resume" "$WORK/run-stage.out"
  [ -e "$WORK/fitrun/.fit-interrupted" ] && [ ! -e "$WORK/fitrun/svm.h5" ]
  run bash "${stage[@]}"
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  [[ "$output" == *"svm-fit: resuming from "*".svm-"*".h5.resume.h5: "* ]]
  [ ! -e "$WORK/fitrun/.fit-interrupted" ] && [ -z "$(ls -a "$WORK/fitrun" | grep -E '^\.svm-' || true)" ]
  same_model "$WORK/fit-resumed.h5" "$WORK/fitrun/svm.h5"
}

@test "make data with a CIFAR10_DIR that does not exist fails with one clear line" {
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" BUILD="$BUILD" DATA_DIR="$WORK/nodata" \
    CIFAR10_DIR="$WORK/no-such-cifar" data
  [ "$status" -ne 0 ]
  [[ "$output" == *"data: CIFAR10_DIR=$WORK/no-such-cifar: no such folder"* ]]
  [ ! -e "$WORK/nodata/cifar10.h5" ]
}

@test "make data downloads to a temporary name, checks the md5, then converts" {
  local tgz md5
  tgz=$(cifar_fixture_tar)
  md5=$(md5sum "$tgz" | cut -d' ' -f1)
  # A wrong checksum: nothing stays behind.
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" BUILD="$BUILD" DATA_DIR="$WORK/dl" CIFAR10_DIR= \
    CIFAR10_URL="file://$tgz" CIFAR10_MD5=00000000000000000000000000000000 data
  [ "$status" -ne 0 ]
  [[ "$output" == *"md5 $md5, expected 00000000000000000000000000000000: download removed"* ]]
  [ -z "$(ls -A "$WORK/dl" | grep -v '^.params$' || true)" ]
  # The right one: the archive lands under its name and the dataset is made from it.
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" BUILD="$BUILD" DATA_DIR="$WORK/dl" CIFAR10_DIR= \
    CIFAR10_URL="file://$tgz" CIFAR10_MD5="$md5" TRAIN_LIMIT=100 TEST_LIMIT=50 data
  [ "$status" -eq 0 ]
  cmp "$tgz" "$WORK/dl/cifar-10-binary.tar.gz"
  [ -s "$WORK/dl/cifar10.h5" ]
  [ -z "$(ls -A "$WORK/dl" | grep part || true)" ]
}

# make with a clean environment (as pipeline_make) but without the CIFAR-10 fixture's variables.
plain_make() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" BUILD="$BUILD" "$@"
}

@test "DATASET=fashion-mnist runs the chain on IDX files into its own dataset file and run folder" {
  "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" idx "$WORK/fm-src" --gz --train 200 --test 60
  : > "$WORK/run.log"
  touch "$WORK/before-fm"; sleep 1
  run plain_make DATASET=fashion-mnist FASHION_MNIST_DIR="$WORK/fm-src" DATA_DIR="$WORK/data" RUN_DIR="$WORK/run-fm" \
    EPOCHS=1 DEVICE=cpu RUN="env PIPELINE_MARKER=1 $WORK/logrun" pipeline
  [ "$status" -eq 0 ] || { printf '%s\n' "$output" | tail -20; return 1; }
  assert_stages "cifar-convert ae-train ae-encode svm-fit svm-eval report"
  [ -s "$WORK/data/fashion-mnist.h5" ] && [ -s "$WORK/run-fm/report/index.html" ]
  # The per-dataset defaults reached the tools: 1x28x28 data, the 128,64 model, batch 128.
  grep -q -- "--encoder-channels 128,64" "$WORK/run.log"
  grep -q -- "--batch-size 128" "$WORK/run.log"
  [ "$(h5_attr "$WORK/data/fashion-mnist.h5" source_format)" = idx ]
  # Nothing of the CIFAR-10 run (same DATA_DIR) was touched, its data stamp included.
  [ -z "$(find "$WORK/run" "$WORK/data/cifar10.h5" "$WORK/data/.params" -newer "$WORK/before-fm" \
          ! -name 'fashion-mnist-*.params' ! -name .params)" ]
  ls "$WORK/data/.params" | grep -q '^data-'
  # Running it again does nothing.
  : > "$WORK/run.log"
  run plain_make DATASET=fashion-mnist FASHION_MNIST_DIR="$WORK/fm-src" DATA_DIR="$WORK/data" RUN_DIR="$WORK/run-fm" \
    EPOCHS=1 DEVICE=cpu RUN="env PIPELINE_MARKER=1 $WORK/logrun" pipeline
  assert_stages ""
}

@test "default data files and run folders are per dataset; CIFAR-10 keeps data/cifar10.h5 and data/run" {
  run plain_make -n DATASET=fashion-mnist FASHION_MNIST_DIR=/nonexistent pipeline
  [[ "$output" == *"-o data/fashion-mnist.h5"* ]]
  [[ "$output" == *"-o 'data/run-fashion-mnist/.model-"* ]]
  run plain_make -n DATASET=cifar10 CIFAR10_DIR=/nonexistent pipeline
  [[ "$output" == *"-o data/cifar10.h5"* ]]
  [[ "$output" == *"-o 'data/run/.model-"* ]]
  run plain_make -n DATASET=cifar100 CIFAR100_DIR=/nonexistent CIFAR100_LABELS=coarse pipeline
  [[ "$output" == *"'--labels' 'coarse' -o data/cifar100.h5"* ]]
  [[ "$output" == *"-o 'data/run-cifar100/.model-"* ]]
  run plain_make -n DATASET=nope pipeline
  [ "$status" -ne 0 ]
  [[ "$output" == *"DATASET=nope: expected one of cifar10 fashion-mnist mnist cifar100 folder"* ]]
  run plain_make -n DATASET=folder pipeline
  [ "$status" -ne 0 ]
  [[ "$output" == *"DATASET=folder needs FOLDER=DIR"* ]]
}

@test "a source of another format than DATASET's stops with one line naming both; nothing is written" {
  "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" idx "$WORK/idx-src" --gz --train 20 --test 10
  run plain_make DATASET=cifar10 CIFAR10_DIR="$WORK/idx-src" DATA_DIR="$WORK/wrong" data
  [ "$status" -ne 0 ]
  [[ "$output" == *"data: DATASET=cifar10 expects CIFAR-10 binary batches, but CIFAR10_DIR=$WORK/idx-src holds MNIST-style IDX files (DATASET=fashion-mnist or DATASET=mnist); nothing was converted"* ]]
  [ ! -e "$WORK/wrong/cifar10.h5" ]
  run plain_make DATASET=fashion-mnist FASHION_MNIST_DIR="$CIF" DATA_DIR="$WORK/wrong" data
  [ "$status" -ne 0 ]
  [[ "$output" == *"data: DATASET=fashion-mnist expects MNIST-style IDX files, but FASHION_MNIST_DIR=$CIF holds CIFAR-10 binary batches (DATASET=cifar10)"* ]]
  [ ! -e "$WORK/wrong/fashion-mnist.h5" ]
  run plain_make DATASET=folder FOLDER="$WORK/idx-src" DATA_DIR="$WORK/wrong" data
  [ "$status" -ne 0 ]
  [[ "$output" == *"data: DATASET=folder expects an image folder (train/CLASS/*, test/CLASS/*), but FOLDER=$WORK/idx-src holds MNIST-style IDX files"* ]]
  [ -z "$(ls -A "$WORK/wrong" | grep -v '^.params$' || true)" ]
}

@test "DATASET=mnist downloads the four IDX files, checks their md5s, then converts" {
  local src="$WORK/mnist-src" sums=""
  "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" idx "$src" --gz --train 50 --test 20
  for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    sums="$sums $f=$(md5sum "$src/$f" | cut -d' ' -f1)"
  done
  run plain_make DATASET=mnist DATA_DIR="$WORK/mn" MNIST_URL="file://$src" \
    MNIST_MD5="train-images-idx3-ubyte.gz=00000000000000000000000000000000" data
  [ "$status" -ne 0 ]
  [[ "$output" == *"train-images-idx3-ubyte.gz: md5 "*", expected 00000000000000000000000000000000: download removed"* ]]
  [ ! -e "$WORK/mn/mnist.h5" ] && [ -z "$(ls -A "$WORK/mn/mnist-source" 2>/dev/null || true)" ]
  run plain_make DATASET=mnist DATA_DIR="$WORK/mn" MNIST_URL="file://$src" MNIST_MD5="$sums" data
  [ "$status" -eq 0 ] || { printf '%s\n' "$output" | tail; return 1; }
  [ -s "$WORK/mn/mnist.h5" ]
  [ -z "$(ls -A "$WORK/mn/mnist-source" | grep part || true)" ]
}

@test "DATASET=folder converts FOLDER resized to FOLDER_IMAGE_SIZE into folder-NAME.h5" {
  "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" folder "$WORK/pets" --size 12x10
  run plain_make DATASET=folder FOLDER="$WORK/pets" FOLDER_IMAGE_SIZE=8 DATA_DIR="$WORK/fd" data
  [ "$status" -eq 0 ] || { printf '%s\n' "$output" | tail; return 1; }
  "$PYTHON" -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r')
assert f['train/images'].shape == (5, 3, 8, 8), f['train/images'].shape
assert [str(n) for n in f.attrs['class_names']] == ['cat', 'dog']" "$WORK/fd/folder-pets.h5"
}

@test "make install honours DESTDIR and PREFIX; uninstall removes what it installed" {
  local dest="$WORK/dest"
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" BUILD="$BUILD" DESTDIR="$dest" PREFIX=/opt/cae install
  [ "$status" -eq 0 ]
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
    [ -x "$dest/opt/cae/bin/$t" ] || { echo "$t not installed"; return 1; }
  done
  run "$dest/opt/cae/bin/report" --version
  [ "$status" -eq 0 ] && [[ "$output" == report\ * ]]
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" BUILD="$BUILD" DESTDIR="$dest" PREFIX=/opt/cae uninstall
  [ "$status" -eq 0 ]
  [ -z "$(ls -A "$dest/opt/cae/bin")" ]
}

@test "pipelines/slurm/submit.sh chains six jobs, each the make target of its stage, with afterok (fake sbatch)" {
  local fake="$WORK/fakebin"
  mkdir -p "$fake"
  # A stand-in sbatch: logs its arguments one per line, answers job ids 101, 102, ...
  cat > "$fake/sbatch" <<'EOF2'
#!/bin/bash
[ "$1" = --test-only ] && exit 0  # submit.sh's dry run of each job: accepted, not counted
n=$(( $(cat "$SBATCH_LOG.n" 2>/dev/null || echo 100) + 1 )); echo $n > "$SBATCH_LOG.n"
{ echo "job $n"; printf '%s\n' "$@"; } >> "$SBATCH_LOG"
echo $n
EOF2
  chmod +x "$fake/sbatch"
  # submit.sh holds the chain and releases it (scontrol), cancelling on failure (scancel).
  printf '#!/bin/bash\nexit 0\n' > "$fake/scontrol"
  printf '#!/bin/bash\nexit 0\n' > "$fake/scancel"
  chmod +x "$fake/scontrol" "$fake/scancel"
  export SBATCH_LOG="$WORK/sbatch.log"
  rm -f "$SBATCH_LOG" "$SBATCH_LOG.n"
  run env PATH="$fake:$PATH" RUN_DIR="$WORK/slurm-run" DATA_DIR="$WORK/slurm-data" CIFAR10_DIR="$CIF" \
    EPOCHS=3 PRESET=accurate VIEWS=flip,shift:1 BIN="$BUILD/bin" PARTITION=gpuq "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" == *"submitted: convert 101, train 102, encode 103, fit 104, eval 105, report 106"* ]]
  "$PYTHON" - "$SBATCH_LOG" "$(cd "$BUILD/bin" && pwd)" "$REPO_ROOT" "$WORK" <<'PY'
import shlex, sys
log, bin_dir, repo, work = sys.argv[1:5]
jobs, cur = {}, None
for line in open(log).read().splitlines():
    if line.startswith("job "):
        cur = int(line.split()[1]); jobs[cur] = []
    else:
        jobs[cur].append(line)
assert sorted(jobs) == list(range(101, 107)), jobs.keys()
targets = ["data", "train", "encode", "fit", "eval", "report"]
for i, (job, args) in enumerate(sorted(jobs.items())):
    wrap = shlex.split([a for a in args if a.startswith("--wrap=")][0][len("--wrap="):])
    # set -e; exec bash run-stage.sh RUN_DIR make -C REPO --no-print-directory PREBUILT=1 TARGET VAR=...
    assert wrap[:6] == ["set", "-e;", "exec", "bash", f"{repo}/pipelines/slurm/run-stage.sh", f"{work}/slurm-run"], wrap
    assert wrap[6:12] == ["make", "-C", repo, "--no-print-directory", "PREBUILT=1", targets[i]], wrap
    variables = dict(w.split("=", 1) for w in wrap[12:])
    assert variables["RUN_DIR"] == f"{work}/slurm-run" and variables["BIN"] == bin_dir, variables
    assert variables["DATA_DIR"] == f"{work}/slurm-data" and variables["PRESET"] == "accurate", variables
    assert variables["EPOCHS"] == "3" and variables["DEVICE"] == "gpu" and variables["SVM_DEVICE"] == "cpu", variables
    assert variables["VIEWS"] == "flip,shift:1", variables
    deps = [a for a in args if a.startswith("--dependency=")]
    assert deps == ([] if i == 0 else [f"--dependency=afterok:{job - 1}"]), (job, deps)
    assert "--partition=gpuq" in args
    assert ("--gres=gpu:1" in args) == (targets[i] in ("train", "encode")), (job, args)
    # Only the resumable stages (train, fit) are told to stop before their time limit, and
    # may requeue themselves.
    preempt = ["--signal=B:USR1@300", "--requeue", "--open-mode=append"]
    assert all((p in args) == (targets[i] in ("train", "fit")) for p in preempt), (job, args)
PY
  # --dry-run submits nothing and creates nothing; with the dataset up to date for its
  # settings (make data: the tests before may have remade it with others) there is no
  # convert job.
  rm -f "$SBATCH_LOG"
  run pipeline_make data
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  run env PATH="$fake:$PATH" RUN_DIR="$WORK/slurm-dry" DATA_DIR="$WORK/run/../data" CIFAR10_DIR="$CIF" \
    TRAIN_LIMIT=200 TEST_LIMIT=100 BIN="$BUILD/bin" "$REPO_ROOT/pipelines/slurm/submit.sh" --dry-run
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ ! -e "$SBATCH_LOG" ] && [ ! -e "$WORK/slurm-dry" ]
  [ "$(grep -c '^sbatch ' <<< "$output")" -eq 5 ] || { echo "$output"; false; }
  # Settings make refuses are refused before anything is submitted, in make's words.
  run env PATH="$fake:$PATH" RUN_DIR="$WORK/slurm-bad" DATASET=cifar11 BIN="$BUILD/bin" "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 1 ] && [[ "$output" == *"DATASET=cifar11: expected one of cifar10 "* ]] || { echo "$output"; false; }
  [ ! -e "$SBATCH_LOG" ] && [ ! -e "$WORK/slurm-bad" ]
}

@test "shell code in *_FLAGS and RUN reaches the tools as literal arguments, never runs" {
  [ "$(cat "$WORK/first.rc")" -eq 0 ] || skip "the first pipeline run failed"
  : > "$WORK/run.log"
  run pipeline_make pipeline FIT_FLAGS="--C 5;touch $WORK/pwned-semicolon \`touch $WORK/pwned-tick\`"
  [ "$status" -ne 0 ]   # svm-fit: '5;touch' is not a number
  [ ! -e "$WORK/pwned-semicolon" ] && [ ! -e "$WORK/pwned-tick" ]
  [[ "$(cat "$WORK/run.log")" == *"svm-fit --features"*"--C 5;touch $WORK/pwned-semicolon \`touch"* ]]
}

@test "every .params stamp is named by the first 10 hex digits of its content's md5 (stage flags with quotes, \$ and \\)" {
  local dir="$WORK/stamps"
  mkdir -p "$dir"
  # Stands in for every tool (the stamps are the subject): creates what -o names, the
  # report's folder with its index.html.
  cat > "$dir/fakerun" <<'EOF'
#!/bin/bash
out=
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
case "$out" in */report) mkdir -p "$out" && : > "$out/index.html" ;; *) : > "$out" ;; esac
EOF
  chmod +x "$dir/fakerun"
  # On make's command line $$ is one literal $.
  local flags="--x 'single' \"double\" \$\$HOME back\\slash" literal="--x 'single' \"double\" \$HOME back\\slash"
  run pipeline_make pipeline PREBUILT=1 RUN_DIR="$dir/run" DATA_DIR="$dir/data" RUN="$dir/fakerun" \
    TRAIN_FLAGS="$flags train" ENCODE_FLAGS="$flags encode" FIT_FLAGS="$flags fit" EVAL_FLAGS="$flags eval"
  [ "$status" -eq 0 ] || { printf '%s\n' "$output" | tail -20; false; }
  local stamp name stage hash stages=()
  for stamp in "$dir"/data/.params/*.params "$dir"/run/.params/*.params; do
    name=$(basename "$stamp" .params)
    stage=${name%-*}
    stages+=("$stage")
    [ -z "$(tail -c 1 "$stamp")" ] || { echo "$stamp: no final newline"; false; }
    [ "$(wc -l < "$stamp")" -eq 1 ]
    hash=$(head -c -1 "$stamp" | md5sum | cut -c1-10)
    [ "${name##*-}" = "$hash" ] || { echo "$stamp: name hash ${name##*-}, md5 of its content $hash"; cat "$stamp"; false; }
    case $stage in
      data) [ "$(cat "$stamp")" = "source=$CIF train_limit=200 test_limit=100" ] || { echo "$stamp:"; cat "$stamp"; false; } ;;
      *) [[ "$(cat "$stamp")" == *"flags=$literal $stage" ]] || { echo "$stamp:"; cat "$stamp"; false; } ;;
    esac
  done
  [ "${stages[*]}" = "data encode eval fit train" ] || { echo "stamps: ${stages[*]}"; false; }
}

@test "bench/stage-timer.sh writes argv as JSON exactly (quotes, backslashes, blanks, control characters, UTF-8)" {
  local dir="$WORK/stage-timer"
  mkdir -p "$dir"
  printf '%s\n' '#!/bin/bash' 'echo "progress line"' 'echo "{\"phases\": {\"total\": 0.5, \"compute\": 0.25}}"' 'exit 3' \
    > "$dir/tool"
  chmod +x "$dir/tool"
  local args=('a"b' 'back\slash\\' 'two  spaces' $'tab\there' $'new\nline\n' $'cr\r\x01\x1f\x7f' '' 'é ü' \
              '$HOME `x` $(y)' "'single'" '\u0041' '\n' '{"json": [1]}')
  run env STAGE_LOG="$dir/stages.jsonl" "$REPO_ROOT/bench/stage-timer.sh" "$dir/tool" "${args[@]}"
  [ "$status" -eq 3 ]   # the tool's exit status
  [ "$(wc -l < "$dir/stages.jsonl")" -eq 1 ]
  # The log's argv against the same words as Python receives them.
  "$PYTHON" - "$dir/stages.jsonl" "$dir/tool" "${args[@]}" <<'PY'
import json, sys
rec = json.loads(open(sys.argv[1]).read())
assert rec["argv"] == sys.argv[2:], (rec["argv"], sys.argv[2:])
assert rec["stage"] == "tool", rec
assert rec["summary"] == {"phases": {"total": 0.5, "compute": 0.25}}, rec
assert 0 <= rec["wall"] < 60, rec
PY
}
