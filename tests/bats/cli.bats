#!/usr/bin/env bats
# Conventions every tool shares (issue 2): --help with purpose and example, --version.

load helpers

tools() {
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval classify report; do
    [ -x "$BIN/$t" ] && echo "$t"
  done
}

@test "every built tool answers --help with a purpose and a worked example, exit 0" {
  [ -n "$(tools)" ]
  for t in $(tools); do
    run "$BIN/$t" --help
    [ "$status" -eq 0 ] || { echo "$t --help exited $status"; return 1; }
    [[ "$output" == *"Example"* ]] || { echo "$t --help has no example"; return 1; }
    [[ "$output" == *"$t "* ]] || { echo "$t --help does not name the tool"; return 1; }
  done
}

@test "every built tool answers --version with its name and version, exit 0" {
  for t in $(tools); do
    run "$BIN/$t" --version
    [ "$status" -eq 0 ] || { echo "$t --version exited $status"; return 1; }
    [[ "$output" =~ ^$t\ [0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "$t --version: $output"; return 1; }
  done
}

@test "every built tool rejects an unknown option with exit 2" {
  for t in $(tools); do
    run "$BIN/$t" --no-such-option
    [ "$status" -eq 2 ] || { echo "$t exited $status on an unknown option"; return 1; }
  done
}

compiled_tools() {
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval classify; do
    [ -x "$BIN/$t" ] && echo "$t"
  done
}

@test "every compiled tool suggests the option a misspelt one was meant to be" {
  for t in $(compiled_tools); do
    [ "$t" != classify ] || continue  # it prints to stdout: no --output to misspell
    run "$BIN/$t" --outptu x.h5
    [ "$status" -eq 2 ] || { echo "$t exited $status"; return 1; }
    [[ "$output" == "$t: usage error: unknown option --outptu (did you mean --output?) (see --help)" ]] ||
      { echo "$t: $output"; return 1; }
  done
}

@test "every compiled tool's --help states ranges in words, never CLI11's FLOAT:FLOAT or NONNEGATIVE" {
  for t in $(compiled_tools); do
    run "$BIN/$t" --help
    [ "$status" -eq 0 ]
    [[ "$output" != *":FLOAT"* && "$output" != *"NONNEGATIVE"* && "$output" != *":POSITIVE"* ]] ||
      { echo "$t: $output"; return 1; }
  done
}

@test "--version never says 'git unknown'" {
  for t in $(compiled_tools); do
    run "$BIN/$t" --version
    [[ "$output" != *"git unknown"* ]] || { echo "$t: $output"; return 1; }
  done
}

# An installed tool has no repository around it: the commit comes from the build
# ($BUILD/git-describe.txt, compiled into version.o and packed into report's zip).
@test "an installed tool (copied out of the build) names the commit it was built from, never 'git unknown'" {
  local stamp dir="$BATS_TEST_TMPDIR/installed/bin"
  stamp=$(cat "$BUILD/git-describe.txt")
  mkdir -p "$dir"
  for t in $(tools); do
    cp "$BIN/$t" "$dir/"
    run bash -c "cd / && '$dir/$t' --version"
    [ "$status" -eq 0 ] || { echo "$t: exit $status: $output"; return 1; }
    [[ "$output" =~ ^$t\ [0-9]+\.[0-9]+\.[0-9]+\ \( ]] || { echo "$t: $output"; return 1; }
    [[ "$output" != *"git unknown"* ]] || { echo "installed $t: $output"; return 1; }
    # A build without git history says the version alone; one with it, its commit.
    [ "$stamp" = unknown ] || [[ "$output" == *"(git $stamp, "* ]] || { echo "installed $t: $output, built at $stamp"; return 1; }
  done
}

# The pipeline trains into a hidden checkpoint and renames it to model.h5; the model's
# provenance names model.h5 (--record-output-as), the file the user gets.
@test "--record-output-as: the provenance names the file the caller renames the output to" {
  recorded_output() { "$PYTHON" -c "import h5py, json, sys; print(json.loads(h5py.File(sys.argv[1], 'r').attrs['params'])['output'])" "$1"; }
  local dir="$BATS_TEST_TMPDIR/run"
  mkdir -p "$dir"
  "$BIN/cifar-convert" -q --input "$(cifar_fixture)" --train-limit 20 --test-limit 10 -o "$dir/.d.tmp.h5" \
    --record-output-as "$dir/d.h5"
  mv "$dir/.d.tmp.h5" "$dir/d.h5"
  [ "$(recorded_output "$dir/d.h5")" = "$dir/d.h5" ]
  run "$PYTHON" -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs['params'])" "$dir/d.h5"
  [[ "$output" != *".d.tmp.h5"* && "$output" != *"record-output-as"* ]] || { echo "$output"; return 1; }
  [ -x "$BIN/ae-train" ] || return 0
  "$BIN/ae-train" -q --data "$dir/d.h5" --epochs 1 --batch-size 4 --threads 2 -o "$dir/.model-x.ckpt.h5" \
    --record-output-as "$dir/model.h5"
  mv "$dir/.model-x.ckpt.h5" "$dir/model.h5"
  [ "$(recorded_output "$dir/model.h5")" = "$dir/model.h5" ]
  # Without the option the output is -o as given.
  "$BIN/cifar-convert" -q --input "$(cifar_fixture)" --train-limit 20 --test-limit 10 -o "$dir/plain.h5"
  [ "$(recorded_output "$dir/plain.h5")" = "$dir/plain.h5" ]
}
