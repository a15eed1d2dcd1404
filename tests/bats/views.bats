#!/usr/bin/env bats
# View sets: ae-encode --shifts K (and --flip) encodes shifted copies of every image; svm-fit
# --augment flip,shift:K trains on every view with an image's views in one fold; svm-eval
# --tta averages the views' decision values. CPU runs (the GPU encoder gets the same host-made
# pixels).

load helpers

setup_file() {
  export VIEWS_DIR
  VIEWS_DIR="$(mktemp -d "${BATS_TMPDIR:-/tmp}/views.XXXXXX")"
  make_dataset "$VIEWS_DIR/data.h5" 96 40
  "$BIN/ae-train" --device cpu --quiet --data "$VIEWS_DIR/data.h5" --epochs 1 --batch-size 16 --seed 3 --threads 2 \
    --encoder-channels 16,8 -o "$VIEWS_DIR/model.h5"
  "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$VIEWS_DIR/model.h5" --data "$VIEWS_DIR/data.h5" \
    --shifts 2 --flip --batch-size 32 -o "$VIEWS_DIR/views.h5"
}

teardown_file() {
  rm -rf "$VIEWS_DIR"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/views-test.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# A plain features file whose /<split>/features are the given views of views.h5 stacked in
# order (labels repeated): what a fit without --augment sees as the same rows.
stacked() {
  "$PYTHON" - "$VIEWS_DIR/views.h5" "$1" "$2" <<'PY'
import sys, h5py, numpy as np
src, out, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
with h5py.File(src, "r") as f, h5py.File(out, "w") as g:
    for split in ("train", "test"):
        g[f"/{split}/features"] = np.concatenate([f[f"/{split}/{n}"][...] for n in names])
        g[f"/{split}/labels"] = np.tile(f[f"/{split}/labels"][...], len(names))
    g.attrs["class_names"] = f.attrs["class_names"]
PY
}

@test "ae-encode --shifts 2 --flip: six views, each equal to the encoding of the images shifted (edge copied) and mirrored by numpy" {
  "$PYTHON" - "$VIEWS_DIR/data.h5" "$TMP" <<'PY'
import shutil, sys, h5py, numpy as np
src, tmp = sys.argv[1], sys.argv[2]
# shift 1 = (dy, dx) (0, +2), shift 2 = (0, -2): pixel (y, x) from (y, x - dx), clamped.
for name, dx, mirrored in (("shift1", 2, False), ("shift2_flip", -2, True)):
    shutil.copy(src, f"{tmp}/{name}.h5")
    with h5py.File(f"{tmp}/{name}.h5", "r+") as f:
        for split in ("train", "test"):
            images = f[f"/{split}/images"][...]
            w = images.shape[3]
            moved = images[:, :, :, np.clip(np.arange(w) - dx, 0, w - 1)]
            f[f"/{split}/images"][...] = moved[:, :, :, ::-1] if mirrored else moved
            f[f"/{split}/images"].attrs.pop("crc32", None)  # an edited dataset's checksum no longer holds
PY
  for name in shift1 shift2_flip; do
    "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$VIEWS_DIR/model.h5" --data "$TMP/$name.h5" -o "$TMP/$name.f.h5"
  done
  "$BIN/ae-encode" --device cpu --threads 2 --quiet --model "$VIEWS_DIR/model.h5" --data "$VIEWS_DIR/data.h5" --flip \
    -o "$TMP/flip.h5"
  "$PYTHON" - "$VIEWS_DIR/views.h5" "$TMP" <<'PY'
import sys, itertools, h5py, numpy as np
f, tmp = h5py.File(sys.argv[1], "r"), sys.argv[2]
assert f.attrs["views"] == "flip,shift:2" and f.attrs["flip"] == 1, dict(f.attrs)
names = ["features", "features_flip", "features_shift1", "features_shift1_flip", "features_shift2", "features_shift2_flip"]
flip = h5py.File(f"{tmp}/flip.h5", "r")
assert flip.attrs["views"] == "flip"
for split, n in (("train", 96), ("test", 40)):
    assert sorted(f[split].keys()) == sorted(names + ["labels"]), list(f[split].keys())
    views = {name: f[f"/{split}/{name}"][...] for name in names}
    for name, x in views.items():
        assert x.shape == (n, 512) and x.dtype == np.float16, (name, x.shape, x.dtype)
        assert np.abs(x).max() > 0
    for a, b in itertools.combinations(names, 2):
        assert not np.array_equal(views[a], views[b]), (split, a, b)
    # The image and its mirror as --flip alone writes them; the shifted views as numpy's shifts.
    assert np.array_equal(views["features"], flip[f"/{split}/features"][...])
    assert np.array_equal(views["features_flip"], flip[f"/{split}/features_flip"][...])
    for name in ("shift1", "shift2_flip"):
        want = h5py.File(f"{tmp}/{name}.f.h5", "r")[f"/{split}/features"][...]
        assert np.array_equal(views[f"features_{name}"], want), (split, name)
PY
}

@test "ae-encode --ranks 2 --shifts 1 --flip writes the one-process features bit for bit" {
  local args=(--device cpu --model "$VIEWS_DIR/model.h5" --data "$VIEWS_DIR/data.h5" --shifts 1 --flip --batch-size 16)
  "$BIN/ae-encode" -q "${args[@]}" --threads 1 -o "$TMP/one.h5"
  run "$BIN/ae-encode" "${args[@]}" --ranks 2 -o "$TMP/two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  "$PYTHON" - "$TMP/one.h5" "$TMP/two.h5" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert a.attrs["views"] == b.attrs["views"] == "flip,shift:1"
for split in ("train", "test"):
    assert sorted(a[split].keys()) == sorted(b[split].keys()) and len(a[split].keys()) == 5
    for name in a[split].keys():
        assert np.array_equal(a[f"/{split}/{name}"][...], b[f"/{split}/{name}"][...]), (split, name)
PY
}

@test "svm-fit --augment flip,shift:1 fits the four views in order; the model records it; --augment flip is the stacked fit" {
  run "$BIN/svm-fit" --json --device cpu --features "$VIEWS_DIR/views.h5" --augment shift:1,flip -o "$TMP/svm.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"384 training rows (images + mirrors + 1 shifted copy and their mirrors) x 512 features"* ]]
  [[ "$output" == *'"augment":"flip,shift:1"'* ]]
  stacked "$TMP/stacked.h5" features,features_flip,features_shift1,features_shift1_flip
  "$BIN/svm-fit" -q --device cpu --features "$TMP/stacked.h5" -o "$TMP/stacked_svm.h5"
  "$BIN/svm-fit" -q --device cpu --features "$VIEWS_DIR/views.h5" --augment flip -o "$TMP/flip_svm.h5"
  stacked "$TMP/stacked_flip.h5" features,features_flip
  "$BIN/svm-fit" -q --device cpu --features "$TMP/stacked_flip.h5" -o "$TMP/stacked_flip_svm.h5"
  "$PYTHON" - "$TMP" <<'PY'
import sys, h5py, numpy as np
tmp = sys.argv[1]
def same_svm(a, b):
    assert sorted(a["svm"].keys()) == sorted(b["svm"].keys())
    for name in a["svm"].keys():
        assert np.array_equal(a[f"svm/{name}"][...], b[f"svm/{name}"][...]), name
    for name in ("n_train", "gamma", "C"):
        assert a.attrs[name] == b.attrs[name], name
m, s = h5py.File(f"{tmp}/svm.h5", "r"), h5py.File(f"{tmp}/stacked_svm.h5", "r")
assert m.attrs["augment"] == "flip,shift:1" and m.attrs["n_train"] == 4 * 96
same_svm(m, s)  # the views' rows in the documented order, nothing else changed
fl, sf = h5py.File(f"{tmp}/flip_svm.h5", "r"), h5py.File(f"{tmp}/stacked_flip_svm.h5", "r")
assert fl.attrs["augment"] == "flip" and fl.attrs["n_train"] == 2 * 96
same_svm(fl, sf)
assert m["svm/support_indices"][...].max() >= 2 * 96  # shifted rows are support vectors too
PY
}

@test "svm-fit --augment shift:2 --cv 3: folds over images, an image's three views in one fold" {
  run "$BIN/svm-fit" --device cpu --features "$VIEWS_DIR/views.h5" --augment shift:2 --cv 3 --C 1,10 -o "$TMP/svm.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"288 training rows (images + 2 shifted copies)"* ]]
  "$PYTHON" - "$TMP/svm.h5" <<'PY'
import sys, h5py, numpy as np
m = h5py.File(sys.argv[1], "r")
assert m.attrs["augment"] == "shift:2" and m.attrs["n_train"] == 288
fold = m["model_selection/image_fold"][...]
assert fold.shape == (96,), fold.shape  # one fold per image, for all three of its views
assert sorted(set(fold.tolist())) == [0, 1, 2] and np.bincount(fold).min() >= 30
assert m["model_selection/cv_accuracy"].shape == (2, 1)
PY
}

@test "svm-eval --tta flip,shift:2 averages the six views' decision values; any tta the file has, whatever the fit's augment" {
  "$BIN/svm-fit" -q --device cpu --features "$VIEWS_DIR/views.h5" --augment flip -o "$TMP/svm.h5"
  run "$BIN/svm-eval" --json --device cpu --decision-values --model "$TMP/svm.h5" --features "$VIEWS_DIR/views.h5" \
    --tta shift:2,flip -o "$TMP/tta.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"test split of $VIEWS_DIR/views.h5 (tta flip,shift:2)"* ]]
  [[ "$output" == *'"tta":"flip,shift:2"'* ]]
  local name
  for name in features features_flip features_shift1 features_shift1_flip features_shift2 features_shift2_flip; do
    stacked "$TMP/$name.h5" "$name"
    "$BIN/svm-eval" -q --device cpu --decision-values --model "$TMP/svm.h5" --features "$TMP/$name.h5" \
      -o "$TMP/$name.eval.h5"
  done
  "$PYTHON" - "$TMP" <<'PY'
import sys, h5py, numpy as np
tmp = sys.argv[1]
names = ["features", "features_flip", "features_shift1", "features_shift1_flip", "features_shift2", "features_shift2_flip"]
per_view = np.stack([h5py.File(f"{tmp}/{n}.eval.h5", "r")["decision_values"][...] for n in names])
tta = h5py.File(f"{tmp}/tta.h5", "r")
assert tta.attrs["tta"] == "flip,shift:2"
dec = tta["decision_values"][...]
assert dec.shape == per_view.shape[1:] == (40, 45), dec.shape
# Kernel values in float32: the TTA batch holds 6N rows, so the sgemm's blocks differ from
# each view's alone (~4e-6 here); the views themselves differ by far more.
np.testing.assert_allclose(dec, per_view.mean(axis=0), rtol=0, atol=2e-5)
for v in range(1, 6):
    assert np.abs(per_view[v] - per_view[0]).max() > 1e-2, v
PY
}

@test "view-set usage errors: one line, exit 2 (bad spec) or 1 (a view the file lacks), no output" {
  local spec
  for spec in shift:0 shift:-1 shift:9 rotate flip,flip "flip,"; do
    run "$BIN/svm-fit" --device cpu --features "$VIEWS_DIR/views.h5" --augment "$spec" -o "$TMP/svm.h5"
    assert_error 2 "--augment"
    assert_no_output "$TMP/svm.h5"
    run "$BIN/svm-eval" --device cpu --model "$TMP/none.h5" --features "$VIEWS_DIR/views.h5" --tta "$spec" -o "$TMP/e.h5"
    assert_error 2 "--tta"
    assert_no_output "$TMP/e.h5"
  done
  run "$BIN/ae-encode" --device cpu --model "$VIEWS_DIR/model.h5" --data "$VIEWS_DIR/data.h5" --shifts 9 -o "$TMP/f.h5"
  assert_error 2 "--shifts: 9 is not in \[0, 8\]"
  assert_no_output "$TMP/f.h5"
  run "$BIN/ae-encode" --device cpu --model "$VIEWS_DIR/model.h5" --data "$VIEWS_DIR/data.h5" --shifts -1 -o "$TMP/f.h5"
  assert_error 2 "--shifts"
  assert_no_output "$TMP/f.h5"
  # More shifts than the file has.
  run "$BIN/svm-fit" --device cpu --features "$VIEWS_DIR/views.h5" --augment flip,shift:3 -o "$TMP/svm.h5"
  assert_error 1 "views.h5: /train/features_shift3 is missing: --augment flip,shift:3 needs the features of the shifted images \(run ae-encode --shifts 3\)"
  assert_no_output "$TMP/svm.h5"
  "$BIN/svm-fit" -q --device cpu --features "$VIEWS_DIR/views.h5" -o "$TMP/svm.h5"
  run "$BIN/svm-eval" --device cpu --model "$TMP/svm.h5" --features "$VIEWS_DIR/views.h5" --tta shift:4 -o "$TMP/e.h5"
  assert_error 1 "/test/features_shift3 is missing: --tta shift:4 needs"
  assert_no_output "$TMP/e.h5"
  # A model file whose augment is not a view set, or whose rows are not whole views.
  cp "$TMP/svm.h5" "$TMP/bad.h5"
  "$PYTHON" -c 'import h5py, sys; h5py.File(sys.argv[1], "r+").attrs["augment"] = "shift:4"' "$TMP/bad.h5"
  run "$BIN/svm-eval" --device cpu --model "$TMP/bad.h5" --features "$VIEWS_DIR/views.h5" -o "$TMP/e.h5"
  assert_error 1 "bad.h5: augment 'shift:4' needs n_train a multiple of its 5 views"
  "$PYTHON" -c 'import h5py, sys; h5py.File(sys.argv[1], "r+").attrs["augment"] = "mirror"' "$TMP/bad.h5"
  run "$BIN/svm-eval" --device cpu --model "$TMP/bad.h5" --features "$VIEWS_DIR/views.h5" -o "$TMP/e.h5"
  assert_error 1 "bad.h5: attribute augment: unknown view 'mirror'"
  assert_no_output "$TMP/e.h5"
}

@test "svm-eval --ranks 2 --tta flip,shift:1 writes the one-process evaluation" {
  "$BIN/svm-fit" -q --device cpu --features "$VIEWS_DIR/views.h5" --augment shift:1 -o "$TMP/svm.h5"
  local args=(--device cpu --model "$TMP/svm.h5" --features "$VIEWS_DIR/views.h5" --tta flip,shift:1 --decision-values)
  "$BIN/svm-eval" -q "${args[@]}" -o "$TMP/one.h5"
  run "$BIN/svm-eval" "${args[@]}" --ranks 2 -o "$TMP/two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  "$PYTHON" - "$TMP/one.h5" "$TMP/two.h5" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert a.attrs["tta"] == b.attrs["tta"] == "flip,shift:1"
assert np.array_equal(a["predictions"][...], b["predictions"][...])
np.testing.assert_allclose(a["decision_values"][...], b["decision_values"][...], rtol=0, atol=1e-5)
assert np.abs(a["decision_values"][...]).max() > 0.01
PY
}

@test "make pipeline VIEWS=...: the view set reaches ae-encode, svm-fit --augment and svm-eval --tta; PRESET=accurate's is flip,shift:4 on CIFAR-10, flip elsewhere" {
  flags_of() {  # the encode, fit and eval stages' recorded flags under make -n with "$@"
    make -s -n -C "$REPO_ROOT" pipeline PREBUILT=1 BIN="$BIN" CIFAR10_DIR="$TMP/none" DATA_DIR="$TMP/d" RUN_DIR="$TMP/r" "$@" |
      grep -oE "'flags=[^']*' > $TMP/r/\.params/(encode|fit|eval)-" | sed -E "s/^'flags= ?//; s/' > .*\/(encode|fit|eval)-$/ [\1]/"
  }
  run flags_of VIEWS=flip,shift:2
  [ "$status" -eq 0 ]
  echo "$output"
  [ "$(sed -n 1p <<<"$output")" = "--flip --shifts 2 [encode]" ]
  [ "$(sed -n 2p <<<"$output")" = "--augment flip,shift:2 [fit]" ]
  [ "$(sed -n 3p <<<"$output")" = "--tta flip,shift:2 [eval]" ]
  run flags_of VIEWS=shift:3 EVAL_FLAGS=--decision-values
  echo "$output"
  [ "$(sed -n 1p <<<"$output")" = "--shifts 3 [encode]" ]
  [ "$(sed -n 3p <<<"$output")" = "--decision-values --tta shift:3 [eval]" ]
  run flags_of PRESET=accurate
  echo "$output"
  [ "$(sed -n 1p <<<"$output")" = "--flip --shifts 4 [encode]" ]
  [ "$(sed -n 2p <<<"$output")" = "--C 10 --augment flip,shift:4 [fit]" ]
  [ "$(sed -n 3p <<<"$output")" = "--tta flip,shift:4 [eval]" ]
  run flags_of PRESET=accurate VIEWS=none
  echo "$output"
  [ "$(sed -n 1p <<<"$output")" = " [encode]" ] || [ "$(sed -n 1p <<<"$output")" = "[encode]" ]
  [ "$(sed -n 2p <<<"$output")" = "--C 10 [fit]" ]
  run flags_of PRESET=accurate DATASET=fashion-mnist FASHION_MNIST_DIR="$TMP/none"
  echo "$output"
  [ "$(sed -n 1p <<<"$output")" = "--flip [encode]" ]
  [ "$(sed -n 2p <<<"$output")" = "--cv 5 --C 3,10 --augment flip [fit]" ]
}
