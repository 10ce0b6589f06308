"""OCFL: One-Shot Clustered Federated Learning (000 Algorithm 1; 001).

Until it clusters, OCFL computes every round the divergence matrix Γ of the sampled clients' deltas
(l. 16) and the temperature T_t = ‖Γ‖_p / λ (l. 17–19). It clusters ONCE, at the first round where the
trigger fires (l. 20–22), with any clusterer of ``cflcore.clustering.clusterers``; afterwards the
partition is fixed and every cluster trains on its own (l. 24–28).

Trigger (``trigger``): ``strict`` fires on T_t > T_{t−1} (the authors' published code, default);
``nonstrict`` on T_t ≥ T_{t−1} (the paper's line 20). T_{−1} = +∞ so round 0 never fires.
Moving-average trigger (000 §6.3): with ``window`` w the compared values are the means of T over the
last w recorded rounds, defined once w values exist (the previous value is +∞ before that), so
w = 1 is exactly Algorithm 1. ``min_round``: the trigger may fire only at rounds ≥ min_round.

Partial participation (000 assumes full participation, footnote 5): Γ covers the sampled clients;
clients not sampled at the clustering round stay in the pre-clustering cohort (the old cluster id,
which keeps training as FedAvg).

Late-joining clients (000 §6.2; helpers in ``_late.py``). ``late_clients`` (a fraction in (0, 1) or an
integer count; 0 = none) are drawn once, uniformly, from the context's seeded generator, never from the
ground truth. Until they join they are not in the federation: ``select_clients`` drops them from every
round's sample, ``absent_clients`` tells the engine not to evaluate them (null metrics in history.parquet,
so PF1 means skip them), and they are not in Γ nor in the temperature. They hold the pre-clustering
cohort's cluster id meanwhile. At round ``clustering_round + join_after`` (default: the round right after
clustering) every late client joins: it trains one round from the pre-clustering cohort's model, which
(with full participation) is exactly the model the clustering-round updates started from, so its update
is comparable with the updates OCFL clustered on. It is then attached, in that same round, to

* ``attach: divergence``: the found cluster at the smallest mean cosine distance between its update and
  the members' clustering-round updates (the mean of the Γ row it would have had at clustering; members'
  *current* updates start from their cluster models and are not comparable with one from the global
  model), or
* ``attach: loss``: the found cluster whose model (at the start of the joining round) has the lowest mean
  loss on its training data (IFCA-style, the engine's ``evaluate``).

Its joining update goes to the cohort it trained from, not to the cluster it joins (``aggregate_as``):
FedAvg of a cluster only mixes models trained from that cluster's model (with full participation the
cohort is empty after the join, so the probing update is discarded). From the next round on it trains
with its cluster. Late clients never join when OCFL never clusters. Diagnostics (server.parquet):
``late_clients`` (round 0), ``late_join_round`` (clustering round), ``n_absent`` (every round),
``late_joined`` / ``late_scores`` / ``late_candidates`` (joining round, JSON).
"""
from __future__ import annotations

import copy

import math
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..clustering.clusterers import CLUSTERERS, FEATURES, ClusteringInput, build_clusterer, run_clusterer, union_params_schema
from ..clustering.divergence import temperature
from ..plugin import Population
from ..clustering.partition import inherit_by_overlap
from .base import (LOSS_BYTES, ClusterAssignment, EvaluateFn, RoundUpdates, StartSpec, Strategy, StrategyContext,
                           StrategyResult, Traffic, register_strategy)
from ._common import LazySchema, labels_tensor
from ._late import (ATTACH_MODES, check_late_clients_value, choose_late_clients, mean_cosine_distance,
                    mean_unit_updates, nearest, resolve_late_count)

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch

_STREAM_LATE, _STREAM_FALLBACK = 0x1A7E, 0x1A7F  # generator streams: who is late; a fallback trainer


def _ocfl_schema() -> dict[str, Any]:
    own = {
        "clusterer": {"enum": CLUSTERERS.names(), "default": "hdbscan", "description": "the clusterer run once at the trigger; its parameters (Clusterers, below) are OCFL's too"},
        "features": {"enum": [*FEATURES, None], "default": None,
                     "description": "clusterer input; null = the clusterer's default (rows of Γ for kmeans/meanshift)"},
        "precision": {"enum": ["float32", "float64"], "default": "float32",
                      "description": "kept for older configs and ignored: every strategy reads the round's one float64-accumulated Gram product (cflcore/clustering/divergence.py)"},
        "p": {"type": "number", "minimum": 1, "default": 2, "description": "the norm of the temperature ‖Γ‖ₚ/λ (000 Algorithm 1)"},
        "trigger": {"enum": ["strict", "nonstrict"], "default": "strict", "description": "strict: cluster when the temperature rises (>, the authors' code); nonstrict: ≥ (Algorithm 1 line 20)"},
        "window": {"type": "integer", "minimum": 1, "default": 1, "description": "moving average of the temperature over this many rounds (000 §6.3; 1 = Algorithm 1)"},
        "min_round": {"type": "integer", "minimum": 0, "default": 0, "description": "the trigger may fire only at rounds ≥ min_round"},
        "late_clients": {"type": "number", "minimum": 0, "default": 0,
                         "description": "clients held out until after clustering (000 §6.2): a fraction in (0, 1) or a count"},
        "attach": {"enum": list(ATTACH_MODES), "default": "divergence",
                   "description": "how a late client picks its cluster: divergence (mean cosine distance) or loss (IFCA)"},
        "join_after": {"type": "integer", "minimum": 1, "default": 1,
                       "description": "late clients join at round clustering_round + join_after"},
    }
    merged = union_params_schema()
    clash = set(own) & set(merged)
    if clash:
        raise ValueError(f"clusterer keys clash with OCFL keys: {sorted(clash)}")
    return {**own, **merged}


def moving_average(values: list[float], window: int) -> float:
    """Mean of the last ``window`` values; +∞ while fewer than ``window`` exist (000 §6.3)."""
    if len(values) < window:
        return math.inf
    return float(np.mean(values[-window:]))


def trigger_fires(temperatures: list[float], window: int = 1, strict: bool = True) -> bool:
    """Algorithm 1, l. 20 of 000 on the temperature history (last entry = this round): compare the
    moving average ending now with the one ending a round earlier (T_{−1} = +∞)."""
    current = moving_average(temperatures, window)
    previous = moving_average(temperatures[:-1], window)
    if math.isinf(current):
        return False
    return current > previous if strict else current >= previous


@register_strategy("ocfl")
class OneShotClustering(Strategy):
    """OCFL (000 Algorithm 1) with a pluggable clusterer and the §6.3 moving-average trigger."""

    params_schema = LazySchema(_ocfl_schema)  # type: ignore[assignment]

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        params = cls.with_defaults(params, field)  # also when called on a partial entry
        CLUSTERERS.get(params["clusterer"], field=f"{field}.clusterer").check_params(params, field)
        check_late_clients_value(params["late_clients"], f"{field}.late_clients")

    @classmethod
    def told_true_k(cls, params: Mapping[str, Any]) -> bool:
        """Its clusterer's count decides (K-Means ``k``, a scikit-learn estimator's ``n_clusters``)."""
        return CLUSTERERS.get(params.get("clusterer") or cls.params_schema["clusterer"]["default"]).told_true_k(params)

    @classmethod
    def cannot_split(cls, params: Mapping[str, Any], population: Population) -> str | None:
        """Its clusterer decides (HDBSCAN's minimum cluster size against the smallest group). With late clients,
        the clusterer sees only the founders, whose groups' sizes the config does not fix: no reason is given."""
        params = cls.with_defaults(params)
        if resolve_late_count(params["late_clients"], population.n_clients):
            return None
        return CLUSTERERS.get(params["clusterer"]).cannot_split(params, population)

    @classmethod
    def check_population(cls, params: Mapping[str, Any], n_clients: int, field: str) -> None:
        """``late_clients`` must leave at least two founding clients among ``n_clients`` (config validation)."""
        resolve_late_count(cls.with_defaults(params, field)["late_clients"], n_clients, f"{field}.late_clients")

    @classmethod
    def replay_clusterer(cls, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """OCFL's own clusterer (000 Algorithm 1, l. 21) on the recorded Γ, unless it clusters the deltas (which no
        run records): the variant's parameters are its clusterer's parameters."""
        if params["features"] == "deltas":
            return None
        return copy.deepcopy(dict(params))

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.clusterer = build_clusterer(self.params)

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        self.temperatures: list[float] = []
        self.clustered = False
        self.clustering_round = -1
        n_late = resolve_late_count(self.params["late_clients"], ctx.n_clients)
        self.late = choose_late_clients(ctx.n_clients, n_late, ctx.generator(_STREAM_LATE))
        self.found: list[int] = []  # cluster ids created at the clustering round
        self.centroids: torch.Tensor | None = None  # (len(found), P) mean unit clustering-round update
        self.pending_losses: np.ndarray | None = None  # attach: loss, between configure and aggregate

    # ----- late-joining clients (000 §6.2) --------------------------------------------------------
    @property
    def join_round(self) -> int:
        """The round late clients join: ``clustering_round + join_after``; -1 until OCFL clusters."""
        return self.clustering_round + int(self.params["join_after"]) if self.clustering_round >= 0 else -1

    def waiting(self, rnd: int) -> np.ndarray:
        """Late clients not in the federation during round ``rnd``."""
        return self.late if self.join_round < 0 or rnd < self.join_round else self.late[:0]

    def joining(self, rnd: int) -> np.ndarray:
        """Late clients that join (train from the cohort model and are attached) in round ``rnd``."""
        return self.late if self.late.size and rnd == self.join_round else self.late[:0]

    def absent_clients(self, rnd: int) -> np.ndarray:
        return self.waiting(rnd)

    def select_clients(self, rnd: int, engine_sample: np.ndarray) -> np.ndarray:
        """The engine's sample without waiting late clients, plus every late client in its joining round
        (it arrives whatever the participation rate). Should that leave nobody, one present client is drawn
        from the seeded generator of this round."""
        if not self.late.size:
            return engine_sample
        chosen = np.union1d(np.setdiff1d(engine_sample, self.waiting(rnd)), self.joining(rnd)).astype(np.int64)
        if chosen.size == 0:
            present = np.setdiff1d(np.arange(self.ctx.n_clients), self.waiting(rnd))
            chosen = np.sort(self.ctx.generator(_STREAM_FALLBACK, rnd).choice(present, size=1)).astype(np.int64)
        return chosen

    def configure(self, rnd: int, clients: np.ndarray, evaluate: EvaluateFn,
                  models: Mapping[int, torch.Tensor]) -> dict[int, StartSpec]:
        """Everyone starts from its cluster's model (a joining late client: the pre-clustering cohort's).
        ``attach: loss`` evaluates the found clusters' models on the joining clients' training data here."""
        joining = self.joining(rnd)
        if joining.size and self.params["attach"] == "loss":
            self.pending_losses = evaluate({c: models[c] for c in self.found}, joining.tolist())
        return super().configure(rnd, clients, evaluate, models)

    def traffic(self, updates: RoundUpdates, model_bytes: int, n_models: int) -> Traffic:
        """One model each way per client; with ``attach: loss`` a joining late client also receives every found
        cluster's model and sends back its training loss under each (:meth:`configure`)."""
        out = super().traffic(updates, model_bytes, n_models)
        if self.params["attach"] != "loss":
            return out
        offered = self.joining(updates.round).size * len(self.found)
        return Traffic(down=out.down + offered * model_bytes, up=out.up + offered * LOSS_BYTES)

    def record_founders(self, updates: RoundUpdates, local: np.ndarray, base: int) -> None:
        """At the clustering round: the found cluster ids and the mean unit update of each (attach: divergence)."""
        import torch
        self.found = sorted(int(base + c) for c in np.unique(local))
        if self.late.size and self.params["attach"] == "divergence":
            ids, centroids = mean_unit_updates(updates.deltas, base + np.asarray(local, dtype=np.int64))
            assert ids == self.found
            self.centroids = centroids.to(torch.float32)

    def attach_late(self, updates: RoundUpdates, joining: np.ndarray) -> tuple[dict[str, Any], dict[int, int]]:
        """Attach the joining late clients; returns (diagnostics, aggregate_as)."""
        import torch
        if self.params["attach"] == "divergence":
            rows = torch.as_tensor(np.searchsorted(updates.clients, joining))
            scores = mean_cosine_distance(updates.deltas.index_select(0, rows.to(updates.deltas.device)), self.centroids)
        else:
            if self.pending_losses is None:
                raise RuntimeError("ocfl attach: loss needs configure() of the joining round before aggregate()")
            scores, self.pending_losses = np.asarray(self.pending_losses, dtype=np.float64), None
        chosen = nearest(scores, self.found)
        labels = self.assignment.labels.copy()
        aggregate_as = {int(c): int(labels[c]) for c in joining}  # the cohort its update was trained from
        labels[joining] = chosen
        self.assignment = ClusterAssignment(labels)
        diagnostics = {"late_joined": {str(int(c)): int(k) for c, k in zip(joining, chosen)},
                       "late_scores": {str(int(c)): [float(v) for v in row] for c, row in zip(joining, scores)},
                       "late_candidates": list(self.found)}
        return diagnostics, aggregate_as

    def late_diagnostics(self, rnd: int) -> dict[str, Any]:
        if not self.late.size:
            return {}
        out: dict[str, Any] = {"n_absent": int(self.waiting(rnd).size)}
        if rnd == 0:
            out["late_clients"] = [int(c) for c in self.late]
        return out

    # ----- Algorithm 1 ---------------------------------------------------------------------------
    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        if self.clustered:  # l. 24–25: the one-shot partition is fixed (late clients attach to it)
            joining = self.joining(int(updates.round))
            diagnostics: dict[str, Any] = {"clustered": True}
            aggregate_as: dict[int, int] = {}
            if joining.size:
                extra, aggregate_as = self.attach_late(updates, joining)
                diagnostics.update(extra)
            diagnostics.update(self.late_diagnostics(int(updates.round)))
            return StrategyResult(self.assignment, diagnostics, aggregate_as=aggregate_as)
        gamma = updates.divergence()  # l. 16 (the round's one Gram product)
        temp = temperature(gamma, float(self.params["p"]))  # l. 17–19
        self.temperatures.append(temp)
        window = int(self.params["window"])
        trigger_value = moving_average(self.temperatures, window)
        fires = (updates.round >= int(self.params["min_round"])
                 and trigger_fires(self.temperatures, window, self.params["trigger"] == "strict"))
        diagnostics = {
            "temperature_p": temp,
            "trigger_value": None if math.isinf(trigger_value) else trigger_value,
            "clustered": False,
        }
        inherit: dict[int, int] = {}
        if fires:  # l. 21–22
            data = ClusteringInput(gamma, updates.deltas, self.ctx.seed, self.ctx.n_true_clusters)
            local = run_clusterer(self.clusterer, data)
            previous = self.assignment.labels
            labels = previous.copy()
            base = int(previous.max()) + 1
            labels[np.asarray(updates.clients, dtype=np.int64)] = base + local
            self.assignment = ClusterAssignment(labels)
            inherit = inherit_by_overlap(previous, labels)
            self.clustered = True
            self.clustering_round = int(updates.round)
            self.record_founders(updates, local, base)
            diagnostics.update(clustered=True, n_found=int(local.max()) + 1)
            if self.late.size:
                diagnostics["late_join_round"] = self.join_round
        diagnostics.update(self.late_diagnostics(int(updates.round)))
        return StrategyResult(self.assignment, diagnostics, divergence=gamma, inherit=inherit)

    def state_dict(self) -> dict[str, Any]:
        import torch
        return {"labels": labels_tensor(self.assignment.labels), "temperatures": list(map(float, self.temperatures)),
                "clustered": bool(self.clustered), "clustering_round": int(self.clustering_round),
                "late": labels_tensor(self.late), "found": list(self.found),
                "centroids": self.centroids.clone() if self.centroids is not None else torch.zeros(0)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.temperatures = [float(t) for t in state["temperatures"]]
        self.clustered = bool(state["clustered"])
        self.clustering_round = int(state["clustering_round"])
        if "late" in state:  # checkpoints from before late clients existed have none
            late = np.asarray(state["late"], dtype=np.int64)
            if not np.array_equal(late, self.late):
                raise ValueError(f"ocfl checkpoint: late clients {late.tolist()} differ from this run's {self.late.tolist()}")
            self.found = [int(c) for c in state["found"]]
            centroids = state["centroids"]
            self.centroids = centroids.clone() if centroids.numel() else None
