"""The ``evaluate`` stage: clustering and personalisation scores of one run (docs/architecture.md §8, 000 §4.3–4.4).

(Evaluation is a stage of its own, so a report edit re-scores no run.)

Outputs (``results/eval/{scenario}/{algorithm}/``, written atomically):

``clustering.parquet``: rows with ``kind`` = ``round`` (one per round, 0-based ``round`` as in
history.parquet), ``mean`` (mean over the first ``score_rounds`` rounds, or all; pre-clustering rounds
included, as published; undefined internal scores are skipped by the mean) and ``final`` (the last
round). Score columns: ``ari`` (the papers' RAND), ``rand``, ``ami``, ``completeness``, ``homogeneity``
(= the published COM), ``v_measure``, ``silhouette`` / ``davies_bouldin`` (update vectors of the round's
sampled clients, from gram.parquet), ``was`` / ``wadb`` (004 §6, all clients), ``n_clusters``,
``n_sampled`` (float64: the ``mean`` row holds their mean). Summary columns (null on ``round`` rows): ``clustering_round``, ``first_clustering_round``,
``ever_clustered``, ``n_rounds_scored``. Last, ``silhouette_method``: the silhouette of the round's sampled
clients in the space the method clusters in, its own recorded distance matrix (divergence.parquet, scikit-learn
``silhouette_score(metric="precomputed")``): Louvain CFL's trusted distance (002 eq. 2, the space 002 scores its
silhouette in), OCFL's and BCL's Γ (000 Def. 6; OCFL records it until it clusters, BCL at its clustering round);
null for rounds and methods without one (BNC, SCL, FedGWC, IFCA record none) and when undefined (one cluster).

A split with a drift schedule (cflcore.data.drift): every round is scored against that round's ground truth, and
the file gains ``switch`` rows, one per switch (``round``: its first round) with :data:`DRIFT_COLUMNS` appended
(the re-clustering lag, cflcore.metrics.drift); a static split's file is as before.

Round conventions (1-based, as 000 Table 2; reference/paper_tables_notes.md §3):
* ``clustering_round`` = 1 + the 0-based round after which the partition last changed (the partition
  before round 0 is everyone in one cluster); for one-shot methods this is the clustering round, for SCL
  the last split, and in both cases it equals the published "first round whose label row equals the final
  row". Null ("–") when the partition never changed.
* ``first_clustering_round`` = 1 + the first 0-based round with more than one cluster (docs/architecture.md §8).
Partitions are compared up to relabelling.

``personalisation.parquet``: ``kind`` = ``round`` (client means per evaluated round) and ``mean`` (over
all evaluated clients and rounds) and ``final``; columns ``pf1``, ``gf1``, ``learning_gap``,
``local_bacc``, ``orch_bacc``, ``local_acc``, ``orch_acc``, ``n_evaluations``, and the method's global model
(history.parquet ``global_*``, 002 Fig. 6; null without one): ``global_f1`` / ``global_acc`` (on the clients'
local test sets: compare with ``pf1`` / ``local_acc``), ``global_orch_f1`` / ``global_orch_acc`` (orchestrator set),
and ``local_bacc_weighted`` (004 App. F: client balanced accuracies weighted by local test-set size, the
manifest's ``n_test``).
"""
from __future__ import annotations

from dataclasses import dataclass, field as dataclass_field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .. import filenames as fn
from ..data.drift import DRIFT_KEY, groups_at_round, switch_spans
from ..data.transforms import swapped_histogram
from ..errors import DataError
from ..io import read_json, read_parquet, write_parquet
from ..metrics import (
    EXTERNAL_SCORES,
    davies_bouldin_from_gram,
    external_scores,
    personalisation_by_round,
    personalisation_scores,
    silhouette_authors_from_distances,
    silhouette_from_distances,
    silhouette_from_gram,
    wasserstein_davies_bouldin,
    wasserstein_silhouette,
)
from ..metrics.drift import reclustering_lag

SCORE_COLUMNS = (
    "ari", "rand", "ami", "completeness", "homogeneity", "v_measure",
    "silhouette", "davies_bouldin", "was", "wadb", "n_clusters", "n_sampled",
)
METHOD_SCORE_COLUMNS = ("silhouette_method", "silhouette_authors")
"""Scores on the method's own matrix (appended: older columns keep their place): sklearn's silhouette and 002's
authors' variant (cflcore.metrics.internal.silhouette_authors_from_distances)."""
SUMMARY_COLUMNS = ("clustering_round", "first_clustering_round", "ever_clustered", "n_rounds_scored")
CLUSTERING_COLUMNS = ["kind", "round", *SCORE_COLUMNS, *SUMMARY_COLUMNS, *METHOD_SCORE_COLUMNS]
PERSONALISATION_COLUMNS = ["kind", "round", "pf1", "gf1", "learning_gap", "local_bacc", "orch_bacc", "local_acc",
                           "orch_acc", "n_evaluations", "global_f1", "global_acc", "global_orch_f1", "global_orch_acc",
                           "local_bacc_weighted"]
HISTORY_REQUIRED = ("round", "client", "cluster", "sampled", "local_f1", "orch_f1")
SWITCH_KIND = "switch"
SWITCH_LAST_ROUND, PRE_SWITCH_ARI, RECLUSTERING_LAG = DRIFT_COLUMNS = ("switch_last_round", "pre_switch_ari",
                                                                      "reclustering_lag")
"""Appended where the split has a drift schedule (cflcore.data.drift), on its ``switch`` rows (one per switch,
``round`` its first round): its last round, the ARI after the round before it, and the re-clustering lag
(cflcore.metrics.drift; null: never). A static split's file has none of them."""


@dataclass(frozen=True)
class GroundTruth:
    """The split's ground truth (manifest.json): true cluster and class counts of every client."""

    cluster_of_client: np.ndarray
    label_histograms: np.ndarray
    n_test: np.ndarray | None = None  # local test-set size per client (004 App. F's weights)
    has_groups: bool = True  # False: a standard partition (shards, dirichlet) with no groups; external scores n/a
    changes: tuple[tuple[int, int, int], ...] = ()  # a drift schedule's [round, client, group] (cflcore.data.drift)
    schedule: tuple[dict[str, Any], ...] = ()  # its events
    group_swaps: tuple[tuple[tuple[int, int], ...], ...] = ()  # each group's label swaps (a label-swap split's)
    drawn_histograms: Mapping[tuple[int, int], np.ndarray] = dataclass_field(default_factory=dict)
    """(client, group) -> the train label histogram of the sample a class-distribution split drew for the client in
    that group (manifest ``drift.samples``, cflcore.data.drift)."""

    @property
    def n_clients(self) -> int:
        return int(self.cluster_of_client.size)

    def clusters_at(self, rnd: int) -> np.ndarray:
        """Every client's ground-truth group in round ``rnd`` (static splits: ``cluster_of_client``)."""
        return groups_at_round(self.cluster_of_client, self.changes, rnd) if self.changes else self.cluster_of_client

    def histograms_at(self, rnd: int) -> np.ndarray:
        """Every client's label histogram in round ``rnd``: a client that drifted into a group that swaps labels
        counts its labels under that group's swaps, not its home group's; one that drifted into a class distribution
        counts the sample drawn for it there (static splits: ``label_histograms``)."""
        if not self.changes or not (any(self.group_swaps) or self.drawn_histograms):
            return self.label_histograms
        out = self.label_histograms.copy()
        groups = self.clusters_at(rnd)
        for k in np.flatnonzero(groups != self.cluster_of_client):
            if (int(k), int(groups[k])) in self.drawn_histograms:
                out[k] = self.drawn_histograms[(int(k), int(groups[k]))]
                continue
            own = reversed(self.group_swaps[int(self.cluster_of_client[k])])  # undo the home group's swaps
            unswapped = swapped_histogram(out[k].tolist(), [tuple(p) for p in own])
            out[k] = swapped_histogram(unswapped, self.group_swaps[int(groups[k])])
        return out


@dataclass(frozen=True)
class RoundPartition:
    """The partition of all clients after one round's aggregation, and who was sampled."""

    round: int
    labels: np.ndarray
    sampled: np.ndarray  # sorted global ids
    present: np.ndarray | None = None  # bool mask of clients in the federation (None = all)

    def members(self) -> np.ndarray:
        """The clients the partition is scored on: those present in the federation this round. A client
        that has not joined yet (000 §6.2, ``late_clients``) has no model (``model_key`` null in history)
        and is no cluster's member, so it neither counts as an extra cluster nor changes the partition."""
        return np.ones(self.labels.size, dtype=bool) if self.present is None else self.present


def load_ground_truth(manifest_path: str | Path) -> GroundTruth:
    """Read ``cluster_of_client`` and the per-client label histograms (train part when present)."""
    manifest = read_json(manifest_path)
    for key in ("cluster_of_client", "label_histograms"):
        if key not in manifest:
            raise DataError(f"{manifest_path}: key {key!r} is missing; required: cluster_of_client, label_histograms")
    histograms = manifest.get("label_histograms_train") or manifest["label_histograms"]
    n_test = manifest.get("n_test")
    drift = manifest.get(DRIFT_KEY) or {}
    truth = GroundTruth(np.asarray(manifest["cluster_of_client"], dtype=np.int64), np.asarray(histograms, dtype=np.float64),
                        None if n_test is None else np.asarray(n_test, dtype=np.int64),
                        has_groups=bool(manifest.get("ground_truth", True)),
                        changes=tuple(tuple(int(v) for v in c) for c in drift.get("changes", ())),
                        schedule=tuple(drift.get("schedule", ())),
                        group_swaps=tuple(tuple(tuple(int(c) for c in pair) for pair in t.get("label_swaps") or ())
                                          for t in drift.get("group_transforms", ())),
                        drawn_histograms={(int(s["client"]), int(s["group"])): np.asarray(
                            s["label_histogram_train"], dtype=np.float64) for s in drift.get("samples", ())})
    if truth.label_histograms.shape[0] != truth.n_clients:
        raise DataError(
            f"{manifest_path}: label_histograms has {truth.label_histograms.shape[0]} clients, "
            f"cluster_of_client has {truth.n_clients}; they must match"
        )
    return truth


def read_history(path: str | Path) -> pd.DataFrame:
    history = read_parquet(path).to_pandas()
    missing = [c for c in HISTORY_REQUIRED if c not in history.columns]
    if missing:
        raise DataError(f"{path}: columns {missing} are missing; required: {', '.join(HISTORY_REQUIRED)}")
    return history


def round_partitions(history: pd.DataFrame, n_clients: int) -> list[RoundPartition]:
    """The assigned cluster of every client per round, in round order."""
    partitions = []
    for rnd, group in history.groupby("round", sort=True):
        group = group.sort_values("client")
        clients = group["client"].to_numpy(dtype=np.int64)
        if not np.array_equal(clients, np.arange(n_clients)):
            raise DataError(f"history round {int(rnd)}: clients {clients.tolist()[:5]}… must be exactly 0..{n_clients - 1}")
        sampled = clients[group["sampled"].to_numpy(dtype=bool)]
        present = group["model_key"].notna().to_numpy() if "model_key" in group else None
        partitions.append(RoundPartition(int(rnd), group["cluster"].to_numpy(dtype=np.int64), sampled, present))
    if not partitions:
        raise DataError("history: no rounds; the run has no results")
    return partitions


def gram_by_round(gram: pd.DataFrame | None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """round -> (client indices as stored, symmetric matrix) from the long ``round, i, j, value`` table
    (gram.parquet, and divergence.parquet, which has the same layout)."""
    if gram is None or gram.empty:
        return {}
    out = {}
    for rnd, group in gram.groupby("round", sort=True):
        index = np.unique(np.concatenate([group["i"].to_numpy(np.int64), group["j"].to_numpy(np.int64)]))
        pos = {int(c): k for k, c in enumerate(index)}
        matrix = np.full((index.size, index.size), np.nan)
        rows = np.array([pos[int(c)] for c in group["i"]], dtype=np.int64)
        cols = np.array([pos[int(c)] for c in group["j"]], dtype=np.int64)
        values = group["value"].to_numpy(np.float64)
        matrix[rows, cols] = values
        lower = np.isnan(matrix.T) & ~np.isnan(matrix)  # upper-triangle storage is allowed: mirror it
        matrix.T[lower] = matrix[lower]
        out[int(rnd)] = (index, matrix)
    return out


def sampled_gram(entry: tuple[np.ndarray, np.ndarray] | None, sampled: np.ndarray) -> np.ndarray | None:
    """The Gram matrix of exactly the sampled clients, ordered like ``sampled`` (None if not stored).

    ``i``/``j`` are global client ids; positions in the sorted sampled list are accepted when the ids
    are not a subset of the sampled clients but there is one index per sampled client.
    """
    if entry is None or sampled.size == 0:
        return None
    index, matrix = entry
    if np.isin(sampled, index).all():
        where = np.searchsorted(index, sampled)
    elif index.size == sampled.size and np.array_equal(index, np.arange(sampled.size)):
        where = np.arange(sampled.size)
    else:
        raise DataError(f"gram: indices {index.tolist()[:6]}… do not match the sampled clients {sampled.tolist()[:6]}…")
    sub = matrix[np.ix_(where, where)]
    return None if np.isnan(sub).any() else sub


def canonical_partition(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered by first occurrence, so equal partitions compare equal under relabelling."""
    return pd.factorize(np.asarray(labels))[0]


def clustering_rounds(partitions: list[RoundPartition]) -> tuple[int | None, int | None]:
    """(clustering_round, first_clustering_round), both 1-based, None when they do not exist (module doc)."""
    previous = np.zeros_like(partitions[0].labels)
    was_present = np.ones(previous.size, dtype=bool)
    last_change = None
    first_multi = None
    for part in partitions:
        both = part.members() & was_present  # a client joining (or leaving) is not a change of the partition
        if not np.array_equal(canonical_partition(part.labels[both]), canonical_partition(previous[both])):
            last_change = part.round + 1
        if first_multi is None and len(np.unique(part.labels[part.members()])) > 1:
            first_multi = part.round + 1
        previous, was_present = part.labels, part.members()
    return last_change, first_multi


def round_scores(part: RoundPartition, truth: GroundTruth, gram: np.ndarray | None,
                 divergence: np.ndarray | None = None) -> dict[str, Any]:
    """All scores of one round's partition (internal ones on the sampled clients' updates; ``silhouette_method``
    on ``divergence``, the method's own distances between the sampled clients, when it recorded them)."""
    sampled_labels = part.labels[part.sampled]
    members = part.members()
    histograms = truth.histograms_at(part.round)
    labels = part.labels[members]
    return {
        "kind": "round",
        "round": part.round,
        **(external_scores(truth.clusters_at(part.round)[members], labels) if truth.has_groups
           else dict.fromkeys(EXTERNAL_SCORES)),
        "silhouette": None if gram is None else silhouette_from_gram(gram, sampled_labels),
        "davies_bouldin": None if gram is None else davies_bouldin_from_gram(gram, sampled_labels),
        "was": wasserstein_silhouette(histograms[members], labels),
        "wadb": wasserstein_davies_bouldin(histograms[members], labels),
        "n_clusters": int(len(np.unique(labels))),
        "n_sampled": int(part.sampled.size),
        "silhouette_method": None if divergence is None else silhouette_from_distances(divergence, sampled_labels),
        "silhouette_authors": None if divergence is None else silhouette_authors_from_distances(divergence,
                                                                                                 sampled_labels),
    }


def summarise_rounds(per_round: pd.DataFrame, partitions: list[RoundPartition], score_rounds: int | None) -> pd.DataFrame:
    """The ``mean`` (first ``score_rounds`` rounds, nulls skipped) and ``final`` rows."""
    clustering_round, first_round = clustering_rounds(partitions)
    scored = per_round.head(score_rounds) if score_rounds else per_round
    summary = {
        "clustering_round": clustering_round,
        "first_clustering_round": first_round,
        "ever_clustered": first_round is not None,
        "n_rounds_scored": int(len(scored)),
    }
    numeric = scored[[*SCORE_COLUMNS, *METHOD_SCORE_COLUMNS]].apply(pd.to_numeric, errors="coerce")
    mean_row = {"kind": "mean", "round": None, **numeric.mean(skipna=True).to_dict(), **summary}
    final_row = {**per_round.iloc[-1].to_dict(), "kind": "final", **summary}
    return pd.DataFrame([mean_row, final_row])


def clustering_frame(partitions: list[RoundPartition], truth: GroundTruth, grams: dict, score_rounds: int | None,
                     divergences: dict | None = None) -> pd.DataFrame:
    """clustering.parquet's rows; ``grams`` and ``divergences`` are :func:`gram_by_round` of gram.parquet and
    divergence.parquet (the latter absent or {} for methods that record no matrix of their own)."""
    divergences = divergences or {}
    if score_rounds is not None and score_rounds < 1:
        raise DataError(f"report.score_rounds: {score_rounds} is not allowed; use null or an integer >= 1")
    for part in partitions:
        if part.labels.size != truth.n_clients:
            raise DataError(f"history: {part.labels.size} clients but the manifest has {truth.n_clients}")
    rows = [round_scores(p, truth, sampled_gram(grams.get(p.round), p.sampled),
                         sampled_gram(divergences.get(p.round), p.sampled)) for p in partitions]
    per_round = pd.DataFrame(rows)
    frame = pd.concat([per_round, summarise_rounds(per_round, partitions, score_rounds)], ignore_index=True)
    if not truth.changes:
        return _typed(frame, CLUSTERING_COLUMNS)
    return _typed(pd.concat([frame, switch_rows(per_round, truth)], ignore_index=True),
                  [*CLUSTERING_COLUMNS, *DRIFT_COLUMNS])


def switch_rows(per_round: pd.DataFrame, truth: GroundTruth) -> pd.DataFrame:
    """One ``switch`` row per switch of the drift schedule (:data:`DRIFT_COLUMNS`), each round's ARI read against
    that round's ground truth; a switch's lag is searched up to the next switch's first round."""
    ari = pd.to_numeric(per_round["ari"], errors="coerce").to_numpy(dtype=np.float64)
    by_round = np.full(int(per_round["round"].max()) + 1, np.nan)
    by_round[per_round["round"].to_numpy(dtype=np.int64)] = ari
    spans = switch_spans(truth.schedule)
    rows = []
    for i, (first, last) in enumerate(spans):
        stop = spans[i + 1][0] if i + 1 < len(spans) else None
        pre = by_round[first - 1] if first - 1 < by_round.size else np.nan
        rows.append({"kind": SWITCH_KIND, "round": first, SWITCH_LAST_ROUND: last, PRE_SWITCH_ARI: pre,
                     RECLUSTERING_LAG: reclustering_lag(by_round.tolist(), first, last, stop)})
    return pd.DataFrame(rows)


def personalisation_frame(history: pd.DataFrame, test_sizes: Sequence[int] | None = None) -> pd.DataFrame:
    per_round = personalisation_by_round(history, test_sizes)
    per_round.insert(0, "kind", "round")
    mean_row = {"kind": "mean", "round": None, **personalisation_scores(history, test_sizes).as_dict()}
    rows = [per_round, pd.DataFrame([mean_row])]
    if len(per_round):
        rows.append(per_round.tail(1).assign(kind="final"))
    return _typed(pd.concat(rows, ignore_index=True), PERSONALISATION_COLUMNS)


def typed_frame(frame: pd.DataFrame, columns: Sequence[str], dtypes: Mapping[str, str]) -> pd.DataFrame:
    """Fixed column order and nullable dtypes for an evaluation output: ``dtypes`` maps a column to
    ``Int64``, ``boolean`` (None/NaN -> null), ``string`` or ``str``; every other column is float64
    (NaN -> null)."""
    frame = frame.reindex(columns=list(columns))
    for column in columns:
        kind, values = dtypes.get(column, "float64"), frame[column]
        if kind == "Int64":
            frame[column] = pd.array(pd.to_numeric(values, errors="coerce"), dtype="Int64")
        elif kind == "boolean":
            frame[column] = pd.array([None if v is None or v is pd.NA or v != v else bool(v) for v in values],
                                     dtype="boolean")
        elif kind == "float64":
            frame[column] = pd.to_numeric(values, errors="coerce").astype("float64")
        else:
            frame[column] = values.astype(kind)
    return frame


_EVAL_DTYPES = {"kind": "str", "ever_clustered": "boolean",
                **dict.fromkeys(("round", "clustering_round", "first_clustering_round", "n_rounds_scored",
                                 "n_evaluations", SWITCH_LAST_ROUND, RECLUSTERING_LAG), "Int64")}


def _typed(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return typed_frame(frame, columns, _EVAL_DTYPES)


def failed_run_reason(run_dir: Path) -> str | None:
    """The reason in ``status.json`` when training recorded a failure (stages.train on_failure='record')."""
    path = run_dir / fn.STATUS
    if not path.exists():
        return None
    status = read_json(path)
    if not isinstance(status, dict) or status.get("status", "ok") == "ok":
        return None
    return " ".join(str(status.get("reason") or status.get("status")).split())


def recorded_failure(run_dir: Path, out_path: str | Path, empty: pd.DataFrame) -> pd.DataFrame | None:
    """For a run whose training recorded a failure: write ``empty`` (a zero-row, typed frame) to
    ``out_path`` with ``status: failed`` and the reason as Parquet metadata, and return it; else None."""
    reason = failed_run_reason(Path(run_dir))
    if reason is None:
        return None
    write_parquet(empty, out_path, metadata={"status": "failed", "reason": reason})
    return empty


def write_failed_evaluation(out_dir: Path, reason: str) -> None:
    """Zero-row eval files whose Parquet metadata carries ``status: failed`` and the reason."""
    metadata = {"status": "failed", "reason": reason}
    write_parquet(_typed(pd.DataFrame(columns=CLUSTERING_COLUMNS), CLUSTERING_COLUMNS),
                  out_dir / fn.CLUSTERING, metadata=metadata)
    write_parquet(_typed(pd.DataFrame(columns=PERSONALISATION_COLUMNS), PERSONALISATION_COLUMNS),
                  out_dir / fn.PERSONALISATION, metadata=metadata)


def evaluate_run(run_dir: str | Path, manifest_path: str | Path, out_dir: str | Path,
                 score_rounds: int | None = None) -> None:
    """Write ``clustering.parquet`` and ``personalisation.parquet`` of one run into ``out_dir``.

    A run whose ``status.json`` records a failure gets zero-row files with ``status``/``reason`` in their
    Parquet metadata, so the report lists it as missing with that reason.
    """
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    reason = failed_run_reason(run_dir)
    if reason is not None:
        write_failed_evaluation(out_dir, reason)
        return
    truth = load_ground_truth(manifest_path)
    history = read_history(run_dir / fn.HISTORY)
    partitions = round_partitions(history, truth.n_clients)
    gram_path = run_dir / fn.GRAM
    grams = gram_by_round(read_parquet(gram_path).to_pandas() if gram_path.exists() else None)
    divergence_path = run_dir / fn.DIVERGENCE
    divergences = gram_by_round(read_parquet(divergence_path).to_pandas() if divergence_path.exists() else None)
    clustering = clustering_frame(partitions, truth, grams, score_rounds, divergences)
    metadata = {"run_dir": str(run_dir), "score_rounds": score_rounds, "round_base": "round: 0-based; *_clustering_round: 1-based"}
    write_parquet(clustering, out_dir / fn.CLUSTERING, metadata=metadata)
    write_parquet(personalisation_frame(history, truth.n_test), out_dir / fn.PERSONALISATION, metadata=metadata)
