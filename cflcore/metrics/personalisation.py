"""Personalisation versus generalisation (000 §4.4, Definition 8 and Fig. 2).

PF1 = macro F1 of each client's model on its local test set (``local_f1``), averaged over clients and
evaluation rounds; GF1 = the same on the orchestrator test set (``orch_f1``); learning gap
LG = |PF1 − GF1| (000 eq. 11 with the F1 score as metric). Balanced accuracies are averaged the same way.
Rows whose metric is null (rounds without evaluation) are left out of the means. The global model's scores
(history ``global_*``, 002 Fig. 6) are averaged the same way; NaN for methods without a global model.

004 App. F's federated balanced accuracy: each client's balanced accuracy on its local test set (mean
class-wise recall, ``local_bacc``), averaged over clients "optionally weighted by test set sizes":
``local_bacc_weighted`` = Σ n_i · bacc_i / Σ n_i over the evaluated (client, round) rows, n_i = the client's
local test-set size (the split manifest's ``n_test``). Without test sizes it is NaN.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import DataError

HISTORY_METRICS = ("local_f1", "orch_f1", "local_bacc", "orch_bacc", "local_acc", "orch_acc",
                   "global_f1", "global_acc", "global_orch_f1", "global_orch_acc")


@dataclass(frozen=True)
class PersonalisationScores:
    """PF1, GF1, learning gap and balanced accuracies of one run (or one round); NaN when not evaluated."""

    pf1: float
    gf1: float
    learning_gap: float
    local_bacc: float
    orch_bacc: float
    local_acc: float
    orch_acc: float
    n_evaluations: int
    global_f1: float = float("nan")  # the method's global model (history ``global_*``, 002 Fig. 6); NaN without one
    global_acc: float = float("nan")
    global_orch_f1: float = float("nan")
    global_orch_acc: float = float("nan")
    local_bacc_weighted: float = float("nan")

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _column_mean(history: pd.DataFrame, column: str) -> float:
    if column not in history.columns:
        return float("nan")
    values = pd.to_numeric(history[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    """Σ w·v / Σ w over the finite values with positive total weight; NaN when there are none."""
    values, weights = np.asarray(values, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    keep = np.isfinite(values) & np.isfinite(weights)
    total = weights[keep].sum()
    return float((weights[keep] * values[keep]).sum() / total) if keep.any() and total > 0 else float("nan")


def size_weighted_bacc(history: pd.DataFrame, test_sizes: Sequence[int] | None) -> float:
    """004 App. F: client balanced accuracies averaged with weights = local test-set sizes (module doc)."""
    if test_sizes is None or "local_bacc" not in history.columns:
        return float("nan")
    sizes = np.asarray(test_sizes, dtype=np.float64)
    clients = history["client"].to_numpy(dtype=np.int64)
    if clients.size and (clients.min() < 0 or clients.max() >= sizes.size):
        raise DataError(f"history: client ids up to {int(clients.max())} but test sizes are given for {sizes.size} clients")
    bacc = pd.to_numeric(history["local_bacc"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return weighted_mean(bacc, sizes[clients])


def learning_gap(pf1: float, gf1: float) -> float:
    """|PF1 − GF1| (000 Definition 8, eq. 11)."""
    return float(abs(pf1 - gf1))


def personalisation_scores(history: pd.DataFrame, test_sizes: Sequence[int] | None = None) -> PersonalisationScores:
    """Means over all (client, round) rows of ``history`` that were evaluated; ``test_sizes[i]`` = client i's
    local test-set size (for ``local_bacc_weighted``)."""
    for column in ("local_f1", "orch_f1"):
        if column not in history.columns:
            raise DataError(f"history: column {column!r} is missing; required: local_f1, orch_f1")
    means = {c: _column_mean(history, c) for c in HISTORY_METRICS}
    evaluated = pd.to_numeric(history["local_f1"], errors="coerce").notna()
    return PersonalisationScores(
        pf1=means["local_f1"],
        gf1=means["orch_f1"],
        learning_gap=learning_gap(means["local_f1"], means["orch_f1"]),
        local_bacc=means["local_bacc"],
        orch_bacc=means["orch_bacc"],
        local_acc=means["local_acc"],
        orch_acc=means["orch_acc"],
        n_evaluations=int(evaluated.sum()),
        global_f1=means["global_f1"],
        global_acc=means["global_acc"],
        global_orch_f1=means["global_orch_f1"],
        global_orch_acc=means["global_orch_acc"],
        local_bacc_weighted=size_weighted_bacc(history, test_sizes),
    )


def personalisation_by_round(history: pd.DataFrame, test_sizes: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per round with the client means of that round (for plotting); rounds never evaluated are dropped."""
    if "round" not in history.columns:
        raise DataError("history: column 'round' is missing")
    rows = []
    for rnd, group in history.groupby("round", sort=True):
        scores = personalisation_scores(group, test_sizes)
        if scores.n_evaluations == 0:
            continue
        rows.append({"round": int(rnd), **scores.as_dict()})
    columns = ["round", *PersonalisationScores.__dataclass_fields__]
    return pd.DataFrame(rows, columns=columns)
