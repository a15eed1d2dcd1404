"""report --info FILE...: a text summary of any file of this toolkit (issue 19) — what it
is (the root `format` attribute), its datasets with dtypes and shapes, its key attributes,
its parameters, and the chain of files it was made from (the `inputs` provenance each file
records, followed through the inputs that can still be found). Each file is read in a
sandboxed child like the report's own inputs (load.read_in_child)."""
import os
import sys

from . import load
from .common import TOOL, ReportError
from .escape import visible

FORMATS = {
    "image-dataset": "image dataset (cifar-convert)",
    "cifar10-dataset": "CIFAR-10 dataset, older layout (cifar-convert)",
    "ae-model": "autoencoder model or checkpoint (ae-train)",
    "ae-features": "encoded features (ae-encode)",
    "svm-model": "SVM model (svm-fit)",
    "svm-eval": "SVM evaluation (svm-eval)",
}
PROVENANCE = ("format", "format_version", "created_by", "created_at", "inputs", "params")
MAX_DEPTH = 8        # how far back the chain of inputs is followed
MAX_DATASETS = 40    # a model has ~10 datasets; a file with more is summarised
MAX_VALUE_CHARS = 100


def short(value):
    """An attribute value on one line, long lists and strings cut."""
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, list):
        text = "[" + ", ".join(short(v) for v in value[:12]) + (f", … ({len(value)} in all)" if len(value) > 12 else "") + "]"
    else:
        text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def summarize(path):
    """The child's work: → {"format", "attrs", "datasets" [(name, dtype, shape)], "more"}."""
    import h5py
    f = load.open_hdf5(path)
    with f:
        fmt = load.plain(f.attrs.get("format", None))
        if fmt is None:
            raise ReportError(path, "no 'format' attribute: not a file of this toolkit")
        if fmt not in FORMATS:
            raise ReportError(path, f"unknown format '{fmt}' (this toolkit writes {', '.join(FORMATS)})")
        datasets = []

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and len(datasets) <= MAX_DATASETS:
                datasets.append(("/" + name, str(obj.dtype), list(obj.shape)))
        f.visititems(visit)
        return {"format": fmt, "attrs": load.common_attrs(f), "datasets": datasets[:MAX_DATASETS],
                "more": len(datasets) > MAX_DATASETS}


def find_input(name, made_from):
    """Where a recorded input is now: its recorded path (relative names are relative to the
    folder the tool ran in, unknown here: tried from here and beside the file that names
    it), else a file of the same name beside that file. None when not found."""
    beside = os.path.join(os.path.dirname(made_from), os.path.basename(name))
    for candidate in (name, os.path.join(os.path.dirname(made_from), name), beside):
        if os.path.isfile(candidate):
            return candidate
    return None


def describe(path, out):
    """Appends the lines for one file to out; raises ReportError when it cannot be read."""
    info = load.read_in_child("info", path)
    a = info["attrs"]
    out.append(f"{path}: {info['format']} v{a.get('format_version', '?')} — {FORMATS[info['format']]}")
    out.append(f"  made by    {a.get('created_by', '?')} at {a.get('created_at', '?')}")
    out.append("  datasets")
    width = max((len(n) for n, _d, _s in info["datasets"]), default=0)
    for name, dtype, shape in info["datasets"]:
        out.append(f"    {name.ljust(width)}  {dtype} [{', '.join(str(v) for v in shape)}]")
    if info["more"]:
        out.append(f"    … more than {MAX_DATASETS} datasets")
    if not info["datasets"]:
        out.append("    (none)")
    extra = [(k, v) for k, v in a.items() if k not in PROVENANCE]
    if extra:
        out.append("  attributes")
        width = max(len(k) for k, _v in extra)
        out += [f"    {k.ljust(width)}  {short(v)}" for k, v in sorted(extra)]
    params = a.get("params")
    if isinstance(params, dict) and params:
        out.append("  parameters " + " ".join(f"{k}={short(v)}" for k, v in params.items() if v not in ("", None)))
    out.append("  made from" + ("" if inputs_of(a) else " (no inputs recorded)"))
    chain(path, a, out, depth=1, seen={os.path.realpath(path)})


def inputs_of(attrs):
    inputs = attrs.get("inputs")
    return [e for e in inputs if isinstance(e, dict)] if isinstance(inputs, list) else []


def chain(path, attrs, out, depth, seen):
    """The inputs `attrs` records, each followed by its own inputs when the file is found."""
    for entry in inputs_of(attrs):
        name, digest = str(entry.get("name", "?")), str(entry.get("sha256", ""))
        found = find_input(name, path)
        indent = "    " * depth
        if found is None and os.path.isdir(name):  # cifar-convert's input can be a folder of batches
            where = "a folder, here"
        else:
            where = "not found here" if found is None else ("here" if found == name else f"found at {found}")
        out.append(f"{indent}← {name}  sha256 {digest[:16]}…  ({where})")
        if found is None or depth >= MAX_DEPTH or os.path.realpath(found) in seen:
            continue
        try:
            info = load.read_in_child("info", found)
        except ReportError as err:
            out.append(f"{indent}    (cannot read it: {str(err).split(': ', 1)[-1]})")
            continue
        made = info["attrs"].get("created_by", "?")
        out.append(f"{indent}    {info['format']}, made by {made}")
        chain(found, info["attrs"], out, depth + 1, seen | {os.path.realpath(found)})


def run_info(files):
    """Prints every file's summary on stdout; → exit status (1 when any could not be read,
    each such file named on one line on stderr)."""
    load.LOADERS["info"] = summarize
    status = 0
    for i, path in enumerate(files):
        lines = []
        try:
            describe(path, lines)
        except ReportError as err:
            print(f"{TOOL}: error: {visible(err)}", file=sys.stderr, flush=True)
            status = 1
            continue
        # A terminal too is an output syntax: names in the files cannot break or recolour lines.
        print(("\n" if i else "") + "\n".join(visible(line) for line in lines), flush=True)
    return status
