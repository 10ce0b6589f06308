"""Load, default and validate a study config; resolve the settings of one scenario or run.

Validation happens in three passes, all before any job starts:
1. the JSON schema (``cflcore/schemas/config.schema.yaml``, also ``config/schema.yaml``), which
   Snakemake's ``validate()`` applies too and which fills defaults;
2. name checks against the plug-in names declared by their registration decorators, read from source
   (``cflcore.registry.declared_names``): dataset
   loaders, models, split generators, methods, clusterers (of variants and of ``whatif``) and the papers of
   ``report.paper_checks`` (``cflcore.paper_sources``). They
   import no plug-in: ``validate_config(cfg, plugins=False)`` never imports torch or the engine;
3. with ``plugins=True`` (the default; the workflow and the CLI), registry checks that need the plug-in
   classes: each algorithm variant against its strategy plug-in's own ``params_schema``, split generator
   parameters, and each ``whatif`` clusterer against its clusterer's ``params_schema``.
Three more passes check what the fields mean together (:func:`_check_study`, after pass 3: no empty grid, every
name a study entry gives is in the study, participation samples a client), what they name across the config
(cflcore.config_checks.check_cross_references: claim ids, cross-paper settings, a client for every group of a split)
and what the machine and the data can give (:func:`check_feasible`, last, never remembered by
:func:`validate_config_cached`: the results directory can be written, and every request fits what each dataset's
loader declares without reading an image, cflcore.config_checks.check_data_requests: classes, samples per client,
batches, files on disk or allowed to download).
Every error is one line naming the dotted field and the allowed values.

The settings functions below (``run_settings``, ``data_settings``, ...) take a validated config: pass 1 filled
every default of the schema once, so none of them applies one again.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import yaml

from .config_checks import REFUSE, WARN, check_cross_references, check_data_requests, entry_field
from .defaults import config_defaults, device_identity, schema_defaults
from .errors import ConfigError
from .layout import scenario_id
from .plugin import CLUSTER_COUNT_KEYS, PLUGIN_FACTS_KEY, Population, check_finite, schema_check
from .paper_sources import check_paper
from .registry import check_declared, declared_names
from .settings import NOT_TRAINING
from .sweep_expansion import expand_sweeps

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.yaml"


def load_schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def load_config(*paths: str | Path, overrides: Mapping[str, Any] | None = None,
                missing_data: str = WARN) -> dict[str, Any]:
    """Read YAML files (later ones deep-update earlier ones, as Snakemake merges ``--configfile``),
    validate, fill defaults (``missing_data``: :func:`validate_config`'s)."""
    cfg: dict[str, Any] = {}
    for p in paths:
        deep_update(cfg, read_config_file(p))
    if overrides:
        deep_update(cfg, dict(overrides))
    return validate_config(cfg, missing_data=missing_data)


EXTENDS_KEY = "extends"
STUDY_OWN_REPORT_KEY = "claim_notes"  # report.<this> is never inherited through extends: (read_config_file)


def read_config_file(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """One YAML config file, with its ``extends: <file>`` resolved: the extended file (a path relative to this
    one, itself possibly extending another) first, this file's keys deep-merged over it. This is how an
    offline study stays the same study as its paper-scale config (config/louvain-002-offline.yaml extends
    config/louvain-002.yaml and overrides only the data and the budget).

    Everything is inherited except ``report.claim_notes``: a note explains why a claim does or does not hold on
    the runs of the study that wrote it, so the extended file's notes would describe runs this study never made
    (config/fedgwc-004-domains.yaml extends the offline study, whose notes explain its 30-client runs)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file holds a mapping of keys; got {type(data).__name__}")
    base = data.pop(EXTENDS_KEY, None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"{path}: {EXTENDS_KEY}: {base!r} is not allowed; allowed: the path of another config file")
    target = (path.parent / base).resolve()
    if target in _seen or target == path.resolve():
        raise ConfigError(f"{path}: {EXTENDS_KEY}: {base!r} extends itself through {' -> '.join(map(str, _seen))}")
    inherited = read_config_file(target, (*_seen, path.resolve()))
    if isinstance(inherited.get("report"), dict):
        inherited["report"].pop(STUDY_OWN_REPORT_KEY, None)
    return deep_update(inherited, data)


def _extends_another(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False  # Snakemake reports it
    return isinstance(data, dict) and EXTENDS_KEY in data


def snakemake_config(config: Mapping[str, Any], snakefile_files: Sequence[str | Path],
                     cli_files: Sequence[str | Path], cli_overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The config Snakemake would have merged (the Snakefile's ``configfile:``, then ``--configfile`` files in
    order, then ``--config`` key=value overrides), with every file's ``extends:`` resolved first. Returns
    ``config`` itself when no file extends another (Snakemake's own merge is then exact)."""
    files = [Path(f) for f in [*snakefile_files, *cli_files]]
    if not any(_extends_another(f) for f in files):
        return dict(config)
    merged: dict[str, Any] = {}
    for f in files:
        deep_update(merged, read_config_file(f))
    return deep_update(merged, dict(cli_overrides or {}))


def deep_update(base: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict update, the way Snakemake merges config files."""
    for k, v in new.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def _fill_defaults(schema: Mapping[str, Any], inst: Any) -> None:
    """Fill ``default`` values of the schema into ``inst`` (objects only, recursively)."""
    if not isinstance(inst, dict):
        return
    for key, sub in (schema.get("properties") or {}).items():
        if key not in inst and "default" in sub:
            inst[key] = copy.deepcopy(sub["default"])
        if key in inst:
            _fill_defaults(sub, inst[key])
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, val in inst.items():
            if key not in (schema.get("properties") or {}):
                _fill_defaults(extra, val)


def validate_config(cfg: Mapping[str, Any], plugins: bool = True, missing_data: str = WARN) -> dict[str, Any]:
    """Validate a config dict and return a copy with defaults filled in (passes 1–3 of the module
    docstring; ``plugins=False`` stops after the name checks and imports no plug-in). ``missing_data``: what a
    dataset neither on disk nor allowed to download gets (:func:`check_feasible`)."""
    cfg = copy.deepcopy(dict(cfg))
    if isinstance(cfg.get("whatif"), dict):
        cfg["whatif"].pop(OWN_CLUSTERERS_KEY, None)  # derived by pass 3, never given
    cfg.pop(DECLARED_INPUTS_KEY, None)  # idem
    cfg.pop(PLUGIN_FACTS_KEY, None)  # idem
    schema = load_schema()
    check_finite(cfg)
    schema_check(cfg, schema)
    _fill_defaults(schema, cfg)
    expand_sweeps(cfg, engine_options=list(schema["properties"]["engine"]["properties"]))
    _check_names(cfg)
    if plugins:
        _check_registries(cfg)
        _check_whatif_params(cfg.get("whatif") or {})
    if cfg["monitor"]["tensorboard"]:  # the optional extra (cflcore.fl.progress.TensorBoardMonitor)
        from .extras import check_tensorboard

        check_tensorboard()
    _check_study(cfg)  # after each entry's own checks: an entry's error is named before a combination's
    check_cross_references(cfg, scenarios(cfg), _split_params(cfg))
    check_feasible(cfg, missing_data)
    return cfg


def _split_params(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: split_settings(cfg, name) for name in cfg["splits"]}


# Distributions whose presence or version a plug-in check consults (clusterer and model availability,
# estimator signatures); part of the key under which a validated config is remembered.
VALIDATION_LIBRARIES = ("scikit-learn", "hdbscan", "leidenalg", "igraph", "networkx", "torch", "torchvision", "captum",
                        "tensorboard")


def validation_key(cfg: Mapping[str, Any]) -> str:
    """SHA-256 over the config, every source file of cflcore and the versions of :data:`VALIDATION_LIBRARIES`:
    what :func:`validate_config`'s result depends on."""
    import hashlib
    from importlib import metadata

    from .io import canonical_json

    h = hashlib.sha256(canonical_json(cfg).encode())
    package = Path(__file__).resolve().parent
    for f in sorted(package.rglob("*")):
        if f.is_file() and f.suffix in (".py", ".yaml") and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(package)).encode())
            h.update(f.read_bytes())
    for name in VALIDATION_LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{name}={version}".encode())
    return h.hexdigest()


def validate_config_cached(cfg: Mapping[str, Any], cache_dir: str | Path, dry_run: bool = False) -> dict[str, Any]:
    """:func:`validate_config`, remembered in ``cache_dir`` under :func:`validation_key`.

    Pass 3 imports the plug-ins (torch, scikit-learn: ~3.5 s), which every Snakemake start paid, dry runs
    included. The result is a pure function of the key, so a config validated once with the same code and
    libraries is read back instead. A config that fails is never remembered; a result that does not survive
    a JSON round trip unchanged is not either. A dataset neither on disk nor allowed to download is refused, but
    only told in a ``dry_run`` (``snakemake -n`` plans as asked)."""
    import json

    from .io import write_json

    path = Path(cache_dir) / f"{validation_key(cfg)}.json"
    missing = WARN if dry_run else REFUSE
    if path.is_file():
        try:
            validated = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            pass  # unreadable: validate again and rewrite it
        else:
            check_feasible(validated, missing)  # the machine may have changed since (pass 4 is never remembered)
            return validated
    validated = validate_config(cfg, missing_data=missing)
    try:
        exact = json.loads(json.dumps(validated)) == validated
    except (TypeError, ValueError):
        exact = False
    if exact:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(validated, path)
    return validated


def _check_names(cfg: dict[str, Any]) -> None:
    """Pass 2: references between sections, and plug-in names against the names their sources declare."""
    study = cfg["study"]
    for i, name in enumerate(study["datasets"]):
        if name not in cfg["datasets"]:
            raise ConfigError(
                f"study.datasets[{i}]: {name!r} has no entry under datasets:; defined: {', '.join(sorted(cfg['datasets']))}"
            )
    for name, ds in cfg["datasets"].items():
        check_declared("dataset", ds.get("loader", name), field=f"datasets.{name}.loader")
        check_declared("model", ds["model"], field=f"datasets.{name}.model")
    for i, name in enumerate(study["splits"]):
        if name not in cfg["splits"]:
            raise ConfigError(f"study.splits[{i}]: unknown split {name!r}; defined: {', '.join(sorted(cfg['splits']))}")
    for name, sp in cfg["splits"].items():
        check_declared("split generator", sp["generator"], field=f"splits.{name}.generator")
    for name, ds in cfg["datasets"].items():
        for i, split in enumerate(ds.get("splits") or []):
            if split not in cfg["splits"]:
                raise ConfigError(f"datasets.{name}.splits[{i}]: unknown split {split!r}; defined: {', '.join(sorted(cfg['splits']))}")
    study["algorithms"] = list(sorted(cfg["algorithms"]) if study.get("algorithms") is None else study["algorithms"])
    for i, name in enumerate(study["algorithms"]):
        if name not in cfg["algorithms"]:
            raise ConfigError(
                f"study.algorithms[{i}]: unknown algorithm {name!r}; defined: {', '.join(sorted(cfg['algorithms']))}"
            )
    variants = [(f"algorithms.{name}", variant) for name, variant in cfg["algorithms"].items()]
    variants += [(f"datasets.{d}.algorithm_params.{a}", {**cfg["algorithms"].get(a, {"method": "?"}), **override})
                 for d, ds in cfg["datasets"].items() for a, override in (ds.get("algorithm_params") or {}).items()
                 if a in cfg["algorithms"]]
    for field, variant in variants:
        check_declared("method", variant["method"], field=f"{field}.method")
        if isinstance(variant.get("clusterer"), str):  # OCFL's clusterer (any method's ``clusterer`` key)
            check_declared("clusterer", variant["clusterer"], field=f"{field}.clusterer")
    for i, paper in enumerate((cfg.get("report") or {}).get("paper_checks") or []):
        check_paper(str(paper), field=f"report.paper_checks[{i}]")
    _check_whatif_names(cfg.get("whatif") or {})


def _check_registries(cfg: dict[str, Any]) -> None:
    """Pass 3 (names and references were checked by :func:`_check_names`): parameters against the plug-in
    classes' own schemas and checks."""
    from .data.splits import SPLIT_GENERATORS

    for name, sp in cfg["splits"].items():
        field = entry_field(cfg, "splits", name)
        generator_params = {k: v for k, v in sp.items() if k not in SPLIT_STUDY_KEYS}  # the study's, not the generator's
        SPLIT_GENERATORS.get(sp["generator"], field=f"{field}.generator").validate_params(generator_params, field=field)
    for name, variant in cfg["algorithms"].items():
        cfg["algorithms"][name] = _check_variant(variant, entry_field(cfg, "algorithms", name), list(cfg["splits"]))
    for dname, ds in cfg["datasets"].items():
        for aname, override in (ds.get("algorithm_params") or {}).items():
            field = f"datasets.{dname}.algorithm_params.{aname}"
            if aname not in cfg["algorithms"]:
                raise ConfigError(f"{field}: unknown algorithm {aname!r}; defined: {', '.join(sorted(cfg['algorithms']))}")
            if "method" in override:
                raise ConfigError(f"{field}.method: the method of a variant cannot be overridden per dataset")
            _check_variant({**cfg["algorithms"][aname], **override}, field)
    _check_cluster_counts(cfg)
    _check_population(cfg)
    cfg["whatif"][OWN_CLUSTERERS_KEY] = _own_clusterers(cfg)
    cfg[DECLARED_INPUTS_KEY] = _declared_inputs_by_run(cfg)
    cfg[PLUGIN_FACTS_KEY] = _plugin_facts(cfg)


def _variant_instances(cfg: Mapping[str, Any], name: str) -> list[tuple[dict[str, Any], str]]:
    """Variant ``name`` as it runs: its own parameters, and each dataset's ``algorithm_params`` override of
    them, each with the config field it comes from."""
    variant = cfg["algorithms"][name]
    return [(variant, f"algorithms.{name}")] + [
        ({**variant, **ds["algorithm_params"][name]}, f"datasets.{d}.algorithm_params.{name}")
        for d, ds in cfg["datasets"].items() if name in (ds.get("algorithm_params") or {})]


def _check_cluster_counts(cfg: Mapping[str, Any]) -> None:
    """A fixed number of clusters above the study's smallest client count is a config error, not a silent
    clamp (``k: 99`` with 15 clients used to run as 15 singleton clusters)."""
    smallest = min(int(n) for n in cfg["study"]["clients"])
    for name in cfg["study"]["algorithms"]:
        for params, field in _variant_instances(cfg, name):
            for key in CLUSTER_COUNT_KEYS:
                value = params.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > smallest:
                    raise ConfigError(f"{field}.{key}: {value} is not allowed with {smallest} clients (study.clients); "
                                      f"allowed: {_named_values(params['method'], key)}an integer from 1 to {smallest}")


def _named_values(method: str, key: str) -> str:
    """``'oracle' or `` when the method's schema of ``key`` admits the constant ``oracle`` beside integers."""
    from .strategies import STRATEGIES

    sub = STRATEGIES.get(method).params_schema.get(key, {})
    return "".join(f"{alt['const']!r} or " for alt in sub.get("oneOf", []) + sub.get("anyOf", []) if "const" in alt)


def _check_population(cfg: Mapping[str, Any]) -> None:
    """A plug-in's ``check_population(params, n_clients, field)`` hook (e.g. OCFL's ``late_clients`` must leave
    two founding clients) against every client count of the study."""
    from .strategies import STRATEGIES

    for name in cfg["study"]["algorithms"]:
        cls = STRATEGIES.get(cfg["algorithms"][name]["method"])
        for params, field in _variant_instances(cfg, name):
            for n in cfg["study"]["clients"]:
                cls.check_population(strategy_params(params), int(n), field)


def _check_study(cfg: Mapping[str, Any]) -> None:
    """Cross-field checks that need no plug-in and no data: a grid that plans runs, study entries that name
    only what the study runs, and a participation that samples a client in every run."""
    study = cfg["study"]
    in_study = set(study["splits"])
    for section, names in (("datasets", study["datasets"]), ("algorithms", study["algorithms"])):
        for name in names:
            only = cfg[section][name].get("splits")
            if only and not in_study.intersection(only):
                raise ConfigError(f"{entry_field(cfg, section, name)}.splits: {only} names no split of the study, so "
                                  f"{name!r} would run nowhere; allowed: at least one of {', '.join(study['splits'])} "
                                  f"(study.splits)")
    for i, name in enumerate((cfg.get("whatif") or {}).get("algorithms") or []):
        if name not in study["algorithms"]:
            raise ConfigError(f"whatif.algorithms[{i}]: {name!r} is not a variant of the study, so it gets no what-if "
                              f"replay; allowed: {', '.join(study['algorithms'])} (study.algorithms)")
    runs = study_runs(cfg)
    if not runs:
        raise ConfigError(f"study: the grid plans no run (datasets {study['datasets']}, splits {study['splits']}, "
                          f"algorithms {study['algorithms']}); allowed: a dataset and a variant that share a split")
    planned = {a for _, a in runs}
    for i, name in enumerate(study["algorithms"]):
        if name not in planned:
            raise ConfigError(f"study.algorithms[{i}]: {name!r} runs on no split of the study "
                              f"({entry_field(cfg, 'algorithms', name)}.splits); allowed: a variant with a run")
    counts = sorted({s["clients"] for s, _ in runs})
    for i, n in enumerate((study.get("explain") or {}).get("clients") or []):
        if n not in counts:
            raise ConfigError(f"study.explain.clients[{i}]: {n} is not a client count of the study, so nothing is "
                              f"explained for it; allowed: {', '.join(map(str, counts))}")
    for scenario, algorithm in runs:
        _check_participation(cfg, scenario, algorithm)


def _check_participation(cfg: Mapping[str, Any], scenario: Mapping[str, Any], algorithm: str) -> None:
    """The engine samples round(participation × clients) clients a round (cflcore.fl.run.sample_clients): that must
    be at least one, or the run would silently train one client where the config asks for none."""
    d, sp, n = scenario["dataset"], scenario["split"], int(scenario["clients"])
    p = float(run_settings(cfg, d, algorithm, sp)["engine"]["participation"])
    if p >= 1.0 or round(p * n) >= 1:
        return
    override = (cfg["datasets"][d].get("algorithm_params") or {}).get(algorithm) or {}
    if "participation" in (override.get("engine") or {}):
        field = f"datasets.{d}.algorithm_params.{algorithm}.engine.participation"
    elif "participation" in (cfg["algorithms"][algorithm].get("engine") or {}):
        field = f"{entry_field(cfg, 'algorithms', algorithm)}.engine.participation"
    elif "participation" in cfg["splits"][sp]:
        field = f"{entry_field(cfg, 'splits', sp)}.participation"
    else:
        field = "engine.participation"
    raise ConfigError(f"{field}: {p} samples no client of {n} (round({p} × {n}) = 0; run {d}/{sp}/{algorithm}); "
                      f"allowed: a participation above {0.5 / n:.4g} with {n} clients")


def check_feasible(cfg: Mapping[str, Any], missing_data: str = WARN) -> None:
    """What the machine must give a validated config (never remembered: the disk and the data may change): a
    results directory that can be created and written, and data that fills every request of the study
    (cflcore.config_checks.check_data_requests: classes, samples per client, batches, files on disk or allowed to
    download; ``missing_data``: REFUSE or WARN of missing files). Reads no data and writes nothing."""
    _check_writable_dir(str(cfg["results_dir"]), "results_dir")
    check_data_requests(cfg, scenarios(cfg), {d: data_settings(cfg, d) for d in cfg["study"]["datasets"]},
                        _split_params(cfg), missing_data)


def _check_writable_dir(value: str, field: str) -> None:
    """``value`` is a directory this process can write, or one it can create: its nearest existing ancestor is a
    writable directory. Nothing is created (parsing the Snakefile never changes files)."""
    import os

    path = Path(value).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists() or p == p.parent)
    if not existing.is_dir():
        raise ConfigError(f"{field}: {value!r} cannot be created: {str(existing)!r} is not a directory; "
                          f"allowed: a directory this user can write, or a new one under such a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == path else f"cannot be created in {str(existing)!r} (not writable)"
        raise ConfigError(f"{field}: {value!r} {what}; allowed: a directory this user can write, or a new one "
                          f"under such a directory")


STUDY_KEYS = ("splits", "engine")
"""Keys of an algorithm variant that belong to the study, not to the strategy: ``splits`` restricts the
variant to some splits of the grid (default: all); ``engine`` overrides engine options for this variant's
runs only (e.g. ``engine: {participation: 0.5}``, or a swept ``engine.participation``). They are stripped
before the strategy is built."""


def strategy_params(variant: Mapping[str, Any]) -> dict[str, Any]:
    """A variant without ``method`` and without the study-level keys (:data:`STUDY_KEYS`)."""
    return {k: v for k, v in variant.items() if k != "method" and k not in STUDY_KEYS}


def algorithm_splits(cfg: Mapping[str, Any]) -> dict[str, list[str]]:
    """algorithm -> the splits its variant is restricted to (only variants with a ``splits:`` list)."""
    return {str(a): list(v["splits"]) for a, v in (cfg.get("algorithms") or {}).items() if v.get("splits")}


def _check_variant(variant: Mapping[str, Any], field: str, split_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Validate one algorithm variant against its plug-in's ``params_schema``; return it with defaults.
    The study-level ``splits`` list is checked here against the defined split names and kept aside."""
    from .strategies import STRATEGIES

    cls = STRATEGIES.get(variant["method"], field=f"{field}.method")
    study_keys = {k: variant[k] for k in STUDY_KEYS if k in variant}
    for i, split in enumerate(study_keys.get("splits") or []):
        if split_names is not None and split not in split_names:
            raise ConfigError(f"{field}.splits[{i}]: unknown split {split!r}; defined: {', '.join(sorted(split_names))}")
    if "engine" in study_keys:
        engine_schema = load_schema()["properties"]["engine"]
        schema_check(study_keys["engine"], engine_schema, prefix=f"{field}.engine.")
    params = cls.validate_params(strategy_params(variant), field)
    return {"method": variant["method"], **params, **study_keys}


# ---------------------------------------------------------------------------------------------
# The what-if replay: which clusterers a ``whatif`` job replays
# ---------------------------------------------------------------------------------------------
WHATIF_IMPORT_PATH = re.compile(r"^(sklearn\.cluster|hdbscan)\.([A-Za-z][A-Za-z0-9_]*)$")
"""An sklearn-style import path a what-if entry may name: only ``sklearn.cluster.<Class>`` (Class on
``cflcore.clustering.clusterers.SKLEARN_ALLOWLIST``) and ``hdbscan.HDBSCAN``. The string is matched,
never imported or evaluated."""
WHATIF_ENTRY_KEYS = ("name", "clusterer", "select_k", "k_max")  # every other key is a clusterer parameter
WHATIF_REPLAYABLE_FEATURES = ("divergence_rows", None)  # runs record Γ and Gram matrices, never the deltas


def _whatif_allowed() -> str:
    return (f"{', '.join(sorted(declared_names('clusterer')))}, or an import path "
            f"sklearn.cluster.<Class> or hdbscan.HDBSCAN")


def _check_whatif_names(whatif: Mapping[str, Any]) -> None:
    """Each ``whatif.clusterers`` entry names a declared clusterer or an allowed import path, once."""
    seen: set[str] = set()
    for i, entry in enumerate(whatif.get("clusterers") or []):
        field = f"whatif.clusterers[{i}]"
        name = entry["clusterer"]
        if not WHATIF_IMPORT_PATH.match(name) and name not in declared_names("clusterer"):
            raise ConfigError(f"{field}.clusterer: unknown clusterer {name!r}; allowed: {_whatif_allowed()}")
        if entry["name"] in seen:
            raise ConfigError(f"{field}.name: {entry['name']!r} is used twice; each what-if clusterer needs its own name")
        seen.add(entry["name"])


def whatif_clusterer_params(entry: Mapping[str, Any], field: str) -> dict[str, Any]:
    """The ``cflcore.clustering`` clusterer parameters of one ``whatif.clusterers`` entry: its keys minus
    :data:`WHATIF_ENTRY_KEYS`, with ``clusterer`` a registered name. ``sklearn.cluster.<Class>`` becomes
    ``{clusterer: sklearn, estimator: <Class>}`` (keyword arguments under ``clusterer_params``) and
    ``hdbscan.HDBSCAN`` becomes ``{clusterer: hdbscan, backend: hdbscan}`` (the ``hdbscan`` package)."""
    params = {k: copy.deepcopy(v) for k, v in entry.items() if k not in WHATIF_ENTRY_KEYS}
    name = str(entry["clusterer"])
    match = WHATIF_IMPORT_PATH.match(name)
    if match is None:
        return {"clusterer": name, **params}
    module, cls = match.groups()
    if module == "hdbscan":
        if cls != "HDBSCAN" or "backend" in params:
            raise ConfigError(f"{field}.clusterer: {name!r} is not allowed; allowed from the hdbscan package: "
                              f"hdbscan.HDBSCAN (without a backend key)")
        return {"clusterer": "hdbscan", "backend": "hdbscan", **params}
    if "estimator" in params:
        raise ConfigError(f"{field}.estimator: not allowed beside the import path {name!r}; allowed: no estimator key")
    return {"clusterer": "sklearn", "estimator": cls, **params}


def _check_whatif_params(whatif: Mapping[str, Any]) -> None:
    """Pass 3 for ``whatif``: each entry against its clusterer's ``params_schema`` and ``check_params``."""
    from .clustering.clusterers import CLUSTERERS, sklearn_estimator_class

    for i, entry in enumerate(whatif.get("clusterers") or []):
        field = f"whatif.clusterers[{i}]"
        params = whatif_clusterer_params(entry, field)
        cls = CLUSTERERS.get(params["clusterer"], field=f"{field}.clusterer")
        if params["clusterer"] == "sklearn":
            sklearn_estimator_class(str(_sklearn_estimator(params)), field=f"{field}.clusterer")
        properties = {**cls.params_schema, "clusterer": {"type": "string"},
                      "features": {"enum": list(WHATIF_REPLAYABLE_FEATURES)}}
        schema_check(params, {"type": "object", "additionalProperties": False, "properties": properties},
                     prefix=f"{field}.")
        cls.check_params(params, field)
        if entry.get("select_k") and not _has_cluster_count(params):
            raise ConfigError(f"{field}.select_k: clusterer {entry['clusterer']!r} has no number of clusters to "
                              f"select; allowed with: kmeans, or an sklearn estimator with n_clusters")


def _has_cluster_count(params: Mapping[str, Any]) -> bool:
    if params["clusterer"] == "kmeans":
        return True
    if params["clusterer"] != "sklearn":
        return False
    from .clustering.clusterers import sklearn_estimator_class

    return "n_clusters" in sklearn_estimator_class(str(_sklearn_estimator(params)))().get_params()


def _sklearn_estimator(params: Mapping[str, Any]) -> str:
    """The estimator class name of an ``sklearn`` clusterer entry (its schema's default when not given)."""
    from .clustering.clusterers import CLUSTERERS

    return str({**schema_defaults(CLUSTERERS.get("sklearn").params_schema), **params}["estimator"])


def own_clusterer(variant: Mapping[str, Any]) -> dict[str, Any] | None:
    """The clusterer a run itself used, as clusterer parameters, when it can be replayed from recorded
    matrices: its method's ``replay_clusterer`` hook (cflcore.strategies.base.Strategy; each method's own file says
    what it replays) on the variant's parameters with defaults. None when the method's clustering cannot be
    replayed. Imports the strategy plug-ins: validation (pass 3) stores the result (:data:`OWN_CLUSTERERS_KEY`)."""
    from .strategies import STRATEGIES

    cls = STRATEGIES.get(variant["method"])
    return cls.replay_clusterer(cls.with_defaults(strategy_params(variant)))


OWN_CLUSTERERS_KEY = "own_clusterers"
"""``whatif.own_clusterers``: ``{"<dataset>/<algorithm>": own_clusterer(...)}``, derived by validation pass 3 (which
imports the plug-ins anyway), so that building the what-if params at every Snakemake start imports none. Dropped
and derived again whenever a config is validated."""


def _own_clusterers(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {f"{d}/{a}": own_clusterer(run_settings(cfg, d, a)["algorithm"]) for d in cfg["datasets"] for a in cfg["algorithms"]}


def whatif_settings(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, Any]:
    """Everything a ``whatif`` job depends on besides its input files: the matrix choice, the resolved
    clusterer list and the run's own clusterer (``run:<name>``). ``enabled`` and ``algorithms`` (which
    runs get a job) are left out, so changing them adds or drops jobs without rerunning the others."""
    whatif = cfg["whatif"]
    k_max = config_defaults("whatif.clusterers[]")["k_max"]  # an array's items get no default at validation
    clusterers = [{"name": e["name"], "params": whatif_clusterer_params(e, f"whatif.clusterers[{i}]"),
                   "select_k": e.get("select_k"), "k_max": int(e["k_max"]) if "k_max" in e else k_max, "own": False}
                  for i, e in enumerate(whatif["clusterers"] or [])]
    own = None
    if whatif["replay_own"]:
        stored = whatif.get(OWN_CLUSTERERS_KEY)
        key = f"{dataset}/{algorithm}"
        own = stored[key] if stored and key in stored else own_clusterer(run_settings(cfg, dataset, algorithm)["algorithm"])
    if own is not None:
        label = "agglomerative" if own["clusterer"] == "sklearn" else own["clusterer"]
        clusterers.append({"name": f"run:{label}", "params": own, "select_k": None, "k_max": k_max, "own": True})
    return {"matrix": whatif["matrix"], "clusterers": clusterers}


def whatif_runs(cfg: Mapping[str, Any]) -> list[str]:
    """``{scenario}/{algorithm}`` of every run that gets a ``whatif`` job: every run of the study (each
    records gram.parquet), or only the variants in ``whatif.algorithms``; none when disabled."""
    whatif = cfg["whatif"]
    if not whatif["enabled"]:
        return []
    only = whatif["algorithms"]
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg) if only is None or a in only]


# ---------------------------------------------------------------------------------------------
# Scenarios and runs
# ---------------------------------------------------------------------------------------------
def dataset_splits(cfg: Mapping[str, Any]) -> dict[str, list[str]]:
    """dataset -> the splits it is restricted to (``datasets.<name>.splits``, study-level; only datasets with
    one)."""
    return {str(d): list(v["splits"]) for d, v in (cfg.get("datasets") or {}).items() if v.get("splits")}


SPLIT_STUDY_KEYS = ("clients", "participation")
"""A split's study-level keys (a setting of its home paper: its client counts and participation), never passed to
its generator: :func:`split_settings` leaves them out."""


def split_clients(cfg: Mapping[str, Any]) -> dict[str, list[int]]:
    """split -> its own client counts (``splits.<name>.clients``, over ``study.clients``; only splits with one)."""
    return {str(k): [int(n) for n in v["clients"]] for k, v in (cfg.get("splits") or {}).items() if v.get("clients")}


def scenarios(cfg: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every scenario of the grid: datasets × splits × clients × seeds, a dataset with a ``splits:`` list
    only on those splits (004's study runs its domain federations on CIFAR-100 only, not on FEMNIST)."""
    s = cfg["study"]
    only = dataset_splits(cfg)
    own_clients = split_clients(cfg)
    for d in s["datasets"]:
        for sp in s["splits"]:
            if d in only and sp not in only[d]:
                continue
            for n in own_clients.get(sp, s["clients"]):
                for seed in s["seeds"]:
                    yield {"dataset": d, "split": sp, "clients": int(n), "seed": int(seed)}


def study_runs(cfg: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Every (scenario, algorithm) of the study grid, honouring each variant's optional ``splits:`` list."""
    only = algorithm_splits(cfg)
    return [(s, a) for s in scenarios(cfg) for a in cfg["study"]["algorithms"] if a not in only or s["split"] in only[a]]


def study_run_ids(cfg: Mapping[str, Any]) -> list[str]:
    """The run ids (``{scenario}/{algorithm}``) of :func:`study_runs`, in its order."""
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg)]


def explain_runs(cfg: Mapping[str, Any]) -> list[str]:
    """The run ids the explain stage explains: every run of the study whose client count ``study.explain.clients``
    names (all when it names none), none when ``explain.enabled`` is false (its default: the schema's). The rules'
    targets and the report's plan both read it from here."""
    if not cfg["explain"]["enabled"]:
        return []
    only = (cfg["study"].get("explain") or {}).get("clients")
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg) if not only or s["clients"] in only]


def late_client_runs(cfg: Mapping[str, Any]) -> list[str]:
    """Run ids (``{scenario}/{algorithm}``) whose variant holds clients out until after clustering
    (``late_clients`` > 0, 000 §6.2): they get a late_clients.parquet evaluation."""
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg)
            if run_settings(cfg, s["dataset"], a)["algorithm"].get("late_clients")]


def dataset_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    ds = dict(cfg["datasets"][dataset])
    ds.setdefault("loader", dataset)
    return ds


def data_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """Only what ``prepare_dataset`` depends on (so a change of lr does not rebuild the data)."""
    ds = dataset_settings(cfg, dataset)
    return {
        "loader": ds["loader"],
        "test_fraction": ds["test_fraction"],
        "max_train": ds.get("max_train"),
        "data_root": str(cfg["data_root"]),
        "download": bool(cfg["download"]),
    }


def split_settings(cfg: Mapping[str, Any], split: str) -> dict[str, Any]:
    """The split generator's parameters (its study-level keys, :data:`SPLIT_STUDY_KEYS`, left out)."""
    return {k: v for k, v in cfg["splits"][split].items() if k not in SPLIT_STUDY_KEYS}


def run_settings(cfg: Mapping[str, Any], dataset: str, algorithm: str, split: str | None = None) -> dict[str, Any]:
    """Everything a ``train`` job depends on besides its input files (the split); ``device`` as
    :func:`device_identity` gives it, so that moving a study from ``cuda:0`` to ``cuda:1`` reruns nothing.

    A split with its own ``participation`` (a setting of its home paper, :data:`SPLIT_STUDY_KEYS`) sets the engine's
    participation and the method's own ``participation`` parameter where it has one (FedGWC samples per cluster
    itself); a variant's own ``engine:`` block still overrides the engine's."""
    ds = dataset_settings(cfg, dataset)
    training = {k: v for k, v in ds.items() if k not in NOT_TRAINING}
    variant = {**cfg["algorithms"][algorithm], **(ds.get("algorithm_params") or {}).get(algorithm, {})}
    setting = (cfg.get("splits") or {}).get(split, {}) if split is not None else {}
    engine = {**cfg["engine"],
              **({"participation": setting["participation"]} if "participation" in setting else {}),
              **(variant.get("engine") or {})}  # the variant's own engine overrides
    variant = {"method": variant["method"], **strategy_params(variant)}  # `splits:` is the study's, not the strategy's
    if "participation" in setting and "participation" in variant:
        variant["participation"] = setting["participation"]
    return {
        "training": training,
        "engine": engine,
        "algorithm": variant,
        "device": device_identity(cfg["device"]),
    }


def centralised_settings(cfg: Mapping[str, Any], dataset: str, round_size: str) -> dict[str, Any]:
    """What a ``centralised_update_norms`` job depends on (cflcore/fl/centralised.py): the dataset's training recipe
    and rounds, the engine's shared-vector choice, and the round size."""
    ds = dataset_settings(cfg, dataset)
    training = {k: v for k, v in ds.items() if k not in NOT_TRAINING}
    engine = cfg["engine"]
    return {"training": training, "round_size": round_size,
            "engine": {k: engine[k] for k in ("bn_buffers_in_delta", "bn_stats") if k in engine}}


DECLARED_INPUTS_KEY = "declared_inputs"
"""``declared_inputs``: ``{"<dataset>/<algorithm>": {name: file kind}}``, what each run's strategy declares it reads
beyond the split (``Strategy.inputs``), derived by validation pass 3 (which imports the plug-ins anyway) so that
building the train jobs' inputs at every Snakemake start imports none. Dropped and derived again whenever a config
is validated."""


def _declared_inputs_by_run(cfg: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    from .strategies.base import declared_inputs

    return {f"{d}/{a}": declared_inputs(run_settings(cfg, d, a)["algorithm"]) for d in cfg["datasets"] for a in cfg["algorithms"]}


def _plugin_facts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """:data:`cflcore.plugin.PLUGIN_FACTS_KEY`, derived by validation pass 3, like :data:`DECLARED_INPUTS_KEY`."""
    from .strategies import STRATEGIES

    told = [a for a in cfg["study"]["algorithms"] if STRATEGIES.get(cfg["algorithms"][a]["method"]).told_true_k(
        {k: v for k, v in cfg["algorithms"][a].items() if k != "method"})]
    return {"told_true_k": told, "cannot_split": _cannot_split_by_setting(cfg)}


def _cannot_split_by_setting(cfg: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Every study variant × split whose every scenario (dataset × client count) rules the variant out, with the
    reasons; a setting some of whose scenarios the variant can act on is left out."""
    from .data.splits import SPLIT_GENERATORS
    from .strategies import STRATEGIES

    reasons: dict[tuple[str, str], list[str | None]] = {}
    settings = dict.fromkeys((s["dataset"], s["split"], int(s["clients"]), a) for s, a in study_runs(cfg))  # seeds aside
    for d, sp, n, algorithm in settings:
        params = run_settings(cfg, d, algorithm, sp)["algorithm"]
        generator = SPLIT_GENERATORS.get(cfg["splits"][sp]["generator"])(split_settings(cfg, sp), field=f"splits.{sp}")
        sizes = generator.group_sizes(n)
        why = STRATEGIES.get(params["method"]).cannot_split({k: v for k, v in params.items() if k != "method"},
                                                           Population(n, sizes))
        reasons.setdefault((algorithm, sp), []).append(why)
    out: dict[str, dict[str, str]] = {}
    for (algorithm, sp), whys in reasons.items():
        if all(whys):
            out.setdefault(algorithm, {})[sp] = "; ".join(dict.fromkeys(w for w in whys if w))
    return out


def run_inputs(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, str]:
    """The files a run's train job reads beyond its split, ``{name: file kind}`` (``Strategy.inputs``)."""
    stored = cfg.get(DECLARED_INPUTS_KEY)
    key = f"{dataset}/{algorithm}"
    if stored and key in stored:
        return dict(stored[key])
    from .strategies.base import declared_inputs

    return declared_inputs(run_settings(cfg, dataset, algorithm)["algorithm"])


def run_plugins(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, str]:
    """The plug-ins a run's train job selects, registry kind -> name: its method and its model (its code hash covers
    their modules and no other plug-in's, cflcore.provenance.code_version)."""
    settings = run_settings(cfg, dataset, algorithm)
    return {"method": str(settings["algorithm"]["method"]), "model": str(settings["training"]["model"])}


def explain_plugins(cfg: Mapping[str, Any], dataset: str) -> dict[str, str]:
    """The plug-ins an explain job selects: the dataset's model."""
    return {"model": str(explain_settings(cfg, dataset)["model"])}


def explain_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """The explain block with the per-dataset sample size resolved (000 §5: 350; 180 for BloodMNIST)."""
    ex = dict(cfg["explain"])
    if ex.get("samples") is None:
        ex["samples"] = int(dataset_settings(cfg, dataset)["explain_samples"])
    ex["model"] = dataset_settings(cfg, dataset)["model"]
    return ex
