#!/usr/bin/python3
"""report — turns a run folder's HDF5 files into a report a person can look at.

Reads model.h5 (ae-train), features.h5 (ae-encode), svm.h5 (svm-fit) and eval.h5
(svm-eval), whichever of them exist (docs/FORMATS.md describes them), and writes
index.html, report.md and PNG plots into one folder: loss curves, a reconstruction
grid, the confusion matrix, per-class accuracy, stage timings and a provenance table.

The folder is assembled under a temporary name beside the destination and renamed
into place at the end, so a half-written report never sits under the final name.
"""
import argparse
import hashlib
import html
import json
import math
import os
import pickle
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The plots need no BLAS threads; fewer threads also keep the forked readers simple.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

TOOL = "report"
VERSION = "0.1.0"
DEFAULT_CLASS_NAMES = ["airplane", "automobile", "bird", "cat", "deer",
                       "dog", "frog", "horse", "ship", "truck"]

# (kind, file name in a run folder, expected `format`, stage name, what is lost without it)
KINDS = [
    ("model", "model.h5", "ae-model", "train", "loss curves and reconstructions"),
    ("features", "features.h5", "ae-features", "encode", "the encode stage"),
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
        print(f"{TOOL}: {msg}", file=sys.stderr, flush=True)


def warn(msg):
    print(f"{TOOL}: warning: {msg}", file=sys.stderr, flush=True)


def git_describe():
    here = os.path.dirname(os.path.realpath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=5)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def version_line():
    return f"{TOOL} {VERSION} (git {git_describe()}, Python {sys.version.split()[0]})"


# ---------------------------------------------------------------------------------------
# Reading and checking the HDF5 files
# ---------------------------------------------------------------------------------------

def plain(value):
    """HDF5 attribute → plain Python (str, int, float, list)."""
    import numpy as np
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()] if value.dtype.kind in "OSU" else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def open_checked(path, fmt):
    import h5py
    if not os.path.exists(path):
        raise ReportError(path, "no such file")
    if os.path.isdir(path):
        raise ReportError(path, "is a folder, not an HDF5 file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        reason = str(e).split("(")[0].strip().rstrip(",") or "unreadable"
        raise ReportError(path, f"not a readable HDF5 file ({reason})") from None
    got = plain(f.attrs.get("format", None))
    if got is None:
        f.close()
        raise ReportError(path, f"no 'format' attribute: not a '{fmt}' file of this toolkit")
    if got != fmt:
        f.close()
        raise ReportError(path, f"format is '{got}', expected '{fmt}' (is this the right file?)")
    version = plain(f.attrs.get("format_version", 1))
    if not isinstance(version, int) or version > MAX_FORMAT_VERSION:
        f.close()
        raise ReportError(path, f"format_version {version} is newer than this report understands "
                                f"({MAX_FORMAT_VERSION}); update the toolkit")
    return f


def read_dataset(f, path, name, kinds, shape=None, required=False):
    """Reads dataset `name` if present, checking dtype kind ('f', 'i', 'u') and shape
    (None entries match any size). Missing → None, unless required."""
    import h5py
    if name not in f:
        if required:
            raise ReportError(path, f"missing dataset /{name}")
        return None
    obj = f[name]
    if not isinstance(obj, h5py.Dataset):
        raise ReportError(path, f"/{name} is a group, expected a dataset")
    if obj.dtype.kind not in kinds:
        raise ReportError(path, f"/{name} has dtype {obj.dtype}, expected "
                                + " or ".join({"f": "float", "i": "int", "u": "uint"}[k] for k in kinds))
    if shape is not None:
        if len(obj.shape) != len(shape) or any(s is not None and s != g for s, g in zip(shape, obj.shape)):
            want = "[" + ",".join("N" if s is None else str(s) for s in shape) + "]"
            raise ReportError(path, f"/{name} has shape {list(obj.shape)}, expected {want}")
    return obj[()]


def dataset_shape(f, name):
    import h5py
    obj = f.get(name)
    return tuple(obj.shape) if isinstance(obj, h5py.Dataset) else None


def common_attrs(f):
    attrs = {k: plain(v) for k, v in f.attrs.items()}
    for key in ("inputs", "params"):
        raw = attrs.get(key)
        if isinstance(raw, str):
            try:
                attrs[key] = json.loads(raw)
            except ValueError:
                attrs[key] = raw  # shown as it is
    return attrs


def number(attrs, key):
    v = attrs.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return v


def load_model(path):
    import numpy as np
    with open_checked(path, "ae-model") as f:
        m = {"attrs": common_attrs(f), "notes": []}
        hist = {}
        for key in ("train_loss", "test_loss", "epoch_seconds", "lr"):
            v = read_dataset(f, path, f"history/{key}", "fi", shape=(None,))
            if v is not None:
                hist[key] = v.astype(np.float64)
        lengths = {len(v) for v in hist.values()}
        if len(lengths) > 1:
            raise ReportError(path, "the /history arrays have different lengths "
                                    + str({k: len(v) for k, v in hist.items()}))
        m["history"] = hist
        images = read_dataset(f, path, "samples/images", "u", shape=(None, 3, 32, 32))
        recon = read_dataset(f, path, "samples/reconstructions", "f", shape=(None, 3, 32, 32))
        labels = read_dataset(f, path, "samples/labels", "ui", shape=(None,))
        m["samples"] = None
        if images is not None and recon is not None:
            if len(images) != len(recon) or (labels is not None and len(labels) != len(images)):
                raise ReportError(path, f"/samples has {len(images)} images but {len(recon)} "
                                        f"reconstructions and {'no' if labels is None else len(labels)} labels")
            if len(images):
                m["samples"] = {"images": images, "recon": recon, "labels": labels}
        if m["samples"] is None:
            m["notes"].append(f"{os.path.basename(path)} has no /samples: no reconstruction grid")
        if not hist:
            m["notes"].append(f"{os.path.basename(path)} has no /history: no loss curves")
        return m


def load_features(path):
    with open_checked(path, "ae-features") as f:
        splits = {}
        for split in ("train", "test"):
            shape = dataset_shape(f, f"{split}/features")
            if shape is not None:
                if len(shape) != 2:
                    raise ReportError(path, f"/{split}/features has shape {list(shape)}, expected [N,D]")
                splits[split] = shape
        return {"attrs": common_attrs(f), "splits": splits, "notes": []}


def load_svm(path):
    with open_checked(path, "svm-model") as f:
        s = {"attrs": common_attrs(f), "notes": []}
        sv = dataset_shape(f, "svm/support_vectors")
        s["n_sv"] = sv[0] if sv else None
        n_support = read_dataset(f, path, "svm/n_support", "iu", shape=(None,))
        s["n_support"] = n_support.tolist() if n_support is not None else None
        return s


def load_eval(path):
    import numpy as np
    with open_checked(path, "svm-eval") as f:
        e = {"attrs": common_attrs(f), "notes": []}
        confusion = read_dataset(f, path, "confusion", "iu", shape=(None, None), required=True)
        k = confusion.shape[0]
        if confusion.shape[1] != k or k == 0:
            raise ReportError(path, f"/confusion has shape {list(confusion.shape)}, expected [k,k]")
        if (confusion < 0).any():
            raise ReportError(path, "/confusion has negative counts")
        labels = read_dataset(f, path, "labels", "iu", shape=(None,))
        predictions = read_dataset(f, path, "predictions", "iu", shape=(None,))
        if labels is not None and predictions is not None and len(labels) != len(predictions):
            raise ReportError(path, f"/labels has {len(labels)} entries but /predictions {len(predictions)}")
        total = int(confusion.sum())
        if labels is not None and total != len(labels):
            raise ReportError(path, f"/confusion sums to {total} but there are {len(labels)} labels")
        if total == 0:
            raise ReportError(path, "/confusion is all zero: nothing was evaluated")
        names = e["attrs"].get("class_names")
        if not isinstance(names, list) or len(names) != k:
            if names is not None:
                e["notes"].append(f"{os.path.basename(path)}: class_names has "
                                  f"{len(names) if isinstance(names, list) else 'no list of'} names for {k} classes")
            names = DEFAULT_CLASS_NAMES if k == 10 else [f"class {i}" for i in range(k)]
        row_totals = confusion.sum(axis=1)
        computed = np.divide(np.diag(confusion), row_totals, out=np.zeros(k), where=row_totals > 0)
        e.update(confusion=confusion.astype(np.int64), k=k, class_names=[str(n) for n in names],
                 n=total, per_class=computed, accuracy=float(np.trace(confusion) / total))
        stored = number(e["attrs"], "accuracy")
        if stored is not None and abs(stored - e["accuracy"]) > 1e-6:
            e["notes"].append(f"{os.path.basename(path)}: stored accuracy {stored:.4f} differs from "
                              f"the confusion matrix's {e['accuracy']:.4f}; the report uses the matrix")
        return e


LOADERS = {"model": load_model, "features": load_features, "svm": load_svm, "eval": load_eval}

# libhdf5 trusts a file's metadata: a damaged global heap makes it read out of bounds
# (SIGSEGV) or allocate gigabytes (docs/RELIABILITY.md). So each file is read in a forked
# child under a memory and a time limit; the parent only sees plain numbers and arrays, or
# learns from the child's death that the file is damaged.
READ_SECONDS = 60
READ_EXTRA_MEMORY = 2 << 30


def data_bytes_now():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def read_in_child(kind, path):
    import h5py  # noqa: F401  (imported once, before the fork)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(rfd)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGALRM):
                signal.signal(sig, signal.SIG_DFL)
            limit = data_bytes_now()
            if limit:
                resource.setrlimit(resource.RLIMIT_DATA, (limit + READ_EXTRA_MEMORY, limit + READ_EXTRA_MEMORY))
            signal.alarm(READ_SECONDS)
            try:
                result = ("ok", LOADERS[kind](path))
            except ReportError as err:
                result = ("error", str(err))
            except MemoryError:
                result = ("error", f"{path}: damaged HDF5 file (reading it needs more than "
                                   f"{READ_EXTRA_MEMORY >> 30} GB of memory)")
            except Exception as err:  # h5py's OSError/KeyError/ValueError on damaged files
                result = ("error", f"{path}: cannot read it: {err}")
            with os.fdopen(wfd, "wb") as pipe_out:
                pickle.dump(result, pipe_out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    os.close(wfd)
    try:
        with os.fdopen(rfd, "rb") as pipe_in:
            payload = pipe_in.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGALRM:
            raise ReportError(path, f"damaged HDF5 file (reading its metadata took over {READ_SECONDS} s)")
        if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            raise KeyboardInterrupt(sig)
        raise ReportError(path, f"damaged HDF5 file (reading it crashed libhdf5: {signal.Signals(sig).name})")
    try:
        state, value = pickle.loads(payload)
    except Exception:
        raise ReportError(path, "cannot read it (the reader stopped without an answer)") from None
    if state == "error":
        raise ReportError(path, value.split(": ", 1)[1] if value.startswith(path + ": ") else value)
    return value


# ---------------------------------------------------------------------------------------
# Formatting helpers
# ---------------------------------------------------------------------------------------

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


def sha256_file(path, cache={}):
    if path not in cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(8 << 20), b""):
                h.update(block)
        cache[path] = h.hexdigest()
    return cache[path]


# ---------------------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------------------

COLORS = {"train": "#3b6fb6", "test": "#e07b39", "accent": "#2a9d8f", "muted": "#8d99ae", "lr": "#6c757d"}


def setup_matplotlib():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 150, "font.size": 10,
        "axes.spines.top": False, "axes.spines.right": False,
        "axes.grid": True, "grid.alpha": 0.25, "grid.linestyle": "-",
        "axes.titlesize": 12, "axes.titleweight": "bold", "axes.titlelocation": "left",
        "axes.labelcolor": "#333333", "xtick.color": "#444444", "ytick.color": "#444444",
        "legend.frameon": False, "svg.fonttype": "none",
    })
    return plt


def save(fig, folder, name):
    fig.savefig(os.path.join(folder, name), bbox_inches="tight", facecolor="white",
                metadata={"Software": f"{TOOL} {VERSION}"})
    import matplotlib.pyplot as plt
    plt.close(fig)
    return name


def plot_loss(plt, hist, folder):
    import numpy as np
    from matplotlib.ticker import MaxNLocator
    series = [(k, hist[k]) for k in ("train_loss", "test_loss") if k in hist and len(hist[k])]
    if not series:
        return None
    lr = hist.get("lr")
    lr_changes = lr is not None and len(lr) > 1 and np.nanmax(lr) > np.nanmin(lr)
    if lr_changes:
        fig, (ax, ax_lr) = plt.subplots(2, 1, figsize=(8, 5.2), sharex=True,
                                        gridspec_kw={"height_ratios": [3.2, 1], "hspace": 0.12})
    else:
        fig, ax = plt.subplots(figsize=(8, 4.2))
        ax_lr = None
    epochs = np.arange(1, len(series[0][1]) + 1)
    finite = np.concatenate([v[np.isfinite(v)] for _, v in series])
    for key, values in series:
        label = "train" if key == "train_loss" else "test"
        ax.plot(epochs, values, marker="o" if label == "train" else "s", ms=5, lw=2,
                ls="-" if label == "train" else "--", color=COLORS[label], label=f"{label} loss")
    # Final values beside the last points; the higher curve's label goes above, the other's below.
    finals = {("train" if k == "train_loss" else "test"): v[-1] for k, v in series if np.isfinite(v[-1])}
    for label, value in finals.items():
        other = [v for lab, v in finals.items() if lab != label]
        above = not other or value >= other[0]
        ax.annotate(f"{value:.4f}", (epochs[-1], value), xytext=(9, 7 if above else -7),
                    textcoords="offset points", va="center", fontsize=9, color=COLORS[label],
                    fontweight="bold")
    if "test_loss" in hist and np.isfinite(hist["test_loss"]).any():
        best = int(np.nanargmin(hist["test_loss"]))
        ax.scatter([epochs[best]], [hist["test_loss"][best]], s=160, facecolors="none",
                   edgecolors=COLORS["test"], lw=1.5, zorder=5, label=f"best test (epoch {best + 1})")
    if len(finite) and finite.min() > 0 and finite.max() / finite.min() > 4:
        ax.set_yscale("log")
    ax.margins(y=0.1)
    ax.set_ylabel("MSE (pixels / 255)")
    ax.set_title("Reconstruction loss per epoch")
    ax.legend(loc="upper right")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(epochs) == 1:
        ax.set_xlim(0.5, 1.5)
    else:
        ax.set_xlim(0.7, len(epochs) + 0.25 + 0.08 * len(epochs))
    bottom = ax_lr if ax_lr is not None else ax
    if ax_lr is not None:
        ax_lr.step(epochs, lr, where="mid", color=COLORS["lr"], lw=1.8)
        ax_lr.set_ylabel("learning rate")
        ax_lr.set_yscale("log")
        ax_lr.grid(True, which="both", alpha=0.2)
    bottom.set_xlabel("epoch")
    return save(fig, folder, "loss.png")


def chw_to_rgb(x):
    import numpy as np
    return np.clip(np.transpose(x, (1, 2, 0)), 0.0, 1.0)


def plot_reconstructions(plt, samples, class_names, folder):
    import numpy as np
    images = samples["images"].astype(np.float64) / 255.0
    recon = samples["recon"].astype(np.float64)
    labels = samples["labels"]
    n = len(images)
    fig, axes = plt.subplots(3, n, figsize=(1.3 * n + 1.0, 4.6), squeeze=False,
                             gridspec_kw={"wspace": 0.06, "hspace": 0.1})
    rows = ["original", "reconstruction", "|difference| × 3"]
    for j in range(n):
        diff = np.abs(recon[j] - images[j])
        mse = float(np.mean(diff ** 2))
        for i, picture in enumerate((images[j], recon[j], diff * 3.0)):
            ax = axes[i, j]
            ax.imshow(chw_to_rgb(picture), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            for spine in ax.spines.values():
                spine.set_visible(False)
            if j == 0:
                ax.set_ylabel(rows[i], fontsize=10, rotation=0, ha="right", va="center", labelpad=8)
        label = int(labels[j]) if labels is not None else j
        name = class_names[label] if 0 <= label < len(class_names) else f"class {label}"
        axes[0, j].set_title(name, fontsize=10, loc="center", fontweight="normal")
        axes[2, j].set_xlabel(f"MSE {mse:.4f}", fontsize=8, color="#555555")
    fig.suptitle("Reconstructions: one test image per class", x=0.02, ha="left",
                 fontsize=12, fontweight="bold", y=1.0)
    return save(fig, folder, "reconstructions.png")


def plot_confusion(plt, ev, folder):
    import numpy as np
    cm = ev["confusion"]
    k = ev["k"]
    names = ev["class_names"]
    rows = cm.sum(axis=1, keepdims=True)
    frac = np.divide(cm, rows, out=np.zeros(cm.shape), where=rows > 0)
    size = max(5.5, 0.62 * k + 2.2)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    im = ax.imshow(frac, cmap="Blues", vmin=0, vmax=1)
    ax.grid(False)
    ax.set_xticks(range(k))
    ax.set_yticks(range(k))
    ax.set_xticklabels(names, rotation=40, ha="right")
    ax.set_yticklabels(names)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    for spine in ax.spines.values():
        spine.set_visible(False)
    if k <= 20:
        for i in range(k):
            for j in range(k):
                if cm[i, j] == 0:
                    continue
                ax.text(j, i, f"{cm[i, j]:,}", ha="center", va="center",
                        fontsize=9 if k <= 12 else 7, color="white" if frac[i, j] > 0.55 else "#1d2b3a",
                        fontweight="bold" if i == j else "normal")
    cbar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
    cbar.set_label("share of the true class")
    cbar.outline.set_visible(False)
    split = ev["attrs"].get("split", "")
    ax.set_title(f"Confusion matrix{' — ' + str(split) + ' split' if split else ''}: "
                 f"{pct(ev['accuracy'])} of {ev['n']:,} right")
    return save(fig, folder, "confusion.png")


def plot_per_class(plt, ev, folder):
    import numpy as np
    from matplotlib import colormaps  # matplotlib >= 3.5; cm.get_cmap is gone in 3.9+
    from matplotlib.colors import Normalize
    acc = ev["per_class"]
    names = ev["class_names"]
    k = ev["k"]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * k + 1.4))
    y = np.arange(k)[::-1]
    colors = colormaps["RdYlGn"](Normalize(0.1, 0.95)(acc))
    ax.barh(y, acc * 100, color=colors, edgecolor="none", height=0.68)
    for yi, a in zip(y, acc):
        ax.text(a * 100 + 1, yi, f"{100 * a:.1f} %", va="center", fontsize=9, color="#333333",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
    ax.axvline(ev["accuracy"] * 100, color="#1d3557", ls="--", lw=1.4,
               label=f"overall {pct(ev['accuracy'])}")
    ax.axvline(100.0 / k, color=COLORS["muted"], ls=":", lw=1.4, label=f"chance {100.0 / k:.0f} %")
    ax.set_yticks(y)
    ax.set_yticklabels(names)
    ax.set_xlim(0, 108)
    ax.set_xlabel("accuracy (%)")
    ax.grid(axis="y", visible=False)
    ax.set_title("Accuracy per class")
    ax.legend(loc="lower right", fontsize=9, bbox_to_anchor=(1.0, -0.02))
    return save(fig, folder, "per_class_accuracy.png")


def plot_timing(plt, stages, folder):
    timed = [s for s in stages if s["seconds"] is not None]
    if not timed:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 0.5 * len(timed) + 1.2))
    palette = ["#3b6fb6", "#2a9d8f", "#e9c46a", "#e07b39"]
    names = [s["stage"] for s in timed][::-1]
    secs = [s["seconds"] for s in timed][::-1]
    ax.barh(names, secs, color=[palette[i % 4] for i in range(len(timed))][::-1], height=0.6)
    top = max(secs) if max(secs) > 0 else 1
    for i, (s, st) in enumerate(zip(secs, timed[::-1])):
        device = str(st["device"] or "?").split(",")[0]  # "cpu, 2 threads, OpenBLAS …" → "cpu"
        ax.text(s + top * 0.01, i, f"{fmt_seconds(s)}  ({device})", va="center", fontsize=9)
    ax.set_xlim(0, top * 1.3)
    ax.set_xlabel("seconds")
    ax.grid(axis="y", visible=False)
    ax.set_title("Where the time went")
    return save(fig, folder, "timing.png")


# ---------------------------------------------------------------------------------------
# Assembling the report
# ---------------------------------------------------------------------------------------

def stage_rows(loaded):
    rows = []
    if "model" in loaded:
        a = loaded["model"]["attrs"]
        done, target = number(a, "epochs_done"), number(a, "epochs_target")
        details = []
        if done is not None:
            details.append(f"epochs {int(done)}" + (f" of {int(target)}" if target is not None else ""))
        if number(a, "train_count") is not None:
            details.append(f"{fmt_int(a['train_count'])} train images")
        batch = a.get("params", {}).get("batch-size") if isinstance(a.get("params"), dict) else None
        if batch:
            details.append(f"batch {batch}")
        if a.get("precision"):
            details.append(str(a["precision"]))
        secs = number(a, "total_seconds")
        if secs is None and "epoch_seconds" in loaded["model"]["history"]:
            secs = float(sum(loaded["model"]["history"]["epoch_seconds"]))
        rows.append({"stage": "train", "file": "model.h5", "tool": a.get("created_by"), "device": a.get("device"),
                     "seconds": secs, "rate": fmt_rate(number(a, "images_per_second"), "img/s"),
                     "details": ", ".join(details)})
    if "features" in loaded:
        a = loaded["features"]["attrs"]
        splits = loaded["features"]["splits"]
        details = ", ".join(f"{split} {fmt_int(shape[0])} × {fmt_int(shape[1])}" for split, shape in splits.items())
        rows.append({"stage": "encode", "file": "features.h5", "tool": a.get("created_by"), "device": a.get("device"),
                     "seconds": number(a, "seconds"), "rate": fmt_rate(number(a, "images_per_second"), "img/s"),
                     "details": details})
    if "svm" in loaded:
        s = loaded["svm"]
        a = s["attrs"]
        secs, n_train = number(a, "fit_seconds"), number(a, "n_train")
        details = [str(a.get("kernel", "?")).upper()]
        if number(a, "C") is not None:
            details.append(f"C = {a['C']:g}")
        if number(a, "gamma") is not None:
            details.append(f"γ = {a['gamma']:.3g}" + (f" ({a['gamma_spec']})" if a.get("gamma_spec") else ""))
        if s["n_sv"] is not None:
            details.append(f"{fmt_int(s['n_sv'])} support vectors")
        if number(a, "n_features_kept") is not None and number(a, "n_features") is not None:
            details.append(f"{fmt_int(a['n_features_kept'])} of {fmt_int(a['n_features'])} features kept")
        rows.append({"stage": "fit", "file": "svm.h5", "tool": a.get("created_by"), "device": a.get("device"),
                     "seconds": secs,
                     "rate": fmt_rate(n_train / secs if secs and n_train else None, "samples/s"),
                     "details": (f"{fmt_int(n_train)} samples, " if n_train else "") + ", ".join(details)})
    if "eval" in loaded:
        e = loaded["eval"]
        a = e["attrs"]
        secs = number(a, "seconds")
        rows.append({"stage": "eval", "file": "eval.h5", "tool": a.get("created_by"), "device": a.get("device"),
                     "seconds": secs, "rate": fmt_rate(e["n"] / secs if secs else None, "samples/s"),
                     "details": f"{a.get('split', '?')} split, {fmt_int(e['n'])} samples, accuracy {pct(e['accuracy'])}"})
    return rows


def lineage(loaded, paths):
    """For every input a file lists: does it match one of the report's files?
    Returns {kind: [(name, sha256, verdict)]}, verdict None when not checkable."""
    by_base = {os.path.basename(paths[k]): k for k in loaded}
    out = {}
    for kind, data in loaded.items():
        inputs = data["attrs"].get("inputs")
        rows = []
        if isinstance(inputs, list):
            for entry in inputs:
                if not isinstance(entry, dict):
                    continue
                name, digest = str(entry.get("name", "?")), str(entry.get("sha256", ""))
                other = by_base.get(os.path.basename(name))
                verdict = None
                if other is not None and other != kind:
                    base = os.path.basename(paths[other])
                    try:
                        same = sha256_file(paths[other]) == digest
                        verdict = ("ok", f"matches {base}") if same else \
                                  ("stale", f"{base} has changed since: this stage is out of date")
                    except OSError as e:
                        verdict = ("stale", f"cannot hash {base}: {e.strerror}")
                rows.append((name, digest, verdict))
        out[kind] = rows
    return out


def summary_cards(loaded):
    cards = []
    if "eval" in loaded:
        e = loaded["eval"]
        cards.append(("Test accuracy" if e["attrs"].get("split", "test") == "test" else "Accuracy",
                      pct(e["accuracy"]), f"{fmt_int(e['n'])} images, {e['k']} classes"))
    if "model" in loaded:
        h = loaded["model"]["history"]
        if "test_loss" in h and len(h["test_loss"]):
            cards.append(("Final test MSE", f"{h['test_loss'][-1]:.4f}",
                          f"train {h['train_loss'][-1]:.4f}" if "train_loss" in h else "reconstruction loss"))
        a = loaded["model"]["attrs"]
        done = number(a, "epochs_done")
        if done is not None:
            target = number(a, "epochs_target")
            cards.append(("Epochs", f"{int(done)}" + (f" / {int(target)}" if target else ""),
                          f"{fmt_int(a.get('param_count'))} parameters" if number(a, "param_count") else ""))
    if "svm" in loaded and loaded["svm"]["n_sv"] is not None:
        a = loaded["svm"]["attrs"]
        cards.append(("Support vectors", fmt_int(loaded["svm"]["n_sv"]),
                      f"of {fmt_int(a['n_train'])} training samples" if number(a, "n_train") else ""))
    return cards


CSS = """
:root { --ink:#1d2b3a; --muted:#5c6b7a; --line:#e3e7ec; --bg:#f4f6f9; --card:#ffffff; --accent:#3b6fb6; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
       color:var(--ink); background:var(--bg); }
header { background:linear-gradient(120deg,#1d3557,#3b6fb6); color:#fff; padding:28px 0 30px; }
header .wrap, main { max-width:1160px; margin:0 auto; padding:0 24px; }
header h1 { margin:0 0 6px; font-size:26px; font-weight:650; letter-spacing:-0.01em; }
header p { margin:0; opacity:.85; font-size:14px; }
header code { background:rgba(255,255,255,.14); color:#fff; }
main { margin-top:-14px; padding-bottom:40px; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(190px,1fr)); gap:14px; margin-bottom:18px; }
.card { background:var(--card); border-radius:12px; padding:14px 18px; box-shadow:0 1px 3px rgba(16,24,40,.08); }
.card .label { font-size:12px; text-transform:uppercase; letter-spacing:.06em; color:var(--muted); }
.card .value { font-size:30px; font-weight:700; line-height:1.2; margin:2px 0; }
.card .hint { font-size:13px; color:var(--muted); }
section { background:var(--card); border-radius:12px; padding:18px 22px 20px; margin-bottom:18px;
          box-shadow:0 1px 3px rgba(16,24,40,.08); }
section h2 { margin:0 0 4px; font-size:19px; }
section > p.lead { margin:0 0 12px; color:var(--muted); font-size:14px; }
figure { margin:8px 0 0; }
figure img { max-width:100%; height:auto; display:block; margin:0 auto; }
figcaption { font-size:13px; color:var(--muted); margin-top:6px; text-align:center; }
.two { display:grid; grid-template-columns:1.15fr 1fr; gap:18px; align-items:center; }
@media (max-width: 900px) { .two { grid-template-columns:1fr; } }
.notice { background:#fff7e6; border:1px solid #f3d19c; border-radius:10px; padding:10px 16px; margin-bottom:18px; }
.notice ul { margin:4px 0 0; padding-left:20px; }
table { border-collapse:collapse; width:100%; font-size:14px; }
th, td { text-align:left; padding:8px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; text-transform:uppercase; letter-spacing:.05em; color:var(--muted); font-weight:600; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
tr:last-child td { border-bottom:none; }
code { font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace; background:#eef1f5; border-radius:4px; padding:1px 5px; }
.chips code { display:inline-block; margin:0 4px 4px 0; }
.badge { display:inline-block; font-size:12px; border-radius:999px; padding:0 8px; margin-left:4px; }
.badge.ok { background:#e3f4ea; color:#1e7b46; }
.badge.stale { background:#fdecea; color:#b3261e; }
.small { font-size:12.5px; color:var(--muted); }
footer { color:var(--muted); font-size:12.5px; text-align:center; margin:8px 0 30px; }
"""


def e(text):
    return html.escape("" if text is None else str(text))


def params_items(params):
    if isinstance(params, dict):  # options left empty (e.g. an unused --export-libsvm) are noise
        return [f"{k}={v}" for k, v in params.items() if v not in ("", None)]
    return [] if params is None else [str(params)]


def build_html(ctx):
    out = []
    w = out.append
    w("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
    w(f"<title>{e(ctx['title'])}</title><style>{CSS}</style></head><body>")
    w(f"<header><div class=\"wrap\"><h1>{e(ctx['title'])}</h1>"
      f"<p>Run folder <code>{e(ctx['source'])}</code> · generated {e(ctx['generated'])}</p></div></header><main>")
    cards = ctx["cards"]
    if cards:
        w("<div class=\"cards\">")
        for label, value, hint in cards:
            w(f"<div class=\"card\"><div class=\"label\">{e(label)}</div><div class=\"value\">{e(value)}</div>"
              f"<div class=\"hint\">{e(hint)}</div></div>")
        w("</div>")
    if ctx["missing"] or ctx["notes"]:
        w("<div class=\"notice\"><strong>Not everything is here.</strong><ul>")
        for name, lost in ctx["missing"]:
            w(f"<li><code>{e(name)}</code> was not found: no {e(lost)}.</li>")
        for note in ctx["notes"]:
            w(f"<li>{e(note)}</li>")
        w("</ul></div>")
    img = ctx["images"]
    if "loss.png" in img or "reconstructions.png" in img:
        w("<section><h2>Autoencoder</h2>")
        w(f"<p class=\"lead\">{e(ctx['training_lead'])}</p>")
        if "loss.png" in img:
            w("<figure><img src=\"loss.png\" alt=\"Train and test loss per epoch\">"
              "<figcaption>Mean squared error between input and reconstruction (pixels scaled to 0–1), "
              "after each epoch. The circle marks the best test epoch.</figcaption></figure>")
        if "reconstructions.png" in img:
            w("<figure><img src=\"reconstructions.png\" alt=\"Reconstruction grid\">"
              "<figcaption>Top: the first test image of each class. Middle: the autoencoder's output. "
              "Bottom: the absolute difference, brightened three times.</figcaption></figure>")
        w("</section>")
    if "confusion.png" in img:
        w("<section><h2>Classification</h2>")
        w(f"<p class=\"lead\">{e(ctx['classification_lead'])}</p><div class=\"two\">")
        w("<figure><img src=\"confusion.png\" alt=\"Confusion matrix\"><figcaption>Rows: true class; "
          "columns: predicted class. Numbers are counts, colour is the share of the row.</figcaption></figure>")
        w("<figure><img src=\"per_class_accuracy.png\" alt=\"Accuracy per class\"><figcaption>The diagonal of the "
          "confusion matrix divided by each row's total.</figcaption></figure></div></section>")
    if ctx["stages"]:
        w("<section><h2>Stages</h2><p class=\"lead\">Read from each file's attributes.</p>")
        w("<table><tr><th>Stage</th><th>File</th><th>Device</th><th style=\"text-align:right\">Time</th>"
          "<th style=\"text-align:right\">Throughput</th><th>Details</th></tr>")
        for s in ctx["stages"]:
            w(f"<tr><td><strong>{e(s['stage'])}</strong></td><td><code>{e(s['file'])}</code></td>"
              f"<td>{e(s['device'] or '—')}</td><td class=\"num\">{e(fmt_seconds(s['seconds']))}</td>"
              f"<td class=\"num\">{e(s['rate'])}</td><td>{e(s['details'])}</td></tr>")
        total = sum(s["seconds"] for s in ctx["stages"] if s["seconds"] is not None)
        w(f"<tr><td><strong>total</strong></td><td></td><td></td><td class=\"num\"><strong>{e(fmt_seconds(total))}"
          "</strong></td><td></td><td></td></tr></table>")
        if "timing.png" in img:
            w("<figure><img src=\"timing.png\" alt=\"Seconds per stage\" style=\"max-width:720px\"></figure>")
        w("</section>")
    if ctx["provenance"]:
        w("<section><h2>Provenance</h2><p class=\"lead\">Which tool made each file, with which options, "
          "from which inputs. A green badge: the input's sha256 matches the file in this report.</p>")
        w("<table><tr><th>File</th><th>Made by</th><th>Parameters</th><th>Inputs (sha256)</th></tr>")
        for p in ctx["provenance"]:
            chips = "".join(f"<code>{e(item)}</code>" for item in params_items(p["params"])) or "—"
            inputs = []
            for name, digest, verdict in p["inputs"]:
                badge = f" <span class=\"badge {verdict[0]}\">{e(verdict[1])}</span>" if verdict else ""
                inputs.append(f"<div><code>{e(name)}</code> <code title=\"{e(digest)}\">{e(digest[:12])}…</code>"
                              f"{badge}</div>")
            w(f"<tr><td><code>{e(p['file'])}</code><div class=\"small\">{e(p['format'])}</div></td>"
              f"<td>{e(p['created_by'])}<div class=\"small\">{e(p['created_at'])}</div></td>"
              f"<td class=\"chips\">{chips}</td><td>{''.join(inputs) or '—'}</td></tr>")
        w("</table></section>")
    w(f"<footer>{e(ctx['footer'])}</footer></main></body></html>\n")
    return "".join(out)


def md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def build_markdown(ctx):
    out = [f"# {ctx['title']}", "", f"Run folder `{ctx['source']}` · generated {ctx['generated']}", ""]
    if ctx["cards"]:
        out += ["| | |", "|---|---|"]
        out += [f"| **{md_cell(label)}** | {md_cell(value)}{(' — ' + md_cell(hint)) if hint else ''} |"
                for label, value, hint in ctx["cards"]]
        out.append("")
    if ctx["missing"] or ctx["notes"]:
        out.append("> **Not everything is here.**")
        out += [f"> - `{name}` was not found: no {lost}." for name, lost in ctx["missing"]]
        out += [f"> - {note}" for note in ctx["notes"]]
        out.append("")
    img = ctx["images"]
    if "loss.png" in img or "reconstructions.png" in img:
        out += ["## Autoencoder", "", ctx["training_lead"], ""]
        if "loss.png" in img:
            out += ["![Train and test loss per epoch](loss.png)", ""]
        if "reconstructions.png" in img:
            out += ["![Original, reconstruction and |difference|×3 per class](reconstructions.png)", ""]
    if "confusion.png" in img:
        out += ["## Classification", "", ctx["classification_lead"], "",
                "![Confusion matrix](confusion.png)", "", "![Accuracy per class](per_class_accuracy.png)", ""]
    if ctx["stages"]:
        out += ["## Stages", "", "| Stage | File | Device | Time | Throughput | Details |",
                "|---|---|---|--:|--:|---|"]
        for s in ctx["stages"]:
            out.append(f"| {s['stage']} | `{s['file']}` | {md_cell(s['device'] or '—')} | {fmt_seconds(s['seconds'])} "
                       f"| {s['rate']} | {md_cell(s['details'])} |")
        out.append("")
        if "timing.png" in img:
            out += ["![Seconds per stage](timing.png)", ""]
    if ctx["provenance"]:
        out += ["## Provenance", "", "| File | Made by | Parameters | Inputs (sha256) |", "|---|---|---|---|"]
        for p in ctx["provenance"]:
            params = " ".join(f"`{md_cell(i)}`" for i in params_items(p["params"])) or "—"
            inputs = "<br>".join(f"`{md_cell(n)}` `{d[:12]}…`" + (f" ({v[1]})" if v else "")
                                 for n, d, v in p["inputs"]) or "—"
            out.append(f"| `{p['file']}` ({p['format']}) | {md_cell(p['created_by'])}, {md_cell(p['created_at'])} "
                       f"| {params} | {inputs} |")
        out.append("")
    out += ["---", ctx["footer"], ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# Output folder: built under a temporary name, swapped into place at the end
# ---------------------------------------------------------------------------------------

def prepare_output(path):
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.exists(path) and not os.path.isdir(path):
        raise ReportError(path, "exists and is not a folder")
    if os.path.isdir(path) and os.listdir(path) and not os.path.exists(os.path.join(path, "index.html")):
        raise ReportError(path, "exists and is not a report folder (no index.html); refusing to replace it")
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as err:
        raise ReportError(parent, f"cannot create the output's folder: {err.strerror}") from None
    try:
        return tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(path))}.tmp-", dir=parent)
    except OSError as err:
        raise ReportError(parent, f"cannot write here: {err.strerror}") from None


def commit_output(tmp, path):
    os.chmod(tmp, 0o755)
    old = None
    if os.path.isdir(path):
        old = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(path))}.old-",
                               dir=os.path.dirname(os.path.abspath(path)))
        os.rmdir(old)
        os.rename(path, old)
    try:
        os.rename(tmp, path)
    except OSError:
        if old:
            os.rename(old, path)
        raise
    if old:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"{TOOL}: usage error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    p = Parser(prog=TOOL, formatter_class=argparse.RawDescriptionHelpFormatter,
               description="report — writes an HTML/Markdown report with plots from a run's HDF5 files "
                           "(model.h5, features.h5, svm.h5, eval.h5; whichever exist).",
               epilog=EXAMPLE)
    p.add_argument("--version", action="version", version=version_line())
    p.add_argument("--run-dir", metavar="DIR", help="run folder holding model.h5, features.h5, svm.h5, eval.h5")
    p.add_argument("--model", metavar="FILE", help="ae-model file (overrides RUN_DIR/model.h5)")
    p.add_argument("--features", metavar="FILE", help="ae-features file (overrides RUN_DIR/features.h5)")
    p.add_argument("--svm", metavar="FILE", help="svm-model file (overrides RUN_DIR/svm.h5)")
    p.add_argument("--eval", metavar="FILE", help="svm-eval file (overrides RUN_DIR/eval.h5)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="report folder to write (replaced atomically); default RUN_DIR/report")
    p.add_argument("--title", default="CIFAR-10 autoencoder → SVM", help="heading of the report")
    p.add_argument("-q", "--quiet", action="store_true", help="only errors and warnings on stderr")
    p.add_argument("--json", action="store_true", help="print a one-line JSON summary on stdout")
    args = p.parse_args(argv)
    if not args.run_dir and not any((args.model, args.features, args.svm, args.eval)):
        p.error("give --run-dir DIR or at least one of --model/--features/--svm/--eval")
    if not args.output:
        if not args.run_dir:
            p.error("-o/--output is required without --run-dir")
        args.output = os.path.join(args.run_dir, "report")
    return args


def resolve_inputs(args):
    """→ (paths {kind: path} to read, missing [(file, what is lost)])."""
    if args.run_dir and not os.path.isdir(args.run_dir):
        raise ReportError(args.run_dir, "no such folder" if not os.path.exists(args.run_dir) else "is not a folder")
    paths, missing = {}, []
    for kind, filename, _fmt, _stage, lost in KINDS:
        explicit = getattr(args, kind)
        if explicit:
            paths[kind] = explicit  # named on the command line: must exist
        elif args.run_dir:
            candidate = os.path.join(args.run_dir, filename)
            if os.path.exists(candidate):
                paths[kind] = candidate
            else:
                missing.append((filename, lost))
    if not paths:
        raise ReportError(args.run_dir, "none of model.h5, features.h5, svm.h5, eval.h5 is here")
    return paths, missing


def run(args, tmp_holder):
    started = time.time()
    paths, missing = resolve_inputs(args)
    loaded = {}
    for kind, path in paths.items():
        loaded[kind] = read_in_child(kind, path)
    tmp = prepare_output(args.output)
    tmp_holder.append(tmp)
    plt = setup_matplotlib()

    class_names = DEFAULT_CLASS_NAMES
    for kind in ("eval", "features", "svm"):
        names = loaded.get(kind, {}).get("attrs", {}).get("class_names")
        if isinstance(names, list) and names:
            class_names = [str(n) for n in names]
            break

    images = []
    notes = [n for d in loaded.values() for n in d["notes"]]
    training_lead = ""
    if "model" in loaded:
        m = loaded["model"]
        if plot_loss(plt, m["history"], tmp):
            images.append("loss.png")
        if m["samples"] is not None:
            images.append(plot_reconstructions(plt, m["samples"], class_names, tmp))
        h, a = m["history"], m["attrs"]
        bits = []
        def trend(values):
            return f"{values[0]:.4f}" if len(values) == 1 else f"{values[0]:.4f} → {values[-1]:.4f}"
        if "train_loss" in h and len(h["train_loss"]):
            n = len(h["train_loss"])
            bits.append(f"{n} epoch{'s' if n != 1 else ''}, train loss {trend(h['train_loss'])}")
            if not all(math.isfinite(x) for x in h["train_loss"]):
                notes.append("the training loss has NaN or Inf values: training diverged")
        if "test_loss" in h and len(h["test_loss"]):
            bits.append(f"test loss {trend(h['test_loss'])}")
        if "epoch_seconds" in h and len(h["epoch_seconds"]):
            bits.append(f"{fmt_seconds(float(sum(h['epoch_seconds'])) / len(h['epoch_seconds']))} per epoch")
        if a.get("device"):
            bits.append(f"on {a['device']}")
        training_lead = "; ".join(bits) + "." if bits else ""
    classification_lead = ""
    if "eval" in loaded:
        ev = loaded["eval"]
        images.append(plot_confusion(plt, ev, tmp))
        images.append(plot_per_class(plt, ev, tmp))
        best, worst = int(ev["per_class"].argmax()), int(ev["per_class"].argmin())
        classification_lead = (f"{pct(ev['accuracy'])} of {ev['n']:,} {ev['attrs'].get('split', '')} images "
                               f"classified correctly (chance: {pct(1 / ev['k'], 0)}).")
        if ev["per_class"][best] > ev["per_class"][worst]:
            classification_lead += (f" Easiest class: {ev['class_names'][best]} ({pct(ev['per_class'][best])}); "
                                    f"hardest: {ev['class_names'][worst]} ({pct(ev['per_class'][worst])}).")
    stages = stage_rows(loaded)
    if plot_timing(plt, stages, tmp):
        images.append("timing.png")

    checks = lineage(loaded, paths)
    for kind, rows in checks.items():
        for name, _d, verdict in rows:
            if verdict and verdict[0] == "stale":
                notes.append(f"{os.path.basename(paths[kind])} was made from a different {os.path.basename(name)} "
                             "than the one in this report (re-run the pipeline)")
    provenance = []
    for kind, _f, fmt, _s, _l in KINDS:
        if kind in loaded:
            a = loaded[kind]["attrs"]
            provenance.append({"file": os.path.basename(paths[kind]),
                               "format": f"{fmt} v{a.get('format_version', '?')}",
                               "created_by": a.get("created_by", "?"), "created_at": a.get("created_at", "?"),
                               "params": a.get("params"), "inputs": checks.get(kind, [])})

    source = args.run_dir or ", ".join(paths.values())
    ctx = {"title": args.title, "source": source,
           "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "cards": summary_cards(loaded), "missing": missing, "notes": notes, "images": images,
           "training_lead": training_lead, "classification_lead": classification_lead,
           "stages": stages, "provenance": provenance,
           "footer": f"Made by {version_line()} from " + ", ".join(os.path.basename(p) for p in paths.values())}
    with open(os.path.join(tmp, "index.html"), "w", encoding="utf-8") as f:
        f.write(build_html(ctx))
    with open(os.path.join(tmp, "report.md"), "w", encoding="utf-8") as f:
        f.write(build_markdown(ctx))
    commit_output(tmp, args.output)
    tmp_holder.clear()

    for name, _lost in missing:
        warn(f"{os.path.join(args.run_dir, name)} not found; its sections are left out")
    log(args, f"wrote {os.path.join(args.output, 'index.html')} ({len(images)} plots, "
              f"{', '.join(sorted(loaded))}) in {time.time() - started:.1f} s")
    if args.json:
        summary = {"tool": TOOL, "output": args.output, "inputs": paths,
                   "missing": [name for name, _ in missing], "images": images,
                   "accuracy": loaded["eval"]["accuracy"] if "eval" in loaded else None,
                   "seconds": round(time.time() - started, 3)}
        print(json.dumps(summary), flush=True)


def main(argv):
    args = parse_args(argv)
    tmp_holder = []

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        run(args, tmp_holder)
        return 0
    except ReportError as err:
        print(f"{TOOL}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        signum = interrupt.args[0] if interrupt.args else signal.SIGINT
        print(f"{TOOL}: interrupted; no report written", file=sys.stderr)
        return 128 + int(signum)
    except Exception as err:  # a bug or an unexpected file problem: one line, no traceback
        print(f"{TOOL}: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    finally:
        for tmp in tmp_holder:
            shutil.rmtree(tmp, ignore_errors=True)


def find_python_with_plotting():
    """Re-executes the report under a Python that has h5py and matplotlib when this one has
    not: Debian's live in /usr/bin/python3 (the shebang), but some machines (the lent GPU
    images, virtual environments) keep them in the python3 first on PATH. REPORT_PYTHON
    names one explicitly. Returns a message when none is found; the run then fails with it."""
    import importlib.util
    needed = ("h5py", "matplotlib")
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    if not os.environ.get("REPORT_REEXECUTED"):
        # Not compared by realpath: a virtual environment's python3 is a symlink to the very
        # interpreter that lacks the packages, and differs only by where it was started.
        here = os.path.abspath(sys.executable)
        probe = "import " + ", ".join(needed)
        for cand in (os.environ.get("REPORT_PYTHON"), shutil.which("python3"), "/usr/bin/python3"):
            if not cand or os.path.abspath(cand) == here:
                continue
            try:
                ok = subprocess.run([cand, "-c", probe], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, timeout=60).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
            if ok:
                os.environ["REPORT_REEXECUTED"] = "1"
                os.execv(cand, [cand, os.path.abspath(__file__)] + sys.argv[1:])
    return (f"{sys.executable} has no {' or '.join(missing)}, nor has any other python3 found: install "
            f"python3-h5py and python3-matplotlib (make deps), or set REPORT_PYTHON to a Python that has them")


if __name__ == "__main__":
    no_python = find_python_with_plotting()
    if no_python and not any(a in ("-h", "--help", "--version") for a in sys.argv[1:]):
        print(f"{TOOL}: error: {no_python}", file=sys.stderr)
        sys.exit(1)
    sys.exit(main(sys.argv[1:]))
