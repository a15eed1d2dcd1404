#!/usr/bin/env bats
# Open stages (docs/FORMATS.md): plain features written with h5py through svm-fit and
# svm-eval, libsvm's text data and models both ways against Debian's libsvm-tools
# (svm-train, svm-predict, svm-scale), and svm-eval's metrics against scikit-learn.

load helpers

CHECK="$REPO_ROOT/tests/python/formats_check.py"

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/formats.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

need_libsvm_tools() {
  command -v svm-train >/dev/null && command -v svm-predict >/dev/null && command -v svm-scale >/dev/null ||
    skip "libsvm-tools (svm-train, svm-predict, svm-scale) not installed"
}

@test "plain float64 features from h5py: svm-fit and svm-eval, class names kept, no encoder check" {
  "$PYTHON" "$CHECK" make-plain "$TMP/plain.h5" --names
  run "$BIN/svm-fit" --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  [ "$status" -eq 0 ]
  run "$BIN/svm-eval" --model "$TMP/svm.h5" --features "$TMP/plain.h5" -o "$TMP/eval.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *"plain features file: no encoder hash, so no encoder check"* ]]
  "$PYTHON" - "$TMP/eval.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs["class_names"]]
assert names == ["north", "east", "south", "west"], names
assert f.attrs["accuracy"] > 0.8, f.attrs["accuracy"]
assert f["/labels"].shape == (200,)
PY
}

@test "plain float32 features without class_names: classes 0..max label" {
  "$PYTHON" "$CHECK" make-plain "$TMP/plain.h5" --dtype float32
  "$BIN/svm-fit" -q --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  run "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/plain.h5" -o "$TMP/eval.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"class_names":["0","1","2","3"]'* ]]
  [[ "$output" == *'"macro_f1":'* ]]
}

@test "svm-eval's metrics equal scikit-learn's classification_report, balanced accuracy, top-k, log-loss" {
  "$PYTHON" "$CHECK" make-plain "$TMP/plain.h5" --seed 3 --noise 3  # overlapping: mistakes in every class
  "$BIN/svm-fit" -q --probability --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/plain.h5" -o "$TMP/eval.h5"
  run "$PYTHON" "$CHECK" check-metrics --eval "$TMP/eval.h5"
  [ "$status" -ne 77 ] || skip "scikit-learn is not importable"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "a plain file with a float dataset as labels is refused in one line" {
  "$PYTHON" -c "
import h5py, numpy as np
with h5py.File('$TMP/bad.h5', 'w') as f:
    f['/train/features'] = np.ones((4, 3))
    f['/train/labels'] = np.array([0.0, 1.0, 0.0, 1.0])
"
  run "$BIN/svm-fit" --features "$TMP/bad.h5" -o "$TMP/svm.h5"
  assert_error 1 "bad.h5: /train/labels has dtype float64, expected an integer type"
  assert_no_output "$TMP/svm.h5"
}

@test "libsvm text: svm-eval with an svm-train model agrees with svm-predict; same support vectors" {
  need_libsvm_tools
  "$PYTHON" "$CHECK" make-libsvm "$TMP/train.libsvm" "$TMP/test.libsvm"
  svm-train -q -c 4 -g 0.003 "$TMP/train.libsvm" "$TMP/model.libsvm"
  svm-predict -q "$TMP/test.libsvm" "$TMP/model.libsvm" "$TMP/predicted" >/dev/null
  run "$BIN/svm-eval" --model "$TMP/model.libsvm" --features "$TMP/test.libsvm" -o "$TMP/eval.h5" --json
  [ "$status" -eq 0 ]
  total_sv=$(awk '/^total_sv/ {print $2}' "$TMP/model.libsvm")
  [ "$total_sv" -lt 400 ]  # of 600 rows: a model, not every row
  [[ "$output" == *"\"n_sv\":$total_sv,"* ]]
  [[ "$output" == *'"class_names":["-1","3","7"]'* ]]
  "$PYTHON" "$CHECK" compare-predictions --eval "$TMP/eval.h5" --libsvm-out "$TMP/predicted"
}

@test "on the GPU: svm-eval of an svm-train model agrees with svm-predict and the CPU (skips without one)" {
  need_libsvm_tools
  nvidia-smi -L >/dev/null 2>&1 || skip "no GPU"
  "$PYTHON" "$CHECK" make-libsvm "$TMP/train.libsvm" "$TMP/test.libsvm"
  svm-train -q -c 4 -g 0.003 "$TMP/train.libsvm" "$TMP/model.libsvm"
  svm-predict -q "$TMP/test.libsvm" "$TMP/model.libsvm" "$TMP/predicted" >/dev/null
  for d in gpu cpu; do
    "$BIN/svm-eval" -q --device "$d" --model "$TMP/model.libsvm" --features "$TMP/test.libsvm" -o "$TMP/$d.h5"
  done
  "$PYTHON" "$CHECK" compare-predictions --eval "$TMP/gpu.h5" --libsvm-out "$TMP/predicted"
  "$PYTHON" - "$TMP/gpu.h5" "$TMP/cpu.h5" <<'PY'
import h5py, numpy as np, sys
g, c = (h5py.File(p, "r") for p in sys.argv[1:3])
assert (g["predictions"][...] == c["predictions"][...]).all()
assert g.attrs["accuracy"] == c.attrs["accuracy"] and g.attrs["device"] != c.attrs["device"]
PY
}

@test "libsvm text with svm-scale: svm-eval --libsvm-range on raw rows agrees with svm-scale + svm-predict" {
  need_libsvm_tools
  "$PYTHON" "$CHECK" make-libsvm "$TMP/train.libsvm" "$TMP/test.libsvm" --seed 4
  svm-scale -l -1 -u 1 -s "$TMP/range" "$TMP/train.libsvm" >"$TMP/train.scaled" 2>/dev/null
  svm-scale -r "$TMP/range" "$TMP/test.libsvm" >"$TMP/test.scaled" 2>/dev/null
  svm-train -q -c 10 -g 0.2 "$TMP/train.scaled" "$TMP/model.libsvm"
  svm-predict -q "$TMP/test.scaled" "$TMP/model.libsvm" "$TMP/predicted" >/dev/null
  "$BIN/svm-eval" -q --model "$TMP/model.libsvm" --libsvm-range "$TMP/range" --test "$TMP/test.libsvm" \
    -o "$TMP/eval.h5"
  "$PYTHON" "$CHECK" compare-predictions --eval "$TMP/eval.h5" --libsvm-out "$TMP/predicted"
}

@test "the toolkit's fit of libsvm data and svm-train's: same support vectors, same predictions" {
  need_libsvm_tools
  "$PYTHON" "$CHECK" make-libsvm "$TMP/train.libsvm" "$TMP/test.libsvm" --seed 5
  svm-train -q -c 3 -g 0.003 -e 0.00001 "$TMP/train.libsvm" "$TMP/model.libsvm"
  svm-predict -q "$TMP/test.libsvm" "$TMP/model.libsvm" "$TMP/predicted" >/dev/null
  # svm-fit reads libsvm text once the lead wires svm::read_libsvm_data into it; until then
  # the same rows as a plain file.
  if "$BIN/svm-fit" -q --features "$TMP/train.libsvm" --scale none --C 3 --gamma 0.003 --tol 0.00001 \
      -o "$TMP/svm.h5" 2>/dev/null; then :; else
    "$PYTHON" "$CHECK" libsvm-to-plain "$TMP/train.libsvm" "$TMP/train.h5" --classes=-1,3,7
    "$BIN/svm-fit" -q --features "$TMP/train.h5" --scale none --C 3 --gamma 0.003 --tol 0.00001 -o "$TMP/svm.h5"
  fi
  run "$BIN/svm-eval" --model "$TMP/svm.h5" --features "$TMP/test.libsvm" -o "$TMP/eval.h5" --json
  [ "$status" -eq 0 ]
  total_sv=$(awk '/^total_sv/ {print $2}' "$TMP/model.libsvm")
  [ "$total_sv" -lt 400 ]  # of 600 rows: a model, not every row
  [[ "$output" == *"\"n_sv\":$total_sv,"* ]]
  "$PYTHON" "$CHECK" compare-predictions --eval "$TMP/eval.h5" --libsvm-out "$TMP/predicted"
}

@test "malformed libsvm text is refused in one line naming the file and line, no output" {
  printf '1 1:0.5 2:1\n3 2:1 1:4\n' >"$TMP/bad.libsvm"
  "$PYTHON" "$CHECK" make-plain "$TMP/plain.h5"
  "$BIN/svm-fit" -q --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  run "$BIN/svm-eval" --model "$TMP/svm.h5" --features "$TMP/bad.libsvm" -o "$TMP/eval.h5"
  assert_error 1 "bad.libsvm: line 2: index 1 after 2 \(indices must ascend\)"
  assert_no_output "$TMP/eval.h5"
}

@test "svm-eval --libsvm-range with an svm-fit model is a usage error" {
  "$PYTHON" "$CHECK" make-plain "$TMP/plain.h5"
  "$BIN/svm-fit" -q --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  printf 'x\n-1 1\n1 0 1\n' >"$TMP/range"
  run "$BIN/svm-eval" --model "$TMP/svm.h5" --libsvm-range "$TMP/range" --features "$TMP/plain.h5" -o "$TMP/eval.h5"
  assert_error 2 "--libsvm-range"
  assert_no_output "$TMP/eval.h5"
}
