"""Shared by the report's modules: names, errors, messages, number formatting and the
architecture of the model a run folder holds."""
import hashlib
import os
import pkgutil
import subprocess
import sys

from .escape import visible


# The plots need no BLAS threads; fewer threads also keep the forked readers simple. Set
# before numpy loads (here, at import).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

TOOL = "report"
VERSION = "0.1.0"
DEFAULT_CLASS_NAMES = ["airplane", "automobile", "bird", "cat", "deer",
                       "dog", "frog", "horse", "ship", "truck"]

# (kind, file name in a run folder, expected `format`, stage name, what is lost without it)
KINDS = [
    ("model", "model.h5", "ae-model", "train", "loss curves and reconstructions"),
    ("features", "features.h5", "ae-features", "encode", "encode stage or 2-D view of the features"),
    ("svm", "svm.h5", "svm-model", "fit", "the SVM fit stage"),
    ("eval", "eval.h5", "svm-eval", "eval", "accuracy, confusion matrix and per-class accuracy"),
]
MAX_FORMAT_VERSION = 1

EXAMPLE = """Example:
  report --run-dir data/run -o data/run/report
  report --model m.h5 --eval e.h5 -o /tmp/r --json

Without -o the report goes to RUN_DIR/report. Exit status: 0 success,
1 runtime error (one line naming the file and the problem), 2 usage error."""


class ReportError(Exception):
    """A problem with one file: printed as '<file>: <problem>', exit 1."""

    def __init__(self, path, problem):
        super().__init__(f"{path}: {problem}")


class UsageError(Exception):
    """A bad option combination: exit 2."""


def log(args, msg):
    if not args.quiet:
        print(f"{TOOL}: {visible(msg)}", file=sys.stderr, flush=True)


def warn(msg):
    print(f"{TOOL}: warning: {visible(msg)}", file=sys.stderr, flush=True)


def git_describe():
    """`git describe` of the build, or None when unknown. The Makefile stamps it into the
    zip (report_lib/git-describe.txt), as it does into the C++ tools: an installed copy has
    no repository around it. Run from the source tree (tools/report.py), git is asked."""
    try:
        stamped = (pkgutil.get_data("report_lib", "git-describe.txt") or b"").decode().strip()
        if stamped and stamped != "unknown":
            return stamped
    except OSError:
        pass
    here = os.path.dirname(os.path.realpath(sys.argv[0]))
    try:
        out = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=5)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def version_line():
    """The version line, "report 0.1.0 (git abc123, Python 3.11.2)"; without a known commit the version alone,
    never "git unknown" (as common/version.cpp)."""
    git = git_describe()
    return f"{TOOL} {VERSION} ({'git ' + git + ', ' if git else ''}Python {sys.version.split()[0]})"


# The architecture of a model file without encoder_channels/input_shape (files written before
# the architecture was data): the seed model, 3×32×32 images, encoder 256,128.
SEED_INPUT_SHAPE = [3, 32, 32]
SEED_ENCODER_CHANNELS = [256, 128]


def latent_shape(input_shape, channels):
    """[c, h, w] of the encoder's output: k 2×2 pools halve H and W k times."""
    c, h, w = input_shape
    k = len(channels)
    return [channels[-1], h >> k, w >> k]


def describe_architecture(arch):
    """"3×32×32 → 256,128 → 128×8×8 (8,192 features)" for the tables."""
    lat = latent_shape(arch["input_shape"], arch["encoder_channels"])
    return ("×".join(str(v) for v in arch["input_shape"]) + " → encoder "
            + ",".join(str(v) for v in arch["encoder_channels"]) + " → "
            + "×".join(str(v) for v in lat) + f" ({lat[0] * lat[1] * lat[2]:,} features)"
            + (" (seed model: the file does not record it)" if arch.get("assumed") else ""))


def fmt_seconds(s):
    if s is None:
        return "—"
    if s < 1:
        return f"{s:.2f} s"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(round(s % 60)):02d} s"
    return f"{int(s // 3600)} h {int(round(s % 3600 / 60)):02d} min"


def fmt_int(n):
    return "—" if n is None else f"{int(n):,}"


def fmt_rate(r, unit):
    if r is None:
        return "—"
    return f"{r:,.0f} {unit}" if r >= 100 else f"{r:.3g} {unit}"


def pct(x, digits=1):
    return f"{100 * x:.{digits}f} %"


def score_words(scoring, score, sep=" "):
    """A --cv-scoring score in words. svm-fit stores scores as 'higher is better', so
    log_loss's is the negated log-loss: shown as the log-loss itself, which people read."""
    if scoring == "log_loss":
        return f"log-loss{sep}{-score:.3f} (lower is better)"
    return f"{scoring}{sep}{score:.3f}"


def sha256_file(path, cache={}):
    if path not in cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(8 << 20), b""):
                h.update(block)
        cache[path] = h.hexdigest()
    return cache[path]


def process_start():
    """When this process started, in seconds of CLOCK_BOOTTIME (/proc/self/stat's field 22),
    or None."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Phases:
    """Where the report's wall time goes, in the other tools' terms (common/phases.h):
    {"startup", "read", "hash", "compute", "write", "other", "total"} seconds for --json.
    Time is charged to the current phase; "startup" runs from the process's start
    (/proc/self/stat) to the first phase: Python and the report's own modules. The plotting
    library is imported while the readers read and charged to "compute" (the figures' work);
    h5py, imported just before the readers are forked, to "read"."""

    NAMES = ("startup", "read", "hash", "compute", "write", "other")

    def __init__(self):
        import time
        self._now = lambda: time.clock_gettime(time.CLOCK_BOOTTIME)
        self.start = process_start() or self._now()
        self.last, self.current = self.start, "startup"
        self.spent = dict.fromkeys(self.NAMES, 0.0)

    def enter(self, phase):
        """Charges the time since the last switch to the current phase; `phase` is current now."""
        now = self._now()
        self.spent[self.current] += now - self.last
        self.last, self.current = now, phase

    def summary(self):
        self.enter(self.current)
        out = {k: round(v, 4) for k, v in self.spent.items()}
        out["total"] = round(self.last - self.start, 4)
        return out
