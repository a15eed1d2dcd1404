#!/usr/bin/python3
"""scikit-learn's SVC on the same features as svm-fit/svm-eval, for bench/svm_cpu.sh.

  svm_sklearn.py FEATURES --train N --predict M --C 10 --eval EVAL_H5

Fits StandardScaler + SVC(rbf, gamma='scale') on the first N training rows, predicts the
first M test rows, and prints one JSON line: fit and predict seconds (scaling included),
support vectors, accuracy on those M rows, and agreement with svm-eval's predictions.
"""
import argparse
import json
import time

import h5py
import numpy as np
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--train", type=int, required=True)
    ap.add_argument("--predict", type=int, required=True)
    ap.add_argument("--C", type=float, default=10.0)
    ap.add_argument("--eval", required=True, help="svm-eval output on the test split")
    args = ap.parse_args()
    with h5py.File(args.features, "r") as f:
        xtr = f["/train/features"][: args.train].astype(np.float32)  # float16 files too, as the tools read them
        ytr = f["/train/labels"][: args.train]
        xte = f["/test/features"][: args.predict].astype(np.float32)
        yte = f["/test/labels"][: args.predict]
    with h5py.File(args.eval, "r") as e:
        ours = e["/predictions"][: args.predict]

    t0 = time.time()
    scaler = StandardScaler().fit(xtr)
    svc = SVC(C=args.C, kernel="rbf", gamma="scale", cache_size=2048).fit(scaler.transform(xtr), ytr)
    fit_s = time.time() - t0
    t0 = time.time()
    pred = svc.predict(scaler.transform(xte))
    predict_s = time.time() - t0
    print(json.dumps({
        "fit_seconds": fit_s, "predict_seconds": predict_s, "n_train": len(ytr), "n_predict": len(yte),
        "n_sv": int(svc.n_support_.sum()), "gamma": float(svc._gamma),
        "accuracy": float(np.mean(pred == yte)), "agreement": float(np.mean(pred == ours)),
        "accuracy_ours_same_rows": float(np.mean(ours == yte)),
    }))


if __name__ == "__main__":
    main()
