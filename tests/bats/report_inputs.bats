#!/usr/bin/env bats
# report reads only what the toolkit's readers accept (common/hdf5_io.cpp, hdf5_probe.cpp,
# kernels/ae/features_reader.cpp): regular files, data held in the file itself, shapes
# backed by stored data, finite features; and names from outside, whatever their bytes,
# give well-formed pages. Hostile files are made by h5py from the hand-made run folder of
# tests/helpers/fake_run.py.

load helpers

setup_file() {
  export RUNS="$BATS_FILE_TMPDIR/runs"
  "$PYTHON" "$REPO_ROOT/tests/helpers/fake_run.py" --out "$RUNS/full" --epochs 3
}

setup() {
  report_setup report-inputs
}

teardown() {
  rm -rf "$TMP"
}

# A copy of the full run's features.h5 changed by a snippet run on h5py.File F (r+), in $TMP
# (a snippet may write other files beside it); prints its path.
features_with() {
  local out="$TMP/features.h5"
  cp "$RUNS/full/features.h5" "$out"
  (cd "$TMP" && "$PYTHON" -c "import h5py, numpy as np
F = h5py.File('features.h5', 'r+')
$1
F.close()")
  echo "$out"
}

@test "a dataset behind an external link, a virtual dataset, external storage: refused with what and where" {
  local f own="toolkit files must hold their own data"
  f=$(features_with "x = F['test/features'][()]
with h5py.File('other.h5', 'w') as o:
    o['x'] = x
del F['test/features']
F['test/features'] = h5py.ExternalLink('other.h5', '/x')")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/test/features is an external link to other.h5:/x; $own"

  f=$(features_with "x = F['test/features'][()]
with h5py.File('other.h5', 'w') as o:
    o['x'] = x
layout = h5py.VirtualLayout(shape=x.shape, dtype=x.dtype)
layout[:] = h5py.VirtualSource('other.h5', 'x', shape=x.shape)
del F['test/features']
F.create_virtual_dataset('test/features', layout)")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "dataset /test/features is a virtual dataset (its data is in other files); $own"

  f=$(features_with "x = F['test/features'][()]
x.tofile('raw.bin')
del F['test/features']
F.create_dataset('test/features', shape=x.shape, dtype=x.dtype, external=[('raw.bin', 0, x.nbytes)])")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "dataset /test/features keeps its data in an external file (raw.bin); $own"

  # In a run folder too, and the other kinds of file as well (eval.h5's confusion matrix).
  mkdir "$TMP/run"
  cp "$RUNS/full/svm.h5" "$RUNS/full/eval.h5" "$TMP/run/"
  (cd "$TMP/run" && "$PYTHON" -c "import h5py
with h5py.File('eval.h5', 'r+') as F:
    c = F['confusion'][()]
    with h5py.File('confusion.h5', 'w') as o:
        o['c'] = c
    del F['confusion']
    F['confusion'] = h5py.ExternalLink('confusion.h5', '/c')")
  run "$BIN/report" --run-dir "$TMP/run" -o "$TMP/rep" -q
  report_refused "$TMP/run/eval.h5" "/confusion is an external link to confusion.h5:/c; $own"

  # A soft link is a path inside the file: followed, and the report is written.
  f=$(features_with "F['test/alias'] = h5py.SoftLink('/test/features')")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  [ "$status" -eq 0 ] && [ -s "$TMP/rep/index.html" ]
}

@test "a features file that is a FIFO, or a link to one, is refused at once: nothing waits for a writer" {
  mkfifo "$TMP/fifo.h5"
  ln -s "$TMP/fifo.h5" "$TMP/link.h5"
  local f
  for f in "$TMP/fifo.h5" "$TMP/link.h5"; do
    run timeout 20 "$BIN/report" --features "$f" -o "$TMP/rep" -q
    report_refused "$f" "is not a regular file (a FIFO, socket or device?), expected an HDF5 file"
  done
  # Found in a run folder, beside a good file.
  mkdir "$TMP/run"
  cp "$RUNS/full/eval.h5" "$TMP/run/"
  ln -s "$TMP/fifo.h5" "$TMP/run/features.h5"
  run timeout 20 "$BIN/report" --run-dir "$TMP/run" -o "$TMP/rep" -q
  report_refused "$TMP/run/features.h5" "is not a regular file (a FIFO, socket or device?), expected an HDF5 file"
  run timeout 20 "$BIN/report" --info "$TMP/fifo.h5"
  [ "$status" -eq 1 ] && [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"fifo.h5: is not a regular file"* ]]
  # An HDF5 external link to the FIFO: refused without being followed.
  f=$(features_with "del F['test/features']
F['test/features'] = h5py.ExternalLink('fifo.h5', '/x')")
  run timeout 20 "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/test/features is an external link to fifo.h5:/x; toolkit files must hold their own data"
}

@test "shapes not backed by the file, features a reader refuses: named with the dataset" {
  local f
  # A contiguous dataset of 10^9 rows never written (HDF5 allocates it late: no storage).
  f=$(features_with "d = F['test/features'].shape[1]
del F['test/features']
F.create_dataset('test/features', shape=(10**9, d), dtype='f4')")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/test/features has shape [1000000000,$(h5_dim)] but not all of its data was ever written (truncated or corrupted file?)"

  # A chunked dataset of 10^9 rows of which one chunk was written.
  f=$(features_with "d = F['test/features'].shape[1]
del F['test/features']
ds = F.create_dataset('test/features', shape=(10**9, d), dtype='f4', chunks=(64, d))
ds[:64] = 1")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/test/features has shape [1000000000,$(h5_dim)] but not all of its data was ever written (truncated or corrupted file?)"

  # NaN and infinity in the rows the 2-D view reads; a float64 beyond float32's range.
  local bad
  for bad in "np.nan:NaN" "np.inf:infinite" "1e300:infinite"; do
    f=$(features_with "x = F['test/features'][()].astype('f8'); x[7, 3] = ${bad%%:*}
del F['test/features']
F['test/features'] = x")
    run "$BIN/report" --features "$f" -o "$TMP/rep" -q
    report_refused "$f" "/test/features row 7 feature 3 is ${bad#*:} (features must be finite)"
  done

  # Integer features, labels of another length, negative or beyond the class names, a
  # latent_shape that does not hold D.
  f=$(features_with "x = F['train/features'][()]
del F['train/features']
F['train/features'] = (x * 100).astype('i4')")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/train/features has dtype int32, expected float"
  f=$(features_with "y = F['test/labels'][()]
del F['test/labels']
F['test/labels'] = y[:-1]")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/test/labels has shape [$(( $(h5_rows test) - 1 ))], expected [$(h5_rows test)]"
  f=$(features_with "y = F['test/labels'][()].astype('i8'); y[5] = -2
del F['test/labels']
F['test/labels'] = y")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/test/labels[5] = -2 is negative (labels are class indices 0, 1, ...)"
  f=$(features_with "y = F['test/labels'][()]; y[4] = 10
F['test/labels'][...] = y")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/test/labels[4] = 10 is not a class 0..9"
  f=$(features_with "F.attrs['latent_shape'] = np.array([3, 5, 7], dtype='i8')")
  run "$BIN/report" --features "$f" -o "$TMP/rep" -q
  report_refused "$f" "/train/features has $(h5_dim) features per row, but latent_shape [3,5,7] holds 105"
}

# The full run's features per row and test rows.
h5_dim() {
  "$PYTHON" -c "import h5py; print(h5py.File('$RUNS/full/features.h5', 'r')['test/features'].shape[1])"
}
h5_rows() {
  "$PYTHON" -c "import h5py; print(h5py.File('$RUNS/full/features.h5', 'r')['$1/features'].shape[0])"
}

@test "class names that are not UTF-8 read as Latin-1; names with markup and controls give well-formed pages" {
  mkdir "$TMP/run"
  cp "$RUNS/full/"*.h5 "$TMP/run/"
  # Raw bytes as older files hold them: Latin-1 é, ï and ÿ, a lone UTF-8 lead byte, and
  # names with <, &, a newline, ESC, | and backticks; as variable-length strings of both
  # character sets and as fixed-length ones.
  "$PYTHON" - "$TMP/run" <<'PY'
import h5py, numpy as np, sys
names = [b"caf\xe9", b"na\xefve <b>&amp;", b"a\nb", b"\x1b[31mred", b"p|q", b"`tick`", b"caf\xc3\xa9 \xff",
         b"\xe2x", b"$x$", b"plain"]
for kind, how in (("features", "utf-8"), ("svm", "ascii"), ("eval", "fixed")):
    with h5py.File(f"{sys.argv[1]}/{kind}.h5", "r+") as f:
        del f.attrs["class_names"]
        if how == "fixed":
            f.attrs["class_names"] = np.array(names, dtype="S24")
        else:
            f.attrs.create("class_names", np.array(names, dtype=object), dtype=h5py.string_dtype(how))
# svm-eval's per-class metrics: the per-class table names every class.
with h5py.File(f"{sys.argv[1]}/eval.h5", "r+") as f:
    c = f["confusion"][()]
    recall, precision = np.diag(c) / c.sum(axis=1), np.diag(c) / np.maximum(c.sum(axis=0), 1)
    f["metrics/precision"], f["metrics/recall"], f["metrics/support"] = precision, recall, c.sum(axis=1)
    f["metrics/f1"] = 2 * precision * recall / np.maximum(precision + recall, 1e-9)
PY
  run "$BIN/report" --run-dir "$TMP/run" -o "$TMP/rep" --json -q
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ -s "$TMP/rep/confusion.png" ] && [ -s "$TMP/rep/per_class_accuracy.png" ] && [ -s "$TMP/rep/features_pca.png" ]
  "$PYTHON" - "$TMP/rep" "$output" <<'PY'
import html.parser, json, re, sys
rep, line = sys.argv[1:]
page = open(f"{rep}/index.html", encoding="utf-8").read()  # strict: valid UTF-8 or this fails
md = open(f"{rep}/report.md", encoding="utf-8").read()
# Latin-1 bytes became their characters; valid UTF-8 stayed as it was; a lone lead byte is â.
for text in ("café", "naïve", "café ÿ", "âx"):
    assert text in page and text in md, text
assert "\ufffd" not in page + md and not re.search("[\ud800-\udfff]", page + md)
# No markup or control character from a name: escaped in HTML, in Markdown, shown as \n, \e.
assert "<b>" not in page and "&lt;b&gt;&amp;amp;" in page
assert "\x1b" not in page + md and "\\e[31mred" in page
assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", page + md)
assert "a\\nb" in page and "\na b" not in md
# The HTML parses with every element closed in order.
class Check(html.parser.HTMLParser):
    VOID = {"meta", "img", "br", "hr", "link", "input", "col", "source", "wbr"}
    def __init__(self):
        super().__init__(); self.stack = []
    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)
    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()
c = Check(); c.feed(page); c.close()
assert not c.stack, c.stack
# Markdown: every table row has as many unescaped | as its header; the names escaped.
for table in re.findall(r"(?:^\|.*\n)+", md, flags=re.M):
    rows = table.splitlines()
    assert len({len(re.findall(r"(?<!\\)\|", r)) for r in rows}) == 1, rows
assert "p\\|q" in md and "\\`tick\\`" in md and "\\<b\\>" in md
# --json: one line, valid JSON, the names as text.
summary = json.loads(line)
assert "\n" not in line
PY
  # --info prints the names on one line each, Latin-1 read as such.
  run "$BIN/report" --info "$TMP/run/eval.h5"
  [ "$status" -eq 0 ]
  [[ "$output" == *"café"*"naïve"* ]]
  ! printf '%s\n' "$output" | grep -q $'\x1b'
}

@test "a dataset changed after the toolkit wrote it fails its block checksum, as in the C++ readers" {
  # eval.h5 as svm-eval writes it: every dataset carries its blocks' CRC-32 (crc32, crc32_rows).
  "$PYTHON" "$REPO_ROOT/tests/python/formats_check.py" make-plain "$TMP/plain.h5" --names
  "$BIN/svm-fit" -q --features "$TMP/plain.h5" -o "$TMP/svm.h5"
  "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/plain.h5" -o "$TMP/eval.h5"
  run "$BIN/report" --eval "$TMP/eval.h5" -o "$TMP/ok" -q
  [ "$status" -eq 0 ] && [ -s "$TMP/ok/index.html" ]
  # One count moved off the diagonal in place (sums unchanged, the attributes kept).
  local k
  k=$("$PYTHON" - "$TMP/eval.h5" <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    ds = f["confusion"]
    assert "crc32" in ds.attrs and "crc32_rows" in ds.attrs, dict(ds.attrs)
    c = ds[()]
    i = int(c.diagonal().argmax())
    c[i, i] -= 1
    c[i, (i + 1) % len(c)] += 1
    ds[...] = c
    print(len(c))
PY
)
  run "$BIN/report" --eval "$TMP/eval.h5" -o "$TMP/rep" -q
  report_refused "$TMP/eval.h5" "/confusion rows 0 to $((k - 1)) do not match their checksum (the file changed after it was written: damaged on disk or in a copy)"
}
