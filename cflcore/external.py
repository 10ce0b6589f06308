"""Plug-ins from installed distributions (docs/extending.md): a lab's strategies, split generators, datasets, models,
clusterers and paper checks, in its own package, found through Python entry points, one group per kind
(:data:`ENTRY_POINT_GROUPS`), never by importing them.

A distribution declares, in its ``pyproject.toml``::

    [project.entry-points."cflcore.strategies"]
    labmethod = "lab_cfl.strategy"

the entry point's name is the plug-in's name in a config, its value the module whose source registers that name
with the kind's decorator, as a built-in module does (``@register_strategy("labmethod")``; cflcore.registry
``PLUGIN_SOURCES``, ``@register_paper("<id>")`` for a paper). What this module does, all without importing a plug-in:

* lists each kind's external plug-ins (:func:`installed`) from the distributions' metadata, each with its
  distribution's name and version and the file of its module (found on ``sys.path`` as the import system would, but
  not imported), and refuses, in one line naming both, a name two distributions register or one that shadows a
  built-in name, and an entry point whose module's source does not register its name;
* checks config names against the built-in and the external names (:func:`check_name`), so config validation, and
  ``snakemake -n`` with it, imports neither torch nor a plug-in;
* imports, in a job, exactly the external plug-ins the job selects (:func:`activate`, called by the workflow scripts
  and ``cfl`` before the stage runs), logging each with its distribution and version: the registries then find them
  as they find a built-in one, by name. A job's code hash covers the source of the external plug-ins it selects
  (cflcore.provenance.code_version), and only theirs.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import logging
from dataclasses import dataclass
from importlib import metadata
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import ConfigError
from .registry import PLUGIN_SOURCES, declared_modules, registered_in_source

log = logging.getLogger("cflcore")

ENTRY_POINT_GROUPS: dict[str, str] = {
    # kind (the registries' kind, cflcore.registry.PLUGIN_SOURCES; "paper": cflcore.report.papers.base.PAPERS)
    # -> the entry-point group a distribution declares it in
    "method": "cflcore.strategies",
    "split generator": "cflcore.split_generators",
    "dataset": "cflcore.datasets",
    "model": "cflcore.models",
    "clusterer": "cflcore.clusterers",
    "paper": "cflcore.papers",
}
BUNDLED: dict[str, dict[str, str]] = {
    # plug-ins shipped with cflcore outside its registries' packages, loaded as an installed distribution's are: a job
    # imports them only when it selects them, so adding them changed no built-in study's code hash
    "dataset": {"table": "cflcore.federation.table"},  # a federation from a file (cflcore/federation/)
    "split generator": {"natural": "cflcore.federation.natural"},
}
BUNDLED_DISTRIBUTION = "cfl-pipeline"
PAPER_KIND = "paper"
PAPER_DECORATOR = "register_paper"  # cflcore.paper_sources.PAPER_DECORATOR


@dataclass(frozen=True)
class ExternalPlugin:
    """One plug-in of an installed distribution: its kind and name, the module registering it, the distribution's
    name and version, and the module's source file."""

    kind: str
    name: str
    module: str
    distribution: str
    version: str
    source: Path

    def describe(self) -> str:
        return f"{self.distribution} {self.version} ({self.module})"

    def record(self) -> dict[str, str]:
        """What provenance records of it (the validated config's ``plugin_facts``, the job's log)."""
        return {"distribution": self.distribution, "version": self.version, "module": self.module}


def decorator_of(kind: str) -> str:
    return PAPER_DECORATOR if kind == PAPER_KIND else PLUGIN_SOURCES[kind][1]


def module_source(module: str) -> Path | None:
    """The source file of ``module`` as ``import`` would find it on ``sys.path``, without importing it or its
    packages (None where there is none): each package level is looked up in its parent's folders."""
    parts = module.split(".")
    path: list[str] | None = None
    spec = None
    for i in range(len(parts)):
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), path)
        if spec is None:
            return None
        path = list(spec.submodule_search_locations or [])
    origin = getattr(spec, "origin", None)
    return Path(origin) if origin and origin.endswith(".py") else None


def _builtin(kind: str) -> dict[str, str]:
    """Built-in name -> where it is registered (a cflcore module)."""
    if kind == PAPER_KIND:
        from .paper_sources import declared_papers

        return {name: "cflcore.report.papers" for name in declared_papers()}
    return dict(declared_modules(kind))


def _own_version() -> str:
    try:
        return metadata.version(BUNDLED_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "source"


@functools.cache
def installed(kind: str) -> dict[str, ExternalPlugin]:
    """Name -> the external plug-in of ``kind`` (module docstring); ConfigError on a name registered twice or
    shadowing a built-in one, or an entry point whose module does not register its name."""
    builtin = _builtin(kind)
    found: dict[str, ExternalPlugin] = {}
    for name, module in BUNDLED.get(kind, {}).items():
        found[name] = ExternalPlugin(kind, name, module, BUNDLED_DISTRIBUTION, _own_version(), module_source(module))
        builtin[name] = module
    group = ENTRY_POINT_GROUPS[kind]
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: (e.name, e.value)):
        dist = ep.dist
        name, version = (str(dist.metadata["Name"]), str(dist.version)) if dist is not None else ("?", "?")
        where = f"entry point {group}:{ep.name} of {name} {version}"
        source = module_source(ep.module)
        if source is None:
            raise ConfigError(f"{where}: module {ep.module!r} is not on the path; allowed: an importable module")
        plugin = ExternalPlugin(kind, ep.name, ep.module, name, version, source)
        if ep.name in builtin:
            raise ConfigError(f"{kind} {ep.name!r}: {plugin.describe()} shadows the built-in {kind} {ep.name!r} "
                              f"({builtin[ep.name]}); allowed: a name no built-in {kind} has")
        if ep.name in found:
            raise ConfigError(f"{kind} {ep.name!r} is registered by two distributions: {found[ep.name].describe()} "
                              f"and {plugin.describe()}; allowed: one")
        if ep.name not in registered_in_source(source, decorator_of(kind)):
            raise ConfigError(f"{where}: {source} registers no {kind} {ep.name!r}; allowed: a module whose source "
                              f"registers it, @{decorator_of(kind)}({ep.name!r})")
        found[ep.name] = plugin
    return found


def check_installed() -> None:
    """Every group's entry points (:func:`installed`): the first duplicate or shadowing name is a ConfigError."""
    for kind in ENTRY_POINT_GROUPS:
        installed(kind)


def is_bundled(plugin: ExternalPlugin) -> bool:
    return plugin.module in BUNDLED.get(plugin.kind, {}).values()


def _dataset_hook(settings: Mapping[str, Any], hook: str) -> Any:
    """A dataset plug-in module's own ``hook`` (``check_settings``, ``prepare_dataset``), None for a plain loader."""
    plugin = installed("dataset").get(str(settings.get("loader")))
    return None if plugin is None else getattr(importlib.import_module(plugin.module), hook, None)


def check_dataset(settings: Mapping[str, Any], field: str) -> None:
    """Validation of a dataset whose plug-in takes more than a loader's settings: its module's
    ``check_settings(settings, field)`` (a federation table's rows, cflcore/federation/table.py), where it has one."""
    check = _dataset_hook(settings, "check_settings")
    if check is not None:
        check(settings, field)


def dataset_preparer(settings: Mapping[str, Any]) -> Any:
    """The function that writes a dataset's Parquet from its data settings: its plug-in module's own
    ``prepare_dataset(settings, out_path)`` where it has one (it reads settings beyond a loader's), else None (the
    stage's, cflcore.stages.prepare_dataset)."""
    return _dataset_hook(settings, "prepare_dataset")


def known_names(kind: str) -> tuple[str, ...]:
    return tuple(sorted({*_builtin(kind), *installed(kind)}))


def check_name(kind: str, name: str, field: str) -> None:
    """ConfigError ``<field>: unknown <kind> <name>; known: ...`` unless ``name`` is a built-in or an installed
    plug-in of ``kind`` (cflcore.registry.check_declared's message, the external names included)."""
    known = known_names(kind)
    if name not in known:
        raise ConfigError(f"{field}: unknown {kind} {name!r}; known: {', '.join(known)}")


def selected(plugins: Mapping[str, Any]) -> dict[str, list[ExternalPlugin]]:
    """The external plug-ins among a selection (kind -> a name or names); built-in names are left out."""
    out: dict[str, list[ExternalPlugin]] = {}
    for kind, names in plugins.items():
        if kind not in ENTRY_POINT_GROUPS or names is None:
            continue
        for name in [names] if isinstance(names, str) else names:
            plugin = installed(kind).get(str(name))
            if plugin is not None:
                out.setdefault(kind, []).append(plugin)
    return out


def external_only(plugins: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a selection (kind -> name) that names external plug-ins: a stage whose code hash covers every
    built-in plug-in of a kind (``split``, ``prepare_dataset``, ``report``) passes this, so that its built-in hash
    stays what it was."""
    chosen = selected(plugins)
    return {kind: (names if isinstance(names, str) else tuple(sorted(names)))
            for kind, names in plugins.items() if kind in chosen}


def activate(plugins: Mapping[str, Any]) -> None:
    """Import the external plug-ins a job selects (kind -> a name or names; built-in names are skipped), so that
    their registries find them by name, and log each with its distribution and version (the job's provenance).
    Returns None, so that an adapter runs ``activate(...) or stages.<entry>(...)``."""
    for kind, found in selected(plugins).items():
        for plugin in found:
            importlib.import_module(plugin.module)
            log.info("plug-in %s %r from %s, %s", kind, plugin.name, plugin.describe(), plugin.source)


def config_plugins(cfg: Mapping[str, Any]) -> dict[str, set[str]]:
    """Every plug-in name a config names, by kind: its datasets' loaders and models, split generators, variants'
    methods, models and clusterers, and the papers it checks."""
    names: dict[str, set[str]] = {kind: set() for kind in ENTRY_POINT_GROUPS}
    for dname, ds in (cfg.get("datasets") or {}).items():
        names["dataset"].add(str(ds.get("loader", dname)))
        names["model"].add(str(ds.get("model")))
    for sp in (cfg.get("splits") or {}).values():
        names["split generator"].add(str(sp.get("generator")))
    variants = list((cfg.get("algorithms") or {}).values())
    variants += [o for ds in (cfg.get("datasets") or {}).values() for o in (ds.get("algorithm_params") or {}).values()]
    for v in variants:
        if v.get("method") is not None:
            names["method"].add(str(v["method"]))
        if isinstance(v.get("clusterer"), str):
            names["clusterer"].add(v["clusterer"])
        if isinstance((v.get("training") or {}).get("model"), str):
            names["model"].add(v["training"]["model"])
    names["paper"] |= {str(p) for p in ((cfg.get("report") or {}).get("paper_checks") or [])}
    return names


def config_records(cfg: Mapping[str, Any]) -> dict[str, dict[str, dict[str, str]]]:
    """kind -> name -> :meth:`ExternalPlugin.record` of every external plug-in a config names (empty for a study of
    built-in plug-ins only)."""
    return {kind: {p.name: p.record() for p in found} for kind, found in sorted(selected(config_plugins(cfg)).items())}


def package_files(plugin: ExternalPlugin) -> list[Path]:
    """Every Python file of the top-level package that holds the plug-in's module (what its validation reads)."""
    top = module_source(plugin.module.split(".")[0])
    if top is None:
        return [plugin.source]
    return sorted(top.parent.rglob("*.py")) if top.name == "__init__.py" else [top]


def fingerprint(plugins: Iterable[ExternalPlugin] | None = None) -> str:
    """SHA-256 over every installed external plug-in (or ``plugins``): its kind, name, distribution, version and
    the bytes of its package's files; part of the key a validated config is remembered under."""
    h = hashlib.sha256()
    chosen = plugins if plugins is not None else [p for kind in ENTRY_POINT_GROUPS for p in installed(kind).values()
                                                  if not is_bundled(p)]  # cflcore's own files are keyed already
    for plugin in chosen:
        h.update(f"{plugin.kind}\0{plugin.name}\0{plugin.distribution}\0{plugin.version}\0".encode())
        for f in package_files(plugin):
            h.update(str(f).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()
