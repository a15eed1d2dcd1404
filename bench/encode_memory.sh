#!/usr/bin/env bash
# ae-encode's memory over all of CIFAR-10 (issue 3: features are streamed in chunks, so the
# tool stays under 1 GB for all 60,000 images although its output holds 60,000 x 8,192
# floats = 1.97 GB). Peak resident memory is the kernel's count for the child process
# (getrusage, through Python), not an estimate. Prints a table row; exits 1 above the goal.
#   DEVICE (cpu), THREADS (all cores), LIMIT_MB (1024)
# Real CIFAR-10 when ../shared has it, else generated batches of the same size (memory does
# not depend on the pixels); the model is an untrained one (ae-train --epochs 0), as the
# weights do not change what is allocated.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
PYTHON="${PYTHON:-/usr/bin/python3}"
DEVICE="${DEVICE:-cpu}"
THREADS="${THREADS:-$(nproc)}"
LIMIT_MB="${LIMIT_MB:-1024}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

src=../shared/cifar-10-batches-bin
if [ ! -f "$src/test_batch.bin" ]; then
  "$PYTHON" tests/helpers/gen_cifar.py "$tmp/gen" >/dev/null
  src="$tmp/gen/cifar-10-batches-bin"
fi
"$BUILD/bin/cifar-convert" --quiet --input "$src" -o "$tmp/data.h5"
"$BUILD/bin/ae-train" --quiet --data "$tmp/data.h5" --epochs 0 -o "$tmp/model.h5"

# Runs the command, then prints its exit status, peak RSS in MiB and seconds.
"$PYTHON" - "$tmp/encode.json" "$BUILD/bin/ae-encode" --quiet --json --device "$DEVICE" --threads "$THREADS" \
  --model "$tmp/model.h5" --data "$tmp/data.h5" -o "$tmp/features.h5" > "$tmp/peak.txt" <<'PY'
import resource, subprocess, sys, time
t0 = time.time()
with open(sys.argv[1], "w") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out).returncode
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
print(rc, f"{peak_kib / 1024:.0f}", f"{time.time() - t0:.1f}")
PY
read -r rc peak_mb seconds < "$tmp/peak.txt"
[ "$rc" -eq 0 ] || { echo "encode_memory.sh: ae-encode failed (exit $rc)" >&2; exit 1; }
images=$(sed -n 's/.*"images": *\([0-9]*\).*/\1/p' "$tmp/encode.json")
out_mb=$(( $(stat -c %s "$tmp/features.h5") / 1048576 ))

printf '\n## ae-encode memory (%s, %s threads)\n' "$DEVICE" "$THREADS"
printf '| images | features file | peak resident memory | seconds | goal |\n|---|---|---|---|---|\n'
printf '| %s | %s MiB | %s MiB | %s | < %s MiB |\n' "$images" "$out_mb" "$peak_mb" "$seconds" "$LIMIT_MB"
[ "$peak_mb" -lt "$LIMIT_MB" ] || { echo "encode_memory.sh: peak $peak_mb MiB is not under $LIMIT_MB MiB" >&2; exit 1; }
