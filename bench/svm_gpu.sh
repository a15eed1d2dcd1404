#!/usr/bin/env bash
# The GPU SVM rows of make bench-gpu: svm-fit --device "$dev" on 50,000 x 8,192 features
# (C = 10, gamma = scale) and svm-eval --device "$dev" on 10,000, beside the CPU path and
# scikit-learn's SVC on subsets of the same features, in the same run. Goals on one H100 /
# H200: fit <= 5 s, eval <= 1 s (the tools' fit_seconds / predict_seconds: the solver and
# the prediction, without reading HDF5 files).
#
# Features, first that applies:
#   SVM_BENCH_FEATURES=file.h5   an existing ae-features file (e.g. data/run/features.h5 of make pipeline)
#   synthetic                    generated ReLU-like features of that shape (same recipe as
#                                tests/python/sklearn_parity.py make-features, noise 1.5),
#                                drawn on the GPU with PyTorch when it is there
# Subsets: SVM_BENCH_CPU_TRAIN (default 10000) rows for the CPU-vs-GPU parity fit,
# SVM_BENCH_SK_TRAIN / SVM_BENCH_SK_PREDICT (2000 / 500) for scikit-learn.
# SVM_BENCH_GRID (default "1,3,10,30 0.5x,scale,2x"; empty: skipped): the cross-validated
# grid of svm-fit --cv 5 over those C and gamma lists on the whole training split (issue 15:
# 4 C x 3 gamma x 5 folds on 50,000 x 8,192 real features in <= 60 s on an H200).
# SVM_BENCH_KEEP=DIR keeps the models, evaluations and logs there. For a dry run of this
# script without a GPU: SVM_BENCH_DEVICE=cpu SVM_BENCH_SHAPE="2000 500 256".
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
BIN="$BUILD/bin"
cpu_train="${SVM_BENCH_CPU_TRAIN:-10000}"
sk_train="${SVM_BENCH_SK_TRAIN:-2000}"
sk_predict="${SVM_BENCH_SK_PREDICT:-500}"
dev="${SVM_BENCH_DEVICE:-gpu}"
read -r syn_train syn_test syn_dim <<< "${SVM_BENCH_SHAPE:-50000 10000 8192}"

# A Python with numpy and h5py (Debian's here, the GPU image's python3 there).
PY=""
for cand in "${PYTHON:-}" /usr/bin/python3 python3; do
  if [ -n "$cand" ] && "$cand" -c "import numpy, h5py" 2>/dev/null; then PY="$cand"; break; fi
done
if [ -z "$PY" ]; then echo "svm_gpu.sh: no python with numpy and h5py found" >&2; exit 1; fi
for t in svm-fit svm-eval; do
  if [ ! -x "$BIN/$t" ]; then echo "svm_gpu.sh: $BIN/$t is missing (make BUILD=$BUILD all)" >&2; exit 1; fi
done

if [ -n "${SVM_BENCH_KEEP:-}" ]; then
  tmp="$SVM_BENCH_KEEP"
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi

features="${SVM_BENCH_FEATURES:-}"
if [ -n "$features" ]; then
  kind="given file $features"
else
  kind="synthetic ReLU-like features (sklearn_parity.py recipe, noise 1.5)"
  features="$tmp/features.h5"
  "$PY" - "$features" "$syn_train" "$syn_test" "$syn_dim" <<'PY' || exit 1
# 10 classes in a 12-d latent space pushed through a random ReLU layer, a fifth of the units
# dead, one constant non-zero unit (as tests/python/sklearn_parity.py make-features).
import datetime, json, sys, time
import h5py, numpy as np
out, n_train, n_test, dim, noise, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), 1.5, 6
t0 = time.time()
rng = np.random.default_rng(seed)
k, latent = 10, 12
centres = rng.normal(0, 1.0, (k, latent))
A = rng.normal(0, 1.0 / np.sqrt(latent), (dim, latent))
b = rng.normal(-0.3, 0.5, dim)
dead = rng.choice(dim, dim // 5, replace=False)
try:
    import torch
    dev = "cuda" if torch.cuda.is_available() else None
except Exception:
    dev = None
def split(n, s):
    y = rng.integers(0, k, n).astype(np.uint8)
    z = centres[y] + rng.normal(0, noise, (n, latent))
    if dev:
        g = torch.Generator(device=dev).manual_seed(s)
        x = torch.as_tensor(z, dtype=torch.float32, device=dev) @ torch.as_tensor(A.T, dtype=torch.float32, device=dev)
        x += torch.as_tensor(b, dtype=torch.float32, device=dev)
        x += 0.3 * torch.randn(x.shape, generator=g, device=dev)
        x = torch.clamp_min(x, 0).cpu().numpy()
    else:
        x = np.maximum((z @ A.T + b).astype(np.float32) + rng.normal(0, 0.3, (n, dim)).astype(np.float32), 0)
    x[:, dead] = 0
    x[:, dead[0]] = 0.75
    return np.ascontiguousarray(x, dtype=np.float32), y
xtr, ytr = split(n_train, 1)
xte, yte = split(n_test, 2)
with h5py.File(out, "w") as f:
    f["/train/features"] = xtr
    f["/train/labels"] = ytr
    f["/test/features"] = xte
    f["/test/labels"] = yte
    f.attrs["format"] = "ae-features"
    f.attrs["format_version"] = np.int64(1)
    f.attrs["created_by"] = "bench/svm_gpu.sh (synthetic)"
    f.attrs["created_at"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    f.attrs["inputs"] = "[]"
    f.attrs["params"] = json.dumps({"train": n_train, "test": n_test, "dim": dim, "noise": noise, "seed": seed})
    f.attrs["device"] = "gpu" if dev else "cpu"
    f.attrs["seconds"] = 0.0
    f.attrs["images_per_second"] = 0.0
    f.attrs["class_names"] = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
print(f"synthetic features: {n_train} + {n_test} x {dim} in {time.time() - t0:.1f} s ({'torch ' + dev if dev else 'numpy'})",
      file=sys.stderr)
PY
fi

status=0
run() {  # run NAME CMD...: stdout (the --json line) to NAME.json, stderr to NAME.log
  local name=$1; shift
  if ! "$@" > "$tmp/$name.json" 2> "$tmp/$name.log"; then
    echo "svm_gpu.sh: $name failed:" >&2
    tail -5 "$tmp/$name.log" >&2
    status=1
    return 1
  fi
  { grep -E "svm \(gpu|svm: [0-9]+ pairs|accuracy [0-9]" "$tmp/$name.log" || true; } | sed "s/^/  [$name] /" >&2
}

# The headline: the whole training split on the GPU, then the test split.
run gpu_fit "$BIN/svm-fit" --json --device "$dev" --features "$features" -o "$tmp/gpu.h5"
run gpu_eval "$BIN/svm-eval" --json --device "$dev" --model "$tmp/gpu.h5" --features "$features" -o "$tmp/gpu_eval.h5"
# The cross-validated grid (every pair, 5 folds, then the best pair refitted).
grid="${SVM_BENCH_GRID-1,3,10,30 0.5x,scale,2x}"
if [ -n "$grid" ]; then
  read -r grid_c grid_g <<< "$grid"
  run gpu_grid "$BIN/svm-fit" --json --device "$dev" --cv 5 --C "$grid_c" --gamma "$grid_g" --features "$features" \
    -o "$tmp/gpu_grid.h5"
fi
# Parity: the same subset on both devices, each evaluated on the whole test split.
if [ "$cpu_train" -gt 0 ]; then
  run cpu_sub_fit "$BIN/svm-fit" --json --device cpu --train-limit "$cpu_train" --features "$features" -o "$tmp/cpu_sub.h5"
  run gpu_sub_fit "$BIN/svm-fit" --json --device "$dev" --train-limit "$cpu_train" --features "$features" -o "$tmp/gpu_sub.h5"
  run cpu_sub_eval "$BIN/svm-eval" --json --device cpu --model "$tmp/cpu_sub.h5" --features "$features" -o "$tmp/cpu_sub_eval.h5"
  run gpu_sub_eval "$BIN/svm-eval" --json --device "$dev" --model "$tmp/gpu_sub.h5" --features "$features" -o "$tmp/gpu_sub_eval.h5"
fi
# scikit-learn's SVC on a small subset (its predict is slow: docs/BENCHMARKS.md, "CPU, 2026-11-22").
sk_json=""
if [ "$sk_train" -gt 0 ] && "$PY" -c "import sklearn" 2>/dev/null; then
  run gpu_sk_fit "$BIN/svm-fit" --json --device "$dev" --train-limit "$sk_train" --features "$features" -o "$tmp/gpu_sk.h5" &&
    run gpu_sk_eval "$BIN/svm-eval" --json --device "$dev" --limit "$sk_predict" --model "$tmp/gpu_sk.h5" \
      --features "$features" -o "$tmp/gpu_sk_eval.h5" &&
    "$PY" bench/svm_sklearn.py "$features" --train "$sk_train" --predict "$sk_predict" --eval "$tmp/gpu_sk_eval.h5" \
      > "$tmp/sk.json" && sk_json="$tmp/sk.json"
fi

"$PY" - "$tmp" "$kind" "$sk_json" "$cpu_train" <<'PY'
import json, os, sys
import h5py, numpy as np
tmp, kind, sk_path, cpu_train = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def load(name):
    p = os.path.join(tmp, name + ".json")
    try:
        return json.load(open(p))
    except Exception:
        return None
def preds(name):
    with h5py.File(os.path.join(tmp, name), "r") as f:
        return f["/predictions"][()]
fit, ev = load("gpu_fit"), load("gpu_eval")
print(f"\n## SVM on GPU ({kind})")
rows = []
if fit:
    print(f"{fit['n_train']:,} train x {fit['n_features']:,} features ({fit['n_features_kept']:,} kept), "
          f"gamma {fit['gamma']:.6g}, C {fit['C']:g}, support vectors {fit['n_sv']:,}")
print("| step | GPU | CPU path | scikit-learn SVC | goal |")
print("|---|---|---|---|---|")
if fit:
    print(f"| svm-fit {fit['n_train']:,} | solver {fit['fit_seconds']:.2f} s (whole tool {fit['seconds']:.1f} s) | | | <= 5 s |")
if ev:
    print(f"| svm-eval {ev['n']:,} | predict {ev['predict_seconds']:.2f} s (whole tool {ev['seconds']:.1f} s), "
          f"accuracy {ev['accuracy'] * 100:.2f} % | | | <= 1 s |")
gr = load("gpu_grid")
if gr:
    print(f"| svm-fit --cv 5, {gr['n_train']:,} rows, C x gamma grid | whole tool {gr['seconds']:.1f} s "
          f"(cross-validation {gr.get('cv_seconds', float('nan')):.1f} s); best C {gr.get('best_C')} gamma "
          f"{gr.get('best_gamma')}, cv {100 * gr.get('cv_accuracy', float('nan')):.2f} % | | | <= 60 s (H200) |")
cf, gf, ce, ge = (load(n) for n in ("cpu_sub_fit", "gpu_sub_fit", "cpu_sub_eval", "gpu_sub_eval"))
if cpu_train and cf and gf and ce and ge:
    pc, pg = preds("cpu_sub_eval.h5"), preds("gpu_sub_eval.h5")
    agree = float(np.mean(pc == pg))
    dsv = abs(gf["n_sv"] - cf["n_sv"]) / cf["n_sv"]
    print(f"| svm-fit {cf['n_train']:,} (parity subset) | solver {gf['fit_seconds']:.2f} s, {gf['n_sv']:,} SVs | "
          f"solver {cf['fit_seconds']:.1f} s, {cf['n_sv']:,} SVs | | SVs within 2 % ({dsv * 100:.2f} %) |")
    print(f"| svm-eval {ge['n']:,} with those models | predict {ge['predict_seconds']:.2f} s, accuracy "
          f"{ge['accuracy'] * 100:.2f} % | predict {ce['predict_seconds']:.1f} s, accuracy {ce['accuracy'] * 100:.2f} % | | "
          f"same predictions >= 99 % ({agree * 100:.2f} %), accuracy within 0.3 pp "
          f"({abs(ge['accuracy'] - ce['accuracy']) * 100:.2f} pp) |")
sk = json.load(open(sk_path)) if sk_path else None
sf = load("gpu_sk_fit")
if sk and sf:
    print(f"| svm-fit {sk['n_train']:,} vs SVC | solver {sf['fit_seconds']:.2f} s, {sf['n_sv']:,} SVs | | "
          f"{sk['fit_seconds']:.1f} s, {sk['n_sv']:,} SVs; same predictions on {sk['agreement'] * 100:.2f} % of "
          f"{sk['n_predict']:,} test rows | |")
PY
exit $status
