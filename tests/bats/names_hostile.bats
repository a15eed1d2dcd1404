#!/usr/bin/env bats
# Class names and option values from outside (common/class_names.h): an option that names
# no class, NaN and infinities given to floating options, names with a NUL byte, duplicate
# names (also a Latin-1 folder beside its UTF-8 twin, a repeated line of a CIFAR-100 label
# file), a label whose value would size the class table, names with control characters in
# svm-eval's table, and a Latin-1 folder name through every tool to valid JSON.

load helpers

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/names.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# plain OUT [NAMES_JSON] [FIXED]: a plain features file of 4 separable classes (60 train,
# 40 test rows, labels 0..3); NAMES_JSON (a JSON list of strings, \u00XX for raw bytes) as
# the class_names attribute, variable-length UTF-8 strings, or fixed-length null-padded
# byte strings with FIXED=fixed (how h5py writes a numpy 'S' array).
plain() {
  "$PYTHON" - "$@" <<'PY'
import json, sys, h5py, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
centres = rng.normal(0, 3, (4, 6))
with h5py.File(out, "w") as f:
    for split, n in (("train", 60), ("test", 40)):
        y = np.arange(n) % 4
        f[f"/{split}/features"] = (centres[y] + rng.normal(0, 0.3, (n, 6))).astype(np.float32)
        f[f"/{split}/labels"] = y.astype(np.int64)
    if len(sys.argv) > 2:
        names = [n.encode("latin-1") for n in json.loads(sys.argv[2])]
        if len(sys.argv) > 3 and sys.argv[3] == "fixed":
            f.attrs["class_names"] = np.array(names, dtype=f"S{max(len(n) for n in names) + 2}")
        else:
            f.attrs.create("class_names", [n.decode("utf-8", "surrogateescape") for n in names],
                           dtype=h5py.string_dtype("utf-8"))
PY
}

@test "svm-fit --class-weight: a label or name that is no class is refused, naming it and the classes" {
  plain "$TMP/p.h5" '["north", "east", "south", "west"]'
  for spec in 7:2 emu:2 east:2,4:1; do
    run "$BIN/svm-fit" --features "$TMP/p.h5" --class-weight "$spec" --device cpu -o "$TMP/svm.h5"
    assert_error 2 "--class-weight '$spec': '(7|emu|4)' is no class name or label of the data \(classes: 0 north, 1 east, 2 south, 3 west\)"
    assert_no_output "$TMP/svm.h5"
  done
  run "$BIN/svm-fit" -q --features "$TMP/p.h5" --class-weight east:2,3:0.5 --device cpu -o "$TMP/svm.h5"
  [ "$status" -eq 0 ]
}

@test "NaN and infinities given to floating options are refused, not read as 'not given'" {
  plain "$TMP/p.h5"
  run "$BIN/svm-fit" --features "$TMP/p.h5" --kind one-class --nu nan --device cpu -o "$TMP/oc.h5"
  assert_error 2 "--nu: 'nan' is not a finite number"
  assert_no_output "$TMP/oc.h5"
  run "$BIN/svm-fit" --features "$TMP/p.h5" --nu NaN --device cpu -o "$TMP/oc.h5"
  assert_error 2 "--nu: 'NaN' is not a finite number"
  run "$BIN/svm-fit" --features "$TMP/p.h5" --tol inf --device cpu -o "$TMP/oc.h5"
  assert_error 2 "--tol: 'inf' is not a finite number"
  make_dataset "$TMP/d.h5" 40 20
  for option in --momentum --lr-plateau-factor --weight-decay --grad-clip --lr; do
    for value in nan inf; do
      run "$BIN/ae-train" --data "$TMP/d.h5" --epochs 1 --device cpu "$option" "$value" -o "$TMP/m.h5"
      assert_error 2 "usage error: $option: '$value' is not a finite number"
      assert_no_output "$TMP/m.h5"
    done
  done
}

@test "class names that differ only after a NUL byte are refused, not made one name" {
  plain "$TMP/p.h5" '["a\u0000b", "a\u0000c", "south", "west"]' fixed
  run "$BIN/svm-fit" --features "$TMP/p.h5" --device cpu -o "$TMP/svm.h5"
  assert_error 1 "p.h5: class 0 \(\"'a.x00b'\"\): a class name may not hold a NUL byte"
  assert_no_output "$TMP/svm.h5"
}

@test "duplicate class names are refused naming the file and both; an empty name too" {
  plain "$TMP/p.h5" '["cat", "dog", "cat", "owl"]'
  run "$BIN/svm-fit" --features "$TMP/p.h5" --device cpu -o "$TMP/svm.h5"
  assert_error 1 "p.h5: class 0 \('cat'\) and class 2 \('cat'\) are one class name \(class names must be distinct\)"
  assert_no_output "$TMP/svm.h5"
  plain "$TMP/e.h5" '["cat", "", "dog", "owl"]' fixed
  run "$BIN/svm-fit" --features "$TMP/e.h5" --device cpu -o "$TMP/svm.h5"
  assert_error 1 "e.h5: class 1 has an empty name"
}

@test "cifar-convert: a Latin-1 folder name beside its UTF-8 twin is refused naming both" {
  make_image_folder "$TMP/f" '"caf\u00e9"' '"caf\u00c3\u00a9"'
  run "$BIN/cifar-convert" --input "$TMP/f" -o "$TMP/d.h5"
  assert_error 1 "f/train: class 0 \('café'\) and class 1 \(\"'caf.xE9'\"\) are one class name, the same name once bytes that are not UTF-8 are read as Latin-1"
  assert_no_output "$TMP/d.h5"
}

@test "a plain file whose one label is 2^31-1 is refused naming the label, not sized by it" {
  "$PYTHON" - "$TMP/big.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["/train/features"] = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    f["/train/labels"] = np.array([0, 1, 0, 1, 0, 1, 0, 2**31 - 1], dtype=np.int64)
PY
  run timeout 60 "$BIN/svm-fit" --features "$TMP/big.h5" --device cpu -o "$TMP/svm.h5"
  assert_error 1 "big.h5: /train/labels holds 2147483647: without a class_names attribute the classes are 0..the largest label, at most 65536 of them \(give class_names\)"
  assert_no_output "$TMP/svm.h5"
}

@test "svm-eval's per-class table escapes control characters in class names; --json stays valid" {
  plain "$TMP/p.h5" '["new\nline", "esc\u001b[2Jx", "tab\tbed", "plain"]'
  "$BIN/svm-fit" -q --features "$TMP/p.h5" --device cpu -o "$TMP/svm.h5"
  run "$BIN/svm-eval" --model "$TMP/svm.h5" --features "$TMP/p.h5" --device cpu -o "$TMP/e.h5" --json
  [ "$status" -eq 0 ]
  [[ "$output" != *$'\033'* ]]
  # The table: a header, the columns' names, one line per class: none split by a name.
  printf '%s\n' "$output" | grep -q '^new\\nline  '
  printf '%s\n' "$output" | grep -q '^esc\\x1B\[2Jx  '
  [ "$(printf '%s\n' "$output" | grep -c '^line')" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/e.json"
  "$PYTHON" -c 'import json,sys; d = json.loads(open(sys.argv[1]).read()); assert d["class_names"] == ["new\nline", "esc\x1b[2Jx", "tab\tbed", "plain"], d["class_names"]' "$TMP/e.json"
}

@test "a Latin-1 folder name: cifar-convert, ae-train, ae-encode, svm-fit, svm-eval --json and classify --json hold it as UTF-8" {
  make_image_folder "$TMP/f" '"caf\u00e9"' '"dog"' '"\u00e7a\u00ff"'
  "$BIN/cifar-convert" -q --input "$TMP/f" -o "$TMP/d.h5"
  "$BIN/ae-train" -q --data "$TMP/d.h5" --epochs 1 --batch-size 6 --encoder-channels 4,4 --val-split 0 --device cpu \
    -o "$TMP/m.h5"
  "$BIN/ae-encode" -q --model "$TMP/m.h5" --data "$TMP/d.h5" --device cpu -o "$TMP/feat.h5"
  "$BIN/svm-fit" -q --features "$TMP/feat.h5" --class-weight "caf$(printf '\351'):2" --device cpu -o "$TMP/svm.h5"
  run "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/feat.h5" --device cpu -o "$TMP/e.h5" --json
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > "$TMP/eval.json"
  run "$BIN/classify" --model "$TMP/m.h5" --svm "$TMP/svm.h5" --device cpu --json --top 3 "$TMP"/f/test/dog/img0.png
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/classify.json"
  "$PYTHON" - "$TMP" <<'PY'
import json, sys, h5py
tmp = sys.argv[1]
want = ["café", "dog", "çaÿ"]
# json.loads of the bytes decoded strictly: a byte that is not UTF-8 fails here.
ev = json.loads(open(f"{tmp}/eval.json", "rb").read().decode("utf-8"))
assert sorted(ev["class_names"]) == sorted(want), ev["class_names"]
verdict = json.loads(open(f"{tmp}/classify.json", "rb").read().decode("utf-8"))
assert {s["class"] for s in verdict["scores"]} == set(want), verdict
for path in ("d.h5", "feat.h5", "svm.h5", "e.h5"):
    with h5py.File(f"{tmp}/{path}", "r") as f:
        names = [n.decode("utf-8") if isinstance(n, bytes) else n for n in f.attrs["class_names"]]
        assert sorted(names) == sorted(want), (path, names)
        assert h5py.check_string_dtype(f.attrs.get_id("class_names").dtype).encoding == "utf-8", path
with h5py.File(f"{tmp}/svm.h5", "r") as f:  # the weight given by the Latin-1 name is café's
    assert list(f["/svm/class_weight"][:]) == [2.0, 1.0, 1.0], f["/svm/class_weight"][:]
PY
}

@test "cifar-convert: CIFAR-100 label files with a Latin-1 name are read as UTF-8, a repeated name is refused" {
  "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" cifar100 "$TMP/c" --train 40 --test 20
  local names="$TMP/c/cifar-100-binary/coarse_label_names.txt"
  "$PYTHON" - "$names" <<'PY'
import sys
path = sys.argv[1]
lines = open(path, "rb").read().split(b"\n")
lines[0] = b"caf\xe9"
open(path, "wb").write(b"\n".join(lines))
PY
  "$BIN/cifar-convert" -q --input "$TMP/c/cifar-100-binary" --labels coarse -o "$TMP/ok.h5"
  "$PYTHON" -c 'import sys, h5py; n = h5py.File(sys.argv[1], "r").attrs["class_names"]; assert n[0] == "café", n[:3]' "$TMP/ok.h5"
  "$PYTHON" - "$names" <<'PY'
import sys
path = sys.argv[1]
lines = open(path, "rb").read().split(b"\n")
lines[3] = lines[1]
open(path, "wb").write(b"\n".join(lines))
PY
  run "$BIN/cifar-convert" --input "$TMP/c/cifar-100-binary" --labels coarse -o "$TMP/bad.h5"
  assert_error 1 "cifar-100-binary: class 1 \('[^']+'\) and class 3 \('[^']+'\) are one class name \(class names must be distinct\)"
  assert_no_output "$TMP/bad.h5"
}
