#!/usr/bin/env bash
# make bench-cpu: every CPU benchmark, each beside its reference in the same run.
# Prints tables; paste them into docs/BENCHMARKS.md with the date and machine.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
export BUILD PYTHON="${PYTHON:-/usr/bin/python3}"
echo "# bench-cpu on $(hostname), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%Y-%m-%dT%H:%MZ)"
status=0
bash bench/convert_cpu.sh || status=1
for b in bench/ae_cpu.sh bench/encode_memory.sh bench/svm_cpu.sh; do
  if [ -f "$b" ]; then bash "$b" || status=1; else echo "($b not present)"; fi
done
exit $status
