"""The explain stage's tables as the report reads them: names, statistics and per-run summaries, without torch.

The report reads ``insdel.parquet`` / ``saliency.npz`` (written by :mod:`cflcore.explain.framework`) and must not
import the torch-based stage to do so (docs/architecture.md §9). This module holds what both sides share: the
evaluation modes, the scored metrics and their statistics, :func:`run_summary` (000 footnote 12) and
:func:`display_map` (how a raw attribution map is drawn). It imports numpy and pandas only.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

MODES: tuple[str, ...] = ("in_cluster", "out_cluster", "orchestrator")
TARGETS: tuple[str, ...] = ("predicted", "label")
STATISTICS: tuple[str, ...] = ("mean", "median", "var", "std", "p05", "p10", "p25", "p50", "p75", "p90", "p95")
PERCENTILES: dict[str, float] = {"p05": 5, "p10": 10, "p25": 25, "p50": 50, "p75": 75, "p90": 90, "p95": 95}
METRICS: tuple[str, ...] = ("insertion", "deletion")
BASELINES: tuple[str, ...] = ("insertion_random", "deletion_random")  # the same metrics, random pixel order
SCORED: tuple[str, ...] = METRICS + BASELINES


def run_summary(insdel: pd.DataFrame) -> pd.DataFrame:
    """Per mode: the mean over clusters of the per-cluster mean AUC (000 footnote 12); null clusters skipped."""
    rows = []
    for mode in MODES:
        part = insdel[insdel["mode"] == mode] if len(insdel) else insdel
        row = {"mode": mode, "n_clusters": int(len(part)),
               "n_clusters_evaluated": int(part["insertion_mean"].notna().sum()) if len(part) else 0}
        for metric in SCORED:
            col = f"{metric}_mean"
            vals = part[col].dropna() if len(part) and col in part else pd.Series(dtype=float)
            row[f"{metric}_auc"] = float(vals.mean()) if len(vals) else None
        rows.append(row)
    return pd.DataFrame(rows)


def display_map(maps: np.ndarray) -> np.ndarray:
    """Maps (B, H, W) for plotting: clipped at zero and scaled to [0, 1] per image (Grad-CAM's ReLU + min-max)."""
    pos = np.clip(maps, 0, None).reshape(len(maps), -1)
    top = np.clip(pos.max(axis=1, keepdims=True), 1e-12, None).astype(pos.dtype)
    return (pos / top).reshape(maps.shape)
