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
#   TRAIN_LIMIT=  TEST_LIMIT=             keep the first N images (only when DATASET is made)
#   EPOCHS=20  BATCH=64  SEED=            as in `make pipeline` (SEED empty: ae-train's default)
#   ENCODER_CHANNELS=  VAL_SPLIT=         ae-train --encoder-channels / --val-split (empty: default)
#   TRAIN_FLAGS= ENCODE_FLAGS= FIT_FLAGS= EVAL_FLAGS=   extra options for one stage
#   BIN=                                  folder with the tools; empty = they are on PATH
#                                         (make install PREFIX=...), else e.g. $PWD/build/bin
#   PARTITION=  ACCOUNT=  TIME=           passed to sbatch when set (TIME: --time per job)
#   DEVICE=gpu                            cpu | gpu | auto for train and encode: cpu asks no GPU;
#                                         auto asks GPU_GRES only where the partition has GPUs
#   GPU_GRES=gpu:1                        --gres of the GPU jobs; set empty: no --gres at all
#   SVM_DEVICE=cpu                        cpu | gpu | auto for fit and eval (gpu: GPU_GRES too)
#   CPUS=16  MEM=64G                      per job
# Every job is checked with `sbatch --test-only` before the first is submitted, and the
# chain is submitted held, then released: a refused job leaves nothing in the queue.
# --dry-run prints the sbatch commands instead of submitting them.
set -euo pipefail
SLURM_TOOL=submit.sh
. "$(dirname "$0")/lib.sh"

dry_run=0
[ "${1:-}" = "--dry-run" ] && dry_run=1
[ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && { sed -n '2,28p' "$0"; exit 0; }
case "$#:$dry_run" in 0:0|1:1) ;; *) slurm_die "usage: submit.sh [--dry-run] (settings are environment variables; see --help)" ;; esac

RUN_DIR="${RUN_DIR:-runs/$(date +%Y%m%d-%H%M%S)}"
slurm_settings
stage_commands "$RUN_DIR"

[ $dry_run -eq 1 ] || slurm_check_tools
make_data=0
if [ ! -e "$DATASET" ]; then
  [ -n "$CIFAR10_DIR" ] || slurm_die "$DATASET does not exist; set CIFAR10_DIR to a local CIFAR-10 copy"
  [ -e "$CIFAR10_DIR" ] || slurm_die "CIFAR10_DIR=$CIFAR10_DIR: no such folder or file"
  make_data=1
fi
slurm_common_args

# The jobs: NAME, DEVICE CLASS (gpu: GPU_JOB_GRES; svm: SVM_JOB_GRES; cpu: none), COMMAND.
names=() classes=() cmds=()
add_job() { names+=("$1"); classes+=("$2"); cmds+=("$3"); }
[ $make_data -eq 1 ] && add_job convert cpu "$cmd_convert"
add_job train gpu "$cmd_train"
add_job encode gpu "$cmd_encode"
add_job fit svm "$cmd_fit"
add_job eval svm "$cmd_eval"
add_job report cpu "$cmd_report"

job_args() {  # INDEX AFTER → args=(...) for sbatch
  local i="$1" after="$2" gres=""
  args=("${common[@]}" --job-name="cae-${names[$i]}" --output="$RUN_DIR/slurm-logs/%j-${names[$i]}.log")
  [ -n "$after" ] && args+=(--dependency="afterok:$after" --kill-on-invalid-dep=yes)
  case "${classes[$i]}" in gpu) gres="$GPU_JOB_GRES" ;; svm) gres="$SVM_JOB_GRES" ;; esac
  [ -n "$gres" ] && args+=(--gres="$gres")
  return 0
}

ids=()
if [ $dry_run -eq 1 ]; then
  after=""
  for i in "${!names[@]}"; do
    job_args "$i" "$after"
    printf 'sbatch' >&2; printf ' %q' "${args[@]}" --wrap="${cmds[$i]}" >&2; echo >&2
    ids+=("<${names[$i]}>"); after="<${names[$i]}>"
  done
else
  for i in "${!names[@]}"; do job_args "$i" ""; slurm_test_only "${names[$i]}" "${args[@]}"; done
  mkdir -p "$RUN_DIR/slurm-logs" || slurm_die "$RUN_DIR: cannot create the run folder"
  trap 'slurm_cancel_all; exit 130' INT TERM
  after=""
  for i in "${!names[@]}"; do
    job_args "$i" "$after"
    slurm_submit "${names[$i]}" "${cmds[$i]}" "${args[@]}"
    ids+=("$job_id"); after="$job_id"
  done
  slurm_release
  trap - INT TERM
fi

summary=""
for i in "${!names[@]}"; do summary+="${summary:+, }${names[$i]} ${ids[$i]}"; done
echo "$([ $dry_run -eq 1 ] && echo "dry run, would submit" || echo submitted): $summary"
echo "logs in $RUN_DIR/slurm-logs/; the report will be $RUN_DIR/report/index.html"
