"""``lab-kmeans``: FedAvg until round ``at_round``, then ONE k-means of the clients' updates on the unit sphere
(each update divided by its norm, so that the squared Euclidean distance is 2 × the cosine distance), ``k`` clusters
that train apart afterwards. A small one-shot method in the manner of Briggs et al. 2020 (cflcore's ``bcl``), with a
fixed number of clusters."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from cflcore.plugin import Population
from cflcore.strategies.base import ClusterAssignment, RoundUpdates, Strategy, StrategyResult, register_strategy


@register_strategy("lab-kmeans")
class LabKMeans(Strategy):
    params_schema = {
        "k": {"type": "integer", "minimum": 1, "default": 2, "description": "number of clusters"},
        "at_round": {"type": "integer", "minimum": 0, "default": 1, "description": "cluster at this round (FedAvg before)"},
    }

    @classmethod
    def cannot_split(cls, params: Mapping[str, Any], population: Population) -> str | None:
        """One cluster can never recover two groups: the cross tables print this instead of a score."""
        k = int({**{"k": 2}, **params}["k"])
        groups = len(population.group_sizes or ())
        return f"k = 1 keeps the {groups} groups in one cluster" if k == 1 and groups > 1 else None

    def setup(self, ctx) -> None:
        super().setup(ctx)
        self.clustered = False

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        if self.clustered or updates.round < int(self.params["at_round"]):
            return StrategyResult(self.assignment, {"clustered": False})
        from sklearn.cluster import KMeans

        deltas = updates.deltas.double().cpu().numpy()
        unit = deltas / np.maximum(np.linalg.norm(deltas, axis=1, keepdims=True), 1e-12)
        k = min(int(self.params["k"]), len(unit))
        seed = int(self.ctx.generator(70).integers(2**31 - 1))  # from the run's seed, never a global RNG
        local = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(unit)
        labels = self.assignment.labels.copy()
        labels[np.asarray(updates.clients, dtype=np.int64)] = local
        self.assignment = ClusterAssignment(labels)
        self.clustered = True
        return StrategyResult(self.assignment, {"clustered": True, "n_found": int(len(set(local.tolist())))})

    def state_dict(self) -> dict[str, Any]:
        import torch

        return {"labels": torch.as_tensor(self.assignment.labels, dtype=torch.int64), "clustered": bool(self.clustered)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.clustered = bool(state["clustered"])
