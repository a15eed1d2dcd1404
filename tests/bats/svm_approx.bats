#!/usr/bin/env bats
# svm-fit --approx nystroem:M (issue 63): the options and what they refuse, the model file
# (kind nystroem, /approx) through svm-eval and classify on either device, and hostile values
# in it.

load helpers

setup_file() {
  export AX_DIR="$BATS_FILE_TMPDIR/svm_approx"
  mkdir -p "$AX_DIR"
  # 4 classes as Gaussian clouds in 12 features (one of them constant: dropped), 800 training
  # and 300 test rows, as libsvm text.
  "$PYTHON" - "$AX_DIR" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(5)
centres = rng.normal(0, 1.0, (4, 12))
def rows(n):
    y = rng.integers(0, 4, n)
    X = centres[y] + rng.normal(0, 0.9, (n, 12))
    X[:, 11] = 2.0
    return X, y
def write(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(str(label) + " " + " ".join(f"{i + 1}:{v:.6g}" for i, v in enumerate(row)) + "\n")
write(d + "/train.libsvm", *rows(800))
write(d + "/test.libsvm", *rows(300))
PY
  "$BIN/svm-fit" -q --features "$AX_DIR/train.libsvm" --approx nystroem:150 --approx-seed 4 --device cpu \
    -o "$AX_DIR/ny.h5" --json > "$AX_DIR/fit.json"
  "$BIN/svm-fit" -q --features "$AX_DIR/train.libsvm" --device cpu -o "$AX_DIR/exact.h5"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/svm_approx.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

@test "svm-fit --approx nystroem:M writes kind nystroem: /approx with its shapes, no support vectors" {
  run "$PYTHON" - "$AX_DIR/ny.h5" "$AX_DIR/fit.json" <<'PY'
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
j = json.load(open(sys.argv[2]))
assert f.attrs["kind"] == "nystroem", f.attrs["kind"]
a = f["approx"]
M, r = int(a.attrs["M"]), int(a.attrs["rank"])
assert M == 150 and j["landmarks"] == 150 and j["rank"] == r and j["kind"] == "nystroem", (M, r, j)
assert int(a.attrs["seed"]) == 4 and j["approx_seed"] == 4
assert 1 <= r <= M
assert a["landmarks"].shape == (150, 11), a["landmarks"].shape  # the constant feature dropped
assert a["projection"].shape == (150, r) and a["weights"].shape == (4, r) and a["bias"].shape == (4,)
idx = a["landmark_indices"][()]
assert len(idx) == 150 and np.all(np.diff(idx) > 0) and idx[0] >= 0 and idx[-1] < 800
assert a.attrs["gamma"] == f.attrs["gamma"]
assert "support_vectors" not in f["svm"] and "dual_coef" not in f["svm"]
assert np.all(np.isfinite(a["weights"][()]))
PY
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

@test "svm-eval predicts with a nystroem model on the CPU: accuracy near the exact model's; pair layout" {
  run "$BIN/svm-eval" -q --model "$AX_DIR/ny.h5" --test "$AX_DIR/test.libsvm" --decision-values --json \
    --device cpu -o "$TMP/ny_eval.h5"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  echo "$output" > "$TMP/ny.json"
  run "$BIN/svm-eval" -q --model "$AX_DIR/exact.h5" --test "$AX_DIR/test.libsvm" --json -o "$TMP/ex_eval.h5"
  [ "$status" -eq 0 ]
  echo "$output" > "$TMP/ex.json"
  run "$PYTHON" - "$TMP/ny.json" "$TMP/ex.json" "$TMP/ny_eval.h5" <<'PY'
import sys, json, h5py, numpy as np
ny, ex = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert ny["accuracy"] > 0.8 and abs(ny["accuracy"] - ex["accuracy"]) < 0.05, (ny["accuracy"], ex["accuracy"])
assert ny["device"] == "cpu"
f = h5py.File(sys.argv[3], "r")
dec, pred = f["decision_values"][()], f["predictions"][()]
assert dec.shape == (300, 6), dec.shape  # k(k-1)/2 pairs of 4 classes
votes = np.zeros((300, 4), int)
q = 0
for a in range(4):
    for b in range(a + 1, 4):
        votes[np.arange(300), np.where(dec[:, q] > 0, a, b)] += 1
        q += 1
assert np.array_equal(np.argmax(votes, axis=1), pred)  # ties to the smaller class, as argmax
PY
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

@test "svm-fit --approx with --cv, --probability and --class-weight: the search, the sigmoids, the weights" {
  run "$BIN/svm-fit" -q --features "$AX_DIR/train.libsvm" --approx nystroem:80 --cv 3 --C 1,10 --probability \
    --class-weight balanced -o "$TMP/cv.h5" --json
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  run "$BIN/svm-eval" -q --model "$TMP/cv.h5" --test "$AX_DIR/test.libsvm" -o "$TMP/cv_eval.h5" --json
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  run "$PYTHON" - "$TMP/cv.h5" "$TMP/cv_eval.h5" <<'PY'
import sys, h5py, numpy as np
m, e = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert m.attrs["kind"] == "nystroem" and m["model_selection/cv_accuracy"].shape == (2, 1)
assert m["svm/probA"].shape == (6,) and m["svm/class_weight"].shape == (4,)
p = e["probabilities"][()]
assert p.shape == (300, 4) and np.allclose(p.sum(axis=1), 1, atol=1e-9), p.shape
assert np.isfinite(e.attrs["log_loss"])
PY
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

@test "classify --features with a nystroem model: the votes of svm-eval's predictions" {
  run "$BIN/classify" --svm "$AX_DIR/ny.h5" --features "$AX_DIR/test.libsvm" --json --top 1
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  printf '%s\n' "$output" | grep '^{' > "$TMP/rows.json"
  "$BIN/svm-eval" -q --model "$AX_DIR/ny.h5" --test "$AX_DIR/test.libsvm" -o "$TMP/e.h5"
  run "$PYTHON" - "$TMP/rows.json" "$TMP/e.h5" <<'PY'
import sys, json, h5py
rows = [json.loads(l) for l in open(sys.argv[1])]
pred = h5py.File(sys.argv[2], "r")["predictions"][()]
assert len(rows) == 300 and [r["label"] for r in rows] == pred.tolist()
PY
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

@test "a nystroem model on the GPU: svm-fit, svm-eval and classify --device gpu give the CPU's model and predictions" {
  if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    skip "no GPU: the GPU side of the Nystrom features"
  fi
  run "$BIN/svm-fit" -q --features "$AX_DIR/train.libsvm" --approx nystroem:150 --approx-seed 4 --device gpu \
    -o "$TMP/gpu.h5"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  run "$BIN/svm-fit" -q --features "$AX_DIR/train.libsvm" --approx nystroem:80 --cv 3 --C 1,10 --device gpu \
    -o "$TMP/cv.h5"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  for d in cpu gpu; do
    for m in "$TMP/gpu.h5" "$AX_DIR/ny.h5"; do
      run "$BIN/svm-eval" -q --model "$m" --test "$AX_DIR/test.libsvm" --decision-values --device "$d" \
        -o "$TMP/$(basename "$m" .h5)-$d.h5"
      [ "$status" -eq 0 ] || { echo "$m on $d: $output"; return 1; }
    done
  done
  run "$BIN/classify" --svm "$TMP/gpu.h5" --features "$AX_DIR/test.libsvm" --json --top 1 --device gpu
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  printf '%s\n' "$output" | grep '^{' > "$TMP/rows.json"
  run "$PYTHON" - "$TMP" "$AX_DIR/ny.h5" <<'PY'
import sys, json, h5py, numpy as np
t = sys.argv[1]
g, c = h5py.File(t + "/gpu.h5", "r"), h5py.File(sys.argv[2], "r")
assert g.attrs["kind"] == "nystroem" and g.attrs["device"] == "gpu", dict(g.attrs)
assert np.array_equal(g["approx/landmark_indices"][()], c["approx/landmark_indices"][()])
dec = {k: h5py.File(f"{t}/{k}.h5", "r")["decision_values"][()] for k in ("gpu-cpu", "gpu-gpu", "ny-cpu", "ny-gpu")}
scale = np.abs(dec["ny-cpu"]).max()
for k, v in dec.items():  # the GPU's fit and predictions are the CPU's up to rounding
    assert np.abs(v - dec["ny-cpu"]).max() < 1e-6 * scale, (k, np.abs(v - dec["ny-cpu"]).max(), scale)
pred = h5py.File(t + "/gpu-gpu.h5", "r")["predictions"][()]
assert np.mean(pred == h5py.File(t + "/ny-cpu.h5", "r")["predictions"][()]) >= 0.99
rows = [json.loads(l) for l in open(t + "/rows.json")]
assert [r["label"] for r in rows] == pred.tolist()
PY
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

@test "the same seed gives the same model file's numbers; another seed other landmarks" {
  "$BIN/svm-fit" -q --features "$AX_DIR/train.libsvm" --approx nystroem:150 --approx-seed 4 -o "$TMP/again.h5"
  "$BIN/svm-fit" -q --features "$AX_DIR/train.libsvm" --approx nystroem:150 --approx-seed 5 -o "$TMP/other.h5"
  run "$PYTHON" - "$AX_DIR/ny.h5" "$TMP/again.h5" "$TMP/other.h5" <<'PY'
import sys, h5py, numpy as np
a, b, c = (h5py.File(p, "r")["approx"] for p in sys.argv[1:])
for name in ("landmark_indices", "landmarks", "projection", "weights", "bias"):
    assert np.array_equal(a[name][()], b[name][()]), name
assert not np.array_equal(a["landmark_indices"][()], c["landmark_indices"][()])
PY
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

@test "svm-fit --approx: bad specs and what it does not fit are usage errors (exit 2, one line)" {
  local f=(--features "$AX_DIR/train.libsvm" -o "$TMP/m.h5")
  for spec in nystroem:0 nystroem:30001 nystroem:-3 nystroem:+3 nystroem:3x nystroem: nystroem rff:10 "nystroem: 5"; do
    run "$BIN/svm-fit" "${f[@]}" --approx "$spec"
    [ "$status" -eq 2 ] && [ "$output" == "svm-fit: usage error: --approx '$spec': expected nystroem:M with M landmarks from 1 to 30000" ] || {
      echo "--approx '$spec': exit $status: $output"; return 1; }
  done
  run "$BIN/svm-fit" "${f[@]}" --approx-seed 3
  assert_error 2 "^svm-fit: usage error: --approx-seed is for --approx nystroem:M$"
  run "$BIN/svm-fit" "${f[@]}" --approx nystroem:10 --approx-seed -1
  [ "$status" -eq 2 ]
  run "$BIN/svm-fit" "${f[@]}" --approx nystroem:801
  assert_error 2 "^svm-fit: usage error: .*train.libsvm: --approx nystroem:801 needs at most the 800 training rows as landmarks$"
  run "$BIN/svm-fit" "${f[@]}" --approx nystroem:10 --kind one-class
  assert_error 2 "^svm-fit: usage error: --approx nystroem does not fit --kind one-class$"
  run "$BIN/svm-fit" "${f[@]}" --approx nystroem:10 --kernel linear
  assert_error 2 "^svm-fit: usage error: --approx nystroem approximates the rbf kernel; --kernel linear has nothing to approximate$"
  run "$BIN/svm-fit" "${f[@]}" --approx nystroem:10 --export-libsvm "$TMP/m.model"
  assert_error 2 "^svm-fit: usage error: --export-libsvm: a nystroem model \(--approx\) is not a libsvm model$"
  run "$BIN/svm-fit" "${f[@]}" --approx nystroem:10 --ranks 2
  assert_error 2 "^svm-fit: usage error: --approx nystroem fits in one process \(no --ranks or --gpus\)$"
  assert_no_output "$TMP/m.h5"
  assert_no_output "$TMP/m.model"
}

@test "svm-fit --approx refuses M whose M^2 doubles do not fit, with the amount, before reading" {
  [ -z "${SANITIZER_LOG_DIR:-}" ] || skip "AddressSanitizer cannot run under ulimit -v (it reserves terabytes of shadow memory)"
  run bash -c "ulimit -v 3000000; exec '$BIN/svm-fit' --features '$AX_DIR/train.libsvm' --approx nystroem:30000 -o '$TMP/m.h5'"
  assert_error 2 "^svm-fit: usage error: --approx nystroem:30000 needs 20.1 GiB for the landmarks' kernel matrix and its eigendecomposition \(3 M\^2 doubles\), more than what ulimit -v \(RLIMIT_AS\) leaves this process \([0-9.]+ GiB\)$"
  assert_no_output "$TMP/m.h5"
}

@test "a nystroem model: a group is refused by svm-eval; --help says it is not a libsvm model" {
  run "$BIN/svm-eval" --model "$AX_DIR/ny.h5" --test "$AX_DIR/test.libsvm" --ranks 2 -o "$TMP/e.h5"
  assert_error 2 "^svm-eval: usage error: .*ny.h5 is a nystroem model \(svm-fit --approx\): it predicts in one process \(no --ranks, --gpus or group place\)$"
  assert_no_output "$TMP/e.h5"
  run "$BIN/svm-fit" --help
  [[ "$output" == *"nystroem) is not a libsvm model"* ]]
  run "$BIN/svm-eval" --help
  [[ "$output" == *"a nystroem model, which is not a libsvm model"* ]]
}

@test "hostile values in a nystroem model: svm-eval refuses the file in one line (exit 1)" {
  for edit in m_negative m_beyond rank_zero projection_nan weights_inf bias_shape landmarks_width gamma_nan \
              indices_outside no_weights sv_too; do
    cp "$AX_DIR/ny.h5" "$TMP/bad.h5"
    "$PYTHON" - "$TMP/bad.h5" "$edit" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r+")
a, edit = f["approx"], sys.argv[2]
def replace(name, value):
    del f[name]
    f[name] = value
if edit == "m_negative": a.attrs["M"] = np.int64(-150)
elif edit == "m_beyond": a.attrs["M"] = np.int64(30001)
elif edit == "rank_zero": a.attrs["rank"] = np.int64(0)
elif edit == "projection_nan":
    p = a["projection"][()]; p[3, 2] = np.nan; replace("approx/projection", p)
elif edit == "weights_inf":
    w = a["weights"][()]; w[0, 0] = np.inf; replace("approx/weights", w)
elif edit == "bias_shape": replace("approx/bias", np.zeros(5))
elif edit == "landmarks_width": replace("approx/landmarks", np.zeros((150, 12), np.float32))
elif edit == "gamma_nan": a.attrs["gamma"] = np.nan
elif edit == "indices_outside":
    i = a["landmark_indices"][()]; i[-1] = 10 ** 9; replace("approx/landmark_indices", i)
elif edit == "no_weights": del f["approx/weights"]
elif edit == "sv_too": f["svm/support_vectors"] = np.zeros((1, 11), np.float32)
PY
    run "$BIN/svm-eval" --model "$TMP/bad.h5" --test "$AX_DIR/test.libsvm" -o "$TMP/e.h5"
    assert_error 1 "^svm-eval: error: $TMP/bad.h5: " || { echo "edit $edit"; return 1; }
    assert_no_output "$TMP/e.h5"
  done
}

@test "report reads a nystroem model: its landmarks where an SVM's support vectors are; --info lists /approx" {
  "$BIN/svm-eval" -q --model "$AX_DIR/ny.h5" --test "$AX_DIR/test.libsvm" -o "$TMP/e.h5"
  run "$BIN/report" -q --svm "$AX_DIR/ny.h5" --eval "$TMP/e.h5" -o "$TMP/rep"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  grep -q "Nyström landmarks" "$TMP/rep/index.html"
  grep -q "Nyström features of 150 landmarks" "$TMP/rep/index.html"
  run "$BIN/report" --info "$AX_DIR/ny.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"/approx/projection"* && "$output" == *"nystroem"* ]]
}
