"""002's measurements that its claims read (:mod:`.louvain_002`'s private helper module, part of the paper's code:
a claim's reading hash follows its names into it, :mod:`.versions`): the names of its variants (the runs its roles
name) and thresholds, the two-sided difference, the labels-only baseline, the silhouette levels of Fig. 5b and Fig.
2's round-by-round reading of the recorded distance matrices. It imports nothing of the paper's module, which
imports it (and so do the paper's tables, :mod:`._louvain_002_tables`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..statistics.verdicts import PAIR_KEYS, Part, comparison, difference
from .base import ClaimData


FIG3, FIG4, SUPERCLASS = "louvain-fig3", "louvain-fig4", "louvain-superclass"
W_T = "global_orch_acc"
"""002's accuracy in Figs. 3a, 4a and 5a: the global model W_t on the balanced held-out set (its authors' code
evaluates the global model: ``listiccfl_strategy.py`` ``evaluate``, ``graphcfl_strategy.py`` ``configure_evaluate``)."""
HALF_ARI_CLOSE_TO_ZERO = 0.3  # 002 §V-B3: 1NN's ARI at 50 % "close to 0"; read as ARI ≤ 0.3
AVG_SILHOUETTE = (0.5, 0.1)  # 002 §V-B3, Fig. 5b: AVG's silhouette "remains approximately 0.5": 0.5 ± 0.1
LABELS_ONLY_ARI = "labels_only_ari"
"""The labels-only baseline (:func:`labels_only_ari`): Louvain on the clients' label histograms, no training. A
claim on ARI that this baseline satisfies as well is true by the split's construction: a sanity check."""
EQ2_MODULE, LATE_OWN = "louvain-eq2-module", "louvain-late-own"
"""The ablation variants of config/louvain-002-offline.yaml: louvain-fig4's cells with one departure option changed
(``eq2_product: module``; ``late_start: own``); the silhouette needs no runs (both are recorded on every run)."""
SPREAD = "louvain-spread"
"""The group_spread sweep of config/louvain-002-offline.yaml: 1NN at resolution 1 on the community split at m_k ×
group_spread; louvain-fig3's resolution-1 cells add the grid's own spread."""
COMMUNITIES_FOUND = 0.9  # "finds the communities" / "optimal detection": ARI ≥ 0.9


def differs(label: str, a: pd.DataFrame, b: pd.DataFrame, metric: str, digits: int = 3) -> tuple[str, Part]:
    """``a`` and ``b`` differ on ``metric``, in either direction: the two-sided test (the per-seed differences
    signed by their mean's sign, tested above 0 at one side's level = a two-sided test at twice that level)."""
    d = difference(a, b, metric)
    if not np.isfinite(d.mean) or d.mean == 0:
        return comparison(label, d, digits=digits)
    sign = float(np.sign(d.mean))
    flipped = type(d)(sign * d.mean, min(sign * d.lo, sign * d.hi), max(sign * d.lo, sign * d.hi), d.n, d.how,
                      tuple(sign * np.asarray(d.values)), d.unpaired, d.bounded)
    return f"{label}: Δ {d.text(digits)} (two-sided)", Part(flipped, 0.0, np.inf, True)


def labels_only_ari(run: Any, resolution: float = 1.0) -> float:
    """The labels-only baseline of one run: Louvain (the clusterer of 002's method, :func:`community_labels`, at
    ``resolution``, seeded by the run's seed) on the graph of the clients' label histograms, whose distances are the
    total-variation distances between the histograms (normalised similarity, eq. 3, cubed, as the method's own
    graph), scored by ARI against the true communities; NaN where the manifest has no histograms."""
    from sklearn.metrics import adjusted_rand_score

    from ...clustering.graph import community_labels, normalised_similarity

    manifest = run.manifest or {}
    hist = manifest.get("label_histograms_train") or manifest.get("label_histograms")
    truth = manifest.get("cluster_of_client")
    if not hist or not truth:
        return float("nan")
    h = np.asarray(hist, dtype=np.float64)
    h = h / np.maximum(h.sum(axis=1, keepdims=True), 1e-12)
    tv = 0.5 * np.abs(h[:, None, :] - h[None, :, :]).sum(axis=2)
    labels = community_labels(normalised_similarity(tv, 3.0), resolution, int(run.spec.seed))
    return float(adjusted_rand_score(np.asarray(truth), labels))


def _distance_rounds(distances: pd.DataFrame) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(round, client ids, distance matrix over them) per recorded round of a divergence.parquet frame."""
    out = []
    for rnd in sorted(distances["round"].unique()):
        part_ = distances[distances["round"] == rnd]
        ids = np.unique(np.concatenate([part_["i"].to_numpy(), part_["j"].to_numpy()]))
        pos = {int(c): k for k, c in enumerate(ids)}
        d = np.full((len(ids), len(ids)), np.nan)
        d[[pos[int(i)] for i in part_["i"]], [pos[int(j)] for j in part_["j"]]] = part_["value"].to_numpy()
        out.append((int(rnd), ids, d))
    return out


def similarity_convergence(distances: pd.DataFrame, truth: Sequence[int] | None = None) -> dict[str, float]:
    """002 Fig. 2: how fast the distribution of pairwise similarities settles, for the normalised transform (eq. 3,
    cubed) and the raw one ((max − v)³): per round, the Wasserstein distance between that round's similarity values
    and the last round's, divided by the last round's range (each transform on its own scale, as Fig. 2 plots
    each on its own axis); the mean over rounds is the area under that curve: smaller = settles faster."""
    from scipy.stats import wasserstein_distance

    from ...clustering.graph import normalised_similarity, raw_similarity

    out: dict[str, float] = {}
    recorded = _distance_rounds(distances)
    if len(recorded) < 2:
        return out
    values: dict[str, list[np.ndarray]] = {"normalised": [], "raw": []}
    for _, _, d in recorded:
        upper = np.triu_indices(len(d), k=1)
        for name, similarity in (("normalised", normalised_similarity), ("raw", raw_similarity)):
            sim = similarity(d, 3.0)[upper]
            values[name].append(sim[np.isfinite(sim)])
    for name, per_round in values.items():
        last = per_round[-1]
        scale = float(last.max() - last.min()) if len(last) else 0.0
        if scale <= 0:
            continue
        out[name] = float(np.mean([wasserstein_distance(v, last) / scale for v in per_round[:-1] if len(v)]))
    return out


def separation_rounds(distances: pd.DataFrame, truth: Sequence[int], seed: int = 0,
                      resolution: float = 1.0) -> dict[str, float]:
    """002 Fig. 2, round by round: Louvain (:func:`community_labels`, ``resolution``) on each recorded round's graph
    under the normalised transform (eq. 3, cubed) and the raw one ((max − v)³); per transform the first round
    (1-based) whose partition finds the true communities (ARI ≥ :data:`COMMUNITIES_FOUND`; never: rounds + 1), and
    the number of rounds in which the two transforms give one and the same partition."""
    from sklearn.metrics import adjusted_rand_score

    from ...clustering.graph import community_labels, normalised_similarity, raw_similarity

    truth = np.asarray(truth)
    recorded = [(r, ids, d) for r, ids, d in _distance_rounds(distances)
                if len(ids) >= 2 and int(ids.max()) < len(truth) and np.isfinite(d).all()]
    out = {"rounds": float(len(recorded)), "same_partition": 0.0}
    first = {"normalised": np.nan, "raw": np.nan}
    for rnd, ids, d in recorded:
        labels = {name: community_labels(similarity(d, 3.0), resolution, seed)
                  for name, similarity in (("normalised", normalised_similarity), ("raw", raw_similarity))}
        out["same_partition"] += float(adjusted_rand_score(labels["normalised"], labels["raw"]) == 1.0)
        for name, lab in labels.items():
            if np.isnan(first[name]) and adjusted_rand_score(truth[ids], lab) >= COMMUNITIES_FOUND:
                first[name] = float(rnd + 1)
    for name, value in first.items():
        out[name] = float(len(recorded) + 1) if np.isnan(value) else value
    return out


def with_labels_only(data: ClaimData) -> pd.DataFrame:
    """``data.runs`` with the labels-only baseline's ARI (:data:`LABELS_ONLY_ARI`) of each run's split (NaN where
    the run's manifest is not loaded)."""
    runs = data.runs
    if runs is None or not len(runs) or LABELS_ONLY_ARI in runs:
        return runs
    keys = ("dataset", "clients", "split", "seed")
    cache: dict[tuple, float] = {}
    for run in data.loaded:
        key = tuple(getattr(run.spec, k) for k in keys)
        if key not in cache:
            cache[key] = labels_only_ari(run)
    values = [cache.get(tuple(row[k] for k in keys), float("nan")) for _, row in runs[list(keys)].iterrows()]
    return runs.assign(**{LABELS_ONLY_ARI: values})



def silhouette_levels(rounds: pd.DataFrame | None, runs: pd.DataFrame, col: str) -> tuple[pd.Series, pd.Series]:
    """002 Fig. 5b's statistic, per seed of ``runs``: the mean of ``col`` over rounds 1.. (round 0: one model for
    everyone, no separation yet) and its drift (mean of the second half of the rounds − the first half)."""
    empty = pd.Series(dtype=np.float64)
    if rounds is None or not len(rounds) or col not in rounds or not len(runs):
        return empty, empty
    rows = rounds[rounds["algorithm"].isin(set(runs["algorithm"])) & rounds["split"].isin(set(runs["split"]))]
    rows = rows[rows["round"] >= 1].dropna(subset=[col])
    keys = [k for k in PAIR_KEYS if k in rows]
    levels, drifts = {}, {}
    for key, g in rows.groupby(keys):
        g = g.sort_values("round")
        half = len(g) // 2
        levels[key] = float(g[col].mean())
        if half:
            drifts[key] = float(g[col].iloc[half:].mean() - g[col].iloc[:half].mean())
    return pd.Series(levels, dtype=np.float64), pd.Series(drifts, dtype=np.float64)
