#!/usr/bin/env bats
# classify (issue 16): PNGs of 20 CIFAR-10 test images get exactly svm-eval's classes (also
# averaged over views, --tta, as svm-eval --tta); a 64x64 JPEG (another size) is classified;
# --json, --top; a corrupt or missing image is one error line naming it. One small CPU run
# (500 images, 1 epoch, a narrow model) is shared.

load helpers

GEN="$REPO_ROOT/tests/helpers/gen_datasets.py"

setup_file() {
  export W="$BATS_FILE_TMPDIR/run"
  mkdir -p "$W"
  local src
  src="$(real_cifar)"
  [ -n "$src" ] || src="$(cifar_fixture)"
  {
    "$BIN/cifar-convert" -q --input "$src" --train-limit 500 --test-limit 100 -o "$W/data.h5" &&
    "$BIN/ae-train" -q --data "$W/data.h5" --epochs 1 --batch-size 50 --encoder-channels 16,8 --device cpu -o "$W/model.h5" &&
    "$BIN/ae-encode" -q --model "$W/model.h5" --data "$W/data.h5" --device cpu -o "$W/features.h5" &&
    "$BIN/svm-fit" -q --features "$W/features.h5" --device cpu -o "$W/svm.h5" &&
    "$BIN/svm-eval" -q --model "$W/svm.h5" --features "$W/features.h5" --device cpu -o "$W/eval.h5" &&
    "$PYTHON" "$GEN" pngs "$W/data.h5" "$W/png" --count 20
  } > "$W/setup.log" 2>&1
  echo $? > "$W/setup.rc"
}

setup() {
  [ "$(cat "$W/setup.rc")" -eq 0 ] || { cat "$W/setup.log"; return 1; }
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/classify.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

@test "PNGs of 20 test images get exactly the classes svm-eval gives them" {
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --device cpu --json --top 3 "$W"/png/*.png
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/out.jsonl"
  "$PYTHON" - "$TMP/out.jsonl" "$W/eval.h5" <<'PY'
import json, sys, h5py
rows = [json.loads(l) for l in open(sys.argv[1])]
e = h5py.File(sys.argv[2], "r")
pred = e["predictions"][:20]
names = [str(n) for n in e.attrs["class_names"]]
assert len(rows) == 20, len(rows)
for i, r in enumerate(rows):
    assert r["file"].endswith("%03d.png" % i), r["file"]
    assert r["label"] == pred[i], (i, r, pred[i])
    assert r["class"] == names[pred[i]], r
    assert len(r["scores"]) == 3
    key = "probability" if "probability" in r["scores"][0] else "votes"
    assert key == "votes" and r["scores"][0]["label"] == r["label"], r
    vals = [s[key] for s in r["scores"]]
    assert vals == sorted(vals, reverse=True), vals
# Not all one class: the check says something about the images.
assert len(set(int(p) for p in pred)) > 1
PY
}

@test "an SVM with probabilities: they rank the classes; --tta flip agrees with svm-eval --tta flip" {
  "$BIN/ae-encode" -q --model "$W/model.h5" --data "$W/data.h5" --device cpu --flip -o "$TMP/ff.h5"
  "$BIN/svm-fit" -q --features "$TMP/ff.h5" --device cpu --probability -o "$TMP/sp.h5"
  "$BIN/svm-eval" -q --model "$TMP/sp.h5" --features "$TMP/ff.h5" --device cpu --tta flip -o "$TMP/ep.h5"
  run "$BIN/classify" --model "$W/model.h5" --svm "$TMP/sp.h5" --device cpu --json --top 10 --tta flip "$W"/png/*.png
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/out.jsonl"
  "$PYTHON" - "$TMP/out.jsonl" "$TMP/ep.h5" <<'PY'
import json, sys, h5py, numpy as np
rows = [json.loads(l) for l in open(sys.argv[1])]
e = h5py.File(sys.argv[2], "r")
pred, prob = e["predictions"][:20], e["probabilities"][:20]
assert len(rows) == 20
for i, r in enumerate(rows):
    assert r["label"] == pred[i], (i, r["label"], pred[i])
    p = [s["probability"] for s in r["scores"]]
    assert p == sorted(p, reverse=True) and abs(sum(p) - 1) < 1e-6, p
    for s in r["scores"]:
        assert abs(s["probability"] - prob[i, s["label"]]) < 1e-6, (s, prob[i])
PY
}

@test "--tta flip,shift:1 on images and on --features rows: svm-eval --tta flip,shift:1's classes and probabilities" {
  # Four views per image (the image, its mirror, shift 1 and its mirror), encoded by classify
  # from the PNGs and by ae-encode from the dataset: the same codes, so the same averages.
  "$BIN/ae-encode" -q --model "$W/model.h5" --data "$W/data.h5" --device cpu --flip --shifts 1 -o "$TMP/fs.h5"
  "$BIN/svm-fit" -q --features "$TMP/fs.h5" --device cpu --probability -o "$TMP/sp.h5"
  "$BIN/svm-eval" -q --model "$TMP/sp.h5" --features "$TMP/fs.h5" --device cpu --tta flip,shift:1 -o "$TMP/ev.h5"
  "$BIN/svm-eval" -q --model "$TMP/sp.h5" --features "$TMP/fs.h5" --device cpu -o "$TMP/e1.h5"
  "$BIN/svm-eval" -q --model "$TMP/sp.h5" --features "$TMP/fs.h5" --device cpu --tta flip -o "$TMP/e2.h5"
  run "$BIN/classify" --model "$W/model.h5" --svm "$TMP/sp.h5" --device cpu --json --top 10 --tta flip,shift:1 "$W"/png/*.png
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/images.jsonl"
  run "$BIN/classify" --svm "$TMP/sp.h5" --features "$TMP/fs.h5" --device cpu --json --top 10 --tta flip,shift:1
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/rows.jsonl"
  run "$PYTHON" - "$TMP/images.jsonl" "$TMP/rows.jsonl" "$TMP/ev.h5" "$TMP/e1.h5" "$TMP/e2.h5" <<'PY'
import json, sys, h5py, numpy as np
e, e1, e2 = (h5py.File(p, "r") for p in sys.argv[3:6])
assert e.attrs["tta"] == "flip,shift:1", e.attrs["tta"]
pred, prob = e["predictions"][...], e["probabilities"][...]
# The views change something: the averaged probabilities are neither the image's own nor
# those of the image and its mirror alone (so matching them needs the shifted views).
assert np.abs(prob - e1["probabilities"][...]).max() > 1e-3
assert np.abs(prob - e2["probabilities"][...]).max() > 1e-3
for path, count in ((sys.argv[1], 20), (sys.argv[2], 100)):
    rows = [json.loads(l) for l in open(path)]
    assert len(rows) == count, (path, len(rows))
    for i, r in enumerate(rows):
        assert r["label"] == pred[i], (path, i, r["label"], pred[i])
        for s in r["scores"]:
            assert abs(s["probability"] - prob[i, s["label"]]) < 1e-6, (path, i, s, prob[i])
PY
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "--tta: a bad view set is one usage line (exit 2); views the features file lacks are one line (exit 1)" {
  local spec
  for spec in shift:0 shift:9 rotate flip,flip "flip,"; do
    run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --device cpu --tta "$spec" "$W/png/000.png"
    assert_error 2 "--tta"
    run "$BIN/classify" --svm "$W/svm.h5" --features "$W/features.h5" --device cpu --tta "$spec"
    assert_error 2 "--tta"
  done
  run "$BIN/classify" --svm "$W/svm.h5" --features "$W/features.h5" --tta shift:2 --device cpu
  assert_error 1 "features.h5: /test/features_shift1 is missing: --tta shift:2 needs the features of the shifted images \(run ae-encode --shifts 2\)"
}

@test "a 64x64 JPEG is classified; the plain output names file and class" {
  "$PYTHON" "$GEN" image "$TMP/photo.jpg" --size 64x64
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --device cpu --top 2 -q "$TMP/photo.jpg"
  [ "$status" -eq 0 ]
  names=$("$PYTHON" -c "import h5py,sys; print('|'.join(str(n) for n in h5py.File(sys.argv[1],'r').attrs['class_names']))" "$W/eval.h5")
  [[ "$output" =~ photo\.jpg:\ ($names)\ \ \( ]]
  [[ "$output" == *"votes"* || "$output" =~ [01]\.[0-9]{3} ]]
}

@test "a corrupt image is one error line naming it, and nothing is printed for the others" {
  head -c 100 "$W/png/000.png" > "$TMP/broken.png"
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --device cpu "$W/png/001.png" "$TMP/broken.png"
  assert_error 1 "broken.png: corrupt PNG"
  echo "hello" > "$TMP/text.jpg"
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --device cpu "$TMP/text.jpg"
  assert_error 1 "text.jpg: is not a PNG or JPEG file"
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --device cpu "$TMP/missing.png"
  [ "$status" -eq 1 ]
  [[ "$output" == *"missing.png"* ]]
}

@test "usage: no image, --top 0, --help with an example" {
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5"
  [ "$status" -eq 2 ]
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --top 0 "$W/png/000.png"
  [ "$status" -eq 2 ]
  run "$BIN/classify" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"Example:"*"classify --model"* ]]
  # --json is one line per image here, not the other tools' one summary line.
  [[ "$output" == *"--json"*"one JSON line per image"* ]]
  [[ "$output" != *"one-line JSON summary"* ]]
}

@test "an svm trained on other features is refused naming the file" {
  "$BIN/ae-train" -q --data "$W/data.h5" --epochs 1 --batch-size 50 --train-limit 100 --encoder-channels 8,4 --device cpu -o "$TMP/m2.h5"
  run "$BIN/classify" --model "$TMP/m2.h5" --svm "$W/svm.h5" --device cpu "$W/png/000.png"
  assert_error 1 "svm.h5: was trained on 512 features, but .*m2.h5 encodes 256"
}

@test "a model of the same shape but not the one the svm's features came from is refused, unless --allow-mismatch" {
  "$BIN/ae-train" -q --data "$W/data.h5" --epochs 1 --batch-size 50 --train-limit 100 --encoder-channels 16,8 --seed 9 \
    --device cpu -o "$TMP/other.h5"
  run "$BIN/classify" --model "$TMP/other.h5" --svm "$W/svm.h5" --device cpu "$W/png/000.png"
  assert_error 1 "other.h5: is not the model .*svm.h5 was trained on \(its features came from sha256 [0-9a-f]{12}…\); pass that model, or --allow-mismatch"
  run "$BIN/classify" -q --allow-mismatch --model "$TMP/other.h5" --svm "$W/svm.h5" --device cpu "$W/png/000.png"
  [ "$status" -eq 0 ]
}

@test "classify --features: every format's rows get svm-eval's classes, named by their index" {
  "$PYTHON" - "$W/features.h5" "$TMP/plain.h5" "$TMP/test.libsvm" <<'PY'
import sys, h5py, numpy as np
src = h5py.File(sys.argv[1], "r")
X, y = src["/test/features"][...], src["/test/labels"][...]
with h5py.File(sys.argv[2], "w") as f:
    f["/test/features"] = X.astype(np.float64)
    f["/test/labels"] = y.astype(np.int64)
with open(sys.argv[3], "w") as out:
    for row, label in zip(X, y):
        out.write(str(int(label)) + " " + " ".join(f"{i + 1}:{float(v)!r}" for i, v in enumerate(row) if v != 0) + "\n")
PY
  for f in "$W/features.h5" "$TMP/plain.h5" "$TMP/test.libsvm"; do
    run "$BIN/classify" --svm "$W/svm.h5" --features "$f" --device cpu --json --top 3
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep '^{' > "$TMP/$(basename "$f").jsonl"
  done
  run "$BIN/classify" -q --svm "$W/svm.h5" --features "$W/features.h5" --split test --device cpu --top 2
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > "$TMP/rows.txt"
  run "$PYTHON" - "$W/eval.h5" "$TMP/rows.txt" "$TMP"/features.h5.jsonl "$TMP"/plain.h5.jsonl "$TMP"/test.libsvm.jsonl <<'PY'
import sys, json, h5py
e = h5py.File(sys.argv[1], "r")
pred = e["predictions"][...]
names = [str(n) for n in e.attrs["class_names"]]
assert len(set(int(p) for p in pred)) > 1
text = open(sys.argv[2]).read().splitlines()
assert len(text) == len(pred) == 100, len(text)
for i, line in enumerate(text):
    assert line.startswith(f"{i}: {names[pred[i]]}  ({names[pred[i]]} "), (i, line)
for path in sys.argv[3:]:
    rows = [json.loads(l) for l in open(path)]
    assert len(rows) == 100, (path, len(rows))
    for i, r in enumerate(rows):
        assert r["row"] == i and r["label"] == pred[i] and r["class"] == names[pred[i]], (path, i, r)
        assert "inside" not in r and len(r["scores"]) == 3 and r["scores"][0]["label"] == r["label"], r
PY
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "classify --features: usage and bad input are one line each" {
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --features "$W/features.h5" "$W/png/000.png"
  assert_error 2 "give images, or --features FILE \(not both\)"
  run "$BIN/classify" --svm "$W/svm.h5" "$W/png/000.png"
  assert_error 2 "images need --model"
  run "$BIN/classify" --svm "$W/svm.h5" --features "$W/features.h5" --tta flip --device cpu
  assert_error 1 "features.h5: /test/features_flip is missing: --tta flip needs the features of the mirrored images"
  run "$BIN/classify" --svm "$W/svm.h5" --features "$W/features.h5" --split nope --device cpu
  assert_error 1 "features.h5: /nope/features is missing"
  run "$BIN/classify" --svm "$W/svm.h5" --features "$W/data.h5" --device cpu
  [ "$status" -eq 1 ]
  [[ "$output" == *"data.h5"* ]]
}

@test "classify --reject on images: the same inside/outside as svm-eval --reject gives those test rows" {
  "$BIN/svm-fit" -q --features "$W/features.h5" --kind one-class --nu 0.3 --device cpu -o "$TMP/oc.h5"
  "$BIN/svm-eval" -q --model "$W/svm.h5" --features "$W/features.h5" --reject "$TMP/oc.h5" --device cpu -o "$TMP/eval.h5"
  run "$BIN/classify" --model "$W/model.h5" --svm "$W/svm.h5" --reject "$TMP/oc.h5" --device cpu --json "$W"/png/*.png
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/out.jsonl"
  [[ "$output" == *"classified 20 images"*"outside"* ]]
  run "$BIN/classify" -q --model "$W/model.h5" --svm "$W/svm.h5" --reject "$TMP/oc.h5" --device cpu "$W"/png/*.png
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > "$TMP/out.txt"
  run "$PYTHON" - "$TMP/out.jsonl" "$TMP/out.txt" "$TMP/eval.h5" <<'PY'
import json, sys, h5py
rows = [json.loads(l) for l in open(sys.argv[1])]
text = open(sys.argv[2]).read().splitlines()
e = h5py.File(sys.argv[3], "r")
inside, pred = e["inside"][:20], e["predictions"][:20]
names = [str(n) for n in e.attrs["class_names"]]
assert len(rows) == len(text) == 20
assert 0 < int((e["inside"][...] == 0).sum()) < len(e["inside"]), "the one-class model rejects some test rows, not all"
for i, (r, line) in enumerate(zip(rows, text)):
    assert r["label"] == pred[i] and r["inside"] == bool(inside[i]), (i, r, inside[i])
    word = names[pred[i]] if inside[i] else "outside (" + names[pred[i]] + ")"
    assert line.startswith(r["file"] + ": " + word + "  ("), (line, word)
print("outside of 20:", int((inside == 0).sum()))
PY
  echo "$output"
  [ "$status" -eq 0 ]
}
