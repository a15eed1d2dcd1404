#!/usr/bin/python3
"""Writes CIFAR-10 binary batches with known pixels and labels (test fixtures).

    gen_cifar.py OUTDIR [--tar FILE.tar.gz]

OUTDIR/cifar-10-batches-bin/ gets data_batch_1..5.bin and test_batch.bin, each the
official 10,000 records of 1 label byte + 3,072 pixel bytes. Record r of batch b has
    label  = (3*r + b) % 10
    pixel j = (31*r + 7*j + 13*b) % 256     (j = 0..3071, CHW order)
so every test can recompute the expected contents (expected_images/labels below).
Batch b is 1..5 for training and 6 for the test batch.
"""
import argparse
import os
import tarfile

import numpy as np

RECORDS = 10000
NAMES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


def expected_labels(b, n=RECORDS):
    return ((3 * np.arange(n) + b) % 10).astype(np.uint8)


def expected_images(b, n=RECORDS):
    r = np.arange(n, dtype=np.int64)[:, None]
    j = np.arange(3072, dtype=np.int64)[None, :]
    return ((31 * r + 7 * j + 13 * b) % 256).astype(np.uint8).reshape(n, 3, 32, 32)


def batch_bytes(b):
    rec = np.empty((RECORDS, 3073), np.uint8)
    rec[:, 0] = expected_labels(b)
    rec[:, 1:] = expected_images(b).reshape(RECORDS, 3072)
    return rec.tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--tar", help="also write a cifar-10-binary.tar.gz-style archive here")
    args = ap.parse_args()
    folder = os.path.join(args.outdir, "cifar-10-batches-bin")
    os.makedirs(folder, exist_ok=True)
    for b, name in enumerate(NAMES, start=1):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(batch_bytes(b))
    with open(os.path.join(folder, "batches.meta.txt"), "w") as f:
        f.write("\n".join(["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]) + "\n")
    if args.tar:
        with tarfile.open(args.tar, "w:gz", compresslevel=1) as t:
            t.add(folder, arcname="cifar-10-batches-bin")


if __name__ == "__main__":
    main()
