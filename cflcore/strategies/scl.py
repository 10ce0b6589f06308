"""SCL: Clustered Federated Learning of Sattler et al. (2021), the baseline of 000 (§4.2, App. A.2).

Every round, each cluster C with more than two (sampled) members splits in two when
``round + 1 > cooldown`` (``round`` is the engine's 0-based index: the authors' loop counts
``c_round = 1, 2, …`` and splits only when ``c_round > 20``, so ``cooldown`` is the number of rounds
that never split; cooldown 0 allows a split in the first round), ``‖mean_{i∈C} Δ_i‖ < ε1`` (the norm
of the cluster's MEAN update: the cluster is near a stationary point) and ``max_{i∈C} ‖Δ_i‖ > ε2`` (some client still moves: the clients disagree).
The bipartition is complete-linkage agglomerative clustering (sklearn, ``metric="precomputed"``) on
−cosine similarity, as in the authors' code. Repeated over rounds this is the recursive bi-partitioning.

Client ids stay GLOBAL: the published code and FL-bench map the bipartition's local indices back
wrongly, putting a client in two clusters after a second split; here a split only relabels the
members of the split cluster, so every client is in exactly one cluster by construction.
Partial participation: the split uses the sampled members; unsampled members follow the larger child.
Table 4 of 000: ε1 = 0.35, ε2 = 1.0, cooldown 30 (MNIST). With ``epsilon: proxy`` the three are derived before
training from a centralised proxy, as 000 App. A.2 does: the strategy declares the proxy's update norms among its
inputs (:meth:`SCL.inputs`; the workflow builds them with cflcore/fl/centralised.py) and derives ε₁ = max Δθ̂ / 10,
ε₂ = ``proxy_factor`` · ε₁ and the cool-down from them (:meth:`SCL.resolve_params`, :func:`epsilons_from_proxy`).
The factor 5 is what both Sattler et al. (ε₁ 6, ε₂ 30 on MNIST; 25 and 125) and 000's own proxy-derived values
(Table 4: CIFAR-10 185 / 925, PathMNIST 12 / 60, BloodMNIST 38 / 188) use. The cool-down is the number of rounds
before Δθ̂ settles: the first round from which it stays within ``proxy_tolerance`` of its total decrease above its
final value (Δθ̂ˢ ≤ Δθ̂_final + tolerance · (max Δθ̂ − Δθ̂_final) for every later s).

Diagnostics (every round, columns of server.parquet): ``eps1``, ``eps2``, and per cluster with a sampled
member ``mean_update_norms`` {cluster: ‖mean Δ‖} and ``max_update_norms`` {cluster: max ‖Δ‖} (JSON), with
their largest values as scalars; the report's ``split_traces`` figure draws them against ε1/ε2.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..clustering.divergence import cosine_similarity_from_gram
from ..errors import ConfigError
from .base import (CENTRALISED_UPDATE_NORMS, ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult,
                   register_strategy)
from ._common import as_int_list, labels_tensor

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch


log = logging.getLogger(__name__)



@dataclass(frozen=True)
class ProxyEpsilons:
    """What an SCL run with ``epsilon: proxy`` uses, and where it came from."""

    eps1: float
    eps2: float
    cooldown: int
    max_update_norm: float
    factor: float
    tolerance: float
    source: str = "proxy"

    def as_params(self) -> dict[str, Any]:
        return {"eps1": self.eps1, "eps2": self.eps2, "cooldown": self.cooldown}


def convergence_round(norms: np.ndarray, tolerance: float) -> int:
    """The first 0-based round from which ``norms`` stays within ``tolerance`` of its total decrease above its
    final value (0 for a trace that never rises above that band)."""
    norms = np.asarray(norms, dtype=np.float64)
    if norms.size == 0:
        return 0
    final, peak = float(norms[-1]), float(norms.max())
    above = np.flatnonzero(norms > final + tolerance * (peak - final))
    return int(above[-1] + 1) if above.size else 0


def epsilons_from_proxy(norms: np.ndarray, factor: float = 5.0, tolerance: float = 0.1) -> ProxyEpsilons:
    """Sattler et al.'s recommendation on the proxy (000 App. A.2): ε₁ = max Δθ̂ / 10, ε₂ = factor · ε₁ with
    factor ∈ [1, 10], cool-down = the rounds before Δθ̂ settles (:func:`convergence_round`)."""
    if not 1.0 <= factor <= 10.0:
        raise ValueError(f"factor {factor!r}: allowed 1 <= factor <= 10 (eps2 within [eps1, 10 eps1])")
    norms = np.asarray(norms, dtype=np.float64)
    if norms.size == 0 or not np.isfinite(norms).all():
        raise ValueError("the proxy's update norms are empty or not finite")
    peak = float(norms.max())
    eps1 = peak / 10.0
    return ProxyEpsilons(eps1, factor * eps1, convergence_round(norms, tolerance), peak, float(factor), float(tolerance))


def read_update_norms(path: str | Path) -> np.ndarray:
    """The proxy's update norm per round (column ``update_norm`` of the file cflcore/fl/centralised.py writes)."""
    import pyarrow.parquet as pq

    return pq.read_table(path).column("update_norm").to_numpy()


def bipartition(similarity: np.ndarray) -> np.ndarray:
    """Two groups by complete-linkage agglomerative clustering on −similarity (Sattler et al.)."""
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(n_clusters=2, metric="precomputed", linkage="complete")
    return model.fit_predict(-np.asarray(similarity, dtype=np.float64)).astype(np.int64)


def update_norms(deltas: torch.Tensor) -> tuple[float, float]:
    """(‖mean Δ‖, max ‖Δ‖) of a cluster's updates, in float64."""
    import torch
    d = deltas.to(torch.float64)
    return float(torch.linalg.vector_norm(d.mean(dim=0))), float(torch.linalg.vector_norm(d, dim=1).max())


def split_allowed(rnd: int, cooldown: int) -> bool:
    """Sattler et al.'s ``c_round > cooldown`` with the 1-based ``c_round = rnd + 1`` of 0-based ``rnd``."""
    return rnd + 1 > cooldown


@register_strategy("scl")
class SattlerClustering(Strategy):
    params_schema = {
        "eps1": {"type": "number", "exclusiveMinimum": 0, "default": 0.35,
                 "description": "split when the norm of the cluster's mean update is below eps1"},
        "eps2": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                 "description": "... and the largest client update norm is above eps2 (eps2 >= eps1)"},
        "cooldown": {"type": "integer", "minimum": 0, "default": 20,
                     "description": "the first `cooldown` rounds never split: 1-based round > cooldown "
                                    "(authors' code: c_round > 20)"},
        "max_clusters": {"type": ["integer", "null"], "minimum": 1, "default": None, "description": "no split beyond this many clusters (null: no cap)"},
        "epsilon": {"enum": ["explicit", "proxy"], "default": "explicit",
                    "description": "explicit: eps1, eps2 and cooldown as given; proxy: derived before training from a "
                                   "centralised proxy on the pooled data (000 App. A.2; cflcore/fl/centralised.py)"},
        "proxy_round": {"enum": ["client", "epoch"], "default": "client",
                        "description": "a proxy round: a client's step count (client) or an epoch over the pooled "
                                       "data (epoch, the text's SGD(theta, D))"},
        "proxy_factor": {"type": "number", "minimum": 1, "maximum": 10, "default": 5.0,
                         "description": "proxy: eps2 = proxy_factor * eps1 (Sattler et al. and 000 Table 4 use 5)"},
        "proxy_tolerance": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.1,
                            "description": "proxy: cooldown = rounds until the update norm stays within this share "
                                           "of its decrease above its final value"},
        "precision": {"enum": ["float32", "float64"], "default": "float32",
                      "description": "kept for older configs and ignored: every strategy reads the round's one float64-accumulated Gram product (cflcore/clustering/divergence.py)"},
    }

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        params = cls.with_defaults(params, field)  # also when called on a partial entry
        e1, e2 = float(params["eps1"]), float(params["eps2"])
        if e2 < e1:
            raise ConfigError(f"{field}.eps2: {e2} is smaller than eps1 = {e1}; allowed: eps2 >= eps1")


    @classmethod
    def inputs(cls, params: Mapping[str, Any]) -> dict[str, str]:
        """With ``epsilon: proxy``, the centralised proxy's update norms per round of ``proxy_round`` size."""
        if params.get("epsilon") != "proxy":
            return {}
        return {"proxy": f"{CENTRALISED_UPDATE_NORMS}/{params['proxy_round']}"}  # built by cflcore/fl/centralised.py

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any], inputs: Mapping[str, str | Path]) -> dict[str, Any]:
        """With ``epsilon: proxy``: ``eps1``, ``eps2`` and ``cooldown`` from the proxy (:func:`epsilons_from_proxy`)."""
        if "proxy" not in inputs:
            return dict(params)
        eps = epsilons_from_proxy(read_update_norms(inputs["proxy"]), float(params["proxy_factor"]),
                                  float(params["proxy_tolerance"]))
        log.info("SCL epsilons from the centralised proxy: %s", asdict(eps))
        return {**params, **eps.as_params()}

    @classmethod
    def replay_clusterer(cls, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """SCL's first bipartition: complete linkage on Γ into two (Sattler et al.); its later, recursive splits
        act on sub-clusters and are not replayed."""
        return {"clusterer": "sklearn", "estimator": "AgglomerativeClustering",
                "clusterer_params": {"n_clusters": 2, "metric": "precomputed", "linkage": "complete"}}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.check_params(self.params, "scl")

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        self.next_id = 1
        self.last_events: list[dict[str, Any]] = []  # the splits of the latest aggregate() (with members; not state)

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        import torch
        p = self.params
        clients = np.asarray(updates.clients, dtype=np.int64)
        labels = self.assignment.labels.copy()
        sim = cosine_similarity_from_gram(updates.gram()).astype(np.float64)  # the round's one Gram product
        mean_norms: dict[int, float] = {}
        max_norms: dict[int, float] = {}
        events: list[dict[str, Any]] = []
        n_clusters = len(np.unique(labels))
        for cluster in np.unique(self.assignment.labels):
            rows = np.flatnonzero(self.assignment.labels[clients] == cluster)  # rows of this round's tensors
            if rows.size == 0:
                continue
            mean_norm, max_norm = update_norms(updates.deltas[torch.as_tensor(rows, device=updates.deltas.device)])
            mean_norms[int(cluster)], max_norms[int(cluster)] = mean_norm, max_norm
            allowed = p["max_clusters"] is None or n_clusters < int(p["max_clusters"])
            if (split_allowed(updates.round, int(p["cooldown"])) and rows.size > 2 and mean_norm < float(p["eps1"])
                    and max_norm > float(p["eps2"]) and allowed):
                side = bipartition(sim[np.ix_(rows, rows)])
                if np.unique(side).size < 2:
                    continue
                members = np.flatnonzero(self.assignment.labels == cluster)  # GLOBAL ids
                sampled = clients[rows]
                child_ids = (self.next_id, self.next_id + 1)
                self.next_id += 2
                sizes = [int(np.sum(side == s)) for s in (0, 1)]
                larger = 0 if sizes[0] >= sizes[1] else 1
                labels[members] = child_ids[larger]  # unsampled members follow the larger child
                for s in (0, 1):
                    labels[sampled[side == s]] = child_ids[s]
                n_clusters += 1
                events.append({"round": int(updates.round), "parent": int(cluster), "children": list(child_ids),
                               "members": [as_int_list(np.flatnonzero(labels == c)) for c in child_ids]})
        self.assignment = ClusterAssignment(labels)
        self.last_events = events
        inherit = {c: e["parent"] for e in events for c in e["children"]}
        diagnostics = {
            "eps1": float(p["eps1"]),
            "eps2": float(p["eps2"]),
            "cooldown": int(p["cooldown"]),
            "epsilon_source": str(p["epsilon"]),  # explicit (the config's values) or proxy (000 App. A.2)
            "largest_mean_update_norm": max(mean_norms.values()) if mean_norms else None,
            "largest_max_update_norm": max(max_norms.values()) if max_norms else None,
            "mean_update_norms": {str(k): v for k, v in mean_norms.items()},
            "max_update_norms": {str(k): v for k, v in max_norms.items()},
            "n_splits": len(events),
            "split_events": [{k: v for k, v in e.items() if k != "members"} for e in events],
        }
        return StrategyResult(self.assignment, diagnostics, inherit=inherit)

    def state_dict(self) -> dict[str, Any]:
        # every field is read by a later round: tests/fl/test_resume.py fails when load_state_dict drops one
        return {"labels": labels_tensor(self.assignment.labels), "next_id": int(self.next_id)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.next_id = int(state["next_id"])
