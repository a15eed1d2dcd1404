#!/usr/bin/env bats
# svm-fit --kind one-class: the same model as libsvm's svm-train -s 2 on the same rows, and
# the same predictions from svm-predict through the libsvm export; the options it refuses.

load helpers

setup_file() {
  export OC_DIR="$BATS_FILE_TMPDIR/one_class"
  mkdir -p "$OC_DIR"
  # 600 training rows of 16 features (a tenth with three times the spread, so nu cuts a
  # tail), 400 test rows drawn wider, so both answers occur; labels are ignored.
  "$PYTHON" - "$OC_DIR" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)
def write(path, X, y):
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(str(label) + " " + " ".join(f"{i + 1}:{v:.6g}" for i, v in enumerate(row)) + "\n")
X = rng.normal(0.3, 1.0, (600, 16)); X[::10] *= 3
T = rng.normal(0.3, 1.4, (400, 16))
write(d + "/train.libsvm", X, rng.integers(0, 3, 600))
write(d + "/test.libsvm", T, np.ones(400, int))
PY
  "$BIN/svm-fit" -q --features "$OC_DIR/train.libsvm" --kind one-class --nu 0.15 --gamma 0.05 --scale none \
    --tol 1e-6 --device cpu -o "$OC_DIR/oc.h5" --export-libsvm "$OC_DIR/ours.model" --json > "$OC_DIR/fit.json"
  svm-train -q -s 2 -n 0.15 -g 0.05 -e 1e-6 -h 0 "$OC_DIR/train.libsvm" "$OC_DIR/ref.model"
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/one_class.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

@test "svm-fit --kind one-class: the support vectors, multipliers and rho of svm-train -s 2" {
  run "$PYTHON" - "$OC_DIR/ours.model" "$OC_DIR/ref.model" "$OC_DIR/oc.h5" "$OC_DIR/fit.json" <<'PY'
import sys, json, h5py, numpy as np
def parse(path):
    head, sv, body = {}, [], False
    for line in open(path):
        if body:
            parts = line.split()
            sv.append((float(parts[0]), tuple(float(p.split(":")[1]) for p in parts[1:])))
        elif line.strip() == "SV":
            body = True
        else:
            k, *v = line.split()
            head[k] = v
    return head, sv
ours, ours_sv = parse(sys.argv[1])
ref, ref_sv = parse(sys.argv[2])
assert ours["svm_type"] == ["one_class"] == ref["svm_type"], (ours["svm_type"], ref["svm_type"])
assert "label" not in ours and "nr_sv" not in ours
assert ours["total_sv"] == ref["total_sv"], (ours["total_sv"], ref["total_sv"])
n_sv = int(ref["total_sv"][0])
assert 0.15 * 600 <= n_sv < 600, n_sv
assert abs(float(ours["rho"][0]) - float(ref["rho"][0])) < 1e-4, (ours["rho"], ref["rho"])
for (a, xa), (b, xb) in zip(ours_sv, ref_sv):
    assert abs(a - b) < 1e-4, (a, b)
    assert np.allclose(xa, xb, rtol=1e-5), "support vectors differ"
assert sum(a for a, _ in ours_sv) > 0.15 * 600 - 1e-6
f = h5py.File(sys.argv[3], "r")
assert f.attrs["kind"] == "one-class" and f.attrs["nu"] == 0.15
assert f["/svm/classes"].shape == (0,) and f["/svm/dual_coef"].shape == (1, n_sv) and f["/svm/rho"].shape == (1,)
j = json.loads(open(sys.argv[4]).read())
assert j["kind"] == "one-class" and j["nu"] == 0.15 and j["n_sv"] == n_sv, j
print("ok", n_sv)
PY
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "svm-predict gives the same inside/outside answers from the exported model as from svm-train's" {
  svm-predict "$OC_DIR/test.libsvm" "$OC_DIR/ours.model" "$TMP/ours.txt" > /dev/null
  svm-predict "$OC_DIR/test.libsvm" "$OC_DIR/ref.model" "$TMP/ref.txt" > /dev/null
  run "$PYTHON" - "$TMP/ours.txt" "$TMP/ref.txt" <<'PY'
import sys
a = [int(float(l)) for l in open(sys.argv[1])]
b = [int(float(l)) for l in open(sys.argv[2])]
assert len(a) == len(b) == 400
assert set(a) == {1, -1}, set(a)
agree = sum(x == y for x, y in zip(a, b))
# float (ours) and double (libsvm) training rows may flip a decision within ~1e-6 of 0.
assert agree >= 399, agree
print("outside", a.count(-1), "agree", agree)
PY
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "bad input: --nu out of range, and what one-class does not take (usage errors, no output)" {
  for nu in 0 -0.5 1.5; do
    run "$BIN/svm-fit" --features "$OC_DIR/train.libsvm" --kind one-class --nu "$nu" -o "$TMP/oc.h5"
    assert_error 2 "--nu must be in \(0, 1\]"
  done
  run "$BIN/svm-fit" --features "$OC_DIR/train.libsvm" --kind one-class --cv 3 -o "$TMP/oc.h5"
  assert_error 2 "--kind one-class does not take --cv"
  run "$BIN/svm-fit" --features "$OC_DIR/train.libsvm" --kind one-class --probability -o "$TMP/oc.h5"
  assert_error 2 "--kind one-class does not take --probability"
  run "$BIN/svm-fit" --features "$OC_DIR/train.libsvm" --kind one-class --class-weight balanced -o "$TMP/oc.h5"
  assert_error 2 "--kind one-class does not take --class-weight"
  run "$BIN/svm-fit" --features "$OC_DIR/train.libsvm" --nu 0.2 -o "$TMP/oc.h5"
  assert_error 2 "--nu is for --kind one-class"
  run "$BIN/svm-fit" --features "$OC_DIR/train.libsvm" --kind nu-svc -o "$TMP/oc.h5"
  [ "$status" -eq 2 ]
  assert_no_output "$TMP/oc.h5"
}

@test "svm-eval refuses a one-class model with one line and writes nothing" {
  run "$BIN/svm-eval" --model "$OC_DIR/oc.h5" --features "$OC_DIR/test.libsvm" -o "$TMP/eval.h5"
  assert_error 1 "oc.h5: is a one-class model \(svm-fit --kind one-class\), not a classifier"
  assert_no_output "$TMP/eval.h5"
}

@test "svm-fit --kind one-class without --nu fits nu 0.5 (its help's default)" {
  run "$BIN/svm-fit" -q --features "$OC_DIR/train.libsvm" --kind one-class --json -o "$TMP/half.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"kind":"one-class"'* || "$output" == *'"kind": "one-class"'* ]]
  [[ "$output" == *'"nu":0.5'* || "$output" == *'"nu": 0.5'* ]]
  "$BIN/svm-fit" --help | grep -q -- '--nu.*0.5'
}

# A 3-class classifier of the same training rows, for the rejection tests.
fit_classifier() {
  [ -f "$OC_DIR/clf.h5" ] ||
    "$BIN/svm-fit" -q --features "$OC_DIR/train.libsvm" --gamma 0.05 --scale none --device cpu -o "$OC_DIR/clf.h5"
}

@test "svm-eval --reject: /inside is svm-predict's +1 on the exported one-class model; counted in the log, --json and the file" {
  fit_classifier
  svm-predict "$OC_DIR/test.libsvm" "$OC_DIR/ours.model" "$TMP/predict.txt" > /dev/null
  run "$BIN/svm-eval" --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device cpu \
    --json -o "$TMP/eval.h5"
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/eval.json"
  printf '%s\n' "$output" | grep 'accuracy' | head -1 > "$TMP/log.txt"
  run "$PYTHON" - "$TMP/eval.h5" "$TMP/predict.txt" "$TMP/eval.json" "$TMP/log.txt" <<'PY'
import sys, json, re, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
inside = f["inside"][...]
ref = np.array([int(float(l)) for l in open(sys.argv[2])]) > 0
assert inside.shape == (400,) and inside.dtype == np.uint8
agree = int(((inside == 1) == ref).sum())
# float (ours) and double (libsvm) kernel values may flip a decision within ~1e-6 of 0.
assert agree >= 399, agree
n_out = int((inside == 0).sum())
assert 20 < n_out < 380, n_out
assert f.attrs["n_outside"] == n_out and abs(f.attrs["outside_fraction"] - n_out / 400) < 1e-12
pred, lab = f["predictions"][...], f["labels"][...]
acc_in = float((pred == lab)[inside == 1].mean())
assert abs(f.attrs["accuracy_inside"] - acc_in) < 1e-12
assert str(f.attrs["reject_model"]).endswith("oc.h5")
j = json.loads(open(sys.argv[3]).read())
assert j["n_outside"] == n_out and abs(j["outside_fraction"] - n_out / 400) < 1e-12, j
assert abs(j["accuracy_inside"] - acc_in) < 1e-12 and j["n"] == 400, j
line = open(sys.argv[4]).read()
assert re.search(r", %d outside \(%.2f %%; accuracy inside %.2f %%\)" % (n_out, 100 * n_out / 400, 100 * acc_in), line), line
print("outside", n_out, "agree", agree)
PY
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "--reject reads any features format: a plain HDF5 file of the same rows gives the same /inside" {
  fit_classifier
  "$PYTHON" - "$OC_DIR/test.libsvm" "$TMP/test.h5" <<'PY'
import sys, h5py, numpy as np
rows = [l.split() for l in open(sys.argv[1])]
X = np.array([[float(t.split(":")[1]) for t in r[1:]] for r in rows])
with h5py.File(sys.argv[2], "w") as f:
    f["/test/features"] = X
    f["/test/labels"] = np.array([int(r[0]) for r in rows], np.int64)
    f.attrs["class_names"] = ["0", "1", "2"]
PY
  "$BIN/svm-eval" -q --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device cpu -o "$TMP/a.h5"
  "$BIN/svm-eval" -q --model "$OC_DIR/clf.h5" --features "$TMP/test.h5" --reject "$OC_DIR/oc.h5" --device cpu -o "$TMP/b.h5"
  "$PYTHON" -c "
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], 'r'), h5py.File(sys.argv[2], 'r')
assert (a['inside'][...] == b['inside'][...]).all() and (a['predictions'][...] == b['predictions'][...]).all()
assert 0 < a.attrs['n_outside'] == b.attrs['n_outside']
" "$TMP/a.h5" "$TMP/b.h5"
}

@test "classify --features --reject: a rejected row prints as outside (its vote); --json says inside false" {
  fit_classifier
  "$BIN/svm-eval" -q --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device cpu -o "$TMP/eval.h5"
  run "$BIN/classify" --svm "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device cpu \
    --top 2 --json
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" | grep '^{' > "$TMP/rows.jsonl"
  run "$BIN/classify" -q --svm "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device cpu
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > "$TMP/rows.txt"
  run "$PYTHON" - "$TMP/eval.h5" "$TMP/rows.jsonl" "$TMP/rows.txt" <<'PY'
import sys, json, re, h5py
f = h5py.File(sys.argv[1], "r")
inside, pred = f["inside"][...], f["predictions"][...]
rows = [json.loads(l) for l in open(sys.argv[2])]
assert len(rows) == 400
for i, r in enumerate(rows):
    assert r["row"] == i and r["label"] == pred[i] and r["inside"] == bool(inside[i]), (i, r)
    assert len(r["scores"]) == 2 and r["scores"][0]["label"] == r["label"], r
text = open(sys.argv[3]).read().splitlines()
assert len(text) == 400
for i, line in enumerate(text):
    name = str(pred[i])  # the model's class names are the libsvm labels
    want = f"{i}: outside ({name})  (" if not inside[i] else f"{i}: {name}  ("
    assert line.startswith(want), (line, want)
print("outside", int((inside == 0).sum()))
PY
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "--reject refuses a classifier, a model of another width, and a missing file, in one line each" {
  fit_classifier
  run "$BIN/svm-eval" --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/clf.h5" -o "$TMP/e.h5"
  assert_error 1 "clf.h5: is a classifier, not a one-class model: --reject takes one of svm-fit --kind one-class"
  assert_no_output "$TMP/e.h5"
  "$PYTHON" - "$OC_DIR/train.libsvm" "$TMP/narrow.libsvm" <<'PY'
import sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        out.write(" ".join(line.split()[:9]) + "\n")
PY
  "$BIN/svm-fit" -q --features "$TMP/narrow.libsvm" --kind one-class --device cpu -o "$TMP/narrow_oc.h5"
  run "$BIN/classify" --svm "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$TMP/narrow_oc.h5"
  assert_error 1 "test.libsvm: its rows has 16 features per row, but .*narrow_oc.h5 was trained on 8"
  run "$BIN/svm-eval" --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$TMP/none.h5" -o "$TMP/e.h5"
  [ "$status" -ne 0 ]
  [[ "$output" == *"none.h5"* ]]
  assert_no_output "$TMP/e.h5"
  run "$BIN/classify" --svm "$OC_DIR/oc.h5" --features "$OC_DIR/test.libsvm"
  assert_error 1 "oc.h5: is a one-class model \(svm-fit --kind one-class\), not a classifier; give it to --reject$"
}

@test "svm-eval --reject --ranks 2: the same /inside and counts as one process" {
  fit_classifier
  local args=(--device cpu --threads 1 --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5")
  "$BIN/svm-eval" -q "${args[@]}" -o "$TMP/one.h5"
  run "$BIN/svm-eval" -q "${args[@]}" --ranks 2 -o "$TMP/two.h5"
  [ "$status" -eq 0 ]
  "$PYTHON" -c "
import sys, h5py
a, b = h5py.File(sys.argv[1], 'r'), h5py.File(sys.argv[2], 'r')
assert (a['inside'][...] == b['inside'][...]).all() and (a['predictions'][...] == b['predictions'][...]).all()
for k in ('n_outside', 'outside_fraction', 'accuracy_inside'):
    assert a.attrs[k] == b.attrs[k], k
assert a.attrs['n_outside'] > 0
" "$TMP/one.h5" "$TMP/two.h5"
}

@test "on the GPU: svm-eval --reject and classify --features --reject decide as on the CPU (skips without one)" {
  nvidia-smi -L >/dev/null 2>&1 || skip "no GPU"
  fit_classifier
  "$BIN/svm-eval" -q --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device cpu -o "$TMP/cpu.h5"
  "$BIN/svm-eval" -q --model "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device gpu -o "$TMP/gpu.h5"
  "$BIN/classify" -q --svm "$OC_DIR/clf.h5" --features "$OC_DIR/test.libsvm" --reject "$OC_DIR/oc.h5" --device gpu \
    --json > "$TMP/gpu.jsonl"
  "$PYTHON" - "$TMP/cpu.h5" "$TMP/gpu.h5" "$TMP/gpu.jsonl" <<'PY'
import sys, json, h5py
a, b = h5py.File(sys.argv[1], "r")["inside"][...], h5py.File(sys.argv[2], "r")["inside"][...]
rows = [json.loads(l) for l in open(sys.argv[3]) if l.startswith("{")]
# float32 kernel values summed in another order may flip a row within rounding of 0.
assert (a == b).sum() >= 399, (a == b).sum()
assert sum(r["inside"] == bool(x) for r, x in zip(rows, b)) == 400
PY
}
