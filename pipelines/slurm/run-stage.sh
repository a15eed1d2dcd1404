#!/usr/bin/env bash
# The batch script of every pipeline job that submit.sh and sweep.sh submit (the job's text
# execs it, so it is the batch shell itself). See pipelines/slurm/README.md, "Preemption".
#
#   run-stage.sh RUN_DIR COMMAND...      COMMAND: the stage's make (lib.sh stage_command)
#
# Slurm's --signal=B:USR1@MARGIN signals the batch shell only, so this script passes
# SIGUSR1 on to ae-train, the one tool that can stop resumably: it writes a checkpoint and
# exits 75. Only to ae-train: the other tools would die of it, and a sweep task near its
# limit may still finish its short SVM stages. Slurm may send the signal up to a minute early,
# even before make has started ae-train, so from the signal on each ae-train process of
# the stage gets it once, as soon as it runs. The train rule then leaves RUN_DIR/.train-
# interrupted (make reports any failed recipe as status 2, so the mark, not make's status,
# says "resumable"); this script requeues the job, and the requeued job runs the same make,
# whose ae-train --resume goes on from the checkpoint. Any other failure is the job's.
set -uo pipefail
[ $# -ge 2 ] || { echo "run-stage.sh: usage: run-stage.sh RUN_DIR COMMAND..." >&2; exit 2; }
run_dir="$1"
shift
mark="$run_dir/.train-interrupted"

# setsid: COMMAND leads a new process group (a background child of a non-interactive shell
# is not a group leader, so setsid execs in place and $! is COMMAND's pid and group id).
setsid "$@" &
stage=$!
preempted=0 signalled=" "
trap 'preempted=1; echo "run-stage: SIGUSR1: passing it to the training" >&2' USR1

# Polls (a trapped signal interrupts the wait on sleep at once); bash reaps the stage when it
# ends and keeps its status for the wait below.
while kill -0 "$stage" 2>/dev/null; do
  if [ $preempted -eq 1 ]; then
    for pid in $(pgrep -g "$stage" -x ae-train); do
      [[ "$signalled" == *" $pid "* ]] && continue
      kill -USR1 "$pid" 2>/dev/null && signalled+="$pid "
    done
  fi
  sleep 0.5 & wait $!
done
wait "$stage"
status=$?

if [ $status -ne 0 ] && [ -e "$mark" ]; then
  if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "run-stage: the stage stopped with a resumable checkpoint; run it again to resume" >&2
    exit 75
  fi
  echo "run-stage: the stage stopped with a resumable checkpoint$([ $preempted -eq 1 ] && echo " after SIGUSR1");" \
       "requeueing job $SLURM_JOB_ID (restart $((${SLURM_RESTART_COUNT:-0} + 1)))" >&2
  scontrol requeue "$SLURM_JOB_ID" || { echo "run-stage: scontrol requeue $SLURM_JOB_ID failed" >&2; exit 75; }
  exit 0
fi
exit $status
