"""Figures of the aggregate report (matplotlib, Agg backend; each saved as PNG and PDF, atomically).

* :func:`learning_gap_figure` — 000 Fig. 2: per algorithm a segment from GF1 (bottom) to PF1 (top);
  its length is the learning gap.
* :func:`temperature_band_figure` — 000 Figs. 3–4: every run's temperature (000 Def. 7) min–max
  normalised to [0, 1], thin lines, with the mean and a 95 % t-confidence band across runs; one panel
  per key (the report keys them by clients × algorithm), the median clustering round dotted red.
* :func:`temperature_runs_figure` — 000 Figs. 10–14: per run the normalised temperature, the clustering
  round (red dotted) and the pre-clustering local minimum (grey dotted, only when the curve descended first).
* :func:`score_progress_figure` — 001 Fig. 1: a clustering score (ARI by default) per round.
* :func:`n_clusters_figure` — number of clusters per round.
* :func:`whatif_heatmap_figure` — issue 12 §1: per run a clusterer × round heatmap of the ARI of every
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
    """Segments GF1 → PF1 per algorithm (x) and split (offset and colour); columns pf1_mean, gf1_mean."""
    algorithms = list(dict.fromkeys(personalisation["algorithm"]))
    splits = list(dict.fromkeys(personalisation["split"]))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(algorithms) + 2), 3.6))
    width = 0.7 / max(len(splits), 1)
    colours = plt.get_cmap("tab10")
    for s, split in enumerate(splits):
        rows = personalisation[personalisation["split"] == split]
        for _, row in rows.iterrows():
            x = algorithms.index(row["algorithm"]) - 0.35 + width * (s + 0.5)
            ax.plot([x, x], [row["gf1_mean"], row["pf1_mean"]], color=colours(s), lw=3, solid_capstyle="butt",
                    label=split if row["algorithm"] == rows["algorithm"].iloc[0] else None)
            ax.plot([x], [row["pf1_mean"]], marker="_", color="black", ms=10)
            ax.plot([x], [row["gf1_mean"]], marker="_", color="grey", ms=10)
    ax.set_xticks(range(len(algorithms)), algorithms, rotation=30, ha="right")
    ax.set_ylabel("F1 (bottom: GF1, top: PF1)")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    if splits:
        ax.legend(fontsize=7, loc="lower right")
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
    for ax, (name, curves) in zip(axes, panels.items()):
        for curve in curves:
            line, = ax.plot(curve.rounds + 1, curve.values, lw=1, label=curve.label)
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


def _series_figure(panels: Mapping[str, Sequence[Curve]], title: str, ylabel: str, ylim: tuple | None) -> plt.Figure:
    fig, axes = _panel_axes(len(panels), (4, 3))
    for ax, (name, curves) in zip(axes, panels.items()):
        for curve in curves:
            ax.plot(curve.rounds + 1, curve.values, lw=1.2, label=curve.label, drawstyle="steps-post")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("round")
        ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        if curves:
            ax.legend(fontsize=6)
    return _finish(fig, title)


def score_progress_figure(panels: Mapping[str, Sequence[Curve]], title: str, score: str = "ARI") -> plt.Figure:
    """A clustering score per round, one line per algorithm (001 Fig. 1)."""
    return _series_figure(panels, title, score, (-0.05, 1.05))


def n_clusters_figure(panels: Mapping[str, Sequence[Curve]], title: str) -> plt.Figure:
    """Number of clusters per round, one line per algorithm."""
    return _series_figure(panels, title, "clusters", None)


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
