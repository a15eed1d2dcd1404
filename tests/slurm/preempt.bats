#!/usr/bin/env bats
# Preemption near the time limit (pipelines/slurm/run-stage.sh, README "Preemption"): the
# train and fit jobs ask for --signal=B:USR1@SIGNAL_MARGIN and --requeue; the batch shell
# passes SIGUSR1 to the stage's resumable tool (ae-train, svm-fit), which saves what resumes
# it and exits 75, the job requeues itself and the requeued run resumes; the jobs after it
# wait for it.
#
# The first case checks that plumbing with a stand-in trainer (tests/slurm/
# interruptible_train.sh) and Slurm's own --signal timer (TIME=1, a 50 s margin). The second
# preempts the real ae-train (scancel --signal=USR1 --batch, what Slurm sends at the margin)
# and needs ae-train's side of the contract (SIGUSR1 → checkpoint, exit 75): its model must
# equal, bit for bit, that of the same training run uninterrupted. The fourth preempts a fit
# job the same way: svm-fit stops between cross-validation cells and exits 75, the job
# requeues once, and the resumed fit's model equals an uninterrupted fit's.

load helpers

setup_file() {
  export WORK="$BATS_FILE_TMPDIR/work"
  mkdir -p "$WORK"
  export CIF="$(learnable_fixture)"
}

restarts() {  # JOB → how often Slurm restarted it
  scontrol show job -o "$1" 2>/dev/null | grep -oE 'Restarts=[0-9]+' | cut -d= -f2
}

@test "plumbing: the time limit's SIGUSR1 reaches the stage, the job requeues on status 75 and resumes" {
  . "$REPO_ROOT/tests/slurm/fake_pipeline_tools.sh"
  local w="$WORK/plumbing"
  mkdir -p "$w/cif" "$w/argv"
  export ARGV_DIR="$w/argv"
  INTERRUPTIBLE=1 make_fake_pipeline_tools "$w/tools"
  cd "$w"
  run env CPUS=1 MEM=100M DEVICE=cpu BIN="$w/tools" DATA_DIR="$w/data" CIFAR10_DIR="$w/cif" RUN_DIR="$w/run" \
    TIME=1 SIGNAL_MARGIN=50 "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  local ids train
  ids=$(job_ids "$output")
  train=$(job_id_of "$output" train)
  # Slurm may signal up to a minute early (here: any time in the first 10 s), and holds a
  # requeued job back for cred_expire (10 s in tests/slurm/run.sh; 120 s by default) before it
  # starts again.
  JOB_WAIT_SECONDS=300 wait_jobs $ids
  for id in $ids; do
    [ "$(job_state "$id")" = COMPLETED ] || { scontrol show job -o "$id"; show_logs "$w/run"; false; }
  done
  [ "$(restarts "$train")" -eq 1 ] || { scontrol show job -o "$train"; false; }
  # Two runs of the same make train: the second resumed the first's checkpoint, which make
  # then renamed to model.h5; the mark of the interruption is gone.
  [ "$(wc -l < "$w/argv/ae-train.runs")" -eq 2 ]
  [ "$(sed -n 1p "$w/argv/ae-train.runs")" = "$(sed -n 2p "$w/argv/ae-train.runs")" ]
  [ "$(cat "$w/run/model.h5")" = "$(printf 'epoch 1\ninterrupted\nresumed\nepoch 2')" ] || { cat "$w/run/model.h5"; false; }
  [ ! -e "$w/run/.train-interrupted" ] && [ -z "$(ls "$w/run"/.model-*.ckpt.h5 2>/dev/null)" ]
  # One log, appended to by both runs.
  local log="$w/run/slurm-logs/$train-train.log"
  grep -q "SIGUSR1: passing it to the resumable tools" "$log"
  grep -q "requeueing job $train (restart 1)" "$log"
  grep -q "interruptible_train: resuming" "$log" || { cat "$log"; false; }
  [ -s "$w/run/report/index.html" ]
}

@test "a stage that fails without a resumable checkpoint fails its job, no requeue" {
  . "$REPO_ROOT/tests/slurm/fake_pipeline_tools.sh"
  local w="$WORK/nonresumable"
  mkdir -p "$w/cif" "$w/argv"
  export ARGV_DIR="$w/argv"
  make_fake_pipeline_tools "$w/tools"
  printf '#!/bin/bash\necho "ae-train: broken" >&2\nexit 1\n' > "$w/tools/ae-train"
  cd "$w"
  run env CPUS=1 MEM=100M DEVICE=cpu BIN="$w/tools" DATA_DIR="$w/data" CIFAR10_DIR="$w/cif" RUN_DIR="$w/run" \
    "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  local train
  train=$(job_id_of "$output" train)
  wait_jobs $(job_ids "$output")
  [ "$(job_state "$train")" = FAILED ] || { scontrol show job -o "$train"; false; }
  [ "$(restarts "$train")" -eq 0 ]
  [ "$(job_state "$(job_id_of "$output" encode)")" = CANCELLED ]
  grep -q "ae-train: broken" "$w/run/slurm-logs/$train-train.log"
}

# Needs ae-train to checkpoint and exit 75 on SIGUSR1 (the contract in the file's comment).
@test "a preempted training requeues, resumes, and ends with the uninterrupted run's model, bit for bit" {
  cd "$WORK"
  local settings=("${SMALL[@]}" EPOCHS=8 BIN="$BIN" DATA_DIR="$WORK/data" CIFAR10_DIR="$CIF" PYTHON="$PYTHON")
  run env "${settings[@]}" RUN_DIR="$WORK/preempted" "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  local out="$output" train ckpt="" deadline
  train=$(job_id_of "$out" train)
  # Preempt once the checkpoint holds an epoch: SIGUSR1 to the batch shell only, as the
  # time limit's --signal=B:USR1 does.
  deadline=$((SECONDS + 180))
  while [ $SECONDS -lt $deadline ]; do
    ckpt=$(ls "$WORK"/preempted/.model-*.ckpt.h5 2>/dev/null | head -1 || true)
    if [ -n "$ckpt" ] && [ "$(h5_attr "$ckpt" epochs_done 2>/dev/null || echo 0)" -ge 1 ]; then break; fi
    sleep 0.2
  done
  [ -n "$ckpt" ] || { show_logs "$WORK/preempted"; false; }
  scancel --signal=USR1 --batch "$train"
  # The requeued job waits cred_expire (BeginTime), then trains the remaining epochs.
  JOB_WAIT_SECONDS=420 wait_jobs $(job_ids "$out")
  for id in $(job_ids "$out"); do
    [ "$(job_state "$id")" = COMPLETED ] || { scontrol show job -o "$id"; show_logs "$WORK/preempted"; false; }
  done
  [ "$(restarts "$train")" -ge 1 ] || { show_logs "$WORK/preempted"; false; }
  grep -q "requeueing job $train" "$WORK/preempted/slurm-logs/$train-train.log"
  grep -Eq "resuming .*\.ckpt\.h5 (after|inside) epoch" "$WORK/preempted/slurm-logs/$train-train.log"

  # The same training, uninterrupted, through the same make target outside Slurm.
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" PREBUILT=1 BIN="$BIN" \
    RUN_DIR="$WORK/straight" DATA_DIR="$WORK/data" CIFAR10_DIR="$CIF" TRAIN_LIMIT=200 TEST_LIMIT=100 EPOCHS=8 \
    BATCH=50 DEVICE=cpu TRAIN_FLAGS="--threads 2" train
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  "$PYTHON" - "$WORK/preempted/model.h5" "$WORK/straight/model.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(f, "r") for f in sys.argv[1:3])
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert any(n.startswith("encoder/") for n in names), names
other = []
b.visititems(lambda n, o: other.append(n) if isinstance(o, h5py.Dataset) else None)
assert sorted(names) == sorted(other), (names, other)
for n in names:
    if n == "history/epoch_seconds":  # wall-clock time, the one thing a resumed run may not repeat
        continue
    x, y = a[n][()], b[n][()]
    assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), n
w = a["encoder/conv1/weight"][()]
assert np.abs(w).sum() > 0
assert a.attrs["epochs_done"] == b.attrs["epochs_done"] == 8
assert len(a["history/train_loss"]) == 8
PY
}

# Needs svm-fit to stop between cross-validation cells on SIGUSR1 and exit 75, and to replay
# them with --resume (kernels/svm/resume.h).
@test "a preempted cross-validated fit requeues, resumes its cells, and ends with the uninterrupted run's model" {
  cd "$WORK"
  local grid="--cv 5 --C 1,10,100 --gamma 0.1x,0.15x,0.225x,0.34x,0.5x,0.75x,scale,1.5x,2.25x,3.4x,5x,7.5x,11x,17x,25x,38x"
  local run="$WORK/fit-preempted"
  # The pipeline's settings, for the jobs and for the local makes alike (the same parameter
  # stamps): make makes the model and features here first, so that the chain's train and
  # encode jobs have nothing to do and the fit job starts within seconds.
  local vars=(DATA_DIR="$WORK/data" CIFAR10_DIR="$CIF" TRAIN_LIMIT=200 TEST_LIMIT=100 EPOCHS=1 BATCH=50
              "TRAIN_FLAGS=--threads 2" "FIT_FLAGS=$grid" DEVICE=cpu SVM_DEVICE=cpu)
  local make_run=(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" PREBUILT=1
                  BIN="$BIN" RUN_DIR="$run" "${vars[@]}")
  run "${make_run[@]}" encode
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  run env "${vars[@]}" CPUS=1 MEM=1G BIN="$BIN" PYTHON="$PYTHON" RUN_DIR="$run" "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  local out="$output" fit deadline
  fit=$(job_id_of "$out" fit)
  # Preempt once svm-fit has run a moment in the fit job: SIGUSR1 to the batch shell only,
  # what the time limit's --signal=B:USR1 sends (run-stage.sh passes it to svm-fit).
  deadline=$((SECONDS + 120))
  until pgrep -f -- "svm-fit .*$run/features.h5" > /dev/null || [ $SECONDS -ge $deadline ]; do sleep 0.1; done
  pgrep -f -- "svm-fit .*$run/features.h5" > /dev/null || { show_logs "$run"; false; }
  sleep 1.5
  scancel --signal=USR1 --batch "$fit"
  # The requeued job waits cred_expire (BeginTime), then fits the remaining cells.
  JOB_WAIT_SECONDS=300 wait_jobs $(job_ids "$out")
  for id in $(job_ids "$out"); do
    [ "$(job_state "$id")" = COMPLETED ] || { scontrol show job -o "$id"; show_logs "$run"; false; }
  done
  local log="$run/slurm-logs/$fit-fit.log"
  [ "$(restarts "$fit")" -eq 1 ] || { cat "$log"; false; }
  grep -q "run-stage: SIGUSR1: passing it to the resumable tools" "$log"
  grep -q "svm-fit: interrupted by SIGUSR1 in the cross-validation" "$log" || { cat "$log"; false; }
  grep -q "requeueing job $fit (restart 1)" "$log"
  grep -Eq "svm-fit: resuming from $run/\.svm-[0-9a-f]{10}\.h5\.resume\.h5: [1-9][0-9]* cross-validation cells" "$log" \
    || { cat "$log"; false; }
  [ -z "$(ls -a "$run" | grep -E '^\.svm-|interrupted' || true)" ] && [ -s "$run/report/index.html" ]

  # The same fit, uninterrupted, through the same make target outside Slurm.
  mv "$run/svm.h5" "$WORK/fit-preempted.h5"
  run "${make_run[@]}" fit
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  [[ "$output" == *"starting from the beginning"* ]]
  "$PYTHON" "$REPO_ROOT/tests/slurm/same_svm_model.py" "$WORK/fit-preempted.h5" "$run/svm.h5" 3 16
}
