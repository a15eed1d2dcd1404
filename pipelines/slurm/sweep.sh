#!/usr/bin/env bash
# Submits a parameter sweep: one Slurm job array over a plain text file of settings (one
# line per run), every run in its own folder under SWEEP_DIR sharing one dataset, then one
# job that compares the runs (report --compare). See pipelines/slurm/README.md.
#
#   pipelines/slurm/sweep.sh [--dry-run] SETTINGS_FILE
#
# SETTINGS_FILE: one run per line, shell-style words NAME=VALUE (quotes as in the shell,
# no expansions); blank lines and lines starting with # are skipped. For example
#     SEED=1 ENCODER_CHANNELS=64,32
#     SEED=2 ENCODER_CHANNELS=64,32 FIT_FLAGS="--C 5 --gamma 2x"
# Names a line may set (Make variables of pipelines/pipeline.mk, passed to make as given):
# SEED EPOCHS BATCH ENCODER_CHANNELS VAL_SPLIT PRESET VIEWS TRAIN_FLAGS ENCODE_FLAGS
# FIT_FLAGS EVAL_FLAGS. The dataset is the sweep's, shared by every run.
# What a line does not set comes from the environment, as in submit.sh (--help there):
# DATASET DATA_DIR CIFAR10_DIR TRAIN_LIMIT TEST_LIMIT EPOCHS BATCH SEED ... BIN PARTITION
# ACCOUNT TIME SIGNAL_MARGIN DEVICE GPU_GRES SVM_DEVICE CPUS MEM, plus
#   SWEEP_DIR=sweeps/$(date +%Y%m%d-%H%M%S)   the sweep: run-1 … run-N, compare/, slurm-logs/
#   MAX_PARALLEL=                              at most this many runs at once (--array=…%N)
# Jobs: convert (make data; only when the dataset is not up to date) → the array, task i
# running `make report` for line i (train, encode, fit, eval, report into SWEEP_DIR/run-i;
# preempted near TIME like submit.sh's train and fit jobs) → compare (afterany, so one failed run
# still leaves the table of the others). All jobs are checked with sbatch --test-only and
# submitted held; a refusal leaves nothing in the queue.
set -euo pipefail
SLURM_TOOL=sweep.sh
. "$(dirname "$0")/lib.sh"
PYTHON="${PYTHON:-python3}"

dry_run=0
case "${1:-}" in
  -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
  --dry-run) dry_run=1; shift ;;
esac
[ $# -eq 1 ] || slurm_die "usage: sweep.sh [--dry-run] SETTINGS_FILE (see --help)"
settings_file="$1"
[ -f "$settings_file" ] || slurm_die "$settings_file: no such file"
[ -r "$settings_file" ] || slurm_die "$settings_file: cannot read it"

SWEEP_DIR="$(abs_path "${SWEEP_DIR:-sweeps/$(date +%Y%m%d-%H%M%S)}")"
make_safe_path SWEEP_DIR "$SWEEP_DIR"
MAX_PARALLEL="${MAX_PARALLEL:-}"
[ -z "$MAX_PARALLEL" ] || [[ "$MAX_PARALLEL" =~ ^[1-9][0-9]*$ ]] || slurm_die "MAX_PARALLEL=$MAX_PARALLEL: expected a positive whole number"
[ ! -e "$SWEEP_DIR" ] || [ -z "$(ls -A "$SWEEP_DIR" 2>/dev/null)" ] \
  || slurm_die "$SWEEP_DIR exists and is not empty: give each sweep its own SWEEP_DIR"

# The file's runs, one per output line: the line number, then its words, separated by
# \x1f; parsed by shlex (the shell's quoting without its expansions: a settings file never
# runs code).
parsed="$("$PYTHON" - "$settings_file" <<'PY'
import shlex, sys
allowed = {"SEED", "EPOCHS", "BATCH", "ENCODER_CHANNELS", "VAL_SPLIT", "PRESET", "VIEWS", "TRAIN_FLAGS",
           "ENCODE_FLAGS", "FIT_FLAGS", "EVAL_FLAGS"}
path = sys.argv[1]
out = []
for number, line in enumerate(open(path, encoding="utf-8"), 1):
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    try:
        words = shlex.split(line, comments=True)
    except ValueError as err:
        sys.exit(f"sweep.sh: {path}:{number}: {err}")
    seen = set()
    for w in words:
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in w):
            sys.exit(f"sweep.sh: {path}:{number}: {w!r} holds a control character")
        name, eq, _value = w.partition("=")
        if not eq or name not in allowed:
            sys.exit(f"sweep.sh: {path}:{number}: '{w}' is not NAME=VALUE with NAME one of "
                     + " ".join(sorted(allowed)))
        if name in seen:
            sys.exit(f"sweep.sh: {path}:{number}: {name} is set twice")
        seen.add(name)
    out.append("\x1f".join([str(number)] + words))
if not out:
    sys.exit(f"sweep.sh: {path}: no runs (every line is blank or a comment)")
print("\n".join(out))
PY
)" || exit 1

slurm_settings           # the sweep-wide settings (checked once, before any line)
[ $dry_run -eq 1 ] || slurm_check_tools
slurm_check_data
make_data=$need_data
cmd_convert="$(stage_command "$SWEEP_DIR" data)"

# Each run's job script, built now (so a bad line fails before anything is submitted) in
# memory: run_scripts[i] for run-i.
run_scripts=() run_lines=() n=0
while IFS=$'\x1f' read -r -a words; do
  line_no="${words[0]}"
  n=$((n + 1))
  run_dir="$SWEEP_DIR/run-$n"
  script="$(
    for w in "${words[@]:1}"; do export "${w%%=*}=${w#*=}"; done
    SLURM_TOOL="sweep.sh: $settings_file:$line_no"
    slurm_settings
    slurm_check_data   # make reads the line's settings: a value it refuses (PRESET) stops here
    cmd_run="$(stage_command "$run_dir" report)"
    # The names in the comment are quoted by bash's %q (one line whatever they hold: a newline
    # in a name would end the comment and start a command); the script runs under bash.
    printf '#!/usr/bin/env bash\n# run %s of the sweep in %q: line %s of %q:\n#  %s\nset -euo pipefail\ncd %s\n' \
      "$n" "$SWEEP_DIR" "$line_no" "$settings_file" "$(printf ' %q' "${words[@]:1}")" "$(q "$PWD")"
    printf '%s\n' "$cmd_run"
  )" || exit 1
  run_scripts+=("$script")
  run_lines+=("${words[*]:1}")
done <<< "$parsed"

slurm_common_args
array_args=("${common[@]}" --job-name=cae-sweep --array="1-$n${MAX_PARALLEL:+%$MAX_PARALLEL}"
            --output="$SWEEP_DIR/run-%a/slurm-%A_%a.log")
# The array runs the whole chain: it asks for a GPU when train/encode (or the SVM) want one.
array_gres="$GPU_JOB_GRES"; [ -n "$array_gres" ] || array_gres="$SVM_JOB_GRES"
[ -n "$array_gres" ] && array_args+=(--gres="$array_gres")
array_args+=("${preempt_args[@]}")
convert_args=("${common[@]}" --job-name=cae-convert --output="$SWEEP_DIR/slurm-logs/%j-convert.log")
compare_args=("${common[@]}" --job-name=cae-compare --output="$SWEEP_DIR/slurm-logs/%j-compare.log")
run_dirs=()
for i in $(seq "$n"); do run_dirs+=("$SWEEP_DIR/run-$i"); done
cmd_compare="$(tool report) --compare$(for d in "${run_dirs[@]}"; do printf ' %s' "$(q "$d")"; done) -o $(q "$SWEEP_DIR/compare")"
# Single quotes: the task id is the job's, expanded when it runs.
# exec: the batch shell becomes job.sh, and job.sh run-stage.sh, which gets the SIGUSR1.
cmd_array="exec bash $(q "$SWEEP_DIR")/run-\"\$SLURM_ARRAY_TASK_ID\"/job.sh"

if [ $dry_run -eq 1 ]; then
  show() { printf 'sbatch' >&2; printf ' %q' "$@" >&2; echo >&2; }
  [ $make_data -eq 1 ] && show "${convert_args[@]}" --wrap="$cmd_convert"
  deps=(); [ $make_data -eq 1 ] && deps=(--dependency="afterok:<convert>" --kill-on-invalid-dep=yes)
  show "${array_args[@]}" "${deps[@]}" --wrap="$cmd_array"
  for i in $(seq "$n"); do printf '%s\n' "---- $SWEEP_DIR/run-$i/job.sh" "${run_scripts[$((i - 1))]}" >&2; done
  show "${compare_args[@]}" --dependency="afterany:<array>" --wrap="$cmd_compare"
  echo "dry run, would submit: $([ $make_data -eq 1 ] && echo "convert, ")array of $n runs, compare"
  exit 0
fi

[ $make_data -eq 1 ] && slurm_test_only convert "${convert_args[@]}"
slurm_test_only "sweep array" "${array_args[@]}"
slurm_test_only compare "${compare_args[@]}"

mkdir -p "$SWEEP_DIR/slurm-logs" || slurm_die "$SWEEP_DIR: cannot create the sweep folder"
cp "$settings_file" "$SWEEP_DIR/settings.txt"
for i in $(seq "$n"); do
  mkdir -p "$SWEEP_DIR/run-$i"
  printf '%s\n' "${run_scripts[$((i - 1))]}" > "$SWEEP_DIR/run-$i/job.sh"
  printf '%s\n' "${run_lines[$((i - 1))]}" > "$SWEEP_DIR/run-$i/settings.txt"
done

trap 'slurm_cancel_all; exit 130' INT TERM
convert_id=""
if [ $make_data -eq 1 ]; then
  slurm_submit convert "$cmd_convert" "${convert_args[@]}"
  convert_id="$job_id"
  array_args+=(--dependency="afterok:$convert_id" --kill-on-invalid-dep=yes)
fi
slurm_submit "sweep array" "$cmd_array" "${array_args[@]}"
array_id="$job_id"
slurm_submit compare "$cmd_compare" "${compare_args[@]}" --dependency="afterany:$array_id"
compare_id="$job_id"
slurm_release
trap - INT TERM

echo "submitted: ${convert_id:+convert $convert_id, }array $array_id ($n runs), compare $compare_id"
echo "runs in $SWEEP_DIR/run-1 … run-$n; the comparison will be $SWEEP_DIR/compare/index.html"
