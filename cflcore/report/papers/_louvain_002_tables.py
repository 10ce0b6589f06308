"""002's own report tables (:class:`.louvain_002.Louvain002`'s ``tables``, a private helper module of the paper):
the one-factor ablations of the departure options (``louvain_002_ablations``) and the proxy knob's spread beside the
labels-only baseline (``louvain_002_spread``)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..statistics.verdicts import Part, above, assess, cell, difference, per_seed, t_interval, within
from .base import ClaimData, select
from ._louvain_002_measures import (AVG_SILHOUETTE, EQ2_MODULE, FIG3, FIG4, HALF_ARI_CLOSE_TO_ZERO, LABELS_ONLY_ARI,
                                    LATE_OWN, SPREAD, W_T, silhouette_levels, with_labels_only)


ABLATION_COLUMNS = ("factor", "a", "b", "cell", "metric", "with_a", "with_b", "difference", "moved", "part",
                    "verdict_a", "verdict_b", "verdict_moved")


def _ablation_cell(runs: pd.DataFrame, base: str, attribution: str | None, participation: float,
                   minus: str | None = None) -> Any:
    """A function ``metric -> per-seed values`` of one cell (``minus``: the per-seed difference to that
    attribution's cell of the same runs)."""
    def pick(attr: str | None) -> pd.DataFrame:
        factors: dict[str, Any] = {"engine.participation": participation}
        if attr is not None and base != LATE_OWN:  # Late's own-start variant fixes its attribution, no column
            factors["attribution"] = attr
        return select(runs, base, **factors)

    def values(metric: str) -> pd.Series:
        a = per_seed(pick(attribution), metric)
        return a if minus is None else (a - per_seed(pick(minus), metric)).dropna()
    return values


def ablations(runs: pd.DataFrame, rounds: pd.DataFrame | None = None) -> pd.DataFrame:
    """One-factor ablations of the departure options on the cells that disagree with 002 (1NN at 50 %, WNN against
    1NN; Late and AVG for the factors that act on them), each factor varied alone from louvain-fig4's defaults:
    one row per factor, cell and metric with the cell's value under setting ``a`` (the default) and ``b``, the
    per-seed paired difference b − a with its t-interval and whether it ``moved`` beyond the seed noise, and,
    where the cell is a part of a claim, that part's status under a and under b (``verdict_moved``: the part's
    verdict differs). Empty when the study has no ablation runs."""
    word = {"yes": "holds", "no": "contradicted", "tie": "inconclusive", "missing": "n/a"}
    rows: list[dict[str, Any]] = []

    def row(factor: str, a: str, b: str, cell_: str, metric: str, va: pd.Series, vb: pd.Series,
            part: str = "", test: Any = None) -> None:
        common = va.index.intersection(vb.index)
        d = t_interval((vb[common] - va[common]).to_numpy(), "paired seeds")
        ia, ib = t_interval(va.to_numpy()), t_interval(vb.to_numpy())
        if not np.isfinite(ia.mean) and not np.isfinite(ib.mean):
            return
        sa = word[test(ia)] if test else ""
        sb = word[test(ib)] if test else ""
        rows.append({"factor": factor, "a": a, "b": b, "cell": cell_, "metric": metric, "with_a": ia.text(3, False),
                     "with_b": ib.text(3, False), "difference": d.text(3),
                     "moved": {"yes": "moved", "no": "moved", "tie": "within the seed noise"}.get(above(d), "n/a"),
                     "part": part, "verdict_a": sa, "verdict_b": sb,
                     "verdict_moved": ("yes" if sa != sb else "no") if test else ""})

    half_ari = (f"002-half-1nn: 1NN ARI ≤ {HALF_ARI_CLOSE_TO_ZERO}", lambda i: within(i, -np.inf, HALF_ARI_CLOSE_TO_ZERO))
    one_above = ("002-1nn-wnn: 1NN above WNN", above)
    if len(select(runs, EQ2_MODULE)):
        for p in (1.0, 0.5):
            for attr in ("1nn", "wnn"):
                for metric in ("ari", W_T, "orch_acc"):
                    part, test = half_ari if (attr, p, metric) == ("1nn", 0.5, "ari") else ("", None)
                    row("eq2_product", "array", "module", f"{attr.upper()} at {p:.0%}", metric,
                        _ablation_cell(runs, FIG4, attr, p)(metric), _ablation_cell(runs, EQ2_MODULE, attr, p)(metric),
                        part, test)
            for metric in ("ari", W_T):
                part, test = one_above if p == 1.0 else ("", None)
                row("eq2_product", "array", "module", f"1NN − WNN at {p:.0%}", metric,
                    _ablation_cell(runs, FIG4, "1nn", p, minus="wnn")(metric),
                    _ablation_cell(runs, EQ2_MODULE, "1nn", p, minus="wnn")(metric), part, test)
    if len(select(runs, LATE_OWN)):
        for p in (1.0, 0.5):
            for metric in ("ari", "silhouette_method", W_T, "orch_acc"):
                row("late_start", "global", "own", f"Late at {p:.0%}", metric,
                    _ablation_cell(runs, FIG4, "late", p)(metric), _ablation_cell(runs, LATE_OWN, "late", p)(metric))
    lo, hi = AVG_SILHOUETTE[0] - AVG_SILHOUETTE[1], AVG_SILHOUETTE[0] + AVG_SILHOUETTE[1]
    for p in (1.0, 0.5):
        for attr in ("avg", "late", "1nn", "wnn"):
            part, test = ((f"002-avg-sil: AVG silhouette {AVG_SILHOUETTE[0]:g} ± {AVG_SILHOUETTE[1]:g}",
                           lambda i: within(i, lo, hi)) if (attr, p) == ("avg", 1.0) else ("", None))
            cell_runs = select(runs, FIG4, attribution=attr, **{"engine.participation": p})
            if rounds is not None and len(rounds) and len(cell_runs):  # the claim's statistic: mean over rounds 1..
                va = silhouette_levels(rounds, cell_runs, "silhouette_method")[0]
                vb = silhouette_levels(rounds, cell_runs, "silhouette_authors")[0]
                metric = "silhouette, mean over rounds 1.."
            else:
                values = _ablation_cell(runs, FIG4, attr, p)
                va, vb, metric = values("silhouette_method"), values("silhouette_authors"), "silhouette"
            row("silhouette", "sklearn", "authors'", f"{attr.upper()} at {p:.0%}", metric, va, vb, part, test)
    return pd.DataFrame(rows, columns=list(ABLATION_COLUMNS))


# ---- the proxy's own knob: group_spread against the labels-only baseline ------------------------------------

SPREAD_COLUMNS = ("group_spread", "majority_share", "effective_share", "seeds", "ari_1nn", "ari_labels_only",
                  "labels_only_minus_1nn", "one_nn_beyond_labels")


def spread_table(runs: pd.DataFrame, loaded: Sequence[Any] = ()) -> pd.DataFrame:
    """Per (group_spread s, m_k) cell of 1NN at resolution 1 (:data:`SPREAD` and louvain-fig3's resolution-1 cells,
    s read from each split's manifest): the effective majority share m_k·(1 − s), 1NN's final ARI, the labels-only
    baseline's ARI (:func:`labels_only_ari`: how much of the ARI the split gives away with no training), their
    paired difference per seed (baseline − 1NN, t-interval) and whether 1NN is above the baseline beyond the seed
    noise. Empty without such runs."""
    runs = with_labels_only(ClaimData(runs, loaded=loaded))
    if runs is None or not len(runs) or "split_group_spread" not in runs:
        return pd.DataFrame(columns=list(SPREAD_COLUMNS))
    cells = pd.concat([select(runs, SPREAD), select(runs, FIG3, resolution=1.0)], ignore_index=True)
    cells = cells.dropna(subset=["split_group_spread", "majority_share"]) if len(cells) else cells
    rows = []
    for (s, m), group in cells.groupby(["split_group_spread", "majority_share"]) if len(cells) else []:
        d = difference(group, group, LABELS_ONLY_ARI, "ari")
        # 1NN above the baseline: 1NN − baseline strictly above 0 (seeds that tie count for neither side, so a cell
        # where both sit at ARI 1.00 on every seed is "no", never "yes")
        beyond = assess(Part(difference(group, group, "ari", LABELS_ONLY_ARI), 0.0, strict=True))
        rows.append({"group_spread": float(s), "majority_share": float(m), "effective_share": float(m) * (1 - float(s)),
                     "seeds": int(cell(group, "ari").n), "ari_1nn": cell(group, "ari").text(),
                     "ari_labels_only": cell(group, LABELS_ONLY_ARI).text(), "labels_only_minus_1nn": d.text(),
                     "one_nn_beyond_labels": "yes" if beyond.toward else "no"})
    return pd.DataFrame(rows, columns=list(SPREAD_COLUMNS))
