#!/usr/bin/env python3
"""The PyTorch reference of the autoencoder family, timed like ae-train.

    torch_ae_bench.py [--images 50000] [--batches 64,256] [--modes eager_fp32,eager_tf32,bf16_cl,compiled_bf16]
                      [--encoder-channels 256,128] [--input-shape 3,32,32]

The architecture is the family of kernels/ae/model.h: per encoder channel count c_i a
block conv3x3 + ReLU + maxpool 2x2; the decoder conv3x3 (c_k -> c_k) + ReLU, then per
block back upsample x2 + conv3x3 (+ ReLU, none on the last, which returns to C channels).
The defaults are the seeds' model on 3x32x32 images.

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


def make_model(channels, enc_channels):
    """The family's model (kernels/ae/model.h); make_model(3, [256, 128]) is the seeds'."""
    enc, prev = [], channels
    for c in enc_channels:
        enc += [nn.Conv2d(prev, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        prev = c
    k = enc_channels[-1]
    dec = [nn.Conv2d(k, k, 3, padding=1), nn.ReLU()]
    for i in range(len(enc_channels) - 1, 0, -1):  # back up to encoder block i's size
        dec += [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(enc_channels[i], enc_channels[i - 1], 3, padding=1),
                nn.ReLU()]
    dec += [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(enc_channels[0], channels, 3, padding=1)]
    return nn.Sequential(nn.Sequential(*enc), nn.Sequential(*dec))


def run(mode, batch, images, data, enc_channels):
    torch.backends.cuda.matmul.allow_tf32 = mode != "eager_fp32"
    torch.backends.cudnn.allow_tf32 = mode != "eager_fp32"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = make_model(data.shape[1], enc_channels).cuda()
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
    arch = "x".join(str(d) for d in data.shape[1:]) + ":" + ",".join(str(c) for c in enc_channels)
    return {"impl": "pytorch", "arch": arch, "mode": mode, "batch": batch, "s_per_epoch": round(dt, 4),
            "warmup_s": round(warm, 1),
            "loss": round(float(loss), 5), "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=50000)
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--modes", default="eager_fp32,eager_tf32,bf16_cl,compiled_bf16")
    ap.add_argument("--encoder-channels", default="256,128", help="comma-separated, e.g. 96,48,24")
    ap.add_argument("--input-shape", default="3,32,32", help="C,H,W of the images")
    args = ap.parse_args()
    enc_channels = [int(c) for c in args.encoder_channels.split(",")]
    shape = [int(d) for d in args.input_shape.split(",")]
    if len(shape) != 3 or min(shape) < 1 or min(enc_channels) < 1:
        ap.error("--input-shape takes C,H,W and --encoder-channels positive counts")
    if shape[1] % (1 << len(enc_channels)) or shape[2] % (1 << len(enc_channels)):
        ap.error(f"H and W must be divisible by 2^{len(enc_channels)}")
    arch = "x".join(str(d) for d in shape) + ":" + ",".join(str(c) for c in enc_channels)
    data = torch.randint(0, 256, (args.images, *shape), dtype=torch.uint8, device="cuda")
    for mode in args.modes.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            try:
                print(json.dumps(run(mode, batch, args.images, data, enc_channels)), flush=True)
            except Exception as e:  # one failing mode must not hide the others
                print(json.dumps({"impl": "pytorch", "arch": arch, "mode": mode, "batch": batch, "error": str(e)[:300]}),
                      flush=True)


if __name__ == "__main__":
    main()
