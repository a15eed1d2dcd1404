#!/usr/bin/env bats
# The tools on a group of CPU ranks (docs/MULTI_GPU.md): svm-fit with --ranks 2 (two
# processes exchanging results through files beside -o) writes the model a single process
# writes, dataset for dataset; the group's options are checked before any work.

load helpers

PARITY="$REPO_ROOT/tests/python/sklearn_parity.py"

setup_file() {
  export GROUP_DIR="$BATS_FILE_TMPDIR/group"
  mkdir -p "$GROUP_DIR"
  # 600 train / 200 test rows, 64 features, 10 overlapping classes: 45 pairs to share.
  "$PYTHON" "$PARITY" make-features "$GROUP_DIR/features.h5" --train 600 --test 200 --dim 64 --noise 1.5 --seed 5
}

setup() {
  TMP="$(mktemp -d "${BATS_TMPDIR:-/tmp}/group.XXXXXX")"
}

teardown() {
  rm -rf "$TMP"
}

# Every dataset and attribute of two HDF5 files equal, bit for bit, except the provenance
# and timing attributes named in $3 (comma-separated).
same_hdf5() {
  "$PYTHON" - "$1" "$2" "$3" <<'PY'
import sys, h5py, numpy as np
a, b, skip = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), set(sys.argv[3].split(","))
names = []
a.visit(names.append)
other = []
b.visit(other.append)
assert names == other, (names, other)
checked = 0
for n in names:
    if isinstance(a[n], h5py.Dataset):
        x, y = a[n][()], b[n][()]
        assert x.dtype == y.dtype and x.shape == y.shape, n
        assert x.tobytes() == y.tobytes(), "dataset %s differs" % n
        checked += 1
for obj_a, obj_b in [(a, b)] + [(a[n], b[n]) for n in names]:
    keys = set(obj_a.attrs) - skip
    assert keys == set(obj_b.attrs) - skip, (obj_a.name, keys ^ (set(obj_b.attrs) - skip))
    for k in keys:
        assert np.array_equal(np.asarray(obj_a.attrs[k]), np.asarray(obj_b.attrs[k])), (obj_a.name, k)
assert checked >= 3, checked
print("same: %d datasets" % checked)
PY
}

SKIP_ATTRS="params,created,created_at,predict_seconds,fit_seconds,cv_seconds,probability_seconds,seconds,command,git_version,hostname"

@test "svm-fit --ranks 2 writes the one-process model bit for bit, and leaves no group files" {
  "$BIN/svm-fit" -q --device cpu --features "$GROUP_DIR/features.h5" -o "$TMP/one.h5" --C 3
  run "$BIN/svm-fit" --device cpu --ranks 2 --threads 1 --features "$GROUP_DIR/features.h5" -o "$TMP/two.h5" --C 3
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"a group of 2 ranks"* ]]
  run same_hdf5 "$TMP/one.h5" "$TMP/two.h5" "$SKIP_ATTRS"
  echo "$output"
  [ "$status" -eq 0 ]
  # Only the model: no exchange file, heartbeat or temporary file stays beside it.
  [ "$(ls -A "$TMP")" = "$(printf 'one.h5\ntwo.h5')" ]
}

@test "svm-fit on a group: the cross-validated grid and the probability model equal one process's" {
  local args=(--device cpu --features "$GROUP_DIR/features.h5" --cv 3 --C 1,3 --gamma 0.5x,scale --probability)
  "$BIN/svm-fit" -q "${args[@]}" -o "$TMP/one.h5"
  # Ranks started by hand, as a launcher (srun, torchrun) would: --rank/--world-size/--rendezvous.
  "$BIN/svm-fit" -q "${args[@]}" -o "$TMP/two.h5" --rank 1 --world-size 2 --rendezvous "$TMP/launch" &
  local other=$!
  run "$BIN/svm-fit" "${args[@]}" -o "$TMP/two.h5" --rank 0 --world-size 2 --rendezvous "$TMP/launch"
  wait "$other"
  [ "$status" -eq 0 ]
  run same_hdf5 "$TMP/one.h5" "$TMP/two.h5" "$SKIP_ATTRS"
  echo "$output"
  [ "$status" -eq 0 ]
  "$PYTHON" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert '/model_selection' in f and '/svm/probA' in f, list(f)" "$TMP/two.h5"
}

@test "svm-fit on a group: a rank that never comes is named within --group-timeout, and nothing is written" {
  run timeout 60 "$BIN/svm-fit" --device cpu --features "$GROUP_DIR/features.h5" -o "$TMP/svm.h5" \
    --rank 0 --world-size 2 --rendezvous "$TMP/launch" --group-timeout 2
  [ "$status" -eq 1 ]
  [[ "$output" == *"rank 1 of 2"*"no sign of life"* ]]
  assert_no_output "$TMP/svm.h5"
}

@test "group options are checked before any work" {
  run "$BIN/svm-fit" --device cpu --features "$GROUP_DIR/features.h5" -o "$TMP/svm.h5" --gpus 2
  assert_error 2 "--gpus needs --device gpu"
  run "$BIN/svm-fit" --device cpu --features "$GROUP_DIR/features.h5" -o "$TMP/svm.h5" --ranks 2 --rank 0 --world-size 2
  assert_error 2 "--ranks starts the ranks itself"
  run "$BIN/svm-fit" --device cpu --features "$GROUP_DIR/features.h5" -o "$TMP/svm.h5" --rank 0 --world-size 2
  assert_error 2 "needs --rendezvous PATH"
  WORLD_SIZE=2 RANK=5 run "$BIN/svm-fit" --device cpu --features "$GROUP_DIR/features.h5" -o "$TMP/svm.h5"
  assert_error 2 "WORLD_SIZE=2 but RANK is 5"
  run "$BIN/svm-fit" --help
  [[ "$output" == *"--ranks INT in [1, 64]"*"not a group"* ]]
  assert_no_output "$TMP/svm.h5"
}

@test "svm-eval --ranks 2 writes the one-process evaluation bit for bit" {
  # Enough test rows for two of the CPU's row blocks (4,096 rows at this model's ~600
  # support vectors): the ranks split at block edges, one thread each like the single run.
  "$PYTHON" "$PARITY" make-features "$TMP/f.h5" --train 600 --test 6000 --dim 32 --noise 1.5 --seed 6
  "$BIN/svm-fit" -q --device cpu --features "$TMP/f.h5" -o "$TMP/svm.h5" --C 3
  local args=(--device cpu --threads 1 --model "$TMP/svm.h5" --features "$TMP/f.h5" --decision-values)
  "$BIN/svm-eval" -q "${args[@]}" -o "$TMP/one.h5"
  run "$BIN/svm-eval" "${args[@]}" --ranks 2 -o "$TMP/two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  run same_hdf5 "$TMP/one.h5" "$TMP/two.h5" "$SKIP_ATTRS"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(ls -A "$TMP" | sort | tr '\n' ' ')" = "f.h5 one.h5 svm.h5 two.h5 " ]
}

@test "ae-encode --ranks 2 (with --flip) writes the one-process features bit for bit" {
  make_dataset "$TMP/data.h5" 70 30
  "$BIN/ae-train" --device cpu --quiet --data "$TMP/data.h5" --epochs 1 --batch-size 16 --seed 3 --threads 1 \
    --encoder-channels 8,4 -o "$TMP/model.h5"
  local args=(--device cpu --model "$TMP/model.h5" --data "$TMP/data.h5" --flip --batch-size 16)
  "$BIN/ae-encode" -q "${args[@]}" --threads 1 -o "$TMP/one.h5"
  run "$BIN/ae-encode" "${args[@]}" --ranks 2 -o "$TMP/two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  run same_hdf5 "$TMP/one.h5" "$TMP/two.h5" "$SKIP_ATTRS,images_per_second,device"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "--help and provenance say what a default means, never a stand-in number" {
  local tool line
  for tool in cifar-convert ae-train ae-encode svm-fit svm-eval classify; do
    run "$BIN/$tool" --help
    [ "$status" -eq 0 ]
    [[ "$output" != *"(default -1)"* ]] || { echo "$tool shows a stand-in default"; false; }
    # Options whose 0 or -1 stands for a rule: each says what it means.
    while read -r line; do
      [[ "$line" == *"(default: "* ]] || { echo "$tool: $line"; false; }
    done < <(grep -E -- "^ *--(val-split|train-limit|test-limit|threads|gpus|ranks|rank|world-size|local-rank|limit|cv|rendezvous|cache-mb) " <<< "$output")
  done
  run "$BIN/ae-train" --help
  [[ "$output" == *"--val-split INT >= 0 (default: a tenth of the training images"* ]]
  [[ "$output" == *"--gpus INT in [1, 64] (default: one GPU, not a group)"* ]]
  # The params attribute records the effective value or the meaning.
  "$BIN/svm-fit" -q --device cpu --features "$GROUP_DIR/features.h5" -o "$TMP/svm.h5"
  "$PYTHON" - "$TMP/svm.h5" <<'PY'
import sys, json, h5py
p = json.loads(h5py.File(sys.argv[1], "r").attrs["params"])
assert p["train-limit"] == "all" and p["rank"].endswith("not in a group") and p["ranks"] == "one process, not a group", p
assert p["threads"].isdigit() and int(p["threads"]) >= 1, p
assert p["cache-mb"].isdigit() and int(p["cache-mb"]) >= 64, p
assert not [k for k, v in p.items() if v in ("-1", "0") and k in ("threads", "rank", "world-size", "gpus", "ranks", "train-limit", "cv", "cache-mb")], p
PY
}
