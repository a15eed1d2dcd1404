#!/usr/bin/env bats
# Reliability (issue 8): bad inputs across every tool, beyond the cases of the earlier
# issues' suites. Each case asserts exit 1 or 2, one message line naming the file and the
# problem, no partial output (assert_no_output) and — under `make test-asan` — that no
# sanitizer report appeared (teardown). Bad files come from tests/helpers/badh5.py (h5py);
# random offsets and flipped bytes use fixed seeds, so a failure can be replayed.
# Cases whose tool is not built yet are skipped. docs/RELIABILITY.md lists every case.

load helpers

BADH5="$REPO_ROOT/tests/helpers/badh5.py"

setup_file() {
  export REL_DIR="$BATS_FILE_TMPDIR/rel"
  mkdir -p "$REL_DIR"
  chmod 755 "$BATS_FILE_TMPDIR" "$REL_DIR"
  # A small dataset (40 train / 20 test, seeded random pixels, every class present).
  "$PYTHON" "$BADH5" dataset "$REL_DIR/data.h5" --train 40 --test 20
  # Features (64-d, 60/30 rows, class-dependent means) and an SVM fitted on them.
  "$PYTHON" "$BADH5" features "$REL_DIR/features.h5"
  if [ -x "$BIN/svm-fit" ]; then "$BIN/svm-fit" -q --features "$REL_DIR/features.h5" -o "$REL_DIR/svm.h5"; fi
  # A one-epoch model on 16 images (a few seconds).
  if [ -x "$BIN/ae-train" ]; then
    "$BIN/ae-train" -q --data "$REL_DIR/data.h5" --train-limit 16 --epochs 1 --batch-size 8 --threads 2 \
      -o "$REL_DIR/model.h5"
  fi
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/rel.XXXXXX")"
  chmod 755 "$TMP"
  SAN_BEFORE=$(sanitizer_reports | wc -l)
}

teardown() {
  if mountpoint -q "$TMP/small" 2>/dev/null; then umount "$TMP/small"; fi
  chmod -R u+w "$TMP" 2>/dev/null || true
  rm -rf "$TMP"
  # Under `make test-asan` every sanitizer report lands in $SANITIZER_LOG_DIR (log_path):
  # a report during this test fails it, whatever the exit codes were.
  local now
  now=$(sanitizer_reports | wc -l)
  if [ "$now" -ne "$SAN_BEFORE" ]; then
    echo "sanitizer report(s) written during this test:" >&2
    sanitizer_reports | tail -n $((now - SAN_BEFORE)) | while read -r f; do head -30 "$f" >&2; done
    return 1
  fi
}

sanitizer_reports() {
  [ -n "${SANITIZER_LOG_DIR:-}" ] && [ -d "$SANITIZER_LOG_DIR" ] && ls -1tr "$SANITIZER_LOG_DIR"/* 2>/dev/null
  return 0
}

# Known gaps in other stages' tools, reported to the lead: the case detects exactly the
# known wrong behaviour and skips with "GAP: ..." so the suite stays green until the tool is
# fixed; any other failure still fails. RELIABILITY_STRICT=1 turns the gaps into failures.
gap() {
  if [ "${RELIABILITY_STRICT:-0}" = 1 ]; then
    echo "GAP: $*" >&2
    return 1
  fi
  skip "GAP (reported): $*"
}

need() {
  for t in "$@"; do [ -x "$BIN/$t" ] || skip "$t is not built yet"; done
}

bad() { "$PYTHON" "$BADH5" "$@"; }

# refused CODE REGEX OUTPUT...: the last `run` failed with CODE and one line matching REGEX,
# and none of the outputs (nor a temporary file of one) exists.
refused() {
  local code="$1" pattern="$2"
  shift 2
  assert_error "$code" "$pattern"
  for f in "$@"; do assert_no_output "$f"; done
}

# Runs a command as an unprivileged user (root ignores permission bits).
as_user() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
  else
    "$@"
  fi
}

# A small filesystem at $TMP/small: a tmpfs of SIZE when this user may mount one, else
# nothing (the caller falls back to `ulimit -f`). Prints "tmpfs" or "ulimit".
small_disk() {
  mkdir -p "$TMP/small"
  if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o "size=$1" tmpfs "$TMP/small" 2>/dev/null; then
    echo tmpfs
  else
    echo ulimit
  fi
}

# ---- the dataset file (read by ae-train and ae-encode) ------------------------------------

@test "dataset cut at 6 random offsets: one line naming the file, no model" {
  need ae-train
  size=$(stat -c %s "$REL_DIR/data.h5")
  RANDOM=8
  for _ in 1 2 3 4 5 6; do
    off=$(( (RANDOM * 32768 + RANDOM) % size ))
    bad cut "$REL_DIR/data.h5" "$TMP/cut.h5" "$off"
    run "$BIN/ae-train" --data "$TMP/cut.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
    echo "cut at $off of $size"
    refused 1 "cut.h5: (not an HDF5 file|cannot open as HDF5|corrupted)" "$TMP/m.h5"
  done
}

@test "dataset with flipped bytes in its metadata: refused with one line or unaffected, never a crash" {
  need ae-encode
  meta_end=$(bad meta-end "$REL_DIR/data.h5")
  refused_count=0
  for seed in $(seq 1 12); do
    where=$(bad flip "$REL_DIR/data.h5" "$TMP/flip.h5" "$seed" 3 0 "$meta_end")
    run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$TMP/flip.h5" --split test -o "$TMP/f.h5"
    echo "seed $seed flipped $where: exit $status: $output"
    [ "$status" -eq 0 ] || [ "$status" -eq 1 ]
    if [ "$status" -eq 1 ]; then
      refused 1 "flip.h5: " "$TMP/f.h5"
      refused_count=$((refused_count + 1))
    else
      rm -f "$TMP/f.h5"
    fi
  done
  # Most 3-byte flips in metadata are caught (unused padding bytes are harmless).
  [ "$refused_count" -ge 6 ]
}

@test "dataset with flipped bytes in its compressed images: the damaged chunk is named" {
  need ae-train
  meta_end=$(bad meta-end "$REL_DIR/data.h5")
  # Deflate streams carry an Adler-32 checksum: damage inside a chunk cannot go unnoticed.
  bad flip "$REL_DIR/data.h5" "$TMP/flip.h5" 5 4 "$((meta_end + 100))" "$((meta_end + 2000))" >/dev/null
  run "$BIN/ae-train" --data "$TMP/flip.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "flip.h5: (cannot read /train/images(: its compressed chunk at row [0-9]+ is damaged)? \(truncated or corrupted file\?\)|corrupted)" "$TMP/m.h5"
}

@test "dataset images stored as float32: wrong dtype named" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad float32-images
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: /train/images has dtype float32, expected uint8" "$TMP/m.h5"
}

@test "dataset images of 28x28: wrong shape named" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad images-28
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: /train/images has shape \[40,3,28,28\], expected \[N,3,32,32\]" "$TMP/m.h5"
}

@test "dataset images in HWC order (N,32,32,3): wrong shape named" {
  need ae-encode
  bad dataset "$TMP/d.h5" --bad images-hwc
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$TMP/d.h5" -o "$TMP/f.h5"
  refused 1 "d.h5: /train/images has shape \[40,32,32,3\], expected \[N,3,32,32\]" "$TMP/f.h5"
}

@test "dataset without its test group: the missing dataset is named" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad no-test
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: /test/images is missing" "$TMP/m.h5"
}

@test "dataset with a training label of 10: the record is named" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad label-10
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: /train/labels\[20\] = 10 is not a class 0..9" "$TMP/m.h5"
}

@test "dataset with a test label of 255: ae-encode names the record" {
  need ae-encode
  bad dataset "$TMP/d.h5" --bad label-255
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$TMP/d.h5" -o "$TMP/f.h5"
  refused 1 "d.h5: /test/labels\[19\] = 255 is not a class 0..9" "$TMP/f.h5"
}

@test "dataset whose images and labels differ in length" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad rows-mismatch
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: /train/images has 40 rows but /train/labels has 39" "$TMP/m.h5"
}

@test "dataset with an empty training split" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad empty-train
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: has no training images" "$TMP/m.h5"
}

@test "dataset with an empty test split: ae-encode --split test writes no rows, svm-eval refuses them" {
  need ae-encode svm-eval
  bad dataset "$TMP/d.h5" --bad empty-test
  run "$BIN/ae-encode" -q --model "$REL_DIR/model.h5" --data "$TMP/d.h5" --split train,test -o "$TMP/f.h5"
  [ "$status" -eq 0 ]
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert f['test/features'].shape == (0, 8192), f['test/features'].shape" "$TMP/f.h5"
  "$PYTHON" "$BADH5" features "$TMP/f0.h5" --test 0
  run "$BIN/svm-eval" --model "$REL_DIR/svm.h5" --features "$TMP/f0.h5" -o "$TMP/e.h5"
  refused 1 "f0.h5: .*(no rows|empty|0 rows)" "$TMP/e.h5"
}

@test "a features file given as --data: the format is named" {
  need ae-train
  run "$BIN/ae-train" --data "$REL_DIR/features.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "features.h5: is an ae-features file, expected image-dataset" "$TMP/m.h5"
}

@test "dataset of format_version 2: refused as too new" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad format-version-2
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: format_version 2 is not supported" "$TMP/m.h5"
}

@test "an HDF5 file without a format attribute (not written by this toolkit)" {
  need ae-encode
  bad dataset "$TMP/d.h5" --bad no-format
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$TMP/d.h5" -o "$TMP/f.h5"
  refused 1 "d.h5: not an image-dataset file \(no 'format' attribute\)" "$TMP/f.h5"
}

@test "dataset with 9 class names" {
  need ae-encode
  bad dataset "$TMP/d.h5" --bad class-names-9
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$TMP/d.h5" -o "$TMP/f.h5"
  refused 1 "d.h5: class_names has 9 entries, expected 10" "$TMP/f.h5"
}

@test "dataset whose /train/images is a group, not a dataset" {
  need ae-train
  bad dataset "$TMP/d.h5" --bad group-not-dataset
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "d.h5: /train/images is not a dataset" "$TMP/m.h5"
}

@test "--data is a folder, an empty file, or a text file" {
  need ae-train
  mkdir "$TMP/dir.h5"
  run "$BIN/ae-train" --data "$TMP/dir.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "dir.h5: " "$TMP/m.h5"
  : >"$TMP/empty.h5"
  run "$BIN/ae-train" --data "$TMP/empty.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "empty.h5: not an HDF5 file" "$TMP/m.h5"
  echo "label,pixels" >"$TMP/text.h5"
  run "$BIN/ae-train" --data "$TMP/text.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "text.h5: not an HDF5 file" "$TMP/m.h5"
}

@test "an unreadable input (mode 000) is named with the reason" {
  need ae-train
  cp "$REL_DIR/data.h5" "$TMP/locked.h5"
  chmod 000 "$TMP/locked.h5"
  chmod 777 "$TMP"
  run as_user "$BIN/ae-train" --data "$TMP/locked.h5" --epochs 1 --batch-size 8 -o "$TMP/m.h5"
  refused 1 "locked.h5: cannot open: Permission denied" "$TMP/m.h5"
}

@test "read-only inputs in a read-only folder are fine: every stage reads without writing" {
  need ae-train ae-encode svm-fit svm-eval
  mkdir "$TMP/in" "$TMP/out"
  cp "$REL_DIR/data.h5" "$REL_DIR/model.h5" "$TMP/in/"
  chmod 444 "$TMP/in"/*.h5
  chmod 555 "$TMP/in"
  chmod 777 "$TMP/out"
  sum_before=$(sha256sum "$TMP/in"/*.h5)
  as_user "$BIN/ae-encode" -q --model "$TMP/in/model.h5" --data "$TMP/in/data.h5" -o "$TMP/out/f.h5"
  as_user "$BIN/svm-fit" -q --features "$TMP/out/f.h5" -o "$TMP/out/s.h5"
  as_user "$BIN/svm-eval" -q --model "$TMP/out/s.h5" --features "$TMP/out/f.h5" -o "$TMP/out/e.h5"
  [ "$(sha256sum "$TMP/in"/*.h5)" = "$sum_before" ]
  [ -f "$TMP/out/e.h5" ]
}

# ---- ae-train options ------------------------------------------------------------------------

@test "ae-train: --batch-size larger than the training images is refused or clamped with a warning" {
  need ae-train
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --train-limit 16 --epochs 1 --batch-size 64 --threads 2 -o "$TMP/m.h5"
  if [ "$status" -eq 0 ]; then
    # Accepted: then it must say so, not silently train one short batch per epoch.
    [[ "$output" == *"--batch-size 64"*"16"* ]] || gap "ae-train trains silently with --batch-size 64 on 16 images"
  else
    refused 2 "--batch-size 64 .*16 training images" "$TMP/m.h5"
  fi
}

@test "ae-train: --epochs 0 writes the untrained model (documented), --epochs -1 is a usage error" {
  need ae-train
  run "$BIN/ae-train" -q --data "$REL_DIR/data.h5" --train-limit 8 --epochs 0 --batch-size 8 --threads 2 -o "$TMP/m.h5"
  [ "$status" -eq 0 ]
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert f.attrs['epochs_done'] == 0 and f['history/train_loss'].shape == (0,)" "$TMP/m.h5"
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --epochs -1 -o "$TMP/m2.h5"
  refused 2 "--epochs" "$TMP/m2.h5"
}

@test "ae-train: a negative, zero, infinite or NaN learning rate is a usage error" {
  need ae-train
  for lr in -0.001 0 inf nan; do
    run "$BIN/ae-train" --data "$REL_DIR/data.h5" --train-limit 8 --batch-size 8 --epochs 1 --lr "$lr" -o "$TMP/m.h5"
    echo "--lr $lr: $output"
    if [ "$lr" = nan ] && [ "$status" -eq 0 ]; then gap "ae-train accepts --lr nan and writes a model with NaN test loss"; fi
    refused 2 "--lr" "$TMP/m.h5"
  done
}

@test "ae-train: --batch-size 0, --threads -1, --momentum 2 are usage errors" {
  need ae-train
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --batch-size 0 -o "$TMP/m.h5"
  refused 2 "--batch-size" "$TMP/m.h5"
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --threads -1 -o "$TMP/m.h5"
  refused 2 "--threads" "$TMP/m.h5"
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --optimizer sgd --momentum 2 -o "$TMP/m.h5"
  refused 2 "--momentum" "$TMP/m.h5"
}

@test "ae-train: an unwritable output folder fails before any training" {
  need ae-train
  mkdir "$TMP/ro"
  chmod 555 "$TMP/ro"
  cp "$REL_DIR/data.h5" "$TMP/data.h5"
  chmod 644 "$TMP/data.h5"
  start=$(date +%s)
  run as_user "$BIN/ae-train" --data "$TMP/data.h5" --epochs 50 --batch-size 8 -o "$TMP/ro/m.h5"
  # Not --quiet: the refusal being the only line shows that nothing (reading, training) came
  # before it; the time bound is generous for a loaded machine.
  refused 1 "ro/m.h5: output folder .* is not writable" "$TMP/ro/m.h5"
  [ $(( $(date +%s) - start )) -lt 30 ]
}

@test "ae-train: a diverging run (sgd, lr 0.01, momentum 0.9) stops in epoch 2 and keeps epoch 1" {
  need ae-train
  run "$BIN/ae-train" -q --data "$REL_DIR/data.h5" --train-limit 16 --epochs 4 --batch-size 4 --threads 2 \
    --optimizer sgd --lr 0.01 --momentum 0.9 -o "$TMP/m.h5"
  assert_error 1 "training diverged in epoch 2 \(the (train |test )?loss became (NaN|Inf)\); .*m.h5 keeps epoch 1"
  "$PYTHON" - "$TMP/m.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f.attrs["epochs_done"] == 1
for g in ("encoder/conv1", "encoder/conv2", "decoder/conv1", "decoder/conv2", "decoder/conv3"):
    assert np.isfinite(f[g + "/weight"][...]).all() and np.isfinite(f[g + "/bias"][...]).all(), g
PY
  ls -A "$TMP" | grep -q '\.m\.h5\.tmp' && { echo "temporary file left"; return 1; }
  return 0
}

@test "ae-train: an epoch whose test loss is NaN is not kept as the last good checkpoint" {
  need ae-train
  # sgd lr 0.005 momentum 0.95 on these 16 images: epoch 2's train loss is still finite
  # (~1e42) but its test loss is NaN; epoch 3 diverges outright.
  run "$BIN/ae-train" -q --data "$REL_DIR/data.h5" --train-limit 16 --epochs 4 --batch-size 4 --threads 2 \
    --optimizer sgd --lr 0.005 --momentum 0.95 -o "$TMP/m.h5"
  [ "$status" -eq 1 ]
  [[ "$output" == *"diverged"* ]]
  if [ -f "$TMP/m.h5" ]; then
    nonfinite=$("$PYTHON" -c "import h5py,sys,numpy as np; f=h5py.File(sys.argv[1]); print(int(not np.isfinite(f['history/test_loss'][...]).all()))" "$TMP/m.h5")
    [ "$nonfinite" = 0 ] || gap "ae-train keeps an epoch whose test loss is NaN as the last good checkpoint"
  fi
}

# ---- models (ae-encode, ae-train --resume) ----------------------------------------------------

@test "a model of another architecture (64-channel latent): ae-encode names the layer" {
  need ae-encode
  bad mutate "$REL_DIR/model.h5" "$TMP/arch.h5" arch-latent-64
  run "$BIN/ae-encode" --model "$TMP/arch.h5" --data "$REL_DIR/data.h5" -o "$TMP/f.h5"
  refused 1 "arch.h5: /encoder/conv2/weight has shape \[64,256,3,3\], expected \[128,256,3,3\]" "$TMP/f.h5"
}

@test "a model of another architecture (128 first-layer filters): --resume refuses it and keeps it" {
  need ae-train
  bad mutate "$REL_DIR/model.h5" "$TMP/m.h5" arch-conv1-128
  sum=$(sha256sum <"$TMP/m.h5")
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --train-limit 16 --epochs 2 --batch-size 8 --threads 2 --resume -o "$TMP/m.h5"
  assert_error 1 "m.h5: /encoder/conv1/weight has shape \[128,3,3,3\], expected \[256,3,3,3\]"
  [ "$(sha256sum <"$TMP/m.h5")" = "$sum" ]
}

@test "a model without its decoder" {
  need ae-encode
  bad mutate "$REL_DIR/model.h5" "$TMP/nodec.h5" no-decoder
  run "$BIN/ae-encode" --model "$TMP/nodec.h5" --data "$REL_DIR/data.h5" -o "$TMP/f.h5"
  refused 1 "nodec.h5: /decoder/conv1/(weight|bias) is missing" "$TMP/f.h5"
}

@test "a model with float64 weights" {
  need ae-encode
  bad mutate "$REL_DIR/model.h5" "$TMP/f64.h5" float64-weights
  run "$BIN/ae-encode" --model "$TMP/f64.h5" --data "$REL_DIR/data.h5" -o "$TMP/f.h5"
  refused 1 "f64.h5: /encoder/conv1/weight has dtype float64, expected float32" "$TMP/f.h5"
}

@test "a model with an infinite bias" {
  need ae-encode
  bad mutate "$REL_DIR/model.h5" "$TMP/inf.h5" inf-bias
  run "$BIN/ae-encode" --model "$TMP/inf.h5" --data "$REL_DIR/data.h5" -o "$TMP/f.h5"
  refused 1 "inf.h5: weights contain NaN or Inf" "$TMP/f.h5"
}

@test "a model cut at 4 random offsets" {
  need ae-encode
  size=$(stat -c %s "$REL_DIR/model.h5")
  RANDOM=3
  for _ in 1 2 3 4; do
    off=$(( (RANDOM * 32768 + RANDOM) % size ))
    bad cut "$REL_DIR/model.h5" "$TMP/cut.h5" "$off"
    run "$BIN/ae-encode" --model "$TMP/cut.h5" --data "$REL_DIR/data.h5" -o "$TMP/f.h5"
    echo "cut at $off of $size"
    refused 1 "cut.h5: (not an HDF5 file|cannot open as HDF5|corrupted)" "$TMP/f.h5"
  done
}

@test "ae-encode: --split other, --split train,train and --batch-size 0 are usage errors" {
  need ae-encode
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$REL_DIR/data.h5" --split valid -o "$TMP/f.h5"
  refused 2 "--split: 'valid' is not train or test" "$TMP/f.h5"
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$REL_DIR/data.h5" --split train,train -o "$TMP/f.h5"
  refused 2 "--split: 'train' given twice" "$TMP/f.h5"
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$REL_DIR/data.h5" --batch-size 0 -o "$TMP/f.h5"
  refused 2 "--batch-size" "$TMP/f.h5"
}

# ---- features and SVM models (svm-fit, svm-eval) ----------------------------------------------

@test "features cut at 6 random offsets" {
  need svm-fit
  size=$(stat -c %s "$REL_DIR/features.h5")
  RANDOM=5
  for _ in 1 2 3 4 5 6; do
    off=$(( (RANDOM * 32768 + RANDOM) % size ))
    bad cut "$REL_DIR/features.h5" "$TMP/cut.h5" "$off"
    run "$BIN/svm-fit" --features "$TMP/cut.h5" -o "$TMP/s.h5"
    echo "cut at $off of $size"
    refused 1 "cut.h5: (not an HDF5 file|cannot open as HDF5|corrupted)" "$TMP/s.h5"
  done
}

@test "features whose global heap is damaged (used to crash HDF5): one line, for svm-fit and svm-eval" {
  need svm-fit svm-eval
  for f in "$REPO_ROOT"/tests/fuzz/regressions/features-*.h5; do
    cp "$f" "$TMP/heap.h5"
    run "$BIN/svm-fit" --features "$TMP/heap.h5" -o "$TMP/s.h5"
    echo "$(basename "$f"): $output"
    refused 1 "heap.h5: corrupted HDF5" "$TMP/s.h5"
    run "$BIN/svm-eval" --model "$REL_DIR/svm.h5" --features "$TMP/heap.h5" -o "$TMP/e.h5"
    refused 1 "heap.h5: corrupted HDF5" "$TMP/e.h5"
  done
}

@test "features with 3 flipped metadata bytes, 25 seeds: never a crash" {
  need svm-fit
  meta_end=$(bad meta-end "$REL_DIR/features.h5")
  refused_count=0
  for seed in $(seq 101 125); do
    bad flip "$REL_DIR/features.h5" "$TMP/flip.h5" "$seed" 3 0 "$meta_end" >/dev/null
    run "$BIN/svm-fit" -q --features "$TMP/flip.h5" -o "$TMP/s.h5"
    echo "seed $seed: exit $status: $output"
    [ "$status" -eq 0 ] || [ "$status" -eq 1 ]
    if [ "$status" -eq 1 ]; then
      refused 1 "flip.h5: " "$TMP/s.h5"
      refused_count=$((refused_count + 1))
    fi
    rm -f "$TMP/s.h5"
  done
  [ "$refused_count" -ge 10 ]
}

@test "features stored as float64 and labels as int64 (the plain format's types): the same model as float32 and uint8" {
  need svm-fit
  bad features "$TMP/ok.h5"
  bad features "$TMP/f64.h5" --bad float64-features
  bad features "$TMP/i64.h5" --bad int64-labels
  for f in ok f64 i64; do "$BIN/svm-fit" -q --features "$TMP/$f.h5" -o "$TMP/s-$f.h5"; done
  "$PYTHON" - "$TMP/s-ok.h5" "$TMP/s-f64.h5" "$TMP/s-i64.h5" <<'PY'
import sys, h5py, numpy as np
files = [h5py.File(p, "r") for p in sys.argv[1:]]
names = []
files[0].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and not n.startswith("provenance") else None)
assert any(n.startswith("svm/") for n in names), names
for f in files[1:]:
    for n in names:
        assert np.array_equal(files[0][n][()], f[n][()]), (f.filename, n)
PY
}

@test "features flattened to one dimension" {
  need svm-fit
  bad features "$TMP/x.h5" --bad features-1d
  run "$BIN/svm-fit" --features "$TMP/x.h5" -o "$TMP/s.h5"
  refused 1 "x.h5: /train/features has shape \[3840\], expected \[N,N\]" "$TMP/s.h5"
}

@test "feature labels out of range (10 with 10 classes)" {
  need svm-fit
  bad features "$TMP/x.h5" --bad label-10
  run "$BIN/svm-fit" --features "$TMP/x.h5" -o "$TMP/s.h5"
  refused 1 "x.h5: /train/labels\[30\] = 10 is not a class 0..9" "$TMP/s.h5"
}

@test "feature labels shorter than the features" {
  need svm-fit
  bad features "$TMP/x.h5" --bad rows-mismatch
  run "$BIN/svm-fit" --features "$TMP/x.h5" -o "$TMP/s.h5"
  refused 1 "x.h5: /train/labels has shape \[59\], expected \[60\]" "$TMP/s.h5"
}

@test "features with an empty training split" {
  need svm-fit
  bad features "$TMP/x.h5" --bad empty-train
  run "$BIN/svm-fit" --features "$TMP/x.h5" -o "$TMP/s.h5"
  refused 1 "x.h5: the 0 training rows" "$TMP/s.h5"
}

@test "a dataset file given as --features, and features of format_version 2" {
  need svm-fit
  run "$BIN/svm-fit" --features "$REL_DIR/data.h5" -o "$TMP/s.h5"
  refused 1 "data.h5: is a cifar10-dataset file, expected ae-features" "$TMP/s.h5"
  bad features "$TMP/x.h5" --bad format-version-2
  run "$BIN/svm-fit" --features "$TMP/x.h5" -o "$TMP/s.h5"
  refused 1 "x.h5: format_version 2 is not supported" "$TMP/s.h5"
}

@test "svm-fit: --tol 0, --cache-mb 0, --C nan or inf are usage errors" {
  need svm-fit
  run "$BIN/svm-fit" --features "$REL_DIR/features.h5" --tol 0 -o "$TMP/s.h5"
  refused 2 "--tol must be > 0" "$TMP/s.h5"
  run "$BIN/svm-fit" --features "$REL_DIR/features.h5" --cache-mb 0 -o "$TMP/s.h5"
  refused 2 "--cache-mb" "$TMP/s.h5"
  for c in nan inf; do
    run "$BIN/svm-fit" --features "$REL_DIR/features.h5" --C "$c" -o "$TMP/s.h5"
    echo "--C $c: $output"
    if [ "$c" = inf ] && [ "$status" -eq 0 ]; then gap "svm-fit accepts --C inf"; fi
    refused 2 "--C" "$TMP/s.h5"
  done
}

@test "svm-fit: an unwritable folder for --export-libsvm fails before the fit" {
  need svm-fit
  mkdir "$TMP/ro"
  chmod 555 "$TMP/ro"
  chmod 777 "$TMP"
  run as_user "$BIN/svm-fit" --features "$REL_DIR/features.h5" -o "$TMP/s.h5" --export-libsvm "$TMP/ro/m.libsvm"
  refused 1 "ro/m.libsvm: output folder .* is not writable" "$TMP/s.h5" "$TMP/ro/m.libsvm"
}

@test "svm model whose n_support does not add up to its support vectors" {
  need svm-eval
  bad mutate "$REL_DIR/svm.h5" "$TMP/m.h5" svm-nsupport-sum
  run "$BIN/svm-eval" --model "$TMP/m.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  refused 1 "m.h5: /svm/support_vectors has shape \[60,[0-9]+\], expected \[65,[0-9]+\]" "$TMP/e.h5"
}

@test "svm model with a feature mask shorter than its scaler" {
  need svm-eval
  bad mutate "$REL_DIR/svm.h5" "$TMP/m.h5" svm-mask-short
  run "$BIN/svm-eval" --model "$TMP/m.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  refused 1 "m.h5: .*feature_mask" "$TMP/e.h5"
}

@test "svm model with float64 support vectors" {
  need svm-eval
  bad mutate "$REL_DIR/svm.h5" "$TMP/m.h5" svm-sv-float64
  run "$BIN/svm-eval" --model "$TMP/m.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  refused 1 "m.h5: /svm/support_vectors has dtype float64, expected float32" "$TMP/e.h5"
}

@test "svm model without /svm/rho" {
  need svm-eval
  bad mutate "$REL_DIR/svm.h5" "$TMP/m.h5" svm-no-rho
  run "$BIN/svm-eval" --model "$TMP/m.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  refused 1 "m.h5: /svm/rho is missing" "$TMP/e.h5"
}

@test "svm model with a NaN dual coefficient" {
  need svm-eval
  bad mutate "$REL_DIR/svm.h5" "$TMP/m.h5" svm-nan-coef
  run "$BIN/svm-eval" --model "$TMP/m.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  refused 1 "m.h5: /svm/dual_coef holds NaN or Inf" "$TMP/e.h5"
}

@test "svm model with a zero scale" {
  need svm-eval
  bad mutate "$REL_DIR/svm.h5" "$TMP/m.h5" svm-scale-zero
  run "$BIN/svm-eval" --model "$TMP/m.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  refused 1 "m.h5: /scaler/scale holds a non-positive or non-finite value" "$TMP/e.h5"
}

@test "svm-eval: a split the features file does not have" {
  need svm-eval
  "$PYTHON" - "$REL_DIR/features.h5" "$TMP/trainonly.h5" <<'PY'
import sys, shutil, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "a") as f:
    del f["test"]
PY
  run "$BIN/svm-eval" --model "$REL_DIR/svm.h5" --features "$TMP/trainonly.h5" -o "$TMP/e.h5"
  refused 1 "trainonly.h5: /test/features is missing" "$TMP/e.h5"
}

@test "svm-eval: --device gpu without a GPU; --device auto falls back to the CPU" {
  need svm-eval
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then skip "a GPU is present"; fi
  run "$BIN/svm-eval" --device gpu --model "$REL_DIR/svm.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  refused 1 "--device gpu: (this build has no CUDA support|no CUDA GPU found)" "$TMP/e.h5"
  run "$BIN/svm-eval" -q --device auto --model "$REL_DIR/svm.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5"
  [ "$status" -eq 0 ] && [ -f "$TMP/e.h5" ]
}

# ---- full disk and file size limits -------------------------------------------------------------

@test "full disk while ae-encode writes features: one line, no partial output" {
  need ae-encode
  kind=$(small_disk 300k)
  if [ "$kind" = tmpfs ]; then
    run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$REL_DIR/data.h5" -o "$TMP/small/f.h5"
  else
    run bash -c 'ulimit -f 300; exec "$@"' _ "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$REL_DIR/data.h5" -o "$TMP/small/f.h5"
  fi
  echo "($kind)"
  refused 1 "small/f.h5: cannot write /train/features \(disk full or file size limit\?\)" "$TMP/small/f.h5"
}

@test "full disk while ae-train checkpoints: one line, no partial model" {
  need ae-train
  kind=$(small_disk 2m)
  if [ "$kind" = tmpfs ]; then
    run "$BIN/ae-train" --data "$REL_DIR/data.h5" --train-limit 8 --epochs 1 --batch-size 8 --threads 2 -o "$TMP/small/m.h5"
  else
    run bash -c 'ulimit -f 2000; exec "$@"' _ "$BIN/ae-train" --data "$REL_DIR/data.h5" --train-limit 8 --epochs 1 \
      --batch-size 8 --threads 2 -o "$TMP/small/m.h5"
  fi
  echo "($kind)"
  [ "$status" -eq 1 ]
  [[ "$(printf '%s\n' "$output" | grep -v '^ae-train: \(autoencoder\|epoch\)')" =~ small/m.h5:\ .*disk\ full ]]
  assert_no_output "$TMP/small/m.h5"
}

@test "ulimit -f: cifar-convert and svm-fit report the limit instead of dying by SIGXFSZ" {
  need cifar-convert svm-fit
  run bash -c 'ulimit -f 20; exec "$@"' _ "$BIN/cifar-convert" --input "$(cifar_fixture)" --train-limit 2000 \
    --test-limit 10 -o "$TMP/c.h5"
  refused 1 "c.h5: .*(disk full or file size limit)" "$TMP/c.h5"
  run bash -c 'ulimit -f 4; exec "$@"' _ "$BIN/svm-fit" -q --features "$REL_DIR/features.h5" -o "$TMP/s.h5"
  refused 1 "s.h5: .*(disk full or file size limit)" "$TMP/s.h5"
}

@test "a full disk keeps the previous output intact (svm-fit over an existing svm.h5)" {
  need svm-fit
  kind=$(small_disk 1m)
  [ "$kind" = tmpfs ] || skip "cannot mount a tmpfs here"
  cp "$REL_DIR/svm.h5" "$TMP/small/s.h5"
  sum=$(sha256sum <"$TMP/small/s.h5")
  head -c $((1024 * 1024)) /dev/zero >"$TMP/small/fill" 2>/dev/null || true
  run "$BIN/svm-fit" --features "$REL_DIR/features.h5" -o "$TMP/small/s.h5"
  [ "$status" -eq 1 ]
  [[ "$output" == *"small/s.h5: "* ]]
  [ "$(sha256sum <"$TMP/small/s.h5")" = "$sum" ]
  ! ls -A "$TMP/small" | grep -q '\.s\.h5\.tmp'
}

# ---- cifar-convert (beyond convert.bats) ----------------------------------------------------------

@test "cifar-convert: a label of 255 in the last record of the test batch" {
  need cifar-convert
  src=$(cifar_fixture)
  mkdir "$TMP/bad"
  for f in "$src"/*.bin; do ln -s "$f" "$TMP/bad/$(basename "$f")"; done
  rm "$TMP/bad/test_batch.bin"
  cp "$src/test_batch.bin" "$TMP/bad/test_batch.bin"
  printf '\xff' | dd of="$TMP/bad/test_batch.bin" bs=1 seek=$((3073 * 9999)) conv=notrunc status=none
  run "$BIN/cifar-convert" --input "$TMP/bad" --test-limit 10 -o "$TMP/c.h5"
  refused 1 "test_batch.bin: record 9999 has label 255, expected 0..9" "$TMP/c.h5"
}

@test "cifar-convert: an archive with flipped bytes in its compressed stream" {
  need cifar-convert
  tgz=$(cifar_fixture_tar)
  size=$(stat -c %s "$tgz")
  bad flip "$tgz" "$TMP/flip.tar.gz" 9 4 $((size / 3)) $((size / 2)) >/dev/null
  run "$BIN/cifar-convert" --input "$TMP/flip.tar.gz" -o "$TMP/c.h5"
  refused 1 "flip.tar.gz: .*(corrupt|truncated|damaged|error|CRC|bytes)" "$TMP/c.h5"
}

@test "cifar-convert: an archive without the test batch, and an HDF5 file given as the archive" {
  need cifar-convert
  src=$(cifar_fixture)
  tar -czf "$TMP/five.tar.gz" -C "$(dirname "$src")" \
    cifar-10-batches-bin/data_batch_1.bin cifar-10-batches-bin/data_batch_2.bin cifar-10-batches-bin/data_batch_3.bin \
    cifar-10-batches-bin/data_batch_4.bin cifar-10-batches-bin/data_batch_5.bin
  run "$BIN/cifar-convert" --input "$TMP/five.tar.gz" -o "$TMP/c.h5"
  refused 1 "five.tar.gz: archive has no test_batch.bin" "$TMP/c.h5"
  run "$BIN/cifar-convert" --input "$REL_DIR/data.h5" -o "$TMP/c.h5"
  refused 1 "data.h5: " "$TMP/c.h5"
}

# ---- report (Python, h5py on the same libhdf5) ------------------------------------------------------

@test "report: a model cut in half is named, and no report folder is left" {
  need report
  bad cut "$REL_DIR/model.h5" "$TMP/cut.h5" "$(( $(stat -c %s "$REL_DIR/model.h5") / 2 ))"
  run "$BIN/report" --model "$TMP/cut.h5" -o "$TMP/rep"
  refused 1 "cut.h5: " "$TMP/rep"
}

@test "report: a features file given as the model is named with both formats" {
  need report
  run "$BIN/report" --model "$REL_DIR/features.h5" -o "$TMP/rep"
  refused 1 "features.h5: format is 'ae-features', expected 'ae-model'" "$TMP/rep"
}

@test "report: a file whose global heap is damaged does not crash it" {
  need report
  cp "$REPO_ROOT/tests/fuzz/regressions/features-globalheap-segv.h5" "$TMP/heap.h5"
  run "$BIN/report" --features "$TMP/heap.h5" -o "$TMP/rep"
  if [ "$status" -ge 128 ]; then gap "report (h5py) dies by signal $((status - 128)) on a damaged global heap"; fi
  refused 1 "heap.h5: " "$TMP/rep"
}

# ---- issue 19: classes closed centrally (common/cli, atomic_output, hdf5_io, blas_runtime) --

# sha256 of a file, to prove an input was not touched.
digest() { sha256sum "$1" | cut -d' ' -f1; }

@test "class 1: -o naming an input by the same path, ./ spelling, symlink or hard link is refused, input intact" {
  need ae-train svm-fit ae-encode svm-eval
  cp "$REL_DIR/data.h5" "$TMP/d.h5"
  cp "$REL_DIR/features.h5" "$TMP/f.h5"
  ln -s d.h5 "$TMP/link.h5"
  ln "$TMP/f.h5" "$TMP/hard.h5"
  mkdir "$TMP/sub"
  before_d=$(digest "$TMP/d.h5") before_f=$(digest "$TMP/f.h5")
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 0 -o "$TMP/d.h5"
  assert_error 2 "usage error: -o .*d.h5 is the input file of --data"
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 0 -o "$TMP/sub/../././d.h5"
  assert_error 2 "is the input file of --data"
  run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 0 -o "$TMP/link.h5"
  assert_error 2 "is the input file of --data"
  run "$BIN/svm-fit" --features "$TMP/f.h5" -o "$TMP/hard.h5"
  assert_error 2 "is the input file of --features"
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$TMP/d.h5" -o "$TMP/./d.h5"
  assert_error 2 "is the input file of --data"
  run "$BIN/svm-eval" --model "$REL_DIR/svm.h5" --features "$TMP/f.h5" -o "$TMP/f.h5"
  assert_error 2 "is the input file of --features"
  [ "$(digest "$TMP/d.h5")" = "$before_d" ]
  [ "$(digest "$TMP/f.h5")" = "$before_f" ]
  [ -z "$(ls -a "$TMP" | grep -F '.tmp-' || true)" ]
}

@test "class 1: two outputs on one file (-o and --export-libsvm) are refused before the fit" {
  need svm-fit svm-eval
  run "$BIN/svm-fit" --features "$REL_DIR/features.h5" -o "$TMP/s.h5" --export-libsvm "$TMP/s.h5"
  refused 2 "s.h5" "$TMP/s.h5"
  run "$BIN/svm-eval" --model "$REL_DIR/svm.h5" --features "$REL_DIR/features.h5" -o "$TMP/e.h5" \
    --export-libsvm-data "$TMP/./e.h5"
  refused 2 "e.h5" "$TMP/e.h5"
  # Distinct names are fine, and an existing export from an earlier run is replaced.
  echo old > "$TMP/s.txt"
  "$BIN/svm-fit" -q --features "$REL_DIR/features.h5" -o "$TMP/s.h5" --export-libsvm "$TMP/s.txt"
  [ -s "$TMP/s.h5" ] && [ "$(head -c 3 "$TMP/s.txt")" != "old" ]
}

@test "class 6: an output name of NAME_MAX bytes works; one byte more fails before any work" {
  need ae-train
  max=$(getconf NAME_MAX "$TMP")
  long=$(printf 'm%.0s' $(seq 1 $((max - 3)))).h5
  run "$BIN/ae-train" -q --data "$REL_DIR/data.h5" --train-limit 8 --epochs 1 --batch-size 8 --threads 2 -o "$TMP/$long"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  [ -s "$TMP/$long" ]
  [ "$(ls -A "$TMP" | wc -l)" -eq 1 ]  # no temporary file left
  start=$(date +%s)
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --epochs 20 -o "$TMP/x$long"
  assert_error 1 "the file name is $((max + 1)) bytes long; the file system allows $max"
  [ $(($(date +%s) - start)) -lt 10 ]
}

# `ulimit -v KB;` for a limited address space, or nothing under AddressSanitizer, which
# reserves terabytes of shadow memory at start-up and cannot run under any such limit (its
# allocator still reports an attempt to allocate what the limit would have refused).
address_limit() {
  [ -n "${SANITIZER_LOG_DIR:-}" ] || echo "ulimit -v $1;"
}

@test "class 3: a few-KB file claiming 2^31 rows is refused without allocating (svm-fit, svm-eval, ae-train)" {
  need svm-fit svm-eval ae-train
  bad features "$TMP/f.h5" --bad huge-rows
  bad dataset "$TMP/d.h5" --bad huge-rows
  [ "$(stat -c %s "$TMP/f.h5")" -lt 200000 ]
  # 1 GiB of address space: zeroing 2^31 rows first would fail with "out of memory" instead.
  run bash -c "$(address_limit 1048576) exec '$BIN/svm-fit' --features '$TMP/f.h5' -o '$TMP/s.h5'"
  refused 1 "f.h5: /train/(features|labels) has shape \[2147483648.*not all of its data was ever written" "$TMP/s.h5"
  run bash -c "$(address_limit 1048576) exec '$BIN/svm-eval' --model '$REL_DIR/svm.h5' --features '$TMP/f.h5' --split train -o '$TMP/e.h5'"
  refused 1 "f.h5: /train/(features|labels) has shape \[2147483648" "$TMP/e.h5"
  run bash -c "$(address_limit 2097152) exec '$BIN/ae-train' --data '$TMP/d.h5' --epochs 1 -o '$TMP/m.h5'"
  refused 1 "d.h5: /train/(images|labels) has shape \[2147483648" "$TMP/m.h5"
}

@test "class 4: external links, external storage and virtual datasets are refused; a link to a FIFO never hangs" {
  need svm-fit ae-train
  for kind in external-link external-link-fifo external-storage virtual; do
    bad features "$TMP/f-$kind.h5" --bad "$kind"
    run timeout 60 "$BIN/svm-fit" --features "$TMP/f-$kind.h5" -o "$TMP/s.h5"
    refused 1 "f-$kind.h5: .*(external link|external file|virtual dataset).*toolkit files must hold their own data" "$TMP/s.h5"
    bad dataset "$TMP/d-$kind.h5" --bad "$kind"
    run timeout 60 "$BIN/ae-train" --data "$TMP/d-$kind.h5" --epochs 1 -o "$TMP/m.h5"
    refused 1 "d-$kind.h5: .*toolkit files must hold their own data" "$TMP/m.h5"
  done
  # A FIFO given as the file itself is refused without being opened.
  mkfifo "$TMP/pipe.h5"
  run timeout 60 "$BIN/svm-fit" --features "$TMP/pipe.h5" -o "$TMP/s.h5"
  refused 1 "pipe.h5: is not a regular file" "$TMP/s.h5"
}

@test "class 5: --threads and --cache-mb beyond the machine are usage errors naming the bound" {
  need ae-train ae-encode svm-fit
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --threads 100000 -o "$TMP/m.h5"
  refused 2 "usage error: --threads 100000 is more than [0-9]+" "$TMP/m.h5"
  run "$BIN/ae-encode" --model "$REL_DIR/model.h5" --data "$REL_DIR/data.h5" --threads 100000 -o "$TMP/f.h5"
  refused 2 "usage error: --threads 100000 is more than [0-9]+" "$TMP/f.h5"
  run "$BIN/svm-fit" --features "$REL_DIR/features.h5" --cache-mb 1000000000 -o "$TMP/s.h5"
  refused 2 "usage error: --cache-mb 1000000000 is more than the [0-9]+ MB this process may use" "$TMP/s.h5"
}

@test "class 5: under ulimit -v no tool spins: svm-fit at 1 GiB and 300 MB ends, 200 MB is one clear line" {
  need svm-fit
  [ -z "${SANITIZER_LOG_DIR:-}" ] || skip "AddressSanitizer cannot run under ulimit -v (it reserves terabytes of shadow memory)"
  for kb in 1048576 307200; do
    run timeout 60 bash -c "ulimit -v $kb; exec '$BIN/svm-fit' -q --features '$REL_DIR/features.h5' -o '$TMP/s.h5'"
    [ "$status" -ne 124 ] || { echo "svm-fit spun under ulimit -v $kb"; return 1; }
    # 300 MB: OpenBLAS's buffer does not fit beside the libraries (a CUDA build maps ~250 MB
    # before main()): the tool says so in one line. A build whose libraries alone exceed the
    # limit is refused by the dynamic loader at once, with one line — an end, not a spin.
    if [ "$status" -eq 127 ] && [ "$kb" -lt 1048576 ] && [[ "$output" == *"error while loading shared libraries"* ]]; then
      continue
    fi
    [ "$status" -eq 0 ] || assert_error 1 "svm-fit: error: "
    rm -f "$TMP/s.h5"
  done
  # OpenBLAS's pool threads map their buffers at moments of their own, so the check may run
  # before or after them: eight starts side by side meet both, and every one must end (a
  # check that read the address space before a pool thread's buffer let it spin, and the
  # HDF5 probe's fork then waited for it forever: 4 of 8 hung before the fix).
  local i pids=()
  for i in 1 2 3 4 5 6 7 8; do
    timeout 60 bash -c "ulimit -v 307200; exec '$BIN/svm-fit' -q --features '$REL_DIR/features.h5' -o '$TMP/p$i.h5'" \
      > "$TMP/p$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 1 2 3 4 5 6 7 8; do
    local rc=0
    wait "${pids[$((i - 1))]}" || rc=$?
    [ "$rc" -ne 124 ] || { echo "start $i spun under ulimit -v 307200"; return 1; }
  done
  run timeout 60 bash -c "ulimit -v 204800; exec '$BIN/svm-fit' --features '$REL_DIR/features.h5' -o '$TMP/s.h5'"
  if [ "$status" -eq 127 ] && [[ "$output" == *"error while loading shared libraries"* ]]; then
    assert_no_output "$TMP/s.h5"  # a CUDA build: the loader's one line (above)
    return 0
  fi
  refused 1 "svm-fit: error: the address-space limit \(ulimit -v\) of 200 MB is below the 256 MB this tool needs" "$TMP/s.h5"
}

@test "class 2: a checkpoint whose stored learning rate is negative is refused by --resume and kept" {
  need ae-train
  cp "$REL_DIR/model.h5" "$TMP/m.h5"
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f.attrs['lr_current']=-0.001; f.attrs['epochs_target']=3" "$TMP/m.h5"
  before=$(digest "$TMP/m.h5")
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --train-limit 16 --epochs 3 --batch-size 8 --threads 2 --resume -o "$TMP/m.h5"
  assert_error 1 "m.h5: lr_current -0.001 is not a positive finite learning rate"
  [ "$(digest "$TMP/m.h5")" = "$before" ]
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); f.attrs['lr_current']=0.001; f.attrs['optimizer_step']=-5" "$TMP/m.h5"
  run "$BIN/ae-train" --data "$REL_DIR/data.h5" --train-limit 16 --epochs 3 --batch-size 8 --threads 2 --resume -o "$TMP/m.h5"
  assert_error 1 "m.h5: optimizer_step -5 does not fit"
}

# ---- class 1 of issue 30: strings from settings never reach a shell as code --------------
# The fake tools record their arguments; the fake sbatch keeps each --wrap text, which the
# test then runs with /bin/sh as a node would. $P must stay empty: nothing in a value ran.

fake_cluster() {
  . "$REPO_ROOT/tests/helpers/fake_tools.sh"
  P="$TMP/pwned"
  export ARGV_DIR="$TMP/argv" WRAP_DIR="$TMP/wrap"
  mkdir -p "$P" "$ARGV_DIR" "$WRAP_DIR"
  make_fake_tools "$TMP/tools"
  make_fake_sbatch "$TMP/slurm"
}

# expect_argv TOOL ARG...: the fake TOOL was called with exactly these arguments.
expect_argv() {
  "$PYTHON" - "$ARGV_DIR/$1" "${@:2}" <<'PY'
import sys
got = open(sys.argv[1], "rb").read().split(b"\0")[:-1]
want = [a.encode() for a in sys.argv[2:]]
assert got == want, f"\n got  {got}\n want {want}"
PY
}

# Runs each kept --wrap text as sbatch does: with /bin/sh (dash here, not bash).
run_wraps() {
  local w
  for w in "$WRAP_DIR"/1*; do (cd "$TMP" && SLURM_ARRAY_TASK_ID=1 sh -c "$(cat "$w")") || return 1; done
}

@test "class 1: submit.sh passes shell and Make code in *_FLAGS and values as literal arguments (fake sbatch)" {
  fake_cluster
  # The jobs run the real make STAGE; these stand-ins write their -o outputs so make goes on.
  . "$REPO_ROOT/tests/slurm/fake_pipeline_tools.sh"
  make_fake_pipeline_tools "$TMP/tools"
  mkdir -p "$TMP/cif"
  local run_dir="$TMP/run"
  local fit='--C 5; touch '"$P/a"' $(touch '"$P/b"') `touch '"$P/c"'` $(shell touch '"$P/m"') '"'q' \"d\""$'\n'$'--gamma\t*'
  run env PATH="$TMP/slurm:$PATH" BIN="$TMP/tools" DATA_DIR="$TMP/data" CIFAR10_DIR="$TMP/cif" RUN_DIR="$run_dir" \
    DEVICE=cpu FIT_FLAGS="$fit" EVAL_FLAGS='$HOME ~ \n' SEED='1;touch x' "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(ls "$WRAP_DIR" | grep -c '^1')" -eq 6 ]
  run_wraps
  [ -z "$(ls -A "$P")" ] && [ ! -e "$TMP/x" ] || { ls -A "$P" "$TMP"; false; }
  expect_argv svm-fit --features "$run_dir/features.h5" --device cpu --C '5;' touch "$P/a" '$(touch' "$P/b)" \
    '`touch' "$P/c\`" '$(shell' touch "$P/m)" "'q'" '"d"' --gamma '*' --resume -o "re:$run_dir/\.svm-[0-9a-f]{10}\.h5" \
    --record-output-as "$run_dir/svm.h5"
  expect_argv svm-eval --model "$run_dir/svm.h5" --features "$run_dir/features.h5" --device cpu '$HOME' '~' '\n' \
    -o "$run_dir/eval.h5"
  expect_argv ae-train --data "$TMP/data/cifar10.h5" --epochs 20 --batch-size 64 --device cpu --encoder-channels 256,128 \
    --seed '1;touch x' --resume -o "re:$run_dir/\.model-[0-9a-f]{10}\.ckpt\.h5" --record-output-as "$run_dir/model.h5"
  # A path that make cannot name as a file (the pipeline is Make rules) is refused, unsubmitted.
  rm -f "$WRAP_DIR"/1* "$WRAP_DIR/.n"
  run env PATH="$TMP/slurm:$PATH" BIN="$TMP/tools" DATA_DIR="$TMP/data" CIFAR10_DIR="$TMP/cif" DEVICE=cpu \
    RUN_DIR="$TMP/run;touch $P/r"$'\n'"touch $P/n" "$REPO_ROOT/pipelines/slurm/submit.sh"
  [ "$status" -eq 1 ] && [[ "$output" == *"cannot be a Make file name"* ]] || { echo "$output"; false; }
  [ ! -e "$WRAP_DIR/.n" ] && [ -z "$(ls -A "$P")" ]
}

@test "class 1: sweep.sh job scripts pass a settings line's shell and Make code as literal arguments (fake sbatch)" {
  fake_cluster
  . "$REPO_ROOT/tests/slurm/fake_pipeline_tools.sh"
  make_fake_pipeline_tools "$TMP/tools"
  mkdir -p "$TMP/cif"
  cat > "$TMP/settings.txt" <<EOF
SEED=1 FIT_FLAGS='--C 5; touch $P/a \$(touch $P/b) \`touch $P/c\` \$(shell touch $P/m) "d"' ENCODER_CHANNELS='16,8;touch $P/e' EVAL_FLAGS="it's \$HOME"
EOF
  local sweep_dir="$TMP/sw"
  run env PATH="$TMP/slurm:$PATH" BIN="$TMP/tools" DATA_DIR="$TMP/data" CIFAR10_DIR="$TMP/cif" SWEEP_DIR="$sweep_dir" \
    DEVICE=cpu PYTHON="$PYTHON" "$REPO_ROOT/pipelines/slurm/sweep.sh" "$TMP/settings.txt"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  run_wraps
  [ -z "$(ls -A "$P")" ] || { ls -A "$P"; false; }
  local r="$sweep_dir/run-1"
  expect_argv svm-fit --features "$r/features.h5" --device cpu --C '5;' touch "$P/a" '$(touch' "$P/b)" '`touch' \
    "$P/c\`" '$(shell' touch "$P/m)" '"d"' --resume -o "re:$r/\.svm-[0-9a-f]{10}\.h5" --record-output-as "$r/svm.h5"
  expect_argv svm-eval --model "$r/svm.h5" --features "$r/features.h5" --device cpu "it's" '$HOME' -o "$r/eval.h5"
  expect_argv ae-train --data "$TMP/data/cifar10.h5" --epochs 20 --batch-size 64 --device cpu \
    --encoder-channels "16,8;touch $P/e" --seed 1 --resume -o "re:$r/\.model-[0-9a-f]{10}\.ckpt\.h5" \
    --record-output-as "$r/model.h5"
  expect_argv report --compare "$r" -o "$sweep_dir/compare"
  [ "$(sed -n 4p "$r/job.sh")" = "set -euo pipefail" ] || { cat "$r/job.sh"; false; }
}

@test "class 1: a settings line with a control character (ESC) is refused before anything is submitted" {
  fake_cluster
  : > "$TMP/data.h5"
  printf 'SEED=1\nSEED=2 FIT_FLAGS="--C 5\033[2J"\n' > "$TMP/settings.txt"
  run env PATH="$TMP/slurm:$PATH" BIN="$TMP/tools" DATASET="$TMP/data.h5" SWEEP_DIR="$TMP/sw" DEVICE=cpu \
    PYTHON="$PYTHON" "$REPO_ROOT/pipelines/slurm/sweep.sh" "$TMP/settings.txt"
  [ "$status" -eq 1 ]
  [[ "$output" == *"settings.txt:2: "*"holds a control character"* ]] || { echo "$output"; false; }
  [[ "$output" != *$'\033'* ]]
  [ ! -e "$WRAP_DIR/.n" ] && [ ! -e "$TMP/sw" ]
}

# ---- class 2 of issue 30: memory follows the bytes actually read -------------------------
# Each input is a few dozen bytes whose header claims up to 4 GB (tests/helpers/
# lying_inputs.py). The tool must refuse it naming the file, its peak resident size (the
# kernel's getrusage of the child) less than 100 MB above its size without input, where it
# used to allocate and zero what the header claimed.

LYING="$REPO_ROOT/tests/helpers/lying_inputs.py"

# peak_run CMD...: runs CMD; output = its stderr, then "rc=N maxrss_kb=N".
peak_run() {
  run "$PYTHON" -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stdout.write(r.stderr.decode("utf-8", "backslashreplace"))
print("rc=%d maxrss_kb=%d" % (r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))' "$@"
}

# under_100mb REGEX: the last peak_run failed with exit 1, one error line matching REGEX,
# and a peak resident size less than 100 MB above the tool's own (its run on a missing
# input: the libraries, and under make test-asan the sanitizer's shadow memory).
under_100mb() {
  [[ "$output" =~ rc=1\ maxrss_kb=([0-9]+) ]] || { echo "$output"; return 1; }
  local kb=${BASH_REMATCH[1]} base
  base=$("$PYTHON" -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$BIN/cifar-convert" --input "$TMP/no-such-input" -o "$TMP/none.h5")
  [ $((kb - base)) -lt 102400 ] || { echo "peak RSS ${kb} kB, ${base} kB without input: $output"; return 1; }
  [ "$(grep -c 'error: ' <<< "$output")" -eq 1 ] && grep -qE "$1" <<< "$output" || { echo "$output"; return 1; }
}

@test "class 2: a gzip IDX file declaring 4 GB in 33 bytes is refused without allocating it" {
  need cifar-convert
  "$PYTHON" "$LYING" idx-gz "$TMP/idx"
  peak_run "$BIN/cifar-convert" --input "$TMP/idx" -o "$TMP/d.h5"
  under_100mb "train-images-idx3-ubyte.gz: is truncated or damaged: the IDX header says 4294967312 bytes"
  assert_no_output "$TMP/d.h5"
}

@test "class 2: a gzip IDX file whose trailer is forged to agree with its 4 GB header is refused with little memory" {
  need cifar-convert
  "$PYTHON" "$LYING" idx-trailer "$TMP/idx"
  peak_run "$BIN/cifar-convert" --input "$TMP/idx" -o "$TMP/d.h5"
  under_100mb "train-images-idx3-ubyte.gz: is truncated: [0-9]+ bytes, the header says 4294967312"
  assert_no_output "$TMP/d.h5"
}

@test "class 2: tar.gz members declaring 30 MB (CIFAR-10) and 1 GB (CIFAR-100) in 100 bytes are refused with little memory" {
  need cifar-convert
  "$PYTHON" "$LYING" cifar10-tar "$TMP/c10.tar.gz"
  peak_run "$BIN/cifar-convert" --input "$TMP/c10.tar.gz" -o "$TMP/d.h5"
  under_100mb "c10.tar.gz: cifar-10-batches-bin/data_batch_1.bin: corrupted or truncated archive"
  "$PYTHON" "$LYING" cifar100-tar "$TMP/c100.tar.gz"
  peak_run "$BIN/cifar-convert" --input "$TMP/c100.tar.gz" --format cifar100 -o "$TMP/d.h5"
  under_100mb "c100.tar.gz: cifar-100-binary/train.bin: corrupted or truncated archive"
  assert_no_output "$TMP/d.h5"
}

@test "class 2: PNG and JPEG (baseline, progressive) headers declaring 9000x9000 in under 200 bytes are refused with little memory" {
  need cifar-convert
  "$PYTHON" "$LYING" png-lie "$TMP/png"
  peak_run "$BIN/cifar-convert" --input "$TMP/png" -o "$TMP/d.h5"
  under_100mb "x.png: corrupt PNG: its header declares 9000x9000 pixels"
  "$PYTHON" "$LYING" jpeg-lie "$TMP/jpg"
  peak_run "$BIN/cifar-convert" --input "$TMP/jpg" -o "$TMP/d.h5"
  under_100mb "x.jpg: corrupt JPEG"
  "$PYTHON" "$LYING" jpeg-prog "$TMP/prog"
  peak_run "$BIN/cifar-convert" --input "$TMP/prog" -o "$TMP/d.h5"
  under_100mb "x.jpg: corrupt JPEG"
  assert_no_output "$TMP/d.h5"
}

# ---- class 4 of issue 30: names from outside are printed escaped --------------------------

@test "class 4: a class folder with a newline and a file with an ESC sequence give one error line, no raw ESC" {
  need cifar-convert
  mkdir -p "$TMP/f/train/cat"$'\n'"dog" "$TMP/f/test/cat"$'\n'"dog"
  printf 'not an image' > "$TMP/f/train/cat"$'\n'"dog/bad.jpg"
  "$PYTHON" -c "
import struct, sys, zlib
chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xFFFFFFFF)
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 2, 2, 8, 0, 0, 0, 0)) + \
      chunk(b'IDAT', zlib.compress(b'\0\1\2\0\3\4')) + chunk(b'IEND', b'')
open(sys.argv[1], 'wb').write(png)" "$TMP/f/test/cat"$'\n'"dog/ok.png"
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/x.h5"
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ] || { printf '%q\n' "$output"; false; }
  [[ "$output" == *'"'"$TMP/f/train/cat\\ndog/bad.jpg"'": is not a PNG or JPEG file'* ]] || { printf '%q\n' "$output"; false; }
  assert_no_output "$TMP/x.h5"
  # An escape sequence in a file name (clear screen, set the title): escaped in the error and
  # in --skip-bad's warning.
  mv "$TMP/f/train/cat"$'\n'"dog/bad.jpg" "$TMP/f/train/cat"$'\n'"dog/"$'\033[2J\033]0;x\007'".jpg"
  cp "$TMP/f/test/cat"$'\n'"dog/ok.png" "$TMP/f/train/cat"$'\n'"dog/ok.png"
  run "$BIN/cifar-convert" --input "$TMP/f" --skip-bad -o "$TMP/x.h5"
  [ "$status" -eq 0 ] || { printf '%q\n' "$output"; false; }
  [[ "$output" != *$'\033'* && "$output" != *$'\007'* ]] || { printf '%q\n' "$output"; false; }
  [[ "$output" == *'\x1B[2J\x1B]0;x\x07.jpg": is not a PNG or JPEG file'* ]] || { printf '%q\n' "$output"; false; }
  rm "$TMP/f/train/cat"$'\n'"dog/ok.png"
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/y.h5"
  [ "$status" -eq 1 ] && [ "${#lines[@]}" -eq 1 ] && [[ "$output" != *$'\033'* ]] || { printf '%q\n' "$output"; false; }
}
