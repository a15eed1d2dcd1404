#!/usr/bin/env bash
# Warm starts across views (issue 59): one class pair of an ae-features file with views,
# solved by the GPU working sets cold and from the one-view solution
# (tests/gpu/bench_warm_start_gpu.cu). Usage:
#   bash bench/svm_warm_start.sh FEATURES.h5 [VIEWS (flip,shift:4)] [PAIR (3,5)] [C (10)]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
bin="$BUILD/tests/gpu_tests"
[ -x "$bin" ] || { echo "svm_warm_start.sh: $bin is missing (make $bin on a machine with nvcc)" >&2; exit 1; }
[ $# -ge 1 ] || { echo "usage: bash bench/svm_warm_start.sh FEATURES.h5 [VIEWS] [PAIR] [C]" >&2; exit 2; }
SVM_WARM_FEATURES="$1" SVM_WARM_VIEWS="${2:-flip,shift:4}" SVM_WARM_PAIR="${3:-3,5}" SVM_WARM_C="${4:-10}" \
  "$bin" --gtest_also_run_disabled_tests --gtest_filter='BenchWarmStartGpu.*' 2>&1 | grep -E '^BENCH|Failure|error'
