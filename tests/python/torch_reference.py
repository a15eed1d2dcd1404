#!/usr/bin/env python3
"""Checks the C++ autoencoder against PyTorch (Debian's python3-torch).

  torch_reference.py gradients --model model.h5 --dump grads.h5
      grads.h5 comes from `ae-train --dump-gradients` run with model.h5's weights: the
      images of one batch, the C++ decoder outputs, batch-mean MSE and every parameter
      gradient. Loads model.h5 into the same model in torch, runs forward and backward on
      the same batch and compares all of them (relative error < 1e-4).

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ae_torch_model import Autoencoder, load_h5, to_input  # noqa: E402

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


def check_gradients(args):
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model = Autoencoder()
    with h5py.File(args.model, "r") as f:
        load_h5(model, f)
    with h5py.File(args.dump, "r") as d:
        images = d["/images"][...]
        outputs = d["/outputs"][...]
        loss_cpp = float(d["/loss"][0])
        grads = {name: d["/grad" + name][...] for name in
                 [g + "/" + p for g, _ in model.convs() for p in ("weight", "bias")]}
    x = to_input(images)
    out = model(x)
    loss = torch.nn.functional.mse_loss(out, x)
    loss.backward()
    compare("decoder output", outputs, out.detach().numpy(), args.tol)
    compare("loss", [loss_cpp], [loss.item()], args.tol)
    for group, conv in model.convs():
        compare(group + "/weight grad", grads[group + "/weight"], conv.weight.grad.numpy(), args.tol)
        compare(group + "/bias grad", grads[group + "/bias"], conv.bias.grad.numpy(), args.tol)


def check_features(args):
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    model = Autoencoder()
    with h5py.File(args.model, "r") as f:
        load_h5(model, f)
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
            worst = 0.0
            with torch.no_grad():
                for start in range(0, n, 512):
                    x = to_input(data[f"/{split}/images"][start:start + 512])
                    theirs = model.encode(x).flatten(1).numpy()
                    mine = ours[start:start + 512]
                    worst = max(worst, float(np.max(np.abs(mine - theirs)) / max(np.max(np.abs(theirs)), 1e-30)))
            ok = worst < args.tol
            if not ok:
                failures.append(split)
            print(f"{'ok  ' if ok else 'FAIL'} {split} features ({n} x {ours.shape[1]}): rel err {worst:.3e} "
                  f"(tol {args.tol:g})")
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
