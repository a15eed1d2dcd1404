#!/usr/bin/env bats
# report: full and partial run folders, explicit files, atomic replacement, bad inputs
# (issue 5). Run folders are hand-made by tests/helpers/fake_run.py (docs/FORMATS.md
# layouts, synthetic but non-trivial numbers), so no training is needed.

load helpers

setup_file() {
  export RUNS="$BATS_FILE_TMPDIR/runs"
  "$PYTHON" "$REPO_ROOT/tests/helpers/fake_run.py" --out "$RUNS/full" --epochs 4
}

setup() {
  [ -x "$BIN/report" ] || skip "report not built"
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/report.XXXXXX")"
}

teardown() {
  chmod -R u+w "$TMP" 2>/dev/null || true
  rm -rf "$TMP"
}

# A run folder holding copies of the full run's files named in $@ (model features svm eval).
partial_run() {
  local dir="$TMP/run" f
  mkdir -p "$dir"
  for f in "$@"; do cp "$RUNS/full/$f.h5" "$dir/"; done
  echo "$dir"
}

# Damages a copy of the full run's FILE.h5 with a snippet run on h5py.File F (r+).
damaged() {
  local file="$1" code="$2" out="$TMP/bad-$1.h5"
  cp "$RUNS/full/$file.h5" "$out"
  "$PYTHON" -c "import h5py, numpy as np
F = h5py.File('$out', 'r+')
$code
F.close()"
  echo "$out"
}

# Checks that a finished report folder holds index.html, report.md and exactly the PNGs named.
assert_report() {
  local dir="$1"; shift
  [ -s "$dir/index.html" ] && [ -s "$dir/report.md" ] || { echo "no index.html/report.md in $dir"; return 1; }
  local want got
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  got=$(cd "$dir" && ls *.png 2>/dev/null | sort | tr '\n' ' ')
  [ "$want" = "$got" ] || { echo "PNGs: got '$got', want '$want'"; return 1; }
  # Each PNG is a real picture of some size, and both documents show it.
  "$PYTHON" - "$dir" "$@" <<'PY'
import sys, os
import matplotlib.image as mpimg
folder, names = sys.argv[1], sys.argv[2:]
html = open(os.path.join(folder, "index.html")).read()
md = open(os.path.join(folder, "report.md")).read()
for n in names:
    img = mpimg.imread(os.path.join(folder, n))
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 400, (n, img.shape)
    assert img[..., :3].std() > 0.05, f"{n} is nearly blank"
    assert f'src="{n}"' in html and f"({n})" in md, f"{n} not referenced"
PY
}

@test "a full run folder gives every plot, the numbers from the files, and a JSON line" {
  run "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/rep" --json --quiet
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" loss.png reconstructions.png features_pca.png confusion.png per_class_accuracy.png \
    timing.png
  # The JSON line's accuracy is the confusion matrix's, and the documents print it.
  "$PYTHON" - "$output" "$RUNS/full/eval.h5" "$TMP/rep" <<'PY'
import json, sys, h5py, numpy as np
summary = json.loads(sys.argv[1])
cm = h5py.File(sys.argv[2], "r")["confusion"][()]
acc = np.trace(cm) / cm.sum()
assert abs(summary["accuracy"] - acc) < 1e-12, (summary, acc)
assert summary["missing"] == [] and len(summary["images"]) == 6
# summary.json beside the documents: the same, less what describes this invocation; one key
# a line, as make pipeline's closing line reads "accuracy" with sed.
text = open(f"{sys.argv[3]}/summary.json").read()
kept = {k: v for k, v in summary.items() if k not in ("output", "seconds", "phases")}
assert json.loads(text) == kept, (text, kept)
assert f'\n "accuracy": {json.dumps(summary["accuracy"])}\n' in text, text
# Where the time went, in the other tools' phases (common/phases.h): each a share of the total.
phases = summary["phases"]
assert set(phases) == {"startup", "read", "hash", "compute", "write", "other", "total"}, phases
assert all(v >= 0 for v in phases.values()) and phases["compute"] > 0, phases
assert abs(sum(v for k, v in phases.items() if k != "total") - phases["total"]) < 0.01, phases
shown = f"{100 * acc:.1f} %"
for doc in ("index.html", "report.md"):
    text = open(f"{sys.argv[3]}/{doc}").read()
    assert shown in text, (doc, shown)
    for word in ("svm-fit", "ae-train", "sha256", "matches model.h5", "epochs=4", "support vectors",
                 "Why the training loss starts above the test loss", "All 40 test rows"):
        assert word in text, (doc, word)
    assert "of the 40" not in text, doc  # all of them: never "a random sample of 40 of the 40"
PY
  # --quiet: nothing on stderr (bats' output holds stdout+stderr: only the JSON line).
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
}

@test "without -o the report goes to RUN_DIR/report; a second run replaces it whole" {
  local dir
  dir=$(partial_run model features svm eval)
  run "$BIN/report" --run-dir "$dir" -q
  [ "$status" -eq 0 ]
  [ -s "$dir/report/index.html" ]
  touch "$dir/report/stale.png"
  run "$BIN/report" --run-dir "$dir" -q
  [ "$status" -eq 0 ]
  [ ! -e "$dir/report/stale.png" ]
  [ -s "$dir/report/confusion.png" ]
  [ -z "$(ls -a "$dir" | grep -F '.report.' || true)" ]
}

@test "a run folder with only model.h5: training plots, and it says what is missing" {
  local dir
  dir=$(partial_run model)
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep"
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" loss.png reconstructions.png timing.png
  for f in features.h5 svm.h5 eval.h5; do
    [[ "$output" == *"warning: $dir/$f not found"* ]] || { echo "no warning for $f: $output"; return 1; }
    grep -q "<code>$f</code> was not found" "$TMP/rep/index.html"
    grep -q "\`$f\` was not found" "$TMP/rep/report.md"
  done
}

@test "a run folder with only eval.h5: confusion matrix and per-class bars, no loss curves" {
  local dir
  dir=$(partial_run eval)
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep" --json
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" confusion.png per_class_accuracy.png timing.png
  [[ "$output" == *'"missing": ["model.h5", "features.h5", "svm.h5"]'* ]]
}

@test "explicit --model and --svm without a run folder" {
  run "$BIN/report" --model "$RUNS/full/model.h5" --svm "$RUNS/full/svm.h5" -o "$TMP/rep" -q
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" loss.png reconstructions.png timing.png
  grep -q "30 support vectors" "$TMP/rep/report.md"
}

@test "started by a Python without h5py, it runs under one that has it, or says what to install" {
  # -S: no site-packages, so the interpreter that starts the report cannot import h5py. The
  # python3 first on PATH is a symlink to that same interpreter, as a virtual environment's is.
  mkdir -p "$TMP/venv/bin"
  ln -s "$PYTHON" "$TMP/venv/bin/python3"
  PATH="$TMP/venv/bin:$PATH" run "$PYTHON" -S "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/rep" -q
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" loss.png reconstructions.png features_pca.png confusion.png per_class_accuracy.png \
    timing.png
  # It hands over before importing the report's own modules (report_lib/interpreter.py): the
  # first interpreter's import trace (-X importtime, not passed on) names none of them.
  PATH="$TMP/venv/bin:$PATH" run "$PYTHON" -S -X importtime "$BIN/report" --version
  [ "$status" -eq 0 ]
  [[ "$output" == *"report_lib.interpreter"* ]]
  [[ "$output" != *"report_lib.cli"* && "$output" != *"report_lib.common"* ]]
  [[ "$output" == *"report 0."* ]]
  # No other Python to turn to (REPORT_REEXECUTED: every candidate already tried): one line, exit 1.
  REPORT_REEXECUTED="$TMP/venv/bin/python3:$(command -v python3):/usr/bin/python3" \
    PATH="$TMP/venv/bin:$PATH" run "$PYTHON" -S "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/rep2"
  [ "$status" -eq 1 ]
  [[ "$output" == "report: error: "*"has no h5py"*"python3-h5py"* ]]
  [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
  [ ! -e "$TMP/rep2" ]
}

@test "a file changed after the stage that used it is flagged as out of date" {
  local dir
  dir=$(partial_run model features)
  "$PYTHON" -c "import h5py; f = h5py.File('$dir/model.h5', 'r+'); f.attrs['seed'] = 99; f.close()"
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep" -q
  [ "$status" -eq 0 ]
  grep -q "model.h5 has changed since" "$TMP/rep/index.html"
  grep -q "features.h5 was made from a different model.h5" "$TMP/rep/report.md"
}

@test "a loss that is 1 epoch long or has NaN still plots" {
  local one nan
  "$PYTHON" "$REPO_ROOT/tests/helpers/fake_run.py" --out "$TMP/one" --files model --epochs 1
  run "$BIN/report" --run-dir "$TMP/one" -o "$TMP/rep1" -q
  [ "$status" -eq 0 ]
  [ -s "$TMP/rep1/loss.png" ]
  nan=$(damaged model "d = F['history/train_loss']; v = d[()]; v[2] = np.nan; d[...] = v")
  run "$BIN/report" --model "$nan" -o "$TMP/rep2" -q
  [ "$status" -eq 0 ]
  grep -q "training diverged" "$TMP/rep2/index.html"
}

# ---- usage errors (exit 2) ---------------------------------------------------------------

@test "--help names the tool, its purpose and an example; --version" {
  run "$BIN/report" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"report — writes an HTML/Markdown report"* ]]
  [[ "$output" == *"Example:"*"report --run-dir data/run -o data/run/report"* ]]
  run "$BIN/report" --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^report\ [0-9]+\.[0-9]+\.[0-9]+ ]]
}

@test "usage errors exit 2 with one line: no input, no output, unknown option, missing value" {
  run "$BIN/report"
  assert_error 2 "^report: usage error: give --run-dir DIR or at least one of"
  run "$BIN/report" --model "$RUNS/full/model.h5"
  assert_error 2 "^report: usage error: -o/--output is required without --run-dir"
  run "$BIN/report" --run-dir "$RUNS/full" --colour red
  assert_error 2 "^report: usage error: unrecognized arguments: --colour red"
  run "$BIN/report" --run-dir
  assert_error 2 "^report: usage error: argument --run-dir: expected one argument"
}

# ---- runtime errors (exit 1): one line naming the file, no report folder -----------------

@test "missing or empty run folder" {
  run "$BIN/report" --run-dir "$TMP/nope" -o "$TMP/rep"
  assert_error 1 "^report: error: $TMP/nope: no such folder$"
  assert_no_output "$TMP/rep"
  mkdir "$TMP/empty"
  run "$BIN/report" --run-dir "$TMP/empty" -o "$TMP/rep"
  assert_error 1 "^report: error: $TMP/empty: none of model.h5, features.h5, svm.h5, eval.h5 is here$"
  assert_no_output "$TMP/rep"
}

@test "an explicit file that is missing, a folder, or not HDF5" {
  run "$BIN/report" --model "$TMP/none.h5" -o "$TMP/rep"
  assert_error 1 "^report: error: $TMP/none.h5: no such file$"
  run "$BIN/report" --eval "$TMP" -o "$TMP/rep"
  assert_error 1 "^report: error: $TMP: is a folder, not an HDF5 file$"
  echo "not hdf5 at all" > "$TMP/text.h5"
  run "$BIN/report" --svm "$TMP/text.h5" -o "$TMP/rep"
  assert_error 1 "^report: error: $TMP/text.h5: not a readable HDF5 file"
  head -c 3000 "$RUNS/full/eval.h5" > "$TMP/cut.h5"
  run "$BIN/report" --eval "$TMP/cut.h5" -o "$TMP/rep"
  assert_error 1 "^report: error: $TMP/cut.h5: "
  assert_no_output "$TMP/rep"
}

@test "a run folder whose eval.h5 is damaged fails as a whole, naming eval.h5" {
  local dir
  dir=$(partial_run model features svm)
  echo "garbage" > "$dir/eval.h5"
  run "$BIN/report" --run-dir "$dir"
  assert_error 1 "^report: error: $dir/eval.h5: not a readable HDF5 file"
  assert_no_output "$dir/report"
}

@test "wrong format, newer format_version, missing format" {
  run "$BIN/report" --model "$RUNS/full/eval.h5" -o "$TMP/rep"
  assert_error 1 "eval.h5: format is 'svm-eval', expected 'ae-model' \(is this the right file\?\)$"
  local f
  f=$(damaged svm "F.attrs['format_version'] = np.int64(2)")
  run "$BIN/report" --svm "$f" -o "$TMP/rep"
  assert_error 1 "bad-svm.h5: format_version 2 is newer than this report understands \(1\)"
  # (a features file without one is plain features: the last test of this file)
  f=$(damaged svm "del F.attrs['format']")
  run "$BIN/report" --svm "$f" -o "$TMP/rep"
  assert_error 1 "bad-svm.h5: no 'format' attribute"
  assert_no_output "$TMP/rep"
}

@test "wrong dtypes and shapes inside a file are named with the dataset" {
  local f
  f=$(damaged eval "del F['confusion']; F['confusion'] = np.ones((10, 9), np.int64)")
  run "$BIN/report" --eval "$f" -o "$TMP/rep"
  assert_error 1 "bad-eval.h5: /confusion has shape \[10, 9\], expected \[k,k\]$"
  f=$(damaged eval "del F['confusion']; F['confusion'] = np.ones((10, 10), np.float32)")
  run "$BIN/report" --eval "$f" -o "$TMP/rep"
  assert_error 1 "bad-eval.h5: /confusion has dtype float32, expected int or uint$"
  f=$(damaged eval "d = F['confusion']; v = d[()]; v[0, 0] += 5; d[...] = v")
  run "$BIN/report" --eval "$f" -o "$TMP/rep"
  assert_error 1 "bad-eval.h5: /confusion sums to 405 but there are 400 labels$"
  f=$(damaged model "del F['history/lr']; F['history/lr'] = np.ones(7)")
  run "$BIN/report" --model "$f" -o "$TMP/rep"
  assert_error 1 "bad-model.h5: the /history arrays have different lengths"
  f=$(damaged model "del F['samples/images']; F['samples/images'] = np.ones((10, 3, 16, 16), np.uint8)")
  run "$BIN/report" --model "$f" -o "$TMP/rep"
  assert_error 1 "bad-model.h5: /samples/images has shape \[10, 3, 16, 16\], expected \[N,3,32,32\]$"
  assert_no_output "$TMP/rep"
}

@test "a damaged global heap that crashes libhdf5 is reported, not a crash" {
  local f="$REPO_ROOT/tests/fuzz/regressions/features-globalheap-segv.h5"
  [ -f "$f" ] || skip "no fuzz regression file"
  run "$BIN/report" --features "$f" -o "$TMP/rep"
  assert_error 1 "features-globalheap-segv.h5: damaged HDF5 file"
  assert_no_output "$TMP/rep"
}

@test "output problems: a file, a folder that is not a report, an unwritable parent" {
  touch "$TMP/afile"
  run "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/afile"
  assert_error 1 "^report: error: $TMP/afile: exists and is not a folder$"
  # -o pointing at the run folder itself must not replace (delete) it.
  local dir
  dir=$(partial_run model eval)
  run "$BIN/report" --run-dir "$dir" -o "$dir"
  assert_error 1 "^report: error: $dir: exists and is not a report folder \(no index.html\); refusing to replace it$"
  [ -s "$dir/model.h5" ] && [ -s "$dir/eval.h5" ]
  # A missing folder is refused, as by every other tool (none of them creates folders).
  run "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/no/such/rep"
  assert_error 1 "^report: error: $TMP/no/such/rep: output folder $TMP/no/such does not exist$"
  [ ! -e "$TMP/no" ]
  if [ "$(id -u)" -ne 0 ]; then
    mkdir "$TMP/ro" && chmod a-w "$TMP/ro"
    run "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/ro/rep"
    assert_error 1 "^report: error: $TMP/ro: cannot write here"
  fi
}

@test "SIGTERM while writing leaves neither the report nor a temporary folder" {
  "$BIN/report" --run-dir "$RUNS/full" -o "$TMP/rep" -q &
  local pid=$!
  # Signal it while it writes: once its temporary folder exists (rendering the plots takes
  # seconds, the poll 20 ms), not after a fixed sleep that a fast machine outruns.
  local i
  for i in $(seq 1 1500); do
    [ -n "$(ls -a "$TMP" | grep -F '.rep.tmp-' || true)" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  kill -TERM "$pid" 2>/dev/null || true
  local rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 143 ]
  assert_no_output "$TMP/rep"
  [ -z "$(ls -a "$TMP" | grep -F '.rep.tmp-' || true)" ]
}

# A model of another architecture (root attributes input_shape/encoder_channels): grayscale
# 1×28×28 samples, encoder 64,32, and a validation loss beside train and test.
@test "a grayscale 1x28x28 model with encoder 64,32 and a validation loss: its plots and its architecture" {
  local f
  f=$(damaged model "import numpy as np
n = len(F['history/train_loss'])
if 'history/val_loss' in F:
    del F['history/val_loss']
F['history/val_loss'] = F['history/test_loss'][()] * 0.97
for k in ('images', 'reconstructions'):
    del F['samples/' + k]
rng = np.random.default_rng(3)
img = rng.integers(0, 256, (10, 1, 28, 28), dtype=np.uint8)
F['samples/images'] = img
F['samples/reconstructions'] = (img / 255.0 * 0.8 + 0.1).astype(np.float32)
F.attrs['input_shape'] = np.array([1, 28, 28], np.int64)
F.attrs['encoder_channels'] = np.array([64, 32], np.int64)")
  run "$BIN/report" --model "$f" -o "$TMP/rep" -q
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" loss.png reconstructions.png timing.png
  for doc in index.html report.md; do
    grep -q "1×28×28 → encoder 64,32 → 32×7×7 (1,568 features)" "$TMP/rep/$doc"
    grep -q "validation loss" "$TMP/rep/$doc"
  done
  grep -q "best validation epoch" "$TMP/rep/index.html"
  # Samples that do not match the recorded input shape are named with it.
  f=$(damaged model "import numpy as np
F.attrs['input_shape'] = np.array([1, 28, 28], np.int64)
F.attrs['encoder_channels'] = np.array([64, 32], np.int64)")
  run "$BIN/report" --model "$f" -o "$TMP/rep2"
  assert_error 1 "bad-model.h5: /samples/images has shape \[10, 3, 32, 32\], expected \[N,1,28,28\]$"
  assert_no_output "$TMP/rep2"
  # An input shape the encoder cannot pool is an error naming the file.
  f=$(damaged model "import numpy as np
F.attrs['input_shape'] = np.array([3, 30, 30], np.int64)
F.attrs['encoder_channels'] = np.array([64, 32], np.int64)")
  run "$BIN/report" --model "$f" -o "$TMP/rep2"
  assert_error 1 "bad-model.h5: input_shape \[3, 30, 30\]: H and W must be divisible by 2\^2"
}

@test "a model file without architecture attributes is the seed model 3x32x32, encoder 256,128" {
  local f
  f=$(damaged model "for k in ('encoder_channels', 'input_shape', 'latent_shape', 'val_count'):
    if k in F.attrs:
        del F.attrs[k]
if 'history/val_loss' in F:
    del F['history/val_loss']")
  run "$BIN/report" --model "$f" -o "$TMP/rep" -q
  [ "$status" -eq 0 ]
  grep -q "3×32×32 → encoder 256,128 → 128×8×8 (8,192 features)" "$TMP/rep/report.md"
  grep -q "best test epoch" "$TMP/rep/index.html"
}

# svm-fit --cv's table (issue 15): a heat map in both documents, the chosen pair named.
@test "an svm.h5 with a cross-validation grid gets a heat map; a malformed table is named" {
  local dir
  dir=$(partial_run model features svm eval)
  "$PYTHON" - "$dir/svm.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    g = f.create_group("model_selection")
    g["C"] = np.array([0.1, 1.0, 10.0])
    g["cv_accuracy"] = np.array([[0.31, 0.35, 0.28, 0.2], [0.52, 0.61, 0.58, 0.4], [0.55, 0.6, 0.62, 0.45]])
    g["gamma_resolved"] = np.tile(np.array([[5e-4], [1e-3], [2e-3], [1.2e-4]]), (1, 5))
    g["fold_accuracy"] = np.repeat(g["cv_accuracy"][()][:, :, None], 5, axis=2)
    g.attrs["gamma"] = np.array(["0.5x", "scale", "2x", "auto"], dtype=h5py.string_dtype())
    g.attrs["seconds"] = 12.5
    f.attrs.update({"cv_folds": 5, "cv_seed": 1, "cv_accuracy": 0.62, "best_C": 10.0, "best_gamma": "2x"})
PY
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep" -q
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" loss.png reconstructions.png features_pca.png confusion.png per_class_accuracy.png \
    cv_grid.png timing.png
  for doc in index.html report.md; do
    grep -q "Model selection" "$TMP/rep/$doc"
    grep -q "5-fold stratified cross-validation of 3 C × 4 γ" "$TMP/rep/$doc"
    grep -q "C = 10 and γ = 2x (62.0 %)" "$TMP/rep/$doc"
    grep -q "5-fold CV accuracy 62.0 %" "$TMP/rep/$doc"
  done
  # Chosen by --cv-scoring log_loss: the file holds negated log-losses (larger is better); the
  # report shows the log-loss itself.
  "$PYTHON" - "$dir/svm.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    g = f["model_selection"]
    g["cv_score"] = -np.array([[1.9, 1.7, 1.8, 2.1], [1.2, 0.95, 1.0, 1.4], [1.1, 0.9, 0.87, 1.3]])
    g.attrs["scoring"] = "log_loss"
    f.attrs.update({"cv_scoring": "log_loss", "cv_score": -0.87})
PY
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-ll" -q
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  assert_report "$TMP/rep-ll" loss.png reconstructions.png features_pca.png confusion.png per_class_accuracy.png \
    cv_grid.png timing.png
  for doc in index.html report.md; do
    grep -q "chosen by log-loss, 0.870 (lower is better) as the mean over the folds" "$TMP/rep-ll/$doc"
    ! grep -q -- "-0.870" "$TMP/rep-ll/$doc"
  done
  grep -q "Each cell: the log-loss of the held-out rows" "$TMP/rep-ll/index.html"
  # A table whose columns do not match the gamma list fails the report, naming the file.
  "$PYTHON" -c "import h5py, sys
f = h5py.File(sys.argv[1], 'r+'); f['model_selection'].attrs['gamma'] = ['scale']" "$dir/svm.h5"
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep2"
  [ "$status" -eq 1 ]
  [[ "$output" == *"svm.h5: /model_selection has 4 columns in cv_accuracy but its gamma attribute is ['scale']"* ]]
  [ ! -e "$TMP/rep2" ]
}

# --- report --compare (issue 18) ------------------------------------------------------------

# Sets option KEY of FILE's params attribute (the JSON the tools record) to VALUE.
set_param() {
  "$PYTHON" - "$1" "$2" "$3" <<'PY'
import json, sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    p = json.loads(f.attrs["params"])
    p[sys.argv[2]] = sys.argv[3]
    f.attrs["params"] = json.dumps(p)
PY
}

# Three fake runs: a and b differ only by the autoencoder's seed (repeats of one setting),
# c also by the SVM's C. Their numbers differ (fake_run.py --seed draws them).
compare_runs() {
  local name seed
  for name in a:1 b:2 c:3; do
    seed=${name#*:} name=${name%%:*}
    "$PYTHON" "$REPO_ROOT/tests/helpers/fake_run.py" --out "$TMP/$name" --seed "$seed"
    set_param "$TMP/$name/model.h5" seed "$seed"
  done
  set_param "$TMP/c/svm.h5" C 5
}

@test "--compare: a table and a plot per run, mean and std over runs whose settings are equal" {
  compare_runs
  run "$BIN/report" --compare "$TMP/a" "$TMP/b" "$TMP/c" -o "$TMP/cmp" --json --quiet
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ -s "$TMP/cmp/index.html" ] && [ -s "$TMP/cmp/report.md" ] && [ -s "$TMP/cmp/compare.json" ]
  "$PYTHON" - "$output" "$TMP" <<'PY'
import json, statistics, sys, h5py
import matplotlib.image as mpimg
summary, tmp = json.loads(sys.argv[1]), sys.argv[2]
assert summary == {**json.load(open(f"{tmp}/cmp/compare.json")), "seconds": summary["seconds"]}
acc, mse = {}, {}
for r in "abc":
    cm = h5py.File(f"{tmp}/{r}/eval.h5", "r")["confusion"][()]
    acc[r] = cm.trace() / cm.sum()
    mse[r] = float(h5py.File(f"{tmp}/{r}/model.h5", "r")["history/test_loss"][-1])
runs = {s["run"].rsplit("/", 1)[-1]: s for s in summary["runs"]}
for r in "abc":
    assert abs(runs[r]["accuracy"] - acc[r]) < 1e-12 and abs(runs[r]["mse"] - mse[r]) < 1e-15, runs[r]
    assert runs[r]["seconds"]["fit"] == 3.25 and runs[r]["seconds"]["train"] > 100
assert [runs[r]["seed"] for r in "abc"] == ["1", "2", "3"]
assert len(set(acc.values())) == 3, acc        # the runs really differ
groups = {tuple(g["runs"][i].rsplit("/", 1)[-1] for i in range(len(g["runs"]))): g for g in summary["settings"]}
assert set(groups) == {("a", "b"), ("c",)}, groups
ab = groups[("a", "b")]
assert abs(ab["accuracy_mean"] - (acc["a"] + acc["b"]) / 2) < 1e-12
assert abs(ab["accuracy_std"] - statistics.stdev([acc["a"], acc["b"]])) < 1e-12
assert abs(ab["mse_std"] - statistics.stdev([mse["a"], mse["b"]])) < 1e-15
assert groups[("c",)]["accuracy_std"] is None and "C=5" in groups[("c",)]["label"]
# Both documents show every run's accuracy and the pair's mean ± std; the plot is a picture.
a, s = 100 * ab["accuracy_mean"], 100 * ab["accuracy_std"]
for doc in ("index.html", "report.md"):
    text = open(f"{tmp}/cmp/{doc}").read()
    assert f"{a:.2f} ± {s:.2f} %" in text, doc
    for r in "abc":
        assert f"{100 * acc[r]:.2f} %" in text and f"{tmp}/{r}" in text, (doc, r)
    assert "compare.png" in text
img = mpimg.imread(f"{tmp}/cmp/compare.png")
assert img.shape[0] > 400 and img.shape[1] > 400 and img[..., :3].std() > 0.05, img.shape
PY
}

@test "--compare: a failed run is listed without numbers, a missing folder and bad options are errors" {
  compare_runs
  "$PYTHON" "$REPO_ROOT/tests/helpers/fake_run.py" --out "$TMP/half" --files model,features
  mkdir "$TMP/empty"
  run "$BIN/report" --compare "$TMP/a" "$TMP/half" "$TMP/empty" "$TMP/b" -o "$TMP/cmp" --quiet
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" == *"$TMP/empty: none of model.h5, features.h5, svm.h5, eval.h5 is here"* ]]
  "$PYTHON" - "$TMP" <<'PY'
import json, sys
tmp = sys.argv[1]
c = json.load(open(f"{tmp}/cmp/compare.json"))
runs = {r["run"].rsplit("/", 1)[-1]: r for r in c["runs"]}
assert runs["half"]["files"] == ["features", "model"] and runs["half"]["setting"] is None
assert runs["half"]["accuracy"] is None and runs["half"]["mse"] > 0
assert runs["empty"]["files"] == [] and runs["empty"]["mse"] is None
assert [len(g["runs"]) for g in c["settings"]] == [2]   # a and b only: the half run is in no mean
PY
  grep -q "none (failed or not run)" "$TMP/cmp/report.md"

  run "$BIN/report" --compare "$TMP/a" "$TMP/nowhere" -o "$TMP/cmp2"
  assert_error 1 "^report: error: $TMP/nowhere: no such run folder$"
  [ ! -e "$TMP/cmp2" ]
  run "$BIN/report" --compare "$TMP/empty" -o "$TMP/cmp2"
  assert_error 1 "no run folder holds any of model.h5"
  [ ! -e "$TMP/cmp2" ]
  run "$BIN/report" --compare "$TMP/a" "$TMP/b"
  assert_error 2 "^report: usage error: -o/--output is required with --compare"
  run "$BIN/report" --compare "$TMP/a" --run-dir "$TMP/b" -o "$TMP/cmp2"
  assert_error 2 "cannot be combined with --run-dir"
}

# Issue 19: the features' 2-D view reads a seeded sample of at most 2,000 rows, and shows
# the structure the features have.
@test "the features' 2-D view: a seeded sample of 2,000 of 2,500 rows, its components' shares of the variance" {
  local f
  # Two classes 10 apart along the first 100 features (noise 1 everywhere): the first
  # component holds ~23 % of the variance (2,500 of 10,692), the second ~0.01 %.
  f=$(damaged features "import numpy as np
rng = np.random.default_rng(5)
labels = (np.arange(2500) % 2).astype(np.uint8)
x = rng.normal(0, 1, (2500, 8192)).astype(np.float32)
x[:, :100] += np.where(labels[:, None] == 0, 5.0, -5.0)
del F['test/features'], F['test/labels']
F['test/features'] = x
F['test/labels'] = labels")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" features_pca.png timing.png
  "$PYTHON" - "$TMP/rep" <<'PY'
import re, sys
md = open(f"{sys.argv[1]}/report.md").read()
m = re.search(r"A random sample of 2,000 of the 2,500 test rows \(seeded, the same every time\); the two "
              r"components explain ([0-9.]+) % and ([0-9.]+) %", md)
assert m, md
first, second = float(m.group(1)), float(m.group(2))
assert 20 < first < 26 and second < 1.5, (first, second)
PY
  # Seeded: a second report draws the same picture.
  run "$BIN/report" --features "$f" -o "$TMP/rep2" -q
  [ "$status" -eq 0 ]
  cmp "$TMP/rep/features_pca.png" "$TMP/rep2/features_pca.png"
  # The contiguous block's rows are read from the file's bytes; a chunked, compressed copy's
  # by HDF5's own selection: the same rows, the same picture.
  cp "$f" "$TMP/chunked.h5"
  "$PYTHON" -c "import h5py, sys
F = h5py.File(sys.argv[1], 'r+')
x = F['test/features'][()]
assert F['test/features'].chunks is None
del F['test/features']
F.create_dataset('test/features', data=x, chunks=(64, 8192), compression='gzip', compression_opts=1)" "$TMP/chunked.h5"
  run "$BIN/report" --features "$TMP/chunked.h5" -o "$TMP/rep3" -q
  [ "$status" -eq 0 ]
  cmp "$TMP/rep/features_pca.png" "$TMP/rep3/features_pca.png"
}

@test "figures in parallel children: the features' 2-D view drawn once its reader answers, failures after every child is collected" {
  # Forced to the parallel path (this machine may have fewer CPUs than parallel.SERIAL_BELOW).
  "$PYTHON" - "$BIN/report" "$RUNS/full" "$TMP" <<'PY'
import os, sys, time
sys.path.insert(0, sys.argv[1])  # the built report is a zip archive: its report_lib imports from it
from report_lib import cli, parallel
run, tmp = sys.argv[2], sys.argv[3]

# run_parallel's `later`: a job made once its fd is readable, run ahead of those not started.
r, w = os.pipe()
order = []
def make_job():
    os.read(r, 1)
    order.append("made")
    return "late", lambda: "late ran"
jobs = [("a", lambda: time.sleep(0.3) or "a ran"), ("b", lambda: "b ran")]
os.write(w, b"x")
for limit in (8, 1):
    order.clear()
    got = parallel.run_parallel(jobs, limit=limit, later=[(r, make_job)])
    assert got == {"a": "a ran", "b": "b ran", "late": "late ran"}, got
    assert order == ["made"]
    os.write(w, b"x")

# A make_job that raises: raised once the children already started have ended.
def broken():
    raise cli.ReportError("x.h5", "damaged")
try:
    parallel.run_parallel([("slow", lambda: time.sleep(0.5) or 1)], limit=8, later=[(r, broken)])
    raise AssertionError("no error")
except cli.ReportError as err:
    assert str(err) == "x.h5: damaged", err
assert not parallel._running, parallel._running

# The whole report with its figures in parallel children: the same pictures as drawn in turn.
parallel.workers = lambda: 8
assert cli.main(["--run-dir", run, "-o", f"{tmp}/parallel", "-q"]) == 0
parallel.workers = lambda: 1
assert cli.main(["--run-dir", run, "-o", f"{tmp}/serial", "-q"]) == 0
names = sorted(os.listdir(f"{tmp}/serial"))
assert names == sorted(os.listdir(f"{tmp}/parallel")) and "features_pca.png" in names, names
for name in names:
    if name.endswith(".png"):
        assert open(f"{tmp}/serial/{name}", "rb").read() == open(f"{tmp}/parallel/{name}", "rb").read(), name
md = open(f"{tmp}/parallel/report.md").read()
assert "the two components explain" in md, md
PY
}

# report --info (issue 19): every kind of file, what it is and what it was made from.
@test "--info: each kind of file, its shapes, attributes and the chain of files it came from" {
  make_dataset "$TMP/cifar10.h5" 30 20
  run "$BIN/report" --info "$TMP/cifar10.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"$TMP/cifar10.h5: image-dataset v1"* ]]
  [[ "$output" == *"/test/images   uint8 [20, 3, 32, 32]"* ]] || { echo "$output"; return 1; }
  [[ "$output" == *"class_names"*"airplane"* ]]
  run "$BIN/report" --info "$RUNS/full/model.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"model.h5: ae-model v1 — autoencoder model or checkpoint (ae-train)"* ]]
  [[ "$output" == *"/encoder/conv1/weight"*"float32 [256, 3, 3, 3]"* ]]
  [[ "$output" == *"epochs_done"*"4"* ]] && [[ "$output" == *"made by    ae-train 0.1.0"* ]]
  [[ "$output" == *"← data/cifar10.h5  sha256 "* ]]
  # eval.h5 → svm.h5 → features.h5 → model.h5: the whole chain, each with its kind.
  run "$BIN/report" --info "$RUNS/full/eval.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"eval.h5: svm-eval v1"* ]] && [[ "$output" == *"/confusion  "*"int64 [10, 10]"* ]]
  "$PYTHON" - "$output" "$RUNS/full" <<'PY'
import sys
out, run = sys.argv[1], sys.argv[2]
lines = out.splitlines()
def at(text):
    hits = [i for i, l in enumerate(lines) if text in l]
    assert hits, (text, out)
    return hits[0]
# Each input one level deeper than the file that names it, its kind under it.
svm, feats = at(f"    ← {run}/svm.h5  sha256 "), at(f"        ← {run}/features.h5  sha256 ")
model = at(f"            ← {run}/model.h5  sha256 ")
assert svm < feats < model, out
assert "svm-model, made by svm-fit" in lines[svm + 1] and "ae-features, made by ae-encode" in lines[feats + 1]
assert "ae-model, made by ae-train" in lines[model + 1], out
PY
  # Several files at once: one block each.
  run "$BIN/report" --info "$RUNS/full/features.h5" "$RUNS/full/svm.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"features.h5: ae-features v1"* ]] && [[ "$output" == *"/test/features   float32 [40, 8192]"* ]]
  [[ "$output" == *"svm.h5: svm-model v1"* ]] && [[ "$output" == *"/svm/support_vectors "*"float32 [30, 4000]"* ]]
  [[ "$output" == *"latent_shape"*"[128, 8, 8]"* ]]
}

@test "--info: a file that is not HDF5, not the toolkit's, or missing is named with exit 1; usage errors exit 2" {
  echo "not hdf5 at all" > "$TMP/text.h5"
  run "$BIN/report" --info "$TMP/text.h5"
  assert_error 1 "^report: error: $TMP/text.h5: not a readable HDF5 file"
  run "$BIN/report" --info "$TMP/none.h5"
  assert_error 1 "^report: error: $TMP/none.h5: no such file$"
  "$PYTHON" -c "import h5py; h5py.File('$TMP/plain.h5', 'w')['x'] = [1, 2]; f = h5py.File('$TMP/other.h5', 'w'); f.attrs['format'] = 'mystery'"
  run "$BIN/report" --info "$TMP/plain.h5"
  assert_error 1 "^report: error: $TMP/plain.h5: no 'format' attribute: not a file of this toolkit$"
  run "$BIN/report" --info "$TMP/other.h5"
  assert_error 1 "^report: error: $TMP/other.h5: unknown format 'mystery'"
  # A good file beside a bad one: the good one is summarised, the status is still 1.
  run "$BIN/report" --info "$RUNS/full/svm.h5" "$TMP/text.h5"
  [ "$status" -eq 1 ]
  [[ "$output" == *"svm.h5: svm-model v1"* ]] && [[ "$output" == *"report: error: $TMP/text.h5: not a readable"* ]]
  run "$BIN/report" --info
  [ "$status" -eq 2 ] && [[ "$output" == *"usage error"* ]]
  run "$BIN/report" --info "$RUNS/full/svm.h5" --run-dir "$RUNS/full"
  [ "$status" -eq 2 ] && [[ "$output" == *"--info takes files only"* ]]
}

# A copy of the full run whose model.h5 and features.h5 record DATA as their dataset input.
run_on_dataset() {
  local data="$1" dir="$TMP/run-on"
  mkdir -p "$dir"
  cp "$RUNS/full"/*.h5 "$dir/"
  "$PYTHON" - "$dir" "$data" <<'PY'
import h5py, json, sys
folder, data = sys.argv[1], sys.argv[2]
for name, index in (("model.h5", 0), ("features.h5", 1)):
    with h5py.File(f"{folder}/{name}", "r+") as f:
        inputs = json.loads(f.attrs["inputs"])
        inputs[index]["name"] = data
        f.attrs["inputs"] = json.dumps(inputs)
PY
  echo "$dir"
}

# The <title>, the <h1>, report.md's heading and --json's "title" all hold $2; the header
# line under it holds $3.
assert_titled() {
  local rep="$1" title="$2" header="$3" json="$4"
  "$PYTHON" - "$rep" "$title" "$header" "$json" <<'PY'
import html, json, sys
rep, title, header, line = sys.argv[1:]
page = open(f"{rep}/index.html").read()
md = open(f"{rep}/report.md").read()
assert f"<title>{html.escape(title)}</title>" in page, page[:600]
assert f"<h1>{html.escape(title)}</h1>" in page, page[:900]
assert md.startswith(f"# {title}\n"), md[:300]
assert html.escape(header) in page and "CIFAR-10 autoencoder" not in page, (header, page[:1200])
assert header in md.replace("\\", ""), (header, md[:600])
assert json.loads(line)["title"] == title, line
PY
}

@test "the title and header name the dataset from its file: CIFAR-10, Fashion-MNIST, an image folder" {
  local dir
  # CIFAR-10 binary batches.
  make_dataset "$TMP/cifar10.h5" 100 50
  dir=$(run_on_dataset "$TMP/cifar10.h5")
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-c" --json --quiet
  [ "$status" -eq 0 ]
  assert_titled "$TMP/rep-c" "CIFAR-10: autoencoder features → SVM" \
    "CIFAR-10, 100 train + 50 test images, 3×32×32, 10 classes, from $(cifar_fixture) (CIFAR-10 binary batches)" \
    "$output"
  # Fashion-MNIST's IDX files (recognised by cifar-convert from the folder's name).
  "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" idx "$TMP/fashion" --gz --train 30 --test 10
  "$BIN/cifar-convert" -q --input "$TMP/fashion" -o "$TMP/fashion-mnist.h5"
  rm -rf "$dir"; dir=$(run_on_dataset "$TMP/fashion-mnist.h5")
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-f" --json --quiet
  [ "$status" -eq 0 ]
  assert_titled "$TMP/rep-f" "Fashion-MNIST: autoencoder features → SVM" \
    "Fashion-MNIST, 30 train + 10 test images, 1×28×28, 10 classes, from $TMP/fashion (IDX files)" "$output"
  # A folder of pictures: named by its folder.
  "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" folder "$TMP/photos" --size 12x10
  "$BIN/cifar-convert" -q --input "$TMP/photos" --image-size 8 -o "$TMP/folder-photos.h5"
  rm -rf "$dir"; dir=$(run_on_dataset "$TMP/folder-photos.h5")
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-p" --json --quiet
  [ "$status" -eq 0 ]
  assert_titled "$TMP/rep-p" "Image folder photos/: autoencoder features → SVM" \
    "the image folder photos/, 5 train + " "$output"
  # --title still wins.
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-t" --title "My pets" --json --quiet
  [ "$status" -eq 0 ]
  assert_titled "$TMP/rep-t" "My pets" "the image folder photos/" "$output"
}

@test "a dataset file that has moved: named from its recorded file name, else its class names" {
  local dir
  dir=$(run_on_dataset "/nonexistent/data/fashion-mnist.h5")
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-f" --json --quiet
  [ "$status" -eq 0 ]
  assert_titled "$TMP/rep-f" "Fashion-MNIST: autoencoder features → SVM" \
    "Fashion-MNIST (the dataset file /nonexistent/data/fashion-mnist.h5 is not here" "$output"
  rm -rf "$dir"; dir=$(run_on_dataset "/elsewhere/folder-pets.h5")
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-p" --json --quiet
  [ "$status" -eq 0 ]
  assert_titled "$TMP/rep-p" "Image folder pets/: autoencoder features → SVM" "the image folder pets/" "$output"
  # An unknown file name: the class names (the fake run's are CIFAR-10's) decide.
  rm -rf "$dir"; dir=$(run_on_dataset "/elsewhere/mine.h5")
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep-c" --json --quiet
  [ "$status" -eq 0 ]
  assert_titled "$TMP/rep-c" "CIFAR-10: autoencoder features → SVM" "CIFAR-10 (the dataset file /elsewhere/mine.h5" \
    "$output"
}

@test "names from outside are escaped in index.html, report.md and --json: HTML, |, newline, *, backticks, \$" {
  local dir
  dir=$(partial_run model features svm eval)
  "$PYTHON" - "$dir" <<'PY'
import h5py, sys
names = [f"<b>x</b>|{i}\n*c{i}* `q` $5" for i in range(10)]
for kind in ("features", "svm", "eval"):
    with h5py.File(f"{sys.argv[1]}/{kind}.h5", "r+") as f:
        del f.attrs["class_names"]
        f.attrs.create("class_names", names, dtype=h5py.string_dtype())
PY
  run "$BIN/report" --run-dir "$dir" -o "$TMP/rep" --title $'T <i>1</i> | `x` *y*\x1b[31m' --json --quiet
  [ "$status" -eq 0 ]
  assert_report "$TMP/rep" loss.png reconstructions.png features_pca.png confusion.png per_class_accuracy.png \
    timing.png
  "$PYTHON" - "$TMP/rep" "$output" <<'PY'
import json, re, sys
rep, line = sys.argv[1:]
page = open(f"{rep}/index.html").read()
md = open(f"{rep}/report.md").read()
# HTML: no markup from a name or the title, the escaped text instead; no control character.
for raw in ("<b>", "</b>", "<i>", "\x1b"):
    assert raw not in page and raw not in md, raw
assert "&lt;b&gt;x&lt;/b&gt;|" in page and "&lt;i&gt;1&lt;/i&gt;" in page
assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", page + md), "a control character"
# The newline inside a class name is shown as \n, never breaks a line.
assert "\\n*c" in page and "|3\n" not in page and "|3\n" not in md
# Markdown: the title and the class names escaped (<, >, |, *, backticks), one heading line.
assert md.startswith("# T \\<i\\>1\\</i\\> \\| \\`x\\` \\*y\\*\\\\e\\[31m\n"), md[:200]
easiest = re.search(r"Easiest class: (.*?) \(", md).group(1)
assert easiest.startswith("\\<b\\>x\\</b\\>\\|") and "\\*c" in easiest and "\\`q\\`" in easiest, easiest
# Every Markdown table row has as many unescaped | as its header.
for table in re.findall(r"(?:^\|.*\n)+", md, flags=re.M):
    rows = table.splitlines()
    cells = [len(re.findall(r"(?<!\\)\|", r)) for r in rows]
    assert len(set(cells)) == 1, rows
# --json: one line, the exact title (json escapes it).
summary = json.loads(line)
assert summary["title"] == "T <i>1</i> | `x` *y*\x1b[31m" and "\x1b" not in line
PY
  # The terminal: --info shows the names on one line each; an error names a path on one line.
  run "$BIN/report" --info "$dir/eval.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *'class_names'*'<b>x</b>|0\n*c0*'* ]]
  ! printf '%s\n' "$output" | grep -q '^\*c'
  run "$BIN/report" --info "$dir/no"$'\n'"such.h5"
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ] && [[ "$output" == *'/no\nsuch.h5: no such file'* ]]
}

@test "plots: epochs ticked 1..N, log-axis labels apart, end-of-line values off the x-axis, legend off the bars" {
  "$PYTHON" - "$BIN/report" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])  # the built report is a zip archive: its report_lib imports from it
import numpy as np
import report_lib.plots as plots
from matplotlib.text import Annotation

for n in (1, 2, 9, 10, 11, 20, 21, 37, 100, 250):
    ticks = plots.epoch_ticks(n)
    assert ticks[0] == 1 and ticks[-1] <= n and ticks == sorted(set(ticks)) and len(ticks) <= 11, (n, ticks)
assert plots.epoch_ticks(20) == [1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20]

figures = {}
def keep(fig, folder, name):  # instead of writing the PNG: the figure, to measure
    figures[name] = fig
    return name
plots.save = keep
plots.setup_matplotlib()
import matplotlib
e = np.arange(1, 21, dtype=np.float64)
# A loss falling from 0.09 to ~0.008 (one decade: every digit ticked), the test loss the
# lowest at the end, and a learning rate that drops: the case where labels crowded.
hist = {"train_loss": 0.008 + 0.082 / e ** 1.5, "val_loss": 0.0085 + 0.08 / e ** 1.5,
        "test_loss": 0.0079 + 0.081 / e ** 1.5, "lr": np.where(e > 10, 5e-4, 1e-3)}
plots.plot_loss(hist, "/nonexistent")
fig = figures["loss.png"]
fig.canvas.draw()
ax = fig.axes[0]
assert ax.get_yscale() == "log"
font_px = matplotlib.rcParams["font.size"] * fig.dpi / 72
ys = sorted(t.get_window_extent().y0 for t in ax.get_yticklabels() if t.get_text() and t.get_visible()
            and ax.bbox.y0 - 1 <= t.get_window_extent().y0 <= ax.bbox.y1)
assert len(ys) >= 3 and min(np.diff(ys)) >= 1.2 * font_px, ys
values = [a for a in ax.get_children() if isinstance(a, Annotation)]
assert len(values) == 3, values
for a in values:
    box = a.get_window_extent()
    assert box.y0 > ax.bbox.y0 + 2 and box.y1 < ax.bbox.y1, (a.get_text(), box, ax.bbox)
shown = [t.get_text() for t in fig.axes[-1].get_xticklabels() if t.get_text()]
assert shown[0] == "1" and shown[-1] == "20" and all(1 <= int(s) <= 20 for s in shown), shown

# Per-class bars up to 99 %: the legend covers none of the value labels.
ev = {"per_class": np.linspace(0.8, 0.99, 10), "class_names": [f"class {i}" for i in range(10)], "k": 10,
      "accuracy": 0.9}
plots.plot_per_class(ev, "/nonexistent")
fig = figures["per_class_accuracy.png"]
fig.canvas.draw()
ax = fig.axes[0]
legend = ax.get_legend().get_window_extent()
for t in ax.texts:
    assert not legend.overlaps(t.get_window_extent()), (t.get_text(), legend, t.get_window_extent())

# The reliability diagram's title names the eval's test-time views, whichever they are.
rng = np.random.default_rng(5)
count = rng.integers(1, 50, 10)
cal = {"count": count, "confidence": np.linspace(0.05, 0.95, 10) + rng.uniform(-0.04, 0.04, 10),
       "accuracy": rng.uniform(0, 1, 10), "ece": 0.07, "log_loss": 0.9}
for tta, suffix in (("flip,shift:2", " (TTA flip,shift:2)"), ("shift:1", " (TTA shift:1)"), ("flip", " (TTA flip)"),
                    ("none", ""), (None, "")):
    plots.plot_reliability({"calibration": dict(cal, tta=tta)}, "/nonexistent")
    title = figures["reliability.png"].axes[0].get_title(loc="left")  # the style puts titles left
    assert title == "Reliability: log-loss 0.900, ECE 7.0 %" + suffix, (tta, title)
PY
}

@test "plain features and svm-eval's metrics: the features' 2-D view, a Macro-F1 card and the per-class table" {
  "$PYTHON" "$REPO_ROOT/tests/python/formats_check.py" make-plain "$TMP/plain.h5" --names
  "$BIN/svm-fit" -q --probability --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/plain.h5" -o "$TMP/eval.h5"
  run "$BIN/report" --features "$TMP/plain.h5" --svm "$TMP/svm.h5" --eval "$TMP/eval.h5" -o "$TMP/out"
  [ "$status" -eq 0 ]
  [ -f "$TMP/out/features_pca.png" ]
  grep -q "Macro-F1" "$TMP/out/index.html"
  # The table's numbers are the eval file's, and its rows the classes by name.
  "$PYTHON" - "$TMP/eval.h5" "$TMP/out/report.md" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
md = open(sys.argv[2]).read()
for c, name in enumerate(["north", "east", "south", "west"]):
    row = f"| {name} | {f['/metrics/precision'][c]:.3f} | {f['/metrics/recall'][c]:.3f} | {f['/metrics/f1'][c]:.3f} |"
    assert row in md, (row, md)
assert f"| macro average | {f.attrs['macro_precision']:.3f} | {f.attrs['macro_recall']:.3f} | {f.attrs['macro_f1']:.3f} |" in md
PY
}

@test "features no autoencoder made: plain HDF5 or libsvm text with svm.h5 and eval.h5, no model.h5" {
  # Plain features in a run folder: the features' 2-D view, the SVM and the evaluation.
  local run="$TMP/plainrun"
  mkdir -p "$run"
  "$PYTHON" "$REPO_ROOT/tests/python/formats_check.py" make-plain "$run/features.h5" --names
  "$BIN/svm-fit" -q --features "$run/features.h5" --cv 3 --C 1,10 --cv-scoring macro_f1 -o "$run/svm.h5"
  "$BIN/svm-eval" -q --model "$run/svm.h5" --features "$run/features.h5" -o "$run/eval.h5"
  run "$BIN/report" --run-dir "$run" --json
  [ "$status" -eq 0 ]
  assert_report "$run/report" features_pca.png confusion.png per_class_accuracy.png cv_grid.png timing.png
  [[ "$output" != *"warning"* ]]  # model.h5 is not missing: there is none to have
  "$PYTHON" - "$(grep '^{' <<< "$output")" "$run/report" "$run/svm.h5" <<'PY'
import json, sys, h5py
j, folder = json.loads(sys.argv[1]), sys.argv[2]
assert j["features_origin"] == "plain" and j["missing"] == [] and j["title"] == "Features → SVM", j
assert abs(j["accuracy"] - h5py.File(f"{folder}/../eval.h5", "r").attrs["accuracy"]) < 1e-12
svm = h5py.File(sys.argv[3], "r")
for doc in ("report.md", "index.html"):
    text = open(f"{folder}/{doc}").read()
    assert "Autoencoder" not in text and "autoencoder features" not in text and "model.h5" not in text, doc
    assert "plain HDF5 file, not an autoencoder" in text, doc
    assert "plain HDF5 features (no autoencoder): train 500 × 12, test 200 × 12" in text, doc
    assert "plain features, no format attribute" in text, doc
    scoring = "macro\\_f1" if doc == "report.md" else "macro_f1"  # Markdown escapes the underscore
    assert f"chosen by {scoring}, {svm.attrs['cv_score']:.3f} as the mean over the folds" in text, doc
    assert f"chosen by {scoring} {svm.attrs['cv_score']:.3f}" in text, doc  # the fit stage's row
# The heat map is of the table that chose: macro-F1, as its caption says.
assert "Each cell: the macro_f1 of the held-out rows, the mean over the folds" in open(f"{folder}/index.html").read()
PY
  # libsvm text: only svm.h5 and eval.h5 (the report reads no text features), in a folder
  # or named one by one; --features naming the text file is one clear line.
  run="$TMP/textrun"
  mkdir -p "$run"
  "$PYTHON" "$REPO_ROOT/tests/python/formats_check.py" make-libsvm "$TMP/train.txt" "$TMP/test.txt"
  "$BIN/svm-fit" -q --features "$TMP/train.txt" -o "$run/svm.h5"
  "$BIN/svm-eval" -q --model "$run/svm.h5" --features "$TMP/test.txt" -o "$run/eval.h5"
  local out
  for out in "$run/report" "$TMP/named"; do
    if [ "$out" = "$run/report" ]; then
      run "$BIN/report" --run-dir "$run" --json
    else
      run "$BIN/report" --svm "$run/svm.h5" --eval "$run/eval.h5" -o "$out" --json
    fi
    [ "$status" -eq 0 ]
    [[ "$output" != *"warning"* ]]
    assert_report "$out" confusion.png per_class_accuracy.png timing.png
    "$PYTHON" - "$(grep '^{' <<< "$output")" "$out" <<'PY'
import json, sys
j, folder = json.loads(sys.argv[1]), sys.argv[2]
assert j["features_origin"] == "libsvm" and j["missing"] == [] and j["title"] == "Features → SVM", j
for doc in ("report.md", "index.html"):
    text = open(f"{folder}/{doc}").read()
    assert "Autoencoder" not in text and "model.h5" not in text and "features.h5" not in text, doc
    assert "The features are libsvm text, not an autoencoder" in text, doc
    for row in ("| -1 |", "| 3 |", "| 7 |") if doc == "report.md" else ():
        assert row in text, row  # the per-class table, classes named by their libsvm labels
PY
  done
  run "$BIN/report" --svm "$run/svm.h5" --eval "$run/eval.h5" --features "$TMP/train.txt" -o "$TMP/bad"
  assert_error 1 "train.txt: is not HDF5 \(libsvm text\?\): the report reads HDF5 features only"
  [ ! -e "$TMP/bad" ]
}
