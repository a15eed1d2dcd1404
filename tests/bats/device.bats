#!/usr/bin/env bats
# --device on a host without an NVIDIA driver: `--device gpu` says there is no driver (the
# CUDA runtime's own words, "CUDA driver version is insufficient", read as an old driver),
# `--device auto` runs on the CPU, and a run with nothing for the GPU never loads the
# driver library (the dynamic loader's own trace, LD_DEBUG=libs, shows every lookup).
load helpers

setup_file() {
  export DEV_DIR="$BATS_FILE_TMPDIR/dev"
  mkdir -p "$DEV_DIR"
  "$PYTHON" "$REPO_ROOT/tests/python/sklearn_parity.py" make-features "$DEV_DIR/features.h5" --train 200 --test 50 \
    --dim 64 --noise 1.5 --seed 3
}

setup() {
  TMP="$BATS_TEST_TMPDIR"
}

built_with_cuda() { [[ "$("$BIN/svm-fit" --version)" == *CUDA* ]]; }
has_driver() { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; }

# The libcuda.so.1 lookups of one run, from the loader's trace.
libcuda_lookups() { LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -c 'find library=libcuda\.so\.1' || true; }
@test "--device gpu without an NVIDIA driver: one line naming the missing driver, exit 1, no output (svm-fit, svm-eval)" {
  built_with_cuda || skip "this build has no CUDA: --device gpu reports that instead"
  has_driver && skip "this host has an NVIDIA driver (libcuda.so.1)"
  run "$BIN/svm-fit" --device gpu --features "$DEV_DIR/features.h5" -o "$TMP/svm.h5"
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [ "$output" = "svm-fit: error: --device gpu: no CUDA GPU found: this host has no NVIDIA driver (libcuda.so.1 is not installed); install the driver or use --device cpu" ]
  assert_no_output "$TMP/svm.h5"
  [[ "$output" != *"insufficient"* ]]
  "$BIN/svm-fit" -q --device cpu --features "$DEV_DIR/features.h5" -o "$DEV_DIR/svm.h5"
  run "$BIN/svm-eval" --device gpu --model "$DEV_DIR/svm.h5" --features "$DEV_DIR/features.h5" -o "$TMP/e.h5"
  [ "$status" -eq 1 ]
  [[ "$output" == "svm-eval: error: --device gpu: no CUDA GPU found: this host has no NVIDIA driver"* ]]
  assert_no_output "$TMP/e.h5"
}

@test "--device auto without a driver runs on the CPU" {
  has_driver && skip "this host has an NVIDIA driver (libcuda.so.1)"
  run "$BIN/svm-fit" --json --device auto --features "$DEV_DIR/features.h5" -o "$TMP/svm.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"device":"cpu"'* ]]
}

# cuBLAS looks for the driver library once when it is loaded (svm-fit, svm-eval and classify
# link it): that lookup is each tool's baseline, from --version; CUDA itself is initialised
# only for the GPU, and its runtime's first call is another lookup.
@test "nothing for the GPU, no CUDA: --help and --device cpu look for the driver no more than --version does" {
  built_with_cuda || skip "this build has no CUDA"
  has_driver && skip "this host has an NVIDIA driver: the trace shows no failed lookup to count"
  for t in "$BIN"/*; do
    head -c 4 "$t" | grep -q ELF || continue  # report is Python
    base=$(libcuda_lookups "$t" --version)
    [ "$base" -le 1 ] || { echo "$(basename "$t") --version looks for libcuda $base times"; return 1; }
    [ "$(libcuda_lookups "$t" --help)" -eq "$base" ] || { echo "$(basename "$t") --help initialises CUDA"; return 1; }
  done
  base=$(libcuda_lookups "$BIN/svm-fit" --version)
  # The check itself: --device gpu does reach CUDA (so equal counts below mean something).
  [ "$(libcuda_lookups "$BIN/svm-fit" --device gpu --features "$DEV_DIR/features.h5" -o "$TMP/g.h5")" -gt "$base" ]
  [ "$(libcuda_lookups "$BIN/svm-fit" -q --device cpu --features "$DEV_DIR/features.h5" -o "$TMP/c.h5")" -eq "$base" ]
  [ -f "$TMP/c.h5" ]
  [ "$(libcuda_lookups "$BIN/svm-eval" -q --device cpu --model "$TMP/c.h5" --features "$DEV_DIR/features.h5" \
        -o "$TMP/e.h5")" -eq "$base" ]
  [ -f "$TMP/e.h5" ]
  base=$(libcuda_lookups "$BIN/cifar-convert" --version)
  [ "$(libcuda_lookups "$BIN/cifar-convert" -q --input "$(cifar_fixture)" --train-limit 20 --test-limit 10 \
        -o "$TMP/d.h5")" -eq "$base" ]
  [ -f "$TMP/d.h5" ]
}
