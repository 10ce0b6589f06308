"""Figures of the aggregate report (matplotlib, Agg backend; each saved as PNG and PDF, atomically).

* :func:`learning_gap_figure` — 000 Fig. 2: per algorithm a segment from GF1 (bottom) to PF1 (top);
  its length is the learning gap.
* :func:`temperature_band_figure` — 000 Figs. 3–4: every run's temperature (000 Def. 7) min–max
  normalised to [0, 1], thin lines, with the mean and a 95 % t-confidence band across runs; one panel
  per key (the report keys them by clients × algorithm), the median clustering round dotted red.
* :func:`temperature_runs_figure` — 000 Figs. 10–14: per run the normalised temperature, the clustering
  round (red dotted) and the pre-clustering local minimum (grey dotted, only when the curve descended first).
* :func:`score_progress_figure` — 001 Fig. 1 as a heatmap: per split a method × round grid of a clustering
  score (ARI by default), the mean over seeds printed in each cell. 001 draws one line per method; with the
  default study's 11 methods per panel the lines hid each other, so the grid replaces them.
* :func:`n_clusters_figure` — the number of clusters per round, the same method × round grid.
* :func:`whatif_heatmap_figure` — per run a clusterer × round heatmap of the ARI of every
  what-if clusterer (cflcore.evaluate.whatif), the run's clustering round (OCFL: where the temperature
  trigger fired) as a red frame, each clusterer's earliest round with ARI ≥ 0.99 as a white dot.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from ..io import atomic_path  # noqa: E402
from .palette import style_map  # noqa: E402


@dataclass(frozen=True)
class Curve:
    """One run's per-round series; ``marker_round`` is a 0-based round to mark (clustering), or None."""

    label: str
    rounds: np.ndarray
    values: np.ndarray
    marker_round: int | None = None


def tight_bbox(fig: plt.Figure, dpi: float):
    """The box ``savefig(bbox_inches="tight")`` crops to (padded by ``savefig.pad_inches``), computed once.

    Each ``savefig(..., bbox_inches="tight")`` runs a layout pass of its own before drawing, so a figure saved
    as PNG and PDF paid for two of them; the PDF's was the dearest step of the report job. This is the PNG's
    box (the Agg renderer at the PNG's ``dpi``); the PDF gets the same one."""
    original = fig.dpi
    fig.dpi = dpi
    try:
        fig.draw_without_rendering()
        return fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
    finally:
        fig.dpi = original


def save_figure(fig: plt.Figure, stem: Path, dpi: float = 120) -> list[Path]:
    """Write ``{stem}.png`` and ``{stem}.pdf`` atomically, cropped to the figure's tight box, and close it."""
    paths = []
    try:
        bbox = tight_bbox(fig, dpi)
        for fmt in ("png", "pdf"):
            path = Path(f"{stem}.{fmt}")
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches=bbox,
                            metadata={"CreationDate": None} if fmt == "pdf" else None)
            paths.append(path)
    finally:
        plt.close(fig)
    return paths


def normalise(values: Sequence[float]) -> np.ndarray:
    """Min–max scaling to [0, 1] over the finite values (a constant curve becomes 0); NaN stays NaN."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return values
    low, span = finite.min(), finite.max() - finite.min()
    return (values - low) / span if span > 0 else np.where(np.isfinite(values), 0.0, np.nan)


def mean_confidence_band(curves: Sequence[Curve], level: float = 0.95) -> pd.DataFrame:
    """Per round: mean over curves, and the two-sided t-interval of the mean (NaN where < 2 curves)."""
    frame = pd.concat([pd.Series(c.values, index=c.rounds) for c in curves], axis=1) if curves else pd.DataFrame()
    if frame.empty:
        return pd.DataFrame(columns=["round", "mean", "low", "high", "n"])
    n = frame.notna().sum(axis=1).to_numpy()
    mean = frame.mean(axis=1, skipna=True).to_numpy()
    sem = (frame.std(axis=1, ddof=1, skipna=True) / np.sqrt(np.maximum(n, 1))).to_numpy()
    half = np.where(n > 1, stats.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * sem, np.nan)
    return pd.DataFrame({"round": frame.index.to_numpy(), "mean": mean, "low": mean - half, "high": mean + half, "n": n})


def pre_clustering_minimum(values: np.ndarray, clustering_position: int | None) -> int | None:
    """Position of the minimum before the clustering position, if the curve descended to it (000 Figs. 10–14)."""
    if clustering_position is None or clustering_position < 2:
        return None
    before = np.asarray(values[:clustering_position], dtype=np.float64)
    if not np.isfinite(before).any():
        return None
    position = int(np.nanargmin(before))
    return position if position > 0 else None


def _grid(n_panels: int, max_cols: int = 4) -> tuple[int, int]:
    cols = min(max_cols, max(n_panels, 1))
    return math.ceil(max(n_panels, 1) / cols), cols


def _panel_axes(n_panels: int, size: tuple[float, float]) -> tuple[plt.Figure, list[plt.Axes]]:
    """A grid of ``n_panels`` axes (unused cells switched off), each ``size`` inches."""
    rows, cols = _grid(n_panels)
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax in list(axes.flat)[n_panels:]:
        ax.axis("off")
    return fig, list(axes.flat)


def _finish(fig: plt.Figure, title: str) -> plt.Figure:
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def learning_gap_figure(personalisation: pd.DataFrame, title: str) -> plt.Figure:
    """Segments GF1 → PF1 per algorithm (x) and split (offset and style, :func:`palette.style_map`); columns
    pf1_mean, gf1_mean (one row per algorithm × split: the means over seeds)."""
    algorithms = list(dict.fromkeys(personalisation["algorithm"]))
    splits = list(dict.fromkeys(personalisation["split"]))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(algorithms) + 2), 3.6))
    width = 0.7 / max(len(splits), 1)
    styles = style_map(splits)
    for s, split in enumerate(splits):
        rows = personalisation[personalisation["split"] == split]
        for _, row in rows.iterrows():
            x = algorithms.index(row["algorithm"]) - 0.35 + width * (s + 0.5)
            ax.plot([x, x], [row["gf1_mean"], row["pf1_mean"]], lw=3, solid_capstyle="butt", **styles[split].line(),
                    label=split if row["algorithm"] == rows["algorithm"].iloc[0] else None)
            ax.plot([x], [row["pf1_mean"]], marker="_", color="black", ms=10)
            ax.plot([x], [row["gf1_mean"]], marker="_", color="grey", ms=10)
    ax.set_xticks(range(len(algorithms)), algorithms, rotation=30, ha="right")
    ax.set_ylabel("F1 (bottom: GF1, top: PF1)")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    if splits:
        ax.legend(fontsize=7, loc="best")
    return fig


def temperature_band_figure(panels: Mapping[str, Sequence[Curve]], title: str) -> plt.Figure:
    """One panel per key: thin normalised curves, their mean (solid) and 95 % band (000 Figs. 3–4)."""
    fig, axes = _panel_axes(len(panels), (4, 3))
    for ax, (name, curves) in zip(axes, panels.items()):
        for curve in curves:
            ax.plot(curve.rounds + 1, curve.values, color="grey", lw=0.5, alpha=0.5)
        band = mean_confidence_band(curves)
        if len(band):
            ax.fill_between(band["round"] + 1, band["low"], band["high"], color="tab:blue", alpha=0.25, lw=0)
            ax.plot(band["round"] + 1, band["mean"], color="tab:blue", lw=2)
        marked = [c.marker_round for c in curves if c.marker_round is not None]
        if marked:  # the median (first) clustering round of the panel's runs
            ax.axvline(float(np.median(marked)) + 1, color="red", ls=":", lw=1)
        ax.set_title(f"{name} ({len(curves)} runs)", fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel("normalised temperature")
    return _finish(fig, title)


def temperature_runs_figure(panels: Mapping[str, Sequence[Curve]], title: str) -> plt.Figure:
    """One panel per key (e.g. split × algorithm), one line per run with its clustering and minimum rounds."""
    fig, axes = _panel_axes(len(panels), (3.6, 2.8))
    styles = style_map(c.label for curves in panels.values() for c in curves)
    for ax, (name, curves) in zip(axes, panels.items()):
        for curve in curves:
            ax.plot(curve.rounds + 1, curve.values, lw=1, label=curve.label, **styles[curve.label].line())
            position = None
            if curve.marker_round is not None and curve.marker_round in set(curve.rounds.tolist()):
                position = int(np.flatnonzero(curve.rounds == curve.marker_round)[0])
                ax.axvline(curve.marker_round + 1, color="red", ls=":", lw=1)
            minimum = pre_clustering_minimum(curve.values, position)
            if minimum is not None:
                ax.axvline(curve.rounds[minimum] + 1, color="grey", ls=":", lw=1)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("round")
        ax.set_ylabel("norm. temperature", fontsize=8)
        if 1 < len(curves) <= 5:
            ax.legend(fontsize=6)
    return _finish(fig, title)


def series_figure(panels: Mapping[str, Sequence[Curve]], title: str, ylabel: str, ylim: tuple | None = None) -> plt.Figure:
    """One panel per key, one step line per curve; a curve label keeps its style (:func:`palette.style_map`)
    in every panel, so no two series of a panel share a colour however many there are."""
    fig, axes = _panel_axes(len(panels), (4, 3))
    styles = style_map(c.label for curves in panels.values() for c in curves)
    for ax, (name, curves) in zip(axes, panels.items()):
        for curve in curves:
            ax.plot(curve.rounds + 1, curve.values, lw=1.2, ms=3, label=curve.label, drawstyle="steps-post",
                    **styles[curve.label].line(marker=len(styles) > 10))
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        if curves:
            ax.legend(fontsize=6)
    return _finish(fig, title)


ROUND_COLUMNS = ("split", "algorithm", "round")
ANNOTATE_MAX_ROUNDS = 30  # above this many rounds a cell is too narrow for its printed value


def round_grid(frame: pd.DataFrame, value: str) -> dict[str, pd.DataFrame]:
    """Per split (first-seen order), the algorithm × round grid (0-based round columns) of the mean of ``value``
    over the frame's rows: one row per seed (or a single run) and round. NaN where an algorithm lacks a round."""
    out = {}
    for split, part in frame.groupby("split", sort=False):
        grid = part.pivot_table(index="algorithm", columns="round", values=value, aggfunc="mean", sort=False,
                                dropna=False)
        out[str(split)] = grid.reindex(index=list(dict.fromkeys(part["algorithm"]))).sort_index(axis=1)
    return out


def round_heatmap_figure(frame: pd.DataFrame, title: str, value: str, label: str, vmin: float | None = None,
                         vmax: float | None = None, digits: int = 2, cmap: str = "viridis") -> plt.Figure:
    """One panel per split, stacked: rows = algorithms, columns = rounds (1-based labels), colour = the mean
    over seeds of ``value`` (columns ``split``, ``algorithm``, ``round`` 0-based, ``value``; ``seed`` optional, one
    row per seed), printed in the cell while there are at most :data:`ANNOTATE_MAX_ROUNDS` rounds. Grey = no value."""
    grids = round_grid(frame, value)
    n_rounds = max((g.shape[1] for g in grids.values()), default=1)
    n_rows = [max(g.shape[0], 1) for g in grids.values()] or [1]
    n_seeds = int(frame["seed"].nunique()) if "seed" in frame.columns and len(frame) else 1
    width = min(max(5.5, 2.6 + 0.45 * n_rounds), 18.0)
    fig, axes = plt.subplots(len(n_rows), 1, squeeze=False, figsize=(width, 0.5 + sum(0.9 + 0.26 * n for n in n_rows)),
                             gridspec_kw={"height_ratios": n_rows}, layout="constrained")
    values = frame[value].to_numpy(dtype=np.float64, na_value=np.nan) if len(frame) else np.zeros(0)
    finite = values[np.isfinite(values)]
    low = vmin if vmin is not None else (float(finite.min()) if finite.size else 0.0)
    high = vmax if vmax is not None else (float(finite.max()) if finite.size else 1.0)
    high = high if high > low else low + 1.0
    colours = plt.get_cmap(cmap).with_extremes(bad="0.85")
    image = None
    for ax, (split, grid) in zip(axes[:, 0], grids.items()):
        data = grid.to_numpy(dtype=np.float64, na_value=np.nan)
        image = ax.imshow(np.ma.masked_invalid(data), vmin=low, vmax=high, cmap=colours, aspect="auto",
                          interpolation="nearest")
        if grid.shape[1] <= ANNOTATE_MAX_ROUNDS:
            for (a, r), v in np.ndenumerate(data):
                if np.isfinite(v):
                    ax.text(r, a, f"{v:.{digits}f}", ha="center", va="center", fontsize=7,
                            color="black" if (v - low) / (high - low) > 0.6 else "white")
        rounds = [int(r) + 1 for r in grid.columns]
        step = max(1, len(rounds) // 25)
        ax.set_xticks(range(0, len(rounds), step), [str(r) for r in rounds[::step]], fontsize=7)
        ax.set_yticks(range(grid.shape[0]), list(grid.index), fontsize=7)
        ax.set_title(split, fontsize=9)
        ax.set_xlabel("round", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=list(axes[:, 0]), shrink=max(0.25, 0.9 / len(grids)), label=label)
    seeds = f" (mean over {n_seeds} seeds)" if n_seeds > 1 else ""
    fig.suptitle(title + seeds)
    return fig


def score_progress_figure(frame: pd.DataFrame, title: str, score: str = "ari", label: str = "ARI") -> plt.Figure:
    """A clustering score per method × round, one panel per split (001 Fig. 1 as a heatmap, see the module)."""
    return round_heatmap_figure(frame, title, score, label, vmin=0.0, vmax=1.0)


def n_clusters_figure(frame: pd.DataFrame, title: str) -> plt.Figure:
    """Number of clusters per method × round, one panel per split (mean over seeds, one decimal)."""
    return round_heatmap_figure(frame, title, "n_clusters", "clusters", vmin=1.0, digits=1 if _fractional(frame) else 0)


def _fractional(frame: pd.DataFrame) -> bool:
    """Whether some split × algorithm × round mean of ``n_clusters`` over seeds is not an integer."""
    if frame.empty:
        return False
    means = frame.groupby(list(ROUND_COLUMNS), sort=False)["n_clusters"].mean().to_numpy(dtype=np.float64)
    means = means[np.isfinite(means)]
    return bool(np.any(means != np.round(means)))


@dataclass(frozen=True)
class WhatifPanel:
    """One run's what-if ARI: ``ari[c, r]`` of clusterer ``clusterers[c]`` at 0-based round ``rounds[r]``
    (NaN = not replayed / failed), the run's clustering round and each clusterer's earliest separable round."""

    clusterers: Sequence[str]
    rounds: np.ndarray
    ari: np.ndarray
    trigger_round: int | None
    earliest: Mapping[str, int | None]


def whatif_heatmap_figure(panels: Mapping[str, WhatifPanel], title: str) -> plt.Figure:
    """One heatmap per key (e.g. the algorithm): rows = clusterers, columns = rounds (1-based labels),
    colour = ARI in [0, 1] with the value printed; red frame = the run's clustering round (OCFL's trigger),
    white dot = the clusterer's earliest round with ARI ≥ 0.99 ("earliest separable round")."""
    width = max((len(p.rounds) for p in panels.values()), default=1)
    height = max((len(p.clusterers) for p in panels.values()), default=1)
    fig, axes = _panel_axes(len(panels), (1.2 + 0.45 * width, 0.8 + 0.3 * height))
    image = None
    for ax, (name, panel) in zip(axes, panels.items()):
        image = ax.imshow(np.ma.masked_invalid(panel.ari), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        for (c, r), value in np.ndenumerate(panel.ari):
            if np.isfinite(value):
                ax.text(r, c, f"{value:.2f}", ha="center", va="center", fontsize=5,
                        color="black" if value > 0.6 else "white")
        ax.set_xticks(range(len(panel.rounds)), [str(int(r) + 1) for r in panel.rounds], fontsize=7)
        ax.set_yticks(range(len(panel.clusterers)), list(panel.clusterers), fontsize=7)
        rounds = [int(r) for r in panel.rounds]
        if panel.trigger_round is not None and panel.trigger_round in rounds:
            x = rounds.index(panel.trigger_round)
            ax.add_patch(plt.Rectangle((x - 0.5, -0.5), 1, len(panel.clusterers), fill=False, ec="red", lw=1.5))
        for c, clusterer in enumerate(panel.clusterers):
            first = panel.earliest.get(clusterer)
            if first is not None and first in rounds:
                ax.plot(rounds.index(first) - 0.32, c, marker="o", ms=3, color="white", mec="black", mew=0.5)
        trigger = "never" if panel.trigger_round is None else str(panel.trigger_round + 1)
        ax.set_title(f"{name} (clustered at round {trigger})", fontsize=8)
        ax.set_xlabel("round", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes[:len(panels)], shrink=0.8, label="ARI")
    fig.suptitle(title)
    return fig
