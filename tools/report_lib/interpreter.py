"""Which Python runs the report: the one started, or another that has h5py and matplotlib.

Imported by tools/report.py before anything else of the report, so that an interpreter
without the packages hands over (os.execv) having imported only this: the report's own
modules take ~0.03-0.06 s to import, paid twice when they were imported first."""
import importlib.util
import os
import shutil
import sys


def find_python_with_plotting():
    """Re-executes the report under a Python that has h5py and matplotlib when this one has
    not: Debian's live in /usr/bin/python3 (the shebang), but some machines (the lent GPU
    images, virtual environments) keep them in the python3 first on PATH. REPORT_PYTHON
    names one explicitly. Returns a message when none is found; the run then fails with it.

    Each candidate is started on the report itself, not probed first: a probe cost one more
    interpreter start on every run (~0.1-0.2 s on a GPU host whose packages live in a
    virtual environment). REPORT_REEXECUTED lists the interpreters tried so far (os.pathsep
    between them), so that a candidate without the packages passes on to the next one and
    none is started twice."""
    needed = ("h5py", "matplotlib")
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    # Compared by absolute path, not realpath: a virtual environment's python3 is a symlink to
    # the very interpreter that lacks the packages, and differs only by where it was started.
    tried = [p for p in os.environ.get("REPORT_REEXECUTED", "").split(os.pathsep) if p]
    tried.append(os.path.abspath(sys.executable))
    for cand in (os.environ.get("REPORT_PYTHON"), shutil.which("python3"), "/usr/bin/python3"):
        if not cand or os.path.abspath(cand) in tried:
            continue
        tried.append(os.path.abspath(cand))
        os.environ["REPORT_REEXECUTED"] = os.pathsep.join(tried)
        try:
            # argv[0], not __file__: installed, the report is one zip archive (make).
            os.execv(cand, [cand, os.path.abspath(sys.argv[0])] + sys.argv[1:])
        except OSError:
            continue  # not an executable file: the next candidate
    return (f"{sys.executable} has no {' or '.join(missing)}, nor has any other python3 found: install "
            f"python3-h5py and python3-matplotlib (make deps), or set REPORT_PYTHON to a Python that has them")
