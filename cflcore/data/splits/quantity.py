"""Quantity skew (docs/architecture.md §7): ground-truth groups that differ only in how much data their clients hold,
a negative control for clustering."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import SPLIT_GENERATORS
from .grouped import GROUP_PARAMS, GroupedShiftSplit

QUANTITY_FRACTIONS = (0.1, 0.2, 0.6, 1.0)
"""leahcimali/Comparative-Evaluation-of-Clustered-Federated-Learning-Methods (src/utils_data.py, ``quantity-skew``):
four groups holding 10 %, 20 %, 60 % and 100 % of their share."""


@SPLIT_GENERATORS.register("quantity-skew")
class QuantitySkewSplit(GroupedShiftSplit):
    """Quantity skew: group g's clients draw ``fractions[g]`` of the per-client share (``samples_per_client``, or
    len(train)/clients), from one class distribution: the groups differ only in how much data they hold, a
    negative control for clustering. Source: leahcimali's ``quantity-skew`` (10 %, 20 %, 60 %, 100 %)."""

    params_schema = {
        "fractions": {"type": "array", "minItems": 1,
                      "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                      "default": list(QUANTITY_FRACTIONS),
                      "description": "each group's fraction of the per-client share (default 0.1/0.2/0.6/1.0, "
                                     "leahcimali)"},
        **GROUP_PARAMS,
    }
    group_key = "fractions"

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        fraction = float(self.params["fractions"][group])
        return {"draw_fraction": fraction, "info": {"fraction": fraction}}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_shifts": [f"{float(f):g} of the share" for f in self.params["fractions"]]}
