# pipelines/slurm/lib.sh — shared by submit.sh and sweep.sh (sourced, not run): the
# shellcheck shell=bash disable=SC2034  # sourced: the variables it sets are the callers'
# settings, the stage commands, which jobs ask for a GPU, and submitting a set of jobs
# all-or-nothing. See pipelines/slurm/README.md.

slurm_die() { echo "$SLURM_TOOL: $*" >&2; exit 1; }

# Every string from the user (environment, settings file) that reaches a job script or
# --wrap goes through q or q_words: generated shell text never carries a user string as code.
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

# A *_FLAGS value as quoted words: split at blanks, tabs and newlines only (read -a: no
# globbing, no $ or ` expansion, no quote removal), each word then quoted by q. So
# FIT_FLAGS="--C 5; touch x" passes the three arguments "--C" "5;" "touch" "x" literally.
q_words() {
  local words=() w out=""
  IFS=$' \t\n' read -r -d '' -a words <<< "$1" || true
  for w in "${words[@]}"; do out+=" $(q "$w")"; done
  printf '%s' "$out"
}

# The tools: $BIN/NAME, or NAME on the nodes' PATH when BIN is empty.
tool() { if [ -n "${BIN:-}" ]; then q "$BIN/$1"; else q "$1"; fi; }

# Defaults and checks of the settings every chain shares (environment variables).
slurm_settings() {
  DATASET="${DATASET:-data/cifar10.h5}"
  CIFAR10_DIR="${CIFAR10_DIR:-}"
  TRAIN_LIMIT="${TRAIN_LIMIT:-}"
  TEST_LIMIT="${TEST_LIMIT:-}"
  EPOCHS="${EPOCHS:-20}"
  BATCH="${BATCH:-64}"
  SEED="${SEED:-}"
  ENCODER_CHANNELS="${ENCODER_CHANNELS:-}"
  VAL_SPLIT="${VAL_SPLIT:-}"
  TRAIN_FLAGS="${TRAIN_FLAGS:-}" ENCODE_FLAGS="${ENCODE_FLAGS:-}" FIT_FLAGS="${FIT_FLAGS:-}" EVAL_FLAGS="${EVAL_FLAGS:-}"
  # gpu by default, as before DEVICE existed: a GPU cluster needs no setting; a CPU-only one
  # sets DEVICE=cpu (or auto).
  DEVICE="${DEVICE:-gpu}"
  # Unset: one GPU per GPU job; set but empty: no --gres at all (clusters that hand out GPUs
  # by partition, or none).
  GPU_GRES="${GPU_GRES-gpu:1}"
  SVM_DEVICE="${SVM_DEVICE:-cpu}"
  CPUS="${CPUS:-16}"
  MEM="${MEM:-64G}"
  TIME="${TIME:-}"
  case "$DEVICE" in cpu|gpu|auto) ;; *) slurm_die "DEVICE=$DEVICE: expected cpu, gpu or auto" ;; esac
  case "$SVM_DEVICE" in cpu|gpu|auto) ;; *) slurm_die "SVM_DEVICE=$SVM_DEVICE: expected cpu, gpu or auto" ;; esac
  [ "$DEVICE" = cpu ] && [ "$SVM_DEVICE" != cpu ] && slurm_die "DEVICE=cpu but SVM_DEVICE=$SVM_DEVICE: a CPU-only chain runs the SVM on the CPU too"
  [[ "$EPOCHS" =~ ^[0-9]+$ ]] || slurm_die "EPOCHS=$EPOCHS: expected a whole number"
  [[ "$BATCH" =~ ^[1-9][0-9]*$ ]] || slurm_die "BATCH=$BATCH: expected a positive whole number"
  [[ "$CPUS" =~ ^[1-9][0-9]*$ ]] || slurm_die "CPUS=$CPUS: expected a positive whole number"
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

# The stage commands as shell text for --wrap: every value quoted by q, *_FLAGS split into
# words by q_words (as make pipeline splits them, but never expanded). $1 = the run folder.
stage_commands() {
  local run_dir="$1"
  cmd_convert="$(tool cifar-convert) --input $(q "$CIFAR10_DIR")${TRAIN_LIMIT:+ --train-limit $(q "$TRAIN_LIMIT")}${TEST_LIMIT:+ --test-limit $(q "$TEST_LIMIT")} -o $(q "$DATASET")"
  cmd_train="$(tool ae-train) --data $(q "$DATASET") --epochs $(q "$EPOCHS") --batch-size $(q "$BATCH") --device $(q "$DEVICE")"
  cmd_train+="${ENCODER_CHANNELS:+ --encoder-channels $(q "$ENCODER_CHANNELS")}${VAL_SPLIT:+ --val-split $(q "$VAL_SPLIT")}"
  cmd_train+="${SEED:+ --seed $(q "$SEED")}$(q_words "$TRAIN_FLAGS") --resume -o $(q "$run_dir/model.h5")"
  cmd_encode="$(tool ae-encode) --model $(q "$run_dir/model.h5") --data $(q "$DATASET") --device $(q "$DEVICE")$(q_words "$ENCODE_FLAGS") -o $(q "$run_dir/features.h5")"
  cmd_fit="$(tool svm-fit) --features $(q "$run_dir/features.h5") --device $(q "$SVM_DEVICE")$(q_words "$FIT_FLAGS") -o $(q "$run_dir/svm.h5")"
  cmd_eval="$(tool svm-eval) --model $(q "$run_dir/svm.h5") --features $(q "$run_dir/features.h5") --device $(q "$SVM_DEVICE")$(q_words "$EVAL_FLAGS") -o $(q "$run_dir/eval.h5")"
  cmd_report="$(tool report) --run-dir $(q "$run_dir") -o $(q "$run_dir/report")"
}

slurm_check_tools() {
  command -v sbatch >/dev/null || slurm_die "sbatch not found (not on a Slurm login node?)"
  local t p
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
    if [ -n "${BIN:-}" ]; then p="$BIN/$t"; else p="$t"; fi
    command -v "$p" >/dev/null || slurm_die "$p not found: make install, or set BIN (the nodes need it too)"
  done
}

# sbatch options every job gets.
slurm_common_args() {
  common=(--parsable --chdir="$PWD" --cpus-per-task="$CPUS" --mem="$MEM")
  [ -n "${PARTITION:-}" ] && common+=(--partition="$PARTITION")
  [ -n "${ACCOUNT:-}" ] && common+=(--account="$ACCOUNT")
  [ -n "$TIME" ] && common+=(--time="$TIME")
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
