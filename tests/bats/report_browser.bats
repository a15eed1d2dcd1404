#!/usr/bin/env bats
# The report page in a real browser (Debian's headless Chromium): rendered 1280 and 600 px
# wide, the page never scrolls sideways, every image loads, and the title names the
# dataset. The screenshots stay in the build folder (build/report-screenshot-WIDTH.png)
# for a person to look at. Without Chromium the tests skip, except in CI (CI=true), which
# installs it (tools/install-deps.sh) and so must have it.

load helpers

setup_file() {
  export RUN="$BATS_FILE_TMPDIR/run" REP="$BATS_FILE_TMPDIR/report"
  {
    "$PYTHON" "$REPO_ROOT/tests/helpers/fake_run.py" --out "$RUN" --epochs 20 &&
    "$PYTHON" "$REPO_ROOT/tests/helpers/gen_datasets.py" idx "$BATS_FILE_TMPDIR/fashion" --gz --train 40 --test 400 &&
    "$BIN/cifar-convert" -q --input "$BATS_FILE_TMPDIR/fashion" -o "$BATS_FILE_TMPDIR/fashion-mnist.h5" &&
    # The run was trained on that file: its model and features record it as their data.
    "$PYTHON" - "$RUN" "$BATS_FILE_TMPDIR/fashion-mnist.h5" <<'PY' &&
import h5py, json, sys
folder, data = sys.argv[1], sys.argv[2]
for name, index in (("model.h5", 0), ("features.h5", 1)):
    with h5py.File(f"{folder}/{name}", "r+") as f:
        inputs = json.loads(f.attrs["inputs"])
        inputs[index]["name"] = data
        f.attrs["inputs"] = json.dumps(inputs)
PY
    "$BIN/report" -q --run-dir "$RUN" -o "$REP"
  } > "$BATS_FILE_TMPDIR/setup.log" 2>&1
  echo $? > "$BATS_FILE_TMPDIR/setup.rc"
}

setup() {
  [ "$(cat "$BATS_FILE_TMPDIR/setup.rc")" -eq 0 ] || { cat "$BATS_FILE_TMPDIR/setup.log"; return 1; }
  CHROMIUM="$(command -v chromium-headless-shell || command -v chromium || true)"
  if [ -z "$CHROMIUM" ]; then
    [ "${CI:-}" != true ] || { echo "CI=true but no chromium-headless-shell or chromium (make deps)"; return 1; }
    skip "no headless Chromium (chromium-headless-shell or chromium: make deps)"
  fi
}

# Renders the report WIDTH px wide and checks what the reader sees.
check_width() {
  local width="$1" shot="$BUILD/report-screenshot-$1.png"
  rm -f "$shot"
  run "$PYTHON" "$REPO_ROOT/tests/helpers/browser_probe.py" "$CHROMIUM" "$REP" "$width" "$shot"
  [ "$status" -eq 0 ] || { echo "$output"; return 1; }
  "$PYTHON" - "$output" "$width" "$REP" <<'PY'
import json, os, sys
seen, width, rep = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
assert seen["width"] == width, seen
# No sideways scrolling: the page is no wider than the window.
assert seen["scrollWidth"] <= width, f"the page is {seen['scrollWidth']} px wide in a {width} px window: {seen['wide']}"
# Every picture of the report folder is on the page, and loaded.
pngs = sorted(n for n in os.listdir(rep) if n.endswith(".png"))
assert seen["images"] == len(pngs) >= 6 and not seen["broken"], (seen, pngs)
assert seen["title"] == seen["h1"] == "Fashion-MNIST: autoencoder features → SVM", seen
PY
  # The screenshot is a real picture of the page at that width.
  "$PYTHON" -c "
import sys, matplotlib.image as mpimg
img = mpimg.imread(sys.argv[1])
assert img.shape[1] == int(sys.argv[2]) and img.shape[0] >= 1000 and img[..., :3].std() > 0.05, img.shape" \
    "$shot" "$width"
}

@test "1280 px wide: no sideways scrolling, every image loaded, the dataset in the title; screenshot kept" {
  check_width 1280
}

@test "600 px wide (a phone or a narrow window): the same" {
  check_width 600
}
