#!/usr/bin/env python3
"""Checks the C++ autoencoder against PyTorch (Debian's python3-torch).

  torch_reference.py gradients --model model.h5 --dump grads.h5
      grads.h5 comes from the dev binary build/tests/ae-dump-gradients (tests/dev/
      ae_dump_gradients.cpp, `--model model.h5 --data cifar10.h5 --batch-size N`): the
      images of one batch, the C++ decoder outputs, batch-mean MSE, every parameter
      gradient and the forward pass's decisions (max-pool picks, ReLU masks), with the
      architecture as root attributes input_shape [C,H,W] and encoder_channels (absent:
      the seed model, 3x32x32 with 256,128). Loads model.h5 into the same model in torch
      and compares the outputs (relative error < 1e-4); checks that every C++ decision is
      float64 PyTorch's except within 1e-5 of a boundary; then runs PyTorch's backward
      along the C++ decisions and compares the loss and every gradient (< 1e-4). For k
      encoder blocks that is 6k + 4 comparisons (16 for the seed model).

  torch_reference.py features --model model.h5 --data cifar10.h5 --features features.h5
      Compares ae-encode's features of every split in features.h5 with torch's encoder
      (relative error < 1e-5), and the labels with the dataset's.

Relative error of a tensor = max |ours - torch| / max |torch|. Prints one line per
comparison; exits 1 when any fails.
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ae_torch_model import Autoencoder, architecture_of, load_h5, to_input  # noqa: E402

failures = []


def compare(name, ours, theirs, tol):
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        failures.append(name)
        print(f"FAIL {name}: shape {ours.shape} vs torch {theirs.shape}")
        return
    scale = np.max(np.abs(theirs)) if theirs.size else 0.0
    if scale == 0.0:
        failures.append(name)
        print(f"FAIL {name}: torch's value is all zero, the comparison would prove nothing")
        return
    err = np.max(np.abs(ours - theirs)) / scale
    ok = err < tol and np.all(np.isfinite(ours))
    if not ok:
        failures.append(name)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: rel err {err:.3e} (tol {tol:g}, max |torch| {scale:.3e})")


# How far from a ReLU's or a max pool's decision boundary (relative to the layer's largest
# magnitude, computed in float64) a decision must be before fp32 rounding cannot flip it.
AMBIGUOUS = 1e-5


def forward_with_decisions(model, x, d):
    """The model's forward pass in torch, with the max pools' picks and the ReLUs' masks
    taken from the C++ forward pass (`d`: the dump's /decisions: pool<i>_argmax, pool<i>
    per encoder block, dconv<j> per decoder ReLU). Autograd through it is PyTorch's
    backward along the same paths as the C++ backward."""
    def pool_relu(z, argmax, after):
        picked = z.flatten(2).gather(2, argmax.flatten(2)).view(after.shape)
        return picked * (after > 0)
    a = x
    for i, conv in enumerate(model.encoder_convs(), 1):
        a = pool_relu(conv(a), d[f"pool{i}_argmax"], d[f"pool{i}"])
    convs = model.decoder_convs()
    a = convs[0](a) * (d["dconv1"] > 0)
    for j, conv in enumerate(convs[1:-1], 2):
        a = conv(F.interpolate(a, scale_factor=2, mode="nearest")) * (d[f"dconv{j}"] > 0)
    return convs[-1](F.interpolate(a, scale_factor=2, mode="nearest"))


def check_decisions(model, x, d):
    """Every C++ decision must be PyTorch's (float64) except where the float64 values lie
    within AMBIGUOUS of the boundary. Prints one line per layer."""
    m = Autoencoder(model.input_channels, model.encoder_channels).double()
    m.load_state_dict(model.state_dict())
    with torch.no_grad():
        def pools(name, z, argmax, after):
            scale = float(z.abs().max())
            ours_val = z.flatten(2).gather(2, argmax.flatten(2)).view(after.shape)
            best, best_idx = F.max_pool2d(z, 2, return_indices=True)
            wrong_pick = (best_idx != argmax) & ((best - ours_val) >= AMBIGUOUS * scale) & (best > 0)
            wrong_relu = ((after > 0) != (ours_val > 0)) & (ours_val.abs() >= AMBIGUOUS * scale)
            close = int(((best_idx != argmax) & (best > 0)).sum()) + int(((after > 0) != (ours_val > 0)).sum())
            report(name, int(wrong_pick.sum() + wrong_relu.sum()), close)
            return ours_val * (after > 0)  # downstream layers see the C++ decisions
        def relus(name, z, after):
            scale = float(z.abs().max())
            differ = (after > 0) != (z > 0)
            report(name, int((differ & (z.abs() >= AMBIGUOUS * scale)).sum()), int(differ.sum()))
            return z * (after > 0)
        a = x.double()
        for i, conv in enumerate(m.encoder_convs(), 1):
            a = pools(f"encoder conv{i} ReLU + pool", conv(a), d[f"pool{i}_argmax"], d[f"pool{i}"])
        convs = m.decoder_convs()
        a = relus("decoder conv1 ReLU", convs[0](a), d["dconv1"])
        for j, conv in enumerate(convs[1:-1], 2):
            a = relus(f"decoder conv{j} ReLU", conv(F.interpolate(a, scale_factor=2, mode="nearest")), d[f"dconv{j}"])


def report(name, wrong, differ):
    if wrong:
        failures.append(name)
        print(f"FAIL {name} decisions: {wrong} differ from float64 torch by more than {AMBIGUOUS:g} of the "
              f"layer's scale")
    else:
        print(f"ok   {name} decisions: {differ} differ from float64 torch, all within {AMBIGUOUS:g} of the boundary")


def check_gradients(args):
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with h5py.File(args.model, "r") as f, h5py.File(args.dump, "r") as d:
        shape, channels = architecture_of(d)
        if architecture_of(f) != (shape, channels):
            failures.append("architecture")
            print(f"FAIL architecture: {args.dump} is {shape} {channels}, {args.model} is {architecture_of(f)}")
            return
        print(f"     architecture: input {'x'.join(map(str, shape))}, encoder channels "
              f"{','.join(map(str, channels))}")
        model = load_h5(Autoencoder(shape[0], channels), f)
        images = d["/images"][...]
        outputs = d["/outputs"][...]
        loss_cpp = float(d["/loss"][0])
        grads = {name: d["/grad" + name][...] for name in
                 [g + "/" + p for g, _ in model.convs() for p in ("weight", "bias")]}
        dec = {k: torch.from_numpy(d["/decisions/" + k][...]) for k in d["/decisions"]}
    if tuple(images.shape[1:]) != tuple(shape):
        failures.append("images")
        print(f"FAIL images: shape {images.shape}, the architecture's input is {shape}")
        return
    expected = {f"pool{i}{s}" for i in range(1, len(channels) + 1) for s in ("", "_argmax")} | \
        {f"dconv{j}" for j in range(1, len(channels) + 1)}
    if set(dec) != expected:
        failures.append("decisions")
        print(f"FAIL decisions: {sorted(dec)}, expected {sorted(expected)}")
        return
    for k in dec:
        if k.endswith("_argmax"):
            dec[k] = dec[k].long()
    x = to_input(images)
    with torch.no_grad():
        compare("decoder output", outputs, model(x).numpy(), args.tol)
    # The C++ decisions are PyTorch's wherever rounding cannot matter; the backward pass is
    # then compared along those decisions, so a pre-activation within rounding of zero (a
    # few of the millions in a batch usually are) cannot flip one path and fail the check.
    check_decisions(model, x, dec)
    out = forward_with_decisions(model, x, dec)
    loss = torch.nn.functional.mse_loss(out, x)
    loss.backward()
    compare("loss", [loss_cpp], [loss.item()], args.tol)
    for group, conv in model.convs():
        compare(group + "/weight grad", grads[group + "/weight"], conv.weight.grad.numpy(), args.tol)
        compare(group + "/bias grad", grads[group + "/bias"], conv.bias.grad.numpy(), args.tol)


def check_features(args):
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with h5py.File(args.model, "r") as f:
        shape, channels = architecture_of(f)
        model = load_h5(Autoencoder(shape[0], channels), f)
    with h5py.File(args.features, "r") as feats, h5py.File(args.data, "r") as data:
        splits = [s for s in ("train", "test") if s in feats]
        if not splits:
            failures.append("splits")
            print("FAIL: no split in " + args.features)
        for split in splits:
            ours = feats[f"/{split}/features"]
            n = ours.shape[0]
            if n != data[f"/{split}/images"].shape[0]:
                failures.append(split)
                print(f"FAIL {split}: {n} feature rows for {data[f'/{split}/images'].shape[0]} images")
                continue
            # A float16 file (ae-encode's default) holds each code rounded to nearest: half a
            # float16 unit in the last place of PyTorch's code is allowed on top of the tolerance.
            half = ours.dtype == np.float16
            worst = 0.0
            with torch.no_grad():
                for start in range(0, n, 512):
                    x = to_input(data[f"/{split}/images"][start:start + 512])
                    theirs = model.encode(x).flatten(1).numpy()
                    mine = ours[start:start + 512].astype(np.float32)
                    gap = np.abs(mine - theirs)
                    if half:
                        ulp = np.spacing(np.maximum(np.abs(theirs), np.abs(mine)).astype(np.float16)).astype(np.float32)
                        gap = np.maximum(gap - 0.5 * ulp, 0)
                    worst = max(worst, float(np.max(gap) / max(np.max(np.abs(theirs)), 1e-30)))
            ok = worst < args.tol
            if not ok:
                failures.append(split)
            print(f"{'ok  ' if ok else 'FAIL'} {split} features ({n} x {ours.shape[1]}): rel err {worst:.3e} "
                  f"(tol {args.tol:g}{' beyond float16 rounding' if half else ''})")
            labels_ok = np.array_equal(feats[f"/{split}/labels"][...], data[f"/{split}/labels"][...])
            if not labels_ok:
                failures.append(split + " labels")
            print(f"{'ok  ' if labels_ok else 'FAIL'} {split} labels")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gradients")
    g.add_argument("--model", required=True)
    g.add_argument("--dump", required=True)
    g.add_argument("--tol", type=float, default=1e-4)
    f = sub.add_parser("features")
    f.add_argument("--model", required=True)
    f.add_argument("--data", required=True)
    f.add_argument("--features", required=True)
    f.add_argument("--tol", type=float, default=1e-5)
    args = p.parse_args()
    check_gradients(args) if args.cmd == "gradients" else check_features(args)
    if failures:
        print(f"{len(failures)} comparison(s) failed: {', '.join(failures)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
