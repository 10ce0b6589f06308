"""Datasets -> Parquet, split generators and the federated view of a scenario (DESIGN §3, §4, §7).

Public API:
* ``DATASETS`` (registry of loaders by name), ``prepare_dataset(loader, settings, out_path)``;
* ``load_dataset(path) -> DatasetTable``, ``load_federated(dataset_path, split_dir, device) -> FederatedData``;
* ``SPLIT_GENERATORS``, ``make_split(dataset_path, settings, n_clients, seed, out_dir) -> manifest``,
  ``split_summary(split_dir) -> DataFrame``.
"""
from .federated import ClientData, FederatedData
from .loaders import DATASETS, RawDataset, prepare_dataset
from .splits import SPLIT_GENERATORS, make_split, split_summary
from .store import DatasetTable, load_dataset, load_federated

__all__ = [
    "DATASETS", "SPLIT_GENERATORS", "ClientData", "DatasetTable", "FederatedData", "RawDataset",
    "load_dataset", "load_federated", "make_split", "prepare_dataset", "split_summary",
]
