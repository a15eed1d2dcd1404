#!/usr/bin/env bats
# ae-encode's overlapped chunk loop (kernels/ae/encode_pipeline.h): random images over several
# chunks, the last one partial, with --flip --shifts 2 (six views), give the same datasets bit
# for bit whether encoded in one chunk, in chunks of 1,024 or by a group of two ranks; a read
# that fails on the I/O thread mid-run is one error line and leaves no output. CPU runs.

load helpers

setup_file() {
  export PIPE_DIR
  PIPE_DIR="$(mktemp -d "${BATS_TMPDIR:-/tmp}/ae-encode-pipeline.XXXXXX")"
  # Random pixels: 2,100 train images (two chunks of 1,024 and one of 52), 77 test images.
  "$PYTHON" - "$PIPE_DIR/data.h5" <<'PY'
import sys, h5py, numpy as np
rng = np.random.default_rng(11)
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format"] = "image-dataset"
    f.attrs["format_version"] = np.int64(1)
    f.attrs["class_names"] = ["a", "b", "c"]
    for split, n in (("train", 2100), ("test", 77)):
        f.create_dataset(f"/{split}/images", data=rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8),
                         chunks=(min(n, 256), 3, 32, 32), compression="gzip", compression_opts=1)
        f[f"/{split}/labels"] = rng.integers(0, 3, n, dtype=np.uint8)
PY
  "$BIN/ae-train" --device cpu --quiet --data "$PIPE_DIR/data.h5" --epochs 1 --batch-size 64 --seed 3 --threads 2 \
    --encoder-channels 16,8 --train-limit 256 -o "$PIPE_DIR/model.h5"
}

teardown_file() {
  rm -rf "$PIPE_DIR"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/ae-encode-pipeline-test.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

@test "ae-encode --flip --shifts 2: chunks of 1,024, one chunk and two ranks write the same datasets bit for bit" {
  local args=(--device cpu --model "$PIPE_DIR/model.h5" --data "$PIPE_DIR/data.h5" --flip --shifts 2)
  run "$BIN/ae-encode" "${args[@]}" --threads 2 --batch-size 64 --json -o "$TMP/chunked.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"images":2177'* ]]
  # The I/O thread's reading and writing, and the main thread's encoding, are reported.
  grep '^{' <<< "$output" | "$PYTHON" -c 'import json, sys
j = json.load(sys.stdin)
assert j["io_read_seconds"] > 0 and j["io_write_seconds"] > 0 and j["phases"]["compute"] > 0, j'
  "$BIN/ae-encode" -q "${args[@]}" --threads 2 --batch-size 4096 -o "$TMP/one_chunk.h5"
  "$BIN/ae-encode" -q "${args[@]}" --batch-size 64 --ranks 2 -o "$TMP/ranks.h5"
  "$PYTHON" - "$TMP/chunked.h5" "$TMP/one_chunk.h5" "$TMP/ranks.h5" <<'PY'
import sys, h5py, numpy as np
files = [h5py.File(p, "r") for p in sys.argv[1:]]
a = files[0]
names = ["features", "features_flip", "features_shift1", "features_shift1_flip", "features_shift2",
         "features_shift2_flip", "labels"]
for split, n in (("train", 2100), ("test", 77)):
    assert sorted(a[split].keys()) == sorted(names), list(a[split].keys())
    for name in names:
        x = a[f"/{split}/{name}"][...]
        assert len(x) == n, (split, name, x.shape)
        if name != "labels":
            assert x.shape == (n, 512) and np.isfinite(x).all() and np.count_nonzero(x) > x.size // 4, (split, name)
            assert not np.array_equal(x, a[f"/{split}/features"][...]) or name == "features", (split, name)
        for b in files[1:]:
            y = b[f"/{split}/{name}"][...]
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (b.filename, split, name)
for b in files[1:]:
    for key in ("format", "format_version", "latent_shape", "views", "flip", "class_names"):
        assert np.array_equal(a.attrs[key], b.attrs[key]), (b.filename, key)
PY
}

@test "a chunk that fails to read on the I/O thread mid-run: one line naming the file, exit 1, no output" {
  cp "$PIPE_DIR/data.h5" "$TMP/broken.h5"
  # Overwrite the middle of the compressed chunk holding train rows 1,280..1,535 (the second
  # chunk the encoder asks for).
  "$PYTHON" - "$TMP/broken.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    info = f["/train/images"].id.get_chunk_info_by_coord((1280, 0, 0, 0))
with open(sys.argv[1], "r+b") as out:
    out.seek(info.byte_offset + info.size // 2)
    out.write(b"\xff" * 64)
PY
  run "$BIN/ae-encode" --device cpu --threads 2 --model "$PIPE_DIR/model.h5" --data "$TMP/broken.h5" --flip \
    -o "$TMP/f.h5"
  assert_error 1 "broken.h5: cannot read /train/images: its compressed chunk at row 1280 is damaged"
  assert_no_output "$TMP/f.h5"
}
