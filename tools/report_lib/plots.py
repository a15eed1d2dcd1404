"""The report's plots (matplotlib, Agg): loss curves, reconstruction grid, confusion
matrix, per-class accuracy, the cross-validation grid, stage timings. Each returns the PNG's file name, or None when
it has nothing to draw."""
import os

from .common import TOOL, VERSION, fmt_seconds, pct
from .escape import plot_text


COLORS = {"train": "#3b6fb6", "val": "#7b4bb7", "test": "#e07b39", "accent": "#2a9d8f", "muted": "#8d99ae",
          "lr": "#6c757d"}


def setup_matplotlib():
    """Imports what the figures need and sets the report's style. Figures are made with
    matplotlib.figure.Figure on the Agg canvas (new_figure), never through pyplot: pyplot
    keeps a global registry of open figures (each would have to be closed by hand) and
    draws nothing better (docs/DECISIONS.md, "The report's start-up and Make's own time")."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401  (imported here, once)
    from matplotlib.figure import Figure  # noqa: F401
    matplotlib.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 150, "font.size": 10,
        "axes.spines.top": False, "axes.spines.right": False,
        "axes.grid": True, "grid.alpha": 0.25, "grid.linestyle": "-",
        "axes.titlesize": 12, "axes.titleweight": "bold", "axes.titlelocation": "left",
        "axes.labelcolor": "#333333", "xtick.color": "#444444", "ytick.color": "#444444",
        "legend.frameon": False, "svg.fonttype": "none",
    })


def new_figure(figsize):
    """A figure of its own, drawn by the Agg canvas (PNG); nothing to close afterwards."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def subplots(*grid, figsize, **options):
    """(figure, its Axes): new_figure with Figure.subplots(*grid, **options) in it."""
    fig = new_figure(figsize)
    return fig, fig.subplots(*grid, **options)


def write_png(fig, path, **options):
    """Every figure's PNG: on white, tagged with the tool, at zlib's fastest level — the
    default (6) took 0.02-0.07 s more of each figure's child, the report's critical path, for
    files only 15-25 % smaller (docs/DECISIONS.md, "The report's PNGs at zlib level 1")."""
    fig.savefig(path, facecolor="white", metadata={"Software": f"{TOOL} {VERSION}"},
                pil_kwargs={"compress_level": 1}, **options)


def save(fig, folder, name):
    write_png(fig, os.path.join(folder, name), bbox_inches="tight")
    return name


def plot_loss(hist, folder):
    import numpy as np
    from matplotlib.ticker import FixedLocator
    series = [(k, hist[k]) for k in ("train_loss", "val_loss", "test_loss") if k in hist and len(hist[k])]
    if not series:
        return None
    lr = hist.get("lr")
    lr_changes = lr is not None and len(lr) > 1 and np.nanmax(lr) > np.nanmin(lr)
    if lr_changes:
        fig, (ax, ax_lr) = subplots(2, 1, figsize=(8, 5.2), sharex=True,
                                        gridspec_kw={"height_ratios": [3.2, 1], "hspace": 0.12})
    else:
        fig, ax = subplots(figsize=(8, 4.2))
        ax_lr = None
    epochs = np.arange(1, len(series[0][1]) + 1)
    finite = np.concatenate([v[np.isfinite(v)] for _, v in series])
    style = {"train": ("o", "-"), "val": ("^", "-."), "test": ("s", "--")}
    for key, values in series:
        label = key[:-len("_loss")]
        ax.plot(epochs, values, marker=style[label][0], ms=5, lw=2, ls=style[label][1], color=COLORS[label],
                label=f"{'validation' if label == 'val' else label} loss")
    # The circle marks the epoch the loss that steers training liked best: validation when the
    # file has it (the test split is only reported then), else test, as older files had it.
    steer = "val" if "val_loss" in hist and np.isfinite(hist["val_loss"]).any() else "test"
    if f"{steer}_loss" in hist and np.isfinite(hist[f"{steer}_loss"]).any():
        best = int(np.nanargmin(hist[f"{steer}_loss"]))
        ax.scatter([epochs[best]], [hist[f"{steer}_loss"][best]], s=160, facecolors="none",
                   edgecolors=COLORS[steer], lw=1.5, zorder=5,
                   label=f"best {'validation' if steer == 'val' else 'test'} (epoch {best + 1})")
    if len(finite) and finite.min() > 0 and finite.max() / finite.min() > 4:
        ax.set_yscale("log")
        readable_log_axis(ax.yaxis, finite.min(), finite.max())
    ax.margins(y=0.1)
    ax.set_ylabel("MSE (pixels / 255)")
    ax.set_title("Reconstruction loss per epoch")
    ax.legend(loc="upper right")
    ax.xaxis.set_major_locator(FixedLocator(epoch_ticks(len(epochs))))
    if len(epochs) == 1:
        ax.set_xlim(0.5, 1.7)
    else:
        ax.set_xlim(0.7, len(epochs) + 0.25 + 0.08 * len(epochs))
    label_final_values(ax, epochs[-1], {k[:-len("_loss")]: v[-1] for k, v in series if np.isfinite(v[-1])})
    bottom = ax_lr if ax_lr is not None else ax
    if ax_lr is not None:
        ax_lr.step(epochs, lr, where="mid", color=COLORS["lr"], lw=1.8)
        ax_lr.set_ylabel("learning rate")
        ax_lr.set_yscale("log")
        readable_log_axis(ax_lr.yaxis, float(np.nanmin(lr)), float(np.nanmax(lr)), few=True)
        ax_lr.grid(True, which="both", alpha=0.2)
    bottom.set_xlabel("epoch")
    return save(fig, folder, "loss.png")


def epoch_ticks(n):
    """Epochs to label on an axis of epochs 1..n: every one up to 10, else 1 and the
    multiples of a 1-2-5 step that give at most 10 more; never past n."""
    step = 1
    for candidate in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000):
        step = candidate
        if n / candidate <= 10:
            break
    return [1] + [m for m in range(step, n + 1, step) if m > 1]


def label_final_values(ax, x_last, finals):
    """Each curve's last value written right of its last point, at the value's height when
    the labels have room, else pushed apart (the lowest up, never onto the x-axis): the
    labels are placed in axes fractions, kept inside [0.05, 0.95] and 0.075 apart."""
    import math
    from matplotlib.transforms import blended_transform_factory
    if not finals:
        return
    lo, hi = ax.get_ylim()
    log = ax.get_yscale() == "log"

    def fraction(v):
        if log:
            return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        return (v - lo) / (hi - lo) if hi > lo else 0.5
    gap, low, high = 0.075, 0.05, 0.95
    ordered = sorted(finals, key=lambda k: finals[k])  # lowest first
    ys = [min(max(fraction(finals[k]), low), high) for k in ordered]
    for i in range(1, len(ys)):  # upwards: each at least gap above the one below
        ys[i] = max(ys[i], ys[i - 1] + gap)
    if ys and ys[-1] > high:  # the top one went past the top: push the stack down, keeping gaps
        ys[-1] = high
        for i in range(len(ys) - 2, -1, -1):
            ys[i] = min(ys[i], ys[i + 1] - gap)
    where = blended_transform_factory(ax.transData, ax.transAxes)
    dx = 0.04 * (ax.get_xlim()[1] - ax.get_xlim()[0])
    for label, y in zip(ordered, ys):
        ax.annotate(f"{finals[label]:.4f}", (x_last, finals[label]), xytext=(x_last + dx, y), textcoords=where,
                    va="center", ha="left", fontsize=9, color=COLORS[label], fontweight="bold")


# Which log-axis ticks keep their label first when labels would crowd: 1 × 10^k, then 5, 2,
# then the other digits.
LOG_LABEL_PRIORITY = {1: 0, 5: 1, 2: 2, 3: 3, 4: 4, 6: 5, 7: 6, 8: 7, 9: 8}


def spaced_log_formatter():
    """A log axis's tick labels in plain numbers, thinned so that no two are closer than
    1.6 font heights on the drawn axis (0.06, 0.07, 0.08 and 0.09 crowd at the top of their
    decade); the ticks themselves stay."""
    import math
    from matplotlib import rcParams
    from matplotlib.ticker import Formatter

    def priority(v):
        digit = int(round(v / 10 ** math.floor(math.log10(v) + 1e-9)))
        return LOG_LABEL_PRIORITY.get(digit, 9)

    class SpacedLogFormatter(Formatter):
        def __call__(self, x, pos=None):
            return f"{x:.6g}"

        def format_ticks(self, values):
            lo, hi = sorted(self.axis.get_view_interval())
            if lo <= 0 or hi <= lo:
                return [self(v) for v in values]
            axes = self.axis.axes
            px_per_decade = axes.bbox.height / math.log10(hi / lo)
            need = 1.6 * float(rcParams["font.size"]) * axes.figure.dpi / 72.0
            labels, kept = [""] * len(values), []
            inside = [(i, v) for i, v in enumerate(values) if v > 0 and lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
            for i, v in sorted(inside, key=lambda iv: (priority(iv[1]), iv[1])):
                at = math.log10(v) * px_per_decade
                if all(abs(at - other) >= need for other in kept):
                    kept.append(at)
                    labels[i] = self(v)
            return labels
    return SpacedLogFormatter()


def readable_log_axis(axis, lo, hi, few=False):
    """Labels a log axis with plain numbers a reader can read off (0.002, 0.005, 0.01):
    matplotlib's default labels only powers of ten, which is one label or none on a loss
    that spans less than two decades. Ticks at 1, 2, 5 × 10^k over wide ranges, at every
    digit within a decade or so; minor ticks unlabelled."""
    import math
    from matplotlib.ticker import LogLocator, NullFormatter
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    if decades > 2.5:
        subs = (1.0,)
    elif decades > 1.2 or few:
        subs = (1.0, 2.0, 5.0)
    else:
        subs = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
    axis.set_major_locator(LogLocator(base=10.0, subs=subs, numticks=30))
    axis.set_major_formatter(spaced_log_formatter())
    axis.set_minor_locator(LogLocator(base=10.0, subs=tuple(range(1, 10)), numticks=30))
    axis.set_minor_formatter(NullFormatter())


def chw_to_picture(x):
    """[C,H,W] in 0..1 → what imshow draws: [H,W,3] colour, or [H,W] grayscale for C = 1."""
    import numpy as np
    x = np.clip(x, 0.0, 1.0)
    return x[0] if x.shape[0] == 1 else np.transpose(x, (1, 2, 0))


def mosaic(tiles, rows, cols, gap, background=1.0):
    """[rows·cols, H, W, 3] pictures in 0..1 → one [rows·(H+gap)−gap, cols·(W+gap)−gap, 3]
    picture, row-major, gaps in the background colour. One image in one Axes draws in a
    fraction of the time of a grid of Axes (issue 17)."""
    import numpy as np
    _, h, w, _ = tiles.shape
    out = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap, 3), background, dtype=np.float64)
    for i, tile in enumerate(tiles):
        r, c = divmod(i, cols)
        out[r * (h + gap):r * (h + gap) + h, c * (w + gap):c * (w + gap) + w] = tile
    return out


def as_rgb(x):
    """[C,H,W] in 0..1 (C = 1 or 3) → [H,W,3]."""
    import numpy as np
    picture = chw_to_picture(x)
    return np.repeat(picture[:, :, None], 3, axis=2) if picture.ndim == 2 else picture


def plot_reconstructions(samples, class_names, folder):
    import numpy as np
    images = samples["images"].astype(np.float64) / 255.0
    recon = samples["recon"].astype(np.float64)
    labels = samples["labels"]
    n = len(images)
    diff = np.abs(recon - images)
    tiles = np.stack([as_rgb(p) for p in np.concatenate([images, recon, diff * 3.0])])
    h, w = tiles.shape[1:3]
    gap = max(1, h // 12)
    fig, ax = subplots(figsize=(1.3 * n + 1.0, 4.6))
    ax.imshow((mosaic(tiles, 3, n, gap) * 255).round().astype(np.uint8), interpolation="nearest")  # uint8: fast
    ax.axis("off")
    step_x, step_y = w + gap, h + gap
    for i, row in enumerate(["original", "reconstruction", "|difference| × 3"]):
        ax.text(-gap - 2, i * step_y + h / 2, row, ha="right", va="center", fontsize=10)
    for j in range(n):
        label = int(labels[j]) if labels is not None else j
        name = plot_text(class_names[label]) if 0 <= label < len(class_names) else f"class {label}"
        ax.text(j * step_x + w / 2, -gap, name, ha="center", va="bottom", fontsize=10)
        ax.text(j * step_x + w / 2, 3 * step_y - gap + 1, f"MSE {float(np.mean(diff[j] ** 2)):.4f}",
                ha="center", va="top", fontsize=8, color="#555555")
    ax.set_title("Reconstructions: one test image per class", pad=22)
    return save(fig, folder, "reconstructions.png")


def plot_confusion(ev, folder):
    import numpy as np
    cm = ev["confusion"]
    k = ev["k"]
    names = [plot_text(n) for n in ev["class_names"]]
    rows = cm.sum(axis=1, keepdims=True)
    frac = np.divide(cm, rows, out=np.zeros(cm.shape), where=rows > 0)
    size = max(5.5, 0.62 * k + 2.2)
    fig, ax = subplots(figsize=(size + 1.2, size))
    # The cells as a mesh of k x k quads, not an image: an image is resampled to the PNG's
    # pixels, and twice (once more for the tight box), the report's slowest figure
    # (docs/BENCHMARKS.md, "The SVM solver's row held in registers, the confusion matrix as a
    # mesh"). The same picture.
    edges = np.arange(k + 1) - 0.5
    im = ax.pcolormesh(edges, edges, frac, cmap="Blues", vmin=0, vmax=1)
    ax.set_xlim(-0.5, k - 0.5)
    ax.set_ylim(k - 0.5, -0.5)  # row 0 on top, as a matrix is read
    ax.set_aspect("equal")
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
    split = plot_text(ev["attrs"].get("split", ""))
    ax.set_title(f"Confusion matrix{' — ' + split + ' split' if split else ''}: "
                 f"{pct(ev['accuracy'])} of {ev['n']:,} right")
    return save(fig, folder, "confusion.png")


def plot_per_class(ev, folder):
    import numpy as np
    from matplotlib import colormaps  # matplotlib >= 3.5; cm.get_cmap is gone in 3.9+
    from matplotlib.colors import Normalize
    acc = ev["per_class"]
    names = [plot_text(n) for n in ev["class_names"]]
    k = ev["k"]
    fig, ax = subplots(figsize=(7.5, 0.42 * k + 1.4))
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
    # Above the bars, right of the title: inside the axes it would cover a bar's value.
    ax.legend(loc="lower right", fontsize=9, bbox_to_anchor=(1.0, 1.0), ncol=2, borderaxespad=0.2)
    return save(fig, folder, "per_class_accuracy.png")


def plot_timing(stages, folder):
    timed = [s for s in stages if s["seconds"] is not None]
    if not timed:
        return None
    fig, ax = subplots(figsize=(7.5, 0.5 * len(timed) + 1.2))
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


def plot_cv_grid(grid, folder):
    """svm-fit --cv's (C, gamma) table as a heat map, the chosen pair boxed: the table that
    chose it (the accuracy, or the --cv-scoring score). A single pair has nothing to compare:
    no picture (its accuracy is in the stage table)."""
    import numpy as np
    from matplotlib.patches import Rectangle
    by_score = grid.get("score_table") is not None
    table = grid["score_table"] if by_score else grid["table"]
    nc, ng = table.shape
    if nc * ng < 2:
        return None
    # Scores are stored 'higher is better'; log_loss's is the negated log-loss, drawn as the
    # log-loss itself (no %) with the colour scale reversed, so brighter is still better.
    log_loss = by_score and grid.get("scoring") == "log_loss"
    shown, scale = (-table, 1) if log_loss else (table, 100)
    fig, ax = subplots(figsize=(max(5.5, 1.25 * ng + 2.6), max(3.2, 0.62 * nc + 1.9)))
    lo, hi = float(shown.min()), float(shown.max())
    im = ax.imshow(shown * scale, cmap="viridis_r" if log_loss else "viridis", vmin=lo * scale,
                   vmax=max(hi, lo + 1e-9) * scale, aspect="auto")
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    gm = grid.get("gamma_mean")
    ax.set_xticks(range(ng))
    ax.set_xticklabels([g if gm is None else f"{g}\n({gm[j]:.3g})" for j, g in enumerate(grid["gamma"])])
    ax.set_yticks(range(nc))
    ax.set_yticklabels([f"{c:g}" for c in grid["C"]])
    ax.set_xlabel("γ" + (" (mean over the folds)" if gm is not None else ""))
    ax.set_ylabel("C")
    mid = (lo + hi) / 2
    bi, bj = grid["best"]
    for i in range(nc):
        for j in range(ng):
            bright = shown[i, j] < mid if log_loss else shown[i, j] > mid
            ax.text(j, i, f"{shown[i, j]:.3f}" if log_loss else f"{100 * shown[i, j]:.1f} %", ha="center",
                    va="center", fontsize=9, color="#1d2b3a" if bright else "white",
                    fontweight="bold" if (i, j) == (bi, bj) else "normal")
    ax.add_patch(Rectangle((bj - 0.5, bi - 0.5), 1, 1, fill=False, ec="#e63946", lw=2.5))
    cbar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
    cbar.set_label("log-loss, mean over the folds (lower is better)" if log_loss
                   else f"{grid['scoring']}, mean over the folds (%)" if by_score
                   else "cross-validated accuracy (%)")
    cbar.outline.set_visible(False)
    folds = grid.get("folds")
    ax.set_title(f"{int(folds)}-fold cross-validation: C × γ" if folds else "Cross-validation: C × γ")
    return save(fig, folder, "cv_grid.png")


def plot_reliability(ev, folder):
    """svm-eval's probabilities (svm-fit --probability) as a reliability diagram: per bin of
    the top-class probability, the mean confidence against the share right, with the counts
    below. A calibrated model lies on the diagonal."""
    import numpy as np
    cal = ev.get("calibration")
    if cal is None or int(cal["count"].sum()) == 0:
        return None
    bins = len(cal["count"])
    edges = np.linspace(0, 1, bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    filled = cal["count"] > 0
    fig, (ax, ax_n) = subplots(2, 1, figsize=(6.4, 6.2), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1.1], "hspace": 0.08})
    ax.plot([0, 1], [0, 1], ls="--", lw=1.2, color=COLORS["muted"], label="calibrated")
    ax.bar(centres[filled], cal["accuracy"][filled], width=1 / bins * 0.9, color=COLORS["train"], alpha=0.35,
           edgecolor=COLORS["train"], label="share right per bin")
    ax.plot(cal["confidence"][filled], cal["accuracy"][filled], marker="o", ms=5, lw=2, color=COLORS["test"],
            label="mean confidence → share right")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("share of the bin predicted right")
    ax.legend(loc="upper left", fontsize=9)
    tta = cal.get("tta")  # the eval's view set: "none", "flip", "shift:K", "flip,shift:K"
    ax.set_title(f"Reliability: log-loss {cal['log_loss']:.3f}, ECE {100 * cal['ece']:.1f} %"
                 + (f" (TTA {tta})" if tta and tta != "none" else ""))
    ax_n.bar(centres, cal["count"], width=1 / bins * 0.9, color=COLORS["accent"])
    for x, c in zip(centres, cal["count"]):
        if c:
            ax_n.text(x, c, f"{int(c):,}", ha="center", va="bottom", fontsize=8)
    ax_n.set_ylim(0, max(cal["count"].max() * 1.25, 1))
    ax_n.set_xlabel("top-class probability (bins of 0.1)")
    ax_n.set_ylabel("images")
    ax_n.grid(axis="x", visible=False)
    return save(fig, folder, "reliability.png")


def class_colors(k):
    """k distinguishable colours: tab10 up to 10 classes, tab20 up to 20, then a hue wheel."""
    import numpy as np
    from matplotlib import colormaps
    if k <= 10:
        return colormaps["tab10"](np.arange(k))
    if k <= 20:
        return colormaps["tab20"](np.arange(k))
    return colormaps["hsv"](np.linspace(0, 1, k, endpoint=False))


def plot_features_pca(pca, class_names, folder):
    """The features' 2-D view: the sampled rows projected on their first two principal
    components (load.features_pca), coloured by true class."""
    import numpy as np
    if pca is None or len(pca["xy"]) < 3:
        return None
    xy, labels = pca["xy"], pca["labels"]
    fig, ax = subplots(figsize=(8.6, 6.2))
    size = 7 if len(xy) > 500 else 16  # thousands of points must not hide each other; a few must show
    if labels is None:
        ax.scatter(xy[:, 0], xy[:, 1], s=size, color=COLORS["train"], alpha=0.6, linewidths=0)
    else:
        present = np.unique(labels)
        k = max(len(class_names), int(present.max()) + 1)
        colors = class_colors(k)
        # Each class drawn in turn would leave the last one on top; a shuffled order (seeded)
        # shows every class where they overlap.
        order = np.random.default_rng(0).permutation(len(xy))
        ax.scatter(xy[order, 0], xy[order, 1], s=size, c=colors[labels[order]], alpha=0.65, linewidths=0)
        if len(present) <= 20:
            from matplotlib.lines import Line2D
            handles = [Line2D([], [], marker="o", ls="", ms=6, color=colors[c],
                              label=plot_text(class_names[c]) if c < len(class_names) else f"class {c}")
                       for c in present]
            ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9,
                      title="true class", title_fontsize=9, handletextpad=0.3)
    share = pca["explained"]
    ax.set_xlabel(f"principal component 1 ({100 * share[0]:.1f} % of the variance)")
    ax.set_ylabel(f"principal component 2 ({100 * share[1]:.1f} % of the variance)")
    split = plot_text(pca["split"])
    ax.set_title(f"Features in 2-D: all {pca['rows']:,} {split} images" if len(xy) >= pca["rows"] else
                 f"Features in 2-D: {len(xy):,} of {pca['rows']:,} {split} images")
    return save(fig, folder, "features_pca.png")
