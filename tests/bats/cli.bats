#!/usr/bin/env bats
# Conventions every tool shares (issue 2): --help with purpose and example, --version.

load helpers

tools() {
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
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
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval; do
    [ -x "$BIN/$t" ] && echo "$t"
  done
}

@test "every compiled tool suggests the option a misspelt one was meant to be" {
  for t in $(compiled_tools); do
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
