#!/usr/bin/env python3
"""Writes a copy of an ae-features file with every features dataset transformed.

    feature_transform.py SRC DST TRANSFORM

The transforms of what the features go through before the SVM (docs/RESULTS.md; the SVM
standardises every feature afterwards, as always):

  powP       sign(x)|x|^P, element by element (pow0.5: power normalisation)
  powPl2     then each row scaled to unit L2 norm
  log1p      log(1 + max(x, 0))
  poolK      the latent map [c, h, w] average-pooled per channel over K×K windows:
             [c, h/K, w/K] (pool2 on the seed model: 8,192 → 2,048 features)
  quadrants  each channel summed over the map's four quadrants (Coates & Ng's pooling):
             [c, 2, 2]
  whitenE    PCA whitening fitted on /train/features (the originals only): centred,
             rotated onto the covariance's eigenvectors and each component divided by
             sqrt(eigenvalue + E · mean eigenvalue) (E regularises the small components;
             whiten0.1). Every dataset (test and the views too) gets the training fit.

Every /<split>/features* dataset is transformed with the same map; labels and attributes
are copied, latent_shape follows the new extents (whitening: [d, 1, 1]).
"""
import re
import sys

import h5py
import numpy as np

BLOCK = 10000


def parse(name):
    m = re.fullmatch(r"pow([0-9.]+)(l2)?|log1p|pool([0-9]+)|quadrants|whiten([0-9.]+)", name)
    if not m:
        sys.exit(f"feature_transform: unknown transform '{name}'")
    return m


def pooled(x, shape, k):
    c, h, w = shape
    if h % k or w % k:
        sys.exit(f"feature_transform: pool{k} needs a latent map divisible by {k}, not {h}x{w}")
    return x.reshape(len(x), c, h // k, k, w // k, k).mean(axis=(3, 5)).reshape(len(x), -1)


def quadrants(x, shape):
    c, h, w = shape
    m = x.reshape(len(x), c, h, w)
    top, left = h // 2, w // 2
    parts = [m[:, :, :top, :left], m[:, :, :top, left:], m[:, :, top:, :left], m[:, :, top:, left:]]
    return np.stack([p.sum(axis=(2, 3)) for p in parts], axis=2).reshape(len(x), -1)


def whitening(train, eps):
    """The mean and the matrix of PCA whitening fitted on `train` (an h5py dataset)."""
    n, d = train.shape
    mean, cov = np.zeros(d), np.zeros((d, d))
    for i in range(0, n, BLOCK):
        x = train[i:i + BLOCK].astype(np.float64)
        mean += x.sum(axis=0)
        cov += x.T @ x
    mean /= n
    cov = cov / n - np.outer(mean, mean)
    values, vectors = np.linalg.eigh(cov)
    values = np.maximum(values, 0)
    return mean, vectors / np.sqrt(values + eps * values.mean())


def main():
    src, dst, name = sys.argv[1:4]
    m = parse(name)
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        shape = tuple(int(e) for e in f.attrs["latent_shape"]) if "latent_shape" in f.attrs else None
        if (name.startswith("pool") or name == "quadrants") and shape is None:
            sys.exit("feature_transform: pooling needs the file's latent_shape attribute")
        fit = whitening(f["train/features"], float(m.group(4))) if name.startswith("whiten") else None

        def apply(x):
            if m.group(1):
                x = np.sign(x) * np.abs(x) ** float(m.group(1))
                if m.group(2):
                    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
                return x
            if name == "log1p":
                return np.log1p(np.maximum(x, 0))
            if m.group(3):
                return pooled(x, shape, int(m.group(3)))
            if name == "quadrants":
                return quadrants(x, shape)
            return (x - fit[0]) @ fit[1]

        for key, value in f.attrs.items():
            g.attrs[key] = value
        out_dim = None
        for split in f:
            for key in f[split]:
                d = f[f"{split}/{key}"]
                if not key.startswith("features"):
                    f.copy(d, g.require_group(split), name=key)
                    continue
                first = apply(d[0:1].astype(np.float64))
                out = g.create_dataset(f"{split}/{key}", (d.shape[0], first.shape[1]), dtype=np.float32)
                for a, v in d.attrs.items():
                    out.attrs[a] = v
                for i in range(0, d.shape[0], BLOCK):
                    out[i:i + BLOCK] = apply(d[i:i + BLOCK].astype(np.float64)).astype(np.float32)
                out_dim = first.shape[1]
        if shape is not None and out_dim is not None:
            c, h, w = shape
            if m.group(3):
                k = int(m.group(3))
                g.attrs["latent_shape"] = np.array([c, h // k, w // k], dtype=np.int64)
            elif name == "quadrants":
                g.attrs["latent_shape"] = np.array([c, 2, 2], dtype=np.int64)
            elif fit is not None:
                g.attrs["latent_shape"] = np.array([out_dim, 1, 1], dtype=np.int64)


if __name__ == "__main__":
    main()
