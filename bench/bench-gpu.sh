#!/usr/bin/env bash
# make bench-gpu: our GPU autoencoder beside the PyTorch reference, on one GPU, in one run.
#   - synthetic data of the real shape (bench/make_synthetic_cifar.py: 50,000 + 10,000)
#   - ae-train --device gpu: one epoch after a warm-up epoch (the second epoch's img/s,
#     training only), batch 64 and 256, --precision fp32 and bf16
#   - ae-encode --device gpu: all 60,000 images, the tool's own encode time (GPU work plus
#     the copy of the features to host memory; not the HDF5 write)
#   - PyTorch (bench/torch_ae_bench.py): eager fp32, eager TF32, bf16 channels_last,
#     torch.compile bf16, same batches
#   - every architecture of BENCH_ARCHS (the seed model and two others by default): the
#     backend alone (gpu_tests' BenchGpu: s/epoch of 50,000 random images, per-layer times
#     and TFLOP/s of one training step with CUDA events) and PyTorch on the same
#     architecture in the same run (torch_ae_bench.py --encoder-channels --input-shape)
# Prints a table of s/epoch and ratios with the device name; logs and JSON under $OUT_DIR.
# Without an NVIDIA GPU it prints a skip line and exits 0.
#   BUILD=build bench/bench-gpu.sh      (env: BENCH_BATCHES="64 256", BENCH_TORCH_MODES=...,
#                                         BENCH_ARCHS="3x32x32:256,128;1x28x28:64,32;...",
#                                         BENCH_SKIP_SVM=1 leaves out the GPU SVM rows)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
PY="${BENCH_PYTHON:-python3}"  # the GPU machine's python (torch, h5py)
OUT_DIR="${OUT_DIR:-$BUILD/bench-gpu}"
BATCHES="${BENCH_BATCHES:-64 256}"
TORCH_MODES="${BENCH_TORCH_MODES:-eager_fp32,eager_tf32,bf16_cl,compiled_bf16}"
ARCHS="${BENCH_ARCHS:-3x32x32:256,128;1x28x28:64,32;3x32x32:96,48,24}"
SEED_ARCH="3x32x32:256,128"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench-gpu: skipped: no NVIDIA GPU on this machine"
  exit 0
fi
for t in ae-train ae-encode; do
  [ -x "$BUILD/bin/$t" ] || { echo "bench-gpu: $BUILD/bin/$t is missing (make BUILD=$BUILD)" >&2; exit 1; }
done
source tests/gpu/nccl_env.sh
mkdir -p "$OUT_DIR"
results="$OUT_DIR/results.jsonl"
: > "$results"
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "bench-gpu on $device ($(date -u +%Y-%m-%dT%H:%MZ))"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT_DIR/device.csv"

data="$OUT_DIR/cifar10.h5"
[ -f "$data" ] || "$PY" bench/make_synthetic_cifar.py "$data" || { echo "bench-gpu: cannot write $data" >&2; exit 1; }

# ---- ours: ae-train, one epoch after a warm-up epoch -------------------------------------
for prec in fp32 bf16; do
  for b in $BATCHES; do
    log="$OUT_DIR/ae-train-$prec-$b.log"
    if "$BUILD/bin/ae-train" --data "$data" -o "$OUT_DIR/model-$prec-$b.h5" --device gpu --precision "$prec" \
         --batch-size "$b" --epochs 2 --seed 1 > "$log" 2>&1; then
      ips=$(sed -n 's/.*epoch 2\/2:.* \([0-9][0-9.]*\) img\/s.*/\1/p' "$log" | tail -1)
      "$PY" -c "import json,sys; ips=float(sys.argv[1]); print(json.dumps({'impl':'ours','tool':'ae-train','arch':sys.argv[4],'mode':sys.argv[2],'batch':int(sys.argv[3]),'s_per_epoch':round(50000/ips,4)}))" \
        "$ips" "$prec" "$b" "$SEED_ARCH" >> "$results"
    else
      echo "bench-gpu: ae-train $prec batch $b failed, see $log" >&2
      tail -3 "$log" >&2
    fi
  done
done

# ---- ours: ae-encode of 60,000 images --------------------------------------------------------
model=$(ls "$OUT_DIR"/model-*.h5 2>/dev/null | head -1)
if [ -n "$model" ]; then
  if "$BUILD/bin/ae-encode" --model "$model" --data "$data" -o "$OUT_DIR/features.h5" --device gpu --batch-size 1024 \
       --json > "$OUT_DIR/ae-encode.json" 2> "$OUT_DIR/ae-encode.log"; then
    "$PY" -c "import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(json.dumps({'impl':'ours','tool':'ae-encode','images':j['images'],'encode_s':round(j['images']/j['images_per_second'],4),'wall_s':round(j['seconds'],3)}))" \
      "$OUT_DIR/ae-encode.json" >> "$results"
  else
    echo "bench-gpu: ae-encode failed, see $OUT_DIR/ae-encode.log" >&2
  fi
  rm -f "$OUT_DIR/features.h5"
fi

# ---- svm-fit on 1 and 2 GPUs (plain fit and the CV grid), on a machine with 2 or more ----
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  SVM_GROUP_DEVICE=gpu BUILD="$BUILD" bash bench/svm_group.sh > "$OUT_DIR/svm-group.log" 2>&1 ||
    echo "bench-gpu: svm_group.sh failed, see $OUT_DIR/svm-group.log" >&2
fi

# ---- the backend alone, every architecture: s/epoch and the per-layer table ------------
# (BENCH train lines of gpu_tests' BenchGpu; the seed model's headline rows are ae-train's)
# The data-parallel scaling rows run in their own process: whatever a group does cannot
# cost the per-architecture rows.
if [ -x "$BUILD/tests/gpu_tests" ]; then
  AE_BENCH_ARCHS="$ARCHS" AE_BENCH_BATCHES="${BATCHES// /,}" "$BUILD/tests/gpu_tests" --gtest_also_run_disabled_tests \
    --gtest_filter='BenchGpu.DISABLED_TrainEpochAndEncode' > "$OUT_DIR/kernels.log" 2>&1 ||
    echo "bench-gpu: the backend benchmark failed, see $OUT_DIR/kernels.log" >&2
  "$BUILD/tests/gpu_tests" --gtest_also_run_disabled_tests --gtest_filter='BenchGpu.DISABLED_DataParallelScaling' \
    > "$OUT_DIR/scaling.log" 2>&1 || echo "bench-gpu: the data-parallel scaling rows failed, see $OUT_DIR/scaling.log" >&2
  sed -n 's/^BENCH train //p' "$OUT_DIR/kernels.log" | "$PY" -c "
import json, sys
for line in sys.stdin:
    kv = dict(f.split('=', 1) for f in line.split())
    print(json.dumps({'impl': 'ours', 'tool': 'backend', 'arch': kv['arch'], 'mode': kv['precision'],
                      'batch': int(kv['batch']), 's_per_epoch': float(kv['s_per_epoch'])}))" >> "$results"
else
  echo "bench-gpu: $BUILD/tests/gpu_tests is missing: no per-layer tables (make BUILD=$BUILD $BUILD/tests/gpu_tests)" >&2
fi

# ---- PyTorch, the same architectures -------------------------------------------------------
IFS=';' read -r -a arch_list <<< "$ARCHS"
for a in "${arch_list[@]}"; do
  shape="${a%%:*}"
  "$PY" bench/torch_ae_bench.py --images 50000 --batches "${BATCHES// /,}" --modes "$TORCH_MODES" \
    --input-shape "${shape//x/,}" --encoder-channels "${a#*:}" \
    >> "$results" 2>> "$OUT_DIR/torch.log" || echo "bench-gpu: PyTorch reference failed for $a, see $OUT_DIR/torch.log" >&2
done

# ---- table ---------------------------------------------------------------------------------
[ -s "$OUT_DIR/svm-group.log" ] && { echo "svm-fit on a group of GPUs:"; tail -12 "$OUT_DIR/svm-group.log"; }
echo "data-parallel ae-train, $(nvidia-smi -L | wc -l) GPU(s) of $device (ranks as threads, weak scaling):"
sed -n 's/^BENCH data-parallel /  /p' "$OUT_DIR/scaling.log" 2>/dev/null || true
grep -v '^\[' "$OUT_DIR/kernels.log" 2>/dev/null | grep -E 'per-kernel|^  ' || true
# What bounds each stage of the seed model's step: its floors at this GPU's measured peaks
# (a large bf16 / TF32 cuBLAS GEMM, a device copy) against the per-kernel times above.
if [ -s "$OUT_DIR/kernels.log" ] && "$PY" bench/gpu_peaks.py > "$OUT_DIR/peaks.txt" 2> "$OUT_DIR/peaks.log"; then
  echo
  echo "roofline of the seed model's step (bench/roofline.py), peaks measured here: $(head -1 "$OUT_DIR/peaks.txt" | cut -d: -f2-)"
  # shellcheck disable=SC2046  # the peaks line is roofline.py's arguments
  "$PY" bench/roofline.py "$OUT_DIR/kernels.log" $(tail -1 "$OUT_DIR/peaks.txt") || true
fi
"$PY" - "$results" "$device" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"\nautoencoder training, s per epoch of 50,000 images, {sys.argv[2]}")
torch = {(r.get("arch"), r["mode"], r["batch"]): r["s_per_epoch"] for r in rows
         if r["impl"] == "pytorch" and "s_per_epoch" in r}
archs = []
for r in rows:
    if "s_per_epoch" in r and r.get("arch") not in archs:
        archs.append(r.get("arch"))
for arch in archs:
    print(f"\n  {arch}")
    print(f"  {'implementation':40s} {'batch':>5s} {'s/epoch':>8s} {'vs torch.compile bf16':>22s} {'vs eager TF32':>14s}")
    for r in rows:
        if r.get("arch") != arch or "s_per_epoch" not in r:
            continue
        if r["impl"] == "ours":
            name = (f"ours ae-train --precision {r['mode']}" if r["tool"] == "ae-train"
                    else f"ours backend {r['mode']}")
        else:
            name = f"PyTorch {r.get('torch', '')} {r['mode']}"
        def ratio(mode):
            ref = torch.get((arch, mode, r["batch"]))
            return f"{ref / r['s_per_epoch']:.2f}x" if ref else "-"
        print(f"  {name:40s} {r['batch']:5d} {r['s_per_epoch']:8.3f} {ratio('compiled_bf16'):>22s} {ratio('eager_tf32'):>14s}")
for r in rows:
    if r.get("tool") == "ae-encode":
        print(f"  ours ae-encode --device gpu: {r['images']} images in {r['encode_s']:.3f} s "
              f"(GPU + copy to host; {r['wall_s']:.1f} s with HDF5 reading/writing)")
    if "error" in r:
        print(f"  PyTorch {r.get('arch')} {r['mode']} batch {r['batch']}: failed: {r['error'][:120]}")
PYEOF
[ -n "${BENCH_SKIP_SVM:-}" ] || BUILD="$BUILD" bash bench/svm_gpu.sh || echo "bench-gpu: the GPU SVM benchmark (bench/svm_gpu.sh) failed" >&2  # GPU SVM rows
