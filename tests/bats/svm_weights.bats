#!/usr/bin/env bats
# svm-fit --class-weight: libsvm's -wi (C of class c is C · w_c) on both sides of a parity
# check with Debian's svm-train, the balanced rule, the weights in cross-validation and the
# probability folds, and bad specs.

load helpers

PARITY="$REPO_ROOT/tests/python/sklearn_parity.py"

setup_file() {
  export W_DIR="$BATS_FILE_TMPDIR/weights"
  mkdir -p "$W_DIR"
  # 600 train / 300 test rows, 40 features (8 dead), 10 overlapping classes of unequal sizes.
  "$PYTHON" "$PARITY" make-features "$W_DIR/raw.h5" --train 600 --test 300 --dim 40 --noise 1.0 --seed 5
  # The training rows sorted by label (stably): libsvm numbers its classes in the order they
  # first appear, ours ascending; sorted, the two orders and every pair's problem agree. The
  # same rows as libsvm text, every float written exactly.
  "$PYTHON" - "$W_DIR" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
f = h5py.File(d + "/raw.h5", "r")
order = np.argsort(f["/train/labels"][()], kind="stable")
with h5py.File(d + "/features.h5", "w") as g:
    g["/train/features"] = f["/train/features"][()][order]
    g["/train/labels"] = f["/train/labels"][()][order]
    g["/test/features"] = f["/test/features"][()]
    g["/test/labels"] = f["/test/labels"][()]
    for k, v in f.attrs.items():
        g.attrs[k] = v
    for split in ("train", "test"):
        with open(f"{d}/{split}.libsvm", "w") as out:
            for x, y in zip(g[f"/{split}/features"][()], g[f"/{split}/labels"][()]):
                out.write(str(int(y)) + "".join(" %d:%.9g" % (j + 1, v) for j, v in enumerate(x) if v != 0) + "\n")
PY
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/svm_weights.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# Both libsvm text models: the same classes, support vectors per class, vectors, coefficients
# and rho (float kernel values against libsvm's double ones: ~1e-6 apart).
compare_models() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys
def read(path):
    head, svs = {}, []
    lines = open(path).read().splitlines()
    i = lines.index("SV")
    for line in lines[:i]:
        key, *vals = line.split()
        head[key] = vals
    for line in lines[i + 1:]:
        parts = line.split()
        k = int(head["nr_class"][0]) - 1
        coef = [float(v) for v in parts[:k]]
        vec = {int(a): float(b) for a, b in (p.split(":") for p in parts[k:])}
        svs.append((coef, vec))
    return head, svs
(ha, sa), (hb, sb) = read(sys.argv[1]), read(sys.argv[2])
for key in ("nr_class", "total_sv", "label", "nr_sv"):
    assert ha[key] == hb[key], (key, ha[key], hb[key])
rho = max(abs(float(a) - float(b)) for a, b in zip(ha["rho"], hb["rho"]))
coef = max(abs(x - y) for (ca, _), (cb, _) in zip(sa, sb) for x, y in zip(ca, cb))
for (_, va), (_, vb) in zip(sa, sb):
    keys = set(va) | set(vb)
    assert all(abs(va.get(j, 0) - vb.get(j, 0)) <= 1e-6 * max(1, abs(va.get(j, 0))) for j in keys), "support vectors differ"
assert rho < 1e-4 and coef < 1e-4, (rho, coef)
print("same model: %s support vectors, rho within %.1e, coefficients within %.1e" % (ha["total_sv"][0], rho, coef))
PY
}

@test "--class-weight NAME:W equals libsvm's svm-train -wi: support vectors, coefficients, rho, predictions" {
  run "$BIN/svm-fit" --features "$W_DIR/features.h5" --scale none --gamma 0.05 --C 2 \
    --class-weight airplane:3,cat:0.5,9:2 -o "$TMP/w.h5" --export-libsvm "$TMP/ours.model" --json
  [ "$status" -eq 0 ]
  [[ "$output" == *'"class_weight":"airplane:3,cat:0.5,9:2"'* ]]
  svm-train -q -s 0 -t 2 -g 0.05 -c 2 -e 0.001 -h 0 -w0 3 -w3 0.5 -w9 2 "$W_DIR/train.libsvm" "$TMP/ref.model"
  run compare_models "$TMP/ours.model" "$TMP/ref.model"
  echo "$output"
  [ "$status" -eq 0 ]
  # The model file records the weights per class, in class order.
  "$PYTHON" -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r')
assert list(f['/svm/class_weight'][()]) == [3, 1, 1, 0.5, 1, 1, 1, 1, 1, 2], f['/svm/class_weight'][()]
assert f.attrs['class_weight'] == 'airplane:3,cat:0.5,9:2'
" "$TMP/w.h5"
  # Our predictions on the test split are svm-predict's with libsvm's own model.
  svm-predict "$W_DIR/test.libsvm" "$TMP/ref.model" "$TMP/ref.out" > /dev/null
  run "$BIN/svm-eval" --model "$TMP/w.h5" --features "$W_DIR/features.h5" -o "$TMP/eval.h5"
  [ "$status" -eq 0 ]
  run "$PYTHON" "$PARITY" compare-predictions --eval "$TMP/eval.h5" --libsvm-out "$TMP/ref.out" --min-agreement 0.999
  echo "$output"
  [ "$status" -eq 0 ]
  # The weights change the model: without them, other support vectors.
  "$BIN/svm-fit" -q --features "$W_DIR/features.h5" --scale none --gamma 0.05 --C 2 -o "$TMP/plain.h5" \
    --export-libsvm "$TMP/plain.model"
  ! cmp -s <(grep '^nr_sv' "$TMP/plain.model") <(grep '^nr_sv' "$TMP/ours.model")
}

@test "--class-weight balanced is n / (k n_c) per class, the same fit as those weights given by label" {
  "$BIN/svm-fit" -q --features "$W_DIR/features.h5" --C 1 --class-weight balanced -o "$TMP/b.h5"
  spec="$("$PYTHON" -c "
import h5py, numpy as np, sys
f = h5py.File(sys.argv[1], 'r')
y = f['/train/labels'][()]
count = np.bincount(y)
expected = len(y) / (len(count) * count.astype(np.float64))
w = h5py.File(sys.argv[2], 'r')['/svm/class_weight'][()]
assert np.array_equal(w, expected), (w, expected)
assert w.max() > 1.2 and w.min() < 0.8  # unequal classes: the weights differ
print(','.join('%d:%.17g' % (c, v) for c, v in enumerate(w)))
" "$W_DIR/features.h5" "$TMP/b.h5")"
  "$BIN/svm-fit" -q --features "$W_DIR/features.h5" --C 1 --class-weight "$spec" -o "$TMP/named.h5"
  "$PYTHON" -c "
import h5py, numpy as np, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
for k in ('/svm/dual_coef', '/svm/rho', '/svm/support_indices', '/svm/class_weight'):
    assert np.array_equal(a[k][()], b[k][()]), k
assert a.attrs['class_weight'] == 'balanced'
" "$TMP/b.h5" "$TMP/named.h5"
}

@test "--class-weight reaches the cross-validation and the probability folds" {
  for w in none cat:0.2,dog:4; do
    "$BIN/svm-fit" -q --features "$W_DIR/features.h5" --cv 3 --C 1,4 --probability --class-weight "$w" \
      -o "$TMP/$w.h5"
  done
  "$PYTHON" -c "
import h5py, numpy as np, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
assert not np.array_equal(a['/model_selection/fold_accuracy'][()], b['/model_selection/fold_accuracy'][()])
assert not np.array_equal(a['/svm/probA'][()], b['/svm/probA'][()])
assert '/svm/class_weight' not in a and list(b['/svm/class_weight'][()])[3:6] == [0.2, 1, 4]
" "$TMP/none.h5" "$TMP/cat:0.2,dog:4.h5"
}

@test "bad input: --class-weight with an unknown class, a weight <= 0 or no weight (usage errors, no output)" {
  for spec in emu:2 cat:0 cat:-1 cat cat:nan cat:1,cat:2; do
    run "$BIN/svm-fit" --features "$W_DIR/features.h5" --class-weight "$spec" -o "$TMP/bad.h5"
    echo "$spec: $output"
    [ "$status" -eq 2 ]
    [[ "$output" == *"--class-weight '$spec'"* ]]
    assert_no_output "$TMP/bad.h5"
  done
}
