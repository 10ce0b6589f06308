"""The evaluation stages (docs/architecture.md §2, §8): scores of a finished run, read from its Parquet
files only (no torch models are loaded).

* :mod:`.clustering` — the ``evaluate`` stage: clustering.parquet and personalisation.parquet;
* :mod:`.whatif` — the ``whatif`` stage: every configured clusterer replayed on every recorded round;
* ``late_clients`` — attachment of late-joining clients (000 §6.2), owned by that feature.

Imports point one way: workflow → stages → evaluate → {metrics, clustering, io}; nothing here imports
the engine (cflcore.fl) or the strategies.
"""
from importlib import import_module
from typing import Any

# Lazy exports: `cfl evaluate` does not import the clusterers, `cfl whatif` not the personalisation code
# (the workflow's evaluate job runs both stages in one process).
_EXPORTS = {"evaluate_run": "clustering", "load_ground_truth": "clustering", "GroundTruth": "clustering",
            "whatif_run": "whatif"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(name)


__all__ = sorted(_EXPORTS)
