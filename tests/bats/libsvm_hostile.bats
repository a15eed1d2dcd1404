#!/usr/bin/env bats
# libsvm text from outside the toolkit (docs/RELIABILITY.md): damaged libsvm models that
# crashed svm-eval inside libsvm's svm_load_model, numbers svm-fit would refuse as options,
# and files whose dense form would not fit (under `ulimit -v` too) are each refused in one
# line naming the file and the line, exit 1, no output left behind.

load helpers

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/libsvm_hostile.XXXXXX")"
  # A 3-class rbf model as svm-train writes it (labels in first-seen order, probA/probB),
  # and rows it classifies.
  cat >"$TMP/good.model" <<'EOF'
svm_type c_svc
kernel_type rbf
gamma 0.5
nr_class 3
total_sv 6
rho -0.0772 0.0551 0.1025
label 1 -1 3
probA -2.1 -1.9 -2.4
probB 0.05 -0.1 0.02
nr_sv 2 2 2
SV
0.5 0.25 1:1.04 2:0.68 3:0.45
0.75 1 1:1.2 2:0.67 3:-0.4
-0.5 0.5 1:-1.1 2:-0.9 3:0.2
-0.75 0.25 1:-0.8 2:-1.2
-0.25 -0.75 1:0.9 2:-1.1 3:0.3
-1 -0.75 1:1.1 2:-0.8 3:-0.1
EOF
  printf '%s\n' "1 1:1 2:1 3:0.1" "-1 1:-1 2:-1" "3 1:1 2:-1 3:0.2" "1 1:0.9 2:1.1" "-1 1:-1.1 2:-0.9 3:0.3" \
    "3 1:1.1 2:-0.9" >"$TMP/rows.libsvm"
}

teardown() {
  rm -rf "$TMP"
}

# svm-eval with model $1 on rows $2: one refusal line matching $3, exit 1, no output.
refused() {
  run "$BIN/svm-eval" --model "$1" --features "$2" -o "$TMP/eval.h5"
  assert_error 1 "$3"
  assert_no_output "$TMP/eval.h5"
}

# good.model with its header line starting "$1 " replaced by $2 (removed when empty).
header() {
  awk -v key="$1" -v line="$2" '$1 == key { if (line != "") print line; next } { print }' "$TMP/good.model"
}

@test "libsvm hostile: the unmodified model classifies every row (the control)" {
  run "$BIN/svm-eval" --model "$TMP/good.model" --features "$TMP/rows.libsvm" -o "$TMP/eval.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"accuracy":1'* ]]
}

@test "libsvm hostile: a model without rho is refused by name, no SIGSEGV" {
  header rho "" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "^svm-eval: error: .*/m\.model: has no 'rho' line before 'SV' \(libsvm model header\)$"
}

@test "libsvm hostile: nr_sv that disagrees with total_sv, or is negative, is refused with its line" {
  header nr_sv "nr_sv 2 2 5" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "m\.model: line 10: nr_sv adds up to 9, total_sv says 6 \(libsvm model\)$"
  header nr_sv "nr_sv 2 -2 6" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "m\.model: line 10: nr_sv: '-2' is not an integer in 0\.\.6"
}

@test "libsvm hostile: a support vector line with too few coefficients is refused with its line" {
  sed '13s/.*/0.75/' "$TMP/good.model" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "m\.model: line 13: support vector 2 has 1 coefficients, 3 classes need 2"
}

@test "libsvm hostile: gamma, rho, probA/probB and coefficients are checked like svm-fit's options" {
  for g in -0.5 0 nan inf; do
    header gamma "gamma $g" >"$TMP/m.model"
    refused "$TMP/m.model" "$TMP/rows.libsvm" "m\.model: line 3: gamma"
  done
  header rho "rho nan 0.1 0.2" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 6: rho: 'nan' is not finite"
  header probB "probB 0.05 inf 0" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 9: probB: 'inf' is not finite"
  sed '14s/^-0.5 0.5/-0.5 nan/' "$TMP/good.model" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 14: support vector 3 coefficient: 'nan' is not finite"
}

@test "libsvm hostile: nr_class bounds, duplicate labels, other svm and kernel types are named" {
  header nr_class "nr_class 1" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 4: nr_class: '1' is not an integer in 2\.\.65536"
  header label "label 1 -1 1" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 7: label 1 names two classes"
  header svm_type "svm_type one_class" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 1: svm_type one_class is not supported: only c_svc classifiers"
  header kernel_type "kernel_type sigmoid" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 2: kernel_type sigmoid is not supported: only rbf"
}

@test "libsvm hostile: a model line with index 2*10^9 is refused with the line and the bytes, not 'out of memory'" {
  sed '13s/.*/0.75 1 1:1.2 2000000000:1/' "$TMP/good.model" >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" \
    "m\.model: line 13: index 2000000000: 6 support vectors of 2000000000 features \(dense float32\) need 82000000000 bytes \(78201 MiB\), more than half of "
}

@test "libsvm hostile: a 3 KB data file with index 10^7 under ulimit -v is refused with the line and the bytes" {
  [ -z "${SANITIZER_LOG_DIR:-}" ] || skip "AddressSanitizer cannot run under ulimit -v (it reserves terabytes of shadow memory)"
  for r in $(seq 1 99); do echo "$(( r % 3 == 0 ? 3 : 1 )) 1:0.$r 2:1"; done >"$TMP/wide.libsvm"
  echo "-1 1:1 10000000:0.5" >>"$TMP/wide.libsvm"
  [ "$(stat -c %s "$TMP/wide.libsvm")" -lt 3072 ]
  run bash -c 'ulimit -v 1000000 && exec "$1" --model "$2" --features "$3" -o "$4"' _ \
    "$BIN/svm-eval" "$TMP/good.model" "$TMP/wide.libsvm" "$TMP/eval.h5"
  assert_error 1 "wide\.libsvm: line 100: index 10000000: 100 rows of 10000000 features \(dense float32\) need 4000000000 bytes \(3814 MiB\), more than half of what ulimit -v \(RLIMIT_AS\) leaves this process \([0-9]+ MiB\)$"
  assert_no_output "$TMP/eval.h5"
}

@test "libsvm hostile: under ulimit -v, nr_class 40000 (libsvm's 6.4 GB rho) and wide support vectors are refused by name" {
  [ -z "${SANITIZER_LOG_DIR:-}" ] || skip "AddressSanitizer cannot run under ulimit -v (it reserves terabytes of shadow memory)"
  # libsvm's svm_load_model sized rho from nr_class alone and wrote into the failed allocation.
  header nr_class "nr_class 40000" >"$TMP/m.model"
  run bash -c 'ulimit -v 1000000 && exec "$1" --model "$2" --features "$3" -o "$4"' _ \
    "$BIN/svm-eval" "$TMP/m.model" "$TMP/rows.libsvm" "$TMP/eval.h5"
  assert_error 1 "m\.model: line 6: rho lists 3 values, this model needs 799980000 \(libsvm model\)$"
  assert_no_output "$TMP/eval.h5"
  # 6 support vectors of 67,000,000 features: 2.7 GB with the scaler, within this machine's memory
  # but not within what ulimit -v leaves.
  sed '17s/.*/-1 -0.75 1:1.1 67000000:-0.1/' "$TMP/good.model" >"$TMP/m.model"
  run bash -c 'ulimit -v 1000000 && exec "$1" --model "$2" --features "$3" -o "$4"' _ \
    "$BIN/svm-eval" "$TMP/m.model" "$TMP/rows.libsvm" "$TMP/eval.h5"
  assert_error 1 "m\.model: line 17: index 67000000: 6 support vectors of 67000000 features \(dense float32\) need 2747000000 bytes \(2619 MiB\), more than half of what ulimit -v \(RLIMIT_AS\) leaves this process \([0-9]+ MiB\)$"
  assert_no_output "$TMP/eval.h5"
}

@test "libsvm hostile: a huge token is quoted as a short escaped prefix" {
  { head -2 "$TMP/good.model"; printf 'gamma \033[31m'; head -c 200000 /dev/zero | tr '\0' 7; echo; tail -n +4 "$TMP/good.model"; } >"$TMP/m.model"
  refused "$TMP/m.model" "$TMP/rows.libsvm" "line 3: gamma: '\\\\x1B\[31m7+'\.\.\. \(200005 bytes\) is not a number"
  [ "${#output}" -lt 300 ]
  printf '1 1:0.5 %s\n' "$(head -c 100000 /dev/zero | tr '\0' 9)" >"$TMP/token.libsvm"
  refused "$TMP/good.model" "$TMP/token.libsvm" "token\.libsvm: line 1: '9+'\.\.\. \(100000 bytes\) is not index:value"
  [ "${#output}" -lt 300 ]
}
