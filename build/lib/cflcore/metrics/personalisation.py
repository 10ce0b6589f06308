"""Personalisation versus generalisation (000 §4.4, Definition 8 and Fig. 2).

PF1 = macro F1 of each client's model on its local test set (``local_f1``), averaged over clients and
evaluation rounds; GF1 = the same on the orchestrator test set (``orch_f1``); learning gap
LG = |PF1 − GF1| (000 eq. 11 with the F1 score as metric). Balanced accuracies are averaged the same way.
Rows whose metric is null (rounds without evaluation) are left out of the means.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..errors import DataError

HISTORY_METRICS = ("local_f1", "orch_f1", "local_bacc", "orch_bacc", "local_acc", "orch_acc")


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

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _column_mean(history: pd.DataFrame, column: str) -> float:
    if column not in history.columns:
        return float("nan")
    values = pd.to_numeric(history[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def learning_gap(pf1: float, gf1: float) -> float:
    """|PF1 − GF1| (000 Definition 8, eq. 11)."""
    return float(abs(pf1 - gf1))


def personalisation_scores(history: pd.DataFrame) -> PersonalisationScores:
    """Means over all (client, round) rows of ``history`` that were evaluated."""
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
    )


def personalisation_by_round(history: pd.DataFrame) -> pd.DataFrame:
    """One row per round with the client means of that round (for plotting); rounds never evaluated are dropped."""
    if "round" not in history.columns:
        raise DataError("history: column 'round' is missing")
    rows = []
    for rnd, group in history.groupby("round", sort=True):
        scores = personalisation_scores(group)
        if scores.n_evaluations == 0:
            continue
        rows.append({"round": int(rnd), **scores.as_dict()})
    columns = ["round", *PersonalisationScores.__dataclass_fields__]
    return pd.DataFrame(rows, columns=columns)
