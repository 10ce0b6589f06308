"""BCL: Briggs et al. (2020), hierarchical clustering of local updates — the baseline of 000 §4.2.

FedAvg for ``round`` rounds, then ONE agglomerative clustering (sklearn, average linkage) of the
updates on cosine DISTANCE (000 Def. 5) with ``distance_threshold`` (000 §4.2 searched [0.05, 0.4]);
the clusters train separately afterwards. The published OCFL code fed cosine similarity as the
distance here (docs/architecture.md §6); we do not by default. ``distance_input: similarity`` reproduces the published
bug (the ``bcl-published`` variant of config/paper.yaml), so a user can see which gaps come from it.
Degenerate inputs (one client, identical or all-zero updates) give one cluster. Clients not sampled at
the clustering round stay in the pre-clustering cohort.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..clustering.partition import consecutive_labels, inherit_by_overlap
from .base import ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult, register_strategy
from ._common import labels_tensor


def agglomerative_on_distance(divergence: np.ndarray, distance_threshold: float) -> np.ndarray:
    """Average-linkage agglomerative clustering of a precomputed distance matrix, cut at the threshold."""
    from sklearn.cluster import AgglomerativeClustering

    n = divergence.shape[0]
    if n < 2 or float(np.max(divergence, initial=0.0)) <= 1e-12:
        return np.zeros(n, dtype=np.int64)
    model = AgglomerativeClustering(n_clusters=None, metric="precomputed", linkage="average",
                                    distance_threshold=float(distance_threshold))
    return consecutive_labels(model.fit_predict(np.asarray(divergence, dtype=np.float64)))


def published_similarity(divergence: np.ndarray) -> np.ndarray:
    """The matrix the published OCFL code handed to the dendrogram as distances: the cosine similarity
    1 − Γ, diagonal 1 (sklearn's ``cosine_similarity``). Similar clients are then *far* apart."""
    similarity = 1.0 - np.asarray(divergence, dtype=np.float64)
    np.fill_diagonal(similarity, 1.0)
    return similarity


@register_strategy("bcl")
class BriggsClustering(Strategy):
    params_schema = {
        "round": {"type": "integer", "minimum": 0, "default": 20,
                  "description": "cluster at this round (FedAvg before it)"},
        "distance_threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 2, "default": 0.2,
                               "description": "cosine-distance cut of the dendrogram (000 searched 0.05–0.4)"},
        "precision": {"enum": ["float32", "float64"], "default": "float32",
                      "description": "kept for older configs and ignored: every strategy reads the round's one float64-accumulated Gram product (cflcore/clustering/divergence.py)"},
        "distance_input": {"enum": ["divergence", "similarity"], "default": "divergence",
                           "description": "what the dendrogram is built on: cosine distance Γ (Briggs et al.) or, "
                                          "as in the published OCFL code, cosine similarity 1 − Γ (a bug)"},
    }

    @classmethod
    def replay_clusterer(cls, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """Briggs et al.'s average-linkage cut of Γ (:func:`agglomerative_on_distance`, which is sklearn's
        AgglomerativeClustering with these arguments); not replayable on the similarity the published code used."""
        if params["distance_input"] != "divergence":
            return None
        return {"clusterer": "sklearn", "estimator": "AgglomerativeClustering",
                "clusterer_params": {"n_clusters": None, "metric": "precomputed", "linkage": "average",
                                     "distance_threshold": float(params["distance_threshold"])}}

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        self.clustered = False

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        if self.clustered or updates.round < int(self.params["round"]):
            return StrategyResult(self.assignment, {"clustered": False})
        gamma = updates.divergence()  # the round's one Gram product
        local = agglomerative_on_distance(published_similarity(gamma) if self.params["distance_input"] == "similarity"
                                          else gamma, float(self.params["distance_threshold"]))
        previous = self.assignment.labels
        labels = previous.copy()
        labels[np.asarray(updates.clients, dtype=np.int64)] = int(previous.max()) + 1 + local
        self.assignment = ClusterAssignment(labels)
        self.clustered = True
        return StrategyResult(self.assignment, {"clustered": True, "n_found": int(local.max()) + 1},
                              divergence=gamma, inherit=inherit_by_overlap(previous, labels))

    def state_dict(self) -> dict[str, Any]:
        return {"labels": labels_tensor(self.assignment.labels), "clustered": bool(self.clustered)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.clustered = bool(state["clustered"])
