"""Source hashes per stage, passed as a Snakemake param so that editing the code a stage runs
reruns exactly that stage's jobs (and their dependents), and editing anything else does not.

A stage's sources are derived from its entry point's real imports, never listed by hand: the entry is
a function of :mod:`cflcore.stages` (the one its ``workflow_scripts`` adapter calls), and its sources are
* the parts of ``stages.py`` that function runs: its module-level statements and the module-level functions
  the entry references, transitively (so editing ``stages.train`` reruns ``train`` only);
* :mod:`cflcore.logutil` (every adapter runs its stage through ``logutil.run_job``);
* every ``cflcore`` module those import, transitively (a static walk of the syntax trees, :func:`module_graph`):
  ``import a.b``, ``from . import m``, ``from .a import b`` (``b`` a submodule or a name), imports inside
  functions too (a lazy import runs when its function does), not those under ``if TYPE_CHECKING:``. Importing
  a submodule runs its packages' ``__init__``. Two dynamic imports of this package are followed as well:
  a package's PEP 562 lazy exports (a module-level ``_EXPORTS = {name: submodule}`` read by its
  ``__getattr__``) and a plug-in ``Registry(..., package="cflcore.x")`` (which imports every module of ``x``
  whose name does not start with ``_``, :meth:`cflcore.registry.Registry._discover`);
* the package data those modules load: a data directory of the package (one holding no Python module, e.g.
  ``schemas/``, ``reference/``) belongs to every module whose source names it in a string literal.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

PKG = Path(__file__).resolve().parent
PACKAGE = "cflcore"

STAGE_ENTRIES: dict[str, tuple[str, ...]] = {
    # stage (the rules' ``code_version(stage)``) -> the cflcore.stages functions its adapter calls
    "data": ("prepare_dataset",),
    "splits": ("make_split",),
    "train": ("train",),
    "evaluate": ("evaluate",),
    "whatif": ("whatif",),
    "late_clients": ("evaluate_late_clients",),
    "explain": ("explain",),
    "report": ("report_part", "report_index"),
}
ENTRY_MODULE = f"{PACKAGE}.stages"
ADAPTER_MODULES = (f"{PACKAGE}.logutil",)  # workflow_scripts/*.py: ``run_job(log, lambda: stages.<entry>(...))``


def _module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package at ``root``."""
    files = {}
    for f in sorted(root.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        parts = [PACKAGE, *f.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = f
    return files


def _data_dirs(root: Path) -> dict[str, list[Path]]:
    """Name -> files of each package data directory (a directory under ``root`` with no Python module)."""
    dirs = {}
    for d in sorted(p for p in root.rglob("*") if p.is_dir() and "__pycache__" not in p.parts):
        if not any(d.glob("*.py")):
            dirs[d.name] = sorted(f for f in d.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    return dirs


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(nodes: list[ast.stmt]):
    """Every statement in ``nodes``, nested ones included (function and class bodies, branches, handlers),
    except the bodies of ``if TYPE_CHECKING:`` (annotations only, never executed). Imports are statements,
    so expressions are not walked (a tenth of the time of ``ast.walk``: this runs at every Snakemake parse)."""
    todo = list(nodes)
    while todo:
        n = todo.pop()
        yield n
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            if name == "body" and isinstance(n, ast.If) and _is_type_checking(n):
                continue
            todo.extend(c for c in getattr(n, name, ()) if isinstance(c, (ast.stmt, ast.excepthandler, ast.match_case)))


def _lazy_exports(tree: ast.Module) -> dict[str, str]:
    """A package's PEP 562 lazy exports: the module-level ``_EXPORTS = {name: submodule}`` literal."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            return {k.value: v.value for k, v in zip(node.value.keys, node.value.values)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
    return {}


class _Package:
    """The parsed modules of the package at ``root`` and the import edges between them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = _module_files(root)
        self.trees = {m: ast.parse(f.read_text(encoding="utf-8"), filename=str(f)) for m, f in self.files.items()}
        self.exports = {m: _lazy_exports(t) for m, t in self.trees.items()}
        self.data = _data_dirs(root)
        self.edges: dict[str, set[str]] = {}  # module -> the modules it imports (filled on demand)

    def _is_package(self, module: str) -> bool:
        return self.files.get(module, Path()).name == "__init__.py"

    def _with_parents(self, module: str) -> set[str]:
        """``module`` and the packages whose ``__init__`` importing it runs (the ones in this package)."""
        parts = module.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in self.files}

    def _resolve_from(self, module: str, node: ast.ImportFrom) -> set[str]:
        if node.level:
            base = module.split(".") if self._is_package(module) else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target.split(".")[0] != PACKAGE:
            return set()
        found = self._with_parents(target)
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if sub in self.files:
                found |= self._with_parents(sub)
            elif alias.name in self.exports.get(target, {}):
                found |= self._with_parents(f"{target}.{self.exports[target][alias.name]}")
        return found

    def _registry_package(self, stmt: ast.stmt) -> set[str]:
        """``X = Registry(kind, package="cflcore.x")``: every module of ``cflcore.x`` (its discovery imports them)."""
        call = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", "")) == "Registry"):
            return set()
        found: set[str] = set()
        for kw in call.keywords:
            if kw.arg == "package" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                prefix = f"{kw.value.value}."
                found |= self._with_parents(kw.value.value)
                found |= {m for m in self.files if m.startswith(prefix) and "." not in m[len(prefix):]
                          and not m[len(prefix):].startswith("_")}
        return found

    def imports(self, module: str, nodes: list[ast.stmt]) -> set[str]:
        """The package modules that the statements ``nodes`` of ``module`` import directly."""
        found: set[str] = set()
        for node in _statements(nodes):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        found |= self._with_parents(alias.name)
            elif isinstance(node, ast.ImportFrom):
                found |= self._resolve_from(module, node)
            else:
                found |= self._registry_package(node)
        found.discard(module)
        return found

    def data_files(self, module: str) -> set[Path]:
        """The package data a module loads: the files of each data directory its source names in a string."""
        text = self.files[module].read_text(encoding="utf-8")
        return {f for d, files in self.data.items() if f'"{d}"' in text or f"'{d}'" in text for f in files}

    def closure(self, modules: tuple[str, ...]) -> set[str]:
        """``modules`` and every package module they import, transitively."""
        seen: set[str] = set()
        todo = list(modules)
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            if m not in self.edges:
                self.edges[m] = self.imports(m, self.trees[m].body)
            todo.extend(self.edges[m] - seen)
        return seen


def _entry_nodes(tree: ast.Module, entries: tuple[str, ...]) -> list[ast.stmt]:
    """The statements of the entry module that ``entries`` run: every module-level statement but the
    functions, plus the module-level functions ``entries`` reference (by name), transitively."""
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    used, todo = set(), list(entries)
    while todo:
        name = todo.pop()
        if name in used:
            continue
        if name not in functions:
            raise KeyError(f"{ENTRY_MODULE} has no function {name!r}")
        used.add(name)
        todo.extend(n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions)
    return [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or n.name in used]


StagePlan = dict[str, Any]
"""``{"files": [path relative to the package, ...], "entry_lines": [[first, last], ...] | None}``: the files a
stage runs whole, and the line ranges of ``stages.py`` its entries run (None when it imports all of it)."""


def _stage_plans(root: Path) -> dict[str, StagePlan]:
    """The plan of every stage, from the syntax trees of the package at ``root`` (module docstring)."""
    pkg = _Package(root)
    plans = {}
    for stage, entries in STAGE_ENTRIES.items():
        nodes = _entry_nodes(pkg.trees[ENTRY_MODULE], entries)
        direct = pkg.imports(ENTRY_MODULE, nodes) | (pkg._with_parents(ENTRY_MODULE) - {ENTRY_MODULE})
        modules = pkg.closure(tuple(sorted(direct | set(ADAPTER_MODULES))))
        files = {pkg.files[m] for m in modules} | {f for m in modules | {ENTRY_MODULE} for f in pkg.data_files(m)}
        ranges = None
        if ENTRY_MODULE not in modules:  # else the stage imports the whole of stages.py (e.g. the report's worker)
            ranges = [[min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", ()))]), n.end_lineno]
                      for n in nodes]
        plans[stage] = {"files": sorted(str(f.relative_to(root)) for f in files), "entry_lines": ranges}
    return plans


def _package_key(root: Path) -> str:
    """SHA-256 over the path and content of every file of the package at ``root``: what the plans depend on."""
    h = hashlib.sha256(f"{PLAN_FORMAT}\0".encode())
    for f in sorted(root.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


PLAN_FORMAT = "cflcore.provenance/1"


@cache
def stage_plans(root: Path = PKG) -> dict[str, StagePlan]:
    """:func:`_stage_plans`, remembered in ``<root>/__pycache__/`` (beside the bytecode) under
    :func:`_package_key`: parsing the package costs ~1 s on a busy 2-core machine, at every Snakemake parse,
    while hashing its files costs ~0.05 s. An unwritable package is parsed every time instead."""
    root = Path(root)
    key = _package_key(root)
    cache = root / "__pycache__" / f"provenance-{key[:32]}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    plans = _stage_plans(root)
    try:
        cache.parent.mkdir(exist_ok=True)
        for old in cache.parent.glob("provenance-*.json"):
            old.unlink(missing_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(plans, sort_keys=True))
        os.replace(tmp, cache)
    except OSError:
        pass
    return plans


def stage_sources(stage: str, root: Path = PKG) -> list[tuple[str, bytes]]:
    """(path relative to the package, content) of everything ``stage`` runs, sorted by path; ``stages.py``
    contributes only the statements its entries run, unless the stage imports all of it."""
    root = Path(root)
    plan = stage_plans(root)[stage]
    out = [(path, (root / path).read_bytes()) for path in plan["files"]]
    if plan["entry_lines"] is not None:
        entry = root / Path(*ENTRY_MODULE.split(".")[1:]).with_suffix(".py")
        lines = entry.read_bytes().splitlines(keepends=True)
        out.append((str(entry.relative_to(root)), b"".join(b"".join(lines[a - 1:b]) for a, b in plan["entry_lines"])))
    return sorted(out)


def stage_modules(stage: str, root: Path = PKG) -> list[str]:
    """The paths (relative to the package) whose content :func:`code_version` hashes for ``stage``."""
    return [path for path, _ in stage_sources(stage, root)]


@cache
def code_version(stage: str, root: Path = PKG) -> str:
    """A short SHA-256 over the sources ``stage`` runs (:func:`stage_sources`); computed once per process
    (every Snakemake parse calls it for each rule)."""
    h = hashlib.sha256()
    for path, content in stage_sources(stage, Path(root)):
        h.update(path.encode() + b"\0")
        h.update(hashlib.sha256(content).digest())
    return h.hexdigest()[:16]
