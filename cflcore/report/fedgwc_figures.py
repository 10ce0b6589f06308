"""004's FedGWC figures from a run's outputs (pure functions: frames / arrays in, matplotlib figures out).

* :func:`accuracy_rounds_figure` — 004 Fig. 2: mean client (balanced) accuracy per round for one or more
  runs, FedGWC's split rounds marked by dotted vertical lines in the run's colour.
* :func:`embedding_figure` — 004 Fig. 3: the clients in the 2-D spectral embedding of each split decision's
  affinity W (one panel per decision, in order), coloured by Alg. 2's outcome, marker = ground truth.
* :func:`matrices_figure` — 004 Figs. 5, 6 and 8: heatmaps of the interaction matrix P and of the affinity
  W of one decision, clients ordered by ground-truth group (white lines between groups), and the embedding.
* :func:`class_distribution_figure` — 004 Fig. 7: per final cluster, the share of each class in its clients'
  training data, with the number of clients per cluster.

The matrices come from FedGWC's ``gwc_snapshots`` diagnostic in ``server.parquet`` (one JSON cell per round
where Alg. 2 decided, or every ``snapshot_every`` rounds; see cflcore.strategies.fedgwc); parse it with
:func:`matrix_snapshots`. Rounds are drawn 1-based, as in the other report figures. Wiring into the report
(which runs, which panels, file names) is the report's job; nothing here reads files.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .. import filenames as fn  # noqa: E402
from .figures import _finish  # noqa: E402
from .runs import diagnostics_mapping  # noqa: E402

MARKERS = ("o", "+", "x", "^", "s", "v", "D", "*")


@dataclass(frozen=True)
class MatrixSnapshot:
    """One cluster's FedGWC state at one round: global client ids of its members, the interaction matrix
    P restricted to them (eq. 3), the affinity W (eq. 4), the 2-D spectral embedding of W, Alg. 2's labels
    (all 0 when it did not split), the DB scores of n = 2…n_max and whether Alg. 2 decided that round."""

    round: int
    cluster: int
    members: np.ndarray
    interaction: np.ndarray
    affinity: np.ndarray
    embedding: np.ndarray
    labels: np.ndarray
    davies_bouldin: tuple[float | None, ...]
    decided: bool


def matrix_snapshots(server: pd.DataFrame, column: str = "gwc_snapshots") -> list[MatrixSnapshot]:
    """Every snapshot of a FedGWC run's ``server.parquet`` frame, by (round, cluster)."""
    if column not in server.columns:
        return []
    out = []
    for rnd, value in zip(server["round"], server[column]):
        for cluster, snap in sorted(diagnostics_mapping(value).items(), key=lambda kv: int(kv[0])):
            out.append(MatrixSnapshot(
                int(rnd), int(cluster), np.asarray(snap["members"], dtype=np.int64),
                np.asarray(snap["P"], dtype=np.float64), np.asarray(snap["W"], dtype=np.float64),
                np.asarray(snap["embedding"], dtype=np.float64).reshape(-1, 2),
                np.asarray(snap["labels"], dtype=np.int64),
                tuple(None if v is None else float(v) for v in snap["davies_bouldin"]), bool(snap["decided"])))
    return sorted(out, key=lambda s: (s.round, s.cluster))


def split_rounds(server: pd.DataFrame) -> list[int]:
    """0-based rounds where FedGWC split a cluster (``n_splits`` > 0)."""
    if "n_splits" not in server.columns:
        return []
    n = pd.to_numeric(server["n_splits"], errors="coerce").fillna(0).to_numpy()
    return [int(r) for r, k in zip(server["round"], n) if k > 0]


def accuracy_by_round(history: pd.DataFrame, metric: str = "local_bacc") -> pd.DataFrame:
    """Mean of ``metric`` over clients per evaluated round (rows with a value): columns round, value."""
    rows = history.dropna(subset=[metric])
    return rows.groupby("round", as_index=False)[metric].mean().rename(columns={metric: "value"})


def accuracy_rounds_figure(curves: Mapping[str, pd.DataFrame], splits: Mapping[str, Sequence[int]],
                           title: str, ylabel: str = "balanced accuracy") -> plt.Figure:
    """004 Fig. 2: one line per run (label -> frame of round, value), its split rounds as dotted lines."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for label, frame in curves.items():
        (line,) = ax.plot(frame["round"].to_numpy() + 1, frame["value"].to_numpy(), label=label, lw=1.4)
        for i, r in enumerate(splits.get(label, ())):
            ax.axvline(r + 1, color=line.get_color(), ls=":", lw=1.2, label=f"{label}: split" if i == 0 else None)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return _finish(fig, title)


def _group_order(truth: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Indices sorting clients by ground-truth group (stable), and the positions where a new group starts."""
    order = np.argsort(truth, kind="stable")
    sorted_truth = truth[order]
    return order, [i for i in range(1, len(order)) if sorted_truth[i] != sorted_truth[i - 1]]


def _scatter(ax: plt.Axes, snap: MatrixSnapshot, truth: np.ndarray, names: Sequence[str] | None) -> None:
    cmap = plt.get_cmap("tab10")
    for g in np.unique(truth):
        for lab in np.unique(snap.labels):
            m = (truth == g) & (snap.labels == lab)
            if m.any():
                ax.scatter(snap.embedding[m, 0], snap.embedding[m, 1], s=22, color=cmap(int(lab) % 10),
                           marker=MARKERS[int(g) % len(MARKERS)],
                           label=f"{names[int(g)] if names else g} → {int(lab)}")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=6, loc="best", title="truth → Alg. 2", title_fontsize=6)


def _db_text(snap: MatrixSnapshot) -> str:
    scores = ", ".join("∞" if v is None else f"{v:.2f}" for v in snap.davies_bouldin)
    return f"DB(n=2…): {scores}"


def embedding_figure(snapshots: Sequence[MatrixSnapshot], truth: np.ndarray, title: str,
                     names: Sequence[str] | None = None) -> plt.Figure:
    """004 Fig. 3: one panel per snapshot (e.g. each decision of Alg. 2), the clients of the split cluster
    in W's 2-D spectral embedding; colour = Alg. 2's group, marker = ground-truth group of ``truth``
    (indexed by global client id)."""
    truth = np.asarray(truth)
    n = max(len(snapshots), 1)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.3 * rows), squeeze=False)
    for ax in axes.flat[len(snapshots):]:
        ax.axis("off")
    for ax, snap in zip(axes.flat, snapshots):
        _scatter(ax, snap, truth[snap.members], names)
        ax.set_title(f"round {snap.round + 1}, cluster {snap.cluster} ({len(snap.members)} clients)\n{_db_text(snap)}",
                     fontsize=7)
    return _finish(fig, title)


def matrices_figure(snapshot: MatrixSnapshot, truth: np.ndarray, title: str,
                    names: Sequence[str] | None = None) -> plt.Figure:
    """004 Figs. 5, 6, 8: P (left) and W (centre) of one snapshot with the clients ordered by their
    ground-truth group (white lines between groups), and W's spectral embedding (right)."""
    sub_truth = np.asarray(truth)[snapshot.members]
    order, cuts = _group_order(sub_truth)
    fig, axes = plt.subplots(1, 3, figsize=(11.5, 3.6))
    for ax, matrix, name in ((axes[0], snapshot.interaction, "interaction P (eq. 3)"),
                             (axes[1], snapshot.affinity, "affinity W (eq. 4)")):
        image = ax.imshow(matrix[np.ix_(order, order)], cmap="viridis", interpolation="nearest")
        for c in cuts:
            ax.axhline(c - 0.5, color="white", lw=0.8)
            ax.axvline(c - 0.5, color="white", lw=0.8)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("client (by true group)", fontsize=7)
        ax.tick_params(labelsize=6)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    _scatter(axes[2], snapshot, sub_truth, names)
    axes[2].set_title(f"spectral embedding of W\n{_db_text(snapshot)}", fontsize=8)
    return _finish(fig, f"{title} — round {snapshot.round + 1}, cluster {snapshot.cluster}")


def class_distribution_figure(label_histograms: np.ndarray, labels: np.ndarray, title: str,
                              class_names: Sequence[str] | None = None) -> plt.Figure:
    """004 Fig. 7: per final cluster (``labels``: client -> cluster) the class shares of its clients'
    pooled training data (``label_histograms``: clients × classes counts); one bar group per cluster."""
    hist = np.asarray(label_histograms, dtype=np.float64)
    labels = np.asarray(labels)
    clusters = np.unique(labels)
    n_classes = hist.shape[1]
    width = 0.8 / len(clusters)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * n_classes * max(1, len(clusters) / 2)), 3.6))
    x = np.arange(n_classes)
    for i, c in enumerate(clusters):
        counts = hist[labels == c].sum(axis=0)
        share = counts / max(counts.sum(), 1.0)
        ax.bar(x - 0.4 + width * (i + 0.5), share, width, label=f"cluster {int(c)} ({int(np.sum(labels == c))} clients)")
    ax.set_xticks(x)
    ax.set_xticklabels(list(class_names) if class_names is not None else [str(i) for i in x], fontsize=7,
                       rotation=90 if n_classes > 20 else 0)
    ax.set_xlabel("class")
    ax.set_ylabel("share of the cluster's training samples")
    ax.legend(fontsize=7)
    return _finish(fig, title)


def write_fedgwc_figures(loaded: Sequence[Any], out_dir: Path, entry: Any) -> list[dict[str, Any]]:
    """004's figures into ``out_dir/figures/fedgwc/`` for every FedGWC run of the first seed of each scenario
    group whose ``server.parquet`` records ``gwc_snapshots``: per run the P and W heatmaps and embedding of the
    last split decision (Figs. 5, 6, 8: ``_matrices``), the embedding at every recorded snapshot (Fig. 3:
    ``_embedding``) and the final clusters' class shares (Fig. 7: ``_classes``); per dataset × clients × split,
    balanced accuracy per round of the FedGWC runs with their split rounds marked (Fig. 2: ``_accuracy``).
    ``entry(kind, path, dataset, clients)`` makes an index entry."""
    from .figures import save_figure

    fig_dir = Path(out_dir) / "figures" / "fedgwc"
    fig_dir.mkdir(parents=True, exist_ok=True)  # a declared directory() output
    entries: list[dict[str, Any]] = []
    first_seed: dict[tuple, int] = {}
    for run in loaded:
        key = (run.spec.dataset, run.spec.clients, run.spec.split)
        first_seed[key] = min(first_seed.get(key, run.spec.seed), run.spec.seed)
    curves: dict[tuple, dict[str, pd.DataFrame]] = {}
    marks: dict[tuple, dict[str, list[int]]] = {}
    for run in loaded:
        s = run.spec
        server = run.server
        if server is None or "gwc_snapshots" not in server or s.seed != first_seed[(s.dataset, s.clients, s.split)]:
            continue
        snaps = matrix_snapshots(server)
        truth = np.asarray(run.manifest.get("cluster_of_client") or [])
        stem = f"{s.dataset}_n{s.clients}_{s.split}_s{s.seed}_{s.algorithm}"

        def save(fig: plt.Figure, suffix: str, s: Any = s, stem: str = stem) -> None:
            entries.extend(entry("fedgwc", p, s.dataset, s.clients) for p in save_figure(fig, fig_dir / f"{stem}_{suffix}"))

        if snaps and truth.size:
            decided = [snap for snap in snaps if snap.decided] or snaps
            save(matrices_figure(decided[-1], truth, f"P and W, round {decided[-1].round + 1}: {stem}"), "matrices")
            save(embedding_figure(snaps, truth, f"Spectral embedding per snapshot: {stem}"), "embedding")
        history_path = Path(s.run_dir) / fn.HISTORY
        hist = run.manifest.get("label_histograms_train")
        if history_path.is_file() and hist is not None:
            history = pd.read_parquet(history_path, columns=["round", "client", "cluster", "local_bacc"])
            last = history[history["round"] == history["round"].max()].sort_values("client")
            save(class_distribution_figure(np.asarray(hist), last["cluster"].to_numpy(), f"Class shares per final cluster: {stem}"),
                 "classes")
            group = (s.dataset, s.clients, s.split)
            curves.setdefault(group, {})[s.algorithm] = accuracy_by_round(history, "local_bacc")
            marks.setdefault(group, {})[s.algorithm] = split_rounds(server)
    for (dataset, clients, split), by_algorithm in curves.items():
        fig = accuracy_rounds_figure(by_algorithm, marks[(dataset, clients, split)],
                                     f"Balanced accuracy per round, split rounds dotted: {dataset}, {clients} clients, {split}, "
                                     f"seed {first_seed[(dataset, clients, split)]}")
        entries.extend(entry("fedgwc", p, dataset, clients)
                       for p in save_figure(fig, fig_dir / f"{dataset}_n{clients}_{split}_accuracy"))
    return entries
