"""MNIST and Fashion-MNIST from their IDX files (docs/architecture.md §3): ``{data_root}/MNIST/raw/`` resp.
``FashionMNIST/raw/`` with the four IDX files (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``), each either extracted (what torchvision leaves after
download) or as ``.gz``.
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from ...errors import DataError
from .base import (DATASETS, MNIST_CLASSES, LoaderSettings, RawDataset, SourceFacts, concat_parts, declares_facts,
                   listed_files, missing_error, torchvision_download)


FMNIST_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                  "Ankle boot"]


IDX_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: corrupt or truncated file ({e.__class__.__name__})") from None


def parse_idx_ubyte(data: bytes, path: Path) -> np.ndarray:
    """Parse an unsigned-byte IDX file (magic 0x00000801 labels / 0x00000803 images).

    Hand-rolled (a dozen lines) instead of torchvision's reader because that one needs the extracted file and
    reads non-strictly (a truncated file is not reported as such)."""
    if len(data) < 8 or data[0] != 0 or data[1] != 0 or data[2] != 0x08 or not 1 <= data[3] <= 3:
        raise DataError(f"{path}: not an unsigned-byte IDX file (bad magic number)")
    n_dims = data[3]
    header = 4 + 4 * n_dims
    if len(data) < header:
        raise DataError(f"{path}: truncated IDX header")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=n_dims, offset=4))
    expected = int(np.prod(dims))
    if len(data) - header != expected:
        raise DataError(f"{path}: truncated or corrupt IDX file ({len(data) - header} bytes of data, expected {expected})")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims).copy()


def _find_idx_files(raw_dir: Path) -> dict[str, Path] | None:
    found: dict[str, Path] = {}
    for name in IDX_FILES:
        for candidate in (raw_dir / name, raw_dir / f"{name}.gz"):
            if candidate.exists():
                found[name] = candidate
                break
        else:
            return None
    return found


def load_idx_dataset(settings: LoaderSettings, name: str, folder: str, classes: list[str]) -> RawDataset:
    """IDX files in torchvision's layout ``{data_root}/{folder}/raw`` (``folder`` is also torchvision's class name)."""
    raw_dir = settings.data_root / folder / "raw"
    files = _find_idx_files(raw_dir)
    if files is None and settings.download:
        torchvision_download(folder, settings.data_root, name)
        files = _find_idx_files(raw_dir)
    if files is None:
        raise missing_error(name, raw_dir, [f"{f}.gz" for f in IDX_FILES])
    arrays = {k: parse_idx_ubyte(_read_bytes(p), p) for k, p in files.items()}
    parts = []
    for prefix in ("train", "t10k"):
        images, labels = arrays[f"{prefix}-images-idx3-ubyte"], arrays[f"{prefix}-labels-idx1-ubyte"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DataError(f"{raw_dir}: {prefix} images {images.shape} do not match labels {labels.shape}")
        parts.append((images[:, None, :, :], labels.astype(np.int64)))
    return concat_parts(parts[0], parts[1], classes, f"torchvision {folder} ({raw_dir})")


@DATASETS.register("mnist")
def load_mnist(settings: LoaderSettings) -> RawDataset:
    """MNIST (60,000 train / 10,000 test) in torchvision's on-disk layout."""
    return load_idx_dataset(settings, "mnist", "MNIST", MNIST_CLASSES)


@DATASETS.register("fmnist")
def load_fmnist(settings: LoaderSettings) -> RawDataset:
    """Fashion-MNIST (60,000 train / 10,000 test) in torchvision's on-disk layout."""
    return load_idx_dataset(settings, "fmnist", "FashionMNIST", FMNIST_CLASSES)


IDX_FOLDERS = {"mnist": ("MNIST", MNIST_CLASSES), "fmnist": ("FashionMNIST", FMNIST_CLASSES)}


@declares_facts(*IDX_FOLDERS)
def _idx_facts(settings: LoaderSettings) -> SourceFacts:
    """The train count from the IDX header of the train labels (bytes 4..8, big-endian)."""
    folder, classes = IDX_FOLDERS[settings.loader]
    raw_dir = settings.data_root / folder / "raw"
    files = _find_idx_files(raw_dir)
    n = None
    if files is not None:
        path = files["train-labels-idx1-ubyte"]
        try:
            with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as fh:
                header = fh.read(8)
        except (OSError, EOFError, zlib.error):
            header = b""  # corrupt: the data job says so
        n = int.from_bytes(header[4:8], "big") if len(header) == 8 else None
    return SourceFacts(len(classes), n, files is not None, True, listed_files(raw_dir, [f"{f}.gz" for f in IDX_FILES]))
