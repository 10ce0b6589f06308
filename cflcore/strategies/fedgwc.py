"""FedGWC: interaction-aware Gaussian weighting for clustered FL (004 §4, Algorithms 1–2, App. F).

Per cluster, every round, from the sampled members' per-step training losses l_k^{t,s}:
* Gaussian rewards r_k^{t,s} = exp(−(l_k^{t,s} − m^{t,s})² / (2 σ^{t,s}²)) with the members' mean and
  sample variance per step, averaged over steps: ω_k^t (eq. 1);
* Gaussian weights γ_k ← (1 − α) γ_k + α ω_k (eq. 2) and the interaction matrix
  P_kj ← (1 − α) P_kj + α ω_k for co-sampled (k, j) (eq. 3); α = the participation rate by default
  (App. F: α_t = α = participation);
* MSE of the cluster's sub-matrix P_(n) between consecutive rounds (initialised and reset to 1 after a
  split, Alg. 1 l. 5, 19); when it falls below ε the cluster is considered for a split (Alg. 1 l. 15):
  unbiased perception vectors and the RBF affinity W_kj = exp(−β ‖v_k^j − v_j^k‖²) (eq. 4), spectral
  clustering (sklearn, affinity="precomputed", seeded) for n = 2 … n_max, Davies–Bouldin on the rows
  of W; no split when every DB > 1, else n = argmin DB (Alg. 2). Recursive per cluster.

Documented degenerate behaviour (never NaN): steps are aligned up to the shortest loss trace of the
cluster's sampled members; a step where every member has the same loss (σ = 0) rewards everyone 1;
a cluster with fewer than two sampled members is not updated; clusters with fewer than three members
are never split (a UPV needs K − 2 ≥ 1 entries); a clustering whose centroids coincide (e.g. identical
rows of W) scores DB = +∞ instead of sklearn's 0.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from ..fl.strategy import ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult, register_strategy
from ._common import as_int_list, labels_tensor


def gaussian_rewards(step_losses: Sequence[np.ndarray]) -> np.ndarray:
    """ω_k: step-averaged Gaussian rewards of each client's loss trace w.r.t. the group (004 eq. 1)."""
    length = min(len(l) for l in step_losses)
    if length == 0:
        return np.ones(len(step_losses))
    losses = np.stack([np.asarray(l, dtype=np.float64)[:length] for l in step_losses])  # (K, S)
    mean = losses.mean(axis=0)
    var = losses.var(axis=0, ddof=1)
    dev2 = (losses - mean) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        rewards = np.where(var > 0, np.exp(-dev2 / (2.0 * np.where(var > 0, var, 1.0))), 1.0)
    return rewards.mean(axis=1)


def upv_affinity(interaction: np.ndarray, beta: float) -> np.ndarray:
    """W_kj = exp(−β ‖v_k^j − v_j^k‖²) (004 eq. 4), v_k^j = row k of P without entries k and j.
    Vectorised: ‖v_k^j − v_j^k‖² = ‖P_k − P_j‖² − (P_kk − P_jk)² − (P_kj − P_jj)²."""
    p = np.asarray(interaction, dtype=np.float64)
    sq = (p * p).sum(axis=1)
    row_dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * p @ p.T, 0.0)
    diag = np.diag(p)
    own = (diag[:, None] - p.T) ** 2  # (P_kk − P_jk)²
    other = (p - diag[None, :]) ** 2  # (P_kj − P_jj)²
    upv = np.maximum(row_dist - own - other, 0.0)
    np.fill_diagonal(upv, 0.0)
    return np.exp(-beta * upv)


def davies_bouldin(features: np.ndarray, labels: np.ndarray) -> float:
    """sklearn's Davies–Bouldin, except +∞ when it is undefined or when two centroids coincide."""
    from sklearn.metrics import davies_bouldin_score

    k = len(np.unique(labels))
    if k < 2 or k > len(labels) - 1:
        return float("inf")
    centroids = np.stack([features[labels == c].mean(axis=0) for c in np.unique(labels)])
    gaps = np.linalg.norm(centroids[:, None] - centroids[None, :], axis=-1)[np.triu_indices(k, 1)]
    if np.min(gaps) <= 1e-12:
        return float("inf")
    return float(davies_bouldin_score(features, labels))


def fedgw_cluster(interaction: np.ndarray, n_max: int, beta: float, seed: int) -> tuple[np.ndarray, list[float]]:
    """004 Algorithm 2 on one cluster's P: labels (all 0 when there is no split) and DB_n for n = 2…n_max."""
    from sklearn.cluster import SpectralClustering

    size = interaction.shape[0]
    affinity = upv_affinity(interaction, beta)
    scores: list[float] = []
    candidates: list[np.ndarray] = []
    if np.ptp(affinity) > 1e-12:
        for n in range(2, min(n_max, size - 1) + 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                labels = SpectralClustering(n_clusters=n, affinity="precomputed", random_state=seed,
                                            assign_labels="kmeans", n_init=10).fit_predict(affinity)
            candidates.append(labels.astype(np.int64))
            scores.append(davies_bouldin(affinity, labels))
    if not scores or min(scores) > 1.0:
        return np.zeros(size, dtype=np.int64), scores
    return candidates[int(np.argmin(scores))], scores


@register_strategy("fedgwc")
class GaussianWeightingClustering(Strategy):
    params_schema = {
        "alpha": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1, "default": None,
                  "description": "running-average coefficient of eq. 2–3; null = participation rate (004 App. F)"},
        "beta": {"type": "number", "exclusiveMinimum": 0, "default": 0.5, "description": "RBF spread (eq. 4)"},
        "epsilon": {"type": "number", "exclusiveMinimum": 0, "default": 1.0e-5,
                    "description": "split a cluster once the MSE change of its interaction matrix is below this"},
        "n_max": {"type": "integer", "minimum": 2, "default": 5},
    }

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        n = ctx.n_clients
        self.alpha = float(self.params["alpha"] if self.params["alpha"] is not None else ctx.participation)
        self.weights = np.zeros(n)  # γ_k (eq. 2), initialised to 0
        self.interaction = np.zeros((n, n))  # P (eq. 3), initialised to the null matrix (Alg. 1 l. 4)
        self.mse: dict[int, float] = {0: 1.0}  # Alg. 1 l. 5
        self.next_id = 1
        self.split_events: list[dict[str, Any]] = []

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        clients = np.asarray(updates.clients, dtype=np.int64)
        labels = self.assignment.labels.copy()
        events: list[dict[str, Any]] = []
        db_by_cluster: dict[str, list[float]] = {}
        for cluster in np.unique(self.assignment.labels):
            cluster = int(cluster)
            members = np.flatnonzero(self.assignment.labels == cluster)
            rows = np.flatnonzero(self.assignment.labels[clients] == cluster)
            if rows.size < 2:
                continue
            sampled = clients[rows]
            omega = gaussian_rewards([updates.step_losses[r] for r in rows])  # eq. 1 (Alg. 1 l. 11)
            a = self.alpha
            self.weights[sampled] = (1 - a) * self.weights[sampled] + a * omega  # eq. 2
            before = self.interaction[np.ix_(members, members)].copy()
            block = np.ix_(sampled, sampled)
            self.interaction[block] = (1 - a) * self.interaction[block] + a * omega[:, None]  # eq. 3 (l. 13)
            after = self.interaction[np.ix_(members, members)]
            self.mse[cluster] = float(np.mean((after - before) ** 2))  # l. 14
            if self.mse[cluster] < float(self.params["epsilon"]) and members.size >= 3:  # l. 15
                seed = int(self.ctx.generator(updates.round, cluster, 0x6C).integers(2**31 - 1))
                local, scores = fedgw_cluster(after, int(self.params["n_max"]), float(self.params["beta"]), seed)
                db_by_cluster[str(cluster)] = scores
                if local.max() > 0:  # l. 16–19: split, sub-matrices are rows/cols of P, MSE reset to 1
                    children = []
                    for sub in np.unique(local):
                        labels[members[local == sub]] = self.next_id
                        self.mse[self.next_id] = 1.0
                        children.append(self.next_id)
                        self.next_id += 1
                    self.mse.pop(cluster, None)
                    events.append({"round": int(updates.round), "parent": cluster, "children": children,
                                   "members": [as_int_list(members[local == s]) for s in np.unique(local)]})
        self.assignment = ClusterAssignment(labels)
        self.split_events.extend(events)
        diagnostics = {
            "n_splits": len(events),
            "mse": {str(k): v for k, v in sorted(self.mse.items())},
            "davies_bouldin": db_by_cluster,
            "split_events": [{k: v for k, v in e.items() if k != "members"} for e in events],
        }
        inherit = {c: e["parent"] for e in events for c in e["children"]}
        return StrategyResult(self.assignment, diagnostics, inherit=inherit)

    def state_dict(self) -> dict[str, Any]:
        import torch

        return {"labels": labels_tensor(self.assignment.labels), "weights": torch.as_tensor(self.weights),
                "interaction": torch.as_tensor(self.interaction), "alpha": float(self.alpha),
                "mse": {int(k): float(v) for k, v in self.mse.items()}, "next_id": int(self.next_id),
                "split_events": [dict(e) for e in self.split_events]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.weights = np.asarray(state["weights"], dtype=np.float64).copy()
        self.interaction = np.asarray(state["interaction"], dtype=np.float64).copy()
        self.alpha = float(state["alpha"])
        self.mse = {int(k): float(v) for k, v in state["mse"].items()}
        self.next_id = int(state["next_id"])
        self.split_events = [dict(e) for e in state["split_events"]]
