"""Internal scores of a partition on the clients' update vectors, from their Gram matrix.

The engine stores only the Gram matrix ``G = Δ Δᵀ`` of each round's sampled deltas (``gram.parquet``),
not the deltas. Both scores below are exact functions of ``G``:

* silhouette: Euclidean distances ``d_ij² = G_ii + G_jj − 2 G_ij`` with ``metric="precomputed"``;
* Davies–Bouldin: it needs centroids, so the points are embedded exactly as ``X = V·sqrt(max(Λ, 0))``
  (eigendecomposition ``G = V Λ Vᵀ``; ``X Xᵀ = G``, so all distances and centroid distances are kept).

Both are undefined unless 2 ≤ number of clusters ≤ number of points − 1 (scikit-learn's own rule):
then the functions return ``None`` (null in Parquet), never raise.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.metrics import davies_bouldin_score, silhouette_score

from ..errors import DataError


def _square_gram(gram: np.ndarray) -> np.ndarray:
    gram = np.asarray(gram, dtype=np.float64)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1]:
        raise DataError(f"gram: expected a square matrix, got shape {gram.shape}")
    return gram


def partition_is_scorable(labels: Sequence[int]) -> bool:
    """True when silhouette / Davies–Bouldin are defined: 2 ≤ #clusters ≤ #points − 1."""
    labels = np.asarray(labels).ravel()
    n_clusters = len(np.unique(labels))
    return 2 <= n_clusters <= labels.size - 1


def distances_from_gram(gram: np.ndarray) -> np.ndarray:
    """Euclidean distance matrix of the vectors whose Gram matrix is ``gram`` (clipped at 0, zero diagonal)."""
    gram = _square_gram(gram)
    diag = np.diag(gram)
    squared = diag[:, None] + diag[None, :] - 2.0 * gram
    distances = np.sqrt(np.clip(squared, 0.0, None))
    distances = 0.5 * (distances + distances.T)
    np.fill_diagonal(distances, 0.0)
    return distances


def embedding_from_gram(gram: np.ndarray) -> np.ndarray:
    """Points ``X = V·sqrt(max(Λ, 0))`` with ``X Xᵀ = G`` (exact up to rotation; negative eigenvalues are round-off)."""
    gram = _square_gram(gram)
    eigenvalues, eigenvectors = np.linalg.eigh(0.5 * (gram + gram.T))
    return eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))[None, :]


def _scorable(gram: np.ndarray, labels: Sequence[int]) -> tuple[np.ndarray | None, np.ndarray]:
    """The square Gram matrix and labels, or (None, labels) when a score is undefined (fewer than two
    clusters, a cluster per point, non-finite values)."""
    gram = _square_gram(gram)
    labels = np.asarray(labels).ravel()
    if labels.size != gram.shape[0]:
        raise DataError(f"gram: {gram.shape[0]} clients but {labels.size} labels; they must match")
    if not partition_is_scorable(labels) or not np.isfinite(gram).all():
        return None, labels
    return gram, labels


def silhouette_from_gram(gram: np.ndarray, labels: Sequence[int]) -> float | None:
    """Mean silhouette of ``labels`` on the update vectors (None when undefined or not finite)."""
    gram, labels = _scorable(gram, labels)
    if gram is None:
        return None
    return float(silhouette_score(distances_from_gram(gram), labels, metric="precomputed"))


def davies_bouldin_from_gram(gram: np.ndarray, labels: Sequence[int]) -> float | None:
    """Davies–Bouldin index of ``labels`` on the update vectors (None when undefined or not finite)."""
    gram, labels = _scorable(gram, labels)
    if gram is None:
        return None
    score = float(davies_bouldin_score(embedding_from_gram(gram), labels))
    return score if np.isfinite(score) else None


def silhouette_from_distances(distances: np.ndarray, labels: Sequence[int]) -> float | None:
    """Mean silhouette of ``labels`` on a precomputed distance matrix (e.g. the divergence Γ, 000 Def. 6),
    symmetrised, negatives clipped and the diagonal zeroed first; None when undefined or not finite."""
    distances = _square_gram(distances)
    labels = np.asarray(labels).ravel()
    if labels.size != distances.shape[0]:
        raise DataError(f"distances: {distances.shape[0]} clients but {labels.size} labels; they must match")
    if not partition_is_scorable(labels) or not np.isfinite(distances).all():
        return None
    sym = np.clip(0.5 * (distances + distances.T), 0.0, None)
    np.fill_diagonal(sym, 0.0)
    return float(silhouette_score(sym, labels, metric="precomputed"))


def silhouette_authors_from_distances(distances: np.ndarray, labels: Sequence[int]) -> float | None:
    """002's authors' silhouette (``ClusteringEvaluator.silhouette_score`` in albenoit/DeepLearningTools, re-derived)
    on a precomputed distance matrix, beside sklearn's :func:`silhouette_from_distances`: a(i) is the mean distance
    from i to every member of its cluster *including itself* (so a singleton has a = 0 and scores 1); the other
    cluster compared is the nearest one by its centre, here its medoid (the member with the least summed distance
    to the others: only distances are recorded, so the centroid the authors take on vectors is not available);
    b(i) is the mean distance from i to that cluster's members; s(i) = (b − a) / max(a, b) over all nodes. One
    cluster scores 0, as the authors' evaluator returns for a single community (a seed that found one community
    counts, it is not dropped); None for a non-finite matrix. The nodes scored are those of ``distances``: the
    recorded matrix holds the sampled clients, which at 100 % participation are every node of the authors' graph."""
    d = np.asarray(distances, dtype=np.float64)
    labels = np.asarray(labels).ravel()
    if labels.size != d.shape[0]:
        raise DataError(f"distances: {d.shape[0]} clients but {labels.size} labels; they must match")
    clusters = np.unique(labels)
    if not np.isfinite(d).all():
        return None
    if len(clusters) < 2:
        return 0.0
    sym = np.clip(0.5 * (d + d.T), 0.0, None)
    np.fill_diagonal(sym, 0.0)
    members = {c: np.flatnonzero(labels == c) for c in clusters}
    medoid = {c: int(m[np.argmin(sym[np.ix_(m, m)].sum(axis=1))]) for c, m in members.items()}
    scores = np.empty(labels.size)
    for i in range(labels.size):
        own = labels[i]
        a = float(sym[i, members[own]].mean())
        nearest = min((c for c in clusters if c != own), key=lambda c: (sym[i, medoid[c]], c))
        b = float(sym[i, members[nearest]].mean())
        scores[i] = 0.0 if max(a, b) == 0 else (b - a) / max(a, b)
    return float(scores.mean())
