"""FeSEM: federated stochastic expectation-maximisation over model parameters (Xie, Long, Shen, Zhou,
Wang, Jiang & Zhang, "Multi-center federated learning", arXiv 2005.01026; Long et al., World Wide Web
26, 2023), a clustered baseline of 004 (Tables 1, 3, 4, 6-8) that needs the number of clusters k.

The objective is a K-means over client models: min Σ_i Σ_k r_i^(k) ‖W_i − W̃^(k)‖² (squared L2 distance of
the flattened parameters). Every round, after each sampled client has trained its centre's model locally
(so W_i is the client's new local model):

* E-step: r_i = argmin_k ‖W_i − W̃^(k)‖² over the current centres W̃ (the models the clients were sent);
  ties go to the smallest cluster id. Clients not sampled keep their last assignment.
* M-step: W̃^(k) = mean of the local models of k's sampled members. This is the engine's per-cluster
  aggregation (server SGD at lr 1 with ``aggregation: unweighted`` is exactly that mean; the engine's
  other server optimisers and FedProx compose with it as options).

Next round each client starts from its centre (Strategy.configure's default).

Initialisation (seeded): the centres are seeded once, at the first round, by k-means++ (Arthur &
Vassilvitskii 2007; ``sklearn.cluster.kmeans_plusplus``, ``random_state`` from ``ctx.generator``) over the
local models of that round's sampled clients, who all trained from the engine's one initial model; that
round's E-step then assigns against those k seeds. Departure: the paper "randomly initialises" the k
centres; k independent random network initialisations would make the first E-step degenerate (every
client's local model, trained from one shared start, is nearest the same random centre), so the seeds
are drawn from the clients' first local models instead, as k-means++ does with data points.

A centre left without members disappears from the partition and the engine drops its model (as for
IFCA), so the number of clusters can fall below k; ``cluster_sizes`` in server.parquet shows it.
State (``state_dict``): the partition and whether the centres were seeded; every other quantity is
recomputed from the round's updates.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import CflError
from ..plugin import ORACLE
from .base import (ClusterAssignment, EvaluateFn, RoundUpdates, StartSpec, Strategy, StrategyContext,
                           StrategyResult, register_strategy)
from ._common import cluster_count, labels_tensor

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch

_STREAM_INIT = 0xFE5


def squared_distances(models: torch.Tensor, centres: torch.Tensor) -> np.ndarray:
    """‖W_i − W̃_k‖² in float64, (n_models, n_centres) (the E-step's distance)."""
    import torch
    a, b = models.to(torch.float64), centres.to(torch.float64)
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(d.cpu().numpy(), 0.0)


def e_step(distances: np.ndarray, centre_ids: list[int]) -> np.ndarray:
    """r_i = the id of the nearest centre per row (first = smallest id on ties; ``centre_ids`` sorted)."""
    return np.asarray(centre_ids, dtype=np.int64)[np.argmin(np.asarray(distances, dtype=np.float64), axis=1)]


def kmeanspp_seeds(models: torch.Tensor, k: int, seed: int) -> np.ndarray:
    """Row indices of ``k`` k-means++ seeds among ``models`` (scikit-learn's greedy k-means++)."""
    import torch
    from sklearn.cluster import kmeans_plusplus  # lazy: keeps job start-up short

    x = models.to(torch.float64).cpu().numpy()
    _, indices = kmeans_plusplus(x, n_clusters=k, random_state=seed)
    return np.asarray(indices, dtype=np.int64)


@register_strategy("fesem")
class FeSEM(Strategy):
    params_schema = {
        "k": {"description": "number of centres (004 tunes 2-5, Table 8): 'oracle' (true number) or an int",
              "default": 3, "oneOf": [{"const": ORACLE}, {"type": "integer", "minimum": 1}]},
    }

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        self.k = cluster_count(self.params["k"], ctx.n_true_clusters, "fesem")
        self.seeded = False
        self._sent: dict[int, torch.Tensor] = {}

    def configure(self, rnd: int, clients: np.ndarray, evaluate: EvaluateFn,
                  models: Mapping[int, torch.Tensor]) -> dict[int, StartSpec]:
        self._sent = dict(models)  # the current centres W̃ (the engine hands fresh copies)
        return super().configure(rnd, clients, evaluate, models)

    def local_models(self, updates: RoundUpdates) -> torch.Tensor:
        """W_i of the sampled clients: start + delta (the start is their centre when not kept by the engine)."""
        import torch
        if updates.start is not None:
            return updates.params
        starts = torch.stack([self._sent[int(self.assignment.labels[c])] for c in updates.clients])
        return starts.to(updates.deltas) + updates.deltas

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        import torch
        local = self.local_models(updates)
        labels = self.assignment.labels.copy()
        inherit: dict[int, int] = {}
        diagnostics: dict[str, Any] = {}
        if not self.seeded:
            if len(updates.clients) < self.k:
                raise CflError(f"fesem.k: {self.k} centres need at least {self.k} clients in the first round; "
                               f"{len(updates.clients)} were sampled")
            seed = int(self.ctx.generator(_STREAM_INIT).integers(2 ** 31 - 1))
            rows = kmeanspp_seeds(local, self.k, seed)
            centres, ids = local[torch.as_tensor(rows, device=local.device)], list(range(self.k))
            src = int(self.assignment.labels[updates.clients[0]])  # everyone trained from the one initial model
            inherit = {c: src for c in ids}
            diagnostics["seed_clients"] = [int(updates.clients[r]) for r in rows]
            self.seeded = True
        else:
            ids = sorted(self._sent)
            centres = torch.stack([self._sent[c] for c in ids]).to(local)
        distances = squared_distances(local, centres)
        choice = e_step(distances, ids)
        moved = int(np.sum(labels[updates.clients] != choice))
        labels[updates.clients] = choice
        self.assignment = ClusterAssignment(labels)
        sizes = {str(int(c)): int(n) for c, n in zip(*np.unique(labels, return_counts=True))}
        diagnostics.update({"cluster_sizes": sizes, "reassigned": moved,
                            "objective": float(distances[np.arange(len(choice)), np.searchsorted(ids, choice)].mean())})
        return StrategyResult(self.assignment, diagnostics, inherit=inherit)

    def state_dict(self) -> dict[str, Any]:
        return {"labels": labels_tensor(self.assignment.labels), "seeded": bool(self.seeded)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.seeded = bool(state["seeded"])
