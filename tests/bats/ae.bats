#!/usr/bin/env bats
# ae-train / ae-encode (issue 3): options, the model file, PyTorch reference checks,
# resume after kill -9, bad inputs, and a real-data smoke test. Runs use --device cpu: the
# CPU backend is the reference (bit-identical resume, PyTorch agreement); GPU runs are
# tested by tests/gpu.

load helpers

setup_file() {
  export AE_DIR
  AE_DIR="$(mktemp -d "${BATS_TMPDIR:-/tmp}/ae.XXXXXX")"
  make_dataset "$AE_DIR/data.h5" 192 64
  # The uninterrupted reference run of the resume test, also used by the file and
  # training-log tests. Fixed threads: bit-identical results need the same count.
  "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --epochs 3 --batch-size 16 --seed 7 --threads 2 \
    -o "$AE_DIR/full.h5" 2>"$AE_DIR/full.log"
}

teardown_file() {
  rm -rf "$AE_DIR"
}

# Every dataset of two ae-model files bit for bit (but the wall-clock epoch_seconds), and
# the training state: what a resumed run must end with.
assert_same_model() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
assert len(names) == 20, names
for n in names:
    if n == "history/epoch_seconds":
        continue
    x, y = a[n][...], b[n][...]
    assert x.dtype == y.dtype and x.shape == y.shape, n
    assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), f"{n} differs after resume"
for k in ("epochs_done", "optimizer_step", "lr_current", "plateau_best", "plateau_bad_epochs", "epoch_images_done"):
    assert a.attrs[k] == b.attrs[k], k
PY
}

h5attr() {
  "$PYTHON" -c "import h5py,sys; print(h5py.File(sys.argv[1]).attrs[sys.argv[2]])" "$1" "$2"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/ae-test.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

@test "ae-train and ae-encode: --help shows an example, bad options are usage errors" {
  run "$BIN/ae-train" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"Example:"*"ae-train --data"* ]]
  [[ "$output" == *"--lr-plateau-patience"* ]]
  [[ "$output" != *"--dump-gradients"* ]]  # a dev binary's job (tests/dev), not the tool's
  run "$BIN/ae-encode" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"Example:"*"ae-encode --model"* ]]
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --optimizer rmsprop -o "$TMP/m.h5"
  [ "$status" -eq 2 ]
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --batch-size 0 -o "$TMP/m.h5"
  [ "$status" -eq 2 ]
  run "$BIN/ae-train" --data "$AE_DIR/data.h5" --device cpu --precision bf16 -o "$TMP/m.h5"
  assert_error 2 "bf16 needs --device gpu"
  run "$BIN/ae-encode" --device cpu --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" --split valid -o "$TMP/f.h5"
  assert_error 2 "'valid' is not train or test"
  assert_no_output "$TMP/m.h5"
  assert_no_output "$TMP/f.h5"
}

@test "ae-train: data-parallel options are checked before any work (docs/MULTI_GPU.md)" {
  run "$BIN/ae-train" --help
  [[ "$output" == *"--gpus"*"--rank"*"--world-size"*"--rendezvous"* ]]
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --gpus 2 -o "$TMP/m.h5"
  assert_error 2 "--gpus needs --device gpu"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --rank 2 --world-size 2 -o "$TMP/m.h5"
  assert_error 2 "--rank 2 is outside --world-size 2"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --rank 0 -o "$TMP/m.h5"
  assert_error 2 "--rank and --world-size go together"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --rank 0 --world-size 2 --rendezvous "$TMP/id" -o "$TMP/m.h5"
  assert_error 2 "data-parallel training needs --device gpu"
  # Slurm's variables make a group too; a malformed one is named.
  SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=x run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" -o "$TMP/m.h5"
  assert_error 2 "SLURM_PROCID='x' is not a rank number"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --gpus 0 -o "$TMP/m.h5"
  [ "$status" -eq 2 ]
  assert_no_output "$TMP/m.h5"
}

@test "ae-train logs the parameter count and one line per epoch, and the loss falls" {
  grep -q "autoencoder 3x32x32 -> conv 256, 128 -> latent 128x8x8 (8,\?192): 751,875 parameters" "$AE_DIR/full.log"
  # The default hold-out: a tenth of the 192 training images.
  grep -q "173 training, 19 validation and 64 test images" "$AE_DIR/full.log"
  [ "$(grep -c 'epoch [0-9]/3: train loss .*, val loss .*, test loss .*, .* s, .* img/s, lr' "$AE_DIR/full.log")" -eq 3 ]
  "$PYTHON" - "$AE_DIR/full.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
loss = f["/history/train_loss"][...]
assert loss.shape == (3,) and np.all(np.isfinite(loss)), loss
assert loss[0] > loss[1] > loss[2], f"train loss does not fall: {loss}"
assert np.all(f["/history/test_loss"][...] > 0) and np.all(f["/history/val_loss"][...] > 0)
PY
}

@test "model.h5 follows docs/FORMATS.md (ae-model)" {
  "$PYTHON" - "$AE_DIR/full.h5" <<'PY'
import json, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
a = f.attrs
assert a["format"] == "ae-model" and a["format_version"] == 1
for key in ("created_by", "created_at", "inputs", "params", "architecture"):
    assert key in a, key
assert a["architecture"].startswith("conv-ae")
assert list(a["encoder_channels"]) == [256, 128] and a["encoder_channels"].dtype == np.int64
assert list(a["input_shape"]) == [3, 32, 32] and list(a["latent_shape"]) == [128, 8, 8]
inputs = json.loads(a["inputs"])
assert len(inputs) == 1 and len(inputs[0]["sha256"]) == 64 and inputs[0]["sha256"] == a["data_sha256"]
params = json.loads(a["params"])
assert params["epochs"] == "3" and params["batch-size"] == "16" and params["optimizer"] == "adam", params
shapes = {"/encoder/conv1": (256, 3), "/encoder/conv2": (128, 256), "/decoder/conv1": (128, 128),
          "/decoder/conv2": (256, 128), "/decoder/conv3": (3, 256)}
total = 0
for g, (out, cin) in shapes.items():
    w, b = f[g + "/weight"], f[g + "/bias"]
    assert w.shape == (out, cin, 3, 3) and w.dtype == np.float32, (g, w.shape, w.dtype)
    assert b.shape == (out,) and b.dtype == np.float32
    assert np.any(b[...] != 0), g + " biases never moved from their zero init"
    total += w.size + b.size
assert total == 751875 == a["param_count"]
for h in ("train_loss", "val_loss", "test_loss", "epoch_seconds", "lr"):
    d = f["/history/" + h]
    assert d.shape == (3,) and d.dtype == np.float64, h
assert np.all(f["/history/lr"][...] == np.float32(3e-4))
assert f["/samples/images"].shape == (10, 3, 32, 32) and f["/samples/images"].dtype == np.uint8
assert list(f["/samples/labels"][...]) == list(range(10))
rec = f["/samples/reconstructions"][...]
assert rec.shape == (10, 3, 32, 32) and rec.dtype == np.float32 and np.all(np.isfinite(rec)) and rec.std() > 0
for m in ("/optimizer/m", "/optimizer/v"):
    assert f[m].shape == (751875,) and f[m].dtype == np.float32 and np.any(f[m][...] != 0)
assert a["epochs_done"] == 3 and a["epochs_target"] == 3 and a["seed"] == 7
assert a["optimizer_step"] == 3 * 11  # 192 - 19 held out = 173 images / batch 16
assert a["train_count"] == 173 and a["val_count"] == 19 and a["test_count"] == 64 and a["device"] == "cpu" and a["precision"] == "fp32"
assert a["total_seconds"] > 0 and a["images_per_second"] > 0
PY
}

# The backward pass is compared along the C++ forward pass's decisions (max-pool picks, ReLU
# masks), which must be PyTorch's except within rounding of a boundary: in a batch of millions
# of activations a few lie there, and one flipped decision moved the gradients by 3e-4 in a
# test-asan run (docs/DECISIONS.md, "Gradient check against PyTorch").
@test "one batch's output, loss and every parameter gradient match PyTorch (rel err < 1e-4)" {
  "$BUILD/tests/ae-dump-gradients" --quiet --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" --batch-size 24 \
    -o "$TMP/grads.h5"
  run "$PYTHON" "$REPO_ROOT/tests/python/torch_reference.py" gradients --model "$AE_DIR/full.h5" \
    --dump "$TMP/grads.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  # output, 4 layers' decisions, loss, 5 weight and 5 bias gradients
  [ "$(grep -c '^ok ' <<<"$output")" -eq 16 ]
}

# The same two checks on a model of another shape: grey 28×28 images (one input channel,
# spatial sizes 28, 14, 7 — not powers of two) and encoder 64,32.
@test "a 1x28x28 model with encoder 64,32: gradients and features match PyTorch" {
  "$PYTHON" - "$TMP/d28.h5" <<'PY'
import sys, h5py, numpy as np
rng = np.random.default_rng(28)
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format"] = "image-dataset"
    f.attrs["format_version"] = np.int64(1)
    f.attrs.create("class_names", [str(i) for i in range(10)], dtype=h5py.string_dtype())
    for s, n in (("train", 32), ("test", 8)):
        f[s + "/images"] = rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8)
        f[s + "/labels"] = (np.arange(n) % 10).astype(np.uint8)
PY
  "$BIN/ae-train" --device cpu --quiet --data "$TMP/d28.h5" --encoder-channels 64,32 --val-split 0 --epochs 1 \
    --batch-size 8 --threads 2 -o "$TMP/m28.h5"
  "$BUILD/tests/ae-dump-gradients" --quiet --model "$TMP/m28.h5" --data "$TMP/d28.h5" --batch-size 8 --threads 2 \
    -o "$TMP/g28.h5"
  run "$PYTHON" "$REPO_ROOT/tests/python/torch_reference.py" gradients --model "$TMP/m28.h5" --dump "$TMP/g28.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"input 1x28x28, encoder channels 64,32"* ]]
  [ "$(grep -c '^ok ' <<<"$output")" -eq 16 ]
  "$BIN/ae-encode" --device cpu --quiet --model "$TMP/m28.h5" --data "$TMP/d28.h5" -o "$TMP/f28.h5"
  run "$PYTHON" "$REPO_ROOT/tests/python/torch_reference.py" features --model "$TMP/m28.h5" --data "$TMP/d28.h5" \
    --features "$TMP/f28.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ok   train features (32 x 1568)"* ]]
}

@test "ae-encode features match PyTorch's encoder (rel err < 1e-5) and carry provenance" {
  run "$BIN/ae-encode" --device cpu --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" -o "$TMP/f.h5" --batch-size 50 --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"images":256'* ]]
  run "$PYTHON" "$REPO_ROOT/tests/python/torch_reference.py" features --model "$AE_DIR/full.h5" \
    --data "$AE_DIR/data.h5" --features "$TMP/f.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"ok   train features (192 x 8192)"* ]]
  [[ "$output" == *"ok   test features (64 x 8192)"* ]]
  "$PYTHON" - "$TMP/f.h5" "$AE_DIR/full.h5" "$AE_DIR/data.h5" <<'PY'
import hashlib, json, sys, h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["format"] == "ae-features" and f["/train/features"].dtype == "float16"
sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
inputs = json.loads(f.attrs["inputs"])
assert [i["sha256"] for i in inputs] == [sha(sys.argv[2]), sha(sys.argv[3])], inputs
assert len(f.attrs["class_names"]) == 10 and f.attrs["images_per_second"] > 0
PY
  # --feature-dtype float32: the codes as computed, of which the default file holds the float16 rounding.
  "$BIN/ae-encode" --device cpu --quiet --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" --batch-size 50 \
    --feature-dtype float32 -o "$TMP/f32.h5"
  "$PYTHON" - "$TMP/f.h5" "$TMP/f32.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for s in ("train", "test"):
    x16, x32 = a[f"/{s}/features"][...], b[f"/{s}/features"][...]
    assert x16.dtype == np.float16 and x32.dtype == np.float32, (x16.dtype, x32.dtype)
    assert np.array_equal(x32.astype(np.float16), x16), s  # numpy's rounding: to nearest, ties to even
    assert not np.array_equal(x32, x16.astype(np.float32)), s
PY
  run "$BIN/ae-encode" --device cpu --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" --feature-dtype float64 -o "$TMP/x.h5"
  [ "$status" -eq 2 ] && [ ! -e "$TMP/x.h5" ]
  # One split only.
  "$BIN/ae-encode" --device cpu --quiet --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" --split test -o "$TMP/t.h5"
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert list(f) == ['test'], list(f)" "$TMP/t.h5"
}

@test "a run killed with SIGKILL during epoch 2 resumes to exactly the weights of an uninterrupted run" {
  opts=(--data "$AE_DIR/data.h5" --epochs 3 --batch-size 16 --seed 7 --threads 2 -o "$TMP/m.h5")
  ASAN_OPTIONS="$KILLED_ASAN_OPTIONS" "$BIN/ae-train" --device cpu "${opts[@]}" --quiet &
  pid=$!
  # The checkpoint appears when epoch 1 is done; epoch 2 then takes well over 50 ms.
  for _ in $(seq 1 2400); do [ -f "$TMP/m.h5" ] && break; sleep 0.05; done
  kill -9 "$pid"
  wait "$pid" || true
  [ "$(h5attr "$TMP/m.h5" epochs_done)" = 1 ]
  "$BIN/ae-train" --device cpu "${opts[@]}" --resume --quiet
  assert_same_model "$AE_DIR/full.h5" "$TMP/m.h5"
}

@test "SIGUSR1 or SIGTERM mid-epoch: exit 75 with a mid-epoch checkpoint; --resume ends bit-identical" {
  # Batch 2 over 173 training images: 87 steps an epoch, checked for a stop every 16, so a
  # signal sent as soon as epoch 1's checkpoint appears lands inside epoch 2 or 3.
  opts=(--data "$AE_DIR/data.h5" --epochs 4 --batch-size 2 --seed 7 --threads 2 --encoder-channels 32,16)
  "$BIN/ae-train" --device cpu "${opts[@]}" --quiet -o "$TMP/full.h5"
  for sig in USR1 TERM; do
    rm -f "$TMP/m.h5"
    # A --resume without a checkpoint starts from scratch (a requeued job always passes it).
    "$BIN/ae-train" --device cpu "${opts[@]}" --resume -o "$TMP/m.h5" 2>"$TMP/err" &
    pid=$!
    for _ in $(seq 1 2400); do [ -f "$TMP/m.h5" ] && break; sleep 0.02; done
    kill -"$sig" "$pid"
    status=0
    wait "$pid" || status=$?
    [ "$status" -eq 75 ]
    grep -q "no checkpoint at $TMP/m.h5 yet: starting from scratch" "$TMP/err"
    line="$(grep "interrupted" "$TMP/err")"
    [[ "$line" == "ae-train: interrupted by SIG$sig in epoch "*" images trained); checkpoint in $TMP/m.h5; rerun the same command with --resume to continue" ]]
    "$PYTHON" - "$TMP/m.h5" <<'PY'
import sys, h5py
a = h5py.File(sys.argv[1], "r").attrs
assert 1 <= a["epochs_done"] <= 2, a["epochs_done"]
assert 0 < a["epoch_images_done"] < 173 and a["epoch_images_done"] % 2 == 0, a["epoch_images_done"]
assert a["epoch_loss_sum"] > 0
assert a["optimizer_step"] == a["epochs_done"] * 87 + a["epoch_images_done"] // 2, a["optimizer_step"]
PY
    run "$BIN/ae-train" --device cpu "${opts[@]}" --resume -o "$TMP/m.h5"
    [ "$status" -eq 0 ]
    [[ "$output" == *"resuming $TMP/m.h5 inside epoch "* ]]
    assert_same_model "$TMP/full.h5" "$TMP/m.h5"
    [ "$(h5attr "$TMP/m.h5" epochs_done) $(h5attr "$TMP/m.h5" epoch_images_done)" = "4 0" ]
  done
}

@test "--resume refuses a checkpoint trained with other options, and is a no-op when done" {
  cp "$AE_DIR/full.h5" "$TMP/m.h5"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --epochs 4 --batch-size 32 --seed 7 --resume -o "$TMP/m.h5"
  assert_error 2 "m.h5: cannot --resume: it was trained with --batch-size 16, this run has --batch-size 32"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --epochs 3 --batch-size 16 --seed 7 --resume -o "$TMP/m.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"already has 3 of 3 epochs: nothing to do"* ]]
  cmp "$AE_DIR/full.h5" "$TMP/m.h5"
}

@test "bad model files give one line naming the file and leave no output" {
  "$PYTHON" - "$AE_DIR/full.h5" "$TMP" <<'PY'
import shutil, sys, h5py, numpy as np
src, tmp = sys.argv[1], sys.argv[2]
shutil.copy(src, tmp + "/shape.h5")
with h5py.File(tmp + "/shape.h5", "a") as f:
    del f["/decoder/conv2/weight"]
    f["/decoder/conv2/weight"] = np.ones((256, 64, 3, 3), np.float32)
shutil.copy(src, tmp + "/arch.h5")
with h5py.File(tmp + "/arch.h5", "a") as f:
    f.attrs["architecture"] = "resnet-18"
shutil.copy(src, tmp + "/nan.h5")
with h5py.File(tmp + "/nan.h5", "a") as f:
    f["/encoder/conv1/bias"][3] = np.nan
    f["/encoder/conv1/bias"].attrs.pop("crc32", None)  # an edited dataset's checksum no longer holds
PY
  run "$BIN/ae-encode" --device cpu --model "$TMP/shape.h5" --data "$AE_DIR/data.h5" -o "$TMP/f.h5"
  assert_error 1 "shape.h5: /decoder/conv2/weight has shape \[256,64,3,3\], expected \[256,128,3,3\]"
  run "$BIN/ae-encode" --device cpu --model "$TMP/arch.h5" --data "$AE_DIR/data.h5" -o "$TMP/f.h5"
  assert_error 1 "arch.h5: was trained for another architecture \('resnet-18'\)"
  run "$BIN/ae-encode" --device cpu --model "$TMP/nan.h5" --data "$AE_DIR/data.h5" -o "$TMP/f.h5"
  assert_error 1 "nan.h5: weights contain NaN or Inf"
  run "$BIN/ae-encode" --device cpu --model "$AE_DIR/data.h5" --data "$AE_DIR/data.h5" -o "$TMP/f.h5"
  assert_error 1 "data.h5: is an image-dataset file, expected ae-model"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --epochs 4 --batch-size 16 --seed 7 --resume -o "$TMP/shape.h5"
  assert_error 1 "shape.h5: /decoder/conv2/weight has shape"
  assert_no_output "$TMP/f.h5"
}

@test "a diverging run stops with a clear message and keeps the last good checkpoint" {
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --train-limit 64 --epochs 4 --batch-size 16 --optimizer sgd \
    --lr 50 --threads 2 --quiet -o "$TMP/m.h5"
  assert_error 1 "training diverged in epoch [1-4] \(the (train |validation |test )loss became (NaN|Inf)\); .*Try a lower --lr or --grad-clip"
  epoch=$(sed -n 's/.*diverged in epoch \([0-9]\).*/\1/p' <<<"$output")
  if [ "$epoch" -eq 1 ]; then
    [[ "$output" == *"no model was written"* ]]
    assert_no_output "$TMP/m.h5"
  else
    [[ "$output" == *"m.h5 keeps epoch $((epoch - 1))"* ]]
    "$PYTHON" - "$TMP/m.h5" "$((epoch - 1))" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f.attrs["epochs_done"] == int(sys.argv[2])
assert np.all(np.isfinite(f["/history/train_loss"][...]))
assert all(np.all(np.isfinite(f[g + "/weight"][...])) for g in ("/encoder/conv1", "/decoder/conv3"))
PY
  fi
}

@test "--encoder-channels 96,48,24 and 64,32 train, and ae-encode writes 384 and 2,048 features" {
  for spec in "96,48,24 384 24,4,4" "64,32 2048 32,8,8"; do
    read -r channels dim latent <<<"$spec"
    run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --encoder-channels "$channels" --epochs 1 --batch-size 32 \
      --threads 2 -o "$TMP/m.h5"
    [ "$status" -eq 0 ]
    [[ "$output" == *"conv ${channels//,/, } -> latent"* ]]
    "$BIN/ae-encode" --device cpu --quiet --model "$TMP/m.h5" --data "$AE_DIR/data.h5" -o "$TMP/f.h5"
    "$PYTHON" - "$TMP/m.h5" "$TMP/f.h5" "$channels" "$dim" "$latent" <<'PY'
import sys, h5py, numpy as np
m, f = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
channels = [int(c) for c in sys.argv[3].split(",")]
dim, latent = int(sys.argv[4]), [int(c) for c in sys.argv[5].split(",")]
assert list(m.attrs["encoder_channels"]) == channels and list(m.attrs["input_shape"]) == [3, 32, 32]
k = len(channels)
assert m[f"/encoder/conv{k}/weight"].shape == (channels[-1], channels[-2], 3, 3)
assert m[f"/decoder/conv{k + 1}/weight"].shape == (3, channels[0], 3, 3)
assert f"decoder/conv{k + 2}" not in m
assert f["/train/features"].shape == (192, dim) and f["/test/features"].shape == (64, dim)
assert list(f.attrs["latent_shape"]) == latent
assert np.all(np.isfinite(f["/train/features"][...]))
PY
    rm -f "$TMP/m.h5" "$TMP/f.h5"
  done
}

@test "--encoder-channels that the image shape cannot take are usage errors with no output" {
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --encoder-channels 8,8,8,8,8,8 -o "$TMP/m.h5"
  assert_error 2 "--encoder-channels 8,8,8,8,8,8 pools 6 times, so the image height and width must be divisible by 64; 32x32 is not"
  for bad in "" "8,,8" "0" "-4" "abc" "8,8,"; do
    run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --encoder-channels "$bad" -o "$TMP/m.h5"
    [ "$status" -eq 2 ] || { echo "'$bad': exit $status: $output"; false; }
  done
  assert_no_output "$TMP/m.h5"
}

@test "--val-split: the hold-out steers the schedule, 0 disables it, too many is a usage error, --resume checks it" {
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --val-split 192 -o "$TMP/m.h5"
  assert_error 2 "--val-split 192 leaves no training image"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --train-limit 50 --val-split 50 -o "$TMP/m.h5"
  assert_error 2 "--val-split 50 leaves no training image .*within --train-limit"
  assert_no_output "$TMP/m.h5"
  # No hold-out: every image trains, val_loss is NaN, the schedule reads the training loss.
  "$BIN/ae-train" --device cpu --quiet --data "$AE_DIR/data.h5" --encoder-channels 8 --val-split 0 --epochs 2 \
    --batch-size 32 --threads 2 -o "$TMP/none.h5"
  # A hold-out of 40, with two seeds: the same 40 images (a fixed shuffle, not --seed).
  for seed in 1 2; do
    "$BIN/ae-train" --device cpu --quiet --data "$AE_DIR/data.h5" --encoder-channels 8 --val-split 40 --epochs 2 \
      --batch-size 32 --threads 2 --seed $seed --json -o "$TMP/v$seed.h5" >"$TMP/v$seed.json"
  done
  "$PYTHON" - "$TMP" <<'PY'
import json, sys, h5py, numpy as np
t = sys.argv[1]
n = h5py.File(t + "/none.h5", "r")
assert n.attrs["train_count"] == 192 and n.attrs["val_count"] == 0
assert np.all(np.isnan(n["/history/val_loss"][...]))
assert n.attrs["plateau_best"] in list(n["/history/train_loss"][...])
for s in (1, 2):
    v = h5py.File(t + f"/v{s}.h5", "r")
    assert v.attrs["train_count"] == 152 and v.attrs["val_count"] == 40 and v.attrs["optimizer_step"] == 2 * 5
    val = v["/history/val_loss"][...]
    assert val.shape == (2,) and np.all(np.isfinite(val)) and np.all(val != v["/history/test_loss"][...])
    assert v.attrs["plateau_best"] in list(val)
    j = json.loads(open(t + f"/v{s}.json").read())
    assert j["val_loss"] == val[-1], j
PY
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --encoder-channels 8 --val-split 30 --epochs 3 \
    --batch-size 32 --threads 2 --resume -o "$TMP/v1.h5"
  assert_error 2 "v1.h5: cannot --resume: it was trained with --val-split 40, this run has --val-split 30"
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --encoder-channels 16 --val-split 40 --epochs 3 \
    --batch-size 32 --threads 2 --resume -o "$TMP/v1.h5"
  assert_error 2 "v1.h5: cannot --resume: it was trained with the architecture 3x32x32 -> conv 8"
}

@test "files of the older formats still read: a seed model without architecture attributes, a cifar10-dataset" {
  "$PYTHON" - "$AE_DIR/full.h5" "$AE_DIR/data.h5" "$TMP" <<'PY'
import shutil, sys, h5py
model, data, tmp = sys.argv[1:4]
shutil.copy(model, tmp + "/old.h5")
with h5py.File(tmp + "/old.h5", "a") as f:
    for k in ("encoder_channels", "input_shape", "latent_shape", "val_count"):
        del f.attrs[k]
    del f["/history/val_loss"]
    f.attrs["architecture"] = ("conv-ae-v1: conv3x3 3>256 relu, maxpool2, conv3x3 256>128 relu, maxpool2 | "
                               "conv3x3 128>128 relu, up2, conv3x3 128>256 relu, up2, conv3x3 256>3")
shutil.copy(data, tmp + "/old-data.h5")
with h5py.File(tmp + "/old-data.h5", "a") as f:
    f.attrs["format"] = "cifar10-dataset"
    del f.attrs["class_names"]
PY
  "$BIN/ae-encode" --device cpu --quiet --model "$TMP/old.h5" --data "$TMP/old-data.h5" -o "$TMP/f.h5"
  "$BIN/ae-encode" --device cpu --quiet --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" -o "$TMP/g.h5"
  "$PYTHON" - "$TMP/f.h5" "$TMP/g.h5" <<'PY'
import sys, h5py, numpy as np
f, g = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert f["/train/features"].shape == (192, 8192)
assert np.array_equal(f["/train/features"][...], g["/train/features"][...])
assert list(f.attrs["class_names"])[0] == "airplane" and len(f.attrs["class_names"]) == 10
PY
  # Resuming the old file: its epochs had no hold-out, so it continues only with --val-split 0.
  run "$BIN/ae-train" --device cpu --data "$AE_DIR/data.h5" --epochs 4 --batch-size 16 --seed 7 --threads 2 --resume \
    -o "$TMP/old.h5"
  assert_error 2 "old.h5: cannot --resume: it was trained with --val-split 0, this run has --val-split 19"
}

@test "ae-encode refuses a dataset whose image shape is not the model's" {
  "$PYTHON" - "$TMP/small.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["format"] = "image-dataset"
    f.attrs["format_version"] = np.int64(1)
    f.attrs.create("class_names", ["a", "b"], dtype=h5py.string_dtype())
    for s, n in (("train", 8), ("test", 4)):
        f[s + "/images"] = np.random.default_rng(0).integers(0, 256, (n, 1, 16, 16), dtype=np.uint8)
        f[s + "/labels"] = (np.arange(n) % 2).astype(np.uint8)
PY
  run "$BIN/ae-encode" --device cpu --model "$AE_DIR/full.h5" --data "$TMP/small.h5" -o "$TMP/f.h5"
  assert_error 1 "small.h5: has images of 1x16x16 but .*full.h5 was trained on 3x32x32"
  assert_no_output "$TMP/f.h5"
  # The same file trains a model of its own shape, which encodes it.
  "$BIN/ae-train" --device cpu --quiet --data "$TMP/small.h5" --encoder-channels 4,2 --val-split 2 --epochs 1 \
    --batch-size 4 -o "$TMP/m.h5"
  "$BIN/ae-encode" --device cpu --quiet --model "$TMP/m.h5" --data "$TMP/small.h5" -o "$TMP/f.h5"
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert f['/train/features'].shape == (8, 32)" "$TMP/f.h5"
}

@test "--device gpu without a GPU fails with one clear line" {
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then skip "a GPU is present"; fi
  run "$BIN/ae-train" --data "$AE_DIR/data.h5" --device gpu -o "$TMP/m.h5"
  assert_error 1 "--device gpu: (this build has no CUDA support|no CUDA GPU found)"
  run "$BIN/ae-encode" --model "$AE_DIR/full.h5" --data "$AE_DIR/data.h5" --device gpu -o "$TMP/f.h5"
  assert_error 1 "--device gpu: "
  assert_no_output "$TMP/m.h5"
}

@test "real CIFAR-10: 2,000 images, 2 epochs: the loss falls and test MSE < 0.03" {
  src="$(real_cifar)"
  [ -n "$src" ] || skip "no ../shared/cifar-10-batches-bin"
  "$BIN/cifar-convert" --quiet --input "$src" --train-limit 2000 --test-limit 500 -o "$TMP/real.h5"
  "$BIN/ae-train" --device cpu --quiet --data "$TMP/real.h5" --epochs 2 -o "$TMP/m.h5"
  "$PYTHON" - "$TMP/m.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
train, test = f["/history/train_loss"][...], f["/history/test_loss"][...]
print("train loss", train, "test loss", test)
assert train[1] < train[0] and test[1] < test[0], (train, test)
assert test[-1] < 0.03, test
PY
}

# ---- issue 19: what ae-train tells a user --------------------------------------------------

@test "ae-train: SIGTERM and Ctrl-C print one line: where it stopped, the checkpoint, --resume" {
  for sig in TERM INT; do
    rm -f "$TMP/m.h5"
    "$BIN/ae-train" -q --device cpu --data "$AE_DIR/data.h5" --train-limit 24 --epochs 100000 --batch-size 8 \
      --encoder-channels 4,2 --threads 2 -o "$TMP/m.h5" 2>"$TMP/err" &
    pid=$!
    # Wait (bounded, however loaded the machine) for the first checkpoint.
    for _ in $(seq 1 1200); do [ -e "$TMP/m.h5" ] && break; sleep 0.05; done
    [ -e "$TMP/m.h5" ]
    kill -$sig "$pid"
    code=0
    wait "$pid" || code=$?
    [ "$(grep -c . "$TMP/err")" -eq 1 ] || { cat "$TMP/err"; return 1; }
    if [ "$sig" = TERM ]; then  # a scheduler's stop: the step ends, a checkpoint is saved, exit 75
      [ "$code" -eq 75 ]
      grep -Eq "^ae-train: interrupted by SIGTERM in epoch [0-9]+ of 100000 \(0 of 22 images trained\); checkpoint in $TMP/m.h5; rerun the same command with --resume to continue$" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    else  # Ctrl-C: stop now, the last epoch's checkpoint stays
      [ "$code" -gt 128 ]
      grep -Eq "^ae-train: stopped after epoch [0-9]+ of 100000; checkpoint in $TMP/m.h5; rerun with --resume to continue$" "$TMP/err" ||
        { cat "$TMP/err"; return 1; }
    fi
    [ -z "$(ls -A "$TMP" | grep -F '.tmp-' || true)" ]
  done
}

@test "ae-train: says where it wrote the model, that --epochs 0 is untrained, what a rerun does" {
  opts=(--device cpu --data "$AE_DIR/data.h5" --train-limit 24 --batch-size 8 --encoder-channels 4,2 --threads 2)
  run "$BIN/ae-train" "${opts[@]}" --epochs 0 -o "$TMP/u.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"--epochs 0: wrote $TMP/u.h5 with the untrained initial weights"* ]]
  run "$BIN/ae-train" "${opts[@]}" --epochs 1 -o "$TMP/m.h5"
  [ "$status" -eq 0 ]
  [[ "$(printf '%s\n' "$output" | tail -1)" == "ae-train: wrote $TMP/m.h5: 1 epochs, train loss "* ]]
  # A checkpoint of an unfinished run (1 of 3 epochs) without --resume: replaced, and said so.
  "$PYTHON" -c "import h5py,sys; h5py.File(sys.argv[1],'r+').attrs['epochs_target']=3" "$TMP/m.h5"
  cp "$TMP/m.h5" "$TMP/partial.h5"
  run "$BIN/ae-train" "${opts[@]}" --epochs 1 -o "$TMP/m.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$TMP/m.h5 holds an unfinished run (1 of 3 epochs); without --resume it is replaced by a new run from scratch"* ]]
  # --resume with another --lr: the checkpoint's schedule continues, and that is said.
  run "$BIN/ae-train" "${opts[@]}" --epochs 2 --resume --lr 0.05 -o "$TMP/partial.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"--lr 0.05 is not applied: the resumed run started at lr 0.0003 and continues its schedule at 0.0003"* ]]
}

@test "ae-train: CLI messages in the toolkit's words (bad integer, misspelt option, ranges in --help)" {
  run "$BIN/ae-train" --data "$AE_DIR/data.h5" --epochs abc -o "$TMP/m.h5"
  assert_error 2 "^ae-train: usage error: --epochs: 'abc' is not an integer \(see --help\)$"
  run "$BIN/ae-train" --data "$AE_DIR/data.h5" --epoch 3 -o "$TMP/m.h5"
  assert_error 2 "unknown option --epoch \(did you mean --epochs\?\)"
  run "$BIN/ae-train" --help
  [[ "$output" == *"--momentum FLOAT in [0, 1] (default 0)"* ]]
  [[ "$output" != *"FLOAT:FLOAT"* ]]
  [ ! -e "$TMP/m.h5" ]
}
