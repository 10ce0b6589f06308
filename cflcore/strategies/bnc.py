"""BNC: Baseline No-Clustering (000 §4.2) — every client in one cohort, i.e. FedAvg / FedOpt."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping


from .base import ClusterAssignment, RoundUpdates, StartSpec, Strategy, StrategyResult, register_strategy

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch


@register_strategy("bnc")
class NoClustering(Strategy):
    params_schema = {}

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        self.assignment = ClusterAssignment.single(self.ctx.n_clients)
        return StrategyResult(self.assignment)

    def global_model(self, models: Mapping[int, torch.Tensor]) -> StartSpec | None:
        """FedAvg's one model is the global model (history.parquet ``global_*`` = its ``local_*``/``orch_*``)."""
        return 0
