"""The oracle: every client trains with its true group from round 0 (a reference band, not a clustering method;
issue 68).

Per-group FedAvg on the split's ground truth: the partition is the true groups (``StrategyContext.true_groups``,
handed only to a strategy that declares :attr:`~cflcore.strategies.base.Strategy.reads_true_groups`) from round 0
and never changes, one model per group, every group starting from the engine's one initialisation. The upper band
of leahcimali's follow-up, FL-bench and PFLlib: what a clustering method could reach had it found the groups at
once. Its ARI is 1.00 by construction (on a split with groups); the report shows it apart from the ranked methods
(cflcore/strategies/oracle_records.py). On a split without groups (one true group) it is FedAvg.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from ..clustering.partition import consecutive_labels
from ..errors import CflError
from .base import ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult, register_strategy

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch


@register_strategy("oracle")
class TrueGroups(Strategy):
    params_schema = {}
    reads_true_groups = True

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        if ctx.true_groups is None or len(ctx.true_groups) != ctx.n_clients:
            raise CflError("oracle: the engine gave no true group for every client (StrategyContext.true_groups)")
        self.assignment = ClusterAssignment(consecutive_labels(np.asarray(ctx.true_groups)))

    def initial_models(self, init: torch.Tensor, make_init: Callable[[int], torch.Tensor]) -> dict[int, torch.Tensor]:
        """One model per true group, each the engine's initialisation (the engine copies each)."""
        return {int(g): init for g in np.unique(self.assignment.labels)}

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        return StrategyResult(self.assignment)
