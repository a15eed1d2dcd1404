#!/usr/bin/python3
"""Generated inputs for the dataset readers and classify (tests/bats/datasets.bats, classify.bats).

    gen_datasets.py idx OUTDIR [--gz] [--train N] [--test N]
    gen_datasets.py cifar100 OUTDIR [--train N] [--test N] [--tar FILE.tar.gz]
    gen_datasets.py folder OUTDIR [--size HxW] [--gray] [--jpeg]
    gen_datasets.py pngs DATASET.h5 OUTDIR [--split test] [--count 20]
    gen_datasets.py image OUT.{png,jpg} [--size HxW]

Every pixel and label is a known function of its position (expected_* below), never all
zero, so a test can recompute what the reader must return.
"""
import argparse
import gzip
import io
import os
import struct
import tarfile

import numpy as np


# ---- IDX (MNIST layout) ---------------------------------------------------------------------
def idx_labels(split, n):  # split 0 = train, 1 = test
    return ((7 * np.arange(n) + 3 * split) % 10).astype(np.uint8)


def idx_images(split, n, h=28, w=28):
    r = np.arange(n, dtype=np.int64)[:, None]
    j = np.arange(h * w, dtype=np.int64)[None, :]
    return ((17 * r + 5 * j + 11 * split + 1) % 256).astype(np.uint8).reshape(n, 1, h, w)


def idx_bytes(array, ndim):
    header = struct.pack(">BBBB", 0, 0, 8, ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.tobytes()


def write_idx(outdir, gz, n_train, n_test):
    os.makedirs(outdir, exist_ok=True)
    for split, stem, n in ((0, "train", n_train), (1, "t10k", n_test)):
        files = {f"{stem}-images-idx3-ubyte": idx_bytes(idx_images(split, n)[:, 0], 3),
                 f"{stem}-labels-idx1-ubyte": idx_bytes(idx_labels(split, n), 1)}
        for name, data in files.items():
            if gz:
                with open(os.path.join(outdir, name + ".gz"), "wb") as f:
                    f.write(gzip.compress(data, mtime=0))
            else:
                with open(os.path.join(outdir, name), "wb") as f:
                    f.write(data)


# ---- CIFAR-100 ------------------------------------------------------------------------------
def c100_fine(split, n):
    return ((13 * np.arange(n) + split) % 100).astype(np.uint8)


def c100_coarse(split, n):
    return (c100_fine(split, n) // 5).astype(np.uint8)


def c100_images(split, n):
    r = np.arange(n, dtype=np.int64)[:, None]
    j = np.arange(3072, dtype=np.int64)[None, :]
    return ((29 * r + 3 * j + 7 * split + 5) % 256).astype(np.uint8).reshape(n, 3, 32, 32)


FINE_NAMES = [f"fine_{i:02d}" for i in range(100)]
COARSE_NAMES = [f"coarse_{i:02d}" for i in range(20)]


def c100_bytes(split, n):
    rec = np.empty((n, 3074), np.uint8)
    rec[:, 0] = c100_coarse(split, n)
    rec[:, 1] = c100_fine(split, n)
    rec[:, 2:] = c100_images(split, n).reshape(n, 3072)
    return rec.tobytes()


def write_cifar100(outdir, n_train, n_test, tar):
    folder = os.path.join(outdir, "cifar-100-binary")
    os.makedirs(folder, exist_ok=True)
    files = {"train.bin": c100_bytes(0, n_train), "test.bin": c100_bytes(1, n_test),
             "fine_label_names.txt": ("\n".join(FINE_NAMES) + "\n").encode(),
             "coarse_label_names.txt": ("\n".join(COARSE_NAMES) + "\n").encode()}
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    if tar:
        with tarfile.open(tar, "w:gz") as t:
            for name in files:
                t.add(os.path.join(folder, name), arcname="cifar-100-binary/" + name)


# ---- image folders --------------------------------------------------------------------------
FOLDER_CLASSES = ["cat", "dog"]  # sorted: cat = 0, dog = 1
FOLDER_COUNTS = {"train": (3, 2), "test": (1, 2)}  # images per class


def folder_image(split, cls, i, h, w, gray):
    y, x = np.mgrid[0:h, 0:w]
    base = 40 * cls + 10 * i + (0 if split == "train" else 5) + 1
    if gray:
        return ((base + 3 * y + 2 * x) % 256).astype(np.uint8)
    return np.stack([(base + 3 * y + 2 * x + 50 * c) % 256 for c in range(3)], axis=-1).astype(np.uint8)


def save_image(path, pixels):
    from PIL import Image
    Image.fromarray(pixels).save(path, quality=95) if path.endswith(".jpg") else Image.fromarray(pixels).save(path)


def write_folder(outdir, h, w, gray, jpeg):
    for split, counts in FOLDER_COUNTS.items():
        for cls, name in enumerate(FOLDER_CLASSES):
            d = os.path.join(outdir, split, name)
            os.makedirs(d, exist_ok=True)
            for i in range(counts[cls]):
                ext = "jpg" if jpeg else "png"
                save_image(os.path.join(d, f"img{i}.{ext}"), folder_image(split, cls, i, h, w, gray))
            with open(os.path.join(d, "notes.txt"), "w") as f:  # not an image: ignored
                f.write("ignored\n")


def write_pngs(dataset, outdir, split, count):
    import h5py
    from PIL import Image
    os.makedirs(outdir, exist_ok=True)
    with h5py.File(dataset, "r") as f:
        images = f[f"{split}/images"][:count]
    for i, img in enumerate(images):
        hwc = np.transpose(img, (1, 2, 0))
        Image.fromarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc).save(os.path.join(outdir, f"{i:03d}.png"))


def parse_size(s):
    h, _, w = s.partition("x")
    return int(h), int(w or h)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("idx"); p.add_argument("outdir"); p.add_argument("--gz", action="store_true")
    p.add_argument("--train", type=int, default=120); p.add_argument("--test", type=int, default=40)
    p = sub.add_parser("cifar100"); p.add_argument("outdir"); p.add_argument("--tar")
    p.add_argument("--train", type=int, default=300); p.add_argument("--test", type=int, default=100)
    p = sub.add_parser("folder"); p.add_argument("outdir"); p.add_argument("--size", default="12x10")
    p.add_argument("--gray", action="store_true"); p.add_argument("--jpeg", action="store_true")
    p = sub.add_parser("pngs"); p.add_argument("dataset"); p.add_argument("outdir")
    p.add_argument("--split", default="test"); p.add_argument("--count", type=int, default=20)
    p = sub.add_parser("image"); p.add_argument("out"); p.add_argument("--size", default="64x64")
    a = ap.parse_args()
    if a.cmd == "idx":
        write_idx(a.outdir, a.gz, a.train, a.test)
    elif a.cmd == "cifar100":
        write_cifar100(a.outdir, a.train, a.test, a.tar)
    elif a.cmd == "folder":
        h, w = parse_size(a.size)
        write_folder(a.outdir, h, w, a.gray, a.jpeg)
    elif a.cmd == "pngs":
        write_pngs(a.dataset, a.outdir, a.split, a.count)
    else:
        h, w = parse_size(a.size)
        y, x = np.mgrid[0:h, 0:w]
        img = np.stack([(x * 4) % 256, (y * 4) % 256, (x + y + 30) % 256], axis=-1).astype(np.uint8)
        save_image(a.out, img)


if __name__ == "__main__":
    main()
