"""Clusterers for OCFL's one-shot clustering step (000 Algorithm 1, l. 21: C ← A(Γ)).

Each clusterer is one small class registered in ``CLUSTERERS``; a new clusterer is one new class
(here or in any new module of ``cflcore.clustering``) with its own ``params_schema``. OCFL's config
schema is the union of its own keys and every clusterer's keys, so ``{method: ocfl, clusterer: X, ...}``
is validated with no further edits.

Inputs (``features:`` key; ``null`` = the clusterer's default):
* ``divergence_rows`` — the rows of Γ as feature vectors (what the published code gave K-Means and
  Mean-Shift; the default for ``kmeans``, ``meanshift`` and feature-based ``sklearn`` estimators);
* ``deltas`` — the raw flattened updates (n × P; memory ~ n·P·4 bytes on the CPU).
HDBSCAN gets Γ as precomputed distances, Affinity Propagation and the graph methods get similarities
1 − Γ. Every clusterer is seeded from the run's seed.

Degenerate inputs (documented, never NaN): fewer than two clients, or Γ ≡ 0 (identical or all-zero
updates) → one cluster; ``k`` larger than the number of distinct rows is clipped to it.
"""
from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

import numpy as np

from ..errors import CflError, ConfigError
from ..plugin import ORACLE, Plugin, Population
from ..registry import Registry
from .graph import LEIDEN_INSTALL_HINT, community_labels, leiden_available, normalised_similarity
from .partition import consecutive_labels

if TYPE_CHECKING:  # torch only where deltas are given: the what-if replay works on recorded matrices alone
    import torch

FEATURES = ("divergence_rows", "deltas")
_ZERO = 1e-12


@dataclass(frozen=True)
class ClusteringInput:
    """What a clusterer sees: Γ (float64, n × n, zero diagonal), optionally the deltas, the seed, and
    the number of true clusters (only for K-Means ``k: oracle``, 000 §4.2)."""

    divergence: np.ndarray
    deltas: "torch.Tensor | None" = None
    seed: int = 0
    n_true_clusters: int | None = None

    @property
    def n(self) -> int:
        return int(self.divergence.shape[0])


class Clusterer(Plugin, ABC):
    """One clustering algorithm (a :class:`cflcore.plugin.Plugin`). ``params`` is the whole OCFL variant; a
    clusterer reads only its keys."""

    default_features: ClassVar[str | None] = None  # None: the clusterer consumes Γ itself
    plugin_kind: ClassVar[str] = "clusterer"

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = type(self).with_defaults({k: params[k] for k in self.params_schema if k in params})
        self.features = params.get("features") or self.default_features

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        """Cross-field checks; raise ConfigError naming ``<field>.<key>``."""
        if params.get("features") and cls.default_features is None:
            raise ConfigError(f"{field}.features: clusterer {cls.registered_name!r} uses Γ directly; "
                              f"allowed: null")

    def feature_matrix(self, data: ClusteringInput) -> np.ndarray:
        if self.features == "deltas":
            if data.deltas is None:
                raise CflError("features: 'deltas' requested but no deltas were given to the clusterer")
            return data.deltas.detach().to("cpu").float().numpy()
        return data.divergence

    @abstractmethod
    def fit_labels(self, data: ClusteringInput) -> np.ndarray:
        """Labels (n,) for a non-degenerate input (n ≥ 2, Γ not all zero)."""


CLUSTERERS: Registry[type[Clusterer]] = Registry("clusterer", package="cflcore.clustering")
register_clusterer = CLUSTERERS.register


def run_clusterer(clusterer: Clusterer, data: ClusteringInput) -> np.ndarray:
    """Labels 0..K−1 for every client, with the degenerate cases handled uniformly (module docstring)."""
    n = data.n
    if n < 2 or float(np.max(np.abs(data.divergence), initial=0.0)) <= _ZERO:
        return np.zeros(n, dtype=np.int64)
    labels = np.asarray(clusterer.fit_labels(data), dtype=np.int64)
    if labels.shape != (n,):
        raise CflError(f"clusterer {clusterer.registered_name!r} returned {labels.shape} labels for {n} clients")
    return consecutive_labels(labels)


def n_distinct_rows(x: np.ndarray) -> int:
    return int(np.unique(np.round(np.asarray(x, dtype=np.float64), 12), axis=0).shape[0])


# ----------------------------------------------------------------------------------------------
@register_clusterer("kmeans")
class KMeansClusterer(Clusterer):
    """K-Means (sklearn, n_init pinned, seeded); ``k: oracle`` = the number of true clusters (000 §4.2)."""

    params_schema = {
        "k": {"description": "number of clusters: 'oracle' (true number) or an int",
              "default": ORACLE, "oneOf": [{"const": ORACLE}, {"type": "integer", "minimum": 1}]},
        "n_init": {"type": "integer", "minimum": 1, "default": 10, "description": "K-Means restarts (pinned, so the result does not follow the library's default)"},
    }
    default_features = "divergence_rows"

    def fit_labels(self, data: ClusteringInput) -> np.ndarray:
        from sklearn.cluster import KMeans

        k = self.params["k"]
        if k == ORACLE:
            if data.n_true_clusters is None:
                raise CflError("k: 'oracle' needs the number of true clusters, which the run does not know; give an int")
            k = int(data.n_true_clusters)
        x = self.feature_matrix(data)
        k = max(1, min(int(k), n_distinct_rows(x)))
        return KMeans(n_clusters=k, n_init=int(self.params["n_init"]), random_state=data.seed).fit_predict(x)


@register_clusterer("affinity")
class AffinityClusterer(Clusterer):
    """Affinity Propagation on precomputed similarities 1 − Γ. ``affinity_input: distance`` reproduces
    the published code, which fed Γ itself as the similarity (docs/architecture.md §6). No convergence → one cluster."""

    params_schema = {
        "affinity_input": {"enum": ["similarity", "distance"], "default": "similarity", "description": "what Affinity Propagation receives: similarities 1 − Γ, or the published code's distances"},
        "damping": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1.0, "default": 0.5, "description": "Affinity Propagation's damping (scikit-learn)"},
        "max_iter": {"type": "integer", "minimum": 1, "default": 200, "description": "Affinity Propagation's iteration cap (scikit-learn)"},
    }

    def fit_labels(self, data: ClusteringInput) -> np.ndarray:
        from sklearn.cluster import AffinityPropagation
        from sklearn.exceptions import ConvergenceWarning

        gamma = data.divergence
        affinity = 1.0 - gamma if self.params["affinity_input"] == "similarity" else gamma.copy()
        model = AffinityPropagation(affinity="precomputed", damping=float(self.params["damping"]),
                                    max_iter=int(self.params["max_iter"]), random_state=data.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = model.fit_predict(affinity)
        if np.all(labels < 0):
            return np.zeros(data.n, dtype=np.int64)
        return labels


@register_clusterer("meanshift")
class MeanShiftClusterer(Clusterer):
    """Mean-Shift (sklearn). Bandwidth rule, pinned: an explicit ``bandwidth``, else
    ``estimate_bandwidth(X, quantile=bandwidth_quantile, n_samples=None)`` on ALL rows (no subsampling,
    hence deterministic); quantile 0.3 is sklearn's default. ``cluster_all=True``, no bin seeding."""

    params_schema = {
        "bandwidth": {"type": ["number", "null"], "exclusiveMinimum": 0, "default": None, "description": "Mean-Shift's bandwidth; null: estimate_bandwidth at bandwidth_quantile"},
        "bandwidth_quantile": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.3, "description": "the quantile of estimate_bandwidth when bandwidth is null"},
    }
    default_features = "divergence_rows"

    def fit_labels(self, data: ClusteringInput) -> np.ndarray:
        from sklearn.cluster import MeanShift, estimate_bandwidth

        x = self.feature_matrix(data)
        bandwidth = self.params["bandwidth"]
        if bandwidth is None:
            bandwidth = float(estimate_bandwidth(x, quantile=float(self.params["bandwidth_quantile"]), n_samples=None))
        if not bandwidth > 0:
            return np.zeros(data.n, dtype=np.int64)  # all rows identical within the bandwidth rule
        return MeanShift(bandwidth=float(bandwidth), bin_seeding=False, cluster_all=True).fit_predict(x)


@register_clusterer("hdbscan")
class HdbscanClusterer(Clusterer):
    """HDBSCAN on precomputed Γ (float64). min_cluster_size = max(2, ceil(min_cluster_fraction · n))
    (20 % of clients in 000 §4.2). ``min_samples`` is PINNED to 1 by default: both libraries default it
    to min_cluster_size, which merges a 3-client cluster into a neighbour or marks it noise (docs/architecture.md §6,
    ARI 0.61–0.71 vs 1.0); ``min_samples: null`` is the library default (the published code's setting,
    the ``ocfl-hdb-published`` variant). Noise (label −1): ``own_cluster`` = all noise points form one cluster (the
    authors' code), ``nearest`` = each noise point joins the cluster with the smallest mean Γ to it."""

    params_schema = {
        "min_cluster_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.2, "description": "min_cluster_size = max(2, ceil(fraction × clients))"},
        "min_samples": {"type": ["integer", "null"], "minimum": 1, "default": 1,
                        "description": "1 (pinned, docs/architecture.md §6) or null = the library default (= min_cluster_size)"},
        "noise": {"enum": ["own_cluster", "nearest"], "default": "own_cluster", "description": "what a noise point becomes: a cluster of its own (the authors' code) or a member of the nearest cluster"},
        "backend": {"enum": ["sklearn", "hdbscan"], "default": "sklearn", "description": "scikit-learn's HDBSCAN or the hdbscan package's"},
        "allow_single_cluster": {"type": "boolean", "default": False, "description": "let HDBSCAN return one cluster"},
    }

    @classmethod
    def min_cluster_size(cls, params: Mapping[str, Any], n: int) -> int:
        """max(2, ceil(min_cluster_fraction · n)) for ``n`` clients."""
        return max(2, math.ceil(float(params["min_cluster_fraction"]) * n))

    @classmethod
    def cannot_split(cls, params: Mapping[str, Any], population: Population) -> str | None:
        """HDBSCAN finds no cluster smaller than its minimum cluster size: a group below it is merged or noise."""
        size = cls.min_cluster_size(cls.with_defaults({k: v for k, v in params.items() if k in cls.params_schema}),
                                    population.n_clients)
        smallest = population.smallest_group
        if smallest is not None and smallest < size:
            return (f"HDBSCAN's min_cluster_size {size} (min_cluster_fraction × {population.n_clients} clients) is "
                    f"above the smallest group ({smallest} clients)")
        return None

    def fit_labels(self, data: ClusteringInput) -> np.ndarray:
        n = data.n
        min_cluster_size = self.min_cluster_size(self.params, n)
        min_samples = None if self.params["min_samples"] is None else min(int(self.params["min_samples"]), n)
        gamma = np.ascontiguousarray(data.divergence, dtype=np.float64)
        kwargs = dict(metric="precomputed", min_cluster_size=min_cluster_size, min_samples=min_samples,
                      allow_single_cluster=bool(self.params["allow_single_cluster"]))
        if self.params["backend"] == "hdbscan":
            import hdbscan

            labels = hdbscan.HDBSCAN(core_dist_n_jobs=1, **kwargs).fit_predict(gamma)
        else:
            from sklearn.cluster import HDBSCAN

            labels = HDBSCAN(copy=True, **kwargs).fit_predict(gamma)
        labels = np.asarray(labels, dtype=np.int64)
        if self.params["noise"] == "nearest":
            labels = assign_noise_to_nearest(labels, gamma)
        return labels


def assign_noise_to_nearest(labels: np.ndarray, divergence: np.ndarray) -> np.ndarray:
    """Noise points (−1) join the cluster with the smallest mean divergence to them; all noise → one cluster."""
    labels = labels.copy()
    clusters = [c for c in np.unique(labels) if c >= 0]
    if not clusters:
        return np.zeros_like(labels)
    noise = np.flatnonzero(labels < 0)
    if noise.size:
        mean_dist = np.stack([divergence[np.ix_(noise, np.flatnonzero(labels == c))].mean(axis=1) for c in clusters], axis=1)
        labels[noise] = np.asarray(clusters)[np.argmin(mean_dist, axis=1)]
    return labels


@register_clusterer("louvain")
class LouvainClusterer(Clusterer):
    """Louvain communities (networkx, seeded) of the graph weighted by 1 − Γ; negative similarities
    (Γ > 1, opposed updates) give no edge. ``similarity: normalised`` weighs edges as Louvain CFL does
    (002 eq. 3, min-max normalised distance, then ^``exponent``), for any distance scale (e.g. 002's
    trusted distance): the what-if replay of a Louvain CFL run uses it."""

    params_schema = {"resolution": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                                    "description": "002's convention: higher = fewer, larger communities"},
                     "similarity": {"enum": ["complement", "normalised"], "default": "complement",
                                    "description": "edge weights: 1 − Γ, or 002 eq. 3 normalised then ^exponent"},
                     "exponent": {"type": "number", "exclusiveMinimum": 0, "default": 3, "description": "the power of the edge weights, as Louvain CFL's (002 eq. 3)"}}
    algorithm: ClassVar[str] = "louvain"

    def fit_labels(self, data: ClusteringInput) -> np.ndarray:
        similarity = (normalised_similarity(data.divergence, float(self.params["exponent"]))
                      if self.params.get("similarity") == "normalised" else 1.0 - data.divergence)
        return community_labels(similarity, float(self.params["resolution"]), data.seed, self.algorithm)


@register_clusterer("leiden")
class LeidenClusterer(LouvainClusterer):
    """Leiden communities (Traag et al. 2019) of the same graph as ``louvain``: leidenalg when the ``leiden``
    extra is installed, else a networkx backend implementing ``leiden_communities``; refused without either
    (cflcore.clustering.graph.leiden_backend)."""

    params_schema = {"resolution": LouvainClusterer.params_schema["resolution"]}  # louvain's, on the 1 − Γ graph
    algorithm = "leiden"

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        super().check_params(params, field)
        if not leiden_available():
            raise ConfigError(f"{field}.clusterer: 'leiden' is not available (needs leidenalg: "
                              f"{LEIDEN_INSTALL_HINT}; plain networkx has no leiden_communities without a backend); "
                              f"allowed: {', '.join(n for n in CLUSTERERS.names() if n != 'leiden')}")


SKLEARN_ALLOWLIST: dict[str, str] = {
    "AffinityPropagation": "sklearn.cluster",
    "AgglomerativeClustering": "sklearn.cluster",
    "Birch": "sklearn.cluster",
    "BisectingKMeans": "sklearn.cluster",
    "DBSCAN": "sklearn.cluster",
    "HDBSCAN": "sklearn.cluster",
    "KMeans": "sklearn.cluster",
    "MeanShift": "sklearn.cluster",
    "MiniBatchKMeans": "sklearn.cluster",
    "OPTICS": "sklearn.cluster",
    "SpectralClustering": "sklearn.cluster",
}


def sklearn_estimator_class(name: str, field: str = "estimator") -> type:
    """The allow-listed scikit-learn clusterer class; anything else (import paths included) is refused."""
    if name not in SKLEARN_ALLOWLIST:
        raise ConfigError(f"{field}: {name!r} is not allowed; allowed: {', '.join(sorted(SKLEARN_ALLOWLIST))}")
    import importlib

    return getattr(importlib.import_module(SKLEARN_ALLOWLIST[name]), name)


@register_clusterer("sklearn")
class SklearnClusterer(Clusterer):
    """Any allow-listed scikit-learn clusterer by class name with ``clusterer_params``.

    Input: ``metric: precomputed`` → Γ; ``affinity: precomputed`` → similarities (1 − Γ for
    AffinityPropagation, 1 − Γ/max(2, max Γ) ∈ [0, 1] for SpectralClustering, which needs non-negative
    affinities: 1 − Γ/2 for a cosine Γ, and still non-negative for a divergence of another scale, such as
    Louvain CFL's trusted distance in the what-if replay);
    otherwise feature vectors (``features``, default rows of Γ). ``random_state`` is set from the seed
    when the estimator has one; ``n_clusters`` is clipped to the number of clients."""

    params_schema = {
        "estimator": {"type": "string", "default": "AgglomerativeClustering",
                      "description": f"one of {', '.join(sorted(SKLEARN_ALLOWLIST))}"},
        "clusterer_params": {"type": "object", "default": {},
                             "additionalProperties": {"type": ["number", "string", "boolean", "null"]},
                             "description": "keyword arguments of the estimator (n_clusters: oracle = the true number)"},
    }
    default_features = "divergence_rows"

    @classmethod
    def told_true_k(cls, params: Mapping[str, Any]) -> bool:
        return (params.get("clusterer_params") or {}).get("n_clusters") == ORACLE

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        if params.get("clusterer") != "sklearn":
            return
        est_cls = sklearn_estimator_class(str(params.get("estimator")), field=f"{field}.estimator")
        allowed = sorted(est_cls().get_params())
        for key in params.get("clusterer_params") or {}:
            if key not in allowed or key == "random_state":
                raise ConfigError(f"{field}.clusterer_params.{key}: not a parameter of {est_cls.__name__}; "
                                  f"allowed: {', '.join(a for a in allowed if a != 'random_state')}")

    def fit_labels(self, data: ClusteringInput) -> np.ndarray:
        est_cls = sklearn_estimator_class(str(self.params["estimator"]))
        kwargs = dict(self.params.get("clusterer_params") or {})
        defaults = est_cls().get_params()
        if "random_state" in defaults:
            kwargs["random_state"] = data.seed
        if "n_clusters" in kwargs and kwargs["n_clusters"] is not None:
            kwargs["n_clusters"] = max(1, min(int(kwargs["n_clusters"]), data.n))
        estimator = est_cls(**kwargs)
        params = estimator.get_params()
        gamma = data.divergence
        if params.get("metric") == "precomputed":
            x = gamma
        elif params.get("affinity") == "precomputed":
            x = (1.0 - gamma / max(2.0, float(np.max(gamma, initial=0.0)))
                 if est_cls.__name__ == "SpectralClustering" else 1.0 - gamma)
        else:
            x = self.feature_matrix(data)
        return estimator.fit_predict(x)


def union_params_schema() -> dict[str, Any]:
    """Every registered clusterer's keys in one mapping (OCFL's schema); a key declared twice with
    different schemas is a programming error."""
    merged: dict[str, Any] = {}
    for name in CLUSTERERS.names():
        for key, sub in CLUSTERERS.get(name).params_schema.items():
            if key in merged and merged[key] != sub:
                raise ValueError(f"clusterer key {key!r} declared twice with different schemas")
            merged[key] = sub
    return merged


def build_clusterer(params: Mapping[str, Any]) -> Clusterer:
    return CLUSTERERS.get(str(params.get("clusterer")), field="clusterer")(params)
