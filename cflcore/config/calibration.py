"""One calibration rule for every method with a threshold (issue 68 item 3), written in the study's config before its
data: the ``calibration`` block.

* ``mode: authors``: every variant runs with its parameters as the config writes them (its authors' defaults, or
  the values the config states and explains);
* ``mode: tune``: ``grid`` (``{variant: {threshold: [values]}}``, several thresholds of one variant crossed) runs on
  ``tuning_seeds``, which share no seed with ``study.seeds``, in every setting of the study (datasets × splits ×
  clients); ``snakemake tune`` picks for each variant the combination with the highest mean ``metric`` over those
  runs (cflcore/report/calibration.py) and writes ``config/calibrated/<config file>``, which extends the study with
  the chosen values and records them under ``calibration.chosen``.

The form is the same for every method: a grid may only tune what a method declares as its thresholds
(:attr:`cflcore.strategies.run_records.MethodRecords.thresholds`, beside the method), and each value must pass the
method's own parameter schema. Validation adds one variant per grid combination to ``algorithms`` (named as a sweep
names them, ``scl@eps1=0.05,eps2=0.5``, cflcore.sweep_expansion) but not to ``study.algorithms``: they are the
tuning runs' variants (:func:`tuning_runs`), ordinary train and evaluate jobs; :data:`TUNING_KEY` maps each to its
variant and values (cflcore/calibration_keys.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..calibration_keys import AUTHORS, CALIBRATED_DIR, CALIBRATION_KEY, CHOSEN_KEY, TUNE, TUNING_KEY
from ..errors import ConfigError
from ..plugin import check_finite, schema_check
from ..sweep_expansion import SWEEP_KEY, expand_entry, sweep_values
from .plan import strategy_params, study_runs


def calibrated_file(study_file: str | Path) -> str:
    """The calibrated config ``snakemake tune`` writes for the study config ``study_file``: beside it, in
    ``calibrated/`` under the same name (config/heterogeneity-offline.yaml -> config/calibrated/heterogeneity-offline.yaml)."""
    path = Path(study_file)
    return str(path.parent / CALIBRATED_DIR / path.name)


def check_calibration(cfg: dict[str, Any], plugins: bool = True) -> None:
    """Validate ``cfg["calibration"]`` (module docstring) and add the tuning variants; after the names pass (the
    study's variants known) and before the plug-ins' checks (which then check every tuning variant). Errors are one
    line naming ``calibration.<field>``. ``plugins=False`` skips what needs a plug-in (thresholds, value schemas)."""
    block = cfg.get(CALIBRATION_KEY)
    if not block:
        return
    block.pop(TUNING_KEY, None)  # derived here, never given
    mode = block["mode"]
    if mode == AUTHORS:
        for key in ("tuning_seeds", "metric", "grid", CHOSEN_KEY):
            if key in block:
                raise ConfigError(f"calibration.{key}: only with mode: tune; mode: authors runs every variant as written")
        return
    for key in ("tuning_seeds", "metric", "grid"):
        if key not in block:
            raise ConfigError(f"calibration.{key}: required with mode: tune")
    overlap = sorted(set(block["tuning_seeds"]) & set(cfg["study"]["seeds"]))
    if overlap:
        raise ConfigError(f"calibration.tuning_seeds: {overlap} are also study.seeds; allowed: seeds disjoint from "
                          f"study.seeds {list(cfg['study']['seeds'])}")
    tuning: dict[str, Any] = {}
    for variant, spec in block["grid"].items():
        field = f"calibration.grid.{variant}"
        if variant not in cfg["study"]["algorithms"]:
            raise ConfigError(f"{field}: not a variant of the study; allowed: {', '.join(cfg['study']['algorithms'])}")
        entry = cfg["algorithms"][variant]
        if any(variant in (ds.get("algorithm_params") or {}) for ds in cfg["datasets"].values()):
            raise ConfigError(f"{field}: the variant has per-dataset algorithm_params; a calibrated variant takes one "
                              f"value in every setting")
        for param, values in spec.items():
            sweep_values(values, f"{field}.{param}")  # a non-empty list of distinct, nameable values
            if plugins:
                _check_threshold(str(entry["method"]), param, values, f"{field}.{param}")
        if plugins:
            _check_grid(entry, spec, field)
        expanded = expand_entry(variant, {**entry, SWEEP_KEY: dict(spec)}, field, allow_engine=False)
        for name, item in expanded.items():
            if name in cfg["algorithms"]:
                raise ConfigError(f"{field}: expands to {name!r}, which is also a variant of algorithms:")
            cfg["algorithms"][name] = item["entry"]
            tuning[name] = {"variant": variant, "values": item["record"]["factors"]}
    _check_chosen(cfg, block)
    block[TUNING_KEY] = tuning


def _check_threshold(method: str, param: str, values: list[Any], field: str) -> None:
    """``param`` is a declared threshold of ``method`` and each value passes the method's schema for it."""
    from ..strategies import STRATEGIES
    from ..strategies.run_records import thresholds

    allowed = thresholds(method)
    if param not in allowed:
        raise ConfigError(f"{field}: not a threshold of method {method}; allowed: {', '.join(allowed) or 'none'}")
    schema = {"type": "object", "properties": {param: STRATEGIES.get(method).params_schema[param]}}
    for i, value in enumerate(values):
        check_finite(value, f"{field}[{i}]")
        schema_check({param: value}, schema, prefix=f"{field.rsplit('.', 1)[0]}.")


def _check_grid(entry: Mapping[str, Any], grid: Mapping[str, list[Any]], field: str) -> None:
    """The method's own cross-field checks of the grid (cflcore.strategies.run_records.MethodRecords.check_grid)."""
    from ..strategies import STRATEGIES
    from ..strategies.run_records import records

    method = str(entry["method"])
    records(method).check_grid(STRATEGIES.get(method).with_defaults(strategy_params(entry)), grid, field)


def _check_chosen(cfg: Mapping[str, Any], block: Mapping[str, Any]) -> None:
    """A calibrated file's ``chosen`` values are grid values, and the variants run with them (no hand edit since)."""
    for variant, values in (block.get(CHOSEN_KEY) or {}).items():
        field = f"calibration.{CHOSEN_KEY}.{variant}"
        grid = block["grid"].get(variant)
        if grid is None:
            raise ConfigError(f"{field}: not a variant of calibration.grid; allowed: {', '.join(block['grid'])}")
        for param, value in values.items():
            if param not in grid or value not in grid[param]:
                raise ConfigError(f"{field}.{param}: {value!r} is not a value of calibration.grid.{variant}")
            if cfg["algorithms"][variant].get(param) != value:
                raise ConfigError(f"{field}.{param}: {value!r}, but algorithms.{variant}.{param} is "
                                  f"{cfg['algorithms'][variant].get(param)!r}; run snakemake tune again")


def tuning_runs(cfg: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Every (scenario, tuning variant) of a ``mode: tune`` calibration: the study's settings on its tuning seeds,
    each variant on the splits it is restricted to; none otherwise."""
    block = cfg.get(CALIBRATION_KEY) or {}
    if block.get("mode") != TUNE:
        return []
    study = {**cfg["study"], "seeds": list(block["tuning_seeds"]), "algorithms": list(block[TUNING_KEY])}
    return study_runs({**cfg, "study": study})
