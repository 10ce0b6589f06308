"""CIFAR-10 and CIFAR-100, the python pickle versions torchvision downloads (docs/architecture.md §3):

* ``cifar10``: ``{data_root}/cifar-10-batches-py/`` with ``data_batch_1..5``, ``test_batch``, ``batches.meta``.
* ``cifar100``: ``{data_root}/cifar-100-python/`` with ``train``, ``test``, ``meta`` (``data`` uint8 (n, 3072),
  ``fine_labels``; class names from ``meta``'s ``fine_label_names``). The 100 fine classes are the labels
  (004 App. F); the 20 coarse labels are not used.
"""
from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import DataError
from .base import (DATASETS, LoaderSettings, RawDataset, SourceFacts, concat_parts, declares_facts, listed_files,
                   missing_error, torchvision_download)


CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


# ---------------------------------------------------------------------------------------------
# CIFAR-10 (python pickle batches)
# ---------------------------------------------------------------------------------------------
CIFAR_TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
CIFAR_FILES = CIFAR_TRAIN_BATCHES + ["test_batch", "batches.meta"]


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, strings and numpy arrays only: a batch file cannot run code when loaded.

    torchvision's CIFAR10 would ``pickle.load`` without restriction and also refuses any file whose md5
    differs from the official release, so the batches are read here directly."""

    _allowed = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"), ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._allowed:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"forbidden global {module}.{name}")


def read_cifar_pickle(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            obj = _ArrayOnlyUnpickler(io.BytesIO(fh.read()), encoding="latin1").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError) as e:
        raise DataError(f"{path}: corrupt or truncated CIFAR pickle ({e.__class__.__name__})") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}: not a CIFAR pickle (expected a dict)")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def read_cifar_images(path: Path, label_key: str, source: str) -> tuple[np.ndarray, np.ndarray]:
    """One pickle of images: ``data`` uint8 (n, 3072) = R, G, B planes of 32×32 (already C×H×W) and the list of int
    labels under ``label_key`` (CIFAR-10's batches: ``labels``; CIFAR-100's parts: ``fine_labels``)."""
    part = read_cifar_pickle(path)
    data, labels = part.get("data"), part.get(label_key)
    if not isinstance(data, np.ndarray) or labels is None:
        raise DataError(f"{path}: {source} file lacks 'data' or '{label_key}'")
    labels = np.asarray(labels, dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
        raise DataError(f"{path}: expected data uint8 (n, 3072) and n {label_key}, got {data.dtype} {data.shape}, "
                        f"{labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels


@DATASETS.register("cifar10")
def load_cifar10(settings: LoaderSettings) -> RawDataset:
    """CIFAR-10 (50,000 train / 10,000 test) from torchvision's ``cifar-10-batches-py`` folder."""
    folder = settings.data_root / "cifar-10-batches-py"
    if not all((folder / f).exists() for f in CIFAR_FILES) and settings.download:
        torchvision_download("CIFAR10", settings.data_root, "cifar10")
    missing = [f for f in CIFAR_FILES if not (folder / f).exists()]
    if missing:
        raise missing_error("cifar10", folder, CIFAR_FILES)
    meta = read_cifar_pickle(folder / "batches.meta")
    classes = [c.decode("latin1") if isinstance(c, bytes) else str(c) for c in meta.get("label_names", CIFAR10_CLASSES)]
    train = [read_cifar_images(folder / f, "labels", "CIFAR-10") for f in CIFAR_TRAIN_BATCHES]
    test = read_cifar_images(folder / "test_batch", "labels", "CIFAR-10")
    train_images = np.concatenate([b[0] for b in train])
    train_labels = np.concatenate([b[1] for b in train])
    return concat_parts((train_images, train_labels), test, classes, f"CIFAR-10 python batches ({folder})")


def _pickled_images(folder: Path, names: list[str]) -> int | None:
    """An upper bound of the images in CIFAR pickles: every image takes 3,072 bytes (counting them exactly means
    unpickling 150 MB)."""
    try:
        return sum((folder / name).stat().st_size for name in names) // (3 * 32 * 32)
    except OSError:
        return None


@declares_facts("cifar10")
def _cifar10_facts(settings: LoaderSettings) -> SourceFacts:
    folder = settings.data_root / "cifar-10-batches-py"
    return SourceFacts(len(CIFAR10_CLASSES), _pickled_images(folder, CIFAR_TRAIN_BATCHES),
                       all((folder / f).exists() for f in CIFAR_FILES), True, listed_files(folder, CIFAR_FILES))


# ---------------------------------------------------------------------------------------------
# CIFAR-100 (python pickle version)
# ---------------------------------------------------------------------------------------------
CIFAR100_FILES = ["train", "test", "meta"]


@DATASETS.register("cifar100")
def load_cifar100(settings: LoaderSettings) -> RawDataset:
    """CIFAR-100 (50,000 train / 10,000 test, 100 fine classes) from torchvision's ``cifar-100-python`` folder."""
    folder = settings.data_root / "cifar-100-python"
    if not all((folder / f).exists() for f in CIFAR100_FILES) and settings.download:
        torchvision_download("CIFAR100", settings.data_root, "cifar100")
    if any(not (folder / f).exists() for f in CIFAR100_FILES):
        raise missing_error("cifar100", folder, CIFAR100_FILES)
    meta = read_cifar_pickle(folder / "meta")
    names = meta.get("fine_label_names")
    if not isinstance(names, list) or len(names) != 100:
        raise DataError(f"{folder / 'meta'}: expected 100 fine_label_names")
    classes = [c.decode("latin1") if isinstance(c, bytes) else str(c) for c in names]
    train, test = (read_cifar_images(folder / part, "fine_labels", "CIFAR-100") for part in ("train", "test"))
    return concat_parts(train, test, classes, f"CIFAR-100 python version ({folder})")


CIFAR100_CLASSES = 100


@declares_facts("cifar100")
def _cifar100_facts(settings: LoaderSettings) -> SourceFacts:
    folder = settings.data_root / "cifar-100-python"
    return SourceFacts(CIFAR100_CLASSES, _pickled_images(folder, ["train"]),
                       all((folder / f).exists() for f in CIFAR100_FILES), True, listed_files(folder, CIFAR100_FILES))
