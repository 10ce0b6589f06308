"""A tiny name -> class registry with package auto-discovery, and the static table of plug-in names.

Plug-ins (strategies, datasets, models, trainers) register themselves with a decorator. A registry
created with ``package=...`` finds its plug-ins in that package: a lookup by name imports the one module whose
source registers the name (:func:`declared_modules`), listing the names imports every module of the package, so
adding a plug-in is one new file: no import list to edit.

:func:`declared_names` gives the names of every config-facing registry WITHOUT importing a plug-in
(the strategy, model and data packages import torch and the engine): it reads the registration
decorators (``@register_strategy("scl")``, ``@MODELS.register("tinyvgg")``) from the plug-in packages'
source with :mod:`ast`. Config validation checks names against them (:func:`check_declared`), so
``report -> config`` never pulls in the engine; the plug-in classes (and their parameter schemas) are
only imported for the full check. A new plug-in stays one new file: its decorator is its declaration.
tests/evaluate/test_whatif.py asserts that the declared names equal the registries' registered names.
"""
from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
from pathlib import Path
from typing import Callable, Generic, Iterator, TypeVar

from .errors import ConfigError

T = TypeVar("T")

PLUGIN_SOURCES: dict[str, tuple[str, str]] = {
    # kind (Registry.kind) -> (sub-package of cflcore whose modules register them, dotted, and the decorator)
    "method": ("strategies", "register_strategy"),  # cflcore.strategies.base.STRATEGIES
    "clusterer": ("clustering", "register_clusterer"),  # cflcore.clustering.clusterers.CLUSTERERS
    "model": ("models", "MODELS.register"),  # cflcore.models.MODELS
    "dataset": ("data.loaders", "DATASETS.register"),  # cflcore.data.loaders.DATASETS
    "split generator": ("data.splits", "SPLIT_GENERATORS.register"),  # cflcore.data.splits.SPLIT_GENERATORS
}


def decorator_name(node: ast.expr) -> str:
    """``register_strategy`` or ``MODELS.register`` for the callee of a decorator call."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{decorator_name(node.value)}.{node.attr}"
    return ""


def registered_in_tree(tree: ast.AST, decorator: str) -> list[str]:
    """Names registered in one module's syntax tree by ``@<decorator>("name")``."""
    names = []
    for node in ast.walk(tree):
        for deco in getattr(node, "decorator_list", []):
            if (isinstance(deco, ast.Call) and decorator_name(deco.func) == decorator and deco.args
                    and isinstance(deco.args[0], ast.Constant) and isinstance(deco.args[0].value, str)):
                names.append(deco.args[0].value)
    return names


def registered_in_source(path: Path, decorator: str) -> list[str]:
    """Names registered in one module's source by ``@<decorator>("name")`` (parsed, never imported)."""
    return registered_in_tree(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), decorator)


@functools.cache
def declared_modules(kind: str) -> dict[str, str]:
    """Name -> the dotted module whose source registers it, for registry ``kind`` (no plug-in is imported)."""
    try:
        package, decorator = PLUGIN_SOURCES[kind]
    except KeyError:
        raise KeyError(f"no plug-in sources for registry kind {kind!r}; known: {', '.join(PLUGIN_SOURCES)}") from None
    root = Path(__file__).parent.joinpath(*package.split("."))
    return {name: f"{__package__}.{package}.{path.stem}"
            for path in sorted(root.glob("*.py")) for name in registered_in_source(path, decorator)}


@functools.cache
def declared_names(kind: str) -> tuple[str, ...]:
    """The names registry ``kind`` will hold, read from the plug-in sources (no plug-in is imported)."""
    return tuple(sorted(declared_modules(kind)))


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

    def _import_declaring(self, name: str) -> None:
        """Import only the module whose source registers ``name`` (:func:`declared_modules`), so that a lookup runs
        the code of the plug-in it asks for and no other (a run's code hash covers exactly that,
        :mod:`cflcore.provenance`). A name no source declares is left to the full discovery."""
        if self._discovered or self.kind not in PLUGIN_SOURCES:
            return
        if self.package != f"{__package__}.{PLUGIN_SOURCES[self.kind][0]}":
            return
        module = declared_modules(self.kind).get(name)
        if module is not None:
            importlib.import_module(module)

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._items)

    def get(self, name: str, field: str | None = None) -> T:
        if name not in self._items:
            self._import_declaring(name)
        if name not in self._items:
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
