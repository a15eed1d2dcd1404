#!/usr/bin/env bats
# Job scripts never run a setting as code (issue 30, class 1), on the real test Slurm: the
# jobs of submit.sh and sweep.sh, with shell metacharacters in *_FLAGS, values and paths,
# run the stand-in tools of tests/helpers/fake_tools.sh (which record their arguments), so
# the test takes seconds. $P must stay empty: nothing in a value ran on the node.

load helpers

setup() {
  . "$REPO_ROOT/tests/helpers/fake_tools.sh"
  WORK="$(mktemp -d "$SLURM_TMP/jobs/quoting.XXXXXX")"
  chmod 755 "$WORK"
  P="$WORK/pwned"
  export ARGV_DIR="$WORK/argv"
  mkdir -p "$P" "$ARGV_DIR" "$WORK/tools"
  make_fake_tools "$WORK/tools"
  : > "$WORK/data.h5"
  cd "$WORK"
}

expect_argv() {
  "$PYTHON" - "$ARGV_DIR/$1" "${@:2}" <<'PY'
import sys
got = open(sys.argv[1], "rb").read().split(b"\0")[:-1]
want = [a.encode() for a in sys.argv[2:]]
assert got == want, f"\n got  {got}\n want {want}"
PY
}

@test "submit.sh: shell code in *_FLAGS, a value and a path reaches the tools as literal arguments" {
  local run_dir="$WORK/run;touch $P/r"$'\n'"x"
  local fit='--C 5; touch '"$P/a"' $(touch '"$P/b"') `touch '"$P/c"'` "d"'$'\n''*'
  run env CPUS=1 MEM=100M DEVICE=cpu BIN="$WORK/tools" DATASET="$WORK/data.h5" RUN_DIR="$run_dir" \
    FIT_FLAGS="$fit" SEED="1;touch $P/s" "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  # shellcheck disable=SC2046
  wait_jobs $(job_ids "$output")
  for id in $(job_ids "$output"); do [ "$(job_state "$id")" = COMPLETED ] || { scontrol show job -o "$id"; false; }; done
  [ -z "$(ls -A "$P")" ] || { ls -A "$P"; false; }
  expect_argv svm-fit --features "$run_dir/features.h5" --device cpu --C '5;' touch "$P/a" '$(touch' "$P/b)" \
    '`touch' "$P/c\`" '"d"' '*' -o "$run_dir/svm.h5"
  expect_argv ae-train --data "$WORK/data.h5" --epochs 20 --batch-size 64 --device cpu --seed "1;touch $P/s" --resume \
    -o "$run_dir/model.h5"
}

@test "sweep.sh: a settings line's shell code reaches the array task's tools as literal arguments" {
  cat > "$WORK/settings.txt" <<EOF
SEED=1 FIT_FLAGS='--C 5; touch $P/a \$(touch $P/b) \`touch $P/c\`' ENCODE_FLAGS="it's \$HOME;touch $P/e"
EOF
  run env CPUS=1 MEM=100M DEVICE=cpu BIN="$WORK/tools" DATASET="$WORK/data.h5" SWEEP_DIR="$WORK/sw" PYTHON="$PYTHON" \
    "$REPO_ROOT/pipelines/slurm/sweep.sh" "$WORK/settings.txt"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" =~ array\ ([0-9]+)\ \(1\ runs\),\ compare\ ([0-9]+) ]] || { echo "$output"; false; }
  local array=${BASH_REMATCH[1]} compare=${BASH_REMATCH[2]}
  wait_jobs "$array" "$compare"
  [ "$(job_state "${array}_1")" = COMPLETED ] || { scontrol show job -o "${array}_1"; false; }
  [ -z "$(ls -A "$P")" ] || { ls -A "$P"; false; }
  local r="$WORK/sw/run-1"
  expect_argv svm-fit --features "$r/features.h5" --device cpu --C '5;' touch "$P/a" '$(touch' "$P/b)" '`touch' \
    "$P/c\`" -o "$r/svm.h5"
  expect_argv ae-encode --model "$r/model.h5" --data "$WORK/data.h5" --device cpu "it's" "\$HOME;touch" "$P/e" \
    -o "$r/features.h5"
}
