#!/usr/bin/env bash
# The pipeline's file I/O alone, on full-size synthetic files (issue 17; bench/io_bench.cpp):
# reading the deflate image dataset, writing and reading the 60,000 × 8,192 features file,
# writing and reading a 42,700-SV svm-model; then both reads again on copies without the
# datasets' block checksums (their share). `make bench-io` builds $BUILD/bench/io_bench and
# runs this; files go to $IO_BENCH_DIR (default a fresh temporary folder, removed after).
#   make bench-io [IO_BENCH_DIR=...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
dir=${IO_BENCH_DIR:-$(mktemp -d)}
[ -n "${IO_BENCH_DIR:-}" ] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"
bin=$BUILD/bench/io_bench
[ -x "$bin" ] || { echo "io_bench: $bin not built (make bench-io builds and runs it)" >&2; exit 1; }
echo "io_bench: $(nproc) cores, files in $dir"
[ -f "$dir/data.h5" ] || "$bin" dataset "$dir/data.h5"
"$bin" read-dataset "$dir/data.h5"
"$bin" write-features "$dir/features.h5"
"$bin" read-features "$dir/features.h5"
# The block checksums' share of the reads: the same files without them (as h5py writes).
for f in data features; do
  cp "$dir/$f.h5" "$dir/$f-unchecked.h5"
  /usr/bin/python3 -c 'import sys, h5py
f = h5py.File(sys.argv[1], "r+")
f.visititems(lambda _, o: o.attrs.pop("crc32", None) if isinstance(o, h5py.Dataset) else None)' "$dir/$f-unchecked.h5"
done
echo "without checksums:"
"$bin" read-dataset "$dir/data-unchecked.h5"
"$bin" read-features "$dir/features-unchecked.h5"
"$bin" write-model "$dir/svm.h5"
"$bin" read-model "$dir/svm.h5"
ls -l "$dir"
