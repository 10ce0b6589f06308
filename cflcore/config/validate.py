"""Validate a loaded study config and fill its defaults (cflcore.config, step 2).

Validation happens in three passes, all before any job starts:
1. the JSON schema (``cflcore/schemas/config.schema.yaml``, also ``config/schema.yaml``), which
   Snakemake's ``validate()`` applies too and which fills defaults;
2. name checks against the plug-in names declared by their registration decorators, read from source
   (``cflcore.registry.declared_names``): dataset
   loaders, models, split generators, methods, clusterers (of variants and of ``whatif``) and the papers of
   ``report.paper_checks`` and the homes of ``report.cross_paper`` (``cflcore.paper_sources``). They
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

The grid and the settings the checks read (:func:`cflcore.config.plan.study_runs`, ``run_settings``) come from
:mod:`cflcore.config.plan`, which imports nothing from here.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..calibration_keys import CALIBRATION_KEY, TUNING_KEY
from ..config_checks import (REFUSE, WARN, check_cross_references, check_data_requests,
                             check_drift_rounds, entry_field)
from ..defaults import schema_defaults
from ..errors import ConfigError
from ..federation import FEDERATION_KEY
from ..kernel_paths import KERNEL_PATHS
from ..external import (activate, check_dataset, check_installed, check_name, config_plugins, config_records,
                        fingerprint)
from ..external import installed as installed_plugins
from ..paper_sources import check_home, check_paper
from ..plugin import CLUSTER_COUNT_KEYS, PLUGIN_FACTS_KEY, Population, check_finite, schema_check
from ..registry import declared_names
from ..settings import training_schema
from ..sweep_expansion import expand_sweeps
from .calibration import check_calibration
from .run_checks import check_runs
from .load import BASE_CONFIG, deep_update, load_schema, read_config_file
from .plan import (DECLARED_INPUTS_KEY, OWN_CLUSTERERS_KEY, SPLIT_STUDY_KEYS, STUDY_KEYS, WHATIF_IMPORT_PATH,
                   data_settings, federation_split, own_clusterer, run_settings, run_training, run_variant, scenarios, split_settings,
                   strategy_params, study_runs, whatif_clusterer_params)

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
    check_calibration(cfg, plugins)  # adds the tuning variants, which pass 3 then checks as any other
    home_check_studies(cfg)  # its files' errors before any plug-in is imported; kept by pass 3 (_plugin_facts)
    if plugins:
        _check_registries(cfg)
        _check_whatif_params(cfg.get("whatif") or {})
    if cfg["monitor"]["tensorboard"]:  # the optional extra (cflcore.fl.progress.TensorBoardMonitor)
        from ..extras import check_tensorboard

        check_tensorboard()
    _check_study(cfg)  # after each entry's own checks: an entry's error is named before a combination's
    check_cross_references(cfg, scenarios(cfg), _split_params(cfg))
    check_drift_rounds(cfg, _split_params(cfg), _run_rounds(cfg))
    check_feasible(cfg, missing_data)
    return cfg


def _split_params(cfg: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: split_settings(cfg, name) for name in cfg["splits"]}


def _run_rounds(cfg: Mapping[str, Any]) -> list[tuple[str, int, str]]:
    """(split, rounds, the field they come from: the variant's own recipe or its dataset's) of every run."""
    out = []
    for s, a in study_runs(cfg):
        own = (run_variant(cfg, s["dataset"], a).get("training") or {}).get("rounds") is not None
        where = f"{entry_field(cfg, 'algorithms', a)}.training.rounds" if own else f"datasets.{s['dataset']}.rounds"
        out.append((s["split"], int(run_training(cfg, s["dataset"], a)["rounds"]), where))
    return out


# Distributions whose presence or version a plug-in check consults (clusterer and model availability,
# estimator signatures); part of the key under which a validated config is remembered.
VALIDATION_LIBRARIES = ("scikit-learn", "hdbscan", "leidenalg", "igraph", "networkx", "torch", "torchvision", "captum",
                        "tensorboard")


def validation_key(cfg: Mapping[str, Any]) -> str:
    """SHA-256 over the config, every source file of cflcore and the versions of :data:`VALIDATION_LIBRARIES`:
    what :func:`validate_config`'s result depends on."""
    import hashlib
    from importlib import metadata

    from ..io import canonical_json

    h = hashlib.sha256(canonical_json(cfg).encode())
    package = Path(__file__).resolve().parents[1]
    for f in sorted(package.rglob("*")):
        if f.is_file() and f.suffix in (".py", ".yaml") and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(package)).encode())
            h.update(f.read_bytes())
    for f in [*home_check_files(cfg), *ablation_files(cfg)]:  # read at validation (home_check_studies, ablation_studies)
        if Path(f).is_file():
            h.update(f.encode())
            h.update(Path(f).read_bytes())
    h.update(fingerprint().encode())  # the installed external plug-ins: names, distributions, versions, sources
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

    from ..io import write_json

    path = Path(cache_dir) / f"{validation_key(cfg)}.json"
    missing = WARN if dry_run else REFUSE
    if path.is_file():
        try:
            validated = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            pass  # unreadable: validate again and rewrite it
        else:
            # the machine may have changed since (pass 4 is never remembered)
            check_feasible(validated, missing, external=False)
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


def home_check_files(cfg: Mapping[str, Any]) -> list[str]:
    """The config files of ``report.cross_paper.home_checks``, with :data:`BASE_CONFIG` first where any is listed
    (each is read over it)."""
    files = [str(f) for f in (((cfg.get("report") or {}).get("cross_paper") or {}).get("home_checks") or [])]
    return [BASE_CONFIG, *files] if files else []


def home_check_studies(cfg: Mapping[str, Any]) -> dict[str, list[str]]:
    """``home_checks`` of :data:`cflcore.plugin.PLUGIN_FACTS_KEY`: strategy method -> the results folders of the
    ``report.cross_paper.home_checks`` studies that run it, in the order listed. Each file is read as Snakemake reads
    it (:data:`BASE_CONFIG`, the file merged over it, ``extends:`` resolved), not validated: its ``results_dir`` and
    its study's variants' methods are all the table needs. A missing file, or one that lists home checks itself (a
    home check reads no other study's), is refused."""
    studies: dict[str, list[str]] = {}
    for i, file in enumerate(home_check_files(cfg)[1:]):
        field = f"report.cross_paper.home_checks[{i}]"
        if not Path(file).is_file():
            raise ConfigError(f"{field}: {file!r} is not a file; allowed: the config file of a home-check study "
                              "(a path relative to the working directory)")
        home = deep_update(read_config_file(BASE_CONFIG), read_config_file(file))
        if ((home.get("report") or {}).get("cross_paper") or {}).get("home_checks"):
            raise ConfigError(f"{field}: {file!r} lists report.cross_paper.home_checks itself; allowed: a study that "
                              "reads no other study's home checks")
        results = str(home.get("results_dir") or load_schema()["properties"]["results_dir"]["default"]).rstrip("/")
        variants = (home.get("algorithms") or {})
        for name in (home.get("study") or {}).get("algorithms") or list(variants):
            method = (variants.get(name) or {}).get("method")
            if method and results not in studies.setdefault(str(method), []):
                studies[str(method)].append(results)
    return studies


def ablation_files(cfg: Mapping[str, Any]) -> list[str]:
    """The config files of the ablation studies the papers the study checks declare
    (cflcore.paper_sources.declared_ablations), that exist, with :data:`BASE_CONFIG` first where any does."""
    from ..paper_sources import declared_ablations

    checked = {str(p) for p in (cfg.get("report") or {}).get("paper_checks") or []}
    files = [f for f, (paper, _) in declared_ablations().items() if paper in checked and Path(f).is_file()]
    return [BASE_CONFIG, *files] if files else []


def ablation_studies(cfg: Mapping[str, Any]) -> dict[str, list[list[str]]]:
    """``ablations`` of :data:`cflcore.plugin.PLUGIN_FACTS_KEY`: claim id -> [the ablation study's config file stem,
    its results folder] for each ablation of a claim of a paper the study checks (:func:`ablation_files`), other than
    the study itself; each file read as Snakemake reads it, for its ``results_dir`` only (as :func:`home_check_studies`)."""
    from ..paper_sources import declared_ablations

    here = str(cfg.get("results_dir") or "").rstrip("/")
    default = load_schema()["properties"]["results_dir"]["default"]
    out: dict[str, list[list[str]]] = {}
    for file in ablation_files(cfg)[1:]:
        other = deep_update(read_config_file(BASE_CONFIG), read_config_file(file))
        results = str(other.get("results_dir") or default).rstrip("/")
        if results != here:
            out.setdefault(declared_ablations()[file][1], []).append([Path(file).stem, results])
    return out


def _check_names(cfg: dict[str, Any]) -> None:
    """Pass 2: references between sections, and plug-in names against the names their sources declare."""
    study = cfg["study"]
    check_installed()  # the installed distributions' plug-ins: no name twice, none shadowing a built-in one
    for i, name in enumerate(study["datasets"]):
        if name not in cfg["datasets"]:
            raise ConfigError(
                f"study.datasets[{i}]: {name!r} has no entry under datasets:; defined: {', '.join(sorted(cfg['datasets']))}"
            )
    for name, ds in cfg["datasets"].items():
        check_name("dataset", ds.get("loader", name), field=f"datasets.{name}.loader")
        check_name("model", ds["model"], field=f"datasets.{name}.model")
    for i, name in enumerate(study["splits"]):
        if name not in cfg["splits"]:
            raise ConfigError(f"study.splits[{i}]: unknown split {name!r}; defined: {', '.join(sorted(cfg['splits']))}")
    for name, sp in cfg["splits"].items():
        check_name("split generator", sp["generator"], field=f"splits.{name}.generator")
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
        check_name("method", variant["method"], field=f"{field}.method")
        _check_variant_training(variant.get("training"), f"{field}.training")
        if isinstance(variant.get("clusterer"), str):  # OCFL's clusterer (any method's ``clusterer`` key)
            check_name("clusterer", variant["clusterer"], field=f"{field}.clusterer")
    for i, paper in enumerate((cfg.get("report") or {}).get("paper_checks") or []):
        if str(paper) not in installed_plugins("paper"):  # an external paper (cflcore.external) or a built-in one
            check_paper(str(paper), field=f"report.paper_checks[{i}]")
    for i, kernels in enumerate((cfg.get("report") or {}).get("kernel_paths") or []):
        if kernels not in KERNEL_PATHS:
            raise ConfigError(f"report.kernel_paths[{i}]: {kernels!r}; allowed: {', '.join(KERNEL_PATHS)}")
    for split, setting in (((cfg.get("report") or {}).get("cross_paper") or {}).get("settings") or {}).items():
        check_home(str(setting["home"]), field=f"report.cross_paper.settings.{split}.home")
    _check_whatif_names(cfg.get("whatif") or {})


def _check_variant_training(training: Mapping[str, Any] | None, field: str) -> None:
    """A variant's ``training:`` block: only a dataset entry's recipe keys (cflcore.settings.training_schema), each as
    that entry types it, and a declared model."""
    if not training:
        return
    schema = training_schema()
    for key in training:
        if key not in schema["properties"]:
            raise ConfigError(f"{field}.{key}: not a training recipe key; allowed: {', '.join(schema['properties'])}")
    schema_check(dict(training), schema, prefix=f"{field}.")
    if "model" in training:
        check_name("model", training["model"], field=f"{field}.model")


def _check_registries(cfg: dict[str, Any]) -> None:
    """Pass 3 (names and references were checked by :func:`_check_names`): parameters against the plug-in
    classes' own schemas and checks."""
    from ..data.splits import SPLIT_GENERATORS

    activate(config_plugins(cfg))  # the external plug-ins the config names join their registries (cflcore.external)
    for name, sp in cfg["splits"].items():
        field = entry_field(cfg, "splits", name)
        generator_params = {k: v for k, v in sp.items() if k not in SPLIT_STUDY_KEYS}  # the study's, not the generator's
        SPLIT_GENERATORS.get(sp["generator"], field=f"{field}.generator").validate_params(generator_params, field=field)
        if "engine" in sp:  # a split's own engine options (plan.run_settings), checked as a variant's are
            schema_check(sp["engine"], load_schema()["properties"]["engine"], prefix=f"{field}.engine.")
    for d in cfg["study"]["datasets"]:  # a dataset plug-in's own checks (a federation table's rows), before any job
        split = federation_split(cfg, d)
        check_dataset(data_settings(cfg, d), f"splits.{split}" if split else f"datasets.{d}")
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
    tuning = (cfg.get(CALIBRATION_KEY) or {}).get(TUNING_KEY) or {}
    ruled_out = _cannot_split_by_setting({**cfg, "study": {**cfg["study"], "algorithms": list(tuning)}}) if tuning else {}
    for name, record in tuning.items():  # a combination that rules a setting out cannot win (cflcore.report.calibration)
        record["cannot_split"] = ruled_out.get(name, {})


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
    from ..strategies import STRATEGIES

    sub = STRATEGIES.get(method).params_schema.get(key, {})
    return "".join(f"{alt['const']!r} or " for alt in sub.get("oneOf", []) + sub.get("anyOf", []) if "const" in alt)


def _check_population(cfg: Mapping[str, Any]) -> None:
    """A plug-in's ``check_population(params, n_clients, field)`` hook (e.g. OCFL's ``late_clients`` must leave
    two founding clients) against every client count of the study."""
    from ..strategies import STRATEGIES

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
    check_runs(cfg, runs)


def check_feasible(cfg: Mapping[str, Any], missing_data: str = WARN, external: bool = True) -> None:
    """What the machine must give a validated config (never remembered: the disk and the data may change): a
    results directory that can be created and written, and data that fills every request of the study
    (cflcore.config_checks.check_data_requests: classes, samples per client, batches, files on disk or allowed to
    download; ``missing_data``: REFUSE or WARN of missing files). Reads no data and writes nothing. The requests are
    read against the split generators' classes; with ``external`` false (a config read back from the cache, whose
    requests were checked when it was validated) the splits of an installed distribution's generator are left out,
    so that a dry run imports no external plug-in (cflcore.external)."""
    _check_writable_dir(str(cfg["results_dir"]), "results_dir")
    installed_generators = installed_plugins("split generator")
    if external:
        activate({"split generator": [str(sp["generator"]) for sp in cfg["splits"].values()]})
    kept = {name: p for name, p in _split_params(cfg).items() if external or p["generator"] not in installed_generators}
    check_data_requests(cfg, [s for s in scenarios(cfg) if s["split"] in kept],
                        {d: _loader_settings(cfg, d) for d in cfg["study"]["datasets"]}, kept, missing_data,
                        _batch_sizes(cfg))


def _loader_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """A dataset's data settings as a loader reads them (a federation table's declaration aside: its rows are checked
    by its own plug-in, cflcore.external.check_dataset)."""
    return {k: v for k, v in data_settings(cfg, dataset).items() if k != FEDERATION_KEY}


def _batch_sizes(cfg: Mapping[str, Any]) -> dict[tuple[str, str], dict[int, str]]:
    """(dataset, split) -> each batch size its runs train with (cflcore.config.plan.run_training) -> the field that sets
    it: the variant's own ``training.batch_size`` where it has one, else the dataset's."""
    out: dict[tuple[str, str], dict[int, str]] = {}
    for s, a in study_runs(cfg):
        d = s["dataset"]
        own = "batch_size" in (run_variant(cfg, d, a).get("training") or {})
        field = f"{entry_field(cfg, 'algorithms', a)}.training.batch_size" if own else f"datasets.{d}.batch_size"
        out.setdefault((d, s["split"]), {}).setdefault(int(run_training(cfg, d, a)["batch_size"]), field)
    return out


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


def _check_variant(variant: Mapping[str, Any], field: str, split_names: Sequence[str] | None = None) -> dict[str, Any]:
    """Validate one algorithm variant against its plug-in's ``params_schema``; return it with defaults.
    The study-level ``splits`` list is checked here against the defined split names and kept aside."""
    from ..strategies import STRATEGIES

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


def _check_whatif_params(whatif: Mapping[str, Any]) -> None:
    """Pass 3 for ``whatif``: each entry against its clusterer's ``params_schema`` and ``check_params``."""
    from ..clustering.clusterers import CLUSTERERS, sklearn_estimator_class

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
    from ..clustering.clusterers import sklearn_estimator_class

    return "n_clusters" in sklearn_estimator_class(str(_sklearn_estimator(params)))().get_params()


def _sklearn_estimator(params: Mapping[str, Any]) -> str:
    """The estimator class name of an ``sklearn`` clusterer entry (its schema's default when not given)."""
    from ..clustering.clusterers import CLUSTERERS

    return str({**schema_defaults(CLUSTERERS.get("sklearn").params_schema), **params}["estimator"])


def _own_clusterers(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {f"{d}/{a}": own_clusterer(run_settings(cfg, d, a)["algorithm"]) for d in cfg["datasets"] for a in cfg["algorithms"]}


def _declared_inputs_by_run(cfg: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    from ..strategies.base import declared_inputs

    return {f"{d}/{a}": declared_inputs(run_settings(cfg, d, a)["algorithm"]) for d in cfg["datasets"] for a in cfg["algorithms"]}


def _plugin_facts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """:data:`cflcore.plugin.PLUGIN_FACTS_KEY`, derived by validation pass 3, like :data:`DECLARED_INPUTS_KEY`."""
    from ..strategies import STRATEGIES

    told = [a for a in cfg["study"]["algorithms"] if STRATEGIES.get(cfg["algorithms"][a]["method"]).told_true_k(
        {k: v for k, v in cfg["algorithms"][a].items() if k != "method"})]
    external = config_records(cfg)  # provenance: the distribution and version of each external plug-in it names
    return {"told_true_k": told, "cannot_split": _cannot_split_by_setting(cfg), "home_checks": home_check_studies(cfg),
            "ablations": ablation_studies(cfg), **({"external": external} if external else {})}


def _cannot_split_by_setting(cfg: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Every study variant × split whose every scenario (dataset × client count) rules the variant out, with the
    reasons; a setting some of whose scenarios the variant can act on is left out."""
    from ..data.splits import SPLIT_GENERATORS
    from ..strategies import STRATEGIES

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
