#!/usr/bin/env python3
"""The PyTorch reference of the autoencoder (the seeds' model), timed like ae-train.

    torch_ae_bench.py [--images 50000] [--batches 64,256] [--modes eager_fp32,eager_tf32,bf16_cl,compiled_bf16]

Per mode and batch size: Adam (lr 1e-3) on MSE, the training images resident on the GPU
as uint8 and normalised per batch (as our GPU backend does), a random order, a warm-up
(for torch.compile: until compiled), then one epoch timed with CUDA synchronisation. Whole
batches only; the time is scaled to --images. Prints one JSON object per line.
  eager_fp32     fp32, TF32 off             eager_tf32     fp32 with TF32 matmul/conv
  bf16_cl        autocast bf16, channels_last
  compiled_bf16  bf16_cl under torch.compile (default mode)
"""
import argparse
import json
import time

import torch
import torch.nn as nn


def make_model():
    enc = nn.Sequential(nn.Conv2d(3, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(256, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    dec = nn.Sequential(nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2, mode="nearest"),
                        nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2, mode="nearest"),
                        nn.Conv2d(256, 3, 3, padding=1))
    return nn.Sequential(enc, dec)


def run(mode, batch, images, data):
    torch.backends.cuda.matmul.allow_tf32 = mode != "eager_fp32"
    torch.backends.cudnn.allow_tf32 = mode != "eager_fp32"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = make_model().cuda()
    bf16 = mode in ("bf16_cl", "compiled_bf16")
    if bf16:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fwd = torch.compile(model) if mode == "compiled_bf16" else model

    def step(idx):
        x = data[idx].float().div_(255)
        if bf16:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = nn.functional.mse_loss(fwd(x).float(), x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    n_steps = images // batch
    order = torch.randperm(data.shape[0], device="cuda")
    t0 = time.time()
    for s in range(30 if mode == "compiled_bf16" else 10):  # warm-up (and compilation)
        step(order[s * batch:(s + 1) * batch])
    torch.cuda.synchronize()
    warm = time.time() - t0
    order = torch.randperm(data.shape[0], device="cuda")
    t0 = time.time()
    for s in range(n_steps):
        loss = step(order[s * batch:(s + 1) * batch])
    torch.cuda.synchronize()
    dt = (time.time() - t0) * images / (n_steps * batch)
    return {"impl": "pytorch", "mode": mode, "batch": batch, "s_per_epoch": round(dt, 4), "warmup_s": round(warm, 1),
            "loss": round(float(loss), 5), "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=50000)
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--modes", default="eager_fp32,eager_tf32,bf16_cl,compiled_bf16")
    args = ap.parse_args()
    data = torch.randint(0, 256, (args.images, 3, 32, 32), dtype=torch.uint8, device="cuda")
    for mode in args.modes.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            try:
                print(json.dumps(run(mode, batch, args.images, data)), flush=True)
            except Exception as e:  # one failing mode must not hide the others
                print(json.dumps({"impl": "pytorch", "mode": mode, "batch": batch, "error": str(e)[:300]}), flush=True)


if __name__ == "__main__":
    main()
