#!/usr/bin/env bats
# cifar-convert: round trips, limits, archive input, and bad inputs (issue 2).

load helpers

setup_file() {
  cifar_fixture >/dev/null
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/convert.XXXXXX")"
  SRC="$(cifar_fixture)"
}

teardown() {
  chmod -R u+w "$TMP" 2>/dev/null || true
  rm -rf "$TMP"
}

# A copy of the fixture folder (symlinks) in which tests damage one batch.
damaged_copy() {
  mkdir -p "$TMP/bad"
  for f in "$SRC"/*.bin; do ln -s "$f" "$TMP/bad/$(basename "$f")"; done
  echo "$TMP/bad"
}

@test "round trip is pixel-exact, with labels and provenance attributes" {
  run "$BIN/cifar-convert" --input "$SRC" -o "$TMP/c.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"train":50000'* ]]
  "$PYTHON" - "$TMP/c.h5" "$REPO_ROOT/tests/helpers" <<'PY'
import json, sys
import h5py, numpy as np
sys.path.insert(0, sys.argv[2])
from gen_cifar import expected_images, expected_labels
f = h5py.File(sys.argv[1], "r")
assert f["train/images"].shape == (50000, 3, 32, 32) and f["train/images"].dtype == np.uint8
assert f["test/images"].shape == (10000, 3, 32, 32)
for b in range(1, 6):
    rows = slice((b - 1) * 10000, b * 10000)
    assert (f["train/images"][rows] == expected_images(b)).all(), b
    assert (f["train/labels"][rows] == expected_labels(b)).all(), b
assert (f["test/images"][:] == expected_images(6)).all()
assert (f["test/labels"][:] == expected_labels(6)).all()
assert f["train/images"].chunks[0] > 0 and f["train/images"].compression == "gzip"
a = f.attrs
assert a["format"] == "image-dataset" and a["format_version"] == 1
assert a["created_by"].startswith("cifar-convert ")
assert a["created_at"].endswith("Z")
inputs = json.loads(a["inputs"]); assert len(inputs) == 1 and len(inputs[0]["sha256"]) == 64
assert json.loads(a["params"])["train-limit"] == "all"  # what the default means, not a stand-in 0
assert list(a["class_names"]) == ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
PY
}

@test "tar.gz input gives the same images as the folder" {
  "$BIN/cifar-convert" -q --input "$SRC" --train-limit 12000 --test-limit 100 -o "$TMP/a.h5"
  "$BIN/cifar-convert" -q --input "$(cifar_fixture_tar)" --train-limit 12000 --test-limit 100 -o "$TMP/b.h5"
  "$PYTHON" - "$TMP/a.h5" "$TMP/b.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for k in ["train/images", "train/labels", "test/images", "test/labels"]:
    assert np.array_equal(a[k][:], b[k][:]), k
assert a["train/images"].shape[0] == 12000 and a["test/images"].shape[0] == 100
PY
}

@test "--train-limit and --test-limit keep the first records across batch boundaries" {
  "$BIN/cifar-convert" -q --input "$SRC" --train-limit 10005 --test-limit 7 -o "$TMP/c.h5"
  "$PYTHON" - "$TMP/c.h5" "$REPO_ROOT/tests/helpers" <<'PY'
import sys, h5py, numpy as np
sys.path.insert(0, sys.argv[2])
from gen_cifar import expected_images, expected_labels
f = h5py.File(sys.argv[1], "r")
assert f["train/labels"].shape == (10005,) and f["test/labels"].shape == (7,)
assert (f["train/images"][10000:] == expected_images(2, 5)).all()
assert (f["train/labels"][:10000] == expected_labels(1)).all()
assert (f["test/images"][:] == expected_images(6, 7)).all()
PY
}

@test "missing input: one line naming the path, exit 1, no output" {
  run "$BIN/cifar-convert" --input /nonexistent -o "$TMP/x.h5"
  assert_error 1 "/nonexistent: cannot open"
  assert_no_output "$TMP/x.h5"
}

@test "truncated batch is rejected with its size" {
  d=$(damaged_copy); rm "$d/data_batch_3.bin"
  head -c 30000000 "$SRC/data_batch_3.bin" > "$d/data_batch_3.bin"
  run "$BIN/cifar-convert" --input "$d" -o "$TMP/x.h5"
  assert_error 1 "data_batch_3.bin: is 30000000 bytes, expected 30730000"
  assert_no_output "$TMP/x.h5"
}

@test "a batch with extra bytes is rejected" {
  d=$(damaged_copy); rm "$d/test_batch.bin"
  { cat "$SRC/test_batch.bin"; printf 'xx'; } > "$d/test_batch.bin"
  run "$BIN/cifar-convert" --input "$d" -o "$TMP/x.h5"
  assert_error 1 "test_batch.bin: is 30730002 bytes"
  assert_no_output "$TMP/x.h5"
}

@test "label 10 is rejected with the record number" {
  d=$(damaged_copy); rm "$d/data_batch_2.bin"
  cp "$SRC/data_batch_2.bin" "$d/data_batch_2.bin"
  printf '\x0a' | dd of="$d/data_batch_2.bin" bs=1 seek=$((3073 * 42)) conv=notrunc status=none
  run "$BIN/cifar-convert" --input "$d" -o "$TMP/x.h5"
  assert_error 1 "data_batch_2.bin: record 42 has label 10, expected 0..9"
  assert_no_output "$TMP/x.h5"
}

@test "an empty batch file is rejected" {
  d=$(damaged_copy); rm "$d/data_batch_1.bin"; : > "$d/data_batch_1.bin"
  run "$BIN/cifar-convert" --input "$d" -o "$TMP/x.h5"
  assert_error 1 "data_batch_1.bin: is 0 bytes"
  assert_no_output "$TMP/x.h5"
}

@test "a folder without the test batch is rejected" {
  d=$(damaged_copy); rm "$d/test_batch.bin"
  run "$BIN/cifar-convert" --input "$d" -o "$TMP/x.h5"
  assert_error 1 "missing test_batch.bin"
  assert_no_output "$TMP/x.h5"
}

@test "an empty folder is rejected" {
  mkdir "$TMP/empty"
  run "$BIN/cifar-convert" --input "$TMP/empty" -o "$TMP/x.h5"
  assert_error 1 "empty: missing data_batch_1.bin"
}

@test "an unwritable output folder fails before any work" {
  mkdir "$TMP/ro"; chmod 555 "$TMP/ro"; chmod 755 "$TMP"
  if [ "$(id -u)" -eq 0 ]; then
    run setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/cifar-convert" --input "$SRC" -o "$TMP/ro/x.h5"
  else
    run "$BIN/cifar-convert" --input "$SRC" -o "$TMP/ro/x.h5"
  fi
  assert_error 1 "ro/x.h5: output folder .* is not writable"
  assert_no_output "$TMP/ro/x.h5"
}

@test "an output folder that does not exist is named" {
  run "$BIN/cifar-convert" --input "$SRC" -o "$TMP/nope/x.h5"
  assert_error 1 "output folder .*/nope does not exist"
}

@test "an output path that is a folder is rejected" {
  mkdir "$TMP/out.h5"
  run "$BIN/cifar-convert" --input "$SRC" -o "$TMP/out.h5"
  assert_error 1 "out.h5: is a folder"
  [ -d "$TMP/out.h5" ] && [ -z "$(ls -A "$TMP/out.h5")" ]
}

@test "a corrupted gzip archive is rejected" {
  tgz="$(cifar_fixture_tar)"
  head -c $(( $(stat -c %s "$tgz") / 2 )) "$tgz" > "$TMP/cut.tar.gz"
  run "$BIN/cifar-convert" --input "$TMP/cut.tar.gz" -o "$TMP/x.h5"
  assert_error 1 "cut.tar.gz: .*(corrupted|truncated)"
  assert_no_output "$TMP/x.h5"
  head -c 1000 /dev/urandom > "$TMP/noise.tar.gz"
  run "$BIN/cifar-convert" --input "$TMP/noise.tar.gz" -o "$TMP/x.h5"
  [ "$status" -eq 1 ] && [[ "$output" == *noise.tar.gz* ]]
  assert_no_output "$TMP/x.h5"
}

@test "SIGTERM while writing leaves neither the output nor a temporary file" {
  "$BIN/cifar-convert" -q --input "$SRC" -o "$TMP/x.h5" &
  pid=$!
  for _ in $(seq 1 500); do
    ls -a "$TMP" | grep -q '\.x\.h5\.tmp' && break
    sleep 0.01
  done
  kill -TERM "$pid"
  code=0
  wait "$pid" || code=$?
  [ "$code" -eq 143 ]
  assert_no_output "$TMP/x.h5"
}

@test "usage errors exit 2: missing --input, unknown option, negative limit" {
  run "$BIN/cifar-convert" -o "$TMP/x.h5"
  assert_error 2 "--input is required"
  run "$BIN/cifar-convert" --input "$SRC" -o "$TMP/x.h5" --bogus
  [ "$status" -eq 2 ]
  run "$BIN/cifar-convert" --input "$SRC" -o "$TMP/x.h5" --train-limit -5
  [ "$status" -eq 2 ]
  assert_no_output "$TMP/x.h5"
}

@test "real CIFAR-10 (when ../shared has it): 50,000/10,000 records, 5,000/1,000 per class" {
  src=$(real_cifar)
  [ -n "$src" ] || skip "../shared/cifar-10-batches-bin not present"
  "$BIN/cifar-convert" -q --input "$src" -o "$TMP/real.h5"
  "$PYTHON" - "$TMP/real.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f["train/images"].shape == (50000, 3, 32, 32) and f["test/images"].shape == (10000, 3, 32, 32)
assert (np.bincount(f["train/labels"][:], minlength=10) == 5000).all()
assert (np.bincount(f["test/labels"][:], minlength=10) == 1000).all()
assert int(f["train/labels"][:].astype(int).sum()) == 225000
PY
}
