"""FEMNIST from LEAF's JSON (Caldas et al. 2018; docs/architecture.md §3).

``{data_root}/femnist/data/train/*.json`` and ``{data_root}/femnist/data/test/*.json`` as ``preprocess.sh -t
sample`` leaves them: each file holds ``users``, ``num_samples`` and ``user_data`` {user: {``x``: 784 floats per
image, ``y``: class ids}}. LEAF writes ``x`` = grey level / 255 of NIST's black-on-white scans; stored as uint8
255·(1 − x) (bright ink on a black background, like MNIST, so 0 is the background for the domain perturbations and
the explanations' ``zeros`` substrate). 62 classes: digits 0–9, then A–Z, then a–z (LEAF's relabel_class; 004's
text says 47, the EMNIST-balanced count, but it cites LEAF's 62-class FEMNIST). Each image's writer is kept in the
dataset Parquet's optional ``writer`` column (docs/architecture.md §3), so a split may partition by writer; 004
App. F itself partitions FEMNIST with a Dirichlet over 400 clients (the ``dirichlet`` split generators).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import DataError
from .base import DATASETS, LoaderSettings, RawDataset, SourceFacts, concat_parts, declares_facts


FEMNIST_CLASSES = [str(d) for d in range(10)] + [chr(c) for c in range(ord("A"), ord("Z") + 1)] + \
    [chr(c) for c in range(ord("a"), ord("z") + 1)]


def read_leaf_json(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One LEAF file: (images uint8 (n, 1, 28, 28) as 255·(1 − x), labels, writer per image), users in file order."""
    import json

    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise DataError(f"{path}: corrupt or truncated LEAF JSON ({e.__class__.__name__})") from None
    if not isinstance(obj, dict) or not all(k in obj for k in ("users", "num_samples", "user_data")):
        raise DataError(f"{path}: not a LEAF file (expected keys users, num_samples, user_data)")
    images, labels, writers = [], [], []
    for user, count in zip(obj["users"], obj["num_samples"]):
        data = obj["user_data"].get(user) if isinstance(obj["user_data"], dict) else None
        if not isinstance(data, dict) or "x" not in data or "y" not in data:
            raise DataError(f"{path}: user_data[{user!r}] lacks 'x' or 'y'")
        try:
            x = np.asarray(data["x"], dtype=np.float64).reshape(len(data["x"]), -1)
        except (ValueError, TypeError):
            raise DataError(f"{path}: user_data[{user!r}].x is not a list of images of 784 floats") from None
        y = np.asarray(data["y"], dtype=np.int64)
        if x.shape[1:] != (784,) or len(y) != len(x) or len(x) != int(count):
            raise DataError(f"{path}: user {user!r} has x {x.shape}, {len(y)} labels and num_samples {count}; "
                            "expected num_samples images of 784 floats with one label each")
        if x.size and (not np.isfinite(x).all() or x.min() < 0 or x.max() > 1):
            raise DataError(f"{path}: user {user!r} has pixel values outside [0, 1]")
        images.append(np.rint(255.0 * (1.0 - x)).astype(np.uint8).reshape(-1, 1, 28, 28))
        labels.append(y)
        writers.append(np.full(len(y), str(user), dtype=object))
    if not images:
        return np.zeros((0, 1, 28, 28), np.uint8), np.zeros(0, np.int64), np.zeros(0, dtype=object)
    return np.concatenate(images), np.concatenate(labels), np.concatenate(writers)


def _read_leaf_folder(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    files = sorted(folder.glob("*.json"))
    parts = [read_leaf_json(f) for f in files]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))


@DATASETS.register("femnist")
def load_femnist(settings: LoaderSettings) -> RawDataset:
    """FEMNIST (LEAF, 62 classes, 28×28 grey) from LEAF's ``femnist/data/{train,test}/*.json``; writers kept.

    No download: LEAF builds the JSON from NIST SD-19 with its own ``preprocess.sh`` (module doc)."""
    root = settings.data_root / "femnist" / "data"
    missing = [part for part in ("train", "test") if not any((root / part).glob("*.json"))]
    if missing:
        raise DataError(f"femnist: expected LEAF JSON files in {root}/{{train,test}}/*.json (none in "
                        f"{', '.join(missing)}); run LEAF's data/femnist/preprocess.sh -t sample and copy its data/ folder")
    train, test = _read_leaf_folder(root / "train"), _read_leaf_folder(root / "test")
    for name, (_, y, _) in (("train", train), ("test", test)):
        if len(y) and (y.min() < 0 or y.max() >= len(FEMNIST_CLASSES)):
            raise DataError(f"femnist: {root / name} has labels outside 0..{len(FEMNIST_CLASSES) - 1}")
    raw = concat_parts(train[:2], test[:2], FEMNIST_CLASSES, f"LEAF FEMNIST JSON ({root})")
    return RawDataset(raw.images, raw.labels, raw.part, raw.classes, raw.source, np.concatenate([train[2], test[2]]))


@declares_facts("femnist")
def _femnist_facts(settings: LoaderSettings) -> SourceFacts:
    """No train count (LEAF's sampling decides it, in the JSON only) and no download (module doc)."""
    root = settings.data_root / "femnist" / "data"
    on_disk = all(any((root / part).glob("*.json")) for part in ("train", "test"))
    return SourceFacts(len(FEMNIST_CLASSES), None, on_disk, False, f"{root}/{{train,test}}/*.json")
