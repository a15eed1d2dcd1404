#!/usr/bin/env bats
# svm-fit / svm-eval (issue 4): parity with scikit-learn's SVC and libsvm's svm-predict,
# file layouts, bad inputs.

load helpers

PARITY="$REPO_ROOT/tests/python/sklearn_parity.py"

setup_file() {
  export SVM_DIR="$BATS_FILE_TMPDIR/svm"
  mkdir -p "$SVM_DIR"
  # 2,000 train / 1,000 test rows, 512 features, 10 overlapping classes (~55 % accuracy,
  # ~90 % of the rows become support vectors: many free ones, a hard parity case).
  "$PYTHON" "$PARITY" make-features "$SVM_DIR/features.h5" --train 2000 --test 1000 --dim 512 --noise 1.5 --seed 11
  "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" -o "$SVM_DIR/svm.h5" --export-libsvm "$SVM_DIR/model.libsvm"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/svm.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# features.h5 variants for bad-input tests: python code that edits arrays xtr, ytr, xte, yte
# (and may set `drop` to a list of datasets to leave out) before they are written to $1.
features_variant() {
  local out="$1" edit="$2"
  "$PYTHON" - "$SVM_DIR/features.h5" "$out" "$edit" <<'PY'
import sys, h5py, numpy as np
src, out, edit = sys.argv[1:4]
f = h5py.File(src, "r")
xtr, ytr, xte, yte = (f[k][()] for k in ("/train/features", "/train/labels", "/test/features", "/test/labels"))
drop = []
exec(edit)
with h5py.File(out, "w") as g:
    for k, v in (("/train/features", xtr), ("/train/labels", ytr), ("/test/features", xte), ("/test/labels", yte)):
        if k not in drop:
            g[k] = v
    for k, v in f.attrs.items():
        g.attrs[k] = v
PY
}

@test "svm-fit + svm-eval match scikit-learn SVC: gamma, support vectors, predictions, accuracy" {
  run "$BIN/svm-eval" --model "$SVM_DIR/svm.h5" --features "$SVM_DIR/features.h5" -o "$TMP/eval.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"accuracy"* && "$output" == *"airplane"* && "$output" == *"truck"* ]]
  run "$PYTHON" "$PARITY" check --features "$SVM_DIR/features.h5" --model "$SVM_DIR/svm.h5" --eval "$TMP/eval.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"failures": []'* ]]
}

@test "libsvm's svm-predict gives the same predictions from the exported model" {
  "$BIN/svm-eval" -q --model "$SVM_DIR/svm.h5" --features "$SVM_DIR/features.h5" -o "$TMP/eval.h5" \
    --export-libsvm-data "$TMP/test.libsvm"
  [ "$(wc -l < "$TMP/test.libsvm")" -eq 1000 ]
  head -3 "$SVM_DIR/model.libsvm" | grep -q '^svm_type c_svc$'
  svm-predict "$TMP/test.libsvm" "$SVM_DIR/model.libsvm" "$TMP/predicted.txt" > "$TMP/svm-predict.log"
  # Kernel values in double (libsvm) and float (ours) may flip a decision value within ~1e-6 of 0.
  run "$PYTHON" "$PARITY" compare-predictions --eval "$TMP/eval.h5" --libsvm-out "$TMP/predicted.txt" --min-agreement 0.999
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "svm.h5 follows docs/FORMATS.md" {
  "$PYTHON" - "$SVM_DIR/svm.h5" <<'PY'
import json, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
a = f.attrs
assert a["format"] == "svm-model" and a["format_version"] == 1
assert a["created_by"].startswith("svm-fit ") and a["created_at"].endswith("Z")
assert len(json.loads(a["inputs"])[0]["sha256"]) == 64
assert json.loads(a["params"])["C"] == "10"
D, k = 512, 10
assert a["kernel"] == "rbf" and a["C"] == 10 and a["tol"] == 1e-3 and a["gamma_spec"] == "scale"
assert a["n_train"] == 2000 and a["n_features"] == D and a["device"] == "cpu" and a["fit_seconds"] > 0
assert list(a["class_names"])[0] == "airplane"
mask = f["svm/feature_mask"][()]
assert mask.dtype == np.uint8 and mask.shape == (D,) and set(np.unique(mask)) == {0, 1}
kept = int(mask.sum())
assert a["n_features_kept"] == kept and kept < D          # the generator makes constant features
assert f["svm/dropped_values"].shape == (D - kept,) and f["svm/dropped_values"].dtype == np.float32
assert (f["svm/dropped_values"][()] == 0).all()              # standardised: constants become exactly 0
for name in ("scaler/mean", "scaler/scale"):
    assert f[name].dtype == np.float64 and f[name].shape == (D,)
assert (f["scaler/scale"][()] > 0).all()
ns = f["svm/n_support"][()]
assert ns.dtype == np.int32 and ns.shape == (k,)
n_sv = int(ns.sum())
assert f["svm/support_vectors"].shape == (n_sv, kept) and f["svm/support_vectors"].dtype == np.float32
assert f["svm/dual_coef"].shape == (k - 1, n_sv) and f["svm/dual_coef"].dtype == np.float64
assert f["svm/rho"].shape == (k * (k - 1) // 2,) and f["svm/rho"].dtype == np.float64
assert list(f["svm/classes"][()]) == list(range(10)) and f["svm/classes"].dtype == np.int32
idx = f["svm/support_indices"][()]
assert idx.dtype == np.int64 and idx.shape == (n_sv,) and len(set(idx)) == n_sv and idx.max() < 2000
assert (np.abs(f["svm/dual_coef"][()]) <= 10 + 1e-9).all()   # 0 <= alpha <= C
# Support vectors grouped by class, each the scaled, masked training row.
src = h5py.File(sys.argv[1].replace("svm.h5", "features.h5"), "r")
labels = src["train/labels"][()][idx]
assert (np.diff(labels.astype(int)) >= 0).all()
x = src["train/features"][()][idx]
xs = ((x - f["scaler/mean"][()]).astype(np.float32) / f["scaler/scale"][()]).astype(np.float32)
assert np.array_equal(xs[:, mask == 1], f["svm/support_vectors"][()])
PY
}

@test "svm-eval writes eval.h5 per FORMATS.md, --decision-values and --json" {
  run "$BIN/svm-eval" -q --json --decision-values --model "$SVM_DIR/svm.h5" --features "$SVM_DIR/features.h5" -o "$TMP/eval.h5"
  [ "$status" -eq 0 ]
  "$PYTHON" - "$TMP/eval.h5" "$output" <<'PY'
import json, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
j = json.loads(sys.argv[2])
a = f.attrs
assert a["format"] == "svm-eval" and a["split"] == "test" and a["device"] == "cpu" and a["seconds"] > 0
assert len(json.loads(a["inputs"])) == 2
p, y, c = f["predictions"][()], f["labels"][()], f["confusion"][()]
assert p.dtype == np.int32 and y.dtype == np.int32 and p.shape == y.shape == (1000,)
assert c.dtype == np.int64 and c.shape == (10, 10) and c.sum() == 1000
assert np.array_equal(np.diag(c), [np.sum((y == k) & (p == k)) for k in range(10)])
assert abs(a["accuracy"] - np.mean(p == y)) < 1e-12 and 0.4 < a["accuracy"] < 0.8
pc = a["per_class_accuracy"]
assert pc.shape == (10,) and np.allclose(pc, np.diag(c) / c.sum(axis=1))
d = f["decision_values"][()]
assert d.shape == (1000, 45) and d.dtype == np.float64
# The votes of the decision values are the predictions (ties to the smaller class).
pairs = [(i, j) for i in range(10) for j in range(i + 1, 10)]
votes = np.zeros((1000, 10), int)
for q, (i, jj) in enumerate(pairs):
    votes[d[:, q] > 0, i] += 1
    votes[d[:, q] <= 0, jj] += 1
assert np.array_equal(votes.argmax(axis=1), p)
assert j["n"] == 1000 and abs(j["accuracy"] - a["accuracy"]) < 1e-12 and np.array_equal(j["confusion"], c)
assert j["class_names"][9] == "truck"
PY
}

@test "svm-fit: --train-limit larger than the training split uses all rows, with a warning" {
  run "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" --train-limit 999999 --gamma auto --C 1 -o "$TMP/svm.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"warning: --train-limit 999999 is larger than the 2000 training rows"*"using all 2000"* ]]
  "$PYTHON" -c "import h5py,sys; a=h5py.File(sys.argv[1],'r').attrs; assert a['n_train']==2000 and abs(a['gamma']-1/512)<1e-15" "$TMP/svm.h5"
}

@test "svm-fit: --train-limit, linear kernel and a fixed gamma are honoured" {
  "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" --train-limit 300 --kernel linear --C 0.5 -o "$TMP/lin.h5"
  "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" --train-limit 300 --gamma 0.01 --scale none -o "$TMP/g.h5"
  "$PYTHON" - "$TMP/lin.h5" "$TMP/g.h5" <<'PY'
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
assert (b["scaler/mean"][()] == 0).all() and (b["scaler/scale"][()] == 1).all()
assert 0.75 in b["svm/dropped_values"][()]  # unscaled: the generator's constant non-zero feature
assert a.attrs["kernel"] == "linear" and a.attrs["n_train"] == 300 and a.attrs["C"] == 0.5
assert b.attrs["gamma"] == 0.01 and b.attrs["gamma_spec"] == "0.01"
assert b["svm/support_indices"][()].max() < 300
PY
  run "$BIN/svm-eval" -q --model "$TMP/lin.h5" --features "$SVM_DIR/features.h5" -o "$TMP/e.h5"
  [ "$status" -eq 0 ]
}

@test "svm-fit: a pair beyond --cache-mb is solved by working sets, silently, to the dense fit's predictions; the default's MB are recorded" {
  # Two classes of ~1,000 rows: each fold's pair matrix (~1,333 rows, 7 MB) and the refit's
  # (16 MB) exceed 1 MB.
  features_variant "$TMP/two.h5" "ytr = ytr % 2; yte = yte % 2"
  run "$BIN/svm-fit" --device cpu --features "$TMP/two.h5" --cv 3 --cache-mb 1 -o "$TMP/rows.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" != *"warning: svm"* ]]
  [[ "$output" == *"(0 with the whole kernel matrix in memory, 1 by working sets within --cache-mb)"* ]]
  run "$BIN/svm-fit" --device cpu --features "$TMP/two.h5" -o "$TMP/dense.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"(1 with the whole kernel matrix in memory, 0 by working sets within --cache-mb)"* ]]
  run "$BIN/svm-eval" -q --device cpu --model "$TMP/rows.h5" --features "$TMP/two.h5" -o "$TMP/rows-eval.h5"
  [ "$status" -eq 0 ]
  run "$BIN/svm-eval" -q --device cpu --model "$TMP/dense.h5" --features "$TMP/two.h5" -o "$TMP/dense-eval.h5"
  [ "$status" -eq 0 ]
  "$PYTHON" - "$TMP/rows-eval.h5" "$TMP/dense-eval.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["predictions"][()] for p in sys.argv[1:3])
assert (a == b).mean() >= 0.99, (a == b).mean()
PY
  # Not given, --cache-mb is half the memory left after the rows: a number in the params,
  # at least 64 MB.
  "$PYTHON" - "$TMP/dense.h5" "$TMP/rows.h5" <<'PY'
import json, sys, h5py
dense, rows = (json.loads(h5py.File(p, "r").attrs["params"]) for p in sys.argv[1:3])
assert dense["cache-mb"].isdigit() and int(dense["cache-mb"]) >= 64, dense
assert rows["cache-mb"] == "1", rows
PY
}

@test "svm-fit --cache-mb bounds the kernel values on either device, as --help says; on a GPU a matrix beyond it goes to working sets, to the same predictions" {
  run "$BIN/svm-fit" --help
  [ "$status" -eq 0 ]
  [[ "$(tr -s ' \n' '  ' <<<"$output")" == *"--cache-mb"*"GPU: what the device has free)"*"Memory for kernel values, MB, on either device"* ]]
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    skip "no GPU: the GPU half of this case"
  fi
  features_variant "$TMP/two.h5" "ytr = ytr % 2; yte = yte % 2"
  run "$BIN/svm-fit" --device gpu --features "$TMP/two.h5" --cache-mb 1 -o "$TMP/rows.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"svm (gpu, working sets:"* ]]
  run "$BIN/svm-fit" --device gpu --features "$TMP/two.h5" -o "$TMP/whole.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"svm (gpu, whole-matrix)"* ]]
  for m in rows whole; do
    run "$BIN/svm-eval" -q --device gpu --model "$TMP/$m.h5" --features "$TMP/two.h5" -o "$TMP/$m-eval.h5"
    [ "$status" -eq 0 ]
  done
  "$PYTHON" - "$TMP/rows-eval.h5" "$TMP/whole-eval.h5" <<'PY'
import sys, h5py
a, b = (h5py.File(p, "r")["predictions"][()] for p in sys.argv[1:3])
assert (a == b).mean() >= 0.99, (a == b).mean()
PY
}

@test "bad input: features file without labels" {
  features_variant "$TMP/nolabels.h5" 'drop = ["/train/labels", "/test/labels"]'
  run "$BIN/svm-fit" --features "$TMP/nolabels.h5" -o "$TMP/svm.h5"
  assert_error 1 "nolabels.h5: /train/labels is missing"
  assert_no_output "$TMP/svm.h5"
  run "$BIN/svm-eval" --model "$SVM_DIR/svm.h5" --features "$TMP/nolabels.h5" -o "$TMP/eval.h5"
  assert_error 1 "nolabels.h5: /test/labels is missing"
  assert_no_output "$TMP/eval.h5"
}

@test "bad input: feature dimension differs between model and features" {
  features_variant "$TMP/narrow.h5" 'xtr = xtr[:, :256]; xte = xte[:, :256]'
  run "$BIN/svm-eval" --model "$SVM_DIR/svm.h5" --features "$TMP/narrow.h5" -o "$TMP/eval.h5"
  assert_error 1 "narrow.h5: /test/features has 256 features per row, but .*svm.h5 was trained on 512"
  assert_no_output "$TMP/eval.h5"
}

@test "bad input: NaN or Inf in features" {
  features_variant "$TMP/nan.h5" 'xtr[7, 3] = np.nan'
  run "$BIN/svm-fit" --features "$TMP/nan.h5" -o "$TMP/svm.h5"
  assert_error 1 "nan.h5: /train/features row 7 feature 3 is NaN"
  assert_no_output "$TMP/svm.h5"
  features_variant "$TMP/inf.h5" 'xte[5, 100] = -np.inf'
  run "$BIN/svm-eval" --model "$SVM_DIR/svm.h5" --features "$TMP/inf.h5" -o "$TMP/eval.h5"
  assert_error 1 "inf.h5: /test/features row 5 feature 100 is infinite"
  assert_no_output "$TMP/eval.h5"
  # float16 rows, which a single fit keeps as stored
  features_variant "$TMP/nan16.h5" 'xtr = xtr.astype(np.float16); xtr[7, 3] = np.nan'
  run "$BIN/svm-fit" --features "$TMP/nan16.h5" -o "$TMP/svm.h5"
  assert_error 1 "nan16.h5: /train/features row 7 feature 3 is NaN"
  features_variant "$TMP/inf16.h5" 'xtr = xtr.astype(np.float16); xtr[9, 500] = np.inf'
  run "$BIN/svm-fit" --features "$TMP/inf16.h5" -o "$TMP/svm.h5"
  assert_error 1 "inf16.h5: /train/features row 9 feature 500 is infinite"
  assert_no_output "$TMP/svm.h5"
}

@test "bad input: a single class" {
  features_variant "$TMP/one.h5" 'ytr[:] = 3'
  run "$BIN/svm-fit" --features "$TMP/one.h5" -o "$TMP/svm.h5"
  assert_error 1 "one.h5: the 2000 training rows hold a single class \(3\)"
  assert_no_output "$TMP/svm.h5"
}

@test "bad input: C <= 0, gamma <= 0 or not a number (usage errors)" {
  for c in 0 -1; do
    run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --C "$c" -o "$TMP/svm.h5"
    assert_error 2 "--C must be a finite number > 0"
  done
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --gamma 0 -o "$TMP/svm.h5"
  assert_error 2 "--gamma must be > 0"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --gamma fast -o "$TMP/svm.h5"
  assert_error 2 "--gamma must be 'scale', 'auto', a multiple of scale such as '0.5x', or a number > 0, not 'fast'"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --gamma -2x -o "$TMP/svm.h5"
  assert_error 2 "--gamma must be > 0, not -2x"
  assert_no_output "$TMP/svm.h5"
}

# Cross-validation and the (C, gamma) grid (issue 15): the table, its argmax refitted.
@test "svm-fit --cv 3 --C 1,10 --gamma scale,auto stores a 2x2 table and refits its argmax" {
  run "$BIN/svm-fit" --json --features "$SVM_DIR/features.h5" --cv 3 --C 1,10 --gamma scale,auto -o "$TMP/grid.h5"
  [ "$status" -eq 0 ]
  local json
  json="$(grep '^{' <<< "$output")"
  [[ "$output" == *"cross-validation: 3 folds (seed 1), 2 C x 2 gamma = 12 fits"* ]]
  [[ "$output" == *"<- best"* && "$output" == *"refitting on all 2000 rows"* ]]
  # The same search again: the same folds, the same table; another seed, other folds.
  "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" --cv 3 --C 1,10 --gamma scale,auto -o "$TMP/again.h5"
  "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" --cv 3 --cv-seed 9 --C 1,10 --gamma scale,auto -o "$TMP/seed9.h5"
  # The best pair as a plain fit: the refit must be exactly this model.
  best="$("$PYTHON" -c "import h5py,sys; a=h5py.File(sys.argv[1],'r').attrs; print(repr(float(a['best_C'])), a['best_gamma'])" "$TMP/grid.h5")"
  read -r best_C best_gamma <<< "$best"
  "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" --C "$best_C" --gamma "$best_gamma" -o "$TMP/plain.h5"
  "$PYTHON" - "$TMP" "$json" <<'PY'
import json, sys, h5py, numpy as np
tmp, j = sys.argv[1], json.loads(sys.argv[2])
f = h5py.File(f"{tmp}/grid.h5", "r")
a, ms = f.attrs, f["model_selection"]
table = ms["cv_accuracy"][()]
assert table.dtype == np.float64 and table.shape == (2, 2), table
assert ms["C"].dtype == np.float64 and list(ms["C"][()]) == [1.0, 10.0]
assert list(ms.attrs["gamma"]) == ["scale", "auto"]
assert ms["fold_accuracy"].shape == (2, 2, 3) and ms["gamma_resolved"].shape == (2, 3)
assert np.all(ms["gamma_resolved"][1] == 1 / 512)                       # auto = 1/D on every fold
assert np.all(ms["gamma_resolved"][0] > 0) and len(set(ms["gamma_resolved"][0])) == 3  # scale: per fold
assert ((0 < table) & (table < 1)).all()
# Pooled over the folds: the fold accuracies weighted by fold size (2000 rows in 3 folds).
assert np.allclose(table, ms["fold_accuracy"][()].mean(axis=2), atol=1e-3)
# The argmax, ties to the first in C-major order, is the model.
i, k = np.unravel_index(np.argmax(table), table.shape)
assert a["best_C"] == ms["C"][i] and a["best_gamma"] == ["scale", "auto"][k], (a["best_C"], a["best_gamma"], table)
assert a["C"] == a["best_C"] and a["gamma_spec"] == a["best_gamma"]
assert a["cv_accuracy"] == table[i, k] and a["cv_folds"] == 3 and a["cv_seed"] == 1
assert j["cv_accuracy"] == table[i, k] and j["best_C"] == a["best_C"] and j["best_gamma"] == a["best_gamma"]
assert j["cv_folds"] == 3 and j["C"] == a["C"] and j["gamma_spec"] == a["gamma_spec"]
plain = h5py.File(f"{tmp}/plain.h5", "r")
assert "model_selection" not in plain and "cv_accuracy" not in plain.attrs
assert plain.attrs["gamma"] == a["gamma"]
for name in ("svm/support_vectors", "svm/dual_coef", "svm/rho", "svm/support_indices", "scaler/mean"):
    assert np.array_equal(f[name][()], plain[name][()]), name
again, seed9 = h5py.File(f"{tmp}/again.h5", "r"), h5py.File(f"{tmp}/seed9.h5", "r")
assert np.array_equal(again["model_selection/fold_accuracy"][()], ms["fold_accuracy"][()])
assert not np.array_equal(seed9["model_selection/fold_accuracy"][()], ms["fold_accuracy"][()])
assert seed9.attrs["cv_seed"] == 9
PY
  # A file with a table is an ordinary model to svm-eval, and report draws the table.
  run "$BIN/svm-eval" -q --model "$TMP/grid.h5" --features "$SVM_DIR/features.h5" -o "$TMP/eval.h5"
  [ "$status" -eq 0 ]
  if [ -x "$BIN/report" ]; then
    "$BIN/report" -q --svm "$TMP/grid.h5" --eval "$TMP/eval.h5" -o "$TMP/report"
    [ -s "$TMP/report/cv_grid.png" ]
    grep -q "3-fold stratified cross-validation of 2 C × 2 γ" "$TMP/report/report.md"
  fi
}

@test "svm-fit --cv alone: one pair cross-validated, gamma as a multiple of scale" {
  run "$BIN/svm-fit" -q --json --features "$SVM_DIR/features.h5" --train-limit 600 --cv 2 --gamma 0.5x -o "$TMP/cv.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"cv_accuracy":0.'* && "$output" == *'"gamma_spec":"0.5x"'* ]]
  "$BIN/svm-fit" -q --features "$SVM_DIR/features.h5" --train-limit 600 -o "$TMP/scale.h5"
  "$PYTHON" - "$TMP/cv.h5" "$TMP/scale.h5" <<'PY'
import sys, h5py, numpy as np
f, s = (h5py.File(p, "r") for p in sys.argv[1:3])
assert f["model_selection/cv_accuracy"].shape == (1, 1) and f.attrs["cv_folds"] == 2
assert f.attrs["cv_accuracy"] == f["model_selection/cv_accuracy"][0, 0]
assert f.attrs["best_gamma"] == "0.5x" and f.attrs["gamma_spec"] == "0.5x" and f.attrs["C"] == 10
assert f.attrs["gamma"] == 0.5 * s.attrs["gamma"]
PY
}

@test "bad input: grid and --cv usage errors" {
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --C 1,10 -o "$TMP/svm.h5"
  assert_error 2 "--C and --gamma take more than one value only with --cv K"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --gamma scale,2x -o "$TMP/svm.h5"
  assert_error 2 "--C and --gamma take more than one value only with --cv K"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --cv 1 -o "$TMP/svm.h5"
  assert_error 2 "--cv must be at least 2 folds, not 1"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --cv 2 --C 1,,10 -o "$TMP/svm.h5"
  assert_error 2 "--C has an empty item in '1,,10'"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --cv 2 --C 1,10,1 -o "$TMP/svm.h5"
  assert_error 2 "--C lists 1 twice"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --cv 2 --gamma scale,0x -o "$TMP/svm.h5"
  assert_error 2 "--gamma must be > 0, not 0x"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --cv 2 --kernel linear --gamma scale,auto -o "$TMP/svm.h5"
  assert_error 2 "--kernel linear has no gamma to search"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --kernel linear --gamma 0.1 -o "$TMP/svm.h5"
  assert_error 2 "--gamma 0.1 has no effect with --kernel linear"
  # Classes missing from the training rows: fitted, with a warning naming them.
  "$PYTHON" - "$SVM_DIR/features.h5" "$TMP/two.h5" <<'PY'
import shutil, sys, h5py, numpy as np
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    y = f["/train/labels"][...]
    f["/train/labels"][...] = (np.arange(len(y)) % 2).astype(y.dtype)  # classes 0 and 1 only
    f["/train/labels"].attrs.pop("crc32", None)  # an edited dataset's checksum no longer holds
PY
  run "$BIN/svm-fit" -q --features "$TMP/two.h5" --train-limit 60 -o "$TMP/svm.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"warning"*"60 training rows hold 2 of the 10 classes (missing: bird, cat, deer, dog, frog, horse, ship, truck)"* ]]
  rm -f "$TMP/svm.h5"
  # More folds than the smallest class has rows: named, with its count.
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --train-limit 40 --cv 3 -o "$TMP/svm.h5"
  [ "$status" -eq 2 ]
  [[ "$output" =~ "--cv 3: class "[0-9]" ("[a-z]+") has only "[0-2]" training rows; every fold needs one of each class, so --cv must be at most "[0-2] ]]
  assert_no_output "$TMP/svm.h5"
}

@test "bad input: wrong file kinds and --device gpu without a GPU" {
  run "$BIN/svm-fit" --features "$TMP/missing.h5" -o "$TMP/svm.h5"
  [ "$status" -eq 1 ]
  # A file of the wrong kind: the message names the tool that writes the expected kind.
  run "$BIN/svm-eval" --model "$SVM_DIR/features.h5" --features "$SVM_DIR/features.h5" -o "$TMP/eval.h5"
  assert_error 1 "features.h5: is an ae-features file, expected svm-model, which svm-fit writes$"
  run "$BIN/svm-fit" --features "$SVM_DIR/svm.h5" -o "$TMP/svm.h5"
  assert_error 1 "svm.h5: is an? svm-model file, expected ae-features, which ae-encode writes$"
  "$PYTHON" -c "import h5py, sys; h5py.File(sys.argv[1], 'w')['x'] = [1.0]" "$TMP/plain.h5"
  run "$BIN/svm-fit" --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  assert_error 1 "plain.h5: is neither an ae-features file \(no 'format' attribute\) nor a plain features file \(no /train/features or /test/features\); docs/FORMATS.md describes both$"
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    run "$BIN/svm-fit" --device gpu --features "$SVM_DIR/features.h5" -o "$TMP/svm.h5"
    [ "$status" -eq 1 ]
    [[ "$output" == *"--device gpu"* ]]
  fi
  assert_no_output "$TMP/svm.h5"
  assert_no_output "$TMP/eval.h5"
}

# Real encoder features (needs ../shared CIFAR-10 and the ae tools): 2,000 training images.
# Also the issue-15 grid on them: a 2x2 table whose argmax is the model.
@test "real features of a small model: parity with scikit-learn; a --cv 3 grid refits its argmax" {
  local cifar
  cifar="$(real_cifar)"
  [ -n "$cifar" ] || skip "no ../shared/cifar-10-batches-bin"
  [ -x "$BIN/ae-train" ] && [ -x "$BIN/ae-encode" ] || skip "ae-train/ae-encode not built"
  "$BIN/cifar-convert" -q --input "$cifar" --train-limit 2000 --test-limit 500 -o "$TMP/cifar.h5"
  "$BIN/ae-train" -q --data "$TMP/cifar.h5" --epochs 1 -o "$TMP/ae.h5"
  "$BIN/ae-encode" -q --model "$TMP/ae.h5" --data "$TMP/cifar.h5" -o "$TMP/features.h5"
  "$BIN/svm-fit" -q --features "$TMP/features.h5" -o "$TMP/svm.h5"
  "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/features.h5" -o "$TMP/eval.h5"
  run "$PYTHON" "$PARITY" check --features "$TMP/features.h5" --model "$TMP/svm.h5" --eval "$TMP/eval.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  "$BIN/svm-fit" -q --features "$TMP/features.h5" --cv 3 --C 1,10 --gamma scale,auto -o "$TMP/grid.h5"
  "$PYTHON" - "$TMP/grid.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
table = f["model_selection/cv_accuracy"][()]
assert table.shape == (2, 2) and ((0.1 < table) & (table < 1)).all(), table
i, k = np.unravel_index(np.argmax(table), table.shape)
assert f.attrs["best_C"] == [1.0, 10.0][i] and f.attrs["best_gamma"] == ["scale", "auto"][k]
assert f.attrs["C"] == f.attrs["best_C"] and f.attrs["gamma_spec"] == f.attrs["best_gamma"]
assert f.attrs["cv_accuracy"] == table[i, k]
PY
}

# Features of any architecture: the width is whatever the encoder wrote (here 96 = 24×2×2),
# and a latent_shape root attribute, when present, must agree with it.
@test "features of another width with latent_shape fit and evaluate; a latent_shape that disagrees is refused" {
  "$PYTHON" - "$SVM_DIR/features.h5" "$TMP" <<'PY'
import sys, h5py, numpy as np
src, tmp = sys.argv[1:3]
f = h5py.File(src, "r")
for name, shape in (("ok", [24, 2, 2]), ("bad", [24, 2, 3])):
    with h5py.File(f"{tmp}/{name}.h5", "w") as g:
        for split in ("train", "test"):
            g[f"/{split}/features"] = f[f"/{split}/features"][:600, :96]
            g[f"/{split}/labels"] = f[f"/{split}/labels"][:600]
        for k, v in f.attrs.items():
            g.attrs[k] = v
        g.attrs["latent_shape"] = np.array(shape, np.int64)
PY
  run "$BIN/svm-fit" -q --features "$TMP/ok.h5" -o "$TMP/svm.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"n_features":96'* ]]
  run "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/ok.h5" -o "$TMP/eval.h5"
  [ "$status" -eq 0 ]
  run "$BIN/svm-fit" --features "$TMP/bad.h5" -o "$TMP/svm2.h5"
  assert_error 1 "bad.h5: /train/features has 96 features per row, but latent_shape \[24,2,3\] holds 144$"
  assert_no_output "$TMP/svm2.h5"
}

# Flip augmentation and test-time augmentation (issue 15, item 4). ae-encode --flip writes
# /SPLIT/features_flip (the mirrored images' features); here they are made by hand from the
# generated features: `with_flips OUT EXPR` writes features.h5 plus features_flip = EXPR of
# the split's features x (numpy), and the root attribute flip = 1.
with_flips() {
  local out="$1" expr="$2"
  "$PYTHON" - "$SVM_DIR/features.h5" "$out" "$expr" <<'PY'
import sys, h5py, numpy as np
src, out, expr = sys.argv[1:4]
rng = np.random.default_rng(5)
with h5py.File(src, "r") as f, h5py.File(out, "w") as g:
    for split in ("train", "test"):
        x = f[f"/{split}/features"][()]
        g[f"/{split}/features"] = x
        g[f"/{split}/labels"] = f[f"/{split}/labels"][()]
        g[f"/{split}/features_flip"] = np.asarray(eval(expr), np.float32)
    for k, v in f.attrs.items():
        g.attrs[k] = v
    g.attrs["flip"] = np.int64(1)
PY
}

@test "svm-fit --augment flip fits the images and their mirrors (2N rows); support indices >= N are mirrors" {
  with_flips "$TMP/flip.h5" 'x[:, ::-1] * 0.8 + rng.normal(0, 0.3, x.shape)'
  run "$BIN/svm-fit" --json --features "$TMP/flip.h5" --train-limit 600 --augment flip -o "$TMP/svm.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"1200 training rows (images + mirrors) x 512 features"* ]]
  local json
  json="$(grep '^{' <<< "$output")"
  "$PYTHON" - "$TMP/svm.h5" "$TMP/flip.h5" "$json" <<'PY'
import json, sys, h5py, numpy as np
f, src, j = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), json.loads(sys.argv[3])
a = f.attrs
assert a["n_train"] == 1200 and a["augment"] == "flip", (a["n_train"], a["augment"])
assert j["n_train"] == 1200 and j["n_images"] == 600 and j["augment"] == "flip"
idx = f["svm/support_indices"][()]
assert idx.max() < 1200 and (idx >= 600).sum() > 50 and (idx < 600).sum() > 50   # both views are support vectors
# Row i < 600 is image i, row i >= 600 the mirror of image i - 600: the support vectors are
# exactly those rows, scaled with the scaler of all 1200 rows and masked.
rows = np.concatenate([src["train/features"][:600], src["train/features_flip"][:600]])
mean = rows.astype(np.float64).mean(axis=0)
assert np.allclose(f["scaler/mean"][()], mean, rtol=1e-6, atol=1e-6)
mask = f["svm/feature_mask"][()] == 1
x = rows[idx]
xs = ((x - f["scaler/mean"][()]).astype(np.float32) / f["scaler/scale"][()]).astype(np.float32)
assert np.array_equal(xs[:, mask], f["svm/support_vectors"][()])
labels = src["train/labels"][:600]
assert np.array_equal(np.concatenate([labels, labels])[idx], np.sort(np.concatenate([labels, labels])[idx]))
PY
  # The plain fit of the same file records augment none and N rows.
  "$BIN/svm-fit" -q --features "$TMP/flip.h5" --train-limit 600 -o "$TMP/plain.h5"
  "$PYTHON" -c "import h5py,sys; a=h5py.File(sys.argv[1],'r').attrs; assert a['n_train']==600 and a['augment']=='none'" "$TMP/plain.h5"
  # Cross-validation over images: each image and its mirror in one fold; scored on the originals.
  run "$BIN/svm-fit" --features "$TMP/flip.h5" --train-limit 600 --augment flip --cv 3 --C 1,10 -o "$TMP/cv.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"refitting on all 1200 rows"* ]]
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); assert f.attrs['n_train']==1200 and f['model_selection/cv_accuracy'].shape==(2,1)" "$TMP/cv.h5"
}

@test "--augment flip / --tta flip without mirrored features: one clear error, no output" {
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --augment flip -o "$TMP/svm.h5"
  assert_error 1 "features.h5: /train/features_flip is missing: --augment flip needs the features of the mirrored images \(run ae-encode --flip\)$"
  assert_no_output "$TMP/svm.h5"
  run "$BIN/svm-eval" --model "$SVM_DIR/svm.h5" --features "$SVM_DIR/features.h5" --tta flip -o "$TMP/eval.h5"
  assert_error 1 "features.h5: /test/features_flip is missing: --tta flip needs the features of the mirrored images \(run ae-encode --flip\)$"
  assert_no_output "$TMP/eval.h5"
  run "$BIN/svm-fit" --features "$SVM_DIR/features.h5" --augment mirror -o "$TMP/svm.h5"
  [ "$status" -eq 2 ]
  run "$BIN/svm-eval" --model "$SVM_DIR/svm.h5" --features "$SVM_DIR/features.h5" --tta yes -o "$TMP/eval.h5"
  [ "$status" -eq 2 ]
}

@test "svm-eval --tta flip averages each row's decision values with its mirror's, then votes" {
  # Mirrors identical to the originals: the average is the value itself, predictions unchanged.
  with_flips "$TMP/same.h5" 'x'
  "$BIN/svm-eval" -q --decision-values --model "$SVM_DIR/svm.h5" --features "$TMP/same.h5" -o "$TMP/plain.h5"
  run "$BIN/svm-eval" --json --decision-values --model "$SVM_DIR/svm.h5" --features "$TMP/same.h5" --tta flip -o "$TMP/tta.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"test split of $TMP/same.h5 (tta flip): accuracy"* && "$output" == *'"tta":"flip"'* ]]
  # Mirrors that differ: the TTA decision values are the mean of the two plain evaluations.
  with_flips "$TMP/other.h5" 'x[:, ::-1] * 0.5 + 0.5 * x + rng.normal(0, 0.5, x.shape)'
  "$PYTHON" - "$TMP/other.h5" "$TMP/mirrors.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f, h5py.File(sys.argv[2], "w") as g:
    for split in ("train", "test"):
        g[f"/{split}/features"] = f[f"/{split}/features_flip"][()]
        g[f"/{split}/labels"] = f[f"/{split}/labels"][()]
    for k, v in f.attrs.items():
        g.attrs[k] = v
PY
  "$BIN/svm-eval" -q --decision-values --model "$SVM_DIR/svm.h5" --features "$TMP/other.h5" -o "$TMP/a.h5"
  "$BIN/svm-eval" -q --decision-values --model "$SVM_DIR/svm.h5" --features "$TMP/mirrors.h5" -o "$TMP/b.h5"
  "$BIN/svm-eval" -q --decision-values --model "$SVM_DIR/svm.h5" --features "$TMP/other.h5" --tta flip --limit 700 \
    -o "$TMP/ab.h5" --export-libsvm-data "$TMP/ab.libsvm"
  "$PYTHON" - "$TMP" <<'PY'
import sys, h5py, numpy as np
t = sys.argv[1]
r = {k: h5py.File(f"{t}/{k}.h5", "r") for k in ("plain", "tta", "a", "b", "ab")}
assert r["tta"].attrs["tta"] == "flip" and r["plain"].attrs["tta"] == "none"
assert np.array_equal(r["tta"]["predictions"][()], r["plain"]["predictions"][()])
# Not bit-equal: a row's float kernel values depend a little on where its block of rows
# starts in the sgemm (the TTA batch holds 2N rows), ~1e-6 here; no vote is that close.
assert np.allclose(r["tta"]["decision_values"][()], r["plain"]["decision_values"][()], rtol=0, atol=1e-5)
assert r["tta"].attrs["accuracy"] == r["plain"].attrs["accuracy"]
mean = (r["a"]["decision_values"][:700] + r["b"]["decision_values"][:700]) / 2
d = r["ab"]["decision_values"][()]
assert d.shape == (700, 45) and np.allclose(d, mean, rtol=0, atol=1e-5)
assert np.array_equal(r["ab"]["labels"][()], r["a"]["labels"][:700])
# The votes of the averaged values are the predictions, and they differ from either view's.
pairs = [(i, j) for i in range(10) for j in range(i + 1, 10)]
votes = np.zeros((700, 10), int)
for q, (i, j) in enumerate(pairs):
    votes[d[:, q] > 0, i] += 1
    votes[d[:, q] <= 0, j] += 1
p = r["ab"]["predictions"][()]
assert np.array_equal(votes.argmax(axis=1), p)
assert (p != r["a"]["predictions"][:700]).any() and (p != r["b"]["predictions"][:700]).any()
PY
  # The libsvm data export holds the originals only (svm-predict has no TTA).
  [ "$(wc -l < "$TMP/ab.libsvm")" -eq 700 ]
}

@test "svm-eval refuses features of another encoder than the SVM's training features, unless --allow-mismatch" {
  # Two copies of the features that say (as ae-encode's provenance does) which model encoded
  # them; the second names another model.
  "$PYTHON" - "$SVM_DIR/features.h5" "$TMP/a.h5" "$TMP/b.h5" <<'PY'
import json, shutil, sys, h5py
for out, model in ((sys.argv[2], "a" * 64), (sys.argv[3], "b" * 64)):
    shutil.copy(sys.argv[1], out)
    with h5py.File(out, "r+") as f:
        f.attrs["created_by"] = "ae-encode 0.1.0 (test)"
        f.attrs["inputs"] = json.dumps([{"name": "model.h5", "sha256": model}, {"name": "data.h5", "sha256": "c" * 64}])
PY
  "$BIN/svm-fit" -q --features "$TMP/a.h5" --train-limit 300 -o "$TMP/svm.h5"
  "$PYTHON" -c "import h5py,sys; assert h5py.File(sys.argv[1])['/'].attrs['encoder_sha256'] == 'a' * 64" "$TMP/svm.h5"
  run "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/a.h5" -o "$TMP/e.h5"
  [ "$status" -eq 0 ]
  run "$BIN/svm-eval" --model "$TMP/svm.h5" --features "$TMP/b.h5" -o "$TMP/e2.h5"
  assert_error 1 "b.h5: was encoded by another model \(sha256 bbbbbbbbbbbb…\) than the one .*svm.h5 was trained on \(aaaaaaaaaaaa…\); encode with that model, or pass --allow-mismatch"
  assert_no_output "$TMP/e2.h5"
  run "$BIN/svm-eval" -q --allow-mismatch --model "$TMP/svm.h5" --features "$TMP/b.h5" -o "$TMP/e2.h5"
  [ "$status" -eq 0 ]
}

# What a terminal shows of OUTPUT: carriage returns and erase-to-end-of-line (the progress
# bar's redraws) applied, one shown line per output line.
terminal_view() {
  "$PYTHON" -c '
import sys
for raw in sys.stdin.buffer.read().decode("utf-8", "replace").split("\n"):
    line, col, i = [], 0, 0
    while i < len(raw):
        if raw[i] == "\r":
            col, i = 0, i + 1
        elif raw.startswith("\x1b[K", i):
            del line[col:]
            i += 3
        else:
            line[col:col + 1] = [raw[i]]
            col, i = col + 1, i + 1
    if line:
        print("".join(line))
'
}

@test "on a terminal, no svm-fit line is glued to a progress bar and no bar is left behind (fit, --cv, --probability)" {
  command -v script >/dev/null || skip "script(1) (util-linux) is not installed"
  # script gives the tool a terminal on stderr, so the bars are drawn.
  for opts in "" "--cv 2 --C 1,10" "--probability"; do
    run script -qec "COLUMNS=80 '$BIN/svm-fit' --features '$SVM_DIR/features.h5' --train-limit 400 $opts -o '$TMP/s.h5'" /dev/null
    [ "$status" -eq 0 ] || { echo "$output"; return 1; }
    [[ "$output" == *"svm-fit ["* ]] || { echo "no bar was drawn: $output"; return 1; }
    shown=$(terminal_view <<<"$output")
    echo "$shown"
    # Every line a terminal keeps is a log line of its own, including the summary at the end.
    ! grep -v '^svm-fit: ' <<<"$shown"
    [[ "$(tail -1 <<<"$shown")" == "svm-fit: wrote $TMP/s.h5: "* ]]
    rm -f "$TMP/s.h5"
  done
}
