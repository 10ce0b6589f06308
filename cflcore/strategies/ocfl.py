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
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ..clustering.clusterers import CLUSTERERS, FEATURES, ClusteringInput, build_clusterer, run_clusterer, union_params_schema
from ..clustering.divergence import temperature
from ..clustering.partition import inherit_by_overlap
from ..errors import ConfigError
from ..fl.strategy import ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult, register_strategy
from ._common import LazySchema, divergence_numpy, labels_tensor


def _ocfl_schema() -> dict[str, Any]:
    own = {
        "clusterer": {"enum": CLUSTERERS.names(), "default": "hdbscan"},
        "features": {"enum": [*FEATURES, None], "default": None,
                     "description": "clusterer input; null = the clusterer's default (rows of Γ for kmeans/meanshift)"},
        "precision": {"enum": ["float32", "float64"], "default": "float32"},
        "p": {"type": "number", "minimum": 1, "default": 2},
        "trigger": {"enum": ["strict", "nonstrict"], "default": "strict"},
        "window": {"type": "integer", "minimum": 1, "default": 1},
        "min_round": {"type": "integer", "minimum": 0, "default": 0},
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
        name = params.get("clusterer", "hdbscan")
        CLUSTERERS.get(name, field=f"{field}.clusterer").check_params(params, field)

    def __init__(self, **params: Any) -> None:
        full = {k: v.get("default") for k, v in type(self).params_schema.items()}
        full.update(params)
        unknown = set(params) - set(type(self).params_schema)
        if unknown:
            raise ConfigError(f"ocfl: unknown parameter(s) {', '.join(sorted(unknown))}; "
                              f"allowed: {', '.join(sorted(type(self).params_schema))}")
        super().__init__(**full)
        self.clusterer = build_clusterer(full)

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        self.temperatures: list[float] = []
        self.clustered = False
        self.clustering_round = -1

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        if self.clustered:  # l. 24–25: the one-shot partition is fixed
            return StrategyResult(self.assignment, {"clustered": True})
        gamma = divergence_numpy(updates.deltas, self.params["precision"])  # l. 16
        temp = temperature(gamma, float(self.params["p"]))  # l. 17–19
        self.temperatures.append(temp)
        window = int(self.params["window"])
        trigger_value = moving_average(self.temperatures, window)
        fires = (updates.round >= int(self.params["min_round"])
                 and trigger_fires(self.temperatures, window, self.params["trigger"] == "strict"))
        diagnostics: dict[str, Any] = {
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
            diagnostics.update(clustered=True, n_found=int(local.max()) + 1)
        return StrategyResult(self.assignment, diagnostics, divergence=gamma, inherit=inherit)

    def state_dict(self) -> dict[str, Any]:
        return {"labels": labels_tensor(self.assignment.labels), "temperatures": list(map(float, self.temperatures)),
                "clustered": bool(self.clustered), "clustering_round": int(self.clustering_round)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.temperatures = [float(t) for t in state["temperatures"]]
        self.clustered = bool(state["clustered"])
        self.clustering_round = int(state["clustering_round"])
