#!/usr/bin/env bash
# Submits the pipeline of pipelines/pipeline.mk as six Slurm batch jobs, each running one
# stage's Make target (make data, train, encode, fit, eval, report with PREBUILT=1) and
# starting only when the one before it succeeded (--dependency=afterok). See
# pipelines/slurm/README.md.
#
#   pipelines/slurm/submit.sh [--dry-run]
#
# Settings (environment variables; each becomes the Make variable of the same name, so it
# means what it means for make pipeline; unset ones keep make's defaults):
#   RUN_DIR=runs/$(date +%Y%m%d-%H%M%S)   folder on a file system every node sees
#   DATASET=cifar10  DATA_DIR=data         the dataset, $DATA_DIR/$DATASET.h5 (datasets.mk);
#                                         a data job makes it unless it is up to date
#   CIFAR10_DIR= (FASHION_MNIST_DIR MNIST_DIR CIFAR100_DIR FOLDER ...)  a local copy of the
#                                         images (unset: the data job downloads them)
#   TRAIN_LIMIT=  TEST_LIMIT=  PRESET=    as in make pipeline
#   EPOCHS  BATCH  SEED  ENCODER_CHANNELS  VAL_SPLIT  VIEWS   as in make pipeline
#   TRAIN_FLAGS= ENCODE_FLAGS= FIT_FLAGS= EVAL_FLAGS=   extra options for one stage
#   BIN=                                  folder with the tools; empty = where PATH finds
#                                         them here (make install PREFIX=...)
#   PARTITION=  ACCOUNT=  TIME=           passed to sbatch when set (TIME: --time per job)
#   SIGNAL_MARGIN=300                     the train and fit jobs get SIGUSR1 this many seconds
#                                         before TIME runs out, save, requeue and resume
#   DEVICE=gpu                            cpu | gpu | auto for train and encode: cpu asks no GPU;
#                                         auto asks GPU_GRES only where the partition has GPUs
#   GPU_GRES=gpu:1                        --gres of the GPU jobs; set empty: no --gres at all
#   SVM_DEVICE=cpu                        cpu | gpu | auto for fit and eval (gpu: GPU_GRES too)
#   CPUS=16  MEM=64G                      per job
# The nodes need this repository, GNU make and BIN at the same paths. Every job is checked
# with `sbatch --test-only` before the first is submitted, and the chain is submitted held,
# then released: a refused job leaves nothing in the queue. --dry-run prints the sbatch
# commands instead of submitting them.
set -euo pipefail
SLURM_TOOL=submit.sh
. "$(dirname "$0")/lib.sh"

dry_run=0
[ "${1:-}" = "--dry-run" ] && dry_run=1
[ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] && { sed -n '2,33p' "$0"; exit 0; }
case "$#:$dry_run" in 0:0|1:1) ;; *) slurm_die "usage: submit.sh [--dry-run] (settings are environment variables; see --help)" ;; esac

RUN_DIR="${RUN_DIR:-runs/$(date +%Y%m%d-%H%M%S)}"
slurm_settings
RUN_DIR="$(abs_path "$RUN_DIR")"
make_safe_path RUN_DIR "$RUN_DIR"
[ $dry_run -eq 1 ] || slurm_check_tools
slurm_check_data
slurm_common_args

# The jobs: NAME, DEVICE CLASS (gpu: GPU_JOB_GRES; svm: SVM_JOB_GRES; cpu: none), MAKE TARGET.
names=() classes=() cmds=()
add_job() { names+=("$1"); classes+=("$2"); cmds+=("$(stage_command "$RUN_DIR" "$3")"); }
[ $need_data -eq 1 ] && add_job convert cpu data
add_job train gpu train
add_job encode gpu encode
add_job fit svm fit
add_job eval svm eval
add_job report cpu report

job_args() {  # INDEX AFTER → args=(...) for sbatch
  local i="$1" after="$2" gres=""
  args=("${common[@]}" --job-name="cae-${names[$i]}" --output="$RUN_DIR/slurm-logs/%j-${names[$i]}.log")
  [ -n "$after" ] && args+=(--dependency="afterok:$after" --kill-on-invalid-dep=yes)
  case "${classes[$i]}" in gpu) gres="$GPU_JOB_GRES" ;; svm) gres="$SVM_JOB_GRES" ;; esac
  [ -n "$gres" ] && args+=(--gres="$gres")
  case "${names[$i]}" in train|fit) args+=("${preempt_args[@]}") ;; esac
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
