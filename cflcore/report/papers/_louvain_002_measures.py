"""002's measurements that its claims read (:mod:`.louvain_002`'s private helper module, part of the paper's code:
a claim's reading hash follows its names into it, :mod:`.versions`): the two-sided difference, the labels-only
baseline and Fig. 2's round-by-round reading of the recorded distance matrices."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..verdicts import Part, comparison, difference

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
