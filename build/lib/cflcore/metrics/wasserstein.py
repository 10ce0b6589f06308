"""Wasserstein Adjusted Scores WAS / WADB (004 §6, eq. 7, and Appendix B, Theorem B.3).

A client is described by its class-frequency vector (relative frequency of each class in its local
data), sorted by rank (descending). The distance between two clients is the 2-Wasserstein distance
between the empirical measures of their C frequencies, which for two samples of equal size C reduces to
the distance between the sorted vectors (004 eq. 38)::

    W_2(x, y) = ( (1/C) Σ_i |x_(i) − y_(i)|² )^{1/2}

004 eq. 7 prints the factor as ``1/C`` outside the root; the two differ by the constant ``sqrt(C)``,
and silhouette and Davies–Bouldin are both invariant to scaling all distances by a constant, so WAS and
WADB are identical under either form.

WAS  = silhouette with this distance (precomputed matrix).
WADB = Davies–Bouldin on the sorted frequency vectors: Euclidean distance between them is W_2·sqrt(C),
       a constant multiple, so scikit-learn's ``davies_bouldin_score`` on those vectors is exact.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.metrics import davies_bouldin_score, silhouette_score

from ..errors import DataError
from .internal import partition_is_scorable


def class_frequencies(label_histograms: Sequence[Sequence[float]]) -> np.ndarray:
    """Per-client relative class frequencies (rows sum to 1) from per-client label counts."""
    counts = np.asarray(label_histograms, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] == 0:
        raise DataError(f"label_histograms: expected one list of class counts per client, got shape {counts.shape}")
    if (counts < 0).any() or not np.isfinite(counts).all():
        raise DataError("label_histograms: counts must be finite and non-negative")
    totals = counts.sum(axis=1)
    if (totals <= 0).any():
        empty = int(np.flatnonzero(totals <= 0)[0])
        raise DataError(f"label_histograms[{empty}]: client has no samples; every client needs at least one")
    return counts / totals[:, None]


def rank_sorted(frequencies: np.ndarray) -> np.ndarray:
    """Each row sorted by rank statistic, largest first (004 §6: x_(i) ≥ x_(i+1))."""
    return -np.sort(-np.asarray(frequencies, dtype=np.float64), axis=1)


def sorted_frequency_wasserstein(x: Sequence[float], y: Sequence[float], p: float = 2.0) -> float:
    """p-Wasserstein distance between the empirical measures of two equal-size samples (004 eq. 38).

    Hand-rolled because ``scipy.stats.wasserstein_distance`` computes only p = 1 (for p = 1 the two agree,
    which the tests check). For equal-size 1-D samples the optimal coupling matches order statistics.
    """
    xs, ys = np.sort(np.asarray(x, dtype=np.float64)), np.sort(np.asarray(y, dtype=np.float64))
    if xs.shape != ys.shape or xs.ndim != 1:
        raise DataError(f"wasserstein: samples must be 1-D and of equal size, got {xs.shape} and {ys.shape}")
    if p < 1:
        raise DataError(f"wasserstein: p={p} is not allowed; p must be >= 1")
    return float(np.mean(np.abs(xs - ys) ** p) ** (1.0 / p))


def wasserstein_distance_matrix(frequencies: np.ndarray, p: float = 2.0) -> np.ndarray:
    """Pairwise :func:`sorted_frequency_wasserstein` between clients (rows of ``frequencies``)."""
    ranked = rank_sorted(frequencies)
    diffs = np.abs(ranked[:, None, :] - ranked[None, :, :]) ** p
    distances = np.mean(diffs, axis=2) ** (1.0 / p)
    np.fill_diagonal(distances, 0.0)
    return distances


def _check(frequencies: np.ndarray, labels: Sequence[int]) -> np.ndarray:
    labels = np.asarray(labels).ravel()
    if labels.size != frequencies.shape[0]:
        raise DataError(f"labels: {labels.size} labels for {frequencies.shape[0]} clients; they must match")
    return labels


def wasserstein_silhouette(label_histograms: Sequence[Sequence[float]], labels: Sequence[int]) -> float | None:
    """WAS (004 §6): silhouette under the sorted-frequency Wasserstein distance; None if undefined."""
    frequencies = class_frequencies(label_histograms)
    labels = _check(frequencies, labels)
    if not partition_is_scorable(labels):
        return None
    return float(silhouette_score(wasserstein_distance_matrix(frequencies), labels, metric="precomputed"))


def wasserstein_davies_bouldin(label_histograms: Sequence[Sequence[float]], labels: Sequence[int]) -> float | None:
    """WADB (004 §6): Davies–Bouldin on the rank-sorted frequency vectors; None if undefined."""
    frequencies = class_frequencies(label_histograms)
    labels = _check(frequencies, labels)
    if not partition_is_scorable(labels):
        return None
    score = float(davies_bouldin_score(rank_sorted(frequencies), labels))
    return score if np.isfinite(score) else None
