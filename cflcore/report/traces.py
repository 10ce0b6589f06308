"""Split-criterion traces (report figure kind ``split_traces``): per round, what SCL and FedGWC compared
with their thresholds, read from each run's ``server.parquet`` diagnostics.

* SCL (Sattler et al.; 000 App. A.2): per cluster the norm of the mean update ‖mean Δ‖ (solid) and the
  largest client update norm max ‖Δ‖ (dashed) against ε1 and ε2 (a cluster splits when mean < ε1 and
  max > ε2, after the cooldown). Columns ``mean_update_norms``, ``max_update_norms`` (JSON
  {cluster: value}), ``eps1``, ``eps2``.
* FedGWC (004 Alg. 1 l. 14–15, Alg. 2): per cluster the running MSE of its interaction matrix against ε
  (log scale), and the smallest Davies–Bouldin score of Alg. 2's candidates against 1 (a cluster splits
  when MSE < ε and some DB ≤ 1). Columns ``mse`` (JSON {cluster: value}), ``davies_bouldin`` (JSON
  {cluster: [DB_2, …]}), ``epsilon``.

A run is recognised by these columns, not by its algorithm's name, so every variant of either method
is drawn. Split rounds (``n_splits`` > 0) are marked with red dotted lines. Rounds are drawn 1-based,
as in the other figures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .figures import Curve, _finish, _panel_axes
from .palette import style_map
from .runs import LoadedRun, diagnostics_mapping

SCL_COLUMNS = ("mean_update_norms", "max_update_norms", "eps1", "eps2")
FEDGWC_COLUMNS = ("mse", "davies_bouldin", "epsilon")


@dataclass(frozen=True)
class TracePanel:
    """One axes: per-cluster curves (``styles[i]`` is curve i's line style), horizontal thresholds
    (label, value) and the 0-based rounds where a split happened."""

    title: str
    ylabel: str
    curves: Sequence[Curve]
    thresholds: Sequence[tuple[str, float]]
    split_rounds: Sequence[int] = ()
    styles: Sequence[str] = field(default_factory=tuple)
    log_y: bool = False


def cluster_series(server: pd.DataFrame, column: str, reduce=None) -> dict[str, np.ndarray]:
    """{cluster: values per row of ``server``} from a JSON {cluster: value} column; NaN where a cluster
    has no value that round. ``reduce`` maps a list value (e.g. DB_2…DB_nmax) to one number."""
    cells = [diagnostics_mapping(v) for v in server[column]]
    clusters = sorted({k for cell in cells for k in cell}, key=lambda k: (len(k), k))
    out: dict[str, np.ndarray] = {}
    for cluster in clusters:
        values = []
        for cell in cells:
            v = cell.get(cluster)
            if reduce is not None and v is not None:
                v = reduce(v)
            values.append(np.nan if v is None else float(v))
        out[cluster] = np.asarray(values, dtype=np.float64)
    return out


def min_finite(values: Sequence[float | None]) -> float | None:
    """The smallest finite DB score of a candidate list (None when there is none)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return min(finite) if finite else None


def _threshold(server: pd.DataFrame, column: str) -> float:
    values = pd.to_numeric(server[column], errors="coerce").dropna()
    return float(values.iloc[-1]) if len(values) else float("nan")


def _split_rounds(server: pd.DataFrame) -> list[int]:
    if "n_splits" not in server.columns:
        return []
    n = pd.to_numeric(server["n_splits"], errors="coerce").fillna(0).to_numpy()
    return [int(r) for r, k in zip(server["round"], n) if k > 0]


def has_columns(run: LoadedRun, columns: Sequence[str]) -> bool:
    return run.server is not None and "round" in run.server.columns and all(c in run.server.columns for c in columns)


def scl_panels(run: LoadedRun) -> list[TracePanel]:
    """SCL: mean (solid) and max (dashed) update norm per cluster against ε1 / ε2."""
    server = run.server.sort_values("round")
    rounds = server["round"].to_numpy(dtype=np.int64)
    curves, styles = [], []
    for column, label, style in (("mean_update_norms", "mean", "-"), ("max_update_norms", "max", "--")):
        for cluster, values in cluster_series(server, column).items():
            curves.append(Curve(f"{label} ‖Δ‖, cluster {cluster}", rounds, values))
            styles.append(style)
    thresholds = [("ε1", _threshold(server, "eps1")), ("ε2", _threshold(server, "eps2"))]
    return [TracePanel(f"{run.spec.split} s{run.spec.seed}: update norms", "‖Δ‖", curves, thresholds,
                       _split_rounds(server), styles)]


def fedgwc_panels(run: LoadedRun) -> list[TracePanel]:
    """FedGWC: running MSE of P per cluster against ε (log y), and min DB per cluster against 1."""
    server = run.server.sort_values("round")
    rounds = server["round"].to_numpy(dtype=np.int64)
    splits = _split_rounds(server)
    mse = [Curve(f"cluster {c}", rounds, v) for c, v in cluster_series(server, "mse").items()]
    db = [Curve(f"cluster {c}", rounds, v) for c, v in cluster_series(server, "davies_bouldin", min_finite).items()]
    tag = f"{run.spec.split} s{run.spec.seed}"
    return [TracePanel(f"{tag}: MSE of P", "MSE", mse, [("ε", _threshold(server, "epsilon"))], splits, log_y=True),
            TracePanel(f"{tag}: Davies–Bouldin (min over n)", "DB", db, [("DB", 1.0)], splits)]


def run_panels(run: LoadedRun) -> list[TracePanel]:
    """The trace panels of one run (none when its server table has neither method's diagnostics)."""
    if has_columns(run, SCL_COLUMNS):
        return scl_panels(run)
    if has_columns(run, FEDGWC_COLUMNS):
        return fedgwc_panels(run)
    return []


def trace_figure(panels: Sequence[TracePanel], title: str) -> plt.Figure:
    """A grid of trace panels: curves with markers, dashed grey thresholds, red dotted split rounds."""
    fig, axes = _panel_axes(len(panels), (4, 3))
    for ax, panel in zip(axes, panels):
        # one colour (and marker) per cluster (palette.style_map); the line style is the panel's (mean / max)
        clusters = style_map(c.label.split("cluster ")[-1] for c in panel.curves)
        for i, curve in enumerate(panel.curves):
            style = panel.styles[i] if i < len(panel.styles) else "-"
            cluster = clusters[curve.label.split("cluster ")[-1]]
            values = np.where(curve.values > 0, curve.values, np.nan) if panel.log_y else curve.values
            ax.plot(curve.rounds + 1, values, ls=style, marker=cluster.marker, ms=2.5, lw=1, color=cluster.color,
                    label=curve.label)
        for k, (label, value) in enumerate(panel.thresholds):
            if math.isfinite(value) and (value > 0 or not panel.log_y):
                ax.axhline(value, color="black" if k == 0 else "grey", ls=(0, (4, 2)), lw=1, label=f"{label} = {value:g}")
        for r in panel.split_rounds:
            ax.axvline(r + 1, color="red", ls=":", lw=1)
        if panel.log_y:
            ax.set_yscale("log")
        ax.set_title(panel.title, fontsize=8)
        ax.set_xlabel("round")
        ax.set_ylabel(panel.ylabel)
        if panel.curves or panel.thresholds:
            ax.legend(fontsize=5)
    return _finish(fig, title)


def split_trace_figures(loaded: Sequence[LoadedRun]) -> Iterator[tuple[str, plt.Figure, str, int]]:
    """(file stem, figure, dataset, clients): one figure per dataset × clients × algorithm whose runs
    carry SCL or FedGWC diagnostics, one panel (FedGWC: two) per split × seed."""
    groups: dict[tuple[str, int, str], list[LoadedRun]] = {}
    for run in loaded:
        groups.setdefault((run.spec.dataset, run.spec.clients, run.spec.algorithm), []).append(run)
    for (dataset, clients, algorithm), runs in groups.items():
        panels = [p for run in runs for p in run_panels(run)]
        if panels:
            title = f"Split criteria per round: {algorithm}, {dataset}, {clients} clients"
            yield f"{dataset}_n{clients}_{algorithm}", trace_figure(panels, title), dataset, clients
