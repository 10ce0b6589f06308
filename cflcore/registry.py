"""A tiny name -> class registry with package auto-discovery, and the static table of plug-in names.

Plug-ins (strategies, datasets, models, trainers) register themselves with a decorator. A registry
created with ``package=...`` imports every module of that package on first lookup, so adding a plug-in
is one new file: no import list to edit.

:data:`DECLARED_NAMES` lists the names of every config-facing registry WITHOUT importing a plug-in
(the strategy, model and data packages import torch and the engine). Config validation checks names
against it (:func:`check_declared`), so ``report -> config`` never pulls in the engine; the plug-in
classes (and their parameter schemas) are only imported for the full check. tests/test_whatif.py
asserts that each table equals its registry's registered names, so the two cannot drift: a new
plug-in is one new file plus its name here.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, Iterator, TypeVar

from .errors import ConfigError

T = TypeVar("T")

DECLARED_NAMES: dict[str, tuple[str, ...]] = {
    # kind (Registry.kind) -> registered names; the registry that holds them is in the comment
    "method": ("bcl", "bnc", "fedgwc", "ifca", "louvain", "ocfl", "scl"),  # cflcore.fl.strategy.STRATEGIES
    "clusterer": ("affinity", "hdbscan", "kmeans", "leiden", "louvain", "meanshift",
                  "sklearn"),  # cflcore.clustering.clusterers.CLUSTERERS
    "model": ("lenet5", "mobilenetv2", "ocfl-cnn", "resnet34", "tinyvgg"),  # cflcore.models.MODELS
    "dataset": ("bloodmnist", "cifar10", "digits", "fmnist", "mnist", "mnist5k",
                "pathmnist"),  # cflcore.data.DATASETS
    "split generator": ("dirichlet-mix", "domains", "majority", "ocfl"),  # cflcore.data.SPLIT_GENERATORS
}


def declared_names(kind: str) -> tuple[str, ...]:
    """The static names of registry ``kind`` (no plug-in is imported)."""
    try:
        return DECLARED_NAMES[kind]
    except KeyError:
        raise KeyError(f"no declared names for registry kind {kind!r}; declared: {', '.join(DECLARED_NAMES)}") from None


def check_declared(kind: str, name: str, field: str) -> None:
    """ConfigError ``<field>: unknown <kind> <name>; known: ...`` unless ``name`` is a declared plug-in name
    (the same message as :meth:`Registry.get`)."""
    known = declared_names(kind)
    if name not in known:
        raise ConfigError(f"{field}: unknown {kind} {name!r}; known: {', '.join(sorted(known))}")


class Registry(Generic[T]):
    def __init__(self, kind: str, package: str | None = None):
        self.kind = kind
        self.package = package
        self._items: dict[str, T] = {}
        self._discovered = package is None

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            try:
                obj.registered_name = name  # type: ignore[attr-defined]
            except (AttributeError, TypeError):
                pass
            return obj

        return deco

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        pkg = importlib.import_module(self.package)  # type: ignore[arg-type]
        for mod in pkgutil.iter_modules(pkg.__path__):
            if not mod.name.startswith("_"):
                importlib.import_module(f"{self.package}.{mod.name}")

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._items)

    def get(self, name: str, field: str | None = None) -> T:
        self._discover()
        try:
            return self._items[name]
        except KeyError:
            where = f"{field}: " if field else ""
            raise ConfigError(
                f"{where}unknown {self.kind} {name!r}; known: {', '.join(self.names())}"
            ) from None

    def __contains__(self, name: str) -> bool:
        self._discover()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
