# Sourced by the job-script quoting tests (tests/bats/reliability.bats, tests/slurm/quoting.bats).
#
#   make_fake_tools DIR   DIR/{cifar-convert,ae-train,ae-encode,svm-fit,svm-eval,report}: each
#                         records its arguments NUL-separated in $ARGV_DIR/<tool> and exits 0
#   make_fake_sbatch DIR  DIR/sbatch (--test-only accepted; otherwise the --wrap text saved as
#                         $WRAP_DIR/<n>, job id n = 101, 102, ... printed), scontrol, scancel
#   argv_of TOOL          the recorded arguments of TOOL, one per line, shown by %q

make_fake_tools() {
  local dir="$1" t
  mkdir -p "$dir"
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
    cat > "$dir/$t" <<'SH'
#!/bin/bash
printf '%s\0' "$@" > "$ARGV_DIR/$(basename "$0")"
SH
    chmod +x "$dir/$t"
  done
}

make_fake_sbatch() {
  local dir="$1"
  mkdir -p "$dir"
  cat > "$dir/sbatch" <<'SH'
#!/bin/bash
[ "$1" = --test-only ] && exit 0
n=$(( $(cat "$WRAP_DIR/.n" 2>/dev/null || echo 100) + 1 )); echo $n > "$WRAP_DIR/.n"
for a in "$@"; do case "$a" in --wrap=*) printf '%s' "${a#--wrap=}" > "$WRAP_DIR/$n" ;; esac; done
echo $n
SH
  printf '#!/bin/bash\nexit 0\n' > "$dir/scontrol"
  printf '#!/bin/bash\nexit 0\n' > "$dir/scancel"
  chmod +x "$dir/sbatch" "$dir/scontrol" "$dir/scancel"
}

argv_of() {
  local a
  while IFS= read -r -d '' a; do printf '%q\n' "$a"; done < "$ARGV_DIR/$1"
}
