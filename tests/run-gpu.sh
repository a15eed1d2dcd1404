#!/usr/bin/env bash
# make test-gpu: every CUDA kernel against its CPU twin and the GPU backend against the
# CPU backend (GoogleTest binary $BUILD/tests/gpu_tests, sources in tests/gpu/), then the
# GPU SVM against the CPU path on real CIFAR-10 features (tests/gpu/svm_parity_real.sh).
# Without an NVIDIA GPU it prints one skip line and exits 0 (CI only compiles the tests).
# Prints one closing line "N passed, N failed, N skipped"; extra arguments go to GoogleTest.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
bin="$BUILD/tests/gpu_tests"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test-gpu: skipped: no NVIDIA GPU on this machine (the GPU tests only run where one is present)"
  exit 0
fi
if [ ! -x "$bin" ]; then
  echo "test-gpu: $bin is missing: build it with 'make $bin' on a machine with nvcc" >&2
  exit 1
fi
source tests/gpu/nccl_env.sh
log_dir="$BUILD/test-logs"
mkdir -p "$log_dir"
echo "== GPU tests ($bin) on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
"$bin" "$@" 2>&1 | tee "$log_dir/gpu.log"
rc=${PIPESTATUS[0]}
p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log_dir/gpu.log" | tail -1)
f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log_dir/gpu.log" | tail -1)
s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log_dir/gpu.log" | tail -1)
p=${p:-0} f=${f:-0} s=${s:-0}
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1  # crashed before its summary
# The GPU SVM against the CPU path on real features (needs CIFAR-10: CIFAR10_DIR). Not run
# when GoogleTest arguments (a filter) were given.
if [ $# -eq 0 ]; then
  bash tests/gpu/svm_parity_real.sh 2>&1 | tee "$log_dir/svm-parity-real.log"
  case "$(tail -1 "$log_dir/svm-parity-real.log")" in
    "svm-parity-real: passed"*) p=$((p + 1)) ;;
    "svm-parity-real: skipped"*) s=$((s + 1)) ;;
    *) f=$((f + 1)) ;;
  esac
  # ae-train's group with ranks as processes (--gpus N): against one GPU, and a rank killed.
  bash tests/gpu/group_processes.sh 2>&1 | tee "$log_dir/group-processes.log"
  gp=$(sed -n 's/^group-processes: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' \
         "$log_dir/group-processes.log" | tail -1)
  if [ -z "$gp" ]; then f=$((f + 1)); else set -- $gp; p=$((p + $1)) f=$((f + $2)) s=$((s + $3)); set --; fi
fi
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
