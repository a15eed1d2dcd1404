#!/usr/bin/env bash
# The GPU SVM's paths at scale (issue 59): svm::cuda::fit on generated rows (10 classes
# through a random ReLU layer, bench/svm_gpu.sh's recipe), each path in turn in one process,
# with seconds, support vectors and the test predictions' agreement with the first path's
# (tests/gpu/bench_svm_gpu.cu). Arguments: "ROWS DIM PATHS" triples, e.g.
#   bash bench/svm_scale.sh "100000 1024 whole-matrix,working-set,working-set-fp32" "500000 8192 working-set"
# (PATHS: whole-matrix, working-set, working-set-fp32, working-set-lanes=N, working-set-q=N).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
bin="$BUILD/tests/gpu_tests"
[ -x "$bin" ] || { echo "svm_scale.sh: $bin is missing (make $bin on a machine with nvcc)" >&2; exit 1; }
[ $# -gt 0 ] || set -- "100000 1024 whole-matrix,working-set" "300000 2048 working-set"
status=0
for spec in "$@"; do
  read -r rows dim paths <<< "$spec"
  SVM_BENCH_ROWS=$rows SVM_BENCH_DIM=$dim SVM_BENCH_PATHS=$paths \
    "$bin" --gtest_also_run_disabled_tests --gtest_filter='BenchSvmGpu.*' 2>&1 | grep '^BENCH' || status=1
done
exit $status
