"""Which dataset a run was trained on, in a reader's words ("Fashion-MNIST", "the image
folder photos/"), and where it came from, for the report's title and header.

The dataset file (cifar-convert's image-dataset, named in the model's and features'
provenance) records source_dataset (cifar-10, cifar-100, fashion-mnist, mnist, idx,
image-folder), source_format, label_set (CIFAR-100) and, in its own provenance, the input
it was converted from. When that file has moved, the recorded dataset file name and the
class names still say enough for the known datasets."""
import os

from .common import DEFAULT_CLASS_NAMES

FASHION_MNIST_CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                             "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
DIGIT_CLASS_NAMES = [str(d) for d in range(10)]

NAMES = {"cifar-10": "CIFAR-10", "cifar-100": "CIFAR-100", "fashion-mnist": "Fashion-MNIST", "mnist": "MNIST"}
FORMAT_WORDS = {"cifar10": "CIFAR-10 binary batches", "cifar100": "CIFAR-100 binary batches",
                "idx": "IDX files", "folder": "an image folder"}
# The pipeline's dataset file names (pipelines/datasets.mk): data/DATASET.h5, folder-NAME.h5.
FILE_STEMS = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "fashion-mnist": "Fashion-MNIST", "mnist": "MNIST"}


def dataset_path_recorded(loaded):
    """The image-dataset file named in the features' provenance (ae-encode: model, data),
    else in the model's (ae-train: data); None when neither records one."""
    for kind, index in (("features", 1), ("model", 0)):
        inputs = loaded.get(kind, {}).get("attrs", {}).get("inputs")
        if isinstance(inputs, list) and len(inputs) > index and isinstance(inputs[index], dict):
            name = inputs[index].get("name")
            if isinstance(name, str) and name:
                return name
    return None


def folder_words(path):
    """'photos/' for /home/me/photos (a folder is shown as one, with its slash)."""
    base = os.path.basename(os.path.normpath(path)) or path
    return base + "/"


def source_input(attrs):
    """The path cifar-convert read: its --input option, else its first recorded input."""
    params = attrs.get("params")
    if isinstance(params, dict) and isinstance(params.get("input"), str) and params["input"]:
        return params["input"]
    inputs = attrs.get("inputs")
    if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict):
        name = inputs[0].get("name")
        return name if isinstance(name, str) and name else None
    return None


def from_dataset_file(info):
    """{"name", "source", "shape", "counts"} from a loaded image-dataset file (load.load_dataset)."""
    a = info["attrs"]
    recorded, fmt = a.get("source_dataset"), a.get("source_format")
    where = source_input(a)
    if recorded == "image-folder" or fmt == "folder":
        name = f"the image folder {folder_words(where)}" if where else "an image folder"
    elif recorded in NAMES:
        name = NAMES[recorded]
        if recorded == "cifar-100" and a.get("label_set") in ("fine", "coarse"):
            name += " (" + ("20 coarse classes" if a["label_set"] == "coarse" else "100 fine classes") + ")"
    elif fmt == "idx" or recorded == "idx":
        name = f"the IDX files in {folder_words(where)}" if where else "IDX files"
    else:
        name = os.path.splitext(os.path.basename(info["path"]))[0]
    source = None
    if where:
        words = FORMAT_WORDS.get(fmt)
        source = where + (f" ({words})" if words and fmt != "folder" else "")
    return {"name": name, "source": source, "file": info["path"], "shape": info.get("shape"),
            "counts": info.get("counts"), "classes": info.get("classes")}


def guessed(path, class_names):
    """When the dataset file cannot be read: the pipeline's file name, else the class names."""
    stem = os.path.splitext(os.path.basename(path))[0] if path else ""
    if stem in FILE_STEMS:
        name = FILE_STEMS[stem]
    elif stem.startswith("folder-") and len(stem) > len("folder-"):
        name = f"the image folder {stem[len('folder-'):]}/"
    elif class_names == DEFAULT_CLASS_NAMES:
        name = "CIFAR-10"
    elif class_names == FASHION_MNIST_CLASS_NAMES:
        name = "Fashion-MNIST"
    elif stem:
        name = stem
    else:
        return None
    return {"name": name, "source": None, "file": path, "shape": None, "counts": None, "classes": None}


def title_name(described):
    """The dataset as a title starts: "Fashion-MNIST", "Image folder photos/"."""
    name = described["name"]
    for article in ("the ", "an "):
        if name.startswith(article):
            name = name[len(article):]
            return name[:1].upper() + name[1:]
    return name


def header_line(described):
    """One line under the title: what the dataset is, its size, and where it came from."""
    bits = [described["name"]]
    counts, shape = described.get("counts"), described.get("shape")
    if counts:
        bits.append(" + ".join(f"{n:,} {split}" for split, n in counts.items()) + " images")
    if shape:
        bits.append("×".join(str(v) for v in shape))
    if described.get("classes"):
        bits.append(f"{described['classes']} classes")
    line = ", ".join(bits)
    if described.get("source"):
        line += f", from {described['source']}"
    elif described.get("file"):
        line += f" (the dataset file {described['file']} is not here: named from its file name or class names)"
    return line
