"""The dynamics study's front table (cflcore.report.papers.dynamics, ``tables/dynamics_table.csv``; caption
report/captions/dynamics_table.rst): one row per method, per setting (drift, availability, stragglers, label-skew
drift) its lag, final ARI, final local accuracy and the megabytes it sent, each a mean over the seeds with "k of n
seeds" beside it. The reference bands (FedAvg, the oracle, local training) come last, marked, never ranked (no rank
is drawn at all).

* lag: drift (rotation or label skew), the re-clustering lag of the switch (clustering.parquet's ``switch`` row,
  cflcore.metrics.drift); availability, the same reading of the absent group's window taken as a switch that spans it (the rounds from its
  return until the ARI is back at the round before the window's, :func:`cflcore.metrics.drift.reclustering_lag`); a
  "never" counts as the rounds left; k of n the seeds that had found the groups before (ARI ≥ 0.9) and came back
  (a lag from a partition that had found nothing is 0 and says nothing); stragglers: no event, "–";
* ARI: final round against that round's groups, k of n the seeds at or above 0.9 (cflcore.report.statistics.seed_stats);
  "did not act: <why, with the figures>" where the method acted in no seed (cflcore.report.acted; its ARI 0 is a
  default, not a score), "k of n seeds acted" beside the mean where it acted in some;
* accuracy: final local accuracy (``local_acc``: each client's model on its own test set), k of n the seeds above
  FedAvg's of the same seed;
* MB: megabytes down and up over the run (traffic.parquet, ``Strategy.traffic``), k of n the seeds that sent any
  (local training sends nothing: 0 of n).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ...metrics.drift import reclustering_lag
from ..acted import cell_actions
from ..statistics.seed_stats import FOUND_ARI, summarise
from .base import ClaimData

MEGABYTE = 1e6
ACCURACY = "local_acc"
NO_EVENT = "–"


@dataclass(frozen=True)
class Setting:
    """One column group: its label, its split and how its lag is read (``switch``: the drift's switch row;
    ``window``: an absent stretch of rounds, first..last inclusive; None: no event)."""

    label: str
    split: str
    lag: str | None = None
    window: tuple[int, int] | None = None


def _mean_k_of_n(values: Sequence[float], hits: int, what: str, digits: int = 2) -> str:
    s = summarise(values)
    if not s.n:
        return "–"
    return f"{s.text(digits)} ({hits} of {s.n} seeds {what})"


def _run_lag(run, setting: Setting) -> tuple[float, bool] | None:
    """(the run's lag, never counted as the rounds left; whether it had found the groups before, ARI ≥ 0.9, and came
    back), None where not readable."""
    frame = run.clustering
    if frame is None or "kind" not in frame or "ari" not in frame:
        return None
    per_round = frame[frame["kind"] == "round"].sort_values("round")
    aris = pd.to_numeric(per_round["ari"], errors="coerce").tolist()
    if setting.lag == "switch":
        switches = frame[frame["kind"] == "switch"]
        if not len(switches) or "reclustering_lag" not in switches or "switch_last_round" not in switches:
            return None
        lag = pd.to_numeric(switches["reclustering_lag"], errors="coerce").iloc[0]
        last = float(switches["switch_last_round"].iloc[0])
        before = float(pd.to_numeric(switches["pre_switch_ari"], errors="coerce").iloc[0]) \
            if "pre_switch_ari" in switches else np.nan
    elif setting.lag == "window" and setting.window is not None:
        first, last = setting.window[0], setting.window[1] + 1  # from the round before the window to the return
        if first < 1 or last >= len(aris):
            return None
        found = reclustering_lag(aris, first, last)
        lag = np.nan if found is None else float(found)
        before = float(aris[first - 1])
    else:
        return None
    left = float(len(aris)) - last
    return (left, False) if not np.isfinite(lag) else (float(lag), bool(before >= FOUND_ARI))


def _cells(data: ClaimData, method: str, setting: Setting, fedavg: str) -> dict[str, str]:
    runs = data.runs[(data.runs["algorithm_base"] == method) & (data.runs["split_base"] == setting.split)] \
        if len(data.runs) else pd.DataFrame()
    mine = [r for r in data.loaded if r.spec.algorithm == method and r.spec.split == setting.split]
    out = {}
    if setting.lag is None:
        out["lag"] = NO_EVENT
    else:
        lags = [x for x in (_run_lag(r, setting) for r in mine) if x is not None]
        out["lag"] = _mean_k_of_n([v for v, _ in lags], sum(back for _, back in lags), f"back at ARI ≥ {FOUND_ARI:g}", 1)
    ari = pd.to_numeric(runs["ari"], errors="coerce").dropna() if "ari" in runs else pd.Series(dtype=float)
    idle, some = cell_actions(runs)  # a method that never acted: its ARI 0 is a default, not a score (issue 68)
    out["ARI"] = (f"did not act: {idle}" if idle else
                  summarise(ari).text(2, k_of_n=True) + (f" ({some})" if some else "") if len(ari) else "–")
    acc = runs.set_index("seed")[ACCURACY] if ACCURACY in runs else pd.Series(dtype=float)
    base = data.runs[(data.runs["algorithm_base"] == fedavg) & (data.runs["split_base"] == setting.split)] \
        if len(data.runs) else pd.DataFrame()
    base_acc = base.set_index("seed")[ACCURACY] if ACCURACY in base else pd.Series(dtype=float)
    acc = pd.to_numeric(acc, errors="coerce").dropna()
    both = acc.index.intersection(pd.to_numeric(base_acc, errors="coerce").dropna().index)
    above = int((acc[both] > pd.to_numeric(base_acc[both])).sum())
    out["accuracy"] = (_mean_k_of_n(acc.to_numpy(), above, f"above {fedavg}") if method != fedavg
                       else (summarise(acc).text(2) if len(acc) else "–"))
    sent = [float((pd.to_numeric(r.traffic["bytes_down"]) + pd.to_numeric(r.traffic["bytes_up"])).sum()) / MEGABYTE
            for r in mine if getattr(r, "traffic", None) is not None and len(r.traffic)]
    out["MB"] = _mean_k_of_n(sent, sum(v > 0 for v in sent), "with traffic", 1) if sent else "–"
    return out


def dynamics_table(data: ClaimData, settings: Sequence[Setting], references: Mapping[str, str],
                   fedavg: str) -> pd.DataFrame:
    """The table (module doc): one row per method of ``data.runs`` (its order), the ``references`` (variant -> the
    band's words) last; columns ``method``, ``reference`` and ``<setting>: <measure>`` per setting."""
    columns = ["method", "reference"] + [f"{s.label}: {m}" for s in settings for m in ("lag", "ARI", "accuracy", "MB")]
    if not len(data.runs) or "algorithm_base" not in data.runs:
        return pd.DataFrame(columns=columns)
    splits = {s.split for s in settings}
    present = data.runs[data.runs["split_base"].isin(splits)]
    methods = list(dict.fromkeys(str(m) for m in present["algorithm_base"]))
    order = [m for m in methods if m not in references] + [m for m in methods if m in references]
    rows = []
    for method in order:
        row = {"method": method, "reference": references.get(method, "")}
        for s in settings:
            row.update({f"{s.label}: {k}": v for k, v in _cells(data, method, s, fedavg).items()})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
