"""A synthetic FederatedData for tests and benchmarks without the data stage: random images with a
planted label signal, clients in 3 (or k) ground-truth clusters with disjoint class sets."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from .federated import ClientData, FederatedData


def _images(rng: np.random.Generator, labels: np.ndarray, shape: tuple[int, int, int], n_classes: int,
            signal: float) -> torch.Tensor:
    """Uniform noise plus a bright class-specific stripe (row band) so a small CNN can learn the label."""
    c, h, w = shape
    x = rng.uniform(0.0, 1.0 - signal, size=(len(labels), c, h, w)).astype(np.float32)
    band = max(1, h // n_classes)
    for i, lab in enumerate(labels):
        r0 = (int(lab) * band) % h
        x[i, :, r0:r0 + band, :] += signal
    return torch.from_numpy(x)


def synthetic_federated(n_clients: int = 6, n_train: int | Sequence[int] = 40, n_test: int = 16, n_orch: int = 60,
                        shape: tuple[int, int, int] = (1, 8, 8), n_classes: int = 6, n_clusters: int = 3,
                        seed: int = 0, signal: float = 0.5) -> FederatedData:
    """Clients are dealt round-robin to ``n_clusters`` clusters; cluster k owns classes {j : j % n_clusters == k}.
    ``n_train`` may be a list (unequal client sizes)."""
    rng = np.random.default_rng([seed, 0xDA7A])
    sizes = [int(n_train)] * n_clients if np.isscalar(n_train) else [int(s) for s in n_train]  # type: ignore[arg-type]
    true_clusters = np.arange(n_clients) % n_clusters
    clients, next_idx = [], 0
    for i in range(n_clients):
        classes = np.arange(n_classes)[np.arange(n_classes) % n_clusters == true_clusters[i]]
        y_tr = rng.choice(classes, size=sizes[i])
        y_te = rng.choice(classes, size=n_test)
        idx_tr = np.arange(next_idx, next_idx + sizes[i])
        next_idx += sizes[i]
        idx_te = np.arange(next_idx, next_idx + n_test)
        next_idx += n_test
        clients.append(ClientData(_images(rng, y_tr, shape, n_classes, signal), torch.from_numpy(y_tr.astype(np.int64)),
                                  _images(rng, y_te, shape, n_classes, signal), torch.from_numpy(y_te.astype(np.int64)),
                                  idx_tr, idx_te))
    y_orch = rng.integers(0, n_classes, size=n_orch)
    return FederatedData(clients, _images(rng, y_orch, shape, n_classes, signal), torch.from_numpy(y_orch.astype(np.int64)),
                         true_clusters, n_classes, tuple(shape), manifest={"synthetic": True, "seed": seed})
