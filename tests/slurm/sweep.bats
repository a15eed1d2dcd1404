#!/usr/bin/env bats
# pipelines/slurm/sweep.sh on a real single-node Slurm (issue 18): a 3-run CPU sweep as one
# job array sharing one dataset (each task `make report` of its line's settings), then
# report --compare over the runs; a bad settings file
# is refused before anything is queued.

load helpers

setup_file() {
  export WORK="$BATS_FILE_TMPDIR/work"
  mkdir -p "$WORK/data"
  export CIF="$(learnable_fixture)"
}

setup() {
  cd "$WORK"
}

sweep() {
  env "${SMALL[@]}" BIN="$BIN" DATA_DIR="$WORK/data" CIFAR10_DIR="$CIF" PYTHON="$PYTHON" "$@"
}

@test "a 3-run CPU sweep runs as one job array on one dataset, then compares the runs" {
  # Two seeds of one setting (a mean and a spread) and one other SVM C. A small encoder
  # keeps the three trainings short.
  cat > "$WORK/settings.txt" <<'EOF'
# seeds of one architecture, and one other SVM setting
SEED=1 ENCODER_CHANNELS=16,8
SEED=2 ENCODER_CHANNELS=16,8

SEED=1 ENCODER_CHANNELS=16,8 FIT_FLAGS="--C 5"
EOF
  run sweep SWEEP_DIR="$WORK/sw" "$REPO_ROOT/pipelines/slurm/sweep.sh" "$WORK/settings.txt"
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" =~ submitted:\ convert\ ([0-9]+),\ array\ ([0-9]+)\ \(3\ runs\),\ compare\ ([0-9]+) ]] || { echo "$output"; false; }
  convert=${BASH_REMATCH[1]} array=${BASH_REMATCH[2]} compare=${BASH_REMATCH[3]}
  wait_jobs "$convert" "$array" "$compare"
  [ "$(job_state "$convert")" = COMPLETED ]
  # Each array task is its own job record (ARRAY_JOB_ID_TASK); all three must be done.
  for i in 1 2 3; do
    [ "$(job_state "${array}_$i")" = COMPLETED ] || { scontrol show job -o "${array}_$i"; show_logs "$WORK/sw"; false; }
    [ -s "$WORK/sw/run-$i/eval.h5" ] && [ -s "$WORK/sw/run-$i/report/index.html" ]
    ls "$WORK/sw/run-$i"/slurm-"${array}"_"$i".log >/dev/null
  done
  [ "$(job_state "$compare")" = COMPLETED ] || { show_logs "$WORK/sw"; false; }
  [ -s "$WORK/sw/compare/index.html" ] && [ -s "$WORK/sw/compare/report.md" ] && [ -s "$WORK/sw/compare/compare.png" ]
  "$PYTHON" - "$WORK/sw" "$WORK/data/cifar10.h5" <<'PY'
import json, sys, h5py, hashlib
sw, data = sys.argv[1], sys.argv[2]
c = json.load(open(f"{sw}/compare/compare.json"))
runs = {r["run"].rsplit("/", 1)[-1]: r for r in c["runs"]}
assert sorted(runs) == ["run-1", "run-2", "run-3"], runs.keys()
# The runs share the one dataset, and each trained the architecture and seed of its line.
sha = hashlib.sha256(open(data, "rb").read()).hexdigest()
for name, seed in (("run-1", "1"), ("run-2", "2"), ("run-3", "1")):
    m = h5py.File(f"{sw}/{name}/model.h5", "r")
    assert m.attrs["data_sha256"] == sha and list(m.attrs["encoder_channels"]) == [16, 8], name
    assert runs[name]["seed"] == seed and runs[name]["accuracy"] > 0.3, runs[name]   # chance: 0.1
    assert runs[name]["accuracy"] == h5py.File(f"{sw}/{name}/eval.h5", "r").attrs["accuracy"]
assert float(json.loads(h5py.File(f"{sw}/run-3/svm.h5", "r").attrs["params"])["C"]) == 5
# Two settings: the two seeds together (mean and std), the C=5 run alone.
groups = {tuple(sorted(r.rsplit("/", 1)[-1] for r in g["runs"])): g for g in c["settings"]}
assert set(groups) == {("run-1", "run-2"), ("run-3",)}, groups
g = groups[("run-1", "run-2")]
a1, a2 = runs["run-1"]["accuracy"], runs["run-2"]["accuracy"]
assert abs(g["accuracy_mean"] - (a1 + a2) / 2) < 1e-12
assert abs(g["accuracy_std"] - abs(a1 - a2) / 2 ** 0.5) < 1e-12
assert groups[("run-3",)]["accuracy_std"] is None
assert "C=5" in groups[("run-3",)]["label"], groups[("run-3",)]["label"]
PY
  grep -q "run-3" "$WORK/sw/compare/report.md"
}

@test "a settings file with an unknown name or a value make refuses is refused before anything is submitted" {
  before=$(queue_count)
  printf 'SEED=1\nSEED=2 EPOCHZ=3\n' > "$WORK/bad.txt"
  run sweep SWEEP_DIR="$WORK/sw-bad" "$REPO_ROOT/pipelines/slurm/sweep.sh" "$WORK/bad.txt"
  [ "$status" -eq 1 ]
  [[ "$output" == *"bad.txt:2: 'EPOCHZ=3' is not NAME=VALUE"* ]] || { echo "$output"; false; }
  [ "$(queue_count)" -eq "$before" ] && [ ! -e "$WORK/sw-bad" ]
  # A value the pipeline refuses, in make's words, naming the line.
  printf 'SEED=1\nSEED=2 PRESET=fast\n' > "$WORK/bad.txt"
  run sweep SWEEP_DIR="$WORK/sw-bad" "$REPO_ROOT/pipelines/slurm/sweep.sh" "$WORK/bad.txt"
  [ "$status" -eq 1 ]
  [[ "$output" == *"bad.txt:2: the pipeline refuses these settings: "*"PRESET=fast: the presets are: accurate"* ]] \
    || { echo "$output"; false; }
  [ "$(queue_count)" -eq "$before" ] && [ ! -e "$WORK/sw-bad" ]
}
