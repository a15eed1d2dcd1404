#!/usr/bin/env bats
# pipelines/slurm/submit.sh on a real single-node Slurm (issue 18), started by
# tests/slurm/run.sh: the CPU chain (each job a stage's make target) completes and agrees
# with make pipeline; a GPU chain on
# this GPU-less cluster is refused before anything is queued; a failing stage cancels the
# stages after it; a cancelled training resumes when the chain is submitted again.
# The tests share one dataset and run in order (the later ones reuse the first run's model).

load helpers

setup_file() {
  export WORK="$BATS_FILE_TMPDIR/work"
  mkdir -p "$WORK/data"
  export CIF="$(learnable_fixture)"
}

setup() {
  cd "$WORK"
}

# submit.sh with the small CPU settings; extra VAR=VALUE arguments override them.
submit() {
  env "${SMALL[@]}" BIN="$BIN" DATA_DIR="$WORK/data" CIFAR10_DIR="$CIF" PYTHON="$PYTHON" "$@" \
    "$REPO_ROOT/pipelines/slurm/submit.sh"
}

@test "the CPU chain completes, and its eval.h5 equals a local make pipeline's" {
  run submit RUN_DIR="$WORK/chain"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" == *"submitted: convert "*", train "*", report "* ]]
  ids=$(job_ids "$output")
  [ "$(wc -w <<< "$ids")" -eq 6 ]
  wait_jobs $ids
  for id in $ids; do
    [ "$(job_state "$id")" = COMPLETED ] || { scontrol show job -o "$id"; show_logs "$WORK/chain"; false; }
  done
  [ -s "$WORK/chain/eval.h5" ] && [ -s "$WORK/chain/report/index.html" ]
  # One log per job, each named by its job id and stage.
  [ "$(ls "$WORK/chain/slurm-logs" | wc -l)" -eq 6 ]
  ls "$WORK/chain/slurm-logs" | grep -qE '^[0-9]+-train\.log$'

  # The same settings through make pipeline, on this machine, outside Slurm.
  run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$REPO_ROOT" PREBUILT=1 \
    BUILD="$BUILD" PYTHON="$PYTHON" RUN_DIR="$WORK/local" DATA_DIR="$WORK/local-data" CIFAR10_DIR="$CIF" \
    TRAIN_LIMIT=200 TEST_LIMIT=100 EPOCHS=1 BATCH=50 DEVICE=cpu TRAIN_FLAGS="--threads 2" pipeline
  [ "$status" -eq 0 ] || { echo "$output" | tail -20; false; }
  "$PYTHON" - "$WORK/chain" "$WORK/local" <<'PY'
import sys, h5py, numpy as np
slurm, local = (h5py.File(f"{d}/eval.h5", "r") for d in sys.argv[1:3])
p, q = slurm["predictions"][()], local["predictions"][()]
assert len(p) == 100 and len(set(p.tolist())) > 1, p          # a real prediction, not a constant
assert slurm.attrs["accuracy"] > 0.3, slurm.attrs["accuracy"]  # learned (chance: 0.1)
assert np.array_equal(p, q), (p, q)
assert np.array_equal(slurm["labels"][()], local["labels"][()])
assert slurm.attrs["accuracy"] == local.attrs["accuracy"]
ms, ml = (h5py.File(f"{d}/model.h5", "r") for d in sys.argv[1:3])
w = "encoder/conv1/weight"
assert np.array_equal(ms[w][()], ml[w][()]) and np.abs(ms[w][()]).sum() > 0
PY
}

@test "a GPU chain on this GPU-less cluster is refused before anything is submitted" {
  before=$(queue_count)
  run submit RUN_DIR="$WORK/gpu" DEVICE=gpu
  [ "$status" -eq 1 ]
  [[ "$output" == *"train job would be refused, nothing submitted"* ]] || { echo "$output"; false; }
  [[ "$output" == *"gres"* ]]
  [ "$(queue_count)" -eq "$before" ]
  [ ! -e "$WORK/gpu" ]
  # An impossible request on a CPU job (more CPUs than the node has) is refused the same way.
  run submit RUN_DIR="$WORK/gpu" CPUS=64
  [ "$status" -eq 1 ]
  [[ "$output" == *"job would be refused, nothing submitted"* ]] || { echo "$output"; false; }
  [ "$(queue_count)" -eq "$before" ]
}

@test "a failing stage fails its job, cancels the jobs after it, and its log names the problem" {
  # The chain's finished model with its parameter stamp (copied first, so the model is
  # newer): make train has nothing to do.
  mkdir -p "$WORK/bad-fit/.params"
  cp "$WORK"/chain/.params/train-*.params "$WORK/bad-fit/.params/"
  cp "$WORK/chain/model.h5" "$WORK/bad-fit/"
  run submit RUN_DIR="$WORK/bad-fit" FIT_FLAGS="--no-such-flag 3"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  out="$output"
  wait_jobs $(job_ids "$out")
  [ "$(job_state "$(job_id_of "$out" train)")" = COMPLETED ]
  [ "$(job_state "$(job_id_of "$out" encode)")" = COMPLETED ]
  fit=$(job_id_of "$out" fit)
  [ "$(job_state "$fit")" = FAILED ] || { show_logs "$WORK/bad-fit"; false; }
  for stage in eval report; do
    id=$(job_id_of "$out" $stage)
    [ "$(job_state "$id")" = CANCELLED ] || { scontrol show job -o "$id"; false; }
    [ "$(job_reason "$id")" = DependencyNeverSatisfied ]
  done
  grep -q -- "--no-such-flag" "$WORK/bad-fit/slurm-logs/$fit-fit.log"
  grep -q "svm-fit" "$WORK/bad-fit/slurm-logs/$fit-fit.log"
  [ ! -e "$WORK/bad-fit/svm.h5" ] && [ ! -e "$WORK/bad-fit/eval.h5" ]
}

@test "a training cancelled mid-way resumes from its last checkpoint when the chain is submitted again" {
  run submit RUN_DIR="$WORK/resume" EPOCHS=3
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  first="$output"
  train=$(job_id_of "$first" train)
  # Cancel as soon as the first epoch's checkpoint is there (and before the last).
  deadline=$((SECONDS + 120)) done_epochs=0 ckpt=""
  while [ $SECONDS -lt $deadline ]; do
    ckpt=$(ls "$WORK"/resume/.model-*.ckpt.h5 2>/dev/null | head -1 || true)
    if [ -n "$ckpt" ]; then
      done_epochs=$(h5_attr "$ckpt" epochs_done 2>/dev/null || echo 0)
      [ "${done_epochs:-0}" -ge 1 ] && break
    fi
    [ "$(job_state "$train")" = COMPLETED ] && break
    sleep 0.2
  done
  scancel "$train"
  wait_jobs $(job_ids "$first")
  [ "$(job_state "$train")" = CANCELLED ] || { echo "train ended $(job_state "$train") before the cancel"; false; }
  # The job reads CANCELLED at once; ae-train (a SIGTERM is a preemption) first finishes its
  # step and saves: wait for it before reading what the checkpoint holds.
  for i in $(seq 1 300); do pgrep -f -- "ae-train.*$(basename "$ckpt")" > /dev/null || break; sleep 0.1; done
  done_epochs=$(h5_attr "$ckpt" epochs_done)
  [ "$done_epochs" -ge 1 ] && [ "$done_epochs" -lt 3 ]
  # Its dependents were cancelled with it.
  [ "$(job_state "$(job_id_of "$first" encode)")" = CANCELLED ]

  run submit RUN_DIR="$WORK/resume" EPOCHS=3
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" != *convert* ]]   # the dataset is there now
  second="$output"
  wait_jobs $(job_ids "$second")
  for id in $(job_ids "$second"); do [ "$(job_state "$id")" = COMPLETED ] || { show_logs "$WORK/resume"; false; }; done
  train2=$(job_id_of "$second" train)
  # The checkpoint holds the epochs done, or a point inside the next.
  grep -Eq "resuming $ckpt (after epoch $done_epochs |inside epoch $((done_epochs + 1)),)" \
    "$WORK/resume/slurm-logs/$train2-train.log" || { cat "$WORK/resume/slurm-logs/$train2-train.log"; false; }
  [ "$(h5_attr "$WORK/resume/model.h5" epochs_done)" -eq 3 ]
  "$PYTHON" -c "import h5py, sys; assert len(h5py.File(sys.argv[1], 'r')['history/train_loss']) == 3" "$WORK/resume/model.h5"
  [ -s "$WORK/resume/report/index.html" ]
}
