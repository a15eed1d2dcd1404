#!/usr/bin/python3
"""Parity of svm-fit / svm-eval with scikit-learn's SVC (which wraps libsvm).

  sklearn_parity.py make-features OUT [--train N --test M --dim D --seed S --noise X]
      A generated, ReLU-like features file (format ae-features, docs/FORMATS.md) with
      provenance: 10 classes in a low-dimensional latent space pushed through a random
      ReLU layer, plus features that are constant over the training split (dead units and a
      constant non-zero one) and one unit that is dead in training but fires in test.

  sklearn_parity.py check --features F --model svm.h5 --eval eval.h5 [--train-limit N]
      Fits StandardScaler + SVC(C, gamma='scale', tol) on the same training rows, predicts
      the rows svm-eval classified, and checks: same resolved gamma, support-vector count
      within 1 %, >= 99.5 % identical predictions, accuracy within 0.2 percentage points.
      Prints one JSON line; exit status 1 when a check fails.

  sklearn_parity.py compare-predictions --eval eval.h5 --libsvm-out FILE
      svm-predict's output (one label per line) against /predictions of eval.h5.
"""
import argparse
import datetime
import json
import sys
import time

import h5py
import numpy as np


def make_features(args):
    rng = np.random.default_rng(args.seed)
    k, latent = 10, 12
    centres = rng.normal(0, 1.0, (k, latent))
    A = rng.normal(0, 1.0 / np.sqrt(latent), (args.dim, latent))
    b = rng.normal(-0.3, 0.5, args.dim)

    def split(n):
        y = rng.integers(0, k, n).astype(np.uint8)
        x = np.empty((n, args.dim), np.float32)
        for r0 in range(0, n, 2000):  # in blocks: 50,000 x 8,192 stays within ~1 GB of temporaries
            yb = y[r0:r0 + 2000]
            z = centres[yb] + rng.normal(0, args.noise, (len(yb), latent))
            x[r0:r0 + 2000] = np.maximum(z @ A.T + b + rng.normal(0, 0.3, (len(yb), args.dim)), 0.0)
        return x, y

    xtr, ytr = split(args.train)
    xte, yte = split(args.test)
    dead = rng.choice(args.dim, args.dim // 5, replace=False)
    xtr[:, dead] = 0
    xte[:, dead] = 0
    # Constant over training but not zero, and a unit that wakes up only on test rows.
    xtr[:, dead[0]] = 0.75
    xte[:, dead[0]] = 0.75
    xte[::7, dead[1]] = rng.uniform(0.1, 1.0, len(range(0, args.test, 7)))

    with h5py.File(args.out, "w") as f:
        f["/train/features"] = xtr
        f["/train/labels"] = ytr
        f["/test/features"] = xte
        f["/test/labels"] = yte
        f.attrs["format"] = "ae-features"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["created_by"] = "sklearn_parity.py make-features"
        f.attrs["created_at"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        f.attrs["inputs"] = "[]"
        f.attrs["params"] = json.dumps({"train": args.train, "test": args.test, "dim": args.dim, "seed": args.seed,
                                       "noise": args.noise})
        f.attrs["device"] = "cpu"
        f.attrs["seconds"] = 0.0
        f.attrs["images_per_second"] = 0.0
        f.attrs["class_names"] = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                                  "truck"]


def check(args):
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    with h5py.File(args.model, "r") as m:
        n_train = int(m.attrs["n_train"])
        gamma_ours = float(m.attrs["gamma"])
        n_sv_ours = int(m["/svm/n_support"][()].sum())
        C, tol = float(m.attrs["C"]), float(m.attrs["tol"])
    with h5py.File(args.eval, "r") as e:
        pred_ours = e["/predictions"][()]
        labels = e["/labels"][()]
        acc_ours = float(e.attrs["accuracy"])
        split = e.attrs["split"]
        if isinstance(split, bytes):
            split = split.decode()
    with h5py.File(args.features, "r") as f:
        # float32, as the tools compute: scikit-learn would keep float16 (ae-encode's default
        # storage) and standardise in it.
        xtr = f["/train/features"][:n_train].astype(np.float32)
        ytr = f["/train/labels"][:n_train]
        xte = f[f"/{split}/features"][: len(pred_ours)].astype(np.float32)

    t0 = time.time()
    scaler = StandardScaler().fit(xtr)
    svc = SVC(C=C, kernel="rbf", gamma="scale", tol=tol, cache_size=1000).fit(scaler.transform(xtr), ytr)
    fit_s = time.time() - t0
    t0 = time.time()
    pred_sk = svc.predict(scaler.transform(xte))
    predict_s = time.time() - t0
    acc_sk = float(np.mean(pred_sk == labels))
    n_sv_sk = int(svc.n_support_.sum())
    agree = float(np.mean(pred_sk == pred_ours))
    result = {
        "n_train": n_train, "n_test": len(labels),
        "gamma_ours": gamma_ours, "gamma_sklearn": float(svc._gamma),
        "n_sv_ours": n_sv_ours, "n_sv_sklearn": n_sv_sk,
        "accuracy_ours": acc_ours, "accuracy_sklearn": acc_sk,
        "prediction_agreement": agree,
        "sklearn_fit_seconds": round(fit_s, 2), "sklearn_predict_seconds": round(predict_s, 2),
    }
    failures = []
    if abs(gamma_ours - svc._gamma) > 1e-9 * svc._gamma:
        failures.append("gamma differs")
    if abs(n_sv_ours - n_sv_sk) > 0.01 * n_sv_sk:
        failures.append("support-vector count differs by more than 1 %")
    if agree < 0.995:
        failures.append("fewer than 99.5 % identical predictions")
    if abs(acc_ours - acc_sk) > 0.002:
        failures.append("accuracy differs by more than 0.2 percentage points")
    if abs(acc_ours - float(np.mean(pred_ours == labels))) > 1e-12:
        failures.append("eval.h5 accuracy does not match its predictions")
    result["failures"] = failures
    print(json.dumps(result))
    return 1 if failures else 0


def compare_predictions(args):
    with h5py.File(args.eval, "r") as e:
        ours = e["/predictions"][()]
    theirs = np.loadtxt(args.libsvm_out, dtype=np.float64).astype(np.int64)
    if theirs.shape != ours.shape:
        print(json.dumps({"failures": [f"svm-predict gave {theirs.shape} predictions, eval.h5 has {ours.shape}"]}))
        return 1
    agree = float(np.mean(theirs == ours))
    print(json.dumps({"n": len(ours), "agreement": agree, "failures": [] if agree >= args.min_agreement else ["disagree"]}))
    return 0 if agree >= args.min_agreement else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-features")
    mk.add_argument("out")
    mk.add_argument("--train", type=int, default=2000)
    mk.add_argument("--test", type=int, default=1000)
    mk.add_argument("--dim", type=int, default=512)
    mk.add_argument("--seed", type=int, default=1)
    mk.add_argument("--noise", type=float, default=0.9, help="class overlap (latent noise)")
    ck = sub.add_parser("check")
    ck.add_argument("--features", required=True)
    ck.add_argument("--model", required=True)
    ck.add_argument("--eval", required=True)
    cp = sub.add_parser("compare-predictions")
    cp.add_argument("--eval", required=True)
    cp.add_argument("--libsvm-out", required=True)
    cp.add_argument("--min-agreement", type=float, default=1.0)
    args = ap.parse_args()
    if args.cmd == "make-features":
        make_features(args)
        return 0
    if args.cmd == "check":
        return check(args)
    return compare_predictions(args)


if __name__ == "__main__":
    sys.exit(main())
