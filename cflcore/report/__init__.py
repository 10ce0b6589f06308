"""The aggregate report (docs/architecture.md §10). Reads Parquet only. (Evaluation of runs is cflcore.evaluate.)

* :func:`build_report` — the ``report`` stage in one process for a list of runs (every part of
  :mod:`cflcore.report.parts`, the one orchestrator; the workflow runs the parts as jobs, rules/report.smk);
  what it writes is the catalogue's (:mod:`cflcore.report.catalogue`);
* :func:`run_specs` — runs by id (a report plan's: cflcore.stages.report_plan), with their standard paths.
"""
from importlib import import_module
from typing import Any

# Lazy exports: the evaluate job must not pay for matplotlib/scipy.stats imports of the report job.
_EXPORTS = {"build_report": "parts", "LoadedRun": "runs", "MissingRun": "runs",
            "RunSpec": "runs", "load_run": "runs", "run_specs": "runs"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(name)


__all__ = ["build_report", "LoadedRun", "MissingRun", "RunSpec", "load_run", "run_specs"]
