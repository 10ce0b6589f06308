"""Synthetic round updates with a planted partition, for the strategy tests and benchmarks/server_speed.py
(no engine needed). Everything is drawn from explicit seeded generators.

A test helper, so it lives in tests/ (it was cflcore/clustering/synthetic.py, which made the clustering
package import the engine's strategy interface)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from cflcore.strategies.base import ClusterAssignment, EvaluateFn, RoundUpdates


def planted_labels(sizes: Sequence[int]) -> np.ndarray:
    return np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)


def planted_deltas(sizes: Sequence[int], n_params: int, seed: int, noise: float = 0.1,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Deltas drawn around ``len(sizes)`` random centres (unit-norm, nearly orthogonal in high dimension):
    client i of cluster c gets centre_c + noise · N(0, I/P)."""
    gen = torch.Generator().manual_seed(int(seed))
    centres = torch.randn(len(sizes), n_params, generator=gen, dtype=torch.float64)
    centres /= torch.linalg.vector_norm(centres, dim=1, keepdim=True)
    labels = torch.as_tensor(planted_labels(sizes))
    jitter = torch.randn(int(sum(sizes)), n_params, generator=gen, dtype=torch.float64) * (noise / n_params ** 0.5)
    return (centres[labels] + jitter).to(dtype)


def no_evaluate(models, clients) -> np.ndarray:  # pragma: no cover - only called by IFCA-like strategies
    raise RuntimeError("evaluate is not available in this synthetic round")


def round_updates(rnd: int, deltas: torch.Tensor, clients: Sequence[int] | None = None,
                  step_losses: Sequence[np.ndarray] | None = None, start: torch.Tensor | None = None,
                  evaluate: EvaluateFn = no_evaluate, previous: ClusterAssignment | None = None,
                  n_clients: int | None = None) -> RoundUpdates:
    """A RoundUpdates for ``deltas`` (rows = ``clients``, default all)."""
    m = deltas.shape[0]
    clients_arr = np.arange(m, dtype=np.int64) if clients is None else np.asarray(clients, dtype=np.int64)
    losses = list(step_losses) if step_losses is not None else [np.ones(4) for _ in range(m)]
    prev = previous if previous is not None else ClusterAssignment.single(n_clients or m)
    return RoundUpdates(round=rnd, clients=clients_arr, deltas=deltas, start=start, step_losses=losses,
                        n_samples=np.full(m, 100), evaluate=evaluate, previous=prev)
