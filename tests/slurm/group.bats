#!/usr/bin/env bats
# The tools on a group of ranks started by Slurm itself (docs/MULTI_GPU.md): `srun --ntasks=2`
# launches two CPU ranks of svm-fit, svm-eval and ae-encode, which find their place from
# SLURM_PROCID / SLURM_STEP_NUM_TASKS and exchange their results through files beside -o
# (named after the job step); each output equals the one-process run's. ae-train's group is
# GPU/NCCL only (data-parallel training on CPUs is not implemented), so it is not here.

load helpers

setup_file() {
  export WORK="$BATS_FILE_TMPDIR/group"
  mkdir -p "$WORK"
  "$PYTHON" "$REPO_ROOT/tests/python/sklearn_parity.py" make-features "$WORK/features.h5" \
    --train 600 --test 200 --dim 64 --noise 1.5 --seed 5
}

# Every dataset of two HDF5 files equal, bit for bit.
same_datasets() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names, other = [], []
a.visit(names.append)
b.visit(other.append)
assert names == other, (names, other)
n = 0
for k in names:
    if isinstance(a[k], h5py.Dataset):
        assert a[k][()].tobytes() == b[k][()].tobytes(), "dataset %s differs" % k
        n += 1
assert n >= 3, n
print("same: %d datasets" % n)
PY
}

# srun of two one-CPU tasks, bounded (a hung step fails the test instead of the suite).
srun2() {
  timeout 240 srun --ntasks=2 --cpus-per-task=1 --mem=1G --chdir="$WORK" "$@"
}

@test "srun --ntasks=2 svm-fit (a cross-validated grid) writes the one-process model, and no group files stay" {
  local args=(--device cpu --threads 1 --features "$WORK/features.h5" --cv 3 --C 1,3 --gamma scale,2x)
  "$BIN/svm-fit" -q "${args[@]}" -o "$WORK/one.h5"
  run srun2 "$BIN/svm-fit" "${args[@]}" -o "$WORK/two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"a group of 2 ranks (slurm)"* ]]
  run same_datasets "$WORK/one.h5" "$WORK/two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
  [ -z "$(ls -A "$WORK" | grep '^\.' || true)" ]
}

@test "srun --ntasks=2 svm-eval and ae-encode write the one-process files" {
  "$BIN/svm-fit" -q --device cpu --features "$WORK/features.h5" -o "$WORK/svm.h5"
  local eval_args=(--device cpu --threads 1 --model "$WORK/svm.h5" --features "$WORK/features.h5" --decision-values)
  "$BIN/svm-eval" -q "${eval_args[@]}" -o "$WORK/eval-one.h5"
  run srun2 "$BIN/svm-eval" -q "${eval_args[@]}" -o "$WORK/eval-two.h5"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  run same_datasets "$WORK/eval-one.h5" "$WORK/eval-two.h5"
  echo "$output"
  [ "$status" -eq 0 ]

  make_dataset "$WORK/data.h5" 70 30
  "$BIN/ae-train" --device cpu --quiet --data "$WORK/data.h5" --epochs 1 --batch-size 16 --seed 3 --threads 1 \
    --encoder-channels 8,4 -o "$WORK/model.h5"
  local enc_args=(--device cpu --threads 1 --model "$WORK/model.h5" --data "$WORK/data.h5" --batch-size 16)
  "$BIN/ae-encode" -q "${enc_args[@]}" -o "$WORK/feat-one.h5"
  run srun2 "$BIN/ae-encode" -q "${enc_args[@]}" -o "$WORK/feat-two.h5"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  run same_datasets "$WORK/feat-one.h5" "$WORK/feat-two.h5"
  echo "$output"
  [ "$status" -eq 0 ]
}
