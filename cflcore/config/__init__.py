"""A study config in three steps: load, validate, plan.

1. :mod:`~cflcore.config.load` reads the YAML files, resolves ``extends:`` and merges them as Snakemake merges
   ``--configfile`` files (nothing is checked yet);
2. :mod:`~cflcore.config.validate` checks the merged dict (the schema, which fills every default; the names; the
   plug-ins' own parameter schemas; the combinations across fields; what the machine and the data can give);
3. :mod:`~cflcore.config.plan` gives, from a validated config, the study's grid (scenarios, runs) and each job's
   settings.

Imports run one way: ``validate`` reads the grid its checks need from ``plan`` and the schema from ``load``; ``plan``
imports neither. :func:`load_config` is steps 1 and 2 in one call; the names below are the package's interface.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..config_checks import WARN
from ..errors import ConfigError
from .load import BASE_CONFIG, deep_update, load_schema, read_config_file, snakemake_config
from .plan import (DECLARED_INPUTS_KEY, OWN_CLUSTERERS_KEY, SPLIT_STUDY_KEYS, STUDY_KEYS, algorithm_splits,
                   centralised_settings, data_settings, dataset_settings, dataset_splits, explain_plugins,
                   explain_runs, explain_settings, late_client_runs, own_clusterer, run_inputs, run_plugins,
                   run_settings, run_training, scenarios, split_clients, split_settings, strategy_params, study_run_ids, study_runs,
                   whatif_clusterer_names, whatif_clusterer_params, whatif_runs, whatif_settings)
from .validate import check_feasible, validate_config, validate_config_cached, validation_key

__all__ = ["BASE_CONFIG", "ConfigError", "DECLARED_INPUTS_KEY", "OWN_CLUSTERERS_KEY", "SPLIT_STUDY_KEYS", "STUDY_KEYS",
           "algorithm_splits", "centralised_settings", "check_feasible", "data_settings", "dataset_settings",
           "dataset_splits", "deep_update", "explain_plugins", "explain_runs", "explain_settings", "late_client_runs",
           "load_config", "load_schema", "own_clusterer", "read_config_file", "run_inputs", "run_plugins",
           "run_settings", "run_training", "scenarios", "snakemake_config", "split_clients", "split_settings", "strategy_params",
           "study_run_ids", "study_runs", "validate_config", "validate_config_cached", "validation_key",
           "whatif_clusterer_names", "whatif_clusterer_params", "whatif_runs", "whatif_settings"]


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
