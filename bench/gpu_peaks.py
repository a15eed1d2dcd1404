#!/usr/bin/env python3
"""The rates bench/roofline.py measures the step against, on the GPU at hand (PyTorch):
a large bf16 and a large TF32 GEMM (cuBLAS, 8192^3, best of 10), and a device-to-device
copy of 2 GiB (bytes read + written per second, best of 10). Prints one line of
roofline.py arguments."""
import torch


def best_ms(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b))
    return best


def gemm_tflops(dtype, n=8192):
    x = torch.randn(n, n, device="cuda", dtype=dtype)
    y = torch.randn(n, n, device="cuda", dtype=dtype)
    return 2 * n**3 / (best_ms(lambda: x @ y) * 1e-3) / 1e12


def main():
    torch.backends.cuda.matmul.allow_tf32 = True
    bf16 = gemm_tflops(torch.bfloat16)
    tf32 = gemm_tflops(torch.float32)
    src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    gbs = 2 * src.numel() / (best_ms(lambda: dst.copy_(src)) * 1e-3) / 1e9
    print(f"# {torch.cuda.get_device_name()}: bf16 GEMM {bf16:.0f} TFLOP/s, TF32 GEMM {tf32:.0f} TFLOP/s, copy {gbs:.0f} GB/s")
    print(f"--peak-bf16 {bf16:.0f} --peak-tf32 {tf32:.0f} --bandwidth {gbs:.0f}")


if __name__ == "__main__":
    main()
