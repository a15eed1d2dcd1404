#!/usr/bin/env bash
# make test-slurm: starts a throwaway single-node Slurm on this machine, runs the cluster
# tests (tests/slurm/*.bats) against it, stops it, and prints the closing line
# "N passed, N failed, N skipped" (as tests/run-all.sh). Exit status 0 only when nothing failed.
#
#   BUILD=build bash tests/slurm/run.sh [BATS_FILE...]
#
# Everything lives under one mktemp -d folder: a munge key and munged (its own socket, pid,
# log and seed files), slurm.conf, slurmctld's state, slurmd's spool, the daemons' logs.
# No systemd is needed: proctrack/linuxproc and task/none track jobs by process tree
# without cgroups. The daemons are stopped by the pids in their own pid files, never by name.
# Without slurm-wlm/munge (or not as root) the tests are skipped, except under CI=true,
# where a missing Slurm is a failure: CI must exercise the cluster path.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO_ROOT="$PWD"
BUILD="${BUILD:-build}"
export BUILD PYTHON="${PYTHON:-/usr/bin/python3}"
WAIT_IDLE_SECONDS=60

skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "test-slurm: $1 (under CI a missing Slurm is a failure: make deps installs slurm-wlm and munge)" >&2
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  echo "test-slurm: skipped: $1"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
}

for cmd in munged munge slurmctld slurmd sbatch squeue sinfo scontrol scancel bats; do
  command -v "$cmd" >/dev/null 2>&1 || skip_or_fail "$cmd not found (make deps installs slurm-wlm, munge and bats)"
done
# slurmd must run as root to start jobs (it switches to the submitting user).
[ "$(id -u)" -eq 0 ] || skip_or_fail "slurmd needs root, and this is uid $(id -u)"
for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
  [ -x "$BUILD/bin/$t" ] || { echo "test-slurm: $BUILD/bin/$t not built (make BUILD=$BUILD all)" >&2
                              echo "0 passed, 1 failed, 0 skipped"; exit 1; }
done

# Inside the cluster the tests submit from (and the jobs run in) folders under $SLURM_TMP.
SLURM_TMP="$(mktemp -d "${TMPDIR:-/tmp}/cae-slurm.XXXXXX")"
# munged refuses a socket in a folder that others cannot traverse ("execute permissions for
# all required"), and mktemp -d gives 0700.
chmod 0711 "$SLURM_TMP"
mkdir -m 0755 "$SLURM_TMP/run"
mkdir -p "$SLURM_TMP/state" "$SLURM_TMP/spool" "$SLURM_TMP/log" "$SLURM_TMP/jobs"
export SLURM_TMP SLURM_CONF="$SLURM_TMP/slurm.conf"

# The daemons' pids, read from their pid files once they have written them.
pid_of() { [ -s "$SLURM_TMP/run/$1.pid" ] && cat "$SLURM_TMP/run/$1.pid"; }

stop_daemon() {  # NAME: SIGTERM by its pid file, then wait (bounded), then SIGKILL
  local pid
  pid=$(pid_of "$1") || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  echo "test-slurm: $1 (pid $pid) did not stop in 10 s; killing it" >&2
  kill -KILL "$pid" 2>/dev/null
}

cleanup() {
  # Jobs first (their slurmstepd's outlive slurmd otherwise), then the daemons, then munged.
  if [ -n "$(pid_of slurmctld)" ]; then
    scancel --full --quiet --user=root 2>/dev/null
    for _ in $(seq 50); do [ -z "$(squeue -h -t running,completing 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  rm -rf "$SLURM_TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

print_logs() {
  for f in "$SLURM_TMP"/log/*.log "$SLURM_TMP"/munged.log; do
    [ -f "$f" ] || continue
    echo "---- $f (last 30 lines)" >&2
    tail -n 30 "$f" >&2
  done
}

fail_setup() {
  echo "test-slurm: $1" >&2
  print_logs
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
}

# ---- munge ------------------------------------------------------------------------------
dd if=/dev/urandom bs=1 count=1024 of="$SLURM_TMP/munge.key" 2>/dev/null
chmod 0400 "$SLURM_TMP/munge.key"
munged --socket="$SLURM_TMP/run/munged.sock" --key-file="$SLURM_TMP/munge.key" \
  --pid-file="$SLURM_TMP/run/munged.pid" --log-file="$SLURM_TMP/munged.log" \
  --seed-file="$SLURM_TMP/munged.seed" || fail_setup "munged did not start"
munge -S "$SLURM_TMP/run/munged.sock" -n | unmunge -S "$SLURM_TMP/run/munged.sock" >/dev/null \
  || fail_setup "munge cannot encode and decode a credential with its own daemon"

# ---- slurm.conf -------------------------------------------------------------------------
# Ports chosen free now, so a system Slurm (6817/6818) or a second test run is no conflict.
read -r CTLD_PORT SLURMD_PORT < <("$PYTHON" - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
PY
)
[ -n "${SLURMD_PORT:-}" ] || fail_setup "could not find two free TCP ports"
NODE="$(hostname -s)"
CPUS="$(nproc)"
# A bit below the free memory: a node that claims more than it has is drained at start.
FREE_MB="$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)"
REAL_MB=$((FREE_MB * 8 / 10))
[ "$REAL_MB" -gt 0 ] || REAL_MB=1000
cat > "$SLURM_CONF" <<EOF
# A throwaway single-node cluster written by tests/slurm/run.sh.
ClusterName=caetest
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire also holds a requeued job back (BeginTime): 120 s by default, three requeues
# in preempt.bats; 10 s is plenty for a local credential.
AuthInfo=socket=$SLURM_TMP/run/munged.sock,cred_expire=10
CredType=cred/munge
MpiDefault=none
# No systemd and no cgroup hierarchy of our own: follow jobs by their process tree.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# A test cluster answers at once: the main loop every second (default 60 s) and backfill
# every second (default 30 s), so a requeued job starts when cred_expire ends and a job
# whose dependency is met starts without waiting for the next periodic pass.
SchedulerParameters=sched_interval=1,bf_interval=1
ReturnToService=2
SlurmctldPidFile=$SLURM_TMP/run/slurmctld.pid
SlurmdPidFile=$SLURM_TMP/run/slurmd.pid
StateSaveLocation=$SLURM_TMP/state
SlurmdSpoolDir=$SLURM_TMP/spool
SlurmctldLogFile=$SLURM_TMP/log/slurmctld.log
SlurmdLogFile=$SLURM_TMP/log/slurmd.log
SlurmctldTimeout=20
SlurmdTimeout=20
MessageTimeout=10
KillWait=5
InactiveLimit=0
# Finished jobs stay visible to scontrol/squeue for 10 minutes (there is no accounting).
MinJobAge=600
NodeName=$NODE CPUs=$CPUS RealMemory=$REAL_MB State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

# ---- daemons ----------------------------------------------------------------------------
# -i: ignore any state a crashed earlier run could have left (there is none: a new folder).
slurmctld -i -f "$SLURM_CONF" || fail_setup "slurmctld did not start"
slurmd -f "$SLURM_CONF" || fail_setup "slurmd did not start"
state=""
for _ in $(seq $((WAIT_IDLE_SECONDS * 2))); do
  state="$(sinfo -h -n "$NODE" -o %t 2>/dev/null)"
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail_setup "node $NODE not idle after ${WAIT_IDLE_SECONDS} s (state '${state:-no answer}')"
echo "test-slurm: single-node Slurm up in $SLURM_TMP (node $NODE, $CPUS CPUs, ${REAL_MB} MB, ports $CTLD_PORT/$SLURMD_PORT)"

# ---- tests ------------------------------------------------------------------------------
passed=0 failed=0 skipped=0
log_dir="$BUILD/test-logs"
mkdir -p "$log_dir"
files=("$@")
[ ${#files[@]} -eq 0 ] && files=(tests/slurm/*.bats)
for f in "${files[@]}"; do
  echo "== $f"
  log="$log_dir/slurm-$(basename "$f").log"
  bats --formatter tap "$f" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(grep -cE '^ok [0-9]+' "$log")
  s=$(grep -cE '^ok [0-9]+ .*# skip' "$log")
  n=$(grep -cE '^not ok [0-9]+' "$log")
  passed=$((passed + p - s)); skipped=$((skipped + s)); failed=$((failed + n))
  [ "$rc" -ne 0 ] && [ "$n" -eq 0 ] && failed=$((failed + 1))  # failed to load
done
[ "$failed" -eq 0 ] || print_logs

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
