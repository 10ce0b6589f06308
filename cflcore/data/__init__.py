"""Datasets -> Parquet, split generators and the federated view of a scenario (docs/architecture.md §3, §4, §7).

Public API:
* ``DATASETS`` (registry of loaders by name), ``prepare_dataset(loader, settings, out_path)``;
* ``load_dataset(path) -> DatasetTable``, ``load_federated(dataset_path, split_dir, device) -> FederatedData``;
* ``SPLIT_GENERATORS``, ``make_split(dataset_path, settings, n_clients, seed, out_dir) -> manifest``,
  ``split_summary(split_dir) -> DataFrame``.

The names are imported on first use (PEP 562), so a job imports only the module it needs: the
``prepare_dataset`` and ``split`` jobs never import torch, which only ``load_federated`` needs.
"""
from importlib import import_module
from typing import Any

_EXPORTS = {
    "ClientData": "federated", "FederatedData": "federated",
    "DATASETS": "loaders", "RawDataset": "loaders", "prepare_dataset": "loaders",
    "SPLIT_GENERATORS": "splits", "make_split": "splits", "split_summary": "splits",
    "DatasetTable": "store", "load_dataset": "store", "load_federated": "store",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = sorted(_EXPORTS)
