#!/usr/bin/python3
"""report — turns a run folder's HDF5 files into a report a person can look at.

Reads model.h5 (ae-train), features.h5 (ae-encode), svm.h5 (svm-fit) and eval.h5
(svm-eval), whichever of them exist (docs/FORMATS.md describes them), and writes
index.html, report.md and PNG plots into one folder: loss curves, a reconstruction
grid, the confusion matrix, per-class accuracy, stage timings and a provenance table.

The folder is assembled under a temporary name beside the destination and renamed
into place at the end, so a half-written report never sits under the final name.

This file is the program; the work is in the package report_lib/ beside it (loading the
files, plots, HTML/Markdown). `make` packs both into one executable zip archive,
build/bin/report, so an installed report needs no folder of modules beside it.
"""
import os
import sys

# Run from the source tree, report_lib/ sits beside this file; inside the zip archive the
# archive itself is on sys.path already.
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

# First, and with nothing else of the report imported: a Python without h5py or matplotlib
# hands over to one that has them (report_lib/interpreter.py).
from report_lib.interpreter import find_python_with_plotting  # noqa: E402

if __name__ == "__main__":
    NO_PYTHON = find_python_with_plotting()
    from report_lib.cli import script_main  # noqa: E402
    script_main(NO_PYTHON)
