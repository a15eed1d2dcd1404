#!/usr/bin/env bats
# Job scripts never run a setting as code (issue 30, class 1), on the real test Slurm: the
# jobs of submit.sh and sweep.sh run the real `make STAGE` of pipelines/pipeline.mk, with
# shell and Make metacharacters in *_FLAGS and values, on the stand-in tools of
# tests/slurm/fake_pipeline_tools.sh (which record their arguments), so the test takes
# seconds. $P must stay empty: nothing in a value ran on the node, in the shell or in make.

load helpers

setup() {
  . "$REPO_ROOT/tests/slurm/fake_pipeline_tools.sh"
  WORK="$(mktemp -d "$SLURM_TMP/jobs/quoting.XXXXXX")"
  chmod 755 "$WORK"
  P="$WORK/pwned"
  export ARGV_DIR="$WORK/argv"
  mkdir -p "$P" "$ARGV_DIR" "$WORK/tools" "$WORK/cif"
  make_fake_pipeline_tools "$WORK/tools"
  cd "$WORK"
}

@test "submit.sh: shell and Make code in *_FLAGS and values reaches the tools as literal arguments" {
  local fit='--C 5; touch '"$P/a"' $(touch '"$P/b"') `touch '"$P/c"'` $(shell touch '"$P/m"') "d"'$'\n''*'
  run env CPUS=1 MEM=100M DEVICE=cpu BIN="$WORK/tools" DATA_DIR="$WORK/data" CIFAR10_DIR="$WORK/cif" RUN_DIR="$WORK/run" \
    FIT_FLAGS="$fit" SEED="1;touch $P/s" ENCODER_CHANNELS="16,8\$(shell touch $P/e)" "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  # shellcheck disable=SC2046
  wait_jobs $(job_ids "$output")
  for id in $(job_ids "$output"); do [ "$(job_state "$id")" = COMPLETED ] || { scontrol show job -o "$id"; show_logs "$WORK/run"; false; }; done
  [ -z "$(ls -A "$P")" ] || { ls -A "$P"; false; }
  local r="$WORK/run"
  expect_argv svm-fit --features "$r/features.h5" --device cpu --C '5;' touch "$P/a" '$(touch' "$P/b)" \
    '`touch' "$P/c\`" '$(shell' touch "$P/m)" '"d"' '*' --resume -o "re:$r/\.svm-[0-9a-f]{10}\.h5" --record-output-as "$r/svm.h5"
  expect_argv ae-train --data "$WORK/data/cifar10.h5" --epochs 20 --batch-size 64 --device cpu \
    --encoder-channels "16,8\$(shell touch $P/e)" --seed "1;touch $P/s" --resume -o "re:$r/\.model-[0-9a-f]{10}\.ckpt\.h5" \
    --record-output-as "$r/model.h5"
  [ -s "$r/model.h5" ] && [ -s "$r/report/index.html" ]
}

@test "submit.sh: a run folder make cannot name as a file is refused before anything is submitted" {
  local before
  before=$(queue_count)
  run env CPUS=1 MEM=100M DEVICE=cpu BIN="$WORK/tools" DATA_DIR="$WORK/data" CIFAR10_DIR="$WORK/cif" \
    RUN_DIR="$WORK/run;touch $P/r"$'\n'"x" "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 1 ]
  [[ "$output" == *"RUN_DIR=$WORK/run;touch $P/r"*"cannot be a Make file name"* ]] || { echo "$output"; false; }
  [ "$(queue_count)" -eq "$before" ] && [ -z "$(ls -A "$P")" ] && [ ! -e "$WORK/run;touch $P/r" ]
}

@test "sweep.sh: a settings line's shell and Make code reaches the array task's tools as literal arguments" {
  cat > "$WORK/settings.txt" <<EOF
SEED=1 FIT_FLAGS='--C 5; touch $P/a \$(touch $P/b) \`touch $P/c\` \$(shell touch $P/m)' ENCODE_FLAGS="it's \$HOME;touch $P/e"
EOF
  run env CPUS=1 MEM=100M DEVICE=cpu BIN="$WORK/tools" DATA_DIR="$WORK/data" CIFAR10_DIR="$WORK/cif" SWEEP_DIR="$WORK/sw" \
    PYTHON="$PYTHON" "$REPO_ROOT/pipelines/slurm/sweep.sh" "$WORK/settings.txt"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" =~ array\ ([0-9]+)\ \(1\ runs\),\ compare\ ([0-9]+) ]] || { echo "$output"; false; }
  local array=${BASH_REMATCH[1]} compare=${BASH_REMATCH[2]}
  wait_jobs "$array" "$compare"
  [ "$(job_state "${array}_1")" = COMPLETED ] || { scontrol show job -o "${array}_1"; show_logs "$WORK/sw"; false; }
  [ -z "$(ls -A "$P")" ] || { ls -A "$P"; false; }
  local r="$WORK/sw/run-1"
  expect_argv svm-fit --features "$r/features.h5" --device cpu --C '5;' touch "$P/a" '$(touch' "$P/b)" '`touch' \
    "$P/c\`" '$(shell' touch "$P/m)" --resume -o "re:$r/\.svm-[0-9a-f]{10}\.h5" --record-output-as "$r/svm.h5"
  expect_argv ae-encode --model "$r/model.h5" --data "$WORK/data/cifar10.h5" --device cpu "it's" "\$HOME;touch" "$P/e" \
    -o "$r/features.h5"
}
