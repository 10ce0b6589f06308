"""The ``whatif`` stage: every configured clusterer replayed on every recorded round of one run.

"What would another clusterer have found, had it run at round t?" 000 clusters once, with one clusterer
(Algorithm 1, l. 21: C ← A(Γ)) at the round its temperature trigger fires (l. 20); the run records Γ
or the Gram matrix of every round, so the question is answered without retraining and without torch
models: each clusterer of ``cflcore.clustering.clusterers`` (the same classes the run used, through
``run_clusterer``) is applied to each round's matrix and scored against the split's ground truth.

Matrix of a round (``settings["matrix"]``; column ``source``):
* ``divergence`` — the strategy's own recorded divergence (divergence.parquet): for OCFL and BCL the Γ
  they clustered (from the round's one float64-accumulated Gram product, the one recorded);
* ``gram`` — Γ = cosine distance computed from the recorded float64 Gram matrix (gram.parquet) with
  cflcore.clustering.divergence (000 Def. 6, eq. 8; the same zero-delta convention as the run);
* ``auto`` (default) — ``divergence`` where the round has one, else ``gram``. At the run's own
  clustering round this is exactly the matrix the run clustered, so the replay of the run's own
  clusterer (``run:<name>``) reproduces the run's labels (tests/evaluate/test_whatif.py). From ``gram`` alone it
  need not: float32 and float64 Γ differ by ~1e-7, which can flip a K-Means tie or an HDBSCAN merge.

Output ``results/eval/{scenario}/{algorithm}/whatif.parquet``, written atomically, one row per
clusterer × round (0-based ``round`` as in history.parquet) of the round's sampled clients:
``clusterer`` (entry name), ``spec`` (canonical JSON of its clusterer parameters), ``own`` (the run's
own clusterer), ``round``, ``source``, ``n_clients``, ``n_clusters``, ``ari``, ``ami``, ``homogeneity``,
``completeness`` (against the ground truth, cflcore.metrics.external), ``silhouette`` (of the labels
on the matrix as precomputed distances; null when undefined), ``ari_vs_run`` (against the run's own
partition of that round), ``seconds`` (wall time of the clusterer, k selection included), ``error``
(null, or the one-line reason this clusterer failed on this round; its scores are then null).
Parquet metadata: ``run_clustering_round`` (0-based first round whose partition changed, i.e. where
OCFL's temperature trigger fired; null if never), ``n_true_clusters``, ``matrix``, ``seed``.

``select_k: silhouette`` (the "chosen k" of OCFL-KM): the clusterer runs for k = 2 … min(k_max, n − 1)
and keeps the labels with the largest silhouette on the matrix (ties: the smaller k); ``oracle`` as
an sklearn ``n_clusters`` is the number of true clusters, as K-Means' ``k: oracle`` (000 §4.2).
"""
from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .. import filenames as fn
from ..clustering.clusterers import CLUSTERERS, ClusteringInput, run_clusterer
from ..clustering.divergence import cosine_divergence_from_gram
from ..errors import CflError
from ..io import canonical_json, read_parquet, write_parquet
from ..metrics import adjusted_rand, external_scores, silhouette_from_distances
from ..plugin import ORACLE
from .clustering import (
    GroundTruth,
    RoundPartition,
    clustering_rounds,
    recorded_failure,
    gram_by_round,
    load_ground_truth,
    read_history,
    round_partitions,
    sampled_gram,
    typed_frame,
)

WHATIF_COLUMNS = ["clusterer", "spec", "own", "round", "source", "n_clients", "n_clusters", "ari", "ami",
                  "homogeneity", "completeness", "silhouette", "ari_vs_run", "seconds", "error"]
MATRIX_SOURCES = ("auto", "gram", "divergence")


@dataclass(frozen=True)
class WhatifClusterer:
    """One entry of ``cflcore.config.whatif_settings``: clusterer parameters plus the k-selection rule."""

    name: str
    params: Mapping[str, Any]
    select_k: str | None = None
    k_max: int = 8
    own: bool = False

    @classmethod
    def from_settings(cls, entry: Mapping[str, Any]) -> "WhatifClusterer":
        return cls(str(entry["name"]), dict(entry["params"]), entry.get("select_k"), int(entry["k_max"]),
                   bool(entry.get("own", False)))


@dataclass(frozen=True)
class RoundMatrix:
    """The divergence of one round's sampled clients (global ids ``clients``) and where it came from."""

    round: int
    clients: np.ndarray
    divergence: np.ndarray
    source: str


# ----- matrices -------------------------------------------------------------------------------------
def divergence_from_gram(gram: np.ndarray) -> np.ndarray:
    """Γ (float64, zero diagonal, in [0, 2]) from a recorded Gram matrix (cflcore.clustering.divergence)."""
    return cosine_divergence_from_gram(np.ascontiguousarray(gram, dtype=np.float64))


def _read_matrix_table(path: Path) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    if not path.exists():
        return {}
    return gram_by_round(read_parquet(path).to_pandas())


def round_matrices(run_dir: Path, sampled_by_round: Mapping[int, np.ndarray], matrix: str) -> list[RoundMatrix]:
    """The matrix of every round that has one, chosen by ``matrix`` (module docstring)."""
    if matrix not in MATRIX_SOURCES:
        raise CflError(f"whatif.matrix: {matrix!r} is not allowed; allowed: {', '.join(MATRIX_SOURCES)}")
    grams = _read_matrix_table(run_dir / fn.GRAM) if matrix != "divergence" else {}
    divs = _read_matrix_table(run_dir / fn.DIVERGENCE) if matrix != "gram" else {}
    out = []
    for rnd, sampled in sorted(sampled_by_round.items()):
        div = sampled_gram(divs.get(rnd), sampled)
        if div is not None:
            out.append(RoundMatrix(rnd, sampled, np.ascontiguousarray(div, dtype=np.float64), "divergence"))
            continue
        gram = sampled_gram(grams.get(rnd), sampled)
        if gram is not None:
            out.append(RoundMatrix(rnd, sampled, divergence_from_gram(gram), "gram"))
    return out


# ----- replay ---------------------------------------------------------------------------------------
def concrete_params(params: Mapping[str, Any], n_true: int | None, k: int | None = None) -> dict[str, Any]:
    """Clusterer parameters with ``n_clusters: oracle`` resolved and, for k selection, the number of
    clusters set to ``k`` (K-Means ``k``; an sklearn estimator's ``n_clusters``)."""
    out = copy.deepcopy(dict(params))
    if out.get("clusterer") == "sklearn":
        kwargs = dict(out.get("clusterer_params") or {})
        if kwargs.get("n_clusters") == ORACLE:
            if n_true is None:
                raise CflError("n_clusters: 'oracle' needs the number of true clusters; the manifest has none")
            kwargs["n_clusters"] = int(n_true)
        if k is not None:
            kwargs["n_clusters"] = int(k)
        out["clusterer_params"] = kwargs
    elif k is not None:
        out["k"] = int(k)
    return out


def cluster_once(params: Mapping[str, Any], divergence: np.ndarray, seed: int, n_true: int | None) -> np.ndarray:
    """Labels of one registered clusterer on Γ, exactly as OCFL calls it (000 Algorithm 1, l. 21)."""
    clusterer = CLUSTERERS.get(str(params["clusterer"]), field="clusterer")(params)
    return run_clusterer(clusterer, ClusteringInput(divergence, None, int(seed), n_true))


def select_k_by_silhouette(entry: WhatifClusterer, divergence: np.ndarray, seed: int,
                           n_true: int | None, memo: "ScoreMemo | None" = None) -> np.ndarray:
    """The labels with the best silhouette on Γ over k = 2 … min(k_max, n − 1); one cluster if none is defined.
    Every silhouette computed is left in ``memo`` (never read from it here: a row's ``seconds`` times the
    whole k selection, whatever other entries found)."""
    best, best_score = np.zeros(divergence.shape[0], dtype=np.int64), -np.inf
    for k in range(2, min(entry.k_max, divergence.shape[0] - 1) + 1):
        labels = cluster_once(concrete_params(entry.params, n_true, k), divergence, seed, n_true)
        score = silhouette_from_distances(divergence, labels)
        if memo is not None:
            memo.put("silhouette", (divergence, labels), score)
        if score is not None and score > best_score:
            best, best_score = labels, score
    return best


def replay(entry: WhatifClusterer, divergence: np.ndarray, seed: int, n_true: int | None,
           memo: "ScoreMemo | None" = None) -> np.ndarray:
    if entry.select_k == "silhouette":
        return select_k_by_silhouette(entry, divergence, seed, n_true, memo)
    if entry.select_k is not None:
        raise CflError(f"select_k: {entry.select_k!r} is not allowed; allowed: silhouette")
    return cluster_once(concrete_params(entry.params, n_true), divergence, seed, n_true)


# ----- scores ---------------------------------------------------------------------------------------
def _array_key(a: np.ndarray) -> tuple[str, tuple[int, ...], bytes]:
    return a.dtype.str, a.shape, a.tobytes()


class ScoreMemo:
    """The scores of one run's label vectors, each computed once.

    A replay's labels are 0..K−1 in order of first appearance (``run_clusterer``), so the clusterers that
    find the same partition of a round return the same label vector, and rounds that sample the same
    clients share the ground truth: of a run's ~90 rows only a few distinct (truth, labels) pairs remain.
    A key is the arrays' dtype, shape and bytes and the score functions are deterministic, so a hit is
    exactly the value the call would return. ``enabled=False`` computes every score afresh, with
    scikit-learn's own argument checks: the reference the tests compare with."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._values: dict[tuple, Any] = {}
        self.hits = self.misses = 0

    def _key(self, kind: str, arrays: Sequence[np.ndarray]) -> tuple:
        return (kind, *(_array_key(np.asarray(a)) for a in arrays))

    def get(self, kind: str, arrays: Sequence[np.ndarray], compute: Callable[[], Any]) -> Any:
        """``compute()``, or its value stored under ``kind`` and the ``arrays`` it is a function of."""
        if not self.enabled:
            return compute()
        key = self._key(kind, arrays)
        if key in self._values:
            self.hits += 1
            return self._values[key]
        self.misses += 1
        value = self._values[key] = compute()
        return value

    def put(self, kind: str, arrays: Sequence[np.ndarray], value: Any) -> None:
        if self.enabled:
            self._values.setdefault(self._key(kind, arrays), value)


# scikit-learn's documented speed options (sklearn.config_context), only where they cannot change a value
# (most of a replay's time is scikit-learn's per-call checks on 15 x 15 matrices):
# * the scores' arguments are built here (integer label vectors; a distance matrix that
#   silhouette_from_distances checks to be finite first): no finiteness or parameter checks;
# * a registered clusterer (kmeans, affinity, meanshift, hdbscan, ...) passes scikit-learn parameters that
#   its params_schema (checked with the config) and its code keep valid: no parameter checks. An `sklearn`
#   entry's clusterer_params come straight from the config, so scikit-learn still checks them (a bad value
#   stays an `error` row with scikit-learn's message). A replay's inputs are always checked for finiteness.
_TRUSTED_ARGS = {"assume_finite": True, "skip_parameter_validation": True}
_TRUSTED_PARAMS = {"skip_parameter_validation": True}


def _replay_checks(entry: WhatifClusterer, fast: bool) -> contextlib.AbstractContextManager:
    from sklearn import config_context

    if fast and entry.params.get("clusterer") != "sklearn":
        return config_context(**_TRUSTED_PARAMS)
    return contextlib.nullcontext()


_SCORED = ("ari", "ami", "homogeneity", "completeness")


def _scores(memo: ScoreMemo, divergence: np.ndarray, truth: np.ndarray, run_labels: np.ndarray,
            labels: np.ndarray) -> dict[str, Any]:
    from sklearn import config_context

    with config_context(**_TRUSTED_ARGS) if memo.enabled else contextlib.nullcontext():
        external = memo.get("external", (truth, labels), lambda: external_scores(truth, labels))
        silhouette = memo.get("silhouette", (divergence, labels), lambda: silhouette_from_distances(divergence, labels))
        ari_vs_run = memo.get("ari", (run_labels, labels), lambda: adjusted_rand(run_labels, labels))
    return {**{k: external[k] for k in _SCORED}, "silhouette": silhouette, "ari_vs_run": ari_vs_run}


def score_row(entry: WhatifClusterer, matrix: RoundMatrix, truth: np.ndarray, run_labels: np.ndarray,
              seed: int, n_true: int | None, memo: ScoreMemo | None = None) -> dict[str, Any]:
    """One whatif.parquet row: replay, time and score ``entry`` on one round (scores through ``memo``, a
    fresh one when not given)."""
    memo = ScoreMemo() if memo is None else memo
    row: dict[str, Any] = {"clusterer": entry.name, "spec": canonical_json(dict(entry.params)), "own": entry.own,
                           "round": matrix.round, "source": matrix.source, "n_clients": int(matrix.clients.size)}
    t0 = time.perf_counter()
    try:
        with _replay_checks(entry, memo.enabled):
            labels = replay(entry, matrix.divergence, seed, n_true, memo)
    except (CflError, ValueError, ArithmeticError, np.linalg.LinAlgError) as e:
        row.update(seconds=time.perf_counter() - t0, error=" ".join(f"{type(e).__name__}: {e}".split())[:300])
        return row
    row["seconds"] = time.perf_counter() - t0
    row.update(_scores(memo, matrix.divergence, truth, run_labels, labels), n_clusters=int(np.unique(labels).size),
               error=None)
    return row


def run_clustering_round(partitions: Sequence[RoundPartition]) -> int | None:
    """0-based first round with more than one cluster (everyone is together before round 0, so it is the
    first round whose partition changed): OCFL's trigger round, BCL's clustering round, SCL's first split.
    The evaluation's ``first_clustering_round`` (1-based), so both stages agree on it."""
    first = clustering_rounds(list(partitions))[1]
    return None if first is None else first - 1


def whatif_frame(entries: Sequence[WhatifClusterer], matrices: Sequence[RoundMatrix], truth: GroundTruth,
                 run_labels: Mapping[int, np.ndarray], seed: int, fast: bool = True) -> pd.DataFrame:
    """Every entry on every round's matrix (module docstring); ``fast=False`` scores every row afresh with
    scikit-learn's argument checks (:class:`ScoreMemo`; the frame is the same but for ``seconds``)."""
    n_true = int(np.unique(truth.cluster_of_client[truth.cluster_of_client >= 0]).size) or None
    scores = ScoreMemo(enabled=fast)
    rows = [score_row(entry, m, truth.clusters_at(m.round)[m.clients], run_labels[m.round][m.clients], seed, n_true,
                      scores)
            for m in matrices for entry in entries]
    return typed_whatif(pd.DataFrame(rows, columns=WHATIF_COLUMNS))


_WHATIF_DTYPES = {**dict.fromkeys(("clusterer", "spec", "source", "error"), "string"), "own": "boolean",
                  **dict.fromkeys(("round", "n_clients", "n_clusters"), "Int64")}


def typed_whatif(frame: pd.DataFrame) -> pd.DataFrame:
    return typed_frame(frame, WHATIF_COLUMNS, _WHATIF_DTYPES)


def whatif_run(run_dir: str | Path, manifest_path: str | Path, out_path: str | Path,
               settings: Mapping[str, Any], seed: int, fast: bool = True) -> pd.DataFrame:
    """Write ``whatif.parquet`` of one run (``settings`` = cflcore.config.whatif_settings) and return it
    (``fast``: :func:`whatif_frame`).

    A run whose status.json records a failure gets a zero-row file with ``status``/``reason`` metadata.
    """
    run_dir, out_path = Path(run_dir), Path(out_path)
    failed = recorded_failure(run_dir, out_path, typed_whatif(pd.DataFrame(columns=WHATIF_COLUMNS)))
    if failed is not None:
        return failed
    truth = load_ground_truth(manifest_path)
    history = read_history(run_dir / fn.HISTORY)
    partitions = round_partitions(history, truth.n_clients)
    sampled = {p.round: p.sampled for p in partitions}
    matrices = round_matrices(run_dir, sampled, str(settings["matrix"]))
    entries = [WhatifClusterer.from_settings(e) for e in settings["clusterers"]]
    frame = whatif_frame(entries, matrices, truth, {p.round: p.labels for p in partitions}, int(seed), fast)
    n_true = int(np.unique(truth.cluster_of_client[truth.cluster_of_client >= 0]).size)
    metadata = {"run_dir": str(run_dir), "run_clustering_round": run_clustering_round(partitions),
                "n_true_clusters": n_true, "matrix": settings["matrix"], "seed": int(seed),
                "round_base": "round: 0-based, as history.parquet"}
    write_parquet(frame, out_path, metadata=metadata)
    return frame

