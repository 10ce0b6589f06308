"""The in-memory federated view of one scenario: every client's tensors plus the orchestrator set.

This is the only thing the engine and the explain stage need from ``cflcore.data``; build it with
``cflcore.data.store.load_federated(dataset_parquet, split_dir)``. A split with a drift schedule
(cflcore.data.drift) gives a view per round, :meth:`FederatedData.at_round`: a client that drifted into
another group holds its own samples under that group's transform (:func:`with_transform`), or, where a group is a
class distribution (label skew), the sample of that group the split drew for it (manifest ``drift.samples``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from .drift import groups_at_round
from .transforms import apply_domain, swap_labels

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


def with_transform(raw: ClientData, domain: Mapping[str, Any] | None,
                   swaps: Sequence[Sequence[int]] | None) -> ClientData:
    """A client's samples under a transform the manifest records (cflcore.data.transforms): its visual ``domain``
    on its train then test images (noise from ``torch.Generator().manual_seed(noise_seed)``), its label ``swaps`` on
    its train and test labels."""
    import torch

    x_train, x_test, y_train, y_test = raw.x_train, raw.x_test, raw.y_train, raw.y_test
    if domain is not None:
        gen = torch.Generator().manual_seed(int(domain.get("noise_seed", 0)))
        x_train = apply_domain(x_train, domain, gen)
        x_test = apply_domain(x_test, domain, gen)
    if swaps:
        y_train = torch.from_numpy(swap_labels(y_train.numpy(), swaps))
        y_test = torch.from_numpy(swap_labels(y_test.numpy(), swaps))
    return ClientData(x_train, y_train, x_test, y_test, raw.idx_train, raw.idx_test)


@dataclass
class Drift:
    """What a drift schedule needs beyond the round-0 clients: the round-0 groups, the ``changes`` (manifest
    ``drift``), each group's transform, the untransformed samples (on the CPU) of every client that moves, and the
    samples a class-distribution split drew for (client, group) pairs (``drawn``, manifest ``drift.samples``). A
    client's data in a group is built once per device and kept (the trainers cache a client's tensors by object)."""

    home: np.ndarray  # the round-0 group of every client (manifest cluster_of_client)
    changes: list[list[int]]
    group_transforms: list[dict[str, Any]]
    raw: dict[int, ClientData]
    device: Any = "cpu"
    built: dict[tuple[int, int], ClientData] = field(default_factory=dict)
    drawn: dict[tuple[int, int], ClientData] = field(default_factory=dict)

    def client_in_group(self, client: int, group: int) -> ClientData:
        key = (int(client), int(group))
        if key not in self.built:
            t = self.group_transforms[int(group)]
            data = with_transform(self.drawn.get(key) or self.raw[int(client)], t.get("domain"), t.get("label_swaps"))
            self.built[key] = data if str(self.device) == "cpu" else move_client(data, self.device)
        return self.built[key]


def move_client(c: ClientData, device: Any) -> ClientData:
    return ClientData(c.x_train.to(device), c.y_train.to(device), c.x_test.to(device), c.y_test.to(device),
                      c.idx_train, c.idx_test)


@dataclass
class FederatedData:
    clients: list[ClientData]
    x_orch: torch.Tensor
    y_orch: torch.Tensor
    true_clusters: np.ndarray  # (n_clients,) ground-truth cluster of every client
    n_classes: int
    shape: tuple[int, int, int]  # (C, H, W)
    manifest: dict[str, Any] = field(default_factory=dict)
    drift: Drift | None = None  # a split with a drift schedule (None: static, every round the same view)

    def at_round(self, rnd: int) -> "FederatedData":
        """The federation in round ``rnd``: every client in its group of that round (cflcore.data.drift),
        ``true_clusters`` those groups; itself for a static split."""
        if self.drift is None:
            return self
        groups = groups_at_round(self.drift.home, self.drift.changes, rnd)
        clients = [self.drift.client_in_group(k, g) for k, g in enumerate(groups)]
        return replace(self, clients=clients, true_clusters=groups)

    @property
    def n_clients(self) -> int:
        return len(self.clients)

    @property
    def n_true_clusters(self) -> int:
        return int(len(np.unique(self.true_clusters)))

    def to(self, device: torch.device | str) -> "FederatedData":
        clients = [move_client(c, device) for c in self.clients]
        drift = None
        if self.drift is not None:  # the round-0 clients, moved, are every client's data in its home group
            drift = replace(self.drift, device=device, built={(k, int(self.true_clusters[k])): c
                                                              for k, c in enumerate(clients)})
        return FederatedData(clients, self.x_orch.to(device), self.y_orch.to(device),
                             self.true_clusters, self.n_classes, self.shape, self.manifest, drift)
