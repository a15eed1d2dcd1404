#!/usr/bin/env bash
# The pipeline's file I/O alone, on full-size synthetic files (issue 17; bench/io_bench.cpp):
# reading the deflate image dataset, writing and reading the 60,000 × 8,192 features file,
# writing and reading a 42,700-SV svm-model. Needs a built $BUILD (make all) for its
# libraries; files go to $IO_BENCH_DIR (default a fresh temporary folder, removed after).
#   BUILD=build bash bench/io_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
dir=${IO_BENCH_DIR:-$(mktemp -d)}
[ -n "${IO_BENCH_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"
bin=$BUILD/bench/io_bench
mkdir -p "$(dirname "$bin")"
# shellcheck disable=SC2046
g++ -O2 -std=c++17 -fopenmp -I. $(pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial) \
  bench/io_bench.cpp "$BUILD/lib/libcae_ae.a" "$BUILD/lib/libcae_svm.a" "$BUILD/lib/libcae_common.a" \
  $(pkg-config --libs hdf5 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5) \
  -ldeflate -lcrypto -lopenblas -lsvm -lpthread -o "$bin"
echo "io_bench: $(nproc) cores, files in $dir"
[ -f "$dir/data.h5" ] || "$bin" dataset "$dir/data.h5"
"$bin" read-dataset "$dir/data.h5"
"$bin" write-features "$dir/features.h5"
"$bin" read-features "$dir/features.h5"
"$bin" write-model "$dir/svm.h5"
"$bin" read-model "$dir/svm.h5"
ls -l "$dir"
