#!/usr/bin/env python3
"""Writes a cifar10-dataset file (docs/FORMATS.md) of random pixels, for speed benchmarks.

    make_synthetic_cifar.py OUT.h5 [--train 50000] [--test 10000] [--seed 1]

The real data set's shapes and types ([N,3,32,32] uint8 images, [N] uint8 labels), random
contents: no code path of the toolkit depends on the pixel values, so timings carry over.
Needs numpy and h5py (present on the lent GPU machines).
"""
import argparse

import h5py
import numpy as np

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=50000)
    ap.add_argument("--test", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    with h5py.File(args.out, "w") as f:
        f.attrs["format"] = "cifar10-dataset"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["created_by"] = "bench/make_synthetic_cifar.py (random pixels)"
        f.attrs["class_names"] = CLASSES
        for split, n in (("train", args.train), ("test", args.test)):
            f.create_dataset(f"{split}/images", data=rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8))
            f.create_dataset(f"{split}/labels", data=rng.integers(0, 10, n, dtype=np.uint8))


if __name__ == "__main__":
    main()
