"""Evaluation of runs and the aggregate report (DESIGN §8, §10). Reads Parquet only.

* :func:`evaluate_run` — the ``evaluate`` stage (clustering.parquet, personalisation.parquet);
* :func:`build_report` — the ``report`` stage (tables, paper comparison, figures, index, missing runs);
* :func:`run_specs_from_config` — the runs a validated config expects, with their standard paths.
"""
from .build import build_report
from .evaluate import evaluate_run
from .runs import LoadedRun, MissingRun, RunSpec, load_run, run_specs_from_config

__all__ = ["build_report", "evaluate_run", "LoadedRun", "MissingRun", "RunSpec", "load_run", "run_specs_from_config"]
