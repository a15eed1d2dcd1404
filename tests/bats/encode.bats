#!/usr/bin/env bats
# ae-encode --flip (issue 15): the mirrored images' features, and the refusal of features
# that overflow. CPU runs (the reference); the GPU encoder is checked by tests/gpu.

load helpers

setup_file() {
  export ENC_DIR
  ENC_DIR="$(mktemp -d "${BATS_TMPDIR:-/tmp}/encode.XXXXXX")"
  make_dataset "$ENC_DIR/data.h5" 96 40
  "$BIN/ae-train" --device cpu --quiet --data "$ENC_DIR/data.h5" --epochs 1 --batch-size 16 --seed 3 --threads 2 \
    --encoder-channels 16,8 -o "$ENC_DIR/model.h5"
}

teardown_file() {
  rm -rf "$ENC_DIR"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/encode-test.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# A copy ($1) of the suite's model with both encoder layers' weights multiplied by $2.
scaled_encoder() {
  "$PYTHON" - "$ENC_DIR/model.h5" "$1" "$2" <<'PY'
import shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    for name in ("conv1", "conv2"):
        w = f[f"/encoder/{name}/weight"]
        w[...] = w[...] * float(sys.argv[3])
        w.attrs.pop("crc32", None)  # an edited dataset's checksum no longer holds
PY
}

@test "ae-encode --flip: features_flip equals the features of a dataset of mirrored images, exactly" {
  run "$BIN/ae-encode" --device cpu --threads 2 --model "$ENC_DIR/model.h5" --data "$ENC_DIR/data.h5" --flip --json \
    -o "$TMP/f.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"flip":true'* ]]
  [[ "$output" == *"images, 2 views (flip)"* ]]
  # The same images mirrored by numpy, encoded without --flip.
  "$PYTHON" - "$ENC_DIR/data.h5" "$TMP/mirrored.h5" <<'PY'
import shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    for split in ("train", "test"):
        images = f[f"/{split}/images"][...]
        f[f"/{split}/images"][...] = images[:, :, :, ::-1]
        f[f"/{split}/images"].attrs.pop("crc32", None)  # an edited dataset's checksum no longer holds
PY
  "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$ENC_DIR/model.h5" --data "$TMP/mirrored.h5" -o "$TMP/m.h5"
  "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$ENC_DIR/model.h5" --data "$ENC_DIR/data.h5" -o "$TMP/plain.h5"
  "$PYTHON" - "$TMP/f.h5" "$TMP/m.h5" "$TMP/plain.h5" <<'PY'
import sys, h5py, numpy as np
f, m, plain = (h5py.File(p, "r") for p in sys.argv[1:])
assert f.attrs["flip"] == 1 and "flip" not in plain.attrs
for split in ("train", "test"):
    orig, flip = f[f"/{split}/features"][...], f[f"/{split}/features_flip"][...]
    assert flip.shape == orig.shape == (len(f[f"/{split}/labels"]), 8 * 8 * 8), flip.shape
    assert np.array_equal(flip, m[f"/{split}/features"][...]), split      # mirrored images, bit for bit
    assert np.array_equal(orig, plain[f"/{split}/features"][...]), split  # --flip leaves the originals alone
    assert not np.array_equal(flip, orig) and np.abs(orig).max() > 0
PY
}

@test "ae-encode refuses a model whose features overflow to infinity, and writes nothing" {
  scaled_encoder "$TMP/huge.h5" 1e25  # finite weights; their products are beyond float range
  run "$BIN/ae-encode" --device cpu --model "$TMP/huge.h5" --data "$ENC_DIR/data.h5" -o "$TMP/f.h5"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"huge.h5"*"non-finite feature"* ]]
  [ "$(echo "$output" | grep -c .)" -eq 1 ]
  assert_no_output "$TMP/f.h5"
}

@test "a code beyond float16's range: the default storage fails naming --feature-dtype float32, which writes it" {
  scaled_encoder "$TMP/large.h5" 1e3  # codes ~1e6 times larger: finite in float32, beyond float16's 65504
  run "$BIN/ae-encode" --device cpu --model "$TMP/large.h5" --data "$ENC_DIR/data.h5" -o "$TMP/f.h5"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"f.h5: /train/features row "*"beyond float16's range (±65504): encode with --feature-dtype float32"* ]]
  [ "$(echo "$output" | grep -c .)" -eq 1 ]
  assert_no_output "$TMP/f.h5"
  "$BIN/ae-encode" --device cpu --quiet --model "$TMP/large.h5" --data "$ENC_DIR/data.h5" --feature-dtype float32 \
    -o "$TMP/f.h5"
  "$PYTHON" -c "import h5py,sys; x=h5py.File(sys.argv[1])['/train/features'][...]; assert x.dtype == 'float32' and x.max() > 65520, x.max()" "$TMP/f.h5"
}
