"""Accuracy against the megabytes a method sent (issue 69 item 3; docs/architecture.md §12): per dataset × clients ×
split, one line per method, the clients' mean local accuracy after each round (the run's personalisation.parquet,
``local_acc``) against the cumulative megabytes sent down and up by then (traffic.parquet, what the method declares,
``Strategy.traffic``), both means over the seeds. A run without traffic.parquet (written before it existed) is left
out."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

MEGABYTE = 1e6


def accuracy_per_megabyte(loaded: Sequence[Any]) -> pd.DataFrame:
    """One row per run × round: dataset, clients, split, algorithm, seed, round, megabytes (cumulative, down + up) and
    local_acc (null in rounds without evaluation)."""
    frames = []
    for run in loaded:
        traffic = getattr(run, "traffic", None)
        if traffic is None or traffic.empty:
            continue
        per_round = run.personalisation[run.personalisation["kind"] == "round"][["round", "local_acc"]]
        sent = traffic.sort_values("round")
        frame = pd.DataFrame({"round": sent["round"].astype(int),
                              "megabytes": (sent["bytes_down"] + sent["bytes_up"]).cumsum() / MEGABYTE})
        frame = frame.merge(per_round.astype({"round": int}), on="round", how="left")
        s = run.spec
        frames.append(frame.assign(dataset=s.dataset, clients=s.clients, split=s.split, algorithm=s.algorithm,
                                   seed=s.seed))
    columns = ["dataset", "clients", "split", "algorithm", "seed", "round", "megabytes", "local_acc"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def accuracy_per_megabyte_figure(curves: pd.DataFrame, title: str) -> plt.Figure:
    """Mean local accuracy against mean cumulative megabytes, one line per algorithm (means over seeds per round)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for algorithm, rows in curves.groupby("algorithm", sort=False):
        mean = rows.groupby("round")[["megabytes", "local_acc"]].mean().dropna()
        seeds = rows["seed"].nunique()
        ax.plot(mean["megabytes"], mean["local_acc"], marker=".", lw=1.2, label=f"{algorithm} ({seeds} seed{'' if seeds == 1 else 's'})")
    ax.set_xlabel("megabytes sent, cumulative (down + up)")
    ax.set_ylabel("mean local accuracy")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return fig


def write_traffic_figures(loaded: Sequence[Any], out_dir: Path, entry: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``accuracy_per_megabyte`` figures, ``<dataset>_n<clients>_<split>``; their index entries."""
    from .figures import save_figure

    fig_dir = Path(out_dir) / "figures" / "accuracy_per_megabyte"
    fig_dir.mkdir(parents=True, exist_ok=True)  # a declared directory() output
    table = accuracy_per_megabyte(loaded)
    entries: list[dict[str, Any]] = []
    for (dataset, clients, split), curves in table.groupby(["dataset", "clients", "split"], sort=False):
        fig = accuracy_per_megabyte_figure(curves, f"Accuracy against megabytes sent: {dataset}, {clients} clients, {split}")
        entries.extend(entry("accuracy_per_megabyte", p, dataset, int(clients))
                       for p in save_figure(fig, fig_dir / f"{dataset}_n{clients}_{split}"))
    return entries
