"""Report pieces for late-joining clients (000 §6.2): a table and a figure from the runs' late_clients.parquet
(cflcore/evaluate/late_clients.py).

* ``tables/table_late_clients.{csv,md,tex}``: per dataset × clients × split × algorithm, the attachment
  accuracy (share of late clients put in the cluster of their true cluster's founding members), the joining
  round (1-based, as Table 2), and the PF1 of late and founding clients over the same rounds (from the joining
  round on) and in the last round; mean ± std over seeds.
* ``figures/late_clients/<dataset>_n<clients>.{png,pdf}``: per split, PF1 per round of founding (solid) and
  late (dashed) clients, mean over seeds; the joining round dotted. Late clients have no PF1 before it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .. import filenames as fn  # noqa: E402
from ..errors import CflError  # noqa: E402
from ..io import parquet_metadata, read_parquet  # noqa: E402
from ..paper_sources import declared_output_captions  # noqa: E402
from . import figures as fg  # noqa: E402
from . import tables as tb  # noqa: E402
from .palette import style_map  # noqa: E402
from .runs import RunSpec  # noqa: E402

STEM = "table_late_clients"
KIND = "late_clients"
METRICS = ["attach_accuracy", "join_round", "pf1_late", "pf1_founding", "pf1_final_late", "pf1_final_founding",
           "gf1_late", "gf1_founding", "n_late", "n_unfounded"]
WIDE = ["attach_accuracy", "join_round", "pf1_late", "pf1_founding", "pf1_final_late", "pf1_final_founding"]


def load_late_frames(specs: Sequence[RunSpec]) -> list[tuple[RunSpec, pd.DataFrame]]:
    """The readable, non-failed late_clients.parquet of each run (others are skipped: the report lists
    missing runs elsewhere)."""
    out = []
    for spec in specs:
        path = Path(spec.eval_dir) / fn.LATE_CLIENTS
        if not path.exists():
            continue
        try:
            if parquet_metadata(path).get("status") == "failed":
                continue
            frame = read_parquet(path).to_pandas()
        except CflError:
            continue
        if len(frame):
            out.append((spec, frame))
    return out


def late_run_summaries(frames: Sequence[tuple[RunSpec, pd.DataFrame]]) -> pd.DataFrame:
    """One row per run: identity and :func:`cflcore.evaluate.late_clients.late_summary` (join round 1-based)."""
    from ..evaluate.late_clients import late_summary

    rows = []
    for spec, frame in frames:
        summary = late_summary(frame)
        join = summary["join_round"]
        rows.append({"dataset": spec.dataset, "clients": spec.clients, "split": spec.split, "seed": spec.seed,
                     "algorithm": spec.algorithm, **summary, "join_round": None if join is None else join + 1,
                     "ever_clustered": join is not None})
    frame = pd.DataFrame(rows, columns=[*tb.GROUP_KEYS, "seed", *METRICS, "ever_clustered"])
    for metric in METRICS:
        frame[metric] = pd.to_numeric(frame[metric], errors="coerce").astype("float64")
    return frame


def late_table(specs: Sequence[RunSpec], frames: Sequence[tuple[RunSpec, pd.DataFrame]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(tidy: mean/std over seeds of every metric per expected group, wide: the paper-style layout)."""
    summary = late_run_summaries(frames)
    groups = tb.expected_groups(specs)
    tidy = tb.aggregate_seeds(summary, groups, METRICS) if len(groups) else pd.DataFrame(columns=tb.GROUP_KEYS)
    wide = tb.wide_layout(tidy, WIDE, dash_unclustered=False) if len(tidy) else pd.DataFrame(columns=["dataset", "clients", "algorithm"])
    return tidy, wide


def pf1_by_round(frames: Sequence[tuple[RunSpec, pd.DataFrame]]) -> pd.DataFrame:
    """Tidy ``round`` rows of every run: dataset, clients, split, algorithm, seed, round, role, pf1."""
    parts = []
    for spec, frame in frames:
        rounds = frame[frame["kind"] == "round"][["round", "role", "pf1"]].copy()
        rounds = rounds.assign(dataset=spec.dataset, clients=spec.clients, split=spec.split,
                               algorithm=spec.algorithm, seed=spec.seed)
        parts.append(rounds)
    if not parts:
        return pd.DataFrame(columns=["dataset", "clients", "split", "algorithm", "seed", "round", "role", "pf1"])
    out = pd.concat(parts, ignore_index=True)
    out["pf1"] = pd.to_numeric(out["pf1"], errors="coerce").astype("float64")
    out["round"] = out["round"].astype("int64")
    return out


def late_figure(curves: pd.DataFrame, summary: pd.DataFrame, title: str) -> plt.Figure:
    """One panel per split: founding (solid) and late (dashed) PF1 per round, joining round dotted."""
    splits = list(dict.fromkeys(curves["split"]))
    fig, axes = plt.subplots(1, len(splits), figsize=(4.2 * len(splits), 3.2), squeeze=False, sharey=True)
    styles = style_map(curves["algorithm"])  # one colour per algorithm; the line style is the role
    for ax, split in zip(axes[0], splits):
        part = curves[curves["split"] == split]
        for algorithm in dict.fromkeys(part["algorithm"]):
            colour, marker = styles[algorithm].color, styles[algorithm].marker
            runs = summary[(summary["split"] == split) & (summary["algorithm"] == algorithm)]
            accuracy = runs["attach_accuracy"].mean()
            for role, style in (("founding", "-"), ("late", "--")):
                mean = part[(part["algorithm"] == algorithm) & (part["role"] == role)].groupby("round")["pf1"].mean()
                label = f"{algorithm} {role}" + (f" (attach acc. {accuracy:.2f})" if role == "late" and np.isfinite(accuracy) else "")
                ax.plot(mean.index, mean.to_numpy(), style, color=colour, marker=marker, ms=3, label=label)
            for join in runs["join_round"].dropna().unique():
                ax.axvline(join - 1, color=colour, ls=":", lw=1)
        ax.set_title(split, fontsize=9)
        ax.set_xlabel("round (0-based)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("PF1 (mean over clients)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def write_late_clients(specs: Sequence[RunSpec], out_dir: Path, entry: Any) -> list[dict[str, Any]]:
    """Write the table (always, maybe empty) and one figure per dataset × clients; return index entries
    (``entry(kind, path, dataset, clients)`` makes one)."""
    out_dir = Path(out_dir)
    fig_dir = out_dir / "figures" / KIND
    fig_dir.mkdir(parents=True, exist_ok=True)

    frames = load_late_frames(specs)
    tidy, wide = late_table(specs, frames)
    entries = [entry(STEM, p, None, None) for p in tb.write_table(tidy, wide, STEM, out_dir / "tables",
                                                                      declared_output_captions()[STEM])]
    curves, summary = pf1_by_round(frames), late_run_summaries(frames)
    for (dataset, clients), part in curves.groupby(["dataset", "clients"], sort=False):
        fig = late_figure(part, summary[(summary["dataset"] == dataset) & (summary["clients"] == clients)],
                          f"Late-joining clients: {dataset}, {clients} clients")
        entries += [entry(KIND, p, dataset, int(clients)) for p in fg.save_figure(fig, fig_dir / f"{dataset}_n{clients}")]
    return entries
