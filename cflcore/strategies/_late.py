"""Late-joining clients for one-shot clustering (000 §6.2, "Dynamic Client Environment").

000 §6.2: OCFL "naturally extends to a dynamic client environment, where One-Shot Clustering is performed
on only a subset of clients [...] attributing each client to the most appropriate cluster by comparing the
received gradients with the given clustering structure". These are the pure pieces of that protocol;
:class:`cflcore.strategies.ocfl.OneShotClustering` wires them into the engine's rounds.

* Which clients are late: a uniform draw without replacement from the strategy context's seeded generator
  (:func:`choose_late_clients`). It is NOT stratified by true cluster: a strategy never sees the ground truth
  (StrategyContext). A true cluster may therefore end up with no founding member; its late clients are then
  attached to the nearest founded cluster, necessarily a wrong one (the evaluation flags them, see
  cflcore/evaluate/late_clients.py). With the default 15 clients, 3 late and true clusters of >= 3
  clients this needs every late client to come from the smallest cluster (1 draw in 455 on 3/7/5).
* ``attach: divergence``: the mean cosine distance (000 Def. 6) between the late client's joining update
  and the clustering-round updates of each found cluster's members, i.e. the mean of the row of Γ the late
  client would have had had it taken part in the clustering round. Both updates start from the same
  pre-clustering model (see ocfl.py), so they are comparable. Since
  mean_j (1 − cos(x, d_j)) = 1 − x̂ · mean_j d̂_j, only the mean unit update of each cluster is kept
  (:func:`mean_unit_updates`), not every member's update.
* ``attach: loss``: IFCA-style (Ghosh et al.), the cluster whose model has the lowest mean loss on the late
  client's training data (the engine's ``evaluate`` function).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch

ATTACH_MODES = ("divergence", "loss")


def late_clients_allowed(n_clients: int | None = None) -> str:
    """The allowed values of ``late_clients``, for error messages."""
    upper = f"{n_clients - 2}" if n_clients is not None else "n_clients − 2"
    return f"0 (none), a fraction in (0, 1), or an integer count from 1 to {upper} (OCFL needs >= 2 founding clients)"


def check_late_clients_value(value: Any, field: str) -> None:
    """Static check of ``late_clients`` (no client count known): a number >= 0; integer when >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{field}: {value!r} is not allowed; allowed: {late_clients_allowed()}")
    if value >= 1 and float(value) != int(value):
        raise ConfigError(f"{field}: {value!r} is not allowed (a count must be an integer, a fraction below 1); "
                          f"allowed: {late_clients_allowed()}")


def resolve_late_count(value: Any, n_clients: int, field: str = "late_clients") -> int:
    """Number of late clients: ``round(value · n)`` (at least 1) for a fraction in (0, 1), else the integer itself.
    At least two clients must found the federation (Γ and the temperature need n >= 2, 000 Def. 7)."""
    check_late_clients_value(value, field)
    if value == 0:
        return 0
    count = max(1, int(round(float(value) * n_clients))) if value < 1 else int(value)
    if count > n_clients - 2:
        raise ConfigError(f"{field}: {value!r} means {count} late clients of {n_clients}; "
                          f"allowed: {late_clients_allowed(n_clients)}")
    return count


def choose_late_clients(n_clients: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted ids of ``count`` late clients, uniformly without replacement from ``rng`` (no ground truth)."""
    if count <= 0:
        return np.empty(0, dtype=np.int64)
    return np.sort(rng.choice(n_clients, size=count, replace=False)).astype(np.int64)


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows scaled to unit L2 norm in float64 on the CPU; an all-zero row stays zero."""
    import torch
    x = x.detach().to("cpu", torch.float64)
    norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    return torch.where(norms > 0, x / torch.where(norms > 0, norms, torch.ones_like(norms)), torch.zeros_like(x))


def mean_unit_updates(deltas: torch.Tensor, labels: np.ndarray) -> tuple[list[int], torch.Tensor]:
    """(sorted cluster ids, (k, P) float64 matrix): per cluster the mean of its members' unit updates."""
    import torch
    unit = unit_rows(deltas)
    labels = np.asarray(labels, dtype=np.int64)
    ids = sorted(int(c) for c in np.unique(labels))
    rows = [unit[torch.as_tensor(np.flatnonzero(labels == c))].mean(dim=0) for c in ids]
    return ids, torch.stack(rows)


def mean_cosine_distance(late_deltas: torch.Tensor, centroids: torch.Tensor) -> np.ndarray:
    """(m, k): mean cosine distance of each late update to each cluster's members, 1 − x̂ · mean_j d̂_j.
    An all-zero late update is at distance 1 from every cluster (cosine 0, as in Γ)."""
    import torch
    return (1.0 - unit_rows(late_deltas) @ centroids.to(torch.float64).T).numpy()


def nearest(scores: np.ndarray, cluster_ids: Sequence[int]) -> np.ndarray:
    """Per row the cluster id of the smallest score (ties: the first, i.e. the smallest id)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[1] != len(cluster_ids) or not len(cluster_ids):
        raise ValueError(f"scores of shape {scores.shape} do not match {len(cluster_ids)} clusters")
    filled = np.where(np.isfinite(scores), scores, np.inf)
    return np.asarray(cluster_ids, dtype=np.int64)[np.argmin(filled, axis=1)]
