#!/usr/bin/env bash
# The batch script of every pipeline job that submit.sh and sweep.sh submit (the job's text
# execs it, so it is the batch shell itself). See pipelines/slurm/README.md, "Preemption".
#
#   run-stage.sh RUN_DIR COMMAND...      COMMAND: the stage's make (lib.sh stage_command)
#
# Slurm's --signal=B:USR1@MARGIN signals the batch shell only, so this script passes
# SIGUSR1 on to the tools that can stop resumably, ae-train and svm-fit: they finish the
# step, cell or fold in progress, write what resumes them and exit 75. Each gets it once,
# and only while it catches SIGUSR1 (SigCgt of /proc/PID/status): a tool that has not yet
# installed its handler (Slurm may send the signal up to a minute early, even before make
# has started the tool) gets it as soon as it has, and a tool that never does (svm-fit
# without --cv or --probability: one fit, nothing to resume) is left to finish inside the
# margin, as the tools that cannot stop are. The stage's rule then leaves RUN_DIR/.STAGE-
# interrupted (make reports any failed recipe as status 2, so the mark, not make's status,
# says "resumable"); this script requeues the job, and the requeued job runs the same make,
# whose tool --resume goes on from where it stopped. Any other failure is the job's.
set -uo pipefail
[ $# -ge 2 ] || { echo "run-stage.sh: usage: run-stage.sh RUN_DIR COMMAND..." >&2; exit 2; }
run_dir="$1"
shift
# The marks say how this make ended: any left by an earlier one are not about it.
rm -f "$run_dir"/.*-interrupted

# Whether process $1 has a handler for SIGUSR1 (signal 10: bit 9 of the SigCgt mask).
catches_usr1() {
  local mask
  mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null) && [ -n "$mask" ] \
    && (( (16#$mask >> 9) & 1 ))
}

# setsid: COMMAND leads a new process group (a background child of a non-interactive shell
# is not a group leader, so setsid execs in place and $! is COMMAND's pid and group id).
setsid "$@" &
stage=$!
preempted=0 signalled=" "
trap 'preempted=1; echo "run-stage: SIGUSR1: passing it to the resumable tools (ae-train, svm-fit)" >&2' USR1

# Polls (a trapped signal interrupts the wait on sleep at once); bash reaps the stage when it
# ends and keeps its status for the wait below.
while kill -0 "$stage" 2>/dev/null; do
  if [ $preempted -eq 1 ]; then
    for pid in $(pgrep -g "$stage" -x 'ae-train|svm-fit'); do
      [[ "$signalled" == *" $pid "* ]] && continue
      catches_usr1 "$pid" || continue
      kill -USR1 "$pid" 2>/dev/null && signalled+="$pid "
    done
  fi
  sleep 0.5 & wait $!
done
wait "$stage"
status=$?

marks=("$run_dir"/.*-interrupted)
if [ $status -ne 0 ] && [ -e "${marks[0]}" ]; then
  stopped="$(basename "${marks[0]}")"; stopped="${stopped#.}"; stopped="${stopped%-interrupted}"
  if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "run-stage: the $stopped stage stopped resumably; run it again to resume" >&2
    exit 75
  fi
  echo "run-stage: the $stopped stage stopped resumably$([ $preempted -eq 1 ] && echo " after SIGUSR1");" \
       "requeueing job $SLURM_JOB_ID (restart $((${SLURM_RESTART_COUNT:-0} + 1)))" >&2
  scontrol requeue "$SLURM_JOB_ID" || { echo "run-stage: scontrol requeue $SLURM_JOB_ID failed" >&2; exit 75; }
  exit 0
fi
exit $status
