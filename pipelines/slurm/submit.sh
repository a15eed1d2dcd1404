#!/usr/bin/env bash
# Submits the CIFAR-10 pipeline as six Slurm batch jobs, each starting only when the one
# before it succeeded (--dependency=afterok). See pipelines/slurm/README.md.
#
#   pipelines/slurm/submit.sh [--dry-run]
#
# Settings (environment variables, with defaults):
#   RUN_DIR=runs/$(date +%Y%m%d-%H%M%S)   folder on a file system every node sees
#   DATASET=data/cifar10.h5               made by the first job unless it exists
#   CIFAR10_DIR=                          local cifar-10-batches-bin or .tar.gz (required
#                                         when DATASET does not exist; nodes have no internet)
#   TRAIN_LIMIT=  EPOCHS=20  BATCH=64     as in `make pipeline`
#   BIN=                                  folder with the tools; empty = they are on PATH
#                                         (make install PREFIX=...), else e.g. $PWD/build/bin
#   PARTITION=  ACCOUNT=                  passed to sbatch when set
#   GPU_GRES=gpu:1                        for the train and encode jobs (and fit/eval when
#   SVM_DEVICE=cpu                        SVM_DEVICE=gpu); the others get CPUs only
#   CPUS=16  MEM=64G                      per job
# --dry-run prints the sbatch commands instead of submitting them.
set -euo pipefail

dry_run=0
[ "${1:-}" = "--dry-run" ] && dry_run=1
[ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && { sed -n '2,22p' "$0"; exit 0; }

RUN_DIR="${RUN_DIR:-runs/$(date +%Y%m%d-%H%M%S)}"
DATASET="${DATASET:-data/cifar10.h5}"
CIFAR10_DIR="${CIFAR10_DIR:-}"
TRAIN_LIMIT="${TRAIN_LIMIT:-}"
EPOCHS="${EPOCHS:-20}"
BATCH="${BATCH:-64}"
GPU_GRES="${GPU_GRES:-gpu:1}"
SVM_DEVICE="${SVM_DEVICE:-cpu}"
CPUS="${CPUS:-16}"
MEM="${MEM:-64G}"
tool() { if [ -n "${BIN:-}" ]; then echo "$BIN/$1"; else echo "$1"; fi; }

if [ $dry_run -eq 0 ]; then
  command -v sbatch >/dev/null || { echo "submit.sh: sbatch not found (not on a Slurm login node?)" >&2; exit 1; }
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
    command -v "$(tool "$t")" >/dev/null || { echo "submit.sh: $(tool "$t") not found: make install, or set BIN" >&2; exit 1; }
  done
fi
[ $dry_run -eq 1 ] || mkdir -p "$RUN_DIR/slurm-logs"

common=(--parsable --chdir="$PWD" --cpus-per-task="$CPUS" --mem="$MEM")
[ -n "${PARTITION:-}" ] && common+=(--partition="$PARTITION")
[ -n "${ACCOUNT:-}" ] && common+=(--account="$ACCOUNT")

# submit NAME AFTER gpu|cpu COMMAND — prints the job id (a placeholder on --dry-run).
submit() {
  local name="$1" after="$2" gpu="$3" cmd="$4" args
  args=("${common[@]}" --job-name="cae-$name" --output="$RUN_DIR/slurm-logs/%j-$name.log")
  [ -n "$after" ] && args+=(--dependency="afterok:$after" --kill-on-invalid-dep=yes)
  [ "$gpu" = gpu ] && args+=(--gres="$GPU_GRES")
  if [ $dry_run -eq 1 ]; then
    printf 'sbatch' >&2; printf ' %q' "${args[@]}" --wrap="$cmd" >&2; echo >&2
    echo "<$name>"
  else
    sbatch "${args[@]}" --wrap="set -e; $cmd"
  fi
}

data_job=""
if [ ! -e "$DATASET" ]; then
  [ -n "$CIFAR10_DIR" ] || { echo "submit.sh: $DATASET does not exist; set CIFAR10_DIR to a local CIFAR-10 copy" >&2; exit 1; }
  data_job=$(submit convert "" cpu "$(tool cifar-convert) --input $CIFAR10_DIR ${TRAIN_LIMIT:+--train-limit $TRAIN_LIMIT} -o $DATASET")
fi
train_job=$(submit train "$data_job" gpu \
  "$(tool ae-train) --data $DATASET --epochs $EPOCHS --batch-size $BATCH --device gpu --resume -o $RUN_DIR/model.h5")
encode_job=$(submit encode "$train_job" gpu \
  "$(tool ae-encode) --model $RUN_DIR/model.h5 --data $DATASET --device gpu -o $RUN_DIR/features.h5")
svm_gpu=cpu; [ "$SVM_DEVICE" = gpu ] && svm_gpu=gpu
fit_job=$(submit fit "$encode_job" "$svm_gpu" \
  "$(tool svm-fit) --features $RUN_DIR/features.h5 --device $SVM_DEVICE -o $RUN_DIR/svm.h5")
eval_job=$(submit eval "$fit_job" "$svm_gpu" \
  "$(tool svm-eval) --model $RUN_DIR/svm.h5 --features $RUN_DIR/features.h5 --device $SVM_DEVICE -o $RUN_DIR/eval.h5")
report_job=$(submit report "$eval_job" cpu "$(tool report) --run-dir $RUN_DIR -o $RUN_DIR/report")

echo "$([ $dry_run -eq 1 ] && echo "dry run, would submit" || echo submitted): ${data_job:+convert $data_job, }train $train_job, encode $encode_job, fit $fit_job, eval $eval_job, report $report_job"
echo "logs in $RUN_DIR/slurm-logs/; the report will be $RUN_DIR/report/index.html"
