"""The base of the generators whose ground-truth groups differ by one shift (a rotation, a label swap, a morphology, a
share of the draws), after leahcimali/Comparative-Evaluation-of-Clustered-Federated-Learning-Methods
(``src/utils_data.py``, five heterogeneities) and Sattler's demo: :class:`GroupedShiftSplit` and the parameters its
generators share (:data:`GROUP_PARAMS`)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .base import (ClientPlan, SplitContext, SplitGenerator, SplitPlan, apportion, check_enough_clients,
                   check_group_shares, clusters_of, dirichlet_weights, equal_sizes, shares_param, uniform_weights)
from ..drift import DRIFT_KEY, check_schedule

GROUP_PARAMS: dict[str, dict[str, Any]] = {
    "cluster_shares": shares_param(None, "share of clients per group (null: equal groups, the remainder to the first)"),
    "alpha": {"type": ["number", "null"], "exclusiveMinimum": 0, "default": None,
              "description": "Dirichlet concentration of each client's class vector (null: uniform classes)"},
}
"""The parameters of every :class:`GroupedShiftSplit`, after its own list of groups."""


class GroupedShiftSplit(SplitGenerator):
    """Groups of clients that differ by one shift (``group_key``: one entry per group), sizes ``cluster_shares``
    (null: equal groups, the remainder to the first), classes uniform (``alpha`` null, leahcimali's 100 samples per
    label) or each client's class vector ~ Dir(α·1) (Hsu et al. 2019; Sattler's demo draws α 1.0)."""

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        if p["cluster_shares"] is not None:
            check_group_shares(p, field, cls.group_key)
        if p.get(DRIFT_KEY):
            check_schedule(p[DRIFT_KEY], len(p[cls.group_key]), f"{field}.{DRIFT_KEY}")

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        """The ClientPlan fields (domain, label_swaps, n_draws, info) of a client of ``group``."""
        raise NotImplementedError

    def group_transforms(self) -> list[dict[str, Any]]:
        """Per group, the transform its clients' data carries (``domain`` and / or ``label_swaps``, as a client's
        :meth:`group_plan` gives them): what a client that drifts into the group sees (cflcore.data.drift). The
        generators that take a ``drift`` schedule here are those whose groups differ by a transform of a client's
        own samples (their ``group_plan`` draws nothing); a label-skew generator draws new samples instead
        (``drift_draws``, cflcore.data.splits.base.SplitGenerator.drift_plan)."""
        plans = [self.group_plan(g, None) for g in range(len(self.params[self.group_key]))]  # type: ignore[arg-type]
        return [{k: p[k] for k in ("domain", "label_swaps") if k in p} for p in plans]

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_shifts": [str(g) for g in self.params[self.group_key]]}

    def check_in_dataset(self, ctx: SplitContext) -> None:
        """Dataset-dependent checks (labels within the dataset's classes)."""

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        """``cluster_shares`` apportioned, or equal groups (the remainder to the first)."""
        shares = self.params["cluster_shares"]
        n_groups = len(self.params[self.group_key])
        return tuple(apportion(n_clients, shares) if shares is not None else equal_sizes(n_clients, n_groups))

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        self.check_in_dataset(ctx)
        groups = list(self.params[self.group_key])
        check_enough_clients(n_clients, len(groups), self.field)
        sizes = self.group_sizes(n_clients)
        all_classes = list(range(ctx.n_classes))
        alpha = self.params["alpha"]
        clients = []
        for k, c in enumerate(clusters_of(sizes)):
            w = (uniform_weights(all_classes, ctx.n_classes) if alpha is None
                 else dirichlet_weights(float(alpha), all_classes, ctx.n_classes, client_rngs[k]))
            clients.append(ClientPlan(cluster=c, class_weights=w, **self.group_plan(c, client_rngs[k])))
        return SplitPlan(len(groups), [all_classes for _ in groups], clients, self.cluster_info())
