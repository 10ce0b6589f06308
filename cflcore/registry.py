"""A tiny name -> class registry with package auto-discovery.

Plug-ins (strategies, datasets, models, trainers) register themselves with a decorator. A registry
created with ``package=...`` imports every module of that package on first lookup, so adding a plug-in
is one new file: no import list to edit.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, Iterator, TypeVar

from .errors import ConfigError

T = TypeVar("T")


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
