"""Small helpers on partitions shared by the strategies: consecutive relabelling, stable cluster ids
across rounds, and the ``inherit`` map the engine uses to seed a new cluster's model."""
from __future__ import annotations

from typing import Iterable

import numpy as np


def consecutive_labels(labels: Iterable[int]) -> np.ndarray:
    """Relabel to 0..K−1 in order of first appearance (deterministic; clusterers' ids are arbitrary)."""
    arr = np.asarray(list(labels) if not isinstance(labels, np.ndarray) else labels, dtype=np.int64)
    if arr.size == 0:
        return arr
    _, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse].astype(np.int64)


def inherit_by_overlap(previous: np.ndarray, new: np.ndarray, clients: np.ndarray | None = None) -> dict[int, int]:
    """For each cluster of ``new``: the ``previous`` cluster holding most of its members (ties: the
    smallest id), restricted to ``clients`` when given. The engine copies that cluster's model (and
    server-optimiser state) into the new one (StrategyResult.inherit)."""
    previous = np.asarray(previous, dtype=np.int64)
    new = np.asarray(new, dtype=np.int64)
    idx = np.arange(len(new)) if clients is None else np.asarray(clients, dtype=np.int64)
    result: dict[int, int] = {}
    for c in np.unique(new):
        members = idx[new[idx] == c]
        if members.size == 0:
            members = np.flatnonzero(new == c)
        olds, counts = np.unique(previous[members], return_counts=True)
        result[int(c)] = int(olds[np.argmax(counts)])  # np.unique sorts, argmax takes the first max
    return result


def match_cluster_ids(previous: np.ndarray, groups: list[np.ndarray], next_id: int,
                      reserved: Iterable[int] = ()) -> tuple[np.ndarray, int]:
    """Give each group (array of client ids) a cluster id: the previous id it overlaps most, one-to-one
    (Hungarian matching on the overlap counts, scipy), otherwise a fresh id from ``next_id``.

    Returns (ids per group, next unused id). Keeps ids stable across rounds for methods that recluster
    every round (Louvain CFL), so reports and the engine's per-cluster models line up."""
    previous = np.asarray(previous, dtype=np.int64)
    reserved = set(int(r) for r in reserved)
    old_ids = np.array(sorted(set(np.unique(previous).tolist()) - reserved), dtype=np.int64)
    ids = np.full(len(groups), -1, dtype=np.int64)
    if len(groups) and old_ids.size:
        from scipy.optimize import linear_sum_assignment  # lazy: scipy.optimize costs ~0.3 s of every train job

        overlap = np.array([[np.sum(previous[g] == o) for o in old_ids] for g in groups], dtype=np.float64)
        rows, cols = linear_sum_assignment(-overlap)
        for r, c in zip(rows, cols):
            if overlap[r, c] > 0:
                ids[r] = old_ids[c]
    for i in range(len(groups)):
        if ids[i] < 0:
            while next_id in reserved:
                next_id += 1
            ids[i] = next_id
            next_id += 1
    next_id = max(next_id, int(ids.max()) + 1 if len(ids) else next_id)
    return ids, next_id
