"""The split generator ``natural``: the partition a federation table gives (cflcore/federation/table.py), each client
holding its own rows; no draw decides who holds what. Its parameters declare the table (``table``, ``classes``,
``image_size``), for the split and for the table dataset it runs on (cflcore.config.plan.data_settings). The ground
truth is the table's ``group`` column where it has one (every clustering score is read against it); without one the
manifest says ``ground_truth: false`` and the external scores are n/a. Each client's training rows are split into its
local train and test sets by ``local_test_fraction`` (seeded, as every generator's, 000 §4.1); the table's ``test``
rows are the orchestrator's set. The scenario's client count must be the table's."""
from __future__ import annotations

from functools import cache
from typing import Any, Mapping

import numpy as np

from ..data.splits.base import SPLIT_GENERATORS, ClientPlan, SplitContext, SplitGenerator, SplitPlan
from ..errors import ConfigError, DataError
from .table import read_table


@cache
def _clients_and_groups(path: str, field: str) -> tuple[tuple[str | None, ...], tuple[str | None, ...] | None]:
    """Each row's client and group (None without a group column), as strings; None on a test row (the orchestrator's:
    ``split`` test, or an empty client)."""
    table = read_table(path, f"{field}.table")
    test = (table.column("split").to_pylist() if "split" in table.column_names else [None] * table.num_rows)
    def column(name: str) -> tuple[str | None, ...]:
        return tuple(None if v is None or t == "test" else str(v) for v, t in zip(table.column(name).to_pylist(), test))
    return column("client"), (column("group") if "group" in table.column_names else None)


def _sorted_ids(values: set[str]) -> list[str]:
    """Ids in their natural order: numerically where every id is an integer, else as strings."""
    return sorted(values, key=lambda v: (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v))


@SPLIT_GENERATORS.register("natural")
class NaturalSplit(SplitGenerator):
    """The table's own partition (module docstring)."""

    params_schema = {
        "table": {"type": "string", "minLength": 1, "description": "the federation table (.parquet or .csv)"},
        "classes": {"type": "array", "minItems": 2, "items": {"type": "string"},
                    "description": "the class names; a row's label is an index into them or one of them"},
        "image_size": {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "integer", "minimum": 1},
                       "description": "[channels, height, width] of every sample"},
    }

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        for key in ("table", "classes", "image_size"):
            if p.get(key) is None:
                raise ConfigError(f"{field}.{key}: missing; allowed: the federation table's {key}")

    def _rows(self) -> tuple[list[str | None], list[str | None] | None]:
        clients, groups = _clients_and_groups(str(self.params["table"]), self.field)
        return list(clients), (list(groups) if groups is not None else None)

    def group_sizes(self, n_clients: int) -> tuple[int, ...] | None:
        """The clients per group of the table (None without groups); a client count other than the table's is
        refused here, before any job."""
        clients, groups = self._rows()
        ids = _sorted_ids(set(clients) - {None})
        if n_clients != len(ids):
            raise ConfigError(f"{self.field}: the table has {len(ids)} clients, not {n_clients}; allowed: "
                              f"clients: [{len(ids)}] in the split entry")
        if groups is None:
            return None
        group_of = {c: g for c, g in zip(clients, groups) if c is not None}
        names = _sorted_ids(set(group_of.values()))
        return tuple(sum(1 for c in ids if group_of[c] == g) for g in names)

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        clients, groups = self._rows()
        self.group_sizes(n_clients)
        if len(clients) != len(ctx.train_idx) + len(ctx.test_idx):
            raise DataError(f"{self.field}: the dataset has {len(ctx.train_idx) + len(ctx.test_idx)} rows, the table "
                            f"{len(clients)}; allowed: the dataset prepared from this table (loader table)")
        ids = _sorted_ids(set(clients) - {None})
        group_of = {c: g for c, g in zip(clients, groups) if c is not None} if groups is not None else {}
        names = _sorted_ids(set(group_of.values())) if groups is not None else ["all"]
        cluster_of = {c: names.index(group_of[c]) if groups is not None else 0 for c in ids}
        owner = np.asarray([ids.index(c) if c is not None else -1 for c in clients])
        plans, sets = [], [set() for _ in names]
        for k, client in enumerate(ids):
            rows = ctx.train_idx[owner[ctx.train_idx] == k]
            hist = np.bincount(ctx.train_labels[np.searchsorted(ctx.train_idx, rows)], minlength=ctx.n_classes)
            sets[cluster_of[client]] |= set(np.flatnonzero(hist).tolist())
            plans.append(ClientPlan(cluster=cluster_of[client], class_weights=hist / max(hist.sum(), 1),
                                    fixed_idx=rows, info={"client_id": client}))
        info = {"cluster_groups": names} if groups is not None else {}
        return SplitPlan(len(names), [sorted(s) for s in sets], plans, info, ground_truth=groups is not None)
