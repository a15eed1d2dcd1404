#!/usr/bin/python3
"""Writes CIFAR-10 binary batches whose labels can be learned from the pixels, for the
cluster tests: a sweep's runs must differ in accuracy, and predictions compared between
two pipelines must not be one constant class. (tests/helpers/gen_cifar.py's fixture has
labels unrelated to its pixels: every classifier scores about zero on it.)

    gen_learnable.py OUTDIR [--seed 1]

OUTDIR/cifar-10-batches-bin/ gets data_batch_1..5.bin and test_batch.bin (10,000 records of
1 label byte + 3,072 pixel bytes each, as the official files). Record of class c: a colour
of class c, horizontal stripes whose period depends on c, and uniform noise; labels are
drawn at random, so every class appears in every prefix.
"""
import argparse
import os

import numpy as np

RECORDS = 10000
NAMES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


def batch(rng):
    labels = rng.integers(0, 10, RECORDS).astype(np.uint8)
    palette = np.array([[200, 40, 40], [40, 200, 40], [40, 40, 200], [200, 200, 40], [200, 40, 200],
                        [40, 200, 200], [120, 120, 120], [230, 140, 30], [30, 140, 230], [140, 30, 230]], np.float32)
    rows = np.arange(32, dtype=np.float32)[None, :, None]
    period = (2 + labels).astype(np.float32)[:, None, None]
    stripes = 40 * np.sin(2 * np.pi * rows / period)                          # [N, 32, 1]
    images = 0.25 * palette[labels][:, :, None, None] + 95 + 0.4 * stripes[:, None, :, :]  # [N, 3, 32, 1]
    images = np.broadcast_to(images, (RECORDS, 3, 32, 32)) + rng.uniform(-110, 110, (RECORDS, 3, 32, 32))
    rec = np.empty((RECORDS, 3073), np.uint8)
    rec[:, 0] = labels
    rec[:, 1:] = np.clip(images, 0, 255).astype(np.uint8).reshape(RECORDS, 3072)
    return rec.tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    folder = os.path.join(a.out, "cifar-10-batches-bin")
    os.makedirs(folder, exist_ok=True)
    for name in NAMES:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(batch(rng))


if __name__ == "__main__":
    main()
