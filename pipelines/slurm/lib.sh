# pipelines/slurm/lib.sh — shared by submit.sh and sweep.sh (sourced, not run): the
# shellcheck shell=bash disable=SC2034  # sourced: the variables it sets are the callers'
# settings, the stage commands, which jobs ask for a GPU, and submitting a set of jobs
# all-or-nothing. See pipelines/slurm/README.md.

slurm_die() { echo "$SLURM_TOOL: $*" >&2; exit 1; }

# Every string from the user (environment, settings file) that reaches a job script or
# --wrap goes through q (a Make variable through make_var, which quotes for make too):
# generated shell text never carries a user string as code. Splitting *_FLAGS into words,
# each quoted, is pipeline.mk's (pl_words), the same for make pipeline and a job.
# One shell word, quoted so that the job's shell reads it back unchanged (newlines, $, `, ;):
# as it is when it holds only safe characters, else in single quotes (each ' written '\'').
# POSIX quoting, not printf %q: sbatch --wrap runs under /bin/sh, which reads bash's $'...'
# as a literal $ and backslash escapes.
q() {
  case "$1" in
    '' ) printf "''" ;;
    *[!A-Za-z0-9_./:=,+@%-]*) printf "'%s'" "${1//\'/\'\\\'\'}" ;;
    *) printf '%s' "$1" ;;
  esac
}

# A tool of BIN (slurm_settings resolves it), quoted.
tool() { q "$BIN/$1"; }

# The repository whose Makefile the jobs run (pipelines/pipeline.mk): the nodes need it,
# GNU make and the tools (BIN) at the same paths.
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# The pipeline's settings that the jobs pass to make as variables (when set and not empty;
# unset ones keep pipeline.mk's and datasets.mk's defaults, which depend on DATASET).
PIPELINE_VARS=(DATASET DATA_DIR CIFAR10_DIR FASHION_MNIST_DIR MNIST_DIR CIFAR100_DIR CIFAR100_LABELS FOLDER
               FOLDER_IMAGE_SIZE FOLDER_COLOR CONVERT_FLAGS TRAIN_LIMIT TEST_LIMIT PRESET EPOCHS BATCH SEED
               ENCODER_CHANNELS VAL_SPLIT VIEWS TRAIN_FLAGS ENCODE_FLAGS FIT_FLAGS EVAL_FLAGS DEVICE SVM_DEVICE)
# The settings that are paths: made absolute (the jobs run make in REPO_ROOT), and limited
# to characters make can name as a file (no blanks, no : ; # $ % * ? [ ] \ = ' ").
PATH_VARS=(DATA_DIR CIFAR10_DIR FASHION_MNIST_DIR MNIST_DIR CIFAR100_DIR FOLDER BIN)

abs_path() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s' "$PWD/${1#./}" ;; esac; }

make_safe_path() {  # NAME VALUE: dies unless make can name VALUE as a file
  [[ "$2" =~ ^[A-Za-z0-9_./+,@~-]+$ ]] \
    || slurm_die "$1=$2: the pipeline is Make rules, and a path with characters other than letters, digits and _ . / + , @ ~ - cannot be a Make file name"
}

# Defaults and checks of the settings every chain shares (environment variables).
slurm_settings() {
  local v val
  DATA_DIR="${DATA_DIR:-data}"
  # gpu by default: a GPU cluster needs no setting; a CPU-only one sets DEVICE=cpu (or auto).
  DEVICE="${DEVICE:-gpu}"
  # Unset: one GPU per GPU job; set but empty: no --gres at all (clusters that hand out GPUs
  # by partition, or none).
  GPU_GRES="${GPU_GRES-gpu:1}"
  SVM_DEVICE="${SVM_DEVICE:-cpu}"
  CPUS="${CPUS:-16}"
  MEM="${MEM:-64G}"
  TIME="${TIME:-}"
  # Seconds before the time limit at which a training or a cross-validated fit is told
  # (SIGUSR1) to save what resumes it and stop; its job then requeues itself and resumes.
  SIGNAL_MARGIN="${SIGNAL_MARGIN:-300}"
  case "$DEVICE" in cpu|gpu|auto) ;; *) slurm_die "DEVICE=$DEVICE: expected cpu, gpu or auto" ;; esac
  case "$SVM_DEVICE" in cpu|gpu|auto) ;; *) slurm_die "SVM_DEVICE=$SVM_DEVICE: expected cpu, gpu or auto" ;; esac
  [ "$DEVICE" = cpu ] && [ "$SVM_DEVICE" != cpu ] && slurm_die "DEVICE=cpu but SVM_DEVICE=$SVM_DEVICE: a CPU-only chain runs the SVM on the CPU too"
  [ -z "${EPOCHS:-}" ] || [[ "$EPOCHS" =~ ^[0-9]+$ ]] || slurm_die "EPOCHS=$EPOCHS: expected a whole number"
  [ -z "${BATCH:-}" ] || [[ "$BATCH" =~ ^[1-9][0-9]*$ ]] || slurm_die "BATCH=$BATCH: expected a positive whole number"
  [[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || slurm_die "CPUS=$CPUS: expected a positive whole number"
  [[ "$SIGNAL_MARGIN" =~ ^[1-9][0-9]*$ ]] || slurm_die "SIGNAL_MARGIN=$SIGNAL_MARGIN: expected a positive whole number of seconds"
  # The tools: BIN, else where PATH finds them now (the nodes need them at the same path),
  # else (a --dry-run without them) this repository's build.
  if [ -z "${BIN:-}" ]; then
    BIN="$(dirname "$(command -v ae-train 2>/dev/null || echo "$REPO_ROOT/build/bin/ae-train")")"
  fi
  # Make splits a recipe at newlines, so a value reaches make on one line: the *_FLAGS are
  # words anyway (blanks, tabs and newlines separate them alike), any other value with a
  # newline is refused.
  for v in "${PIPELINE_VARS[@]}"; do
    case "$v" in
      *_FLAGS) val="${!v:-}"; printf -v "$v" '%s' "${val//[$'\t\n']/ }" ;;
      *) [[ "${!v:-}" != *$'\n'* ]] || slurm_die "$v holds a newline: a pipeline setting is one line" ;;
    esac
  done
  for v in "${PATH_VARS[@]}"; do
    [ -n "${!v:-}" ] || continue
    make_safe_path "$v" "${!v}"
    printf -v "$v" '%s' "$(abs_path "${!v}")"
  done
  GPU_JOB_GRES="$(gpu_gres "$DEVICE")"
  SVM_JOB_GRES="$(gpu_gres "$SVM_DEVICE")"
}
# The --gres a job running with --device $1 asks for ("" = none). cpu: none. gpu: GPU_GRES.
# auto: GPU_GRES unless sinfo says the partition's nodes have no GPU GRES, so that
# the same command works on CPU-only and GPU clusters; the tools then pick the device.
gpu_gres() {
  case "$1" in
    cpu) echo "" ;;
    gpu) echo "$GPU_GRES" ;;
    auto)
      # Only a clear answer from sinfo without any GPU GRES drops the request; with no
      # sinfo (a --dry-run away from Slurm) the command shows what a GPU cluster gets.
      local gres
      if [ -n "$GPU_GRES" ] && gres=$(sinfo -h ${PARTITION:+--partition="$PARTITION"} -o %G 2>/dev/null) \
         && ! grep -q gpu <<< "$gres"; then
        echo ""
      else
        echo "$GPU_GRES"
      fi ;;
  esac
}

# One Make variable assignment as one shell word: $ doubled (make expands a command-line
# value once, so $(shell ...) in a setting stays text), then quoted by q.
make_var() { q "$1=${2//\$/\$\$}"; }

# The job text (for --wrap, or a job script) that runs one stage of pipelines/pipeline.mk:
# make TARGET in REPO_ROOT with PREBUILT=1 (nothing is built on a node) and every setting as
# a Make variable, under run-stage.sh (SIGUSR1 forwarding, requeue on a resumable stop).
# So a job runs exactly what `make TARGET` runs: the dataset, preset, parameter stamps and
# checkpoints mean the same everywhere. $1 = the run folder, $2 = the target.
stage_command() {
  local run_dir make_cmd v
  run_dir="$(abs_path "$1")"
  make_safe_path RUN_DIR "$run_dir"
  make_cmd="make -C $(q "$REPO_ROOT") --no-print-directory PREBUILT=1 $(q "$2") $(make_var RUN_DIR "$run_dir") $(make_var BIN "$BIN")"
  for v in "${PIPELINE_VARS[@]}"; do
    [ -n "${!v:-}" ] && make_cmd+=" $(make_var "$v" "${!v}")"
  done
  printf 'exec bash %s %s %s' "$(q "$REPO_ROOT/pipelines/slurm/run-stage.sh")" "$(q "$run_dir")" "$make_cmd"
}

# Asks make (here, before anything is submitted) whether the dataset is up to date for these
# settings; also the first check of the settings themselves (an unknown DATASET or PRESET).
# Sets need_data=1 when a data job must make it.
slurm_check_data() {
  local args=() v out rc
  for v in "${PIPELINE_VARS[@]}"; do [ -n "${!v:-}" ] && args+=("$v=${!v//\$/\$\$}"); done
  rc=0
  out="$(cd "$REPO_ROOT" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -q --no-print-directory PREBUILT=1 \
         BIN="$BIN" "${args[@]}" data 2>&1)" || rc=$?
  case $rc in
    0) need_data=0 ;;
    1) need_data=1 ;;
    *) slurm_die "the pipeline refuses these settings: $(printf '%s' "$out" | tr '\n' ' ' | sed 's/ *$//')" ;;
  esac
}

slurm_check_tools() {
  command -v sbatch >/dev/null || slurm_die "sbatch not found (not on a Slurm login node?)"
  command -v make >/dev/null || slurm_die "make not found (the jobs run the pipeline's Make rules)"
  local t
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
    [ -x "$BIN/$t" ] || slurm_die "$BIN/$t not found: make, or make install and set BIN (the nodes need it too)"
  done
}

# sbatch options every job gets (common), and those of a job that runs a resumable stage,
# train or fit (preempt_args).
slurm_common_args() {
  common=(--parsable --chdir="$PWD" --cpus-per-task="$CPUS" --mem="$MEM")
  [ -n "${PARTITION:-}" ] && common+=(--partition="$PARTITION")
  [ -n "${ACCOUNT:-}" ] && common+=(--account="$ACCOUNT")
  [ -n "$TIME" ] && common+=(--time="$TIME")
  # What a job with a resumable stage asks for besides: SIGUSR1 to the batch shell
  # SIGNAL_MARGIN seconds before its time limit (run-stage.sh forwards it to ae-train and
  # svm-fit), permission to requeue itself, and a log that a requeued run appends to.
  preempt_args=(--signal="B:USR1@$SIGNAL_MARGIN" --requeue --open-mode=append)
  return 0
}

# ---- all-or-nothing submission ----------------------------------------------------------
# Every job is first put to `sbatch --test-only` (partition, account, GRES, CPUs, memory,
# time limit: whatever the cluster would refuse), then submitted, the first one --hold so
# nothing starts before the whole chain is in; then the first is released. A refusal at any
# point cancels what was submitted: a chain is never left half in the queue.
SUBMITTED=()

slurm_test_only() {  # NAME SBATCH_ARGS... : dies with sbatch's reason when refused
  local name="$1" out
  shift
  # --test-only knows nothing of jobs to come, so the dependency is left out of the check.
  local args=() a
  for a in "$@"; do case "$a" in --dependency=*|--kill-on-invalid-dep=*|--parsable) ;; *) args+=("$a") ;; esac; done
  if ! out=$(sbatch --test-only "${args[@]}" --wrap=true 2>&1); then
    slurm_die "the $name job would be refused, nothing submitted: $(printf '%s' "$out" | grep -v '^sbatch: Job .* to start at' | tr '\n' ' ' | sed 's/ *$//')"
  fi
}

slurm_cancel_all() {
  [ ${#SUBMITTED[@]} -gt 0 ] && scancel "${SUBMITTED[@]}" 2>/dev/null
  SUBMITTED=()
}

# Sets job_id (not printed: a $(...) subshell would lose SUBMITTED).
slurm_submit() {  # NAME COMMAND SBATCH_ARGS... ; cancels everything submitted on a refusal
  local name="$1" cmd="$2" out id
  shift 2
  local hold=()
  [ ${#SUBMITTED[@]} -eq 0 ] && hold=(--hold)
  if ! out=$(sbatch "${hold[@]}" "$@" --wrap="set -e; $cmd" 2>&1); then
    slurm_cancel_all
    slurm_die "sbatch refused the $name job ($(printf '%s' "$out" | tr '\n' ' ' | sed 's/ *$//')); cancelled the jobs already submitted"
  fi
  id="$(printf '%s\n' "$out" | tail -n 1 | cut -d';' -f1)"
  [[ "$id" =~ ^[0-9]+$ ]] || { slurm_cancel_all; slurm_die "unexpected answer from sbatch for the $name job: $out"; }
  SUBMITTED+=("$id")
  job_id="$id"
}

slurm_release() {
  [ ${#SUBMITTED[@]} -gt 0 ] || return 0
  if ! scontrol release "${SUBMITTED[0]}" >/dev/null 2>&1; then
    slurm_cancel_all
    slurm_die "could not release job ${SUBMITTED[0]}; cancelled the chain"
  fi
}
