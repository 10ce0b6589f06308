"""Local training: no aggregation, every client alone (a reference band, not a clustering method; issue 68).

Every client is its own cluster from round 0 and keeps its own model, started from the engine's one initialisation:
a cluster of one member averages only its own update, so each model sees its client's data and nothing else. The
lower band of leahcimali's follow-up, FL-bench and PFLlib ("Local"): what a client gets without a federation. Its
ARI is 0 by construction (one cluster per client); it is read by its clients' accuracy. The report shows it apart
from the ranked methods (cflcore/strategies/local_records.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from .base import (ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult, Traffic,
                   register_strategy)

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch


@register_strategy("local")
class LocalOnly(Strategy):
    params_schema = {}
    orchestrator_last_round_only = True  # its 12-24 models on the shared set every round cost 2.5x its training

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        self.assignment = ClusterAssignment(np.arange(ctx.n_clients, dtype=np.int64))

    def initial_models(self, init: torch.Tensor, make_init: Callable[[int], torch.Tensor]) -> dict[int, torch.Tensor]:
        """One model per client, each the engine's initialisation (the engine copies each)."""
        return {i: init for i in range(self.ctx.n_clients)}

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        return StrategyResult(self.assignment)

    def traffic(self, updates: RoundUpdates, model_bytes: int, n_models: int) -> Traffic:
        """Nothing goes over the wire: each client keeps its model where it trains (the engine's one
        initialisation stands for a seed every client draws alike, as the other methods' round-0 model does)."""
        return Traffic(down=0, up=0)
