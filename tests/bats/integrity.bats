#!/usr/bin/env bats
# What is stored is what is read (docs/RELIABILITY.md): 4 KB overwritten in the middle of a
# dataset file's images or of a features file's features is one refusal naming the file and
# the dataset (each dataset the toolkit writes carries block checksums, common/hdf5_checksum.h);
# files without them (h5py's) still read; a few MB of deflated zeros declaring gigabytes of
# images is refused with the bytes before anything is allocated. Exit 1, no output left.

load helpers

setup_file() {
  export INT_DIR
  INT_DIR="$(mktemp -d "${BATS_TMPDIR:-/tmp}/integrity.XXXXXX")"
  # Pixels of noise, which deflate cannot shrink: the images are stored contiguous, as
  # CIFAR-10's photos are (a deflated chunk's own Adler-32 is reliability.bats' case).
  "$PYTHON" - "$INT_DIR" "$REPO_ROOT/tests/helpers" <<'PY'
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
import gen_datasets
gen_datasets.write_cifar100(sys.argv[1], 1000, 200, None)
rng = np.random.default_rng(7)
for name in ("train.bin", "test.bin"):
    path = f"{sys.argv[1]}/cifar-100-binary/{name}"
    rec = np.fromfile(path, np.uint8).reshape(-1, 3074)
    rec[:, 2:] = rng.integers(0, 256, (len(rec), 3072), dtype=np.uint8)
    rec.tofile(path)
PY
  "$BIN/cifar-convert" --quiet --input "$INT_DIR/cifar-100-binary" -o "$INT_DIR/data.h5"
  "$BIN/ae-train" --device cpu --quiet --data "$INT_DIR/data.h5" --epochs 1 --batch-size 50 --seed 3 --threads 2 \
    --encoder-channels 8,4 -o "$INT_DIR/model.h5"
  "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$INT_DIR/model.h5" --data "$INT_DIR/data.h5" \
    -o "$INT_DIR/features.h5"
}

teardown_file() {
  rm -rf "$INT_DIR"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/integrity-test.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# A copy of $1 at $2 whose dataset $3 has 4 KB in the middle of its data overwritten with
# other bytes (its contiguous data's file offset, from h5py).
overwrite_4k() {
  "$PYTHON" - "$1" "$2" "$3" <<'PY'
import shutil, sys, h5py
src, dst, name = sys.argv[1:]
shutil.copyfile(src, dst)
with h5py.File(dst, "r") as f:
    d = f[name]
    offset = d.id.get_offset()
    assert offset is not None, name + " is not contiguous"
    at = offset + d.id.get_storage_size() // 2
with open(dst, "r+b") as f:
    f.seek(at)
    old = f.read(4096)
    f.seek(at)
    f.write(bytes((b + 1) % 256 for b in old))
PY
}

@test "integrity: the datasets the toolkit writes carry their block checksums" {
  "$PYTHON" - "$INT_DIR/data.h5" "$INT_DIR/features.h5" <<'PY'
import sys, zlib, h5py, numpy as np
for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        for name in ("/train/labels", "/test/labels", "/train/images" if "data" in path else "/train/features"):
            d = f[name]
            rows, crc = int(d.attrs["crc32_rows"]), d.attrs["crc32"]
            data = d[()]
            assert len(crc) == (len(data) + rows - 1) // rows, name
            for b, want in enumerate(crc):   # the CRC-32 of each block's bytes as stored
                assert zlib.crc32(data[b * rows:(b + 1) * rows].tobytes()) == int(want), (path, name, b)
PY
}

@test "integrity: 4 KB overwritten in a dataset file's images is one refusal naming the file and /train/images" {
  overwrite_4k "$INT_DIR/data.h5" "$TMP/data.h5" /train/images
  run "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$INT_DIR/model.h5" --data "$TMP/data.h5" -o "$TMP/f.h5"
  assert_error 1 "data\.h5.*: /train/images rows [0-9]+ to [0-9]+ do not match their checksum \(the file changed after it was written"
  assert_no_output "$TMP/f.h5"
  run "$BIN/ae-train" --device cpu --quiet --data "$TMP/data.h5" --epochs 1 --batch-size 50 --threads 2 \
    --encoder-channels 8,4 -o "$TMP/m.h5"
  assert_error 1 "data\.h5.*: /train/images rows [0-9]+ to [0-9]+ do not match their checksum"
  assert_no_output "$TMP/m.h5"
}

@test "integrity: 4 KB overwritten in a features file is one refusal of svm-fit naming the file and /train/features" {
  overwrite_4k "$INT_DIR/features.h5" "$TMP/features.h5" /train/features
  run "$BIN/svm-fit" -q --features "$TMP/features.h5" -o "$TMP/svm.h5"
  assert_error 1 "features\.h5.*: /train/features rows [0-9]+ to [0-9]+ do not match their checksum"
  assert_no_output "$TMP/svm.h5"
  # The untouched file fits.
  run "$BIN/svm-fit" -q --features "$INT_DIR/features.h5" -o "$TMP/svm.h5"
  [ "$status" -eq 0 ]
}

@test "integrity: files without checksums (h5py's, earlier builds') read as before" {
  "$PYTHON" - "$INT_DIR/data.h5" "$INT_DIR/features.h5" "$TMP" <<'PY'
import shutil, sys, h5py
for src in sys.argv[1:3]:
    dst = sys.argv[3] + "/plain-" + src.rsplit("/", 1)[1]
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        def strip(name, obj):
            if isinstance(obj, h5py.Dataset):
                for key in ("crc32", "crc32_rows"):
                    if key in obj.attrs:
                        del obj.attrs[key]
        f.visititems(strip)
PY
  "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$INT_DIR/model.h5" --data "$TMP/plain-data.h5" -o "$TMP/f.h5"
  cmp <("$PYTHON" -c 'import h5py,sys; print(h5py.File(sys.argv[1])["/train/features"][()].tobytes().hex())' "$TMP/f.h5") \
      <("$PYTHON" -c 'import h5py,sys; print(h5py.File(sys.argv[1])["/train/features"][()].tobytes().hex())' "$INT_DIR/features.h5")
  "$BIN/svm-fit" -q --features "$TMP/plain-features.h5" -o "$TMP/svm.h5"
  [ -f "$TMP/svm.h5" ]
}

@test "integrity: gzip chunks of zeros declaring 16 GiB of images, under ulimit -v, are refused with the dataset and the bytes" {
  [ -z "${SANITIZER_LOG_DIR:-}" ] || skip "AddressSanitizer cannot run under ulimit -v (it reserves terabytes of shadow memory)"
  # 5,592,405 CIFAR images (16 GiB), each 1 MiB chunk the same ~1 KB deflate stream of zeros.
  "$PYTHON" - "$TMP/bomb.h5" <<'PY'
import sys, zlib, h5py, numpy as np
n, per_chunk = (16 << 30) // 3072, 341
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format"] = "image-dataset"
    f.attrs["format_version"] = 1
    f.attrs["class_names"] = [s.encode() for s in "abcdefghij"]
    for split, rows in (("train", n), ("test", 10)):
        d = f.create_dataset(split + "/images", (rows, 3, 32, 32), "u1", chunks=(min(rows, per_chunk), 3, 32, 32),
                             compression="gzip")
        stream = zlib.compress(bytes(d.chunks[0] * 3072), 9)
        for c in range(0, rows, d.chunks[0]):
            d.id.write_direct_chunk((c, 0, 0, 0), stream)
        f.create_dataset(split + "/labels", data=np.zeros(rows, "u1"), chunks=True, compression="gzip")
PY
  [ "$(stat -c %s "$TMP/bomb.h5")" -lt $((40 << 20)) ]
  run bash -c 'ulimit -v 4000000 && exec "$1" --device cpu --quiet --data "$2" --epochs 1 --threads 2 -o "$3"' _ \
    "$BIN/ae-train" "$TMP/bomb.h5" "$TMP/m.h5"
  assert_error 1 "bomb\.h5.*: /train/images need 17179868160 bytes \(16383 MiB\), more than half of .*ulimit -v"
  assert_no_output "$TMP/m.h5"
}
