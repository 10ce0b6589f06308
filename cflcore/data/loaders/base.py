"""The loaders' contract (docs/architecture.md §3): what a loader depends on (:class:`LoaderSettings`), what it
returns (:class:`RawDataset`), the registry of loaders by name (:data:`DATASETS`), the facts each declares beside
itself without reading an image (:class:`SourceFacts`, :func:`declares_facts`) and the queries on them, and the
helpers the families share (the fixed-seed hold-out and ``max_train`` cap, the parts' concatenation, the
missing-files error, torchvision's download).

Every loader returns a :class:`RawDataset`: uint8 images (N, C, H, W), int labels and the ``train``/``test``
part of every row. Downloads happen only when ``settings["download"]`` is true (through torchvision / medmnist).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ...defaults import config_defaults
from ...errors import ConfigError, DataError
from ...registry import Registry

#: random_state of the held-out test part of ``mnist5k``/``digits`` and of the ``max_train`` cap. A constant,
#: not the study seed: the dataset file is cached once per dataset (docs/architecture.md §2).
DATA_SPLIT_SEED = 20240917

MNIST_CLASSES = [str(i) for i in range(10)]


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
DATASETS: Registry[Loader] = Registry("dataset", package="cflcore.data.loaders")
"""Loader name -> loader; a lookup imports only the module of this package that registers the name (one module per
source family, cflcore.registry)."""


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
"""loader -> its facts query, registered by :func:`declares_facts` beside the loader itself; complete once every
loader module is imported (:func:`facts_queries`; tests/config/test_config_feasibility.py asserts that every loader
has one and that its facts are what the loader loads)."""


def declares_facts(*loaders: str) -> Callable[[FactsQuery], FactsQuery]:
    """Register a :class:`SourceFacts` query for ``loaders`` (the one interface a loader declares its metadata by)."""
    def register(fn: FactsQuery) -> FactsQuery:
        for name in loaders:
            SOURCE_FACTS[name] = fn
        return fn
    return register


def facts_queries() -> dict[str, FactsQuery]:
    """Every loader's facts query: listing the loaders imports every module of this package, and each declares its
    facts beside its loader."""
    DATASETS.names()
    return dict(SOURCE_FACTS)


def holdout_train(n_rows: int, test_fraction: float) -> int:
    """Train rows left by :func:`stratified_holdout` (scikit-learn holds out ceil(test_fraction * n))."""
    return n_rows - int(np.ceil(test_fraction * n_rows))


def loader_declarations() -> dict[str, SourceFacts]:
    """Every loader's facts under the default settings, for what does not depend on the machine (classes, whether it
    downloads): the config reference lists them."""
    return {name: query(LoaderSettings.from_dict({"loader": name})) for name, query in sorted(facts_queries().items())}


def source_facts(settings: Mapping[str, Any]) -> SourceFacts | None:
    """The facts of the loader ``settings`` name (``cflcore.config.data_settings``), None for a loader without a
    facts query."""
    parsed = LoaderSettings.from_dict(settings)
    query = facts_queries().get(parsed.loader)
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


def concat_parts(train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], classes: list[str],
                  source: str) -> RawDataset:
    images = np.ascontiguousarray(np.concatenate([train[0], test[0]]))
    labels = np.concatenate([train[1], test[1]]).astype(np.int64)
    part = np.array(["train"] * len(train[1]) + ["test"] * len(test[1]), dtype=object)
    return RawDataset(images, labels, part, classes, source)


def listed_files(folder: Path, files: list[str]) -> str:
    return f"{folder}/{{{', '.join(files)}}}"


def missing_error(name: str, folder: Path, files: list[str]) -> DataError:
    return DataError(f"{name}: expected {listed_files(folder, files)} (set download: true or place the files there)")


def torchvision_download(class_name: str, root: Path, name: str) -> None:
    """Download through ``torchvision.datasets.<class_name>`` (imported only here: torchvision is slow to import)."""
    import torchvision.datasets

    dataset_cls = getattr(torchvision.datasets, class_name)
    try:
        for train in (True, False):
            dataset_cls(root=str(root), train=train, download=True)
    except Exception as e:  # noqa: BLE001 - network / integrity failures of any kind become one DataError
        first_line = str(e).splitlines()[0][:100] if str(e) else ""
        raise DataError(f"{name}: download into {root} failed ({e.__class__.__name__}: {first_line})") from None
