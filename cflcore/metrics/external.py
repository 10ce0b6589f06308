"""Scores of a predicted partition against the ground-truth clusters (000 §4.3, docs/architecture.md §8).

Every score is scikit-learn's. Argument order is always ``(true_clusters, predicted_clusters)``.

The published "COM" column of 000 Tables 1 and 001 Table I is *not* completeness: the authors called
``completeness_score(pred, true)``, i.e. with the arguments swapped, which is
``homogeneity_score(true, pred)`` (reference/paper_tables_notes.md, "Check 1"). :func:`published_com`
reproduces that column; :func:`completeness` is the true completeness.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn import metrics as skm

from ..errors import DataError

EXTERNAL_SCORES = ("ari", "rand", "ami", "completeness", "homogeneity", "v_measure")


def _labels(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    true = np.asarray(true_clusters).ravel()
    pred = np.asarray(predicted_clusters).ravel()
    if true.shape != pred.shape:
        raise DataError(f"cluster labels: true has {true.size} clients but predicted has {pred.size}; they must match")
    if true.size == 0:
        raise DataError("cluster labels: no clients to score; need at least one")
    return true, pred


def adjusted_rand(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> float:
    """Adjusted Rand index: the papers' "RAND" column (000 Table 1, 001 Fig. 1)."""
    return float(skm.adjusted_rand_score(*_labels(true_clusters, predicted_clusters)))


def rand_index(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> float:
    """Plain (unadjusted) Rand index (004 App. E)."""
    return float(skm.rand_score(*_labels(true_clusters, predicted_clusters)))


def adjusted_mutual_info(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> float:
    """Adjusted mutual information (arithmetic normalisation, scikit-learn's default)."""
    return float(skm.adjusted_mutual_info_score(*_labels(true_clusters, predicted_clusters)))


def completeness(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> float:
    """True completeness: every ground-truth cluster lies inside one predicted cluster."""
    return float(skm.completeness_score(*_labels(true_clusters, predicted_clusters)))


def homogeneity(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> float:
    """Homogeneity: every predicted cluster holds clients of one ground-truth cluster."""
    return float(skm.homogeneity_score(*_labels(true_clusters, predicted_clusters)))


def published_com(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> float:
    """The published "COM" column of 000 Table 1: ``completeness_score(pred, true)`` = homogeneity(true, pred)."""
    true, pred = _labels(true_clusters, predicted_clusters)
    return float(skm.completeness_score(pred, true))


def v_measure(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> float:
    """V-measure: harmonic mean of homogeneity and completeness (beta = 1)."""
    return float(skm.v_measure_score(*_labels(true_clusters, predicted_clusters)))


def external_scores(true_clusters: Sequence[int], predicted_clusters: Sequence[int]) -> dict[str, float]:
    """All external scores of one partition, keyed by :data:`EXTERNAL_SCORES`."""
    true, pred = _labels(true_clusters, predicted_clusters)
    hom, com, v = skm.homogeneity_completeness_v_measure(true, pred)
    return {
        "ari": adjusted_rand(true, pred),
        "rand": rand_index(true, pred),
        "ami": adjusted_mutual_info(true, pred),
        "completeness": float(com),
        "homogeneity": float(hom),
        "v_measure": float(v),
    }
