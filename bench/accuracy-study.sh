#!/usr/bin/env bash
# The accuracy levers of issue 15 on the default autoencoder, per seed (docs/RESULTS.md,
# "Ablation"): one training per seed, then
#   baseline  svm-fit C=10 gamma=scale                       svm-eval
#   +grid     svm-fit --cv 5 over GRID_C x GRID_GAMMA (the pair CV picks is refitted)
#   +flip     svm-fit --augment flip with the grid's pair    (ae-encode --flip)
#   +TTA      the +flip model, svm-eval --tta flip
# The test split is only evaluated: the pair comes from cross-validation on the training rows
# (the +flip fit reuses the pair CV chose without flips: a grid over 100,000 rows per seed
# costs minutes, docs/RESULTS.md says what that leaves out).
#   CIFAR10_DIR (required), BUILD (build), SEEDS ("1 2 3"), EPOCHS (20), DEVICE (gpu),
#   GRID_C ("1,3,10,30"; empty: no +grid step, the flip fit uses C 10 / scale),
#   GRID_GAMMA ("0.5x,scale,2x"), FLIP_CV_C (e.g. "3,10": the +flip fit cross-validates these C
#   values itself, on originals + mirrors, an image and its mirror in one fold),
#   TRAIN_FLAGS (more ae-train options, e.g. "--val-split 0"), OUT_DIR ($BUILD/accuracy-study)
# Prints one table (test accuracy per seed and lever, mean and spread) and each stage's time.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
BIN="$BUILD/bin"
PYTHON="${PYTHON:-python3}"
SEEDS="${SEEDS:-1 2 3}"
EPOCHS="${EPOCHS:-20}"
DEVICE="${DEVICE:-gpu}"
GRID_C="${GRID_C-1,3,10,30}"
GRID_GAMMA="${GRID_GAMMA:-0.5x,scale,2x}"
FLIP_CV_C="${FLIP_CV_C:-}"
TRAIN_FLAGS="${TRAIN_FLAGS:-}"
OUT_DIR="${OUT_DIR:-$BUILD/accuracy-study}"
: "${CIFAR10_DIR:?CIFAR10_DIR must name the CIFAR-10 batches}"
mkdir -p "$OUT_DIR"
log="$OUT_DIR/study.jsonl"
: > "$log"
data="$OUT_DIR/cifar10.h5"
[ -f "$data" ] || "$BIN/cifar-convert" --quiet --input "$CIFAR10_DIR" -o "$data" || exit 1

# step NAME SEED CMD... : runs a tool with --json, appends {"seed","step","wall",summary} to the log
step() {
  local name=$1 seed=$2
  shift 2
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$@" --json 2>>"$OUT_DIR/seed$seed.log") || { echo "accuracy-study: seed $seed: $name failed (see $OUT_DIR/seed$seed.log)" >&2; tail -3 "$OUT_DIR/seed$seed.log" >&2; return 1; }
  t1=$(date +%s.%N)
  printf '{"seed": %s, "step": "%s", "wall": %s, "summary": %s}\n' "$seed" "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" \
    "$(printf '%s\n' "$out" | grep '^{' | tail -1)" >> "$log"
}

for seed in $SEEDS; do
  d="$OUT_DIR/seed$seed"
  mkdir -p "$d"
  step train "$seed" "$BIN/ae-train" --quiet --device "$DEVICE" --data "$data" --epochs "$EPOCHS" --seed "$seed" $TRAIN_FLAGS -o "$d/model.h5" || continue
  step encode "$seed" "$BIN/ae-encode" --quiet --device "$DEVICE" --model "$d/model.h5" --data "$data" --flip -o "$d/features.h5" || continue
  step fit_baseline "$seed" "$BIN/svm-fit" --quiet --device "$DEVICE" --features "$d/features.h5" -o "$d/svm-base.h5"
  step eval_baseline "$seed" "$BIN/svm-eval" --quiet --device "$DEVICE" --model "$d/svm-base.h5" --features "$d/features.h5" -o "$d/eval-base.h5"
  C=10 G=scale
  if [ -n "$GRID_C" ]; then
    step fit_grid "$seed" "$BIN/svm-fit" --quiet --device "$DEVICE" --features "$d/features.h5" --cv 5 --C "$GRID_C" --gamma "$GRID_GAMMA" -o "$d/svm-grid.h5"
    step eval_grid "$seed" "$BIN/svm-eval" --quiet --device "$DEVICE" --model "$d/svm-grid.h5" --features "$d/features.h5" -o "$d/eval-grid.h5"
    read -r C G < <("$PYTHON" -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r"); print(repr(float(f.attrs["best_C"])), f.attrs["best_gamma"])' "$d/svm-grid.h5")
  fi
  flip_c=("$C")
  [ -n "$FLIP_CV_C" ] && flip_c=("$FLIP_CV_C" --cv 5)
  step fit_flip "$seed" "$BIN/svm-fit" --quiet --device "$DEVICE" --features "$d/features.h5" --augment flip --C "${flip_c[@]}" --gamma "$G" -o "$d/svm-flip.h5"
  # The +flip fit's cross-validation table, when it ran one (mean CV accuracy per C).
  "$PYTHON" - "$d/svm-flip.h5" "$seed" >> "$log" <<'PY' || true
import json, sys, h5py
f = h5py.File(sys.argv[1], "r")
if "model_selection" in f:
    g = f["model_selection"]
    print(json.dumps({"seed": int(sys.argv[2]), "step": "flip_cv_table", "wall": 0, "summary": {
        "C": g["C"][...].tolist(), "gamma": [str(x) for x in g.attrs["gamma"]], "cv_accuracy": g["cv_accuracy"][...].tolist()}}))
PY
  step eval_flip "$seed" "$BIN/svm-eval" --quiet --device "$DEVICE" --model "$d/svm-flip.h5" --features "$d/features.h5" -o "$d/eval-flip.h5"
  step eval_tta "$seed" "$BIN/svm-eval" --quiet --device "$DEVICE" --model "$d/svm-flip.h5" --features "$d/features.h5" --tta flip -o "$d/eval-tta.h5"
done

"$PYTHON" - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
levers = [("baseline", "eval_baseline"), ("+grid", "eval_grid"), ("+flip", "eval_flip"), ("+TTA", "eval_tta")]
seeds = sorted({r["seed"] for r in rows})
acc = {(r["seed"], r["step"]): r["summary"].get("accuracy") for r in rows if r.get("summary")}
print("| lever | " + " | ".join("seed %d" % s for s in seeds) + " | mean | spread (max-min) |")
print("|---|" + "---|" * (len(seeds) + 2))
for name, step in levers:
    v = [acc.get((s, step)) for s in seeds]
    got = [100 * x for x in v if x is not None]
    cells = ["%.2f" % (100 * x) if x is not None else "-" for x in v]
    mean = "%.2f" % statistics.mean(got) if got else "-"
    spread = "%.2f" % (max(got) - min(got)) if len(got) > 1 else "-"
    print("| %s | %s | %s | %s |" % (name, " | ".join(cells), mean, spread))
print()
print("| step | " + " | ".join("seed %d s" % s for s in seeds) + " |")
print("|---|" + "---|" * len(seeds))
for step in dict.fromkeys(r["step"] for r in rows):
    wall = {r["seed"]: r["wall"] for r in rows if r["step"] == step}
    print("| %s | %s |" % (step, " | ".join("%.1f" % wall[s] if s in wall else "-" for s in seeds)))
for r in rows:
    if r["step"] in ("fit_grid", "fit_flip") and r.get("summary") and "best_C" in r["summary"]:
        s = r["summary"]
        print("seed %d %s: best C %s gamma %s, cv %.4f" % (r["seed"], r["step"], s.get("best_C"), s.get("best_gamma"), s.get("cv_accuracy", float("nan"))))
PY
