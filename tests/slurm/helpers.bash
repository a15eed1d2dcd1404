# Helpers of the cluster tests (tests/slurm/*.bats), run by tests/slurm/run.sh against the
# throwaway Slurm it started (SLURM_CONF, SLURM_TMP exported). Load with `load helpers`.
#
#   SMALL            the settings every chain here uses: a tiny, deterministic CPU run
#   job_ids TEXT     → the job ids of submit.sh's "submitted: convert 5, train 6, …" line
#   wait_jobs ID...  waits (bounded) until none of the jobs is pending or running
#   job_state ID     → COMPLETED, FAILED, CANCELLED, … (from scontrol: there is no accounting)
#   queue_count      → how many jobs the cluster holds in any state
#   h5_attr F A      → attribute A of HDF5 file F
#   learnable_fixture → a folder of CIFAR-10 batches whose labels can be learned (cached)

load ../bats/helpers

[ -n "${SLURM_CONF:-}" ] || { echo "tests/slurm: run me through tests/slurm/run.sh (make test-slurm)" >&2; exit 1; }
JOB_WAIT_SECONDS="${JOB_WAIT_SECONDS:-240}"

# The settings shared by the cluster runs and the local make pipeline they are compared
# with. Threads pinned: the chain's and make's runs must do the same arithmetic. One CPU and
# little memory per job, so the 2-core machine can run two array tasks side by side.
SMALL=(TRAIN_LIMIT=200 TEST_LIMIT=100 EPOCHS=1 BATCH=50 "TRAIN_FLAGS=--threads 2" CPUS=1 MEM=1G DEVICE=cpu)

learnable_fixture() {
  local dir="$FIXTURES/slurm-learnable"
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    "$PYTHON" "$REPO_ROOT/tests/slurm/gen_learnable.py" "$dir.tmp" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir" && touch "$dir/.done"
  fi
  echo "$dir/cifar-10-batches-bin"
}

job_ids() {  # TEXT → "5 6 7 …"
  sed -n 's/^submitted: //p' <<< "$1" | grep -oE '[a-z ]+ [0-9]+' | awk '{print $NF}' | tr '\n' ' '
}

job_id_of() {  # TEXT STAGE → the id of that stage in submit.sh's line
  sed -n 's/^submitted: //p' <<< "$1" | grep -oE "(^|, )$2 [0-9]+" | grep -oE '[0-9]+$'
}

job_state() {
  scontrol show job -o "$1" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2
}

job_reason() {
  scontrol show job -o "$1" 2>/dev/null | grep -oE 'Reason=[^ ]+' | cut -d= -f2
}

wait_jobs() {
  local deadline=$((SECONDS + JOB_WAIT_SECONDS)) id busy
  while :; do
    busy=0
    for id in "$@"; do
      case "$(job_state "$id")" in PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|REQUEUED) busy=1 ;; esac
    done
    [ $busy -eq 0 ] && return 0
    if [ $SECONDS -ge $deadline ]; then
      echo "jobs still busy after ${JOB_WAIT_SECONDS} s:" >&2
      for id in "$@"; do scontrol show job -o "$id" >&2; done
      return 1
    fi
    sleep 0.5
  done
}

queue_count() {
  squeue -h -t all 2>/dev/null | wc -l
}

h5_attr() {
  "$PYTHON" -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs[sys.argv[2]])" "$1" "$2"
}

# Prints every log of a run folder (for a failing test's output).
show_logs() {
  local f
  for f in "$1"/slurm-logs/*.log "$1"/*/slurm-*.log; do
    [ -f "$f" ] && { echo "---- $f"; tail -n 20 "$f"; }
  done
  return 0
}
