#!/usr/bin/env bash
# The batch script of every pipeline job that submit.sh and sweep.sh submit (the job's text
# execs it, so it is the batch shell itself). See pipelines/slurm/README.md, "Preemption".
#
#   run-stage.sh RUN_DIR COMMAND...      COMMAND: the stage's make (lib.sh stage_command)
#
# Slurm's --signal=B:USR1@MARGIN signals the batch shell only, so this script runs COMMAND
# in a process group of its own and forwards SIGUSR1 to the whole group: make survives it
# (GNU make only toggles its debug output), ae-train writes a resumable checkpoint and exits
# 75. The train rule then leaves RUN_DIR/.train-interrupted (make reports any failed recipe
# as status 2, so the mark, not make's status, says "resumable"); this script requeues the
# job, and the requeued job runs the same make, whose ae-train --resume goes on from the
# checkpoint. Any other failure is the job's failure.
set -uo pipefail
[ $# -ge 2 ] || { echo "run-stage.sh: usage: run-stage.sh RUN_DIR COMMAND..." >&2; exit 2; }
run_dir="$1"
shift
mark="$run_dir/.train-interrupted"

# setsid: COMMAND leads a new process group (a background child of a non-interactive shell
# is not a group leader, so setsid execs in place and $! is COMMAND's pid and group id).
setsid "$@" &
stage=$!
forwarded=0
trap 'forwarded=1; echo "run-stage: SIGUSR1: passing it to the stage" >&2; kill -USR1 -- "-$stage" 2>/dev/null' USR1

# A trapped signal interrupts wait (status > 128) while the stage runs on: wait again.
wait "$stage"
status=$?
while [ $status -gt 128 ] && kill -0 "$stage" 2>/dev/null; do
  wait "$stage"
  status=$?
done
# What the stage left running (a tool still writing its checkpoint) finishes first.
while kill -0 -- "-$stage" 2>/dev/null; do sleep 0.2; done

if [ $status -ne 0 ] && [ -e "$mark" ]; then
  if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "run-stage: the stage stopped with a resumable checkpoint; run it again to resume" >&2
    exit 75
  fi
  echo "run-stage: the stage stopped with a resumable checkpoint$([ $forwarded -eq 1 ] && echo " after SIGUSR1");" \
       "requeueing job $SLURM_JOB_ID (restart $((${SLURM_RESTART_COUNT:-0} + 1)))" >&2
  scontrol requeue "$SLURM_JOB_ID" || { echo "run-stage: scontrol requeue $SLURM_JOB_ID failed" >&2; exit 75; }
  exit 0
fi
exit $status
