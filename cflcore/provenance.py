"""Code hashes per job, passed as a Snakemake param so that editing the code a job runs reruns exactly that job (and
its dependents), and editing anything else does not.

A job's sources are derived from its entry point's real imports, never listed by hand: the entry is a function of
:mod:`cflcore.stages` (the one its ``workflow_scripts`` adapter calls; a stage's entries are its record's,
:mod:`cflcore.pipeline`), and its sources are
* the parts of ``stages.py`` that function runs: its module-level statements and the module-level functions the
  entry references, transitively (so editing ``stages.train`` reruns ``train`` only);
* :mod:`cflcore.logutil` (every adapter runs its stage through ``logutil.run_job``);
* every ``cflcore`` module those import, transitively (a static walk of the syntax trees): ``import a.b``,
  ``from . import m``, ``from .a import b`` (``b`` a submodule or a name), imports inside functions too (a lazy
  import runs when its function does), not those under ``if TYPE_CHECKING:``. Importing a submodule runs its
  packages' ``__init__``. A package's PEP 562 lazy exports (a module-level ``_EXPORTS = {name: submodule}`` read by
  its ``__getattr__``) are followed too;
* the plug-ins the job selects: a ``Registry(kind, package="cflcore.x")`` imports, at a lookup by name, only the
  module of ``x`` whose source registers that name (:meth:`cflcore.registry.Registry.get`). A job that names its
  plug-in of that kind (a train job: its method and its model, :func:`code_version`'s ``plugins``) gets that module
  and what it imports; a job that names none gets every module of ``x`` (what listing the registry imports);
* the package data those modules load: a data directory of the package (one holding no Python module, e.g.
  ``schemas/``, ``reference/``) belongs to every module whose source names it in a string literal.

What is hashed is what runs, not how it is written: a module's syntax tree without its docstrings and other bare
string statements (``ast.dump``, which holds no line numbers and no comments), and a YAML or JSON data file's parsed
content. A comment, a docstring or a blank line changes no hash. docs/architecture.md, "Provenance", tells the story.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from .external import ExternalPlugin, module_source, selected
from .pipeline import stage_entries
from .registry import PLUGIN_SOURCES, registered_in_tree

PKG = Path(__file__).resolve().parent
PACKAGE = "cflcore"

ENTRY_MODULE = f"{PACKAGE}.stages"
ADAPTER_MODULES = (f"{PACKAGE}.logutil",)  # workflow_scripts/*.py: ``run_job(log, lambda: stages.<entry>(...))``
DATA_SUFFIXES_PARSED = (".yaml", ".yml", ".json")  # hashed by content, not by text (comments and layout aside)

PackageGraph = dict[str, Any]
"""The package as :func:`package_graph` reads it (plain JSON, cached on disk):
``modules``: module -> {``path`` (relative to the package), ``digest`` (its normalised syntax tree), ``imports``
(the package modules it imports), ``registries`` (the plug-in kinds of the registries it creates)};
``data``: module -> [[path, digest], ...] of the package data it loads;
``plugins``: kind -> {``modules`` (every module the registry's package discovery imports), ``declared``
(name -> the module registering it)};
``entries``: stage -> {``imports``, ``registries``, ``digest``} of the part of ``stages.py`` the stage runs."""


class _StripStrings(ast.NodeTransformer):
    """Removes docstrings and every other bare string statement: they document, they never run."""

    def visit_Expr(self, node: ast.Expr) -> ast.Expr | None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return node


def normalised_dump(nodes: Iterable[ast.AST]) -> str:
    """``ast.dump`` of ``nodes`` without docstrings: equal for sources that differ only in comments, docstrings,
    blank lines or line breaks. The nodes are copied, never changed."""
    import copy

    kept = (_StripStrings().visit(copy.deepcopy(n)) for n in nodes)
    return "\n".join(ast.dump(n) for n in kept if n is not None)


def _digest(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def data_digest(path: Path) -> str:
    """A data file's digest: YAML and JSON by their parsed content (canonical JSON), any other file by its bytes."""
    if path.suffix in DATA_SUFFIXES_PARSED:
        import yaml

        try:
            content = yaml.safe_load(path.read_text(encoding="utf-8"))
            return _digest(json.dumps(content, sort_keys=True, default=str))
        except (yaml.YAMLError, UnicodeDecodeError):
            pass
    return _digest(path.read_bytes())


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
    so expressions are not walked (a tenth of the time of ``ast.walk``)."""
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


def _registry_call(stmt: ast.stmt) -> tuple[str, str] | None:
    """``X = Registry(kind, package="cflcore.x")`` -> (kind, "cflcore.x"); None for any other statement."""
    call = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
    if not (isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", "")) == "Registry"):
        return None
    kind = call.args[0].value if call.args and isinstance(call.args[0], ast.Constant) else None
    package = next((kw.value.value for kw in call.keywords if kw.arg == "package"
                    and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)), None)
    return (str(kind), package) if isinstance(kind, str) and package else None


class _Package:
    """The parsed modules of the package at ``root`` and the import edges between them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = _module_files(root)
        self.trees = {m: ast.parse(f.read_text(encoding="utf-8"), filename=str(f)) for m, f in self.files.items()}
        self.exports = {m: _lazy_exports(t) for m, t in self.trees.items()}
        self.data = _data_dirs(root)
        self.registries: dict[str, str] = {}  # kind -> package, of every Registry(kind, package=...) found

    def _is_package(self, module: str) -> bool:
        return self.files.get(module, Path()).name == "__init__.py"

    def with_parents(self, module: str) -> set[str]:
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
        found = self.with_parents(target)
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if sub in self.files:
                found |= self.with_parents(sub)
            elif alias.name in self.exports.get(target, {}):
                found |= self.with_parents(f"{target}.{self.exports[target][alias.name]}")
        return found

    def imports(self, module: str, nodes: list[ast.stmt]) -> tuple[set[str], set[str]]:
        """The package modules that the statements ``nodes`` of ``module`` import directly, and the plug-in kinds
        of the registries they create."""
        found: set[str] = set()
        kinds: set[str] = set()
        for node in _statements(nodes):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        found |= self.with_parents(alias.name)
            elif isinstance(node, ast.ImportFrom):
                found |= self._resolve_from(module, node)
            elif (registry := _registry_call(node)) is not None:
                kinds.add(registry[0])
                self.registries[registry[0]] = registry[1]
        found.discard(module)
        return found, kinds

    def data_files(self, module: str) -> list[Path]:
        """The package data a module loads: the files of each data directory its source names in a string."""
        text = self.files[module].read_text(encoding="utf-8")
        return sorted({f for d, files in self.data.items() if f'"{d}"' in text or f"'{d}'" in text for f in files})

    def plugins(self, kind: str, package: str) -> dict[str, Any]:
        """The modules a registry's discovery imports (the package, and its modules not starting with ``_``) and the
        module that registers each declared name (by the kind's decorator, :data:`cflcore.registry.PLUGIN_SOURCES`)."""
        prefix = f"{package}."
        members = sorted(m for m in self.files if m.startswith(prefix) and "." not in m[len(prefix):]
                         and not m[len(prefix):].startswith("_"))
        decorator = PLUGIN_SOURCES.get(kind, ("", ""))[1]
        declared = {name: m for m in members for name in registered_in_tree(self.trees[m], decorator)} if decorator else {}
        return {"modules": sorted(self.with_parents(package) | set(members)), "declared": declared}


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


def _package_graph(root: Path) -> PackageGraph:
    """The :data:`PackageGraph` of the package at ``root``, from its syntax trees (module docstring)."""
    pkg = _Package(root)
    modules = {}
    for m, tree in pkg.trees.items():
        imports, kinds = pkg.imports(m, tree.body)
        modules[m] = {"path": str(pkg.files[m].relative_to(root)), "digest": _digest(normalised_dump([tree])),
                      "imports": sorted(imports), "registries": sorted(kinds)}
    data = {m: [[str(f.relative_to(root)), data_digest(f)] for f in pkg.data_files(m)] for m in pkg.files}
    entries = {}
    for stage, names in stage_entries().items():  # stage (the rules' ``code_version(stage)``) -> its code entries
        nodes = _entry_nodes(pkg.trees[ENTRY_MODULE], names)
        imports, kinds = pkg.imports(ENTRY_MODULE, nodes)
        entries[stage] = {"imports": sorted(imports | pkg.with_parents(ENTRY_MODULE) - {ENTRY_MODULE}),
                          "registries": sorted(kinds), "digest": _digest(normalised_dump(nodes))}
    plugins = {kind: pkg.plugins(kind, package) for kind, package in sorted(pkg.registries.items())}
    return {"modules": modules, "data": {m: d for m, d in data.items() if d}, "plugins": plugins, "entries": entries}


GRAPH_FORMAT = "cflcore.provenance/2"


def _package_key(root: Path) -> str:
    """SHA-256 over the path and content of every file of the package at ``root``: what the graph depends on."""
    h = hashlib.sha256(f"{GRAPH_FORMAT}\0".encode())
    for f in sorted(root.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


@cache
def package_graph(root: Path = PKG) -> PackageGraph:
    """:func:`_package_graph`, remembered in ``<root>/__pycache__/`` (beside the bytecode) under
    :func:`_package_key`: parsing the package costs ~1 s on a busy 2-core machine, at every Snakemake parse,
    while hashing its files costs ~0.05 s. An unwritable package is parsed every time instead."""
    root = Path(root)
    key = _package_key(root)
    cached = root / "__pycache__" / f"provenance-{key[:32]}.json"
    try:
        return json.loads(cached.read_text())
    except (OSError, ValueError):
        pass
    graph = _package_graph(root)
    try:
        cached.parent.mkdir(exist_ok=True)
        for old in cached.parent.glob("provenance-*.json"):
            old.unlink(missing_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(graph, sort_keys=True))
        os.replace(tmp, cached)
    except OSError:
        pass
    return graph


def _plugin_modules(graph: PackageGraph, kind: str, plugins: Mapping[str, str]) -> list[str]:
    """The modules a registry of ``kind`` imports in a job that selects ``plugins`` (kind -> name): the one
    registering the selected name, or, with no selection (or a name no source declares), all of them; none where the
    selection is an external plug-in (:data:`EXTERNAL`: the job imported it before the lookup, cflcore.external)."""
    if plugins.get(kind) == EXTERNAL:
        return []
    known = graph["plugins"].get(kind, {"modules": [], "declared": {}})
    module = known["declared"].get(plugins.get(kind, ""))
    if module is None:
        return known["modules"]
    parts = module.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in graph["modules"]]


def modules_in(graph: PackageGraph, stage: str, plugins: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The package modules a job of ``stage`` that selects ``plugins`` runs, in ``graph``, sorted (:func:`job_modules`);
    ``extra``: modules the job imports beyond its entry (those an external plug-in imports, :func:`external_sources`)."""
    entry = graph["entries"][stage]
    todo = [*entry["imports"], *ADAPTER_MODULES, *extra,
            *(m for k in entry["registries"] for m in _plugin_modules(graph, k, plugins))]
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        node = graph["modules"][m]
        todo.extend(node["imports"])
        todo.extend(p for k in node["registries"] for p in _plugin_modules(graph, k, plugins))
    return sorted(seen | {ENTRY_MODULE})


def sources_in(graph: PackageGraph, stage: str, plugins: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path relative to the package, digest) of everything a job of ``stage`` that selects ``plugins`` runs, and of
    the package data it loads, in ``graph``, sorted by path (:func:`job_sources`)."""
    return _sources_of(graph, stage, modules_in(graph, stage, plugins))


def _sources_of(graph: PackageGraph, stage: str, modules: list[str]) -> list[tuple[str, str]]:
    entry, entry_node = graph["entries"][stage], graph["modules"][ENTRY_MODULE]
    out = {(graph["modules"][m]["path"], graph["modules"][m]["digest"]) for m in modules if m != ENTRY_MODULE}
    imported_whole = any(ENTRY_MODULE in graph["modules"][m]["imports"] for m in modules if m != ENTRY_MODULE)
    out.add((entry_node["path"], entry_node["digest"]) if imported_whole else (f"{entry_node['path']}#{stage}", entry["digest"]))
    out |= {(path, digest) for m in modules for path, digest in graph["data"].get(m, [])}
    return sorted(out)


def version_in(graph: PackageGraph, stage: str, plugins: Mapping[str, str] | None = None) -> str:
    """A short SHA-256 over :func:`sources_in` (:func:`code_version`)."""
    h = hashlib.sha256()
    for path, digest in sources_in(graph, stage, dict(plugins or {})):
        h.update(f"{path}\0{digest}\0".encode())
    return h.hexdigest()[:16]


def job_modules(stage: str, plugins: Mapping[str, str] | None = None, root: Path = PKG) -> list[str]:
    """The package modules a job of ``stage`` that selects ``plugins`` (registry kind -> name, e.g.
    ``{"method": "ocfl", "model": "tinyvgg"}``) runs, sorted; :data:`ENTRY_MODULE` stands for the part of it
    the entry runs unless the job imports the whole of it."""
    return modules_in(package_graph(Path(root)), stage, dict(plugins or {}))


def job_sources(stage: str, plugins: Mapping[str, str] | None = None, root: Path = PKG) -> list[tuple[str, str]]:
    """(path relative to the package, digest) of everything a job of ``stage`` runs (:func:`job_modules`) and the
    package data it loads, sorted by path; ``stages.py`` contributes only the statements the entry runs, unless the
    job imports all of it (``stages.py#<stage>`` then names that part)."""
    return sources_in(package_graph(Path(root)), stage, dict(plugins or {}))


def stage_modules(stage: str, plugins: Mapping[str, str] | None = None, root: Path = PKG) -> list[str]:
    """The paths (relative to the package) whose content :func:`code_version` hashes for a job of ``stage``."""
    return [path for path, _ in job_sources(stage, plugins, root)]


EXTERNAL = "<external>"
"""A selection's value for a kind whose selected plug-in is external (:func:`_plugin_modules`)."""
EXTERNAL_MODULE = f"{PACKAGE}.external"
"""The module that imports a job's external plug-ins (cflcore.external.activate): in the hash of every job that has one."""


def external_sources(plugin: ExternalPlugin, graph: PackageGraph) -> tuple[list[tuple[str, str]], set[str]]:
    """(``<distribution>:<path>``, digest) of every module of the plug-in's own package that its module imports,
    transitively, itself and its packages' ``__init__`` included, and the ``cflcore`` modules of ``graph`` they import:
    what a job that selects it runs of it, hashed as the package's own modules are (docstrings and comments aside).
    Another module of the same distribution that it does not import is not covered: editing a lab's method reruns
    that method's jobs only."""
    top = plugin.module.split(".")[0]
    top_file = module_source(top)
    base = top_file.parent.parent if top_file is not None and top_file.name == "__init__.py" else plugin.source.parent
    parts = plugin.module.split(".")
    todo = [".".join(parts[: i + 1]) for i in range(len(parts))]
    seen: dict[str, Path] = {}
    cflcore: set[str] = set()
    sources = []
    while todo:
        module = todo.pop()
        path = module_source(module) if module not in seen else None
        if path is None:
            continue
        seen[module] = path
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        sources.append((f"{plugin.distribution}:{path.relative_to(base).as_posix()}", _digest(normalised_dump([tree]))))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _statements(tree.body):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(anchor + ([node.module] if node.module else []))
                names = [target, *(f"{target}.{a.name}" for a in node.names)]
            for name in names:
                bits = name.split(".")
                if bits[0] == PACKAGE:
                    cflcore |= {p for p in (".".join(bits[: i + 1]) for i in range(len(bits))) if p in graph["modules"]}
                elif bits[0] == top:
                    todo.extend(".".join(bits[: i + 1]) for i in range(len(bits)))
    return sorted(set(sources)), cflcore


@cache
def _code_version(stage: str, plugins: tuple[tuple[str, Any], ...], root: Path) -> str:
    graph = package_graph(root)
    external = selected(dict(plugins))
    if not external:
        return version_in(graph, stage, dict(plugins))
    own = {kind: name for kind, name in plugins if kind not in external}
    sources: set[tuple[str, str]] = set()
    extra: set[str] = {EXTERNAL_MODULE}
    for found in external.values():
        for plugin in found:
            if plugin.module.split(".")[0] == PACKAGE:  # shipped with cflcore (cflcore.external.BUNDLED): in the graph
                parts = plugin.module.split(".")
                extra |= {p for p in (".".join(parts[: i + 1]) for i in range(len(parts))) if p in graph["modules"]}
                continue
            files, modules = external_sources(plugin, graph)
            sources |= set(files)
            extra |= modules
    selection = {**own, **{kind: EXTERNAL for kind in external}}
    modules = modules_in(graph, stage, selection, extra)
    h = hashlib.sha256()
    for path, digest in sorted(set(_sources_of(graph, stage, modules)) | sources):
        h.update(f"{path}\0{digest}\0".encode())
    return h.hexdigest()[:16]


def code_version(stage: str, plugins: Mapping[str, Any] | None = None, root: Path = PKG) -> str:
    """A short SHA-256 over what a job of ``stage`` runs (:func:`job_sources`), for the plug-ins it selects
    (registry kind -> name; a train job: ``{"method": ..., "model": ...}``); computed once per process and
    selection (every Snakemake parse calls it for each job). Where the selection names external plug-ins
    (cflcore.external: a kind -> a name, or a tuple of names), their own sources (:func:`external_sources`) and what
    they import of the package replace that kind's built-in modules; a selection of built-in plug-ins only hashes
    exactly as before."""
    return _code_version(stage, tuple(sorted((plugins or {}).items())), Path(root))
