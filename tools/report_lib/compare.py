"""report --compare RUN_DIR... -o OUT: one table and one plot over several run folders
(a sweep's runs, or local make pipeline runs): test accuracy, autoencoder test MSE and the
stage times of every run, then the mean and spread over the runs whose settings are the
same.

What a run's settings are is read from its files, not from how it was started: the JSON
`params` attribute every tool records (docs/FORMATS.md, provenance) of model.h5,
features.h5, svm.h5 and eval.h5, plus the dataset's sha256 that model.h5 records
(`data_sha256`). Options that do not change the result are left out: file names (the
output and the input paths: the dataset enters by its hash), device, threads, --resume.
The autoencoder's --seed is left out too: runs that differ only by seed are repeats of
one setting, and the spread over them is what the table is for. So the same comparison
works for runs made by pipelines/slurm/submit.sh, sweep.sh, make pipeline or by hand.

The spread is the sample standard deviation (n - 1 in the denominator), shown only for
settings with two runs or more. A run folder without all four files (a failed or
unfinished run) is listed with what it has, in no setting and in no mean: its settings
are not all known."""
import json
import math
import os
import time

from .common import KINDS, TOOL, ReportError, fmt_seconds, log, version_line, warn
from .load import read_in_child
from .plots import save, setup_matplotlib, subplots
from .render import CSS, e, md_cell

# Options that name files or choose where/how fast a stage runs, not what it computes.
NOT_SETTINGS = {"output", "device", "threads", "resume", "data", "model", "features", "export-libsvm",
                "export-libsvm-data", "quiet", "json",
                # where the work ran, not what it computed (a group gives the same result)
                "ranks", "gpus", "rank", "world-size", "local-rank", "rendezvous", "group-timeout"}
# The autoencoder's seed: runs differing only by it are repeats of one setting.
REPEAT_KEYS = {("train", "seed")}
STAGE_OF = {kind: stage for kind, _f, _fmt, stage, _l in KINDS}
TIME_STAGES = ["train", "encode", "fit", "eval"]


def load_run(folder):
    if not os.path.exists(folder):
        raise ReportError(folder, "no such run folder")
    if not os.path.isdir(folder):
        raise ReportError(folder, "is not a folder")
    loaded = {}
    for kind, filename, _fmt, _stage, _lost in KINDS:
        path = os.path.join(folder, filename)
        if os.path.exists(path):
            # The features' shapes and attributes: their 2-D view is another reader's.
            loaded[kind] = read_in_child(kind, path)
    return loaded


def number(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def run_summary(folder, loaded):
    """→ the run's row: settings (a dict stage:option → value), seed, the numbers."""
    settings, seed = {}, None
    for kind, d in loaded.items():
        params = d["attrs"].get("params")
        if not isinstance(params, dict):
            continue
        stage = STAGE_OF[kind]
        for key, value in params.items():
            if key in NOT_SETTINGS or value in ("", None):
                continue
            if (stage, key) in REPEAT_KEYS:
                seed = value
                continue
            settings[f"{stage}:{key}"] = str(value)
    if "model" in loaded:
        sha = loaded["model"]["attrs"].get("data_sha256")
        if isinstance(sha, str) and sha:
            settings["data:sha256"] = sha[:12]
    row = {"run": folder, "name": os.path.basename(os.path.normpath(folder)) or folder, "settings": settings,
           "seed": seed, "files": sorted(loaded), "accuracy": None, "mse": None,
           "seconds": {s: None for s in TIME_STAGES}}
    if "eval" in loaded:
        row["accuracy"] = loaded["eval"]["accuracy"]
    if "model" in loaded:
        m = loaded["model"]
        test_loss = m["history"].get("test_loss")
        if test_loss is not None and len(test_loss):
            row["mse"] = number(float(test_loss[-1]))  # the model the run kept: its last epoch
        secs = number(m["attrs"].get("total_seconds"))
        if secs is None and "epoch_seconds" in m["history"]:
            secs = float(sum(m["history"]["epoch_seconds"]))
        row["seconds"]["train"] = secs
    if "features" in loaded:
        row["seconds"]["encode"] = number(loaded["features"]["attrs"].get("seconds"))
    if "svm" in loaded:
        row["seconds"]["fit"] = number(loaded["svm"]["attrs"].get("fit_seconds"))
    if "eval" in loaded:
        row["seconds"]["eval"] = number(loaded["eval"]["attrs"].get("seconds"))
    return row


def mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None, 0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None, len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)), len(values)


def group_runs(rows):
    """Runs with equal settings, in the order their first run was named. Each group gets a
    label made of the settings that differ between groups (all shared ones say nothing)."""
    groups = {}
    complete = {kind for kind, *_rest in KINDS}
    for row in rows:
        if set(row["files"]) != complete:
            continue
        key = json.dumps(row["settings"], sort_keys=True)
        groups.setdefault(key, {"settings": row["settings"], "runs": []})["runs"].append(row)
    groups = list(groups.values())
    keys = sorted({k for g in groups for k in g["settings"]})
    varying = [k for k in keys if len({g["settings"].get(k) for g in groups}) > 1]
    for i, g in enumerate(groups):
        g["label"] = settings_text(g["settings"], varying) or "all runs"
        g["id"] = f"S{i + 1}"
        for row in g["runs"]:
            row["group"] = g["id"]
        g["accuracy"] = mean_std([r["accuracy"] for r in g["runs"]])
        g["mse"] = mean_std([r["mse"] for r in g["runs"]])
        g["seconds"] = {s: mean_std([r["seconds"][s] for r in g["runs"]]) for s in TIME_STAGES}
    shared = [k for k in keys if k not in varying]
    return groups, varying, shared


def settings_text(settings, keys):
    """"train: encoder-channels=8,4; fit: C=5" for the keys named."""
    by_stage = {}
    for k in keys:
        stage, name = k.split(":", 1)
        by_stage.setdefault(stage, []).append(f"{name}={settings.get(k, '—')}")
    return "; ".join(f"{stage}: {', '.join(items)}" for stage, items in by_stage.items())


def fmt_pct(v):
    return "—" if v is None else f"{100 * v:.2f} %"


def fmt_mse(v):
    return "—" if v is None else f"{v:.5f}"


def fmt_ms(stat, fmt):
    mean, std, n = stat
    if mean is None:
        return "—"
    return fmt(mean) + (f" ± {fmt(std)}" if std is not None else "")


def fmt_pct_ms(stat):
    mean, std, _n = stat
    if mean is None:
        return "—"
    return f"{100 * mean:.2f}" + (f" ± {100 * std:.2f}" if std is not None else "") + " %"


def plot_compare(rows, groups, folder):
    """Three panels over the runs (x: run folders, colour: setting): test accuracy, test
    MSE, stage times stacked. A setting's mean is a line across its runs, ± std a band."""
    if not groups:
        return None
    palette = ["#3b6fb6", "#e07b39", "#2a9d8f", "#7b4bb7", "#e9c46a", "#b3261e", "#6c757d", "#1e7b46"]
    colour = {g["id"]: palette[i % len(palette)] for i, g in enumerate(groups)}
    order = [r for g in groups for r in g["runs"]]  # runs of one setting side by side
    x = list(range(len(order)))
    fig, axes = subplots(3, 1, figsize=(max(7.5, 0.55 * len(order) + 3), 9.5), sharex=True)
    for ax, key, title, scale in ((axes[0], "accuracy", "Test accuracy (%)", 100), (axes[1], "mse", "Autoencoder test MSE", 1)):
        for i, r in enumerate(order):
            if r[key] is not None:
                ax.plot(i, r[key] * scale, "o", color=colour[r["group"]], markersize=7)
        for g in groups:
            idx = [order.index(r) for r in g["runs"]]
            mean, std, _n = g[key]
            if mean is None:
                continue
            lo, hi = min(idx) - 0.35, max(idx) + 0.35
            ax.hlines(mean * scale, lo, hi, color=colour[g["id"]], linewidth=2)
            if std is not None:
                ax.fill_between([lo, hi], (mean - std) * scale, (mean + std) * scale, color=colour[g["id"]], alpha=0.18)
        ax.set_title(title)
    bottom = [0.0] * len(order)
    stage_colours = {"train": "#3b6fb6", "encode": "#2a9d8f", "fit": "#e9c46a", "eval": "#e07b39"}
    for stage in TIME_STAGES:
        secs = [r["seconds"][stage] or 0.0 for r in order]
        axes[2].bar(x, secs, bottom=bottom, color=stage_colours[stage], label=stage, width=0.6)
        bottom = [b + s for b, s in zip(bottom, secs)]
    axes[2].set_ylim(0, (max(bottom) or 1) * 1.3)  # room for the legend above the bars
    axes[2].set_title("Stage times (s)")
    axes[2].legend(loc="upper left", fontsize=9, ncol=4)
    axes[2].set_xticks(x)
    axes[2].set_xticklabels([f"{r['name']}\n{r['group']}" for r in order], fontsize=8,
                            rotation=0 if len(order) <= 8 else 45)
    fig.tight_layout()
    return save(fig, folder, "compare.png")


def build_tables(rows, groups):
    run_head = ["run", "setting", "seed", "test accuracy", "test MSE"] + [f"{s} time" for s in TIME_STAGES] + ["files"]
    run_rows = []
    for r in rows:
        run_rows.append([r["run"], r.get("group", "—"), "—" if r["seed"] is None else str(r["seed"]),
                         fmt_pct(r["accuracy"]), fmt_mse(r["mse"])]
                        + [fmt_seconds(r["seconds"][s]) for s in TIME_STAGES]
                        + [", ".join(r["files"]) or "none (failed or not run)"])
    group_head = ["setting", "settings", "runs", "test accuracy (mean ± std)", "test MSE (mean ± std)"] + \
                 [f"{s} time" for s in TIME_STAGES]
    group_rows = []
    for g in groups:
        group_rows.append([g["id"], g["label"], str(len(g["runs"])), fmt_pct_ms(g["accuracy"]),
                           fmt_ms(g["mse"], lambda v: f"{v:.5f}")]
                          + [fmt_ms(g["seconds"][s], fmt_seconds) for s in TIME_STAGES])
    return (group_head, group_rows), (run_head, run_rows)


def markdown(title, generated, tables, shared_text, image, footer):
    out = [f"# {md_cell(title)}", "", f"Generated {generated}. Runs with the same settings (all but the "
           "autoencoder's seed) are grouped; ± is the sample standard deviation.", ""]
    for heading, (head, rows) in zip(("Settings", "Runs"), tables):
        out += [f"## {heading}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
        out.append("")
    if shared_text:
        out += [f"Shared by every run: {md_cell(shared_text)}", ""]
    if image:
        out += [f"![accuracy, MSE and stage times per run]({image})", ""]
    out += [footer, ""]
    return "\n".join(out)


def html_page(title, generated, tables, shared_text, image, footer):
    w = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
         f"<style>{CSS}</style></head><body><main><h1>{e(title)}</h1>",
         f"<p class=\"small\">Generated {e(generated)}. Runs with the same settings (all but the autoencoder's "
         "seed) are grouped; ± is the sample standard deviation.</p>"]
    for heading, (head, rows) in zip(("Settings", "Runs"), tables):
        w.append(f"<section><h2>{e(heading)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>")
        w += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
        w.append("</table></section>")
    if shared_text:
        w.append(f"<p class=\"small\">Shared by every run: {e(shared_text)}</p>")
    if image:
        w.append(f"<section><img src=\"{e(image)}\" alt=\"accuracy, MSE and stage times per run\" "
                 "style=\"max-width:100%\"></section>")
    w.append(f"<footer>{e(footer)}</footer></main></body></html>\n")
    return "".join(w)


def run_compare(args, tmp_holder, prepare_output, commit_output):
    started = time.time()
    rows = [run_summary(folder, load_run(folder)) for folder in args.compare]
    if not any(r["files"] for r in rows):
        raise ReportError(", ".join(args.compare), "no run folder holds any of model.h5, features.h5, svm.h5, eval.h5")
    for r in rows:
        if not r["files"]:
            warn(f"{r['run']}: none of model.h5, features.h5, svm.h5, eval.h5 is here (a failed run?); "
                 "listed without numbers")
    groups, varying, shared = group_runs(rows)
    tmp = prepare_output(args.output)
    tmp_holder.append(tmp)
    setup_matplotlib()
    image = plot_compare(rows, groups, tmp)
    tables = build_tables(rows, groups)
    shared_text = settings_text(groups[0]["settings"], shared) if groups else ""
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    title = args.title if args.title_given else f"Comparison of {len(rows)} runs"
    footer = f"Made by {version_line()} from " + ", ".join(args.compare)
    with open(os.path.join(tmp, "index.html"), "w", encoding="utf-8") as f:
        f.write(html_page(title, generated, tables, shared_text, image, footer))
    with open(os.path.join(tmp, "report.md"), "w", encoding="utf-8") as f:
        f.write(markdown(title, generated, tables, shared_text, image, footer))
    summary = {"tool": TOOL, "output": args.output,
               "runs": [{"run": r["run"], "setting": r.get("group"), "seed": r["seed"], "accuracy": r["accuracy"],
                         "mse": r["mse"], "seconds": r["seconds"], "files": r["files"]} for r in rows],
               "settings": [{"setting": g["id"], "label": g["label"], "runs": [r["run"] for r in g["runs"]],
                             "accuracy_mean": g["accuracy"][0], "accuracy_std": g["accuracy"][1],
                             "mse_mean": g["mse"][0], "mse_std": g["mse"][1]} for g in groups]}
    with open(os.path.join(tmp, "compare.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    commit_output(tmp, args.output)
    tmp_holder.clear()
    log(args, f"wrote {os.path.join(args.output, 'index.html')} ({len(rows)} runs, {len(groups)} settings) "
              f"in {time.time() - started:.1f} s")
    if args.json:
        summary["seconds"] = round(time.time() - started, 3)
        print(json.dumps(summary), flush=True)
