#!/usr/bin/python3
"""Checks that two svm-fit models (svm.h5) are the same fit: every dataset equal byte for
byte and every attribute equal but the wall-clock ones (created_at, fit_seconds), and that
the model is a real cross-validated one (its table of CV accuracies over a C x gamma grid
varies, its dual coefficients are not zero). Used by the preemption tests: a resumed fit
against an uninterrupted one (tests/bats/pipeline.bats, tests/slurm/preempt.bats).

    same_svm_model.py A.h5 B.h5 C_VALUES GAMMA_VALUES     exit 0 when they are; else an
                                                         AssertionError naming what differs
"""
import sys

import h5py
import numpy as np

WALL_CLOCK = {"created_at", "fit_seconds"}


def datasets(f):
    names = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return sorted(names)


def main():
    a, b = (h5py.File(f, "r") for f in sys.argv[1:3])
    n_c, n_gamma = int(sys.argv[3]), int(sys.argv[4])
    names = datasets(a)
    assert names == datasets(b) and "model_selection/cv_accuracy" in names, (names, datasets(b))
    for n in names:
        x, y = a[n][()], b[n][()]
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), n
    assert sorted(a.attrs) == sorted(b.attrs), (sorted(a.attrs), sorted(b.attrs))
    for k in a.attrs:
        if k not in WALL_CLOCK:
            assert np.array_equal(np.asarray(a.attrs[k]), np.asarray(b.attrs[k])), k
    cv = a["model_selection/cv_accuracy"][()]
    assert cv.shape == (n_c, n_gamma) and cv.max() > 0.5 and cv.min() < cv.max(), cv
    assert np.abs(a["svm/dual_coef"][()]).sum() > 0


if __name__ == "__main__":
    main()
