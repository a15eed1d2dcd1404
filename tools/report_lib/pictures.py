"""The report's pictures of results: a grid of test images with their predicted and true
classes — the most confident mistakes first, then a few correct ones per class.

Confidence, best source first:
  /probabilities [n, k] in eval.h5      the predicted class's probability; a mistake's weight is
                                        p(predicted) − p(true)
  /decision_values [n, pairs]           (svm-eval --decision-values) the mean signed one-vs-one
                                        decision value of the predicted class against the others
  neither                               none: images are taken in test order
Images come from the dataset file's split that eval.h5 names (attribute `split`, default
test), rows 0 … n−1 (svm-eval reads the first n rows of the features, which follow the
dataset's order).
"""
import os

import numpy as np

from .escape import plot_text
from .plots import new_figure, write_png

MISTAKES = 16      # at most this many mistakes
COLUMNS = 8
MAX_CORRECT = 24   # correct examples in all


def _confidence(e, pred, labels, k):
    """(confidence of each prediction, how it was measured) or (None, None)."""
    n = len(pred)
    if "probabilities" in e and e["probabilities"].shape == (n, k):
        p = e["probabilities"][:]
        rows = np.arange(n)
        return p[rows, pred] - np.where(pred != labels, p[rows, labels], 0.0), "probability"
    pairs = k * (k - 1) // 2
    if "decision_values" in e and e["decision_values"].shape == (n, pairs) and k >= 2:
        dec = e["decision_values"][:]
        # Pair p = (a, b), a < b, in libsvm's order; a positive value is a vote for a.
        a_idx, b_idx = np.triu_indices(k, 1)
        score = np.zeros((n, k))
        np.add.at(score.T, a_idx, dec.T)
        np.add.at(score.T, b_idx, -dec.T)
        return score[np.arange(n), pred] / (k - 1), "decision-value margin"
    return None, None


def _choose(pred, labels, conf, k):
    """Row indices: mistakes (most confident first), then correct ones per class."""
    order = np.argsort(-conf, kind="stable") if conf is not None else np.arange(len(pred))
    mistakes = [int(i) for i in order if pred[i] != labels[i]][:MISTAKES]
    per_class = max(1, min(3, MAX_CORRECT // max(1, k)))
    correct = []
    for c in range(k):
        rows = [int(i) for i in order if pred[i] == labels[i] and labels[i] == c][:per_class]
        correct.extend(rows)
        if len(correct) >= MAX_CORRECT:
            break
    return mistakes, correct[:MAX_CORRECT]


def draw_grid(sections, picked, pred, labels, name, out_png):
    """The pictures as one mosaic image in one Axes, each framed in its section's colour and
    titled predicted (/ true) class: a grid of ~40 Axes took ~1.5 s to draw (issue 17)."""
    from matplotlib.colors import to_rgb
    tile = next(iter(picked.values())).shape[1:]  # H, W
    h, w = tile
    frame = max(1, h // 24)
    cell_w, cell_h = w + 2 * frame + w // 5, h + 2 * frame + int(h * 0.5)  # room for a two-line title
    head_h = int(h * 0.5)
    rows_of = [(len(items) + COLUMNS - 1) // COLUMNS for _t, items, _c in sections]
    height = sum(head_h + r * cell_h for r in rows_of)
    width = COLUMNS * cell_w
    canvas = np.ones((height, width, 3))
    texts = []  # (x, y, text, colour, size, weight, align)
    y = 0
    for (title, items, color), rows in zip(sections, rows_of):
        texts.append((0, y + head_h * 0.7, title, color, 11, "bold", "left"))
        y += head_h
        rgb = np.array(to_rgb(color))
        for j, i in enumerate(items):
            x0 = (j % COLUMNS) * cell_w
            y0 = y + (j // COLUMNS) * cell_h + (cell_h - h - 2 * frame)
            canvas[y0:y0 + h + 2 * frame, x0:x0 + w + 2 * frame] = rgb
            img = picked[i].astype(np.float64) / 255.0
            img = np.repeat(img, 3, axis=0) if img.shape[0] == 1 else img
            canvas[y0 + frame:y0 + frame + h, x0 + frame:x0 + frame + w] = np.transpose(img, (1, 2, 0))
            label = name(int(pred[i])) if pred[i] == labels[i] else f"{name(int(pred[i]))}\n/ {name(int(labels[i]))}"
            texts.append((x0 + frame + w / 2, y0 - 1, label, color, 7.5, "normal", "center"))
        y += rows * cell_h
    inches_per_px = 1.45 * COLUMNS / width
    fig = new_figure((width * inches_per_px, height * inches_per_px))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.imshow((canvas * 255).round().astype(np.uint8), interpolation="nearest")  # uint8: no float resampling
    ax.axis("off")
    for x, y_text, text, color, size, weight, align in texts:
        ax.text(x, y_text, text, color=color, fontsize=size, fontweight=weight, ha=align, va="bottom",
                linespacing=1.1)
    os.makedirs(os.path.dirname(os.path.abspath(out_png)), exist_ok=True)
    write_png(fig, out_png)  # every text is inside the picture: no tight box, one draw


def draw_examples(dataset_path, eval_path, out_png):
    """Draws the grid into out_png; returns its caption (one sentence), or None when the
    evaluation has no predictions to show."""
    from .load import backed, check_blocks, open_hdf5, plain

    with open_hdf5(eval_path) as e:
        pred = e["predictions"][:].astype(np.int64)
        labels = e["labels"][:].astype(np.int64)
        names = [str(n) for n in plain(e.attrs.get("class_names", []))]
        split = str(plain(e.attrs.get("split", "test")))
        k = max(len(names), int(max(pred.max(initial=0), labels.max(initial=0))) + 1)
        conf, measure = _confidence(e, pred, labels, k)
    n = len(pred)
    if n == 0:
        return None
    mistakes, correct = _choose(pred, labels, conf, k)
    chosen = mistakes + correct
    with open_hdf5(dataset_path) as d:
        images = backed(dataset_path, f"{split}/images", d[f"{split}/images"])
        if images.shape[0] < n:
            raise ValueError(f"{dataset_path}: /{split}/images has {images.shape[0]} rows, {eval_path} has {n}")
        if not chosen:
            return None
        idx = np.array(sorted(set(chosen)))
        picked = dict(zip(idx.tolist(), images[idx]))  # h5py reads ascending indices
        check_blocks(images, dataset_path, f"{split}/images", idx)  # no picture of changed bytes

    def name(c):  # drawn by matplotlib: its $…$ and control characters escaped
        return plot_text(names[c]) if 0 <= c < len(names) else f"class {c}"

    sections = [(f"most confident mistakes (predicted / true)" if conf is not None else "mistakes (predicted / true)",
                 mistakes, "#c0392b"), ("correct, a few per class", correct, "#2a7d4f")]
    sections = [s for s in sections if s[1]]
    draw_grid(sections, picked, pred, labels, name, out_png)
    wrong = int((pred != labels).sum())
    how = f"ranked by {measure}" if conf is not None else "in test order (no probabilities or decision values in the evaluation)"
    return (f"{len(mistakes)} of the {wrong} misclassified {split} images, {how}, and {len(correct)} correctly "
            f"classified ones; titles are predicted / true class.")
