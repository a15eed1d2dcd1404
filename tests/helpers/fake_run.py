#!/usr/bin/python3
"""Writes a hand-made run folder (model.h5, features.h5, svm.h5, eval.h5) following
docs/FORMATS.md, so the report can be tested without training anything.

  fake_run.py --out DIR [--files model,features,svm,eval] [--epochs 4] [--seed 1]

The numbers are synthetic but shaped like a real run: falling losses, one sample image
per class with a blurred "reconstruction", a confusion matrix with a strong diagonal.
"""
import argparse
import hashlib
import json
import os
import sys

import h5py
import numpy as np

CLASS_NAMES = ["airplane", "automobile", "bird", "cat", "deer",
               "dog", "frog", "horse", "ship", "truck"]
STR = h5py.string_dtype(encoding="utf-8")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def provenance(f, fmt, tool, params, inputs):
    f.attrs["format"] = fmt
    f.attrs["format_version"] = np.int64(1)
    f.attrs["created_by"] = f"{tool} 0.1.0 (git fake, CPU only)"
    f.attrs["created_at"] = "2026-11-22T10:00:00Z"
    f.attrs["inputs"] = json.dumps([{"name": p, "sha256": sha256(p) if os.path.exists(p) else "0" * 64}
                                    for p in inputs])
    f.attrs["params"] = json.dumps(params)


def sample_images(rng):
    """One 32×32 RGB image per class: a coloured gradient with a class-specific stripe."""
    yy, xx = np.mgrid[0:32, 0:32] / 31.0
    images = np.zeros((10, 3, 32, 32), np.uint8)
    for c in range(10):
        base = np.stack([xx * (c + 1) / 10, yy, 1 - xx * yy * c / 10])
        stripe = ((xx * 32).astype(int) // 4 % 2 == c % 2) * 0.3
        img = np.clip(base * 0.7 + stripe + rng.normal(0, 0.03, base.shape), 0, 1)
        images[c] = (img * 255).round().astype(np.uint8)
    return images


def blur(x):
    """3×3 box blur per channel, edges clamped: a plausible imperfect reconstruction."""
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="edge")
    return sum(p[:, :, dy:dy + 32, dx:dx + 32] for dy in range(3) for dx in range(3)) / 9


def write_model(path, rng, epochs, data_path):
    with h5py.File(path, "w") as f:
        provenance(f, "ae-model", "ae-train",
                   {"epochs": str(epochs), "batch-size": "64", "optimizer": "adam", "lr": "0.001",
                    "device": "cpu", "seed": "1"}, [data_path])
        shapes = {"encoder/conv1": (256, 3), "encoder/conv2": (128, 256), "decoder/conv1": (128, 128),
                  "decoder/conv2": (256, 128), "decoder/conv3": (3, 256)}
        for name, (out, inp) in shapes.items():
            f[name + "/weight"] = rng.normal(0, 0.05, (out, inp, 3, 3)).astype(np.float32)
            f[name + "/bias"] = rng.normal(0, 0.01, out).astype(np.float32)
        e = np.arange(1, epochs + 1)
        f["history/train_loss"] = 0.004 + 0.02 / e + rng.uniform(0, 0.0005, epochs)
        f["history/test_loss"] = 0.0045 + 0.018 / e + rng.uniform(0, 0.0005, epochs)
        # No draw from rng: the files' other values stay what they were before val_loss.
        f["history/val_loss"] = (0.0046 + 0.018 / e).astype(np.float64)
        f["history/epoch_seconds"] = 30 + rng.uniform(0, 2, epochs)
        f["history/lr"] = np.where(e > 3, 5e-4, 1e-3).astype(np.float64)
        images = sample_images(rng)
        f["samples/images"] = images
        f["samples/labels"] = np.arange(10, dtype=np.uint8)
        f["samples/reconstructions"] = blur(images.astype(np.float32) / 255).astype(np.float32)
        f.attrs["encoder_channels"] = np.array([256, 128], np.int64)
        f.attrs["input_shape"] = np.array([3, 32, 32], np.int64)
        f.attrs["latent_shape"] = np.array([128, 8, 8], np.int64)
        for k, v in {"architecture": "conv-ae: 3x32x32 -> conv 256, 128 -> latent 128x8x8 (8,192)",
                     "device": "cpu", "precision": "fp32"}.items():
            f.attrs[k] = v
        for k, v in {"param_count": 751875, "epochs_done": epochs, "epochs_target": epochs, "seed": 1,
                     "optimizer_step": epochs * 157, "train_count": 10000, "val_count": 1111, "test_count": 10000,
                     "plateau_bad_epochs": 0}.items():
            f.attrs[k] = np.int64(v)
        f.attrs["lr_current"] = 5e-4
        f.attrs["plateau_best"] = float(np.min(f["history/val_loss"][:]))  # the validation loss steers
        f.attrs["total_seconds"] = float(np.sum(f["history/epoch_seconds"][:]))
        f.attrs["images_per_second"] = 10000 * epochs / f.attrs["total_seconds"]


def write_features(path, rng, model_path, data_path, n_train=60, n_test=40):
    with h5py.File(path, "w") as f:
        provenance(f, "ae-features", "ae-encode", {"batch-size": "256", "split": "train,test",
                                                   "device": "cpu"}, [model_path, data_path])
        for split, n in (("train", n_train), ("test", n_test)):
            labels = (np.arange(n) % 10).astype(np.uint8)
            feats = np.maximum(rng.normal(0, 1, (n, 8192)), 0).astype(np.float32)
            f[f"{split}/features"] = feats
            f[f"{split}/labels"] = labels
        f.attrs["latent_shape"] = np.array([128, 8, 8], np.int64)
        f.attrs["device"] = "cpu"
        f.attrs["seconds"] = 12.5
        f.attrs["images_per_second"] = (n_train + n_test) / 12.5
        f.attrs.create("class_names", CLASS_NAMES, dtype=STR)


def write_svm(path, rng, features_path, n_sv=30, d_kept=4000):
    with h5py.File(path, "w") as f:
        provenance(f, "svm-model", "svm-fit", {"kernel": "rbf", "C": "10", "gamma": "scale",
                                               "device": "cpu"}, [features_path])
        mask = np.zeros(8192, np.uint8)
        mask[:d_kept] = 1
        f["scaler/mean"] = rng.uniform(0, 1, 8192)
        f["scaler/scale"] = rng.uniform(0.5, 2, 8192)
        f["svm/feature_mask"] = mask
        f["svm/support_vectors"] = rng.normal(0, 1, (n_sv, d_kept)).astype(np.float32)
        f["svm/dual_coef"] = rng.normal(0, 1, (9, n_sv))
        f["svm/rho"] = rng.normal(0, 1, 45)
        f["svm/n_support"] = np.full(10, n_sv // 10, np.int32)
        f["svm/classes"] = np.arange(10, dtype=np.int32)
        f["svm/support_indices"] = np.arange(n_sv, dtype=np.int64)
        for k, v in {"kernel": "rbf", "gamma_spec": "scale", "device": "cpu"}.items():
            f.attrs[k] = v
        f.attrs["C"] = 10.0
        f.attrs["gamma"] = 1.0 / 8192
        f.attrs["tol"] = 1e-3
        f.attrs["n_train"] = np.int64(60)
        f.attrs["n_features"] = np.int64(8192)
        f.attrs["n_features_kept"] = np.int64(d_kept)
        f.attrs["fit_seconds"] = 3.25
        f.attrs.create("class_names", CLASS_NAMES, dtype=STR)


def write_eval(path, rng, svm_path, features_path, n=400):
    labels = (np.arange(n) % 10).astype(np.int32)
    # Right with a class-dependent probability, otherwise a random other class.
    p_right = np.linspace(0.35, 0.8, 10)[labels]
    wrong = (labels + rng.integers(1, 10, n)) % 10
    predictions = np.where(rng.uniform(0, 1, n) < p_right, labels, wrong).astype(np.int32)
    confusion = np.zeros((10, 10), np.int64)
    np.add.at(confusion, (labels, predictions), 1)
    with h5py.File(path, "w") as f:
        provenance(f, "svm-eval", "svm-eval", {"split": "test", "device": "cpu"}, [svm_path, features_path])
        f["predictions"] = predictions
        f["labels"] = labels
        f["confusion"] = confusion
        f.attrs["accuracy"] = float(np.mean(predictions == labels))
        f.attrs["per_class_accuracy"] = np.diag(confusion) / confusion.sum(axis=1)
        f.attrs.create("class_names", CLASS_NAMES, dtype=STR)
        f.attrs["split"] = "test"
        f.attrs["seconds"] = 0.8
        f.attrs["device"] = "cpu"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--files", default="model,features,svm,eval")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    want = set(a.files.split(","))
    unknown = want - {"model", "features", "svm", "eval"}
    if unknown:
        sys.exit(f"fake_run.py: unknown file kinds {sorted(unknown)}")
    p = {k: os.path.join(a.out, k + ".h5") for k in ("model", "features", "svm", "eval")}
    data = "data/cifar10.h5"
    if "model" in want:
        write_model(p["model"], rng, a.epochs, data)
    if "features" in want:
        write_features(p["features"], rng, p["model"], data)
    if "svm" in want:
        write_svm(p["svm"], rng, p["features"])
    if "eval" in want:
        write_eval(p["eval"], rng, p["svm"], p["features"])


if __name__ == "__main__":
    main()
