#!/usr/bin/env bats
# cifar-convert beyond CIFAR-10 (issue 16): IDX (raw and .gz), CIFAR-100 (fine/coarse, folder
# and .tar.gz), image folders (shapes, labels, names, resizing, gray), the damaged inputs
# (truncated IDX, wrong magic, label out of range, corrupt PNG with and without --skip-bad,
# empty class folder), and the installed Fashion-MNIST. Inputs come from
# tests/helpers/gen_datasets.py, whose pixels and labels are known functions of position.

load helpers

GEN="$REPO_ROOT/tests/helpers/gen_datasets.py"

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/datasets.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# Checks a converted file against the generator: FILE KIND [ARGS] (python asserts).
check_h5() {
  "$PYTHON" - "$REPO_ROOT/tests/helpers" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import h5py, numpy as np
import gen_datasets as g
path, kind = sys.argv[2], sys.argv[3]
f = h5py.File(path, "r")
a = f.attrs
assert a["format"] == "image-dataset", a["format"]
names = [str(n) for n in a["class_names"]]
tr, te = f["train/images"][:], f["test/images"][:]
trl, tel = f["train/labels"][:], f["test/labels"][:]
if kind == "idx":
    ntr, nte = int(sys.argv[4]), int(sys.argv[5])
    assert tr.shape == (ntr, 1, 28, 28) and te.shape == (nte, 1, 28, 28), (tr.shape, te.shape)
    assert (tr == g.idx_images(0, ntr)).all() and (te == g.idx_images(1, nte)).all()
    assert (trl == g.idx_labels(0, ntr)).all() and (tel == g.idx_labels(1, nte)).all()
    assert names == [str(i) for i in range(10)], names
    assert a["source_format"] == "idx"
elif kind in ("fine", "coarse"):
    assert tr.shape == (300, 3, 32, 32) and te.shape == (100, 3, 32, 32)
    assert (tr == g.c100_images(0, 300)).all() and (te == g.c100_images(1, 100)).all()
    lab = g.c100_fine if kind == "fine" else g.c100_coarse
    assert (trl == lab(0, 300)).all() and (tel == lab(1, 100)).all()
    assert names == (g.FINE_NAMES if kind == "fine" else g.COARSE_NAMES)
    assert a["source_format"] == "cifar100" and a["label_set"] == kind
elif kind == "folder":
    gray = sys.argv[4] == "gray"
    c = 1 if gray else 3
    assert tr.shape == (5, c, 12, 10) and te.shape == (3, c, 12, 10), (tr.shape, te.shape)
    assert names == ["cat", "dog"]
    # round-robin over the classes: cat0 dog0 cat1 dog1 cat2 | test: cat0 dog0 dog1
    order = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
    assert list(trl) == [k for k, _ in order] and list(tel) == [0, 1, 1]
    for row, (k, i) in enumerate(order):
        img = g.folder_image("train", k, i, 12, 10, gray)
        img = img[None] if gray else img.transpose(2, 0, 1)
        assert (tr[row] == img).all(), row
    assert a["source_format"] == "folder" and a["skipped_images"] == 0
    assert tr.std() > 0
print("ok")
PY
}

@test "IDX files, raw and gzip, convert pixel-exactly to 1x28x28 with digit class names" {
  "$PYTHON" "$GEN" idx "$TMP/raw" --train 120 --test 40
  "$PYTHON" "$GEN" idx "$TMP/gz" --gz --train 120 --test 40
  run "$BIN/cifar-convert" --input "$TMP/raw" -o "$TMP/raw.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"format":"idx"'* ]]
  check_h5 "$TMP/raw.h5" idx 120 40
  "$BIN/cifar-convert" -q --input "$TMP/gz" -o "$TMP/gz.h5"
  check_h5 "$TMP/gz.h5" idx 120 40
  "$BIN/cifar-convert" -q --input "$TMP/gz" --format idx --train-limit 50 --test-limit 7 -o "$TMP/lim.h5"
  check_h5 "$TMP/lim.h5" idx 50 7
}

@test "images deflate shrinks by less than a tenth (noise) are stored contiguous, dark ones deflated; both read back exactly and feed the encoder" {
  "$PYTHON" - "$TMP" <<'PY'
import os, struct, sys
import numpy as np
rng = np.random.default_rng(5)
for kind in ("noise", "dark"):
    os.makedirs(f"{sys.argv[1]}/{kind}")
    for stem, n in (("train", 600), ("t10k", 200)):
        x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        if kind == "dark":
            x[rng.random(x.shape) < 0.9] = 0
        y = rng.integers(0, 10, n, dtype=np.uint8)
        for name, a in ((f"{stem}-images-idx3-ubyte", x), (f"{stem}-labels-idx1-ubyte", y)):
            with open(f"{sys.argv[1]}/{kind}/{name}", "wb") as f:
                f.write(struct.pack(">BBBB", 0, 0, 8, a.ndim) + b"".join(struct.pack(">I", d) for d in a.shape) + a.tobytes())
PY
  for kind in noise dark; do "$BIN/cifar-convert" -q --input "$TMP/$kind" -o "$TMP/$kind.h5"; done
  "$PYTHON" - "$TMP" <<'PY'
import sys
import h5py, numpy as np
for kind, chunked in (("noise", False), ("dark", True)):
    f = h5py.File(f"{sys.argv[1]}/{kind}.h5", "r")
    for split, stem in (("train", "train"), ("test", "t10k")):
        d = f[f"{split}/images"]
        assert (d.chunks is not None) == chunked and (d.compression == "gzip") == chunked, (kind, split, d.chunks, d.compression)
        raw = open(f"{sys.argv[1]}/{kind}/{stem}-images-idx3-ubyte", "rb").read()[16:]
        assert (d[:] == np.frombuffer(raw, np.uint8).reshape(-1, 1, 28, 28)).all(), (kind, split)
PY
  "$BIN/ae-train" -q --data "$TMP/noise.h5" --epochs 1 --batch-size 64 --encoder-channels 8,4 --device cpu -o "$TMP/m.h5"
  "$BIN/ae-encode" -q --model "$TMP/m.h5" --data "$TMP/noise.h5" --device cpu -o "$TMP/f.h5"
  "$PYTHON" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); assert f['train/features'].shape[0] == 600 and f['test/features'].shape[0] == 200" "$TMP/f.h5"
}

@test "CIFAR-100 fine and coarse labels, folder and .tar.gz, names from the meta files" {
  "$PYTHON" "$GEN" cifar100 "$TMP" --tar "$TMP/c100.tar.gz"
  "$BIN/cifar-convert" -q --input "$TMP/cifar-100-binary" -o "$TMP/fine.h5"
  check_h5 "$TMP/fine.h5" fine
  "$BIN/cifar-convert" -q --input "$TMP/cifar-100-binary" --labels coarse -o "$TMP/coarse.h5"
  check_h5 "$TMP/coarse.h5" coarse
  "$BIN/cifar-convert" -q --input "$TMP/c100.tar.gz" --labels coarse -o "$TMP/tar.h5"
  check_h5 "$TMP/tar.h5" coarse
}

@test "an image folder with 2 classes converts to the right shapes, labels and names" {
  "$PYTHON" "$GEN" folder "$TMP/rgb" --size 12x10
  "$PYTHON" "$GEN" folder "$TMP/gray" --size 12x10 --gray
  "$BIN/cifar-convert" -q --input "$TMP/rgb" -o "$TMP/rgb.h5"
  check_h5 "$TMP/rgb.h5" folder rgb
  "$BIN/cifar-convert" -q --input "$TMP/gray" -o "$TMP/gray.h5"
  check_h5 "$TMP/gray.h5" folder gray
}

@test "image folders: --image-size resizes, --color gray converts, mixed sizes need --image-size" {
  "$PYTHON" "$GEN" folder "$TMP/f" --size 12x10
  "$BIN/cifar-convert" -q --input "$TMP/f" --image-size 6x5 --color gray -o "$TMP/s.h5"
  "$PYTHON" - "$TMP/s.h5" "$REPO_ROOT/tests/helpers" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import h5py, numpy as np
import gen_datasets as g
f = h5py.File(sys.argv[1], "r")
tr = f["train/images"][:]
assert tr.shape == (5, 1, 6, 5), tr.shape
# Exact 2x2 area means of BT.601 luma (integer weights, rounded half up), then rounded.
img = g.folder_image("train", 0, 0, 12, 10, False).astype(np.int64)
luma = (19595 * img[..., 0] + 38470 * img[..., 1] + 7471 * img[..., 2] + 32768) >> 16
want = np.floor(luma.reshape(6, 2, 5, 2).mean(axis=(1, 3)) + 0.5).astype(np.uint8)
assert (tr[0, 0] == want).all(), (tr[0, 0], want)
PY
  "$PYTHON" "$GEN" image "$TMP/f/train/dog/big.png" --size 20x20
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/x.h5"
  assert_error 1 "big.png: is 20x20 pixels but .*img0.png is 10x12 .*--image-size"
  assert_no_output "$TMP/x.h5"
  "$BIN/cifar-convert" -q --input "$TMP/f" --image-size 12x10 -o "$TMP/y.h5"
}

@test "a JPEG folder decodes through libjpeg" {
  "$PYTHON" "$GEN" folder "$TMP/j" --size 16x16 --jpeg
  "$BIN/cifar-convert" -q --input "$TMP/j" -o "$TMP/j.h5"
  "$PYTHON" - "$TMP/j.h5" "$REPO_ROOT/tests/helpers" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import h5py, numpy as np
import gen_datasets as g
f = h5py.File(sys.argv[1], "r")
tr = f["train/images"][:]
assert tr.shape == (5, 3, 16, 16)
want = g.folder_image("train", 0, 0, 16, 16, False).transpose(2, 0, 1).astype(int)
err = np.abs(tr[0].astype(int) - want).mean()
assert err < 6, err  # lossy, quality 95
PY
}

@test "a truncated IDX file is an error naming it, before any allocation from its header" {
  "$PYTHON" "$GEN" idx "$TMP/d"
  truncate -s 1000 "$TMP/d/train-images-idx3-ubyte"
  run "$BIN/cifar-convert" --input "$TMP/d" -o "$TMP/x.h5"
  assert_error 1 "train-images-idx3-ubyte: is truncated: 1000 bytes, the IDX header says 94096"
  assert_no_output "$TMP/x.h5"
  # A header claiming 2^32 rows in a 16-byte file.
  printf '\x00\x00\x08\x03\xff\xff\xff\xff\x00\x00\x00\x1c\x00\x00\x00\x1c' > "$TMP/d/train-images-idx3-ubyte"
  run "$BIN/cifar-convert" --input "$TMP/d" -o "$TMP/x.h5"
  assert_error 1 "train-images-idx3-ubyte: header claims more than 4 GB"
}

@test "a truncated gzip IDX file is an error naming it" {
  "$PYTHON" "$GEN" idx "$TMP/d" --gz
  f="$TMP/d/t10k-images-idx3-ubyte.gz"
  head -c 300 "$f" > "$f.x" && mv "$f.x" "$f"
  run "$BIN/cifar-convert" --input "$TMP/d" -o "$TMP/x.h5"
  assert_error 1 "t10k-images-idx3-ubyte.gz: .*(truncated|corrupt)"
  assert_no_output "$TMP/x.h5"
}

@test "a wrong IDX magic number is an error naming the file" {
  "$PYTHON" "$GEN" idx "$TMP/d"
  printf '\x00\x00\x08\x03' | dd of="$TMP/d/t10k-labels-idx1-ubyte" conv=notrunc status=none
  run "$BIN/cifar-convert" --input "$TMP/d" -o "$TMP/x.h5"
  assert_error 1 "t10k-labels-idx1-ubyte: wrong magic number 0x00000803, expected 0x00000801"
  assert_no_output "$TMP/x.h5"
}

@test "IDX labels and images of different counts, and a label out of range, are errors" {
  "$PYTHON" "$GEN" idx "$TMP/d"
  printf '\x0c' | dd of="$TMP/d/train-labels-idx1-ubyte" bs=1 seek=20 conv=notrunc status=none
  run "$BIN/cifar-convert" --input "$TMP/d" -o "$TMP/x.h5"
  assert_error 1 "train-labels-idx1-ubyte: record 12 has label 12, expected 0..9"
  assert_no_output "$TMP/x.h5"
  "$PYTHON" "$GEN" idx "$TMP/e" --train 120
  "$PYTHON" "$GEN" idx "$TMP/e2" --train 119
  cp "$TMP/e2/train-labels-idx1-ubyte" "$TMP/e/"
  run "$BIN/cifar-convert" --input "$TMP/e" -o "$TMP/x.h5"
  assert_error 1 "train-labels-idx1-ubyte: has 119 labels but .*train-images-idx3-ubyte has 120 images"
}

@test "CIFAR-100: a partial record and a label out of range are errors naming the file" {
  "$PYTHON" "$GEN" cifar100 "$TMP"
  d="$TMP/cifar-100-binary"
  truncate -s 3075 "$d/test.bin"
  run "$BIN/cifar-convert" --input "$d" -o "$TMP/x.h5"
  assert_error 1 "test.bin: is 3075 bytes, not a whole number of 3,074-byte CIFAR-100 records"
  "$PYTHON" "$GEN" cifar100 "$TMP"
  printf '\x64' | dd of="$d/train.bin" bs=1 seek=$((3074 * 5 + 1)) conv=notrunc status=none
  run "$BIN/cifar-convert" --input "$d" -o "$TMP/x.h5"
  assert_error 1 "train.bin: record 5 has labels coarse .*, fine 100, expected 0..19 and 0..99"
  assert_no_output "$TMP/x.h5"
}

@test "a corrupt PNG is an error naming it; --skip-bad skips and counts it" {
  "$PYTHON" "$GEN" folder "$TMP/f"
  head -c 60 "$TMP/f/train/cat/img1.png" > "$TMP/x.png" && mv "$TMP/x.png" "$TMP/f/train/cat/img1.png"
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/x.h5"
  assert_error 1 "train/cat/img1.png: corrupt PNG"
  assert_no_output "$TMP/x.h5"
  echo "not an image" > "$TMP/f/test/dog/img0.png"
  run "$BIN/cifar-convert" --input "$TMP/f" --skip-bad --json -o "$TMP/s.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"skipped":2'* ]]
  [[ "$output" == *"skipped "*"img1.png: corrupt PNG"* ]]
  [[ "$output" == *"skipped "*"img0.png: is not a PNG or JPEG file"* ]]
  "$PYTHON" -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r')
assert f['train/images'].shape[0] == 4 and f['test/images'].shape[0] == 2
assert f.attrs['skipped_images'] == 2" "$TMP/s.h5"
}

@test "an empty class folder, a test class train lacks, and a folder without test/ are errors" {
  "$PYTHON" "$GEN" folder "$TMP/f"
  mkdir "$TMP/f/train/zebra"
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/x.h5"
  assert_error 1 "train/zebra: class folder has no .png/.jpg/.jpeg images"
  assert_no_output "$TMP/x.h5"
  rmdir "$TMP/f/train/zebra"; mkdir "$TMP/f/test/zebra"
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/x.h5"
  assert_error 1 "test/zebra: is a class that train/ does not have"
  rm -rf "$TMP/f/test"
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/x.h5"
  assert_error 1 "has no test/ folder"
}

@test "usage errors: unknown --format, image options on IDX, bad --image-size" {
  "$PYTHON" "$GEN" idx "$TMP/d"
  run "$BIN/cifar-convert" --input "$TMP/d" --format png -o "$TMP/x.h5"
  [ "$status" -eq 2 ]
  run "$BIN/cifar-convert" --input "$TMP/d" --image-size 8 -o "$TMP/x.h5"
  assert_error 2 "--image-size, --color and --skip-bad apply to image folders, not to idx input"
  run "$BIN/cifar-convert" --input "$TMP/d" --labels coarse -o "$TMP/x.h5"
  assert_error 2 "--labels applies to CIFAR-100 input only"
  "$PYTHON" "$GEN" folder "$TMP/f"
  run "$BIN/cifar-convert" --input "$TMP/f" --image-size 0x4 -o "$TMP/x.h5"
  assert_error 2 "--image-size: sides must be 1 to 4096 pixels"
  run "$BIN/cifar-convert" --input "$TMP/f" --format idx -o "$TMP/x.h5"
  assert_error 1 "missing IDX files"
}

@test "installed Fashion-MNIST converts to 1x28x28 with its class names (skipped when absent)" {
  src=/usr/share/datasets/fashion-mnist
  [ -f "$src/train-images-idx3-ubyte.gz" ] || skip "no $src"
  "$BIN/cifar-convert" -q --input "$src" -o "$TMP/fm.h5"
  "$PYTHON" - "$TMP/fm.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f["train/images"].shape == (60000, 1, 28, 28) and f["test/images"].shape == (10000, 1, 28, 28)
# Dark backgrounds: deflate shrinks these images by a third, so they are stored deflated.
assert f["train/images"].compression == "gzip" and f["test/images"].compression == "gzip"
names = [str(n) for n in f.attrs["class_names"]]
assert "Ankle boot" in names and names[0] == "T-shirt/top" and len(names) == 10
assert f.attrs["source_dataset"] == "fashion-mnist"
assert list(f["train/labels"][:5]) == [9, 0, 0, 3, 0]
PY
}

@test "Fashion-MNIST: the default chain on 3,000 training images, 2 epochs, reaches >= 75 % on 1,000 test images (CPU)" {
  src=/usr/share/datasets/fashion-mnist
  [ -f "$src/train-images-idx3-ubyte.gz" ] || skip "no $src"
  # The fashion-mnist defaults of pipelines/datasets.mk: encoder 128,64, batch 128 (~30 s on 2 cores).
  "$BIN/cifar-convert" -q --input "$src" --train-limit 3000 --test-limit 1000 -o "$TMP/fm.h5"
  "$BIN/ae-train" -q --data "$TMP/fm.h5" --epochs 2 --batch-size 128 --encoder-channels 128,64 --device cpu -o "$TMP/m.h5"
  "$BIN/ae-encode" -q --model "$TMP/m.h5" --data "$TMP/fm.h5" --device cpu -o "$TMP/f.h5"
  "$BIN/svm-fit" -q --features "$TMP/f.h5" --device cpu -o "$TMP/s.h5"
  "$BIN/svm-eval" -q --model "$TMP/s.h5" --features "$TMP/f.h5" --device cpu -o "$TMP/e.h5"
  acc=$("$PYTHON" -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r').attrs['accuracy'])" "$TMP/e.h5")
  echo "accuracy $acc" >&3
  "$PYTHON" -c "import sys; assert float(sys.argv[1]) >= 0.75, sys.argv[1]" "$acc"
}

@test "CMYK and YCCK JPEGs convert with Pillow's colours; an unsupported JPEG is skipped as unsupported, not corrupt" {
  local fx="$REPO_ROOT/tests/fixtures/jpeg"
  mkdir -p "$TMP/f/train/ink" "$TMP/f/test/ink"
  cp "$fx/cmyk-adobe.jpg" "$fx/ycck-adobe.jpg" "$TMP/f/train/ink/"
  cp "$fx/cmyk-plain.jpg" "$TMP/f/test/ink/"
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/x.h5"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  # Against the committed expected RGB (Pillow's, tests/helpers/cmyk_expected.py) always, and
  # against Pillow itself where it is installed.
  "$PYTHON" - "$TMP/x.h5" "$fx" <<'PY'
import sys, h5py, numpy as np
f, fx = h5py.File(sys.argv[1], "r"), sys.argv[2]
got = {"cmyk-adobe": f["train/images"][0], "ycck-adobe": f["train/images"][1], "cmyk-plain": f["test/images"][0]}
for name, chw in got.items():
    want = np.frombuffer(open(f"{fx}/{name}.rgb", "rb").read(), np.uint8).reshape(16, 24, 3).transpose(2, 0, 1)
    assert chw.shape == (3, 16, 24), chw.shape
    assert np.abs(chw.astype(int) - want).max() <= 1, (name, np.abs(chw.astype(int) - want).max())
try:
    from PIL import Image
except ImportError:
    sys.exit(0)
for name in ("cmyk-adobe", "ycck-adobe"):  # Pillow reads every CMYK JPEG as Adobe's
    pil = np.asarray(Image.open(f"{fx}/{name}.jpg").convert("RGB")).transpose(2, 0, 1)
    assert np.abs(got[name].astype(int) - pil).max() <= 1, name
PY
  # A 2-component JPEG (libjpeg decodes it; no colour model): unsupported, also under --skip-bad.
  "$PYTHON" - "$TMP/f/train/ink/two.jpg" <<'PY'
import struct, sys
seg = lambda m, d: bytes([0xFF, m]) + struct.pack(">H", len(d) + 2) + d
dqt = seg(0xDB, b"\0" + bytes([1] * 64))
sof = seg(0xC0, struct.pack(">BHHB", 8, 8, 8, 2) + b"\1\x11\0" + b"\2\x11\0")
dht = seg(0xC4, b"\x00" + bytes([1] + [0] * 15) + b"\0" + b"\x10" + bytes([1] + [0] * 15) + b"\0")
sos = seg(0xDA, b"\2" + b"\1\0" + b"\2\0" + b"\0\x3f\0")
open(sys.argv[1], "wb").write(b"\xFF\xD8" + dqt + sof + dht + sos + b"\0\0" + b"\xFF\xD9")
PY
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/y.h5"
  assert_error 1 "two.jpg: unsupported JPEG colour model \(2 components"
  assert_no_output "$TMP/y.h5"
  run "$BIN/cifar-convert" --input "$TMP/f" --skip-bad -o "$TMP/y.h5"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" == *"skipped (unsupported, not damaged): "*"two.jpg: unsupported JPEG"* ]] || { echo "$output"; false; }
  [[ "$output" != *"corrupt"* ]]
}
