# Shared bats helpers. Load with `load helpers` from tests/bats/*.bats.
#
#   BIN            build/bin of the build under test (from $BUILD, default build)
#   PYTHON         Debian's python3 (h5py, numpy, torch, sklearn)
#   FIXTURES       a per-run cache of generated inputs (tests/tmp/fixtures)
#   cifar_fixture  → prints a folder with generated CIFAR batches (known contents)
#   make_dataset OUT.h5 TRAIN TEST  → small cifar10.h5 from the generated batches
#   real_cifar     → prints ../shared/cifar-10-batches-bin if present, else nothing
#   assert_no_output FILE → FILE and any hidden temp of it are absent
#   KILLED_ASAN_OPTIONS   ASAN_OPTIONS for a run the test will SIGKILL (no exit leak check)
#   report_setup PREFIX   → a report test's setup: skipped unless report is built; TMP made
#   report_refused FILE MESSAGE → report refused FILE with one line, and left no report
#   make_image_folder DIR CLASS... → an image folder of small PNGs (class names as JSON)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD:-build}"
case "$BUILD" in /*) ;; *) BUILD="$REPO_ROOT/$BUILD" ;; esac
BIN="$BUILD/bin"
PYTHON="${PYTHON:-/usr/bin/python3}"
FIXTURES="${FIXTURES:-$REPO_ROOT/tests/tmp/fixtures}"

# A run that a test SIGKILLs is started as `ASAN_OPTIONS="$KILLED_ASAN_OPTIONS" tool … &`
# (an assignment, not a wrapper function, so $! is the tool itself). LeakSanitizer checks at
# exit from a tracer process that stops every thread; a SIGKILL landing in that window makes
# the tracer log "Unable to get registers from thread N" — an artefact of the kill, not a
# leak, and it failed test-asan once in CI. Every run that ends on its own is leak-checked.
KILLED_ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

cifar_fixture() {
  local dir="$FIXTURES/generated"
  # mkdir as a lock: bats files may run one after another but never half-build this.
  if [ ! -f "$dir/.done" ]; then
    mkdir -p "$FIXTURES"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    "$PYTHON" "$REPO_ROOT/tests/helpers/gen_cifar.py" "$dir.tmp" --tar "$dir.tmp/cifar-10-binary.tar.gz" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir" && touch "$dir/.done"
  fi
  echo "$dir/cifar-10-batches-bin"
}

cifar_fixture_tar() {
  cifar_fixture >/dev/null
  echo "$FIXTURES/generated/cifar-10-binary.tar.gz"
}

make_dataset() {
  local out="$1" train="${2:-500}" test="${3:-200}"
  "$BIN/cifar-convert" --quiet --input "$(cifar_fixture)" --train-limit "$train" --test-limit "$test" -o "$out"
}

real_cifar() {
  local d="$REPO_ROOT/../shared/cifar-10-batches-bin"
  [ -f "$d/test_batch.bin" ] && echo "$d"
  return 0
}

assert_no_output() {
  local f="$1"
  if [ -e "$f" ]; then echo "unexpected output file $f" >&2; return 1; fi
  local leftovers
  leftovers=$(ls -a "$(dirname "$f")" | grep -F ".$(basename "$f").tmp" || true)
  if [ -n "$leftovers" ]; then echo "temporary files left: $leftovers" >&2; return 1; fi
}

# Asserts the last `run` failed with exit code $1 and printed exactly one line
# (to stderr, captured by bats `run` into $output) matching the regex $2.
assert_error() {
  local code="$1" pattern="$2"
  if [ "$status" -ne "$code" ]; then echo "exit $status, expected $code; output: $output" >&2; return 1; fi
  local lines
  lines=$(printf '%s\n' "$output" | grep -c . || true)
  if [ "$lines" -ne 1 ]; then echo "expected one message line, got $lines: $output" >&2; return 1; fi
  if ! [[ "$output" =~ $pattern ]]; then echo "message '$output' does not match '$pattern'" >&2; return 1; fi
}

# The setup of a test of the report tool: skipped where report is not built (it is packed
# from tools/report_lib), TMP a fresh folder named PREFIX.XXXXXX (the caller's teardown
# removes it).
report_setup() {
  [ -x "$BIN/report" ] || skip "report not built"
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/$1.XXXXXX")"
}

# report_refused FILE MESSAGE: the last `run` of report failed with exit 1 and one line,
# "report: error: FILE: MESSAGE", and left no report folder $TMP/rep, nor a temporary one.
report_refused() {
  local want="report: error: $1: $2"
  [ "$status" -eq 1 ] || { echo "status $status: $output"; return 1; }
  [ "${#lines[@]}" -eq 1 ] || { echo "not one line: $output"; return 1; }
  [ "$output" = "$want" ] || { echo "got:  $output"; echo "want: $want"; return 1; }
  [ ! -e "$TMP/rep" ] || { echo "a report was written"; return 1; }
  ! ls -a "$TMP" | grep -q '^\.rep\.' || { echo "a temporary report folder was left"; return 1; }
}

# make_image_folder DIR CLASS...: an image folder of 8x8 PNGs, 6 train and 2 test images per
# class; class names given as JSON strings (\u00XX for a raw byte of the folder's name, so
# a name that is not UTF-8 can be made).
make_image_folder() {
  "$PYTHON" - "$@" <<'PY'
import json, os, sys
import numpy as np
from PIL import Image
root = os.fsencode(sys.argv[1])
for c, name in enumerate(sys.argv[2:]):
    raw = json.loads(name).encode("latin-1")
    for split, n in ((b"train", 6), (b"test", 2)):
        d = os.path.join(root, split, raw)
        os.makedirs(d, exist_ok=True)
        for i in range(n):
            y, x = np.mgrid[0:8, 0:8]
            px = np.stack([(90 * c + 7 * i + 3 * y * (c + 1) + 5 * x * (2 - c) + 60 * ch) % 256 for ch in range(3)], -1)
            Image.fromarray(px.astype(np.uint8)).save(os.path.join(d, b"img%d.png" % i), format="PNG")
PY
}
