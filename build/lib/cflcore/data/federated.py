"""The in-memory federated view of one scenario: every client's tensors plus the orchestrator set.

This is the only thing the engine and the explain stage need from ``cflcore.data``; build it with
``cflcore.data.store.load_federated(dataset_parquet, split_dir)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: building the view needs no torch import here
    import torch


@dataclass
class ClientData:
    """One client's local data: float32 images in [0, 1], shape (n, C, H, W), int64 labels.
    ``idx_*`` are the rows' ``idx`` in the dataset Parquet (for provenance and tests)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    idx_train: np.ndarray
    idx_test: np.ndarray

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.y_test.shape[0])


@dataclass
class FederatedData:
    clients: list[ClientData]
    x_orch: torch.Tensor
    y_orch: torch.Tensor
    true_clusters: np.ndarray  # (n_clients,) ground-truth cluster of every client
    n_classes: int
    shape: tuple[int, int, int]  # (C, H, W)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @property
    def n_true_clusters(self) -> int:
        return int(len(np.unique(self.true_clusters)))

    def to(self, device: torch.device | str) -> "FederatedData":
        def mv(c: ClientData) -> ClientData:
            return ClientData(c.x_train.to(device), c.y_train.to(device), c.x_test.to(device),
                              c.y_test.to(device), c.idx_train, c.idx_test)

        return FederatedData([mv(c) for c in self.clients], self.x_orch.to(device), self.y_orch.to(device),
                             self.true_clusters, self.n_classes, self.shape, self.manifest)
