"""Load, default and validate a study config; resolve the settings of one scenario or run.

Validation happens in two passes, both before any job starts:
1. the JSON schema (``cflcore/schemas/config.schema.yaml``, also ``config/schema.yaml``), which
   Snakemake's ``validate()`` applies too and which fills defaults;
2. registry checks that a static schema cannot make: dataset loaders, model names, split generators
   and each algorithm variant against its strategy plug-in's own ``params_schema``.
Every error is one line naming the dotted field and the allowed values.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterator, Mapping

import jsonschema
import yaml

from .errors import ConfigError

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.yaml"


def load_schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def load_config(*paths: str | Path, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Read YAML files (later ones deep-update earlier ones, as Snakemake merges ``--configfile``),
    validate, fill defaults."""
    cfg: dict[str, Any] = {}
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise ConfigError(f"{p}: config file not found")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
        deep_update(cfg, data)
    if overrides:
        deep_update(cfg, dict(overrides))
    return validate_config(cfg)


def deep_update(base: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict update, the way Snakemake merges config files."""
    for k, v in new.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def _path(err: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "<config>"


def _describe(err: jsonschema.ValidationError) -> str:
    field = _path(err)
    if err.validator == "enum":
        return f"{field}: {err.instance!r} is not allowed; allowed: {', '.join(map(str, err.validator_value))}"
    if err.validator == "additionalProperties":
        allowed = sorted((err.schema.get("properties") or {}).keys())
        return f"{field}: {err.message}; allowed: {', '.join(allowed)}"
    return f"{field}: {err.message}"


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


def schema_check(instance: Any, schema: Mapping[str, Any], prefix: str = "") -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        msg = _describe(errors[0])
        raise ConfigError(f"{prefix}{msg}")


def validate_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a config dict and return a copy with defaults filled in."""
    cfg = copy.deepcopy(dict(cfg))
    schema = load_schema()
    schema_check(cfg, schema)
    _fill_defaults(schema, cfg)
    _check_registries(cfg)
    return cfg


def _check_registries(cfg: dict[str, Any]) -> None:
    from .data import DATASETS
    from .data.splits import SPLIT_GENERATORS
    from .fl.strategy import STRATEGIES
    from .models import MODELS

    study = cfg["study"]
    for i, name in enumerate(study["datasets"]):
        if name not in cfg["datasets"]:
            raise ConfigError(
                f"study.datasets[{i}]: {name!r} has no entry under datasets:; defined: {', '.join(sorted(cfg['datasets']))}"
            )
    for name, ds in cfg["datasets"].items():
        DATASETS.get(ds.get("loader", name), field=f"datasets.{name}.loader")
        MODELS.get(ds["model"], field=f"datasets.{name}.model")
    for i, name in enumerate(study["splits"]):
        if name not in cfg["splits"]:
            raise ConfigError(f"study.splits[{i}]: unknown split {name!r}; defined: {', '.join(sorted(cfg['splits']))}")
    for name, sp in cfg["splits"].items():
        gen = SPLIT_GENERATORS.get(sp["generator"], field=f"splits.{name}.generator")
        gen.check_params(sp, field=f"splits.{name}")
    algos = study.get("algorithms") or sorted(cfg["algorithms"])
    study["algorithms"] = list(algos)
    for i, name in enumerate(algos):
        if name not in cfg["algorithms"]:
            raise ConfigError(
                f"study.algorithms[{i}]: unknown algorithm {name!r}; defined: {', '.join(sorted(cfg['algorithms']))}"
            )
    for name, variant in cfg["algorithms"].items():
        cfg["algorithms"][name] = _check_variant(variant, f"algorithms.{name}")
    for dname, ds in cfg["datasets"].items():
        for aname, override in (ds.get("algorithm_params") or {}).items():
            field = f"datasets.{dname}.algorithm_params.{aname}"
            if aname not in cfg["algorithms"]:
                raise ConfigError(f"{field}: unknown algorithm {aname!r}; defined: {', '.join(sorted(cfg['algorithms']))}")
            if "method" in override:
                raise ConfigError(f"{field}.method: the method of a variant cannot be overridden per dataset")
            _check_variant({**cfg["algorithms"][aname], **override}, field)
    _check_cluster_counts(cfg)


CLUSTER_COUNT_KEYS = ("k", "n_clusters")
"""Variant parameters that fix a number of clusters (OCFL K-Means ``k``, IFCA ``k``, a scikit-learn
clusterer's ``n_clusters``): they cannot exceed the number of clients of any scenario the variant runs in."""


def _check_cluster_counts(cfg: Mapping[str, Any]) -> None:
    """A fixed number of clusters above the study's smallest client count is a config error, not a silent
    clamp (``k: 99`` with 15 clients used to run as 15 singleton clusters)."""
    smallest = min(int(n) for n in cfg["study"]["clients"])
    for name in cfg["study"]["algorithms"]:
        variant = cfg["algorithms"][name]
        overrides = [({**variant, **(ds.get("algorithm_params") or {}).get(name, {})}, f"datasets.{d}.algorithm_params.{name}")
                     for d, ds in cfg["datasets"].items() if name in (ds.get("algorithm_params") or {})]
        for params, field in [(variant, f"algorithms.{name}"), *overrides]:
            for key in CLUSTER_COUNT_KEYS:
                value = params.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > smallest:
                    oracle = "'oracle' or " if key == "k" and params.get("method") == "ocfl" else ""
                    raise ConfigError(f"{field}.{key}: {value} is not allowed with {smallest} clients (study.clients); "
                                      f"allowed: {oracle}an integer from 1 to {smallest}")


def _check_variant(variant: Mapping[str, Any], field: str) -> dict[str, Any]:
    """Validate one algorithm variant against its plug-in's ``params_schema``; return it with defaults."""
    from .fl.strategy import STRATEGIES

    cls = STRATEGIES.get(variant["method"], field=f"{field}.method")
    params = {k: v for k, v in variant.items() if k != "method"}
    sub = {"type": "object", "additionalProperties": False, "properties": cls.params_schema}
    schema_check(params, sub, prefix=f"{field}.")
    _fill_defaults(sub, params)
    check = getattr(cls, "check_params", None)
    if check is not None:
        check(params, field=field)
    return {"method": variant["method"], **params}


# ---------------------------------------------------------------------------------------------
# Scenarios and runs
# ---------------------------------------------------------------------------------------------
def scenario_id(dataset: str, split: str, clients: int, seed: int) -> str:
    """``{dataset}/{split}/n{clients}/s{seed}`` (DESIGN §2)."""
    return f"{dataset}/{split}/n{clients}/s{seed}"


def scenarios(cfg: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    s = cfg["study"]
    for d in s["datasets"]:
        for sp in s["splits"]:
            for n in s["clients"]:
                for seed in s["seeds"]:
                    yield {"dataset": d, "split": sp, "clients": int(n), "seed": int(seed)}


def dataset_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    ds = dict(cfg["datasets"][dataset])
    ds.setdefault("loader", dataset)
    return ds


def data_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """Only what ``prepare_dataset`` depends on (so a change of lr does not rebuild the data)."""
    ds = dataset_settings(cfg, dataset)
    return {
        "loader": ds["loader"],
        "test_fraction": ds.get("test_fraction", 0.2),
        "max_train": ds.get("max_train"),
        "data_root": str(cfg.get("data_root", "data")),
        "download": bool(cfg.get("download", False)),
    }


def split_settings(cfg: Mapping[str, Any], split: str) -> dict[str, Any]:
    return dict(cfg["splits"][split])


def run_settings(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, Any]:
    """Everything a ``train`` job depends on besides its input files (the split)."""
    ds = dataset_settings(cfg, dataset)
    training = {k: v for k, v in ds.items()
                if k not in ("loader", "test_fraction", "max_train", "explain_samples", "algorithm_params")}
    variant = {**cfg["algorithms"][algorithm], **(ds.get("algorithm_params") or {}).get(algorithm, {})}
    return {
        "training": training,
        "engine": dict(cfg.get("engine", {})),
        "algorithm": variant,
        "device": cfg.get("device", "auto"),
    }


def explain_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """The explain block with the per-dataset sample size resolved (000 §5: 350; 180 for BloodMNIST)."""
    ex = dict(cfg.get("explain", {}))
    if ex.get("samples") is None:
        ex["samples"] = int(dataset_settings(cfg, dataset).get("explain_samples", 350))
    ex["model"] = dataset_settings(cfg, dataset)["model"]
    return ex
