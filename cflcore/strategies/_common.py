"""Helpers shared by the strategy plug-ins (not a plug-in itself: the leading underscore keeps the
registry's auto-discovery away)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..clustering.divergence import cosine_divergence_matrix
from ..plugin import ORACLE

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch


class LazySchema:
    """A class attribute computed on first access: lets OCFL's ``params_schema`` include the keys of
    every registered clusterer (discovered lazily) while staying a plain ``cls.params_schema`` lookup."""

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self.build = build
        self.value: dict[str, Any] | None = None

    def __get__(self, obj: Any, owner: type) -> dict[str, Any]:
        if self.value is None:
            self.value = self.build()
        return self.value


def divergence_numpy(deltas: torch.Tensor, precision: str = "float32") -> np.ndarray:
    """Γ (000 Def. 6) of the rows of ``deltas`` as a float64 numpy array."""
    return cosine_divergence_matrix(deltas, precision).astype(np.float64)


def labels_tensor(labels: np.ndarray) -> torch.Tensor:
    import torch
    return torch.as_tensor(np.asarray(labels, dtype=np.int64))


def as_int_list(x: Any) -> list[int]:
    return [int(v) for v in np.asarray(x).reshape(-1)]


def cluster_count(k: Any, n_true_clusters: int | None, method: str) -> int:
    """A fixed number of cluster models (IFCA, FeSEM): an int, or ``'oracle'`` = the split's true number of
    clusters (a ConfigError-style CflError when the context does not know it)."""
    from ..errors import CflError

    if k == ORACLE:
        if n_true_clusters is None:
            raise CflError(f"{method}.k: 'oracle' needs the number of true clusters; give an int")
        return int(n_true_clusters)
    return int(k)
