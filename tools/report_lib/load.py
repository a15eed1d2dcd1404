"""Reading and checking a run folder's HDF5 files (docs/FORMATS.md). Every file is read in
a forked child under a memory and time limit (read_in_child, read_all); what comes back is plain
numbers, strings and numpy arrays."""
import codecs
import json
import math
import os
import resource
import signal
import stat
import zlib

from . import parallel
from .common import (DEFAULT_CLASS_NAMES, MAX_FORMAT_VERSION, SEED_ENCODER_CHANNELS, SEED_INPUT_SHAPE,
                     ReportError)


def _latin1_byte(err):
    """The first byte that is not part of a valid UTF-8 sequence, read as Latin-1; decoding
    goes on at the next byte (as cae::utf8_or_latin1)."""
    return chr(err.object[err.start]), err.start + 1


codecs.register_error("cae-latin1", _latin1_byte)


def utf8_or_latin1(raw):
    """A name's bytes as text, by the toolkit's rule (common/class_names.h): valid UTF-8
    sequences kept, every other byte b becomes U+00b (older files hold raw Latin-1 names).
    A str from h5py carries such bytes as surrogate escapes; they are put back first."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "cae-latin1")


MAX_CLASS_NAME_BYTES = 255  # cae::kMaxClassNameBytes


def _raw(item):
    """An attribute's string as its bytes (h5py gives str with surrogate escapes for bytes that are not UTF-8)."""
    return item.encode("utf-8", "surrogateescape") if isinstance(item, str) else item


def _as_written(raw):
    """A name's bytes shown in a message: valid UTF-8 as text, any other byte as \\xNN."""
    return "'" + raw.decode("utf-8", "backslashreplace") + "'"


def checked_class_names(f, path):
    """The file's class_names attribute by the C++ readers' rule (common/class_names.cpp,
    checked_class_names): each name non-empty, without a NUL byte, at most 255 bytes once
    read by utf8_or_latin1, and no two the same after that; a scalar string is one name.
    → the names as text, or None when the file has no class_names; ReportError otherwise."""
    import numpy as np
    if "class_names" not in f.attrs:
        return None
    value = f.attrs["class_names"]
    items = value.tolist() if isinstance(value, np.ndarray) else value
    items = items if isinstance(items, list) else [items]
    if not all(isinstance(v, (bytes, str)) for v in items):
        raise ReportError(path, "attribute class_names is not a string")
    seen, out = {}, []
    for c, item in enumerate(items):
        raw = _raw(item)
        if not raw:
            raise ReportError(path, f"class {c} has an empty name")
        if b"\0" in raw:
            raise ReportError(path, f"class {c} ({_as_written(raw)}): a class name may not hold a NUL byte")
        name = utf8_or_latin1(raw)
        size = len(name.encode("utf-8"))
        if size > MAX_CLASS_NAME_BYTES:
            raise ReportError(path, f"class {c} ({_as_written(raw[:32] + b'...')}): a class name is at most "
                                    f"{MAX_CLASS_NAME_BYTES} bytes of UTF-8, this one {size}")
        if name in seen:
            first = seen[name]
            before = _raw(items[first])
            same = "" if before == raw else ", the same name once bytes that are not UTF-8 are read as Latin-1"
            raise ReportError(path, f"class {first} ({_as_written(before)}) and class {c} "
                                    f"({_as_written(raw)}) are one class name{same} (class names must be distinct)")
        seen[name] = c
        out.append(name)
    return out


def plain(value):
    """HDF5 attribute → plain Python (str, int, float, list); text by utf8_or_latin1."""
    import numpy as np
    if isinstance(value, (bytes, str)):
        return utf8_or_latin1(value)
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()] if value.dtype.kind in "OSU" else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def regular_file(path):
    """Refuses (ReportError) what the toolkit's readers refuse before opening: a missing
    path, a folder, anything but a regular file (a FIFO would block the open forever, a
    device never end). Only stat: nothing is opened. → the file's size in bytes."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ReportError(path, "no such file") from None
    except OSError as e:
        raise ReportError(path, f"cannot open: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ReportError(path, "is a folder, not an HDF5 file")
    if not stat.S_ISREG(st.st_mode):
        raise ReportError(path, "is not a regular file (a FIFO, socket or device?), expected an HDF5 file")
    return st.st_size


OWN_DATA = "toolkit files must hold their own data"


def foreign_storage(f):
    """What keeps data outside the file, as common/hdf5_probe.cpp's foreign_storage: an
    external or user-defined link, a virtual dataset, a dataset with external storage.
    Checked before any object is opened by its path (HDF5 would follow an external link).
    Soft links are paths inside the file, checked where they point. → the problem or None."""
    import h5py

    def check(name, info):
        where = "/" + utf8_or_latin1(name)
        if info.type == h5py.h5l.TYPE_SOFT:
            return None
        if info.type == h5py.h5l.TYPE_EXTERNAL:
            try:
                link = f.get(name, getlink=True)
                target = f"{utf8_or_latin1(link.filename)}:{utf8_or_latin1(link.path)}"
            except (OSError, KeyError, ValueError, UnicodeError):
                target = "another file"
            return f"{where} is an external link to {target}; {OWN_DATA}"
        if info.type != h5py.h5l.TYPE_HARD:
            return f"{where} is a user-defined link; {OWN_DATA}"
        try:
            oid = h5py.h5o.open(f.id, name)
        except (OSError, KeyError, ValueError):
            return None  # unreadable: reading it names the problem
        if not isinstance(oid, h5py.h5d.DatasetID):
            return None
        dcpl = oid.get_create_plist()
        if dcpl.get_layout() == h5py.h5d.VIRTUAL:
            return f"dataset {where} is a virtual dataset (its data is in other files); {OWN_DATA}"
        if dcpl.get_external_count() > 0:
            which = utf8_or_latin1(dcpl.get_external(0)[0])
            return f"dataset {where} keeps its data in an external file ({which}); {OWN_DATA}"
        return None
    try:
        return f.id.links.visit(check, info=True)
    except (OSError, KeyError, ValueError, RuntimeError):
        return "its link table cannot be read"


def open_hdf5(path):
    """The file opened read-only, or ReportError naming what it is instead: not a regular
    file, not HDF5, or keeping data in other files (foreign_storage)."""
    import h5py
    regular_file(path)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        reason = str(e).split("(")[0].strip().rstrip(",") or "unreadable"
        raise ReportError(path, f"not a readable HDF5 file ({reason})") from None
    problem = foreign_storage(f)
    if problem:
        f.close()
        raise ReportError(path, problem)
    return f


NEVER_WRITTEN = "but not all of its data was ever written (truncated or corrupted file?)"


def storage_problem(ds, file_bytes):
    """Why dataset `ds`'s claimed shape is not backed by data in the file, or None when it is
    (common/hdf5_io.cpp's storage_problem): a reader sizes arrays from the shape, so a few-KB
    file must not claim gigabytes. Contiguous: its block is as large as the data and inside
    the file; chunked: every chunk exists, and deflate shrinks no more than ~1100:1."""
    import h5py
    dsid = ds.id
    points = 1
    for extent in ds.shape or ():
        points *= int(extent)
    if ds.shape is None or points == 0:
        return None
    need = points * dsid.get_type().get_size()
    stored = dsid.get_storage_size()
    if stored > file_bytes:
        return "claims more stored data than the whole file holds (corrupted file?)"
    dcpl = dsid.get_create_plist()
    layout = dcpl.get_layout()
    if layout == h5py.h5d.COMPACT:
        return None if need <= 65536 else NEVER_WRITTEN  # inside the object header (<64 KB)
    if layout == h5py.h5d.CONTIGUOUS:
        if stored < need:
            return NEVER_WRITTEN
        offset = dsid.get_offset()
        if offset is None or offset + need > file_bytes:
            return "claims data past the end of the file (truncated or corrupted file?)"
        return None
    if layout != h5py.h5d.CHUNKED:
        return "has a storage layout this toolkit does not read"
    expected = 1
    for extent, chunk in zip(ds.shape, ds.chunks):
        expected *= -(-int(extent) // int(chunk))
    if dsid.get_num_chunks() < expected:
        return NEVER_WRITTEN
    if stored * (1100 if dcpl.get_nfilters() > 0 else 1) < need:
        return NEVER_WRITTEN
    return None


def backed(path, name, obj):
    """obj (the dataset `name` of the file at `path`), refused unless its shape is backed by stored data."""
    problem = storage_problem(obj, regular_file(path))
    if problem:
        raise ReportError(path, f"/{name} has shape [{','.join(str(v) for v in obj.shape)}] {problem}")
    return obj


def open_checked(path, fmt, allow_plain=False):
    """The file, checked to be `fmt`; allow_plain: a file without a format attribute too (a
    plain features file, docs/FORMATS.md)."""
    f = open_hdf5(path)
    got = plain(f.attrs.get("format", None))
    if got is None and allow_plain:
        return f
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
    backed(path, name, obj)
    if shape is not None:
        if len(obj.shape) != len(shape) or any(s is not None and s != g for s, g in zip(shape, obj.shape)):
            want = "[" + ",".join("N" if s is None else str(s) for s in shape) + "]"
            raise ReportError(path, f"/{name} has shape {list(obj.shape)}, expected {want}")
    data = obj[()]
    problem = checksum_problem(obj, data)
    if problem:
        raise ReportError(path, f"/{name} {problem}")
    return data


def checksum_problem(ds, data):
    """Whether `data`, the whole of dataset `ds` as read, matches the block checksums the
    toolkit's writer stores with it (common/hdf5_checksum.h: attribute crc32, the CRC-32 of
    each block of crc32_rows rows as stored); None when it does or there are none (h5py's
    files, older ones). Features are read in pieces instead (scan_rows)."""
    import numpy as np
    if data.ndim < 1 or data.dtype.kind == "O":
        return None
    n = len(data)
    want, br = block_checksums(ds, n)
    if want is False:
        return "has a damaged checksum attribute (crc32, crc32_rows)"
    if not want:
        return None
    stored = np.ascontiguousarray(data).view(np.uint8).reshape(n, -1) if n else None
    for b, crc in enumerate(want):
        if zlib.crc32(stored[b * br:(b + 1) * br]) != crc:
            return mismatch(b * br, min(n, (b + 1) * br) - 1)
    return None


def check_blocks(ds, path, name, rows):
    """The checksum blocks of dataset `ds` (`name` in the file at `path`) that hold the given
    row numbers, read and checked as Hdf5Reader checks the blocks a read touches; ReportError
    on a mismatch. Nothing to check without the attributes."""
    import numpy as np
    n = ds.shape[0]
    want, br = block_checksums(ds, n)
    if want is False:
        raise ReportError(path, f"/{name} has a damaged checksum attribute (crc32, crc32_rows)")
    for b in sorted({int(r) // br for r in rows}) if want else ():
        block = np.ascontiguousarray(ds[b * br:min(n, (b + 1) * br)])
        if zlib.crc32(block) != want[b]:
            raise ReportError(path, f"/{name} {mismatch(b * br, min(n, (b + 1) * br) - 1)}")


def mismatch(first, last):
    return (f"rows {first} to {last} do not match their checksum (the file changed after it was written: "
            "damaged on disk or in a copy)")


def dataset_shape(f, name, path):
    """The shape of dataset `name` (backed by stored data), or None when it is not a dataset."""
    import h5py
    obj = f.get(name)
    return tuple(backed(path, name, obj).shape) if isinstance(obj, h5py.Dataset) else None


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


def read_architecture(f, path, attrs):
    """The model's input shape and encoder channels from the root attributes
    input_shape [C,H,W] and encoder_channels [c1..ck]; a file with neither is the seed model."""
    has_shape, has_channels = "input_shape" in f.attrs, "encoder_channels" in f.attrs
    if not has_shape and not has_channels:
        return {"input_shape": list(SEED_INPUT_SHAPE), "encoder_channels": list(SEED_ENCODER_CHANNELS),
                "assumed": True}
    if has_shape != has_channels:
        raise ReportError(path, "has " + ("input_shape" if has_shape else "encoder_channels") + " but not "
                                + ("encoder_channels" if has_shape else "input_shape") + " (root attributes)")

    def positive_ints(key):
        v = attrs.get(key)
        v = v if isinstance(v, list) else [v]
        if not v or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
            raise ReportError(path, f"root attribute {key} must be a list of positive integers, not {v}")
        return v
    shape, channels = positive_ints("input_shape"), positive_ints("encoder_channels")
    if len(shape) != 3:
        raise ReportError(path, f"root attribute input_shape must be [C,H,W], not {shape}")
    step = 1 << len(channels)
    if shape[1] % step or shape[2] % step:
        raise ReportError(path, f"input_shape {shape}: H and W must be divisible by 2^{len(channels)} "
                                f"(one 2×2 pool per encoder block)")
    return {"input_shape": shape, "encoder_channels": channels, "assumed": False}


def load_model(path):
    import numpy as np
    with open_checked(path, "ae-model") as f:
        m = {"attrs": common_attrs(f), "notes": []}
        m["architecture"] = read_architecture(f, path, m["attrs"])
        hist = {}
        for key in ("train_loss", "val_loss", "test_loss", "epoch_seconds", "lr"):
            v = read_dataset(f, path, f"history/{key}", "fi", shape=(None,))
            if v is not None:
                hist[key] = v.astype(np.float64)
        lengths = {len(v) for v in hist.values()}
        if len(lengths) > 1:
            raise ReportError(path, "the /history arrays have different lengths "
                                    + str({k: len(v) for k, v in hist.items()}))
        m["history"] = hist
        chw = tuple(m["architecture"]["input_shape"])
        images = read_dataset(f, path, "samples/images", "u", shape=(None,) + chw)
        recon = read_dataset(f, path, "samples/reconstructions", "f", shape=(None,) + chw)
        labels = read_dataset(f, path, "samples/labels", "ui", shape=(None,))
        m["samples"] = None
        if images is not None and recon is not None:
            if len(images) != len(recon) or (labels is not None and len(labels) != len(images)):
                raise ReportError(path, f"/samples has {len(images)} images but {len(recon)} "
                                        f"reconstructions and {'no' if labels is None else len(labels)} labels")
            if len(images) and chw[0] not in (1, 3):
                m["notes"].append(f"{os.path.basename(path)}: samples have {chw[0]} channels; "
                                  "only grayscale (1) or colour (3) images are drawn: no reconstruction grid")
            elif len(images):
                m["samples"] = {"images": images, "recon": recon, "labels": labels}
        if m["samples"] is None and not any("channels" in n for n in m["notes"]):
            m["notes"].append(f"{os.path.basename(path)} has no /samples: no reconstruction grid")
        if not hist:
            m["notes"].append(f"{os.path.basename(path)} has no /history: no loss curves")
        return m


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_hdf5(path):
    """True when the file starts with HDF5's signature (as the toolkit writes them), False
    when it does not (libsvm text, docs/FORMATS.md), None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE
    except OSError:
        return None


def open_features(path):
    """The features file, checked: HDF5, an ae-features or plain features file."""
    if os.path.isfile(path) and is_hdf5(path) is False:
        raise ReportError(path, "is not HDF5 (libsvm text?): the report reads HDF5 features only; leave --features "
                                "out, svm.h5 and eval.h5 hold the rest")
    return open_checked(path, "ae-features", allow_plain=True)


def features_splits(f, path):
    """{split: [N, D]} of the file's /train/features and /test/features, checked as the
    toolkit's features reader checks them (kernels/ae/features_reader.cpp): D as
    latent_shape says, labels [N] of class indices."""
    latent = plain(f.attrs["latent_shape"]) if "latent_shape" in f.attrs else None
    if latent is not None:
        latent = latent if isinstance(latent, list) else [latent]
        if len(latent) != 3 or not all(isinstance(e, int) and not isinstance(e, bool) and 0 < e <= 1 << 20
                                        for e in latent):
            raise ReportError(path, "attribute latent_shape must be three positive extents [c,h,w]")
    names = checked_class_names(f, path)
    splits = {}
    for split in ("train", "test"):
        shape = dataset_shape(f, f"{split}/features", path)
        if shape is None:
            continue
        if len(shape) != 2:
            raise ReportError(path, f"/{split}/features has shape {list(shape)}, expected [N,D]")
        if f[f"{split}/features"].dtype.kind != "f":
            raise ReportError(path, f"/{split}/features has dtype {f[f'{split}/features'].dtype}, expected float")
        if latent is not None and shape[1] != latent[0] * latent[1] * latent[2]:
            raise ReportError(path, f"/{split}/features has {shape[1]} features per row, but latent_shape "
                                    f"[{','.join(map(str, latent))}] holds {latent[0] * latent[1] * latent[2]}")
        check_labels(f, path, split, shape[0], len(names) if names else None, plain="format" not in f.attrs)
        splits[split] = shape
    return splits


MAX_UNNAMED_CLASSES = 1 << 16  # features_reader.cpp's kMaxUnnamedClasses


def check_labels(f, path, split, rows, n_classes, plain=False):
    """/<split>/labels, when present: [rows] integers, each a class 0..n_classes-1 (when the
    file names no classes: any non-negative one, below MAX_UNNAMED_CLASSES in a plain file,
    whose classes are 0..its largest label: a label's value would size the class table)."""
    import numpy as np
    labels = read_dataset(f, path, f"{split}/labels", "iu", shape=(rows,))
    if labels is None or not len(labels):
        return
    bad = np.flatnonzero(labels < 0)
    if len(bad):
        raise ReportError(path, f"/{split}/labels[{bad[0]}] = {labels[bad[0]]} is negative "
                                "(labels are class indices 0, 1, ...)")
    big = np.flatnonzero(labels >= MAX_UNNAMED_CLASSES) if plain and not n_classes else ()
    if len(big):
        raise ReportError(path, f"/{split}/labels holds {labels[big[0]]}: without a class_names attribute the classes "
                                f"are 0..the largest label, at most {MAX_UNNAMED_CLASSES} of them (give class_names)")
    bad = np.flatnonzero(labels >= n_classes) if n_classes else ()
    if len(bad):
        raise ReportError(path, f"/{split}/labels[{bad[0]}] = {labels[bad[0]]} is not a class 0..{n_classes - 1}")


def viewed_split(splits):
    """The split the 2-D view shows: the test features, else the training ones, else None."""
    return "test" if "test" in splits else "train" if "train" in splits else None


def load_features(path):
    """Shapes and attributes (the 2-D view is a reader of its own: load_features_view; the
    rows of the other splits are checked by load_features_rows)."""
    with open_features(path) as f:
        out = {"attrs": common_attrs(f), "splits": features_splits(f, path), "notes": []}
        names = checked_class_names(f, path)
        if names is not None:
            out["attrs"]["class_names"] = names
        return out


def load_features_rows(path):
    """Every row of the splits the 2-D view does not show, read and checked (scan_rows) as
    the toolkit's features reader checks what it reads; the view checks its own split's.
    A reader of its own, collected last, so that the figures are drawn meanwhile. → None."""
    with open_features(path) as f:
        splits = features_splits(f, path)
        for split in splits:
            if split != viewed_split(splits):
                scan_rows(f, path, f"{split}/features")


def load_features_view(path):
    """The 2-D view of the features (features_pca), read apart from the rest of the file
    because it takes longest: the report draws its other figures meanwhile.
    → {"pca": features_pca's answer, "notes": [...]}."""
    with open_features(path) as f:
        out = {"pca": None, "notes": []}
        split = viewed_split(features_splits(f, path))
        if split is not None:
            out["pca"] = features_pca(f, path, split, out["notes"])
        return out


PCA_ROWS = 2000       # rows sampled for the 2-D view: enough to see the classes, ~65 MB at 8,192-d
PCA_MAX_DIM = 1 << 16  # wider rows are not a features file of this toolkit: no 2-D view
PCA_SEED = 20240214


def features_pca(f, path, split, notes):
    """The 2-D view of the features: a seeded random sample of at most PCA_ROWS rows of
    /<split>/features (taken while every row is checked: scan_rows), centred and projected
    on its first two principal components. → {"xy" [n,2], "labels" [n] or None,
    "split", "rows" (N in the file), "explained" (share of the variance per component)},
    or None (with a note) when there is nothing to draw."""
    import numpy as np
    name = os.path.basename(path)
    ds = backed(path, f"{split}/features", f[f"{split}/features"])
    n_rows, dim = ds.shape
    if ds.dtype.kind != "f":
        raise ReportError(path, f"/{split}/features has dtype {ds.dtype}, expected float")
    if n_rows < 3 or dim < 2 or dim > PCA_MAX_DIM:
        scan_rows(f, path, f"{split}/features")  # nothing drawn, yet read by no other reader
        notes.append(f"{name}: /{split}/features is {n_rows} × {dim}: no 2-D view of the features")
        return None
    rng = np.random.default_rng(PCA_SEED)
    rows = np.sort(rng.choice(n_rows, size=min(n_rows, PCA_ROWS), replace=False))
    # Every row is read and checked, the sample taken on the way (one pass over the file).
    x = scan_rows(f, path, f"{split}/features", sample=rows).astype(np.float32)  # float32 halves the work
    labels = read_dataset(f, path, f"{split}/labels", "iu", shape=(n_rows,))
    labels = labels[rows].astype(np.int64) if labels is not None else None
    x -= x.mean(axis=0)
    total = float(np.square(x, dtype=np.float64).sum())
    if total <= 0:
        notes.append(f"{name}: the sampled /{split}/features rows are all equal: no 2-D view")
        return None
    components, strength = top_components(x, 2, rng)
    # A component's sign is arbitrary; making its largest loading positive keeps the picture
    # of one file the same from run to run.
    largest = components[np.abs(components).argmax(axis=0), np.arange(components.shape[1])]
    xy = x @ (components * np.where(largest < 0, -1.0, 1.0))
    return {"xy": xy.astype(np.float32), "labels": labels, "split": split, "rows": int(n_rows),
            "explained": [float(s * s / total) for s in strength]}


SCAN_BYTES = 16 << 20    # what scan_rows holds at once: a few ~1 MiB checksum blocks
SCRATCH_BYTES = 256 << 10  # its finite test's piece: fits a core's L2 cache

# The exponent bits of IEEE floats: a value is NaN or infinite when they are all set.
_EXPONENT = {2: (0x7FFF, 0x7C00), 4: (0x7FFFFFFF, 0x7F800000)}


def scan_rows(f, path, name, sample=None):
    """Reads every row of the float dataset `name` [N, D] in pieces of whole checksum blocks
    (at most SCAN_BYTES, so memory stays bounded), as the toolkit's features reader checks
    what it reads (features_reader.cpp): each block against its CRC-32 when the file has the
    attributes (checksum_problem's rule), then every value finite — a float64 too large for
    float32, which the toolkit computes in, counts as infinite. Each piece restarts the read
    alarm: a large file is slow, not damaged. sample: sorted row numbers → those rows."""
    import numpy as np
    ds = backed(path, name, f[name])
    n, dim = ds.shape
    dtype = ds.dtype
    row_bytes = max(1, dim * dtype.itemsize)
    want, br = block_checksums(ds, n)
    if want is False:
        raise ReportError(path, f"/{name} has a damaged checksum attribute (crc32, crc32_rows)")
    # Checked a block at a time (a checksum block, else ~1 MiB of rows), while it is in cache.
    unit = br or max(1, (1 << 20) // row_bytes)
    step = max(unit, SCAN_BYTES // row_bytes // unit * unit)
    wide = dtype.itemsize if dtype.itemsize in _EXPONENT else 1  # only float16/32 use it (first_nonfinite)
    scratch = np.empty(SCRATCH_BYTES // wide, dtype=f"u{wide}")
    picked = np.empty((0 if sample is None else len(sample), dim), dtype=dtype)
    taken = 0
    if n and dim:
        for r0, piece in stored_pieces(ds, path, step):
            rows = len(piece)
            for b in range(0, rows, unit):
                block, first = piece[b:b + unit], r0 + b
                if br and zlib.crc32(block) != want[first // br]:
                    raise ReportError(path, f"/{name} {mismatch(first, min(n, first + br) - 1)}")
                bad = first_nonfinite(block, scratch)
                if bad is not None:
                    row, feature = divmod(bad, dim)
                    value = block.reshape(-1)[bad]
                    raise ReportError(path, f"/{name} row {first + row} feature {feature} is "
                                            f"{'NaN' if np.isnan(value) else 'infinite'} (features must be finite)")
            if sample is not None:
                end = np.searchsorted(sample, r0 + rows)
                picked[taken:end] = piece[sample[taken:end] - r0]
                taken = end
            signal.alarm(READ_SECONDS)
    return picked if sample is not None else None


def block_checksums(ds, n):
    """(the stored CRC-32 of each block, rows per block) of dataset `ds` of n rows; (None, 0)
    without the attributes; (False, 0) when they are damaged."""
    import numpy as np
    if "crc32" not in ds.attrs or "crc32_rows" not in ds.attrs:
        return None, 0
    want, block_rows = np.asarray(ds.attrs["crc32"]), np.asarray(ds.attrs["crc32_rows"])
    br = int(block_rows.flat[0]) if block_rows.dtype.kind in "iu" and block_rows.size == 1 else 0
    if br < 1 or want.dtype.kind not in "iu" or want.size != -(-n // br):
        return False, 0
    return [v & 0xFFFFFFFF for v in want.ravel().tolist()], br


def first_nonfinite(x, scratch):
    """The flat index of the first NaN or infinity in the contiguous float array x, else None.
    Native float16 and float32 are tested on their exponent bits, integer work in pieces of
    `scratch` (a small buffer of unsigned ints as wide as x's, which stays in cache); float64
    is converted, as the toolkit reads it into float32 (a value too large for it: infinite)."""
    import numpy as np
    bits = _EXPONENT.get(x.dtype.itemsize) if x.dtype.isnative else None
    if bits is None:
        with np.errstate(over="ignore"):
            bad = np.flatnonzero(~np.isfinite(x.astype(np.float32)))
        return int(bad[0]) if len(bad) else None
    flat = x.reshape(-1)
    u = flat.view(scratch.dtype)
    for k in range(0, u.size, scratch.size):
        part = scratch[:min(scratch.size, u.size - k)]
        np.bitwise_and(u[k:k + scratch.size], bits[0], out=part)
        if part.max() >= bits[1]:
            return k + int(np.flatnonzero(~np.isfinite(flat[k:k + scratch.size]))[0])
    return None


def stored_pieces(ds, path, step):
    """(first row, rows [k, D]) of dataset `ds`, `step` rows at a time. Rows stored as one
    contiguous block (how ae-encode writes features) are mapped read-only a window at a time,
    not copied through HDF5 (no system time, and no memory but the window's; a window is
    unmapped once its rows are dropped); chunked or filtered data, or a block the file is too
    short to hold, is read by HDF5 (which names what is wrong) into one reused buffer."""
    import mmap
    import numpy as np
    n, dim = ds.shape
    row_bytes = dim * ds.dtype.itemsize
    offset = ds.id.get_offset() if ds.chunks is None else None
    if offset is not None:
        with open(path, "rb") as raw:
            if os.fstat(raw.fileno()).st_size >= offset + n * row_bytes:
                for r0 in range(0, n, step):
                    rows = min(step, n - r0)
                    start = offset + r0 * row_bytes
                    aligned = start - start % mmap.ALLOCATIONGRANULARITY
                    window = mmap.mmap(raw.fileno(), start - aligned + rows * row_bytes, access=mmap.ACCESS_READ,
                                       offset=aligned)
                    yield r0, np.frombuffer(window, dtype=ds.dtype, count=rows * dim,
                                            offset=start - aligned).reshape(rows, dim)
                return
    buf = np.empty((min(step, n), dim), dtype=ds.dtype)
    for r0 in range(0, n, step):
        rows = min(step, n - r0)
        ds.read_direct(buf, np.s_[r0:r0 + rows], np.s_[0:rows])
        yield r0, buf[:rows]


def top_components(x, k, rng, oversample=10, power_iterations=4):
    """The first k right singular vectors of x [n, d] (columns of the returned [d, k]) and
    their singular values, by a randomized range finder (Halko, Martinsson & Tropp 2011):
    a few products with a [d, k + oversample] block instead of an SVD of all of x."""
    import numpy as np
    width = min(k + oversample, min(x.shape))
    q = x @ rng.standard_normal((x.shape[1], width), dtype=x.dtype if x.dtype == np.float32 else np.float64)
    for _ in range(power_iterations):
        q, _ = np.linalg.qr(q)
        q, _ = np.linalg.qr(x @ (x.T @ q))
    q, _ = np.linalg.qr(q)
    _, s, vt = np.linalg.svd(q.T @ x, full_matrices=False)
    return vt[:k].T, s[:k]


def features_origin(loaded):
    """What made the run's features: "autoencoder" (ae-encode), "plain" (an HDF5 file without
    a format attribute), "libsvm" (libsvm text), or None when the files do not say. Read from
    the features file when the report has it, else from what svm.h5 recorded: the encoder's
    sha256 (only an autoencoder's features have one), else the features file it names."""
    if "features" in loaded:
        return "autoencoder" if loaded["features"]["attrs"].get("format") == "ae-features" else "plain"
    if "svm" not in loaded:
        return None
    attrs = loaded["svm"]["attrs"]
    if attrs.get("encoder_sha256"):
        return "autoencoder"
    params = attrs.get("params") if isinstance(attrs.get("params"), dict) else {}
    name = params.get("features")
    if not isinstance(name, str) or not name:
        return None
    if os.path.isfile(name):
        hdf5 = is_hdf5(name)
        if hdf5 is False:
            return "libsvm"
        if hdf5:
            try:
                recorded = read_in_child("features", name)
            except ReportError:
                return None
            return "autoencoder" if recorded["attrs"].get("format") == "ae-features" else "plain"
        return None
    # Moved away: its name is all there is.
    extension = os.path.splitext(name)[1].lower()
    return "libsvm" if extension and extension not in (".h5", ".hdf5", ".hdf") else None


def load_svm(path):
    with open_checked(path, "svm-model") as f:
        s = {"attrs": common_attrs(f), "notes": []}
        checked_class_names(f, path)  # as svm-eval's model reader (kernels/svm/model_file.cpp)
        sv = dataset_shape(f, "svm/support_vectors", path)
        s["n_sv"] = sv[0] if sv else None
        # A nystroem model (svm-fit --approx) has landmarks where an SVM has support vectors.
        landmarks = dataset_shape(f, "approx/landmarks", path) if s["attrs"].get("kind") == "nystroem" else None
        s["landmarks"] = landmarks[0] if landmarks else None
        n_support = read_dataset(f, path, "svm/n_support", "iu", shape=(None,))
        s["n_support"] = n_support.tolist() if n_support is not None else None
        s["grid"] = load_model_selection(f, path, s["attrs"]) if "model_selection" in f else None
        return s


def load_model_selection(f, path, attrs):
    """svm-fit --cv's table (docs/FORMATS.md): cv_accuracy [len(C), len(gamma)] with the C
    values, the gamma specs (a string attribute of the group) and the best pair."""
    import numpy as np
    C = read_dataset(f, path, "model_selection/C", "f", shape=(None,), required=True)
    table = read_dataset(f, path, "model_selection/cv_accuracy", "f", shape=(len(C), None), required=True)
    gamma = plain(f["model_selection"].attrs.get("gamma"))
    gamma = [gamma] if isinstance(gamma, str) else gamma
    if not isinstance(gamma, list) or len(gamma) != table.shape[1] or not gamma:
        raise ReportError(path, f"/model_selection has {table.shape[1]} columns in cv_accuracy but "
                                f"its gamma attribute is {gamma!r}")
    if len(C) == 0 or not np.all((table >= 0) & (table <= 1)):
        raise ReportError(path, "/model_selection/cv_accuracy must hold accuracies in [0, 1]")
    best = np.unravel_index(int(np.argmax(table)), table.shape)  # the first maximum in C-major order
    if number(attrs, "best_C") is not None and attrs.get("best_gamma") in gamma and attrs["best_C"] in C.tolist():
        best = (C.tolist().index(attrs["best_C"]), gamma.index(attrs["best_gamma"]))
    resolved = read_dataset(f, path, "model_selection/gamma_resolved", "f", shape=(len(gamma), None))
    # svm-fit --cv-scoring: what chose the pair (files without it chose by accuracy).
    scoring = plain(f["model_selection"].attrs.get("scoring", "accuracy"))
    score = read_dataset(f, path, "model_selection/cv_score", "f", shape=table.shape)
    best_score = float(score[best]) if score is not None and scoring != "accuracy" else None
    return {"C": C.astype(np.float64), "gamma": [str(g) for g in gamma], "table": table.astype(np.float64),
            "scoring": str(scoring), "best_score": best_score,
            "score_table": score.astype(np.float64) if best_score is not None else None,
            "best": (int(best[0]), int(best[1])), "folds": number(attrs, "cv_folds"),
            "gamma_mean": resolved.mean(axis=1) if resolved is not None and resolved.size else None,
            "seconds": number({k: plain(v) for k, v in f["model_selection"].attrs.items()}, "seconds")}


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
        names = checked_class_names(f, path)
        if not isinstance(names, list) or len(names) != k:
            if names is not None:
                e["notes"].append(f"{os.path.basename(path)}: class_names has "
                                  f"{len(names) if isinstance(names, list) else 'no list of'} names for {k} classes")
            names = DEFAULT_CLASS_NAMES if k == 10 else [f"class {i}" for i in range(k)]
        row_totals = confusion.sum(axis=1)
        computed = np.divide(np.diag(confusion), row_totals, out=np.zeros(k), where=row_totals > 0)
        e.update(confusion=confusion.astype(np.int64), k=k, class_names=[str(n) for n in names],
                 n=total, per_class=computed, accuracy=float(np.trace(confusion) / total))
        e["calibration"] = load_calibration(f, path, e, labels)
        e["metrics"] = load_metrics(f, path, k)
        stored = number(e["attrs"], "accuracy")
        if stored is not None and abs(stored - e["accuracy"]) > 1e-6:
            e["notes"].append(f"{os.path.basename(path)}: stored accuracy {stored:.4f} differs from "
                              f"the confusion matrix's {e['accuracy']:.4f}; the report uses the matrix")
        return e


def load_metrics(f, path, k):
    """svm-eval's per-class precision/recall/F1/support (/metrics, kernels/svm/metrics.h) and
    its macro-F1, balanced accuracy and top-k, or None for an eval file without them."""
    per = {name: read_dataset(f, path, f"metrics/{name}", "f" if name != "support" else "iu", shape=(k,))
           for name in ("precision", "recall", "f1", "support")}
    if any(v is None for v in per.values()):
        return None
    out = {name: v.tolist() for name, v in per.items()}
    for key in ("macro_f1", "balanced_accuracy", "macro_precision", "macro_recall"):
        out[key] = number(common_attrs(f), key)
    ks, accs = plain(f.attrs.get("top_k", [])), plain(f.attrs.get("top_k_accuracy", []))
    out["top_k"] = list(zip(ks, accs)) if isinstance(ks, list) and isinstance(accs, list) else []
    return out


RELIABILITY_BINS = 10


def load_calibration(f, path, e, labels):
    """svm-eval's /probabilities [N, k] (a model fitted with svm-fit --probability), reduced to
    what the report draws: the reliability diagram's bins of the top-class probability (mean
    confidence, accuracy and count per bin), the expected calibration error and the log-loss.
    None when the file has no probabilities."""
    import numpy as np
    if "probabilities" not in f:
        return None
    if labels is None:
        raise ReportError(path, "has /probabilities but no /labels to score them against")
    P = read_dataset(f, path, "probabilities", "f", shape=(len(labels), e["k"]))
    if not np.isfinite(P).all() or (P < 0).any() or (P > 1).any():
        raise ReportError(path, "/probabilities holds values outside [0, 1]")
    sums = P.sum(axis=1)
    if len(P) and np.abs(sums - 1).max() > 1e-6:
        raise ReportError(path, f"/probabilities rows must sum to 1 (one sums to {sums[np.abs(sums - 1).argmax()]:.6g})")
    top, pred = P.max(axis=1), P.argmax(axis=1)
    right = pred == labels
    # Bin b holds confidences in [b/10, (b+1)/10); a confidence of exactly 1 goes to the last.
    which = np.minimum((top * RELIABILITY_BINS).astype(int), RELIABILITY_BINS - 1)
    count = np.bincount(which, minlength=RELIABILITY_BINS)
    conf = np.bincount(which, weights=top, minlength=RELIABILITY_BINS)
    hits = np.bincount(which, weights=right.astype(np.float64), minlength=RELIABILITY_BINS)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf, acc = conf / count, hits / count
    n = len(labels)
    ece = float(np.nansum(count / n * np.abs(acc - conf))) if n else float("nan")
    computed = float(-np.mean(np.log(np.clip(P[np.arange(n), labels], 1e-15, 1 - 1e-15)))) if n else float("nan")
    stored = number(e["attrs"], "log_loss")
    if stored is not None and abs(stored - computed) > 1e-6:
        e["notes"].append(f"{os.path.basename(path)}: stored log_loss {stored:.4f} differs from the "
                          f"probabilities' {computed:.4f}; the report uses the probabilities")
    return {"count": count.astype(np.int64), "confidence": conf, "accuracy": acc, "ece": ece,
            "log_loss": computed, "argmax_accuracy": float(right.mean()) if n else float("nan"),
            "tta": e["attrs"].get("tta")}


def load_dataset(path):
    """What the report names the dataset by: the image-dataset file's root attributes and
    the shapes of its splits (never the images themselves)."""
    with open_checked(path, "image-dataset") as f:
        out = {"path": path, "attrs": common_attrs(f), "counts": {}, "shape": None, "classes": None}
        for split in ("train", "test"):
            shape = dataset_shape(f, f"{split}/images", path)
            if shape is not None and len(shape) == 4:
                out["counts"][split] = int(shape[0])
                out["shape"] = [int(v) for v in shape[1:]]
        names = checked_class_names(f, path)  # as the dataset reader (common/dataset.cpp)
        if names is not None:
            out["attrs"]["class_names"] = names
        out["classes"] = len(names) if names else None
        return out


LOADERS = {"model": load_model, "features": load_features, "features_view": load_features_view,
           "features_rows": load_features_rows, "svm": load_svm,
           "eval": load_eval, "dataset": load_dataset}

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


def start_read(kind, path, **options):
    """Forks the child that reads one file; finish_read collects it. Several can be under
    way at once (the report starts all of a run folder's readers together)."""
    import h5py  # noqa: F401  (imported once, before the fork)

    def limits():  # in the child: memory beyond what it inherited, and time
        limit = data_bytes_now()
        if limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit + READ_EXTRA_MEMORY, limit + READ_EXTRA_MEMORY))
        signal.alarm(READ_SECONDS)

    def error_text(err):
        if isinstance(err, ReportError):
            return str(err)
        if isinstance(err, MemoryError):
            return f"{path}: damaged HDF5 file (reading it needs more than {READ_EXTRA_MEMORY >> 30} GB of memory)"
        return f"{path}: cannot read it: {err}"  # h5py's OSError/KeyError/ValueError on damaged files

    pid, rfd = parallel.fork_child(lambda: LOADERS[kind](path, **options), limits, error_text)
    return kind, path, pid, rfd


def finish_read(reader):
    kind, path, pid, rfd = reader
    status, payload = parallel.collect(pid, rfd)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGALRM:
            raise ReportError(path, f"damaged HDF5 file (reading its metadata took over {READ_SECONDS} s)")
        if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            raise KeyboardInterrupt(sig)
        raise ReportError(path, f"damaged HDF5 file (reading it crashed libhdf5: {signal.Signals(sig).name})")
    result = parallel.answer(status, payload)
    if result is None:
        raise ReportError(path, "cannot read it (the reader stopped without an answer)")
    state, value = result
    if state == "error":
        raise ReportError(path, value.split(": ", 1)[1] if value.startswith(path + ": ") else value)
    return value


def read_all(paths, meanwhile=None):
    """{kind: path} → ({kind: what its loader returned}, what meanwhile() returned): the files
    are read in parallel children while the parent runs meanwhile (the report imports
    matplotlib). The first failing file (in the order given) is the error; every child is reaped."""
    readers = [start_read(kind, path) for kind, path in paths.items()]
    loaded, failure, other = {}, None, None
    try:
        other = meanwhile() if meanwhile else None
        while readers:
            reader = readers.pop(0)
            try:
                loaded[reader[0]] = finish_read(reader)
            except ReportError as err:
                failure = failure or err
    except BaseException:  # interrupted: the readers not yet collected go too
        for _kind, _path, pid, rfd in readers:
            parallel.kill(pid)
            os.close(rfd)
        raise
    if failure is not None:
        raise failure
    return loaded, other


def read_in_child(kind, path, **options):
    return finish_read(start_read(kind, path, **options))
