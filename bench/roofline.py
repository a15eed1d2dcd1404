#!/usr/bin/env python3
"""What bounds each stage of the seed model's training step: a roofline reading of the step
profiler's table (gpu_tests' BenchGpu with AE_BENCH_PROFILE_ONLY=1, the per-kernel lines that
bench/step-profile-compare.sh and make bench-gpu print).

For every stage: its useful FLOPs (from the profile), the fewest bytes it must move through
DRAM (every tensor it reads or writes, once, in the step's NHWC layouts: the model below),
and from these the time the tensor cores or the memory would need at the GPU's peaks. The
larger of the two is the stage's floor; "of floor" is how close the measured time is to it.

    bench/roofline.py PROFILE_LOG [--peak-bf16 TFLOPS] [--peak-tf32 TFLOPS] [--bandwidth GB/s]

The peaks default to what bench/gpu_peaks.py measured on an H100 80GB HBM3 (2026-11-27: a
large cuBLAS GEMM 777 bf16 / 408 TF32 TFLOP/s, a device copy 3,007 GB/s); make bench-gpu
measures them on the machine at hand and passes them. Only the seed model
(3x32x32, encoder 256,128) is modelled; other architectures' stages are skipped.
"""
import argparse
import re
import sys

# Element counts per image of the step's tensors (NHWC, channel pitch as the plan pads it).
IMG = 3 * 32 * 32            # uint8 input / target
COL = 32 * 32 * 32           # im2col of the input: 27 taps (+1 bias column), pitch 32
C1 = 16 * 16 * 256           # conv1 out after the pool (and conv2's input gradient)
C1_FULL = 32 * 32 * 256      # conv1 out before the pool: only its argmax (1 byte) is kept
C2 = 8 * 8 * 128             # conv2 out after the pool = the latent code
C2_FULL = 16 * 16 * 128      # conv2 out before the pool (unpooled gradient)
D1 = 8 * 8 * 128             # dconv1 out
D2 = 16 * 16 * 256           # dconv2 out (upsampled ×2)
OUT = 32 * 32 * 8            # reconstruction gradient, 3 channels at pitch 8
PARAMS = 751875


# The profile counts a stage's FLOPs as the seeds do (a direct 3×3 at the output's full
# resolution). The upsampling layers' GEMMs do less: the parity decomposition and the 4×4
# stride-2 input gradient 4 of every 9 multiply-adds, the folded output-layer gradient 1 of
# 4 (docs/GPU.md). The tensor floor is taken on what the GEMM computes.
COMPUTED = {
    "dconv2 fwd (up2 parity) +relu": 4 / 9,
    "dconv2 bwd-data (4x4 s2)": 4 / 9,
    "dconv2 wgrad +bias": 4 / 9,
    "dconv3 bwd-data (4x4 s2)": 4 / 9,
    "dconv3 wgrad (fold) +bias": 1 / 4,
}


def stage_bytes(name, e):
    """DRAM bytes per image of one stage (e: bytes per element), or None if not modelled."""
    table = {
        "input im2col": IMG + COL * e,
        "conv1 fwd +relu+pool": COL * e + C1 * e + C1,                  # argmax: a byte per pooled value
        "conv2 fwd +relu+pool": C1 * e + C2 * e + C2,
        "dconv1 fwd +relu": C2 * e + D1 * e,
        "dconv2 fwd (up2 parity) +relu": D1 * e + D2 * e,
        "dconv3 fwd (sub-pixel) +loss": D2 * e + IMG + OUT * e,
        "dconv3 wgrad (fold) +bias": D2 * e + OUT * e,
        "dconv3 bwd-data (4x4 s2)": OUT * e + 2 * D2 * e,              # + the ReLU mask (dconv2 out)
        "dconv2 wgrad +bias": D1 * e + D2 * e,
        "dconv2 bwd-data (4x4 s2)": D2 * e + 2 * D1 * e,
        "dconv1 wgrad +bias": C2 * e + D1 * e,
        "dconv1 bwd-data +unpool": D1 * e + C2 * e + C2 + C2_FULL * e,
        "conv2 wgrad +bias": C1 * e + C2_FULL * e,
        "conv2 bwd-data +mask": C2_FULL * e + 2 * C1 * e,
        "conv1 wgrad +unpool +bias": C1 * e + C1 + COL * e,
    }
    return table.get(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--peak-bf16", type=float, default=777.0, help="TFLOP/s of a large bf16 GEMM")
    ap.add_argument("--peak-tf32", type=float, default=408.0, help="TFLOP/s of a large TF32 GEMM")
    ap.add_argument("--bandwidth", type=float, default=3007.0, help="GB/s of a large device copy (read + write)")
    a = ap.parse_args()
    head = re.compile(r"per-kernel times, (.*?), (fp32|bf16) \(.*?\), (3x32x32 -> conv 256, 128 ->)?.*batch (\d+)")
    line = re.compile(r"  (.+?)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$")
    block = None
    for raw in open(a.log):
        m = head.search(raw)
        if m:
            gpu, prec, seed, batch = m.groups()
            block = None
            if seed:
                block = (gpu, prec, int(batch))
                e = 2 if prec == "bf16" else 4
                peak = a.peak_bf16 if prec == "bf16" else a.peak_tf32
                print(f"\n{gpu}, {prec}, batch {batch}: floors at {peak:.0f} TFLOP/s and {a.bandwidth:.0f} GB/s")
                print("| stage | ms | TFLOP/s (seeds' count) | GEMM TFLOP/s | MB moved (min) | GB/s | FLOP/byte | bound | floor ms | of floor |")
                print("|---|--:|--:|--:|--:|--:|--:|---|--:|--:|")
            continue
        if block is None:
            continue
        m = line.match(raw.rstrip("\n"))
        if not m:
            if raw.startswith("  tiles") or not raw.startswith("  "):
                block = None
            continue
        name, ms, gflop = m.group(1).strip(), float(m.group(2)), float(m.group(3))
        if name == "stage":
            continue
        e = 2 if block[1] == "bf16" else 4
        per = stage_bytes(name, e)
        if name == "optimizer":
            per_total = PARAMS * 4 * 7  # weights, gradient, two moments read and written, the packed copy
        elif per is not None:
            per_total = per * block[2]
        else:
            print(f"| {name} | {ms:.4f} | {gflop / ms if ms else 0:.0f} | | | | | | | |")
            continue
        gemm = gflop * COMPUTED.get(name, 1.0)
        mb = per_total / 1e6
        t_mem = per_total / (a.bandwidth * 1e9) * 1e3
        t_flop = gemm / peak if gemm else 0.0  # GFLOP / (TFLOP/s) = ms
        bound = "memory" if t_mem >= t_flop else "tensor"
        floor = max(t_mem, t_flop)
        ai = gemm * 1e9 / per_total if per_total else 0.0
        print(f"| {name} | {ms:.4f} | {gflop / ms if ms else 0:.0f} | {gemm / ms if ms else 0:.0f} | {mb:.1f} | "
              f"{per_total / (ms * 1e6):.0f} | {ai:.0f} | {bound} | {floor:.4f} | {100 * floor / ms:.0f} % |")


if __name__ == "__main__":
    sys.exit(main())
