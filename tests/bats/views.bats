
@test "svm-eval --ranks 2 --tta flip,shift:1 writes the one-process evaluation" {
  "$BIN/svm-fit" -q --device cpu --features "$VIEWS_DIR/views.h5" --augment shift:1 -o "$TMP/svm.h5"
  local args=(--device cpu --model "$TMP/svm.h5" --features "$VIEWS_DIR/views.h5" --tta flip,shift:1 --decision-values)
  "$BIN/svm-eval" -q "${args[@]}" -o "$TMP/one.h5"
  run "$BIN/svm-eval" "${args[@]}" --ranks 2 -o "$TMP/two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  "$PYTHON" - "$TMP/one.h5" "$TMP/two.h5" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert a.attrs["tta"] == b.attrs["tta"] == "flip,shift:1"
assert np.array_equal(a["predictions"][...], b["predictions"][...])
np.testing.assert_allclose(a["decision_values"][...], b["decision_values"][...], rtol=0, atol=1e-5)
assert np.abs(a["decision_values"][...]).max() > 0.01
PY
}
