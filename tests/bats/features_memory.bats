#!/usr/bin/env bats
# Buffers sized from what a features or model file declares (docs/RELIABILITY.md, round 4,
# class 3): a few MB of deflated chunks declaring gigabytes of features, or a contiguous
# dataset as large as a sparse file whose bytes are a hole, is refused by every features
# reader (svm-fit, svm-eval, classify --features) with one line naming the file, the
# dataset and the bytes, before the buffer is allocated: exit 1, no output left. The rows a
# tool asks for (--limit) are what it holds, not the split's declared length. The cases run
# under `ulimit -v`, so that a reader that allocated first would fail differently.

load helpers

setup_file() {
  export FM_DIR
  FM_DIR="$(mktemp -d "${BATS_TMPDIR:-/tmp}/features-memory.XXXXXX")"
  # small.h5: 10 separable classes of 64 features (the bombs' width), to fit a model on;
  # small4.h5: 4 of them, without class_names (a plain file's classes are 0..its largest label).
  # bomb.h5: 2^26 rows a split as float16 (8 GiB; 16 GiB as the float32 a reader holds) in
  # 1 MiB gzip chunks, each the same short deflate stream of 1.0s, labels (3) likewise;
  # bomb-nonames.h5: the same without class_names.
  # sparse.h5: the same shape as contiguous float32 (16 GiB a split) of which only the last
  # row was written: the file is as long as its data, which is a hole on disk.
  "$PYTHON" - "$FM_DIR" <<'PY'
import shutil, sys, zlib, h5py, numpy as np
out, D, n = sys.argv[1], 64, 1 << 26
names = [s.encode() for s in "abcdefghij"]
rng = np.random.default_rng(11)
centres = rng.normal(0, 3, (10, D))
with h5py.File(f"{out}/small.h5", "w") as f:
    f.attrs["class_names"] = names
    for split, rows in (("train", 200), ("test", 100)):
        y = np.arange(rows) % 10
        f[f"{split}/features"] = (centres[y] + rng.normal(0, 0.3, (rows, D))).astype(np.float32)
        f[f"{split}/labels"] = y.astype(np.uint8)
with h5py.File(f"{out}/small4.h5", "w") as f:
    for split, rows in (("train", 80), ("test", 40)):
        y = np.arange(rows) % 4
        f[f"{split}/features"] = (centres[y] + rng.normal(0, 0.3, (rows, D))).astype(np.float32)
        f[f"{split}/labels"] = y.astype(np.uint8)
with h5py.File(f"{out}/bomb.h5", "w") as f:
    f.attrs["class_names"] = names
    crow, lrow = 8192, 1 << 20
    stream = zlib.compress(np.full((crow, D), 1.0, "f2").tobytes(), 9)
    labels = zlib.compress(np.full(lrow, 3, "u1").tobytes(), 9)
    for split in ("train", "test"):
        d = f.create_dataset(f"{split}/features", (n, D), "f2", chunks=(crow, D), compression="gzip")
        for c in range(0, n, crow):
            d.id.write_direct_chunk((c, 0), stream)
        lab = f.create_dataset(f"{split}/labels", (n,), "u1", chunks=(lrow,), compression="gzip")
        for c in range(0, n, lrow):
            lab.id.write_direct_chunk((c,), labels)
shutil.copyfile(f"{out}/bomb.h5", f"{out}/bomb-nonames.h5")
with h5py.File(f"{out}/bomb-nonames.h5", "r+") as f:
    del f.attrs["class_names"]
with h5py.File(f"{out}/sparse.h5", "w") as f:
    f.attrs["class_names"] = names
    for split in ("train", "test"):
        d = f.create_dataset(f"{split}/features", (n, D), "f4")
        d[n - 1] = np.full(D, 1.0, "f4")
        lab = f.create_dataset(f"{split}/labels", (n,), "u1")
        lab[n - 1] = 3
PY
  "$BIN/svm-fit" -q --device cpu --threads 2 --features "$FM_DIR/small.h5" -o "$FM_DIR/svm.h5"
  "$BIN/svm-fit" -q --device cpu --threads 2 --features "$FM_DIR/small4.h5" -o "$FM_DIR/svm4.h5"
}

teardown_file() {
  rm -rf "$FM_DIR"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/features-memory-test.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# limited TOOL ARGS...: the tool under an address space of about 3.8 GB.
limited() {
  run bash -c 'ulimit -v 4000000 && exec "$@"' _ "$@"
}

# What the readers say: the dataset, the rows and width it declares, the bytes, the limit.
declared() {
  echo "$1\.h5: /$2/features \(67108864 rows of 64 features as float32, with their labels\) need [0-9]+ bytes \([0-9]+ MiB\), more than half of what ulimit -v \(RLIMIT_AS\) leaves this process"
}

skip_under_asan() {
  [ -z "${SANITIZER_LOG_DIR:-}" ] || skip "AddressSanitizer cannot run under ulimit -v (it reserves terabytes of shadow memory)"
}

@test "features memory: the test files are what they claim (a few MB declaring 16 GiB a split)" {
  [ "$(stat -c %s "$FM_DIR/bomb.h5")" -lt $((40 << 20)) ]
  [ "$(stat -c %s "$FM_DIR/sparse.h5")" -gt $((32 << 30)) ]
  [ "$(du -k "$FM_DIR/sparse.h5" | cut -f1)" -lt 10240 ]
}

@test "features memory: svm-fit refuses a gzip bomb and a sparse file's declared rows, naming the file and the dataset" {
  skip_under_asan
  for f in bomb sparse; do
    limited "$BIN/svm-fit" --device cpu --threads 2 --features "$FM_DIR/$f.h5" -o "$TMP/svm.h5"
    assert_error 1 "svm-fit: error: .*$(declared "$f" train)"
    assert_no_output "$TMP/svm.h5"
  done
}

@test "features memory: svm-eval refuses them too, and reads the rows --limit asks for" {
  skip_under_asan
  for f in bomb sparse; do
    limited "$BIN/svm-eval" --device cpu --threads 2 --model "$FM_DIR/svm.h5" --features "$FM_DIR/$f.h5" \
      -o "$TMP/eval.h5"
    assert_error 1 "svm-eval: error: .*$(declared "$f" test)"
    assert_no_output "$TMP/eval.h5"
  done
  # Memory follows the rows read: 500 rows of the bomb are 128 KB.
  limited "$BIN/svm-eval" -q --device cpu --threads 2 --model "$FM_DIR/svm.h5" --features "$FM_DIR/bomb.h5" \
    --limit 500 -o "$TMP/eval.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"n":500,'* ]]
  [ -f "$TMP/eval.h5" ]
}

@test "features memory: a plain file's class table is found a block of labels at a time, not from a copy of them all" {
  skip_under_asan
  # A split's 2^26 labels as int64 are 512 MiB: a copy of them all does not fit beside the
  # tool in 900 MB of address space; blocks of them do.
  run bash -c 'ulimit -v 900000 && exec "$@"' _ "$BIN/svm-eval" -q --device cpu --threads 2 --model "$FM_DIR/svm4.h5" \
    --features "$FM_DIR/bomb-nonames.h5" --limit 500 -o "$TMP/eval.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"n":500,'* ]]
  [[ "$output" == *'"class_names":["0","1","2","3"]'* ]]
  [ -f "$TMP/eval.h5" ]
}

@test "features memory: classify --features refuses them, printing no row" {
  skip_under_asan
  for f in bomb sparse; do
    limited "$BIN/classify" --device cpu --svm "$FM_DIR/svm.h5" --features "$FM_DIR/$f.h5"
    assert_error 1 "classify: error: .*$(declared "$f" test)"
  done
}

@test "features memory: a model whose support vectors are a gzip bomb is refused by svm-eval and classify" {
  skip_under_asan
  # 2^24 support vectors of 64 features (4 GiB as float32) in deflated chunks, with the
  # coefficients and indices they imply, replacing the fitted model's.
  "$PYTHON" - "$FM_DIR/svm.h5" "$TMP/bomb-svm.h5" <<'PY'
import shutil, sys, zlib, h5py, numpy as np
shutil.copyfile(sys.argv[1], sys.argv[2])
n, D = 1 << 24, 64
def bomb(f, name, shape, chunks, dtype, value):  # 1 MiB chunks, each the same deflate stream
    del f[name]
    d = f.create_dataset(name, shape, dtype, chunks=chunks, compression="gzip")
    stream = zlib.compress(np.full(chunks, value, dtype).tobytes(), 9)
    for idx in np.ndindex(*[s // c for s, c in zip(shape, chunks)]):
        d.id.write_direct_chunk(tuple(i * c for i, c in zip(idx, chunks)), stream)
with h5py.File(sys.argv[2], "r+") as f:
    k = len(f["svm/classes"])
    assert f["svm/support_vectors"].shape[1] == D
    del f["svm/n_support"]
    f["svm/n_support"] = np.array([n // k] * (k - 1) + [n - n // k * (k - 1)], np.int32)
    bomb(f, "svm/support_vectors", (n, D), (4096, D), "f4", 0.5)
    bomb(f, "svm/dual_coef", (k - 1, n), (1, 1 << 17), "f8", 0.25)
    bomb(f, "svm/support_indices", (n,), (1 << 17,), "i8", 1)
PY
  [ "$(stat -c %s "$TMP/bomb-svm.h5")" -lt $((40 << 20)) ]
  local want=".*bomb-svm\.h5: /svm/support_vectors \(16777216 rows of 64 features as float32\) need 4294967296 bytes \(4096 MiB\), more than half of"
  limited "$BIN/svm-eval" --device cpu --threads 2 --model "$TMP/bomb-svm.h5" --features "$FM_DIR/small.h5" \
    -o "$TMP/eval.h5"
  assert_error 1 "svm-eval: error: $want"
  assert_no_output "$TMP/eval.h5"
  limited "$BIN/classify" --device cpu --svm "$TMP/bomb-svm.h5" --features "$FM_DIR/small.h5"
  assert_error 1 "classify: error: $want"
}

@test "features memory: report checks every row of a bomb and of the sparse file in bounded pieces, under the same limit" {
  skip_under_asan
  [ -x "$BIN/report" ] || skip "report not built"
  # The tools that hold the rows refuse these files; the report never holds them: it checks
  # every row in pieces of at most 16 MiB (docs/RELIABILITY.md, class 5), so under the
  # address-space limit that refuses svm-fit it reads both to the end.
  limited "$BIN/report" -q --features "$FM_DIR/bomb.h5" -o "$TMP/rep"
  [ "$status" -eq 0 ]
  [ -f "$TMP/rep/index.html" ]
  limited "$BIN/report" -q --features "$FM_DIR/sparse.h5" -o "$TMP/rep2"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -f "$TMP/rep2/index.html" ]
}
