#!/usr/bin/python3
"""Inputs and checks for tests/bats/formats.bats (docs/FORMATS.md: plain features, libsvm).

  formats_check.py make-plain OUT [--dtype float64] [--names] [--seed S] [--noise X]
      A plain features file as a user writes it with h5py: /train and /test features
      [N, D] and int64 labels, no format attribute, no provenance; --names adds class_names.

  formats_check.py make-libsvm TRAIN TEST [--seed S]
      The same kind of data as libsvm sparse text, labels -1, 3 and 7, first seen in
      descending order (libsvm keeps that order; the toolkit sorts).

  formats_check.py libsvm-to-plain IN.libsvm OUT.h5 --classes a,b,c
      IN as a plain features file (its /train), labels as indices of --classes.

  formats_check.py compare-predictions --eval eval.h5 --libsvm-out FILE [--min 0.999]
      svm-predict's output (one label per line) against eval.h5's /predictions mapped
      through its class_names; exit 1 below --min agreement.

  formats_check.py check-metrics --eval eval.h5
      eval.h5's per-class precision/recall/F1, macro averages, balanced accuracy, top-k and
      log-loss against scikit-learn's (to 1e-9) on its /labels, /predictions and
      /probabilities. Exit 77 when scikit-learn is not importable.
"""
import argparse
import sys

import h5py
import numpy as np


def cloud(rng, n, dim, k, noise=1.0):
    centres = rng.normal(0, 1.2, (k, dim))
    y = rng.integers(0, k, n)
    return (centres[y] + rng.normal(0, noise, (n, dim))), y


def make_plain(a):
    rng = np.random.default_rng(a.seed)
    x, y = cloud(rng, 700, 12, 4, a.noise)
    with h5py.File(a.out, "w") as f:
        f["/train/features"] = x[:500].astype(a.dtype)
        f["/train/labels"] = y[:500].astype(np.int64)
        f["/test/features"] = x[500:].astype(a.dtype)
        f["/test/labels"] = y[500:].astype(np.int64)
        if a.names:
            f.attrs["class_names"] = ["north", "east", "south", "west"]


def write_libsvm(path, x, y, labels):
    with open(path, "w") as out:
        for row, c in zip(x, y):
            items = " ".join(f"{i + 1}:{v:.6g}" for i, v in enumerate(row) if v != 0)
            out.write(f"{labels[c]} {items}\n")


def make_libsvm(a):
    rng = np.random.default_rng(a.seed)
    x, y = cloud(rng, 900, 10, 3)
    x = x * np.arange(1, 11) + 3.0  # features of different ranges: svm-scale has work to do
    x[:, 4] = np.where(rng.random(900) < 0.7, 0.0, x[:, 4])  # sparse
    y[:3] = [2, 1, 0]
    labels = [-1, 3, 7]
    write_libsvm(a.train, x[:600], y[:600], labels)
    write_libsvm(a.test, x[600:], y[600:], labels)


def libsvm_to_plain(a):
    classes = a.classes.split(",")
    rows, labels, dim = [], [], 0
    for line in open(a.input):
        parts = line.split()
        if not parts:
            continue
        labels.append(classes.index(str(int(float(parts[0])))))
        row = {int(i): float(v) for i, v in (p.split(":") for p in parts[1:])}
        dim = max([dim] + list(row))
        rows.append(row)
    x = np.zeros((len(rows), dim), np.float32)
    for r, row in enumerate(rows):
        for i, v in row.items():
            x[r, i - 1] = v
    with h5py.File(a.out, "w") as f:
        f["/train/features"] = x
        f["/train/labels"] = np.array(labels, np.int64)
        f.attrs["class_names"] = classes


def compare_predictions(a):
    with h5py.File(a.eval, "r") as f:
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["class_names"]]
        ours = [int(names[p]) for p in f["/predictions"][:]]
    theirs = [int(float(line.split()[0])) for line in open(a.libsvm_out) if line.strip() and line[0] != "l"]
    if len(ours) != len(theirs):
        print(f"{len(ours)} predictions in {a.eval}, {len(theirs)} in {a.libsvm_out}")
        return 1
    same = sum(o == t for o, t in zip(ours, theirs)) / len(ours)
    print(f"agreement {same:.6f} over {len(ours)} rows")
    return 0 if same >= a.min else 1


def check_metrics(a):
    try:
        from sklearn import metrics
    except ImportError:
        print("scikit-learn is not importable")
        return 77
    with h5py.File(a.eval, "r") as f:
        y, p = f["/labels"][:], f["/predictions"][:]
        K = f["/confusion"].shape[0]
        got = {k: f.attrs[k] for k in ("accuracy", "macro_f1", "macro_precision", "macro_recall", "balanced_accuracy",
                                       "weighted_f1")}
        per = {k: f["/metrics/" + k][:] for k in ("precision", "recall", "f1", "support")}
        prob = f["/probabilities"][:] if "/probabilities" in f else None
        if prob is not None:
            got["log_loss"] = f.attrs["log_loss"]
            top = dict(zip(f.attrs["top_k"], f.attrs["top_k_accuracy"]))
    present = np.unique(np.concatenate([y, p]))
    rep = metrics.classification_report(y, p, labels=present, output_dict=True, zero_division=0)
    want = {
        "accuracy": metrics.accuracy_score(y, p),
        "macro_f1": metrics.f1_score(y, p, average="macro", zero_division=0),
        "macro_precision": rep["macro avg"]["precision"],
        "macro_recall": rep["macro avg"]["recall"],
        "weighted_f1": rep["weighted avg"]["f1-score"],
        "balanced_accuracy": metrics.balanced_accuracy_score(y, p),
    }
    checks = []
    for c in present:
        r = rep[str(c)]
        checks += [(f"precision[{c}]", per["precision"][c], r["precision"]),
                   (f"recall[{c}]", per["recall"][c], r["recall"]),
                   (f"f1[{c}]", per["f1"][c], r["f1-score"]), (f"support[{c}]", per["support"][c], r["support"])]
    for c in set(range(K)) - set(present.tolist()):
        checks.append((f"precision[{c}] absent", np.isnan(per["precision"][c]), True))
    if prob is not None:
        want["log_loss"] = metrics.log_loss(y, prob, labels=list(range(K)))
        for k, v in top.items():
            checks.append((f"top_{k}", v, metrics.top_k_accuracy_score(y, prob, k=int(k), labels=list(range(K)))))
    checks += [(k, got[k], want[k]) for k in want]
    bad = [c for c in checks if not abs(float(c[1]) - float(c[2])) <= 1e-9]
    for name, ours, theirs in bad:
        print(f"{name}: ours {ours!r}, scikit-learn {theirs!r}")
    print(f"{len(checks) - len(bad)} of {len(checks)} numbers equal scikit-learn's to 1e-9")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("make-plain")
    s.add_argument("out")
    s.add_argument("--dtype", default="float64")
    s.add_argument("--names", action="store_true")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--noise", type=float, default=1.0, help="spread of each class around its centre")
    s = sub.add_parser("make-libsvm")
    s.add_argument("train")
    s.add_argument("test")
    s.add_argument("--seed", type=int, default=2)
    s = sub.add_parser("libsvm-to-plain")
    s.add_argument("input")
    s.add_argument("out")
    s.add_argument("--classes", required=True)
    s = sub.add_parser("compare-predictions")
    s.add_argument("--eval", required=True)
    s.add_argument("--libsvm-out", required=True)
    s.add_argument("--min", type=float, default=0.999)
    s = sub.add_parser("check-metrics")
    s.add_argument("--eval", required=True)
    a = ap.parse_args()
    fn = {"make-plain": make_plain, "make-libsvm": make_libsvm, "libsvm-to-plain": libsvm_to_plain,
          "compare-predictions": compare_predictions, "check-metrics": check_metrics}[a.cmd]
    sys.exit(fn(a) or 0)


if __name__ == "__main__":
    main()
