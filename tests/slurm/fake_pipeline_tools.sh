# Sourced by the cluster tests that run submit.sh and sweep.sh jobs on stand-in tools
# (tests/slurm/quoting.bats, preempt.bats): the jobs run the real `make STAGE` of
# pipelines/pipeline.mk, the tools it calls are these.
#
#   make_fake_pipeline_tools DIR   DIR/{cifar-convert,ae-train,ae-encode,svm-fit,svm-eval,
#                                  report}: each records its arguments NUL-separated in
#                                  $ARGV_DIR/<tool>, writes its -o output (report: -o DIR/
#                                  index.html) so that make goes on, and exits 0. ae-train is
#                                  tests/slurm/interruptible_train.sh when INTERRUPTIBLE=1.

make_fake_pipeline_tools() {
  local dir="$1" t
  mkdir -p "$dir"
  for t in cifar-convert ae-train ae-encode svm-fit svm-eval report; do
    cat > "$dir/$t" <<'SH'
#!/bin/bash
printf '%s\0' "$@" > "$ARGV_DIR/$(basename "$0")"
out=""
while [ $# -gt 0 ]; do [ "$1" = -o ] && { out="$2"; shift; }; shift; done
[ -n "$out" ] || exit 0
if [ "$(basename "$0")" = report ]; then mkdir -p "$out" && echo report > "$out/index.html"
else echo "$(basename "$0")" > "$out"; fi
SH
    chmod +x "$dir/$t"
  done
  if [ "${INTERRUPTIBLE:-0}" = 1 ]; then
    cp "$REPO_ROOT/tests/slurm/interruptible_train.sh" "$dir/ae-train"
    chmod +x "$dir/ae-train"
  fi
}

# expect_argv TOOL ARG...: the fake TOOL was called with exactly these arguments; an ARG
# "re:PATTERN" matches the argument against a regular expression instead.
expect_argv() {
  "$PYTHON" - "$ARGV_DIR/$1" "${@:2}" <<'PY'
import re, sys
got = open(sys.argv[1], "rb").read().split(b"\0")[:-1]
want = [a.encode() for a in sys.argv[2:]]
ok = len(got) == len(want) and all(
    re.fullmatch(w[3:], g) if w.startswith(b"re:") else w == g for g, w in zip(got, want))
assert ok, f"\n got  {got}\n want {want}"
PY
}
