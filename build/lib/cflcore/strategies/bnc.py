"""BNC: Baseline No-Clustering (000 §4.2) — every client in one cohort, i.e. FedAvg / FedOpt."""
from __future__ import annotations

from ..fl.strategy import ClusterAssignment, RoundUpdates, Strategy, StrategyResult, register_strategy


@register_strategy("bnc")
class NoClustering(Strategy):
    params_schema = {}

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        self.assignment = ClusterAssignment.single(self.ctx.n_clients)
        return StrategyResult(self.assignment)
