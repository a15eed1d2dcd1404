#!/bin/bash
# A stand-in for ae-train that keeps the checkpoint contract of a preemptible training
# (tests/slurm/preempt.bats, the Slurm plumbing case): ae-train ... --resume -o CKPT.
#   no CKPT yet: writes "epoch 1" to CKPT, then waits (at most 120 s) for SIGUSR1, on which
#                it appends "interrupted" and exits 75 (resumable checkpoint written)
#   CKPT exists: appends "resumed" and "epoch 2" to it and exits 0 (training done)
# Each run appends its arguments (one line, %q) to $ARGV_DIR/ae-train.runs.
printf '%q ' "$@" >> "$ARGV_DIR/ae-train.runs"; echo >> "$ARGV_DIR/ae-train.runs"
ckpt="" resume=0
while [ $# -gt 0 ]; do
  case "$1" in -o) ckpt="$2"; shift ;; --resume) resume=1 ;; esac
  shift
done
[ -n "$ckpt" ] && [ $resume -eq 1 ] || { echo "interruptible_train: needs --resume -o CKPT" >&2; exit 2; }
if [ -e "$ckpt" ]; then
  echo "interruptible_train: resuming $ckpt"
  printf 'resumed\nepoch 2\n' >> "$ckpt"
  exit 0
fi
echo "epoch 1" > "$ckpt"
trap 'echo interrupted >> "$ckpt"; echo "interruptible_train: SIGUSR1: checkpoint written, exiting 75"; exit 75' USR1
echo "interruptible_train: epoch 1 written; waiting for SIGUSR1"
: > "$ARGV_DIR/ae-train.waiting"
for _ in $(seq 600); do sleep 0.2; done
echo "interruptible_train: no SIGUSR1 in 120 s" >&2
exit 1
