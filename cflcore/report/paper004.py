"""Every printed cell of 004's Tables 1 and 3-9 beside this study's (the table ``paper004_cells``).

A cell is compared where the study ran the same federation structure (004's federation → our split families
below: two or three visual domains, a heterogeneity mix, a Dirichlet federation) with the same method and
aggregator (and β for Table 5); the dataset, scale and budget differ (the front page's departures), and ours is
the mean ± std over seeds of the final round's score, every matching split of ours listed. Every other cell says
"not run in this study", with what is missing. IFCA's and FeSEM's k is the one with their best balanced
accuracy, as 004 tunes it (App. F), whatever C the paper's cell printed.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .claims.fedgwc_004 import _at_k_by_accuracy, _bacc, paper004
from .claims.framework import select
from .seed_stats import SeedSummary, summarise

# 004's federation -> the split families (config/fedgwc-004*.yaml) with its structure
FEDERATIONS: dict[str, tuple[str, ...]] = {
    "mix (40,30,30)": ("mix-3", "mix10-3"),
    "mix (10,90,0)": ("mix-het", "mix10-het"),
    "mix (10,0,90)": ("mix-xhet", "mix10-xhet"),
    "domains (50,50,0)": ("domains-noise",),
    "domains (50,0,50)": ("domains-blur",),
    "domains (40,30,30)": ("domains-3",),
}
# (004's method, aggregator) -> our variant family; Table 9's plain aggregators are their own method
VARIANTS: dict[tuple[str, str], str] = {
    ("fedgwc", "fedavg"): "fedgwc", ("fedgwc", "fedavgm"): "fedgwc-fedavgm", ("fedgwc", "fedprox"): "fedgwc-fedprox",
    ("fedavg", "fedavg"): "fedavg", ("fedavgm", "fedavgm"): "fedavgm", ("fedprox", "fedprox"): "fedprox",
    ("fedavgm", "fedavg"): "fedavgm", ("fedprox", "fedavg"): "fedprox",
    ("ifca", "fedavg"): "ifca", ("fesem", "fedavg"): "fesem", ("cfl", "fedavg"): "scl",
    # Table 9's personalised rows: engine.personalisation under BNC ("No clusters") and under FedGWC; ours score
    # the personalised models (pFedMe's personal model, Per-FedAvg after one adaptation step), as 004's do
    ("pfedme", "pfedme"): "pfedme", ("fedgwc", "pfedme"): "fedgwc-pfedme",
    ("per-fedavg", "per-fedavg"): "perfedavg", ("fedgwc", "per-fedavg"): "fedgwc-perfedavg",
}
COLUMNS = ["table", "dataset", "federation", "method", "aggregator", "beta", "clusters", "metric", "paper",
           "ours", "our_splits", "status"]


def _splits_for(runs: pd.DataFrame, federation: str) -> list[str]:
    bases = list(dict.fromkeys(runs["split_base"])) if len(runs) and "split_base" in runs else []
    if federation.startswith("dirichlet"):
        return [s for s in bases if str(s).startswith("dirichlet")]
    return [s for s in bases if s in FEDERATIONS.get(federation, ())]


def _score(runs: pd.DataFrame, variant: str, split: str, metric: str, beta: float | None) -> tuple[float, float, int, object]:
    """(mean, sample std over seeds (NaN for one seed), seeds, k) of ``metric`` for ``variant`` on ``split`` (accuracies in points)."""
    column = {"acc": _bacc(runs), "bacc": _bacc(runs)}.get(metric, metric)
    scale = 100.0 if metric in ("acc", "bacc") else 1.0
    k = None
    if variant in ("ifca", "fesem"):
        _, k = _at_k_by_accuracy(runs, variant, split, column)
    factors = {"beta": float(beta)} if beta is not None else {}
    if k is not None:
        factors["k"] = k
    base = "fedgwc-beta" if beta is not None else variant
    sub = select(runs, base, split_base=split, **factors)
    values = pd.to_numeric(sub[column], errors="coerce") if column in sub else pd.Series(dtype=float)
    s = summarise(values.to_numpy(dtype=float) * scale)
    return s.mean, s.std, s.n, k


def paper004_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per printed cell of 004 (cflcore/reference/paper004_tables.csv) with ours beside it where this
    study has the same federation structure, method and aggregator (``runs``: the sweep summary, one row per run)."""
    rows = []
    for cell in paper004().itertuples(index=False):
        paper = f"{cell.mean:g}" + (f" ± {cell.sd:g}" if pd.notna(cell.sd) else "")
        base = {"table": cell.table, "dataset": cell.dataset, "federation": cell.federation, "method": cell.method,
                "aggregator": cell.aggregator, "beta": cell.beta, "clusters": cell.clusters, "metric": cell.metric,
                "paper": paper}
        variant = VARIANTS.get((str(cell.method), str(cell.aggregator)))
        splits = _splits_for(runs, str(cell.federation)) if variant else []
        beta = None if pd.isna(cell.beta) else float(cell.beta)
        found = []
        for split in splits:
            mean, std, n, k = _score(runs, variant, split, str(cell.metric), beta)
            if n:
                found.append((split, SeedSummary(mean, std, n).text(1 if cell.metric in ("acc", "bacc") else 2), n, k))
        if found:
            ours = "; ".join(f"{s}: {v} ({n} seeds{f', k {k:g}' if k is not None else ''})" for s, v, n, k in found)
            rows.append({**base, "ours": ours, "our_splits": ", ".join(s for s, *_ in found), "status": "compared"})
        else:
            why = ("no such method here" if variant is None else
                   "no such federation here" if not splits else f"{variant} not run on {', '.join(splits)}")
            rows.append({**base, "ours": "", "our_splits": "", "status": f"not run in this study ({why})"})
    return pd.DataFrame(rows, columns=COLUMNS)


def empty_cells() -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS)


def write_paper004_cells(runs: pd.DataFrame | None, papers: Sequence[str], path) -> object:
    """``tables/paper004_cells.csv``: the cells when the study checks 004 (``report.paper_checks``), else empty."""
    from .tables import write_text

    table = paper004_cells(runs) if "004" in [str(p) for p in papers] and runs is not None else empty_cells()
    return write_text(table.to_csv(index=False), path)


