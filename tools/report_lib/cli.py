"""The command line: options, the order of work (read every file, then plot, then write
both documents), and the output folder that is built under a temporary name and swapped
into place at the end, so a half-written report never sits under the final name."""
import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time

from .common import (DEFAULT_CLASS_NAMES, EXAMPLE, KINDS, TOOL, Phases, ReportError, fmt_seconds, log, pct,
                     score_words, version_line, warn)
from .dataset import dataset_path_recorded, from_dataset_file, guessed, header_line, title_name
from .escape import visible
from .load import features_origin, finish_read, read_all, regular_file, start_read
from .parallel import BackgroundHash, ChildFailed, kill_all, run_parallel
from .render import build_html, build_markdown, lineage, stage_rows, summary_cards


def prepare_output(path):
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.exists(path) and not os.path.isdir(path):
        raise ReportError(path, "exists and is not a folder")
    if os.path.isdir(path) and os.listdir(path) and not os.path.exists(os.path.join(path, "index.html")):
        raise ReportError(path, "exists and is not a report folder (no index.html); refusing to replace it")
    if not os.path.isdir(parent):  # as every other tool: outputs never create folders
        raise ReportError(path, f"output folder {parent} does not exist")
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
               epilog=EXAMPLE + "\n\nWhat a file is and what it was made from:\n  report --info data/run/svm.h5 data/cifar10.h5"
                      "\n\nComparing runs (a sweep, or several make pipeline RUN_DIRs):\n"
                      "  report --compare sweeps/s1/run-1 sweeps/s1/run-2 sweeps/s1/run-3 -o sweeps/s1/compare")
    p.add_argument("--version", action="version", version=version_line())
    p.add_argument("--run-dir", metavar="DIR", help="run folder holding model.h5, features.h5, svm.h5, eval.h5")
    p.add_argument("--model", metavar="FILE", help="ae-model file (overrides RUN_DIR/model.h5)")
    p.add_argument("--features", metavar="FILE", help="ae-features file (overrides RUN_DIR/features.h5)")
    p.add_argument("--svm", metavar="FILE", help="svm-model file (overrides RUN_DIR/svm.h5)")
    p.add_argument("--eval", metavar="FILE", help="svm-eval file (overrides RUN_DIR/eval.h5)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="report folder to write (replaced atomically); default RUN_DIR/report")
    p.add_argument("--compare", nargs="+", metavar="RUN_DIR",
                   help="compare several run folders instead: a table and a plot of test accuracy, test MSE and "
                        "stage times per run, mean ± std over runs with the same settings (needs -o)")
    p.add_argument("--info", nargs="+", metavar="FILE",
                   help="print a text summary of each file instead (any file of this toolkit: dataset, model or "
                        "checkpoint, features, SVM model, evaluation): what it is, its datasets' shapes, its key "
                        "attributes and the chain of files it was made from; writes nothing")
    p.add_argument("--title", default=None, help="heading of the report")
    p.add_argument("-q", "--quiet", action="store_true", help="only errors and warnings on stderr")
    p.add_argument("--json", action="store_true", help="print a one-line JSON summary on stdout")
    args = p.parse_args(argv)
    args.title_given = args.title is not None
    if args.info:
        if args.compare or args.run_dir or args.output or args.json or any((args.model, args.features, args.svm,
                                                                             args.eval)):
            p.error("--info takes files only; it cannot be combined with --run-dir/--model/--features/--svm/--eval/"
                    "--compare/-o/--json")
        return args
    if args.compare:
        if args.run_dir or any((args.model, args.features, args.svm, args.eval)):
            p.error("--compare takes run folders; it cannot be combined with --run-dir/--model/--features/--svm/--eval")
        if not args.output:
            p.error("-o/--output is required with --compare")
        return args
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


def dataset_of(loaded):
    """The image-dataset file the run was encoded from, when it is still where it was recorded."""
    name = dataset_path_recorded(loaded)
    return name if name and os.path.isfile(name) else None


def start_dataset_read(loaded):
    """Starts reading the run's image-dataset file in its sandboxed child, so that it reads
    while the figures are drawn (describe_run_dataset collects it). → the reader, or None
    when the file is not where it was recorded."""
    path = dataset_path_recorded(loaded)
    return start_read("dataset", path) if path and os.path.isfile(path) else None


def describe_run_dataset(reader, loaded, class_names, notes):
    """The dataset in a reader's words (report_lib.dataset), read from the dataset file when
    it is here (reader: start_dataset_read's), else guessed from its recorded name and the
    class names; None when unknown."""
    if reader is not None:
        try:
            return from_dataset_file(finish_read(reader))
        except ReportError as err:
            notes.append(f"the dataset file is not readable ({err}): its name is guessed")
    return guessed(dataset_path_recorded(loaded), class_names)


def pictures_of_results(loaded, paths, tmp):
    """Draws examples.png (test images with predicted and true classes).
    → (caption, note): the caption when drawn, else a note saying why not (or nothing)."""
    data = dataset_of(loaded)
    if data is None:  # moved or on another machine: the rest of the report stands without it
        return "", None
    from .pictures import draw_examples  # numpy: imported only once the interpreter is known to have it
    try:
        return draw_examples(data, paths["eval"], os.path.join(tmp, "examples.png")) or "", None
    except (ReportError, OSError, KeyError, ValueError) as err:
        return "", f"no pictures of test images: {err}"


# Files whose sha256 the provenance check (render.lineage) compares with what later stages
# recorded: hashed in the background from the start (features.h5 is ~2 GB on a full run).
HASHED_KINDS = ("model", "features", "svm")


def referenced_kinds(loaded, paths):
    """The kinds of the report's files that another loaded file names as its input."""
    by_base = {os.path.basename(paths[k]): k for k in loaded}
    named = set()
    for kind, data in loaded.items():
        inputs = data["attrs"].get("inputs")
        for entry in inputs if isinstance(inputs, list) else []:
            other = by_base.get(os.path.basename(str(entry.get("name", "")))) if isinstance(entry, dict) else None
            if other is not None and other != kind:
                named.add(other)
    return named


def plot_jobs(loaded, paths, class_names, tmp, origin=None):
    """(name, callable) per figure to draw, the slowest first (they run in parallel children).
    Each callable returns the PNG's name or None; "examples" returns (caption, note)."""
    from .plots import (plot_confusion, plot_cv_grid, plot_features_pca, plot_loss, plot_per_class,
                        plot_reconstructions, plot_reliability, plot_timing)
    jobs = []
    if "eval" in loaded:
        jobs.append(("examples", lambda: pictures_of_results(loaded, paths, tmp)))
    if "model" in loaded:
        m = loaded["model"]
        if m["samples"] is not None:
            jobs.append(("reconstructions", lambda: plot_reconstructions(m["samples"], class_names, tmp)))
        jobs.append(("loss", lambda: plot_loss(m["history"], tmp)))
    if "eval" in loaded:
        ev = loaded["eval"]
        jobs.append(("confusion", lambda: plot_confusion(ev, tmp)))
        jobs.append(("per_class", lambda: plot_per_class(ev, tmp)))
        jobs.append(("reliability", lambda: plot_reliability(ev, tmp)))  # eval.h5 with /probabilities
    grid = loaded.get("svm", {}).get("grid")
    if grid is not None:
        jobs.append(("cv_grid", lambda: plot_cv_grid(grid, tmp)))
    stages = stage_rows(loaded, origin)
    jobs.append(("timing", lambda: plot_timing(stages, tmp)))
    return jobs


def features_view_job(reader, loaded, class_names, tmp):
    """The features' 2-D view as run_parallel's `later` job: (fd, make_job). Its reader
    (load.load_features_view, the slowest) was started with the others and is collected
    only when it answers, while the other figures are drawn; its answer goes into
    loaded["features"] ("pca" and its notes), as if read with the rest. A damaged file
    fails the report as any input does (ReportError)."""
    def make_job():
        from .plots import plot_features_pca
        view = finish_read(reader)
        features = loaded["features"]
        features["pca"] = view["pca"]
        features["notes"].extend(view["notes"])
        names = features["attrs"].get("class_names")
        names = [str(n) for n in names] if isinstance(names, list) and names else class_names
        return "features_pca", lambda: plot_features_pca(view["pca"], names, tmp)
    return reader[3], make_job


# The order of the pictures in --json's "images" (the documents place each in its section).
IMAGE_ORDER = ["loss", "reconstructions", "features_pca", "confusion", "per_class", "reliability", "examples",
               "cv_grid", "timing"]


def run(args, tmp_holder, phases):
    if args.compare:
        from .compare import run_compare
        return run_compare(args, tmp_holder, prepare_output, commit_output)
    started = time.time()
    phases.enter("other")
    paths, missing = resolve_inputs(args)
    for path in paths.values():  # before anything opens them: a FIFO's open would wait forever
        regular_file(path)
    # Started first, so that hashing a 2 GB features file overlaps everything else.
    hashes = {kind: BackgroundHash(path) for kind, path in paths.items() if kind in HASHED_KINDS}
    phases.enter("read")

    def import_matplotlib():  # the figures' work, done while the readers read
        from .plots import setup_matplotlib
        phases.enter("compute")
        setup_matplotlib()
        phases.enter("read")
    # The 2-D view of the features takes longest to read: its own reader, whose figure is
    # drawn once it answers, while the other figures are drawn (features_view_job).
    view_reader = start_read("features_view", paths["features"]) if "features" in paths else None
    # The rows of the splits the view does not show, checked meanwhile: collected last.
    rows_reader = start_read("features_rows", paths["features"]) if "features" in paths else None
    loaded, _ = read_all(paths, meanwhile=import_matplotlib)
    phases.enter("other")
    needed = referenced_kinds(loaded, paths)
    for kind in [k for k in hashes if k not in needed]:
        hashes.pop(kind).cancel()
    tmp = prepare_output(args.output)
    tmp_holder.append(tmp)
    # Features that no autoencoder made (a plain HDF5 file, libsvm text): a run without
    # model.h5 by design, and without features.h5 when they are text.
    origin = features_origin(loaded)
    without_autoencoder = origin in ("plain", "libsvm")
    if without_autoencoder:
        missing = [(name, lost) for name, lost in missing
                   if name != "model.h5" and not (origin == "libsvm" and name == "features.h5")]

    class_names = DEFAULT_CLASS_NAMES
    for kind in ("eval", "features", "svm"):
        names = loaded.get(kind, {}).get("attrs", {}).get("class_names")
        if isinstance(names, list) and names:
            class_names = [str(n) for n in names]
            break

    dataset_reader = start_dataset_read(loaded)
    phases.enter("compute")
    drawn = run_parallel(plot_jobs(loaded, paths, class_names, tmp, origin),
                         later=[features_view_job(view_reader, loaded, class_names, tmp)] if view_reader else [])
    phases.enter("other")
    examples_caption, examples_note = drawn.pop("examples", ("", None))
    if examples_caption:
        drawn["examples"] = "examples.png"
    images = [drawn[name] for name in IMAGE_ORDER if drawn.get(name)]
    notes = [n for d in loaded.values() for n in d["notes"]] + ([examples_note] if examples_note else [])
    if without_autoencoder:
        notes.insert(0, ("The features are a plain HDF5 file" if origin == "plain" else "The features are libsvm text")
                     + ", not an autoencoder's: the report has no autoencoder section.")
    training_lead = ""
    if "model" in loaded:
        m = loaded["model"]
        h, a = m["history"], m["attrs"]
        bits = []
        def trend(values):
            return f"{values[0]:.4f}" if len(values) == 1 else f"{values[0]:.4f} → {values[-1]:.4f}"
        if "train_loss" in h and len(h["train_loss"]):
            n = len(h["train_loss"])
            bits.append(f"{n} epoch{'s' if n != 1 else ''}, train loss {trend(h['train_loss'])}")
            if not all(math.isfinite(x) for x in h["train_loss"]):
                notes.append("the training loss has NaN or Inf values: training diverged")
        if "val_loss" in h and len(h["val_loss"]):
            bits.append(f"validation loss {trend(h['val_loss'])}")
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
        best, worst = int(ev["per_class"].argmax()), int(ev["per_class"].argmin())
        classification_lead = (f"{pct(ev['accuracy'])} of {ev['n']:,} {ev['attrs'].get('split', '')} images "
                               f"classified correctly (chance: {pct(1 / ev['k'], 0)}).")
        if ev["per_class"][best] > ev["per_class"][worst]:
            classification_lead += (f" Easiest class: {ev['class_names'][best]} ({pct(ev['per_class'][best])}); "
                                    f"hardest: {ev['class_names'][worst]} ({pct(ev['per_class'][worst])}).")
    grid_lead = ""
    grid = loaded.get("svm", {}).get("grid")
    if "cv_grid.png" in images:
        bi, bj = grid["best"]
        nc, ng = grid["table"].shape
        grid_lead = (f"{int(grid['folds']) if grid.get('folds') else 'K'}-fold stratified cross-validation of "
                     f"{nc} C × {ng} γ on the training rows"
                     + (f" ({fmt_seconds(grid['seconds'])})" if grid.get("seconds") is not None else "")
                     + f"; the best pair, C = {grid['C'][bi]:g} and γ = {grid['gamma'][bj]} "
                       f"({pct(grid['table'][bi, bj])}"
                     + (f"; chosen by {score_words(grid['scoring'], grid['best_score'], ', ')} as the mean over the folds"
                        if grid.get("best_score") is not None else "")
                     + "), was refitted on all of them and is the model.")
    stages = stage_rows(loaded, origin)

    if rows_reader:
        phases.enter("read")
        finish_read(rows_reader)
    phases.enter("hash")
    digests = {}
    for kind, job in hashes.items():
        try:
            digests[kind] = job.digest()
        except OSError as err:
            digests[kind] = err
    phases.enter("other")
    checks = lineage(loaded, paths, digests)
    for kind, rows in checks.items():
        for name, _d, verdict in rows:
            if verdict and verdict[0] == "stale":
                notes.append(f"{os.path.basename(paths[kind])} was made from a different {os.path.basename(name)} "
                             "than the one in this report (re-run the pipeline)")
    provenance = []
    for kind, _f, fmt, _s, _l in KINDS:
        if kind in loaded:
            a = loaded[kind]["attrs"]
            if kind == "features" and origin == "plain":  # no format attribute, no provenance
                fmt, a = "plain features, no format attribute", {"format_version": "—", "created_by": "—",
                                                                  "created_at": "—"}
            provenance.append({"file": os.path.basename(paths[kind]),
                               "format": f"{fmt} v{a.get('format_version', '?')}" if a.get("format_version") != "—"
                               else fmt,
                               "created_by": a.get("created_by", "?"), "created_at": a.get("created_at", "?"),
                               "params": a.get("params"), "inputs": checks.get(kind, [])})

    history = loaded.get("model", {}).get("history", {})
    source = args.run_dir or ", ".join(paths.values())
    dataset = describe_run_dataset(dataset_reader, loaded, class_names, notes)
    what = "features → SVM" if without_autoencoder else "autoencoder features → SVM"
    title = args.title if args.title_given else \
        (f"{title_name(dataset)}: {what}" if dataset else what[:1].upper() + what[1:])
    ctx = {"title": title, "source": source, "dataset": header_line(dataset) if dataset else None,
           "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "cards": summary_cards(loaded), "missing": missing, "notes": notes, "images": images,
           "training_lead": training_lead, "classification_lead": classification_lead,
           "eval_metrics": loaded["eval"].get("metrics") if "eval" in loaded else None,
           "eval_class_names": loaded["eval"]["class_names"] if "eval" in loaded else None, "grid_lead": grid_lead,
           "grid_cell_words": (f"Each cell: the {'log-loss' if grid['scoring'] == 'log_loss' else grid['scoring']} of the "
                                "held-out rows, the mean over the folds"
                               if grid is not None and grid.get("best_score") is not None else None),
           "examples_caption": examples_caption,
           "features_pca": loaded.get("features", {}).get("pca"),
           "running_train_loss": "train_loss" in history and ("test_loss" in history or "val_loss" in history),
           "stages": stages, "provenance": provenance,
           "best_marker": "validation" if "val_loss" in history else "test",
           "footer": f"Made by {version_line()} from " + ", ".join(os.path.basename(p) for p in paths.values())}
    # What the report shows, for scripts: summary.json beside the documents and --json's line.
    # One key per line, "accuracy" among them: `make pipeline` reads its closing line from
    # here with sed, without a Python (pipelines/pipeline.mk).
    summary = {"tool": TOOL, "title": title, "dataset": dataset["name"] if dataset else None,
               "inputs": paths, "missing": [name for name, _ in missing], "images": images,
               "features_origin": origin, "accuracy": loaded["eval"]["accuracy"] if "eval" in loaded else None}
    phases.enter("write")
    with open(os.path.join(tmp, "index.html"), "w", encoding="utf-8") as f:
        f.write(build_html(ctx))
    with open(os.path.join(tmp, "report.md"), "w", encoding="utf-8") as f:
        f.write(build_markdown(ctx))
    with open(os.path.join(tmp, "summary.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(summary, indent=1) + "\n")
    commit_output(tmp, args.output)
    tmp_holder.clear()
    phases.enter("other")

    for name, _lost in missing:
        warn(f"{os.path.join(args.run_dir, name)} not found; its sections are left out")
    log(args, f"wrote {os.path.join(args.output, 'index.html')} ({len(images)} plots, "
              f"{', '.join(sorted(loaded))}) in {time.time() - started:.1f} s")
    if args.json:
        summary.update({"output": args.output, "seconds": round(time.time() - started, 3),
                        "phases": phases.summary()})
        print(json.dumps(summary), flush=True)


def main(argv):
    """The report's work for arguments `argv` → exit status."""
    phases = Phases()
    args = parse_args(argv)
    tmp_holder = []

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        if args.info:
            from .info import run_info
            return run_info(args.info)
        run(args, tmp_holder, phases)
        return 0
    except (ReportError, ChildFailed) as err:
        print(f"{TOOL}: error: {visible(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        signum = interrupt.args[0] if interrupt.args else signal.SIGINT
        print(f"{TOOL}: interrupted; no report written", file=sys.stderr)
        return 128 + int(signum)
    except Exception as err:  # a bug or an unexpected file problem: one line, no traceback
        print(f"{TOOL}: error: {type(err).__name__}: {visible(err)}", file=sys.stderr)
        return 1
    finally:
        kill_all()  # background hashes and figures of a failed or interrupted report
        for tmp in tmp_holder:
            shutil.rmtree(tmp, ignore_errors=True)


def script_main(no_python=None):
    """What `report` runs once tools/report.py has looked for a Python with h5py and
    matplotlib (report_lib.interpreter): `no_python` is why none was found, or None."""
    if no_python and not any(a in ("-h", "--help", "--version") for a in sys.argv[1:]):
        print(f"{TOOL}: error: {no_python}", file=sys.stderr)
        sys.exit(1)
    sys.exit(main(sys.argv[1:]))
