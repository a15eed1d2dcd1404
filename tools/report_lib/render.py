"""The report's documents: the stage and provenance tables, the summary cards, and the
index.html and report.md built from them."""
import os

from .common import (describe_architecture, fmt_int, fmt_rate, fmt_seconds, latent_shape, pct, score_words,
                     sha256_file)
from .escape import html_text, md_code, md_text
from .load import number


def stage_rows(loaded, features_origin=None):
    """The stage table's rows; features_origin (load.features_origin) "plain": the features
    file is an input, not ae-encode's output."""
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
        details.append(describe_architecture(loaded["model"]["architecture"]))
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
        if features_origin == "plain":
            details = "plain HDF5 features (no autoencoder): " + details
        rows.append({"stage": "features" if features_origin == "plain" else "encode", "file": "features.h5",
                     "tool": a.get("created_by"), "device": a.get("device"),
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
        if s.get("landmarks") is not None:
            details.append(f"Nyström features of {fmt_int(s['landmarks'])} landmarks (least squares)")
        if number(a, "n_features_kept") is not None and number(a, "n_features") is not None:
            details.append(f"{fmt_int(a['n_features_kept'])} of {fmt_int(a['n_features'])} features kept")
        if number(a, "cv_accuracy") is not None:
            folds = number(a, "cv_folds")
            details.append(f"{int(folds) if folds else 'K'}-fold CV accuracy {pct(a['cv_accuracy'])}")
            if a.get("cv_scoring", "accuracy") != "accuracy" and number(a, "cv_score") is not None:
                details.append(f"chosen by {score_words(a['cv_scoring'], a['cv_score'])}")
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


def lineage(loaded, paths, digests=None):
    """For every input a file lists: does it match one of the report's files?
    digests: {kind: sha256 hex, or the OSError hashing it met}, computed beforehand (cli
    hashes in the background); a file not in it is hashed here.
    Returns {kind: [(name, sha256, verdict)]}, verdict None when not checkable."""
    digests = digests or {}

    def digest_of(kind):
        known = digests.get(kind)
        if isinstance(known, OSError):
            raise known
        return known if known is not None else sha256_file(paths[kind])

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
                        same = digest_of(other) == digest
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
        m = e.get("metrics")
        if m and m.get("macro_f1") is not None:
            top = ", ".join(f"top-{k} {pct(a)}" for k, a in m["top_k"])
            cards.append(("Macro-F1", f"{m['macro_f1']:.3f}",
                          f"balanced accuracy {pct(m['balanced_accuracy'])}" + (f"; {top}" if top else "")))
        cal = e.get("calibration")
        if cal is not None:
            cards.append(("Log-loss", f"{cal['log_loss']:.3f}",
                          f"calibration error {100 * cal['ece']:.1f} % (ECE, 10 bins)"))
    if "model" in loaded:
        h = loaded["model"]["history"]
        if "test_loss" in h and len(h["test_loss"]):
            cards.append(("Final test MSE", f"{h['test_loss'][-1]:.4f}",
                          f"train {h['train_loss'][-1]:.4f}" if "train_loss" in h else "reconstruction loss"))
        arch = loaded["model"]["architecture"]
        lat = latent_shape(arch["input_shape"], arch["encoder_channels"])
        cards.append(("Architecture", ",".join(str(c) for c in arch["encoder_channels"]),
                      "×".join(str(v) for v in arch["input_shape"]) + f" in, {lat[0] * lat[1] * lat[2]:,} features"
                      + (" (seed)" if arch.get("assumed") else "")))
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
    if "svm" in loaded and loaded["svm"].get("landmarks") is not None:
        a = loaded["svm"]["attrs"]
        cards.append(("Nyström landmarks", fmt_int(loaded["svm"]["landmarks"]),
                      f"of {fmt_int(a['n_train'])} training samples" if number(a, "n_train") else ""))
    return cards


# Under the loss plot: why epoch 1's training loss sits above the test loss (issue 19).
RUNNING_LOSS_NOTE = ("Why the training loss starts above the test loss: an epoch's training loss is the mean over "
                     "its batches while the weights are still improving, so early, worse batches count in it; "
                     "the validation and test losses are measured once, with the weights at the end of the epoch. "
                     "The gap is largest in epoch 1, when the weights change most.")
PCA_CAPTION = ("Each point is one image's feature vector, projected on the two directions along which the sampled "
               "features vary most (principal component analysis of the centred features). The colour is the "
               "image's true class: classes that form separate clouds here are easy for the SVM; most of the "
               "separation it uses lies in the other dimensions.")


def pca_sample_words(pca):
    """"all 500 test rows", or "a random sample of 2,000 of the 10,000 test rows"."""
    if len(pca["xy"]) >= pca["rows"]:
        return f"all {pca['rows']:,} {pca['split']} rows"
    return f"a random sample of {len(pca['xy']):,} of the {pca['rows']:,} {pca['split']} rows (seeded, the same every time)"


def pca_lead(pca):
    words = pca_sample_words(pca)
    return (f"{words[:1].upper() + words[1:]}; the two components explain {100 * pca['explained'][0]:.1f} % and "
            f"{100 * pca['explained'][1]:.1f} % of the features' variance.")


CSS = """
:root { --ink:#1d2b3a; --muted:#5c6b7a; --line:#e3e7ec; --bg:#f4f6f9; --card:#ffffff; --accent:#3b6fb6; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
       color:var(--ink); background:var(--bg); }
header { background:linear-gradient(120deg,#1d3557,#3b6fb6); color:#fff; padding:28px 0 30px; }
header .wrap, main { max-width:1160px; margin:0 auto; padding:0 24px; }
@media (max-width: 700px) { header .wrap, main { padding:0 10px; } section { padding:14px 12px; } }
header h1 { margin:0 0 6px; font-size:26px; font-weight:650; letter-spacing:-0.01em; }
header p { margin:0; opacity:.85; font-size:14px; overflow-wrap:anywhere; }
header p.dataset { opacity:1; font-size:15px; margin-bottom:4px; }
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
th, td { text-align:left; padding:8px 10px; border-bottom:1px solid var(--line); vertical-align:top;
         overflow-wrap:anywhere; }
.scroll { overflow-x:auto; }
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


def metrics_rows(m, names):
    """The per-class table of svm-eval's metrics (scikit-learn's classification_report), the
    classes in neither the labels nor the predictions left out as there, then the macro
    average; [] without metrics."""
    if not m or not names:
        return []
    rows = []
    for c, name in enumerate(names):
        p, r, f1 = m["precision"][c], m["recall"][c], m["f1"][c]
        if p == p:  # NaN: a class with no row in the report
            rows.append((str(name), f"{p:.3f}", f"{r:.3f}", f"{f1:.3f}", fmt_int(m["support"][c])))
    if m.get("macro_f1") is not None:
        rows.append(("macro average", f"{m['macro_precision']:.3f}", f"{m['macro_recall']:.3f}",
                     f"{m['macro_f1']:.3f}", fmt_int(sum(m["support"]))))
    return rows


e = html_text  # every string placed in index.html goes through it (escape.py)


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
      + (f"<p class=\"dataset\">{e(ctx['dataset'])}</p>" if ctx.get("dataset") else "")
      + f"<p>Run folder <code>{e(ctx['source'])}</code> · generated {e(ctx['generated'])}</p></div></header><main>")
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
              f"after each epoch. The circle marks the best {e(ctx.get('best_marker', 'test'))} epoch."
              + (" " + e(RUNNING_LOSS_NOTE) if ctx.get("running_train_loss") else "")
              + "</figcaption></figure>")
        if "reconstructions.png" in img:
            w("<figure><img src=\"reconstructions.png\" alt=\"Reconstruction grid\">"
              "<figcaption>Top: the first test image of each class. Middle: the autoencoder's output. "
              "Bottom: the absolute difference, brightened three times.</figcaption></figure>")
        w("</section>")
    if "features_pca.png" in img:
        w("<section><h2>Features</h2>")
        w(f"<p class=\"lead\">{e(pca_lead(ctx['features_pca']))}</p>")
        w("<figure><img src=\"features_pca.png\" alt=\"The features projected on two principal components\" "
          f"style=\"max-width:min(100%,820px)\"><figcaption>{e(PCA_CAPTION)}</figcaption></figure></section>")
    if "confusion.png" in img:
        w("<section><h2>Classification</h2>")
        w(f"<p class=\"lead\">{e(ctx['classification_lead'])}</p><div class=\"two\">")
        w("<figure><img src=\"confusion.png\" alt=\"Confusion matrix\"><figcaption>Rows: true class; "
          "columns: predicted class. Numbers are counts, colour is the share of the row.</figcaption></figure>")
        w("<figure><img src=\"per_class_accuracy.png\" alt=\"Accuracy per class\"><figcaption>The diagonal of the "
          "confusion matrix divided by each row's total.</figcaption></figure></div>")
        rows = metrics_rows(ctx.get("eval_metrics"), ctx.get("eval_class_names"))
        if rows:
            w("<table><tr><th>class</th><th>precision</th><th>recall</th><th>F1</th><th>n</th></tr>")
            for row in rows:
                w("<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>")
            w("</table>")
        w("</section>")
    if "examples.png" in img:
        w("<section><h2>Test images</h2>")
        w("<figure><img src=\"examples.png\" alt=\"Test images with predicted and true classes\">"
          f"<figcaption>{e(ctx.get('examples_caption', ''))}</figcaption></figure></section>")
    if "reliability.png" in img:
        w("<section><h2>Probabilities</h2>")
        w("<p class=\"lead\">The model's probability estimates (svm-fit --probability: libsvm's pairwise "
          "sigmoids on cross-validated decision values, coupled into class probabilities).</p>")
        w("<figure><img src=\"reliability.png\" alt=\"Reliability diagram\" style=\"max-width:min(100%,560px)\">"
          "<figcaption>Test images binned by the probability of their most likely class: the share of each bin "
          "classified right against its mean probability. On the diagonal, a probability of 0.7 is right 70 % "
          "of the time. ECE: the bins' |share right − mean probability|, weighted by their counts.</figcaption>"
          "</figure></section>")
    if "cv_grid.png" in img:
        w("<section><h2>Model selection</h2>")
        w(f"<p class=\"lead\">{e(ctx['grid_lead'])}</p>")
        w("<figure><img src=\"cv_grid.png\" alt=\"Cross-validated accuracy per C and gamma\" "
          "style=\"max-width:min(100%,720px)\"><figcaption>"
          + e(ctx.get("grid_cell_words") or "Each cell: the share of training rows predicted right when held out")
          + " (scaler, γ and feature mask fitted on the other folds). The box marks the chosen pair; "
          "ties go to the first in C-major order.</figcaption></figure></section>")
    if ctx["stages"]:
        w("<section><h2>Stages</h2><p class=\"lead\">Read from each file's attributes.</p>")
        w("<div class=\"scroll\"><table><tr><th>Stage</th><th>File</th><th>Device</th><th style=\"text-align:right\">Time</th>"
          "<th style=\"text-align:right\">Throughput</th><th>Details</th></tr>")
        for s in ctx["stages"]:
            w(f"<tr><td><strong>{e(s['stage'])}</strong></td><td><code>{e(s['file'])}</code></td>"
              f"<td>{e(s['device'] or '—')}</td><td class=\"num\">{e(fmt_seconds(s['seconds']))}</td>"
              f"<td class=\"num\">{e(s['rate'])}</td><td>{e(s['details'])}</td></tr>")
        total = sum(s["seconds"] for s in ctx["stages"] if s["seconds"] is not None)
        w(f"<tr><td><strong>total</strong></td><td></td><td></td><td class=\"num\"><strong>{e(fmt_seconds(total))}"
          "</strong></td><td></td><td></td></tr></table></div>")
        if "timing.png" in img:
            w("<figure><img src=\"timing.png\" alt=\"Seconds per stage\" style=\"max-width:min(100%,720px)\"></figure>")
        w("</section>")
    if ctx["provenance"]:
        w("<section><h2>Provenance</h2><p class=\"lead\">Which tool made each file, with which options, "
          "from which inputs. A green badge: the input's sha256 matches the file in this report.</p>")
        w("<div class=\"scroll\"><table><tr><th>File</th><th>Made by</th><th>Parameters</th><th>Inputs (sha256)</th></tr>")
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
        w("</table></div></section>")
    w(f"<footer>{e(ctx['footer'])}</footer></main></body></html>\n")
    return "".join(out)


md_cell = md_text  # every string placed in report.md goes through md_text or md_code (escape.py)


def build_markdown(ctx):
    out = [f"# {md_text(ctx['title'])}", ""]
    if ctx.get("dataset"):
        out += [f"Dataset: {md_text(ctx['dataset'])}", ""]
    out += [f"Run folder {md_code(ctx['source'])} · generated {md_text(ctx['generated'])}", ""]
    if ctx["cards"]:
        out += ["| | |", "|---|---|"]
        out += [f"| **{md_cell(label)}** | {md_cell(value)}{(' — ' + md_cell(hint)) if hint else ''} |"
                for label, value, hint in ctx["cards"]]
        out.append("")
    if ctx["missing"] or ctx["notes"]:
        out.append("> **Not everything is here.**")
        out += [f"> - {md_code(name)} was not found: no {md_text(lost)}." for name, lost in ctx["missing"]]
        out += [f"> - {md_text(note)}" for note in ctx["notes"]]
        out.append("")
    img = ctx["images"]
    if "loss.png" in img or "reconstructions.png" in img:
        out += ["## Autoencoder", "", md_text(ctx["training_lead"]), ""]
        if "loss.png" in img:
            out += ["![Train and test loss per epoch](loss.png)", ""]
            if ctx.get("running_train_loss"):
                out += [md_text(RUNNING_LOSS_NOTE), ""]
        if "reconstructions.png" in img:
            out += ["![Original, reconstruction and |difference|×3 per class](reconstructions.png)", ""]
    if "features_pca.png" in img:
        out += ["## Features", "", md_text(pca_lead(ctx["features_pca"])), "",
                "![The features projected on two principal components](features_pca.png)", "", md_text(PCA_CAPTION),
                ""]
    if "confusion.png" in img:
        out += ["## Classification", "", md_text(ctx["classification_lead"]), "",
                "![Confusion matrix](confusion.png)", "", "![Accuracy per class](per_class_accuracy.png)", ""]
        rows = metrics_rows(ctx.get("eval_metrics"), ctx.get("eval_class_names"))
        if rows:
            out += ["| class | precision | recall | F1 | n |", "|---|---|---|---|---|"]
            out += ["| " + " | ".join(md_text(cell) for cell in row) + " |" for row in rows] + [""]
    if "examples.png" in img:
        out += ["## Test images", "", md_text(ctx.get("examples_caption", "")), "",
                "![Test images with predicted and true classes](examples.png)", ""]
    if "reliability.png" in img:
        out += ["## Probabilities", "",
                "Test images binned by the probability of their most likely class: the share of each bin "
                "classified right against its mean probability (on the diagonal: calibrated).", "",
                "![Reliability diagram](reliability.png)", ""]
    if "cv_grid.png" in img:
        out += ["## Model selection", "", md_text(ctx["grid_lead"]), "",
                "![Cross-validated accuracy per C and gamma](cv_grid.png)", ""]
    if ctx["stages"]:
        out += ["## Stages", "", "| Stage | File | Device | Time | Throughput | Details |",
                "|---|---|---|--:|--:|---|"]
        for s in ctx["stages"]:
            out.append(f"| {md_text(s['stage'])} | {md_code(s['file'])} | {md_text(s['device'] or '—')} "
                       f"| {fmt_seconds(s['seconds'])} | {md_text(s['rate'])} | {md_text(s['details'])} |")
        out.append("")
        if "timing.png" in img:
            out += ["![Seconds per stage](timing.png)", ""]
    if ctx["provenance"]:
        out += ["## Provenance", "", "| File | Made by | Parameters | Inputs (sha256) |", "|---|---|---|---|"]
        for p in ctx["provenance"]:
            params = " ".join(md_code(i) for i in params_items(p["params"])) or "—"
            inputs = "<br>".join(f"{md_code(n)} {md_code(d[:12] + '…')}" + (f" ({md_text(v[1])})" if v else "")
                                 for n, d, v in p["inputs"]) or "—"
            out.append(f"| {md_code(p['file'])} ({md_text(p['format'])}) | {md_text(p['created_by'])}, "
                       f"{md_text(p['created_at'])} | {params} | {inputs} |")
        out.append("")
    out += ["---", md_text(ctx["footer"]), ""]
    return "\n".join(out)
