#!/usr/bin/python3
"""Writes deliberately bad (and, as controls, good) HDF5 files for the reliability suite.

    badh5.py dataset  OUT [--train N] [--test N] [--bad KIND]
    badh5.py features OUT [--train N] [--test N] [--dim D] [--bad KIND]
    badh5.py mutate   IN OUT KIND          (copy an existing file, then damage it with h5py)
    badh5.py cut      IN OUT OFFSET        (the first OFFSET bytes; a negative OFFSET cuts from the end)
    badh5.py flip     IN OUT SEED COUNT [LO HI]   (COUNT random bytes in [LO, HI) xor 0xFF)
    badh5.py meta-end IN                   (prints the offset past which only raw data lies)

Contents are seeded and never all zero. Files follow docs/FORMATS.md except for the one
fault named by KIND, so a tool that rejects them rejects them for that fault.
"""
import argparse
import json
import random
import shutil
import sys

import h5py
import numpy as np

CLASS_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def provenance(f, fmt):
    f.attrs["format"] = fmt
    f.attrs["format_version"] = np.int64(1)
    f.attrs["created_by"] = "badh5.py (test fixture)"
    f.attrs["created_at"] = "2026-01-01T00:00:00Z"
    f.attrs["inputs"] = "[]"
    f.attrs["params"] = "{}"


def split_images(rng, n):
    return rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)


def split_labels(n):
    return (np.arange(n) * 7 % 10).astype(np.uint8)  # every class once n >= 10


def write_dataset(path, ntrain, ntest, bad):
    rng = np.random.default_rng(1234)
    with h5py.File(path, "w") as f:
        provenance(f, "cifar10-dataset")
        f.attrs["class_names"] = CLASS_NAMES
        for split, n in (("train", ntrain), ("test", ntest)):
            if bad == "empty-train" and split == "train":
                n = 0
            if bad == "empty-test" and split == "test":
                n = 0
            if bad == "no-test" and split == "test":
                continue
            images, labels = split_images(rng, n), split_labels(n)
            kw = dict(chunks=(min(max(n, 1), 256), 3, 32, 32), compression="gzip") if n else {}
            f.create_dataset(f"{split}/images", data=images, **kw)
            f.create_dataset(f"{split}/labels", data=labels)
        apply(f, bad)


def write_features(path, ntrain, ntest, dim, bad):
    rng = np.random.default_rng(99)
    with h5py.File(path, "w") as f:
        provenance(f, "ae-features")
        f.attrs["class_names"] = CLASS_NAMES
        f.attrs["device"] = "cpu"
        for split, n in (("train", ntrain), ("test", ntest)):
            if bad == "empty-train" and split == "train":
                n = 0
            labels = split_labels(n)
            # Class-dependent means so an SVM has something to separate; some dead units
            # (always 0), as the real encoder has.
            x = rng.normal(size=(n, dim)).astype(np.float32) + labels[:, None].astype(np.float32) * 0.3
            x[:, ::7] = 0
            f.create_dataset(f"{split}/features", data=x)
            f.create_dataset(f"{split}/labels", data=labels)
        apply(f, bad)


def replace(f, name, data):
    del f[name]
    f.create_dataset(name, data=data)


def apply(f, bad):
    """Damages an open file in one way (shared by the writers and `mutate`)."""
    if bad in (None, "none", "empty-train", "empty-test", "no-test"):
        return
    fmt = f.attrs.get("format", "")
    data_name = "features" if fmt == "ae-features" else "images"
    if bad == "float32-images":
        replace(f, "train/images", f["train/images"][:].astype(np.float32))
    elif bad == "float64-features":
        replace(f, "train/features", f["train/features"][:].astype(np.float64))
    elif bad == "int64-labels":
        replace(f, "train/labels", f["train/labels"][:].astype(np.int64))
    elif bad == "images-28":
        n = f["train/images"].shape[0]
        replace(f, "train/images", np.full((n, 3, 28, 28), 7, np.uint8))
    elif bad == "images-hwc":
        replace(f, "train/images", np.ascontiguousarray(f["train/images"][:].transpose(0, 2, 3, 1)))
    elif bad == "features-1d":
        replace(f, "train/features", f["train/features"][:].reshape(-1))
    elif bad == "no-labels":
        del f["train/labels"]
    elif bad == "label-10":
        lab = f["train/labels"][:]
        lab[len(lab) // 2] = 10
        replace(f, "train/labels", lab)
    elif bad == "label-255":
        lab = f["test/labels"][:]
        lab[-1] = 255
        replace(f, "test/labels", lab)
    elif bad == "rows-mismatch":
        replace(f, "train/labels", f["train/labels"][:-1])
    elif bad == "nan":
        x = f["train/features"][:]
        x[3, 5] = np.nan
        replace(f, "train/features", x)
    elif bad == "inf":
        x = f["train/features"][:]
        x[-1, -2] = -np.inf
        replace(f, "train/features", x)
    elif bad == "test-nan":
        x = f["test/features"][:]
        x[1, 1] = np.nan
        replace(f, "test/features", x)
    elif bad == "single-class":
        replace(f, "train/labels", np.full(f["train/labels"].shape, 4, np.uint8))
    elif bad == "format-features":
        f.attrs["format"] = "ae-features"
    elif bad == "format-dataset":
        f.attrs["format"] = "cifar10-dataset"
    elif bad == "format-version-2":
        f.attrs["format_version"] = np.int64(2)
    elif bad == "no-format":
        del f.attrs["format"]
    elif bad == "class-names-9":
        f.attrs["class_names"] = CLASS_NAMES[:9]
    # ---- data outside the file (issue 19, class 4) and hollow shapes (class 3) ----
    elif bad in ("external-link", "external-link-fifo", "external-storage", "virtual"):
        import os
        name = f"train/{data_name}"
        x = f[name][:]
        side = f.filename + ".other.h5"
        with h5py.File(side, "w") as o:
            o.create_dataset("data", data=x)
        del f[name]
        if bad == "external-link":
            f[name] = h5py.ExternalLink(os.path.basename(side), "/data")
        elif bad == "external-link-fifo":
            fifo = f.filename + ".fifo"
            if not os.path.exists(fifo):
                os.mkfifo(fifo)
            f[name] = h5py.ExternalLink(os.path.basename(fifo), "/data")
        elif bad == "external-storage":
            raw = f.filename + ".raw"
            x.tofile(raw)
            f.create_dataset(name, shape=x.shape, dtype=x.dtype, external=[(os.path.basename(raw), 0, x.nbytes)])
        else:
            layout = h5py.VirtualLayout(shape=x.shape, dtype=x.dtype)
            layout[...] = h5py.VirtualSource(os.path.basename(side), "data", shape=x.shape)
            f.create_virtual_dataset(name, layout)
    elif bad == "huge-rows":  # claims 2^31 rows; nothing of them is stored (a few KB file)
        name = f"train/{data_name}"
        shape = (2**31,) + f[name].shape[1:]
        dtype = f[name].dtype
        del f[name]
        f.create_dataset(name, shape=shape, dtype=dtype, chunks=(64,) + shape[1:])
        replace(f, "train/labels", np.zeros(0, np.uint8))
        del f["train/labels"]
        f.create_dataset("train/labels", shape=(2**31,), dtype=np.uint8, chunks=(4096,))
    elif bad == "group-not-dataset":
        del f[f"train/{data_name}"]
        f.create_group(f"train/{data_name}")
    # ---- ae-model damage (on a copy of a real model) ----
    elif bad == "arch-conv1-128":  # a model of another architecture: 128 first-layer filters
        replace(f, "encoder/conv1/weight", np.full((128, 3, 3, 3), 0.01, np.float32))
        replace(f, "encoder/conv1/bias", np.full((128,), 0.01, np.float32))
    elif bad == "arch-latent-64":  # another architecture: a 64-channel latent
        replace(f, "encoder/conv2/weight", np.full((64, 256, 3, 3), 0.01, np.float32))
        replace(f, "encoder/conv2/bias", np.full((64,), 0.01, np.float32))
    elif bad == "no-decoder":
        del f["decoder"]
    elif bad == "no-encoder-conv2":
        del f["encoder/conv2"]
    elif bad == "float64-weights":
        replace(f, "encoder/conv1/weight", f["encoder/conv1/weight"][:].astype(np.float64))
    elif bad == "nan-weights":
        w = f["encoder/conv2/weight"][:]
        w[1, 2, 1, 1] = np.nan
        replace(f, "encoder/conv2/weight", w)
    elif bad == "inf-bias":
        b = f["encoder/conv1/bias"][:]
        b[0] = np.inf
        replace(f, "encoder/conv1/bias", b)
    # ---- svm-model damage (on a copy of a real svm.h5) ----
    elif bad == "svm-nsupport-sum":
        ns = f["svm/n_support"][:]
        ns[0] += 5
        replace(f, "svm/n_support", ns)
    elif bad == "svm-mask-short":
        replace(f, "svm/feature_mask", f["svm/feature_mask"][:-3])
    elif bad == "svm-sv-float64":
        replace(f, "svm/support_vectors", f["svm/support_vectors"][:].astype(np.float64))
    elif bad == "svm-no-rho":
        del f["svm/rho"]
    elif bad == "svm-nan-coef":
        c = f["svm/dual_coef"][:]
        c[0, 0] = np.nan
        replace(f, "svm/dual_coef", c)
    elif bad == "svm-scale-zero":
        s = f["scaler/scale"][:]
        s[0] = 0.0
        replace(f, "scaler/scale", s)
    else:
        sys.exit(f"badh5.py: unknown damage kind {bad!r}")


def meta_end(path):
    """The largest offset of any raw-data byte's start: everything before the first raw data
    block is superblock/object headers/B-trees. Prints the smallest raw-data offset."""
    offsets = []
    with h5py.File(path, "r") as f:
        def visit(_, obj):
            if isinstance(obj, h5py.Dataset):
                if obj.chunks:
                    for i in range(obj.id.get_num_chunks()):
                        offsets.append(obj.id.get_chunk_info(i).byte_offset)
                elif obj.id.get_offset() is not None:
                    offsets.append(obj.id.get_offset())
        f.visititems(visit)
    print(min(offsets) if offsets else 0)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dataset")
    d.add_argument("out")
    d.add_argument("--train", type=int, default=40)
    d.add_argument("--test", type=int, default=20)
    d.add_argument("--bad")
    ft = sub.add_parser("features")
    ft.add_argument("out")
    ft.add_argument("--train", type=int, default=60)
    ft.add_argument("--test", type=int, default=30)
    ft.add_argument("--dim", type=int, default=64)
    ft.add_argument("--bad")
    m = sub.add_parser("mutate")
    m.add_argument("inp")
    m.add_argument("out")
    m.add_argument("bad")
    c = sub.add_parser("cut")
    c.add_argument("inp")
    c.add_argument("out")
    c.add_argument("offset", type=int)
    fl = sub.add_parser("flip")
    fl.add_argument("inp")
    fl.add_argument("out")
    fl.add_argument("seed", type=int)
    fl.add_argument("count", type=int)
    fl.add_argument("lo", type=int, nargs="?", default=0)
    fl.add_argument("hi", type=int, nargs="?", default=-1)
    me = sub.add_parser("meta-end")
    me.add_argument("inp")
    a = p.parse_args()

    if a.cmd == "dataset":
        write_dataset(a.out, a.train, a.test, a.bad)
    elif a.cmd == "features":
        write_features(a.out, a.train, a.test, a.dim, a.bad)
    elif a.cmd == "mutate":
        shutil.copyfile(a.inp, a.out)
        with h5py.File(a.out, "r+") as f:
            apply(f, a.bad)
            # A hand-edited file: its datasets' checksums no longer hold (hdf5_checksum.h).
            f.visititems(lambda _, o: o.attrs.pop("crc32", None) if isinstance(o, h5py.Dataset) else None)
    elif a.cmd == "cut":
        data = open(a.inp, "rb").read()
        open(a.out, "wb").write(data[: a.offset] if a.offset >= 0 else data[: len(data) + a.offset])
    elif a.cmd == "flip":
        data = bytearray(open(a.inp, "rb").read())
        hi = len(data) if a.hi < 0 else min(a.hi, len(data))
        rnd = random.Random(a.seed)
        where = sorted(rnd.randrange(a.lo, hi) for _ in range(a.count))
        for i in where:
            data[i] ^= 0xFF
        open(a.out, "wb").write(bytes(data))
        print(json.dumps(where))
    elif a.cmd == "meta-end":
        meta_end(a.inp)


if __name__ == "__main__":
    main()
