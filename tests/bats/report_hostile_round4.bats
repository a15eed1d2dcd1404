#!/usr/bin/env bats
# The report's gaps left by issue 60 (docs/RELIABILITY.md, round 4, classes 3, 4, 5 and 8):
# every row of the features it reads is checked against its block CRC-32 and for NaN and
# infinities, not only the 2-D view's sample; class names are refused where and as the C++
# readers refuse them (common/class_names.cpp), and so are labels of a plain file that would
# size a class table; a Latin-1 class folder name that came through the whole pipeline gives
# a valid UTF-8 page that shows it.

load helpers

setup() {
  report_setup report-round4
}

teardown() {
  rm -rf "$TMP"
}

# checked OUT: a plain features file of 4 classes, float16 [N, 1024] (600 train rows, 3000
# test rows: more than the 2-D view samples), with the block checksums computed as
# common/hdf5_checksum.cpp does (blocks of 512 rows here); the C++ readers accept it.
checked() {
  "$PYTHON" - "$1" <<'PY'
import sys, zlib, h5py, numpy as np
rng = np.random.default_rng(7)
centres = rng.normal(0, 2, (4, 1024))

def block_rows(rows, row_bytes):
    r = 1
    while r * 2 * row_bytes <= 1 << 20:
        r *= 2
    while -(-rows // r) > 4096:
        r *= 2
    return r

def put(f, name, x):
    ds = f.create_dataset(name, data=x)
    r = block_rows(len(x), x[0].nbytes)
    ds.attrs["crc32"] = np.array([zlib.crc32(np.ascontiguousarray(x[b:b + r])) for b in range(0, len(x), r)],
                                 dtype=np.uint32)
    ds.attrs["crc32_rows"] = np.int64(r)

with h5py.File(sys.argv[1], "w") as f:
    f.attrs.create("class_names", ["north", "east", "south", "west"], dtype=h5py.string_dtype("utf-8"))
    for split, n in (("train", 600), ("test", 3000)):
        y = np.arange(n) % 4
        put(f, f"{split}/features", (centres[y] + rng.normal(0, 0.5, (n, 1024))).astype(np.float16))
        put(f, f"{split}/labels", y.astype(np.int64))
PY
}

# The last row of the test features that the 2-D view does not sample (the view's own rule,
# load.py); the training rows are never sampled (the view shows the test split).
unsampled_row() {
  PYTHONPATH="$REPO_ROOT/tools" "$PYTHON" - "$1" <<'PY'
import sys, h5py, numpy as np
from report_lib import load
with h5py.File(sys.argv[1], "r") as f:
    n = f["test/features"].shape[0]
picked = set(np.random.default_rng(load.PCA_SEED).choice(n, size=min(n, load.PCA_ROWS), replace=False).tolist())
print(next(r for r in range(n - 1, -1, -1) if r not in picked))
PY
}

# change FILE SNIPPET: runs SNIPPET on h5py.File F (r+), the checksum attributes kept.
change() {
  "$PYTHON" -c "import h5py, numpy as np
F = h5py.File('$1', 'r+')
$2
F.close()"
}

@test "a changed byte or a NaN in a row the 2-D view does not sample is refused, in either split" {
  checked "$TMP/ok.h5"
  run "$BIN/report" --features "$TMP/ok.h5" -o "$TMP/ok" -q
  [ "$status" -eq 0 ] && [ -s "$TMP/ok/features_pca.png" ] || { echo "$output"; false; }
  # The C++ readers accept the file as written (its checksums are the toolkit's).
  "$BIN/svm-fit" -q --features "$TMP/ok.h5" --device cpu -o "$TMP/svm.h5"
  "$BIN/svm-eval" -q --model "$TMP/svm.h5" --features "$TMP/ok.h5" --device cpu -o "$TMP/e.h5"

  local split n row first last
  for split in test train; do
    n=$([ "$split" = test ] && echo 3000 || echo 600)
    row=$([ "$split" = test ] && unsampled_row "$TMP/ok.h5" || echo 550)
    first=$(( row / 512 * 512 ))
    last=$(( first + 511 < n - 1 ? first + 511 : n - 1 ))
    # One value moved in place, still finite: only its block's checksum tells.
    cp "$TMP/ok.h5" "$TMP/f.h5"
    change "$TMP/f.h5" "d = F['$split/features']; x = d[$row]; x[5] += 1; d[$row] = x"
    run "$BIN/report" --features "$TMP/f.h5" -o "$TMP/rep" -q
    report_refused "$TMP/f.h5" "/$split/features rows $first to $last do not match their checksum (the file changed after it was written: damaged on disk or in a copy)"
    # As the C++ reader of that split refuses it.
    if [ "$split" = train ]; then
      run "$BIN/svm-fit" --features "$TMP/f.h5" --device cpu -o "$TMP/svm2.h5"
    else
      run "$BIN/svm-eval" --model "$TMP/svm.h5" --features "$TMP/f.h5" --device cpu -o "$TMP/e2.h5"
    fi
    assert_error 1 "f.h5: .*$split/features.*checksum"

    # NaN and infinity where no checksum is kept (an h5py file), and a float64 too large
    # for float32.
    local bad
    for bad in "np.nan:NaN" "np.inf:infinite" "1e300:infinite"; do
      cp "$TMP/ok.h5" "$TMP/f.h5"
      change "$TMP/f.h5" "x = F['$split/features'][()].astype('f8'); x[$row, 9] = ${bad%%:*}
del F['$split/features']
F['$split/features'] = x"
      run "$BIN/report" --features "$TMP/f.h5" -o "$TMP/rep" -q
      report_refused "$TMP/f.h5" "/$split/features row $row feature 9 is ${bad#*:} (features must be finite)"
    done
  done
}

@test "chunked and compressed features, a split too small to draw, damaged checksum attributes: every row still checked" {
  checked "$TMP/ok.h5"
  cp "$TMP/ok.h5" "$TMP/f.h5"
  change "$TMP/f.h5" "x = F['train/features'][()]; x[-1, -1] = np.nan
del F['train/features']
F.create_dataset('train/features', data=x, chunks=(7, 1024), compression='gzip')"
  run "$BIN/report" --features "$TMP/f.h5" -o "$TMP/rep" -q
  report_refused "$TMP/f.h5" "/train/features row 599 feature 1023 is NaN (features must be finite)"
  # A split too small for the 2-D view is still read and checked.
  cp "$TMP/ok.h5" "$TMP/f.h5"
  change "$TMP/f.h5" "x = F['test/features'][:2].astype('f4'); x[1, 2] = np.inf; y = F['test/labels'][:2]
del F['test/features'], F['test/labels']
F['test/features'], F['test/labels'] = x, y"
  run "$BIN/report" --features "$TMP/f.h5" -o "$TMP/rep" -q
  report_refused "$TMP/f.h5" "/test/features row 1 feature 2 is infinite (features must be finite)"
  # Damaged checksum attributes are named, as checksum_problem names them.
  cp "$TMP/ok.h5" "$TMP/f.h5"
  change "$TMP/f.h5" "F['test/features'].attrs['crc32_rows'] = np.int64(0)"
  run "$BIN/report" --features "$TMP/f.h5" -o "$TMP/rep" -q
  report_refused "$TMP/f.h5" "/test/features has a damaged checksum attribute (crc32, crc32_rows)"
}

# names FILE JSON [fixed]: FILE's class_names replaced by the JSON list (\u00XX: a raw byte),
# as variable-length UTF-8 strings or (fixed) fixed-length null-padded ones.
names() {
  "$PYTHON" - "$@" <<'PY'
import json, sys, h5py, numpy as np
raw = [n.encode("latin-1") for n in json.loads(sys.argv[2])]
with h5py.File(sys.argv[1], "r+") as f:
    del f.attrs["class_names"]
    if len(sys.argv) > 3:
        f.attrs["class_names"] = np.array(raw, dtype=f"S{max(len(n) for n in raw) + 2}")
    else:
        f.attrs.create("class_names", np.array(raw, dtype=object), dtype=h5py.string_dtype("utf-8"))
PY
}

@test "class names the C++ readers refuse (empty, NUL, over 255 bytes of UTF-8, repeated) are refused by the report" {
  checked "$TMP/ok.h5"
  local long255 long128
  long255=$("$PYTHON" -c 'print("\"" + "n" * 255 + "\"")')
  long128=$("$PYTHON" -c 'print("\"" + "\\u00e9" * 128 + "\"")')  # 128 Latin-1 bytes: 256 of UTF-8
  local -a cases=(
    '["north", "", "south", "west"]|fixed|class 1 has an empty name'
    '["north", "ea\u0000st", "south", "west"]|fixed|class 1 ('"'"'ea\x00st'"'"'): a class name may not hold a NUL byte'
    '["north", "east", "south", '"$long128"']||class 3 ('"'"'\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9...'"'"'): a class name is at most 255 bytes of UTF-8, this one 256'
    '["north", "east", "north", "west"]||class 0 ('"'"'north'"'"') and class 2 ('"'"'north'"'"') are one class name (class names must be distinct)'
    '["caf\u00c3\u00a9", "east", "caf\u00e9", "west"]||class 0 ('"'"'café'"'"') and class 2 ('"'"'caf\xe9'"'"') are one class name, the same name once bytes that are not UTF-8 are read as Latin-1 (class names must be distinct)'
  )
  local c json how want
  for c in "${cases[@]}"; do
    IFS='|' read -r json how want <<<"$c"
    cp "$TMP/ok.h5" "$TMP/f.h5"
    names "$TMP/f.h5" "$json" $how
    run "$BIN/report" --features "$TMP/f.h5" -o "$TMP/rep" -q
    report_refused "$TMP/f.h5" "$want"
    # The C++ features reader refuses the same file.
    run "$BIN/svm-fit" --features "$TMP/f.h5" --device cpu -o "$TMP/svm.h5"
    [ "$status" -eq 1 ] && [ "${#lines[@]}" -eq 1 ] && [[ "$output" == *"f.h5: class "* ]] || { echo "svm-fit: $output"; false; }
  done
  # 255 bytes is allowed, by both.
  cp "$TMP/ok.h5" "$TMP/f.h5"
  names "$TMP/f.h5" '["north", "east", "south", '"$long255"']'
  run "$BIN/report" --features "$TMP/f.h5" -o "$TMP/rep" -q
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  "$BIN/svm-fit" -q --features "$TMP/f.h5" --device cpu -o "$TMP/svm.h5"
}

@test "a Latin-1 class folder name through cifar-convert, ae-train, ae-encode, svm-fit and svm-eval: the report's pages are UTF-8 and show it" {
  make_image_folder "$TMP/f" '"caf\u00e9"' '"dog"' '"\u00e7a\u00ff"'
  [ -d "$TMP/f/train/caf"$'\xe9' ]  # the folder's name is the Latin-1 byte, not UTF-8
  mkdir "$TMP/run"
  "$BIN/cifar-convert" -q --input "$TMP/f" -o "$TMP/d.h5"
  "$BIN/ae-train" -q --data "$TMP/d.h5" --epochs 1 --batch-size 6 --encoder-channels 4,4 --val-split 0 --device cpu \
    -o "$TMP/run/model.h5"
  "$BIN/ae-encode" -q --model "$TMP/run/model.h5" --data "$TMP/d.h5" --device cpu -o "$TMP/run/features.h5"
  "$BIN/svm-fit" -q --features "$TMP/run/features.h5" --device cpu -o "$TMP/run/svm.h5"
  "$BIN/svm-eval" -q --model "$TMP/run/svm.h5" --features "$TMP/run/features.h5" --device cpu -o "$TMP/run/eval.h5"
  run "$BIN/report" --run-dir "$TMP/run" -o "$TMP/rep" --json -q
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ -s "$TMP/rep/index.html" ] && [ -s "$TMP/rep/report.md" ]
  "$PYTHON" - "$TMP/rep" "$output" <<'PY'
import html.parser, json, re, sys
rep, line = sys.argv[1:]
# Strict decoding: a byte that is not UTF-8 fails here.
page = open(f"{rep}/index.html", "rb").read().decode("utf-8")
md = open(f"{rep}/report.md", "rb").read().decode("utf-8")
for name in ("café", "çaÿ", "dog"):
    assert name in page and name in md, name
assert "\ufffd" not in page + md and not re.search("[\ud800-\udfff]", page + md)
assert "caf\\x" not in page + md and "caf\\\\x" not in page + md  # shown as the letter, not escaped
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
json.loads(line)
PY
  [ -s "$TMP/rep/examples.png" ]
  # The dataset file's test images, drawn as examples, are checked against their blocks'
  # checksums: a changed image is not drawn, and a note says why.
  cp "$TMP/d.h5" "$TMP/d-good.h5"
  "$PYTHON" -c "import h5py
with h5py.File('$TMP/d.h5', 'r+') as f:
    x = f['test/images'][0]; x[0, 0, 0] ^= 0x55; f['test/images'][0] = x"
  run "$BIN/report" --run-dir "$TMP/run" -o "$TMP/rep1" -q
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ ! -e "$TMP/rep1/examples.png" ]
  grep -q "no pictures of test images: $TMP/d.h5: /test/images rows 0 to 5 do not match their checksum" "$TMP/rep1/report.md"
  mv "$TMP/d-good.h5" "$TMP/d.h5"
  # The dataset file, read for the report's words and pictures, names the classes too: a
  # repeated name there (written by h5py) is the dataset reader's refusal, shown as a note.
  "$PYTHON" -c "import h5py
with h5py.File('$TMP/d.h5', 'r+') as f:
    del f.attrs['class_names']
    f.attrs.create('class_names', ['dog', 'dog', 'owl'], dtype=h5py.string_dtype('utf-8'))"
  run "$BIN/report" --run-dir "$TMP/run" -o "$TMP/rep2" -q
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  grep -q "are one class name" "$TMP/rep2/report.md"
}

@test "a plain features file without class names: a label of 65,536 or more is refused, as the features reader refuses it" {
  "$PYTHON" "$REPO_ROOT/tests/python/formats_check.py" make-plain "$TMP/p.h5"
  "$PYTHON" -c "import h5py, numpy as np
with h5py.File('$TMP/p.h5', 'r+') as f:
    y = f['train/labels'][()].astype('i8'); y[3] = 2**31 - 1
    del f['train/labels']; f['train/labels'] = y"
  run "$BIN/report" --features "$TMP/p.h5" -o "$TMP/rep" -q
  report_refused "$TMP/p.h5" "/train/labels holds 2147483647: without a class_names attribute the classes are 0..the largest label, at most 65536 of them (give class_names)"
  run "$BIN/svm-fit" --features "$TMP/p.h5" --device cpu -o "$TMP/svm.h5"
  assert_error 1 "p.h5: /train/labels holds 2147483647: without a class_names attribute"
}
