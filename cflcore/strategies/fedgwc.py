"""FedGWC: interaction-aware Gaussian weighting for clustered FL (004 §4, Algorithms 1–2, App. A, App. F).

Principle (docs/seed-text-vs-code.md): where 004's text and its authors' code (davedleo/FedGWC,
``agents/servers.py``, ``ServerFedGWC``) disagree, the code is what produced 004's numbers. The defaults
follow the code; every reading of the text stays selectable by a parameter (table below).

One round, per cluster C_n (Alg. 1): the cluster samples K_n of its available members, they train, and
from their per-step training losses l_k^{t,s}:
* Gaussian rewards r_k^{t,s} = exp(−(l_k^{t,s} − m^{t,s})² / (2 σ^{t,s}²)), averaged over steps: ω_k^t
  (eq. 1); by default ω is normalised over the round's sample, ω_k / Σ_j ω_j (their ``_update_W``);
* Gaussian weights γ_k ← (1 − α) γ_k + α ω_k (eq. 2, a trace) and the interaction matrix
  P_kj ← (1 − α) P_kj + α ω_k for co-sampled (k, j) (eq. 3: client k's reward goes into row k);
  unsampled entries stay. α = ``alpha``, by default K_n / |C_n| (App. F; their ``alpha_new``);
* MSE ← (1 − α) MSE + α · mse_t, starting at 1 (§4.3, Alg. 1 l. 5, 14) and reset to 1 for a split's
  children and after a decision not to split (their ``_run_clustering``);
* when MSE < ε (for ``patience`` rounds in a row, by default), Alg. 2 runs on the cluster's sub-matrix:
  unbiased perception vectors (UPVs), the RBF affinity W_kj = exp(−β ‖v_k^j − v_j^k‖²) (eq. 4), spectral
  clustering for each candidate n, Davies–Bouldin (DB) per candidate, no split unless the best DB is
  below 1, else n = argmin DB. Recursive per cluster (Alg. 1 l. 8).

Text (004) against code (theirs), parameter = default (the code's reading) | the text's reading:

=====================  =====================================================  ==========================================
parameter              default = authors' code                                option = 004's text
=====================  =====================================================  ==========================================
``upv``                "columns": v_k = column k of P (``_compute_P``         "rows": row k of P (§4.2 "the k-th row")
                       transposes W): what the others score when sampled
                       with k, i.e. how k moves the mean (the domain signal)
``minmax``             true: P min-max scaled to [0, 1] before eq. 4           false: eq. 4 on P as it is
``labels``             "cluster_qr" (sklearn SpectralClustering)               "kmeans" (n_init 10, Ng et al.)
``db_on``              "embedding": DB on W's n-dim spectral embedding         "affinity": DB on the rows of W (Alg. 2 l. 7)
``db_strict``          true: split only if min DB < 1                          false: ≤ 1 (Alg. 2 l. 8)
``n_range``            "code": n = 2 … min(⌊|C|/K_n⌋ + 1, n_max) − 1           "n_max": n = 2 … n_max (App. D)
``cluster_sampling``   "fixed": K_n = min(N, |C_n|), N = round(ρK) every       "proportional": K_n = max(round(ρ|C_n|),
                       round in every cluster (``_select_clients``)            min_sampled) (App. A eq. 26–28)
``sampling``           "uniform" (their ``explore`` is off by default)         "prioritised": P(k) ∝ exp(c_min − c_k) over
                                                                               participation counts (§4.1)
``min_cluster_size``   null: no K_min                                          "n_star": K_min = ⌈min_sampled/ρ⌉ (Thm. A.5),
                                                                               or an integer
``resplit_guard``      true: only clusters larger than their sample            false: any cluster of ≥ 3 clients may split
                       (|C| > K_n) are ever split (``_clusters_to_clusterize``)
``rewards``            "normalised": ω_k / Σ_{j∈P_t} ω_j                       "raw": ω_k (eq. 3)
``moments``            "weighted": m, σ² weighted by local sample counts,       "plain": mean and sample variance (ddof 1)
                       population variance + 1e-16
``initial_p``          "uniform": P⁰ = 1/K²                                    "zero": P⁰ = 0 (Alg. 1 l. 4)
``mse_scope``          "sampled": mean squared change over the co-sampled      "cluster": over the cluster's whole
                       block, sse / K_n²                                       sub-matrix
``patience``           true: Alg. 2 runs once MSE < ε held round(|C|/K_n)      false: at the first round MSE < ε (Alg. 1
                       rounds in a row                                         l. 15)
=====================  =====================================================  ==========================================

Guards of ours: with ``cluster_sampling: fixed`` N is at least 2 (theirs can be 0 or 1 when ρK < 1.5); α is at
most 1. Not followed (neither reading): their optional "loss sampling" (synthetic losses from N(m, σ²) up to
``loss_sampling_size``) is a no-op at their defaults (10 − N = 0) and is not implemented; they run a fixed
number of local iterations (7, batch 64), we run the engine's local epochs (S = epochs × batches); their
affinity has a zero diagonal and ours a unit one (sklearn's Laplacian ignores the diagonal). Their
β default is 0.1 (``config.py``), 004 tunes β ∈ {0.1, 0.5, 1, 2, 4} and reports 0.5; ours is 0.5. The
MSE floor: with a constant α the running MSE plateaus at a level set by α and the rewards' spread, so ε
must sit below that floor's scale for the configuration (004's 1e-5 is calibrated for K = 100, ρ = 0.1
with normalised rewards).

Participation: the engine's own sample (``engine.participation``) is the set of clients available that
round (by default everyone); each cluster draws its K_n from ``ctx.generator(round, stream, cluster)``;
participation counts, patience counters and P are part of ``state_dict`` (exact resume).

Diagnostics (every round, columns of server.parquet): ``epsilon``; ``mse`` {cluster: MSE of P_(n)} and
``min_mse`` for the clusters updated this round; ``davies_bouldin`` {cluster: [DB_2, …]} and ``min_db``;
``db_considered`` (the clusters where Alg. 2 decided); ``sampled`` {cluster: K_n}. With ``db_every_round``
(default) Alg. 2's scores are computed for every updated cluster every round, as a trace for the report;
only those of clusters where Alg. 2 decides can split.

Matrix snapshots (004 Figs. 3, 5-8): ``gwc_snapshots`` {cluster: {members, P, W, embedding, labels,
davies_bouldin, decided}} on every round where Alg. 2 decides, and every ``snapshot_every`` rounds when set;
``P`` is the cluster's raw sub-matrix (rows = the rewarded client), ``W`` the affinity Alg. 2 clustered (after
the UPV orientation and scaling), ``embedding`` W's seeded 2-D spectral embedding (sklearn). Read them with
cflcore.report.fedgwc_figures.matrix_snapshots.

Documented degenerate behaviour (never NaN): steps are aligned up to the shortest loss trace of the
cluster's sampled members; a step where every member has the same loss rewards everyone alike; a cluster
with fewer than two sampled members is not updated; clusters with fewer than three members are never split
(a UPV needs K − 2 ≥ 1 entries); a clustering whose centroids coincide scores DB = +∞ instead of sklearn's 0
(recorded as null).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from ..plugin import Population
from .base import (LOSS_BYTES, ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult, Traffic,
                   register_strategy)
from ._common import as_int_list, labels_tensor

_STREAM_SAMPLE, _STREAM_SPECTRAL = 0x6A5, 0x6C

TEXT_READINGS: dict[str, Any] = {
    "upv": "rows", "minmax": False, "labels": "kmeans", "db_on": "affinity", "db_strict": False, "n_range": "n_max",
    "cluster_sampling": "proportional", "sampling": "prioritised", "min_cluster_size": "n_star",
    "resplit_guard": False, "rewards": "raw", "moments": "plain", "initial_p": "zero", "mse_scope": "cluster",
    "patience": False,
}
"""Every parameter set to 004's text where the authors' code differs (the module docstring's table): the
behaviour of this module before it defaulted to the authors' code. ``{"method": "fedgwc", **TEXT_READINGS, ...}``."""


def gaussian_rewards(step_losses: Sequence[np.ndarray], n_samples: Sequence[float] | None = None,
                     moments: str = "plain") -> np.ndarray:
    """ω_k: step-averaged Gaussian rewards of each client's loss trace w.r.t. the group (004 eq. 1).

    ``moments`` "plain": the members' mean and sample variance (ddof 1), a step with zero variance rewards
    everyone 1; "weighted" (the authors' code): mean and population variance weighted by ``n_samples``,
    variance + 1e-16."""
    length = min(len(l) for l in step_losses)
    if length == 0:
        return np.ones(len(step_losses))
    losses = np.stack([np.asarray(l, dtype=np.float64)[:length] for l in step_losses])  # (K, S)
    if moments == "weighted":
        w = np.ones(len(losses)) if n_samples is None else np.asarray(n_samples, dtype=np.float64)
        w = w / w.sum()
        mean = w @ losses
        var = w @ (losses - mean) ** 2 + 1e-16
        return np.exp(-0.5 * (losses - mean) ** 2 / var).mean(axis=1)
    mean = losses.mean(axis=0)
    var = losses.var(axis=0, ddof=1)
    dev2 = (losses - mean) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        rewards = np.where(var > 0, np.exp(-dev2 / (2.0 * np.where(var > 0, var, 1.0))), 1.0)
    return rewards.mean(axis=1)


def upv_affinity(interaction: np.ndarray, beta: float) -> np.ndarray:
    """W_kj = exp(−β ‖v_k^j − v_j^k‖²) (004 eq. 4), v_k^j = row k of the given matrix without entries k and j
    (pass Pᵀ for UPVs from P's columns). Vectorised:
    ‖v_k^j − v_j^k‖² = ‖P_k − P_j‖² − (P_kk − P_jk)² − (P_kj − P_jj)²."""
    p = np.asarray(interaction, dtype=np.float64)
    sq = (p * p).sum(axis=1)
    row_dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * p @ p.T, 0.0)
    diag = np.diag(p)
    own = (diag[:, None] - p.T) ** 2  # (P_kk − P_jk)²
    other = (p - diag[None, :]) ** 2  # (P_kj − P_jj)²
    upv = np.maximum(row_dist - own - other, 0.0)
    np.fill_diagonal(upv, 0.0)
    return np.exp(-beta * upv)


def perception_matrix(interaction: np.ndarray, upv: str = "columns", minmax: bool = True) -> np.ndarray:
    """The matrix whose rows are the UPVs' sources: Pᵀ for ``upv="columns"`` (the authors' ``_compute_P``),
    P for "rows" (004 §4.2); min-max scaled to [0, 1] over the whole matrix when ``minmax`` (theirs, with the
    range floored at 1e-8)."""
    p = np.asarray(interaction, dtype=np.float64)
    p = p.T.copy() if upv == "columns" else p.copy()
    if minmax:
        p = (p - p.min()) / max(float(p.max() - p.min()), 1e-8)
    return p


def affinity_matrix(interaction: np.ndarray, beta: float, upv: str = "columns", minmax: bool = True) -> np.ndarray:
    """W of Alg. 2 l. 3–4 from a cluster's P: eq. 4 on :func:`perception_matrix`."""
    return upv_affinity(perception_matrix(interaction, upv, minmax), beta)


def davies_bouldin(features: np.ndarray, labels: np.ndarray) -> float:
    """sklearn's Davies–Bouldin, except +∞ when it is undefined or when two centroids coincide."""
    from sklearn.metrics import davies_bouldin_score

    k = len(np.unique(labels))
    if k < 2 or k > len(labels) - 1:
        return float("inf")
    centroids = np.stack([features[labels == c].mean(axis=0) for c in np.unique(labels)])
    gaps = np.linalg.norm(centroids[:, None] - centroids[None, :], axis=-1)[np.triu_indices(k, 1)]
    if np.min(gaps) <= 1e-12:
        return float("inf")
    return float(davies_bouldin_score(features, labels))


def fedgw_cluster(interaction: np.ndarray, n_max: int, beta: float, seed: int, min_size: int = 1, *,
                  upv: str = "columns", minmax: bool = True, labels: str = "cluster_qr", db_on: str = "embedding",
                  db_strict: bool = True, candidates_n: Sequence[int] | None = None) -> tuple[np.ndarray, list[float]]:
    """004 Algorithm 2 on one cluster's P: labels (all 0 when there is no split) and DB_n per candidate n.

    Candidates are ``candidates_n`` (default 2 … n_max, capped at |C| − 1). ``min_size`` is a K_min (004 App. A
    Thm. A.5): a candidate with a group smaller than it is not eligible (its DB is still reported). The other
    keywords select the authors' code's reading or the text's (module docstring)."""
    from sklearn.cluster import SpectralClustering
    from sklearn.manifold import SpectralEmbedding

    size = interaction.shape[0]
    affinity = affinity_matrix(interaction, beta, upv, minmax)  # l. 3–4
    ns = list(range(2, n_max + 1)) if candidates_n is None else [int(n) for n in candidates_n]
    ns = [n for n in ns if 2 <= n <= size - 1]
    scores: list[float] = []
    candidates: list[np.ndarray] = []
    if np.ptp(affinity) > 1e-12:
        for n in ns:  # l. 5
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if labels == "cluster_qr":
                    lab = SpectralClustering(n_clusters=n, n_components=n, affinity="precomputed", random_state=seed,
                                             assign_labels="cluster_qr").fit_predict(affinity)  # l. 6
                else:
                    lab = SpectralClustering(n_clusters=n, affinity="precomputed", random_state=seed,
                                             assign_labels="kmeans", n_init=10).fit_predict(affinity)
                if db_on == "embedding":
                    features = SpectralEmbedding(n_components=n, affinity="precomputed",
                                                 random_state=seed).fit_transform(affinity)
                else:
                    features = affinity
            candidates.append(lab.astype(np.int64))
            scores.append(davies_bouldin(features, lab))  # l. 7
    below = (lambda s: s < 1.0) if db_strict else (lambda s: s <= 1.0)
    eligible = [i for i, lab in enumerate(candidates) if np.bincount(lab).min() >= min_size and below(scores[i])]
    if not eligible:  # l. 8–9: no DB below 1 (or no candidate keeps K_min clients per group)
        return np.zeros(size, dtype=np.int64), scores
    return candidates[min(eligible, key=lambda i: scores[i])], scores  # l. 11


def spectral_embedding_2d(affinity: np.ndarray, seed: int) -> np.ndarray:
    """The clients' 2-D spectral embedding of W (004 Fig. 3, 5, 6, 8: "scatter plot in the 2D plane with
    spectral embedding"), sklearn's Laplacian eigenmaps on the precomputed affinity, seeded; zeros when
    W is constant (nothing to embed)."""
    from sklearn.manifold import SpectralEmbedding

    size = affinity.shape[0]
    if size < 3 or np.ptp(affinity) <= 1e-12:
        return np.zeros((size, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SpectralEmbedding(n_components=2, affinity="precomputed", random_state=seed).fit_transform(affinity)


def cluster_sample_size(n_members: int, participation: float, minimum: int = 3) -> int:
    """K_n = max(ρ|C_n|, 3) (004 App. A eq. 26–28), rounded, never more than the cluster's size."""
    return int(min(n_members, max(int(round(participation * n_members)), minimum)))


def sample_size(params: Mapping[str, Any], n_members: int, n_clients: int) -> int:
    """K_n: min(round(ρK), |C_n|) (authors' code) or max(round(ρ|C_n|), min_sampled) (App. A eq. 26-28)."""
    rho = float(params["participation"])
    if params["cluster_sampling"] == "fixed":
        return int(min(n_members, max(int(round(rho * n_clients)), 2)))
    return cluster_sample_size(n_members, rho, int(params["min_sampled"]))


def candidate_ns(params: Mapping[str, Any], n_members: int, n_clients: int) -> list[int]:
    """Alg. 2's candidate numbers of clusters for a cluster of ``n_members``: 2 … min(|C|/K_n + 1, n_max) − 1
    (authors' code, ``n_range: code``) or 2 … n_max (004 App. D)."""
    n_max = int(params["n_max"])
    if params["n_range"] == "code":
        return list(range(2, min(n_members // sample_size(params, n_members, n_clients) + 1, n_max)))
    return list(range(2, n_max + 1))


def splittable(params: Mapping[str, Any], n_members: int, n_clients: int) -> bool:
    """Whether Alg. 2 may split a cluster of this size (≥ 3 members; with the re-split guard, more members
    than its per-round sample)."""
    if n_members < 3:
        return False
    return not params["resplit_guard"] or n_members > sample_size(params, n_members, n_clients)


def prioritised_sample(rng: np.random.Generator, candidates: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    """``size`` of ``candidates`` without replacement, P(k) ∝ exp(min c − c_k) over their participation
    counts ``c`` (004 §4.1: uniform sampling that prioritises infrequently sampled clients; the weights are
    the authors' ``explore`` rule). Equal counts give uniform sampling. Sorted global ids."""
    candidates = np.asarray(candidates, dtype=np.int64)
    if size >= candidates.size:
        return np.sort(candidates)
    c = np.asarray(counts, dtype=np.float64)[candidates]
    weights = np.exp(c.min() - c)
    picked = rng.choice(candidates, size=size, replace=False, p=weights / weights.sum())
    return np.sort(picked.astype(np.int64))


def _finite_or_none(values: Sequence[float]) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values]


def _choice(options: Sequence[str], default: str, description: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(options), "default": default, "description": description}


def _flag(default: bool, description: str) -> dict[str, Any]:
    return {"type": "boolean", "default": default, "description": description}


@register_strategy("fedgwc")
class GaussianWeightingClustering(Strategy):
    params_schema = {
        "participation": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.1,
                          "description": "participation ρ (004 App. F: 0.1); with cluster_sampling 'fixed' every "
                                         "cluster samples min(round(ρK), |C|), with 'proportional' "
                                         "max(round(ρ|C|), min_sampled)"},
        "min_sampled": {"type": "integer", "minimum": 2, "default": 3,
                        "description": "fewest clients a cluster samples per round with cluster_sampling "
                                       "'proportional', and n* of min_cluster_size 'n_star' (004 App. A eq. 26: 3)"},
        "alpha": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1, "default": None,
                  "description": "running-average coefficient of eq. 2-3; null = the cluster's participation "
                                 "rate K_n/|C_n| (004 App. F, the authors' code)"},
        "beta": {"type": "number", "exclusiveMinimum": 0, "default": 0.5, "description": "RBF spread (eq. 4)"},
        "epsilon": {"type": "number", "exclusiveMinimum": 0, "default": 1.0e-5,
                    "description": "Alg. 2 runs once the running MSE of the cluster's P is below this "
                                   "(004 App. F: 1e-5)"},
        "n_max": {"type": "integer", "minimum": 2, "default": 5,
                  "description": "cap on Alg. 2's candidates: n < min(|C|/K_n + 1, n_max) with n_range 'code' "
                                 "(theirs: 5), n ≤ n_max with 'n_max'"},
        "upv": _choice(["columns", "rows"], "columns", "UPVs from P's columns (authors' code) or rows (004 §4.2)"),
        "minmax": _flag(True, "min-max scale P to [0, 1] before eq. 4 (authors' code); false = 004's text"),
        "labels": _choice(["cluster_qr", "kmeans"], "cluster_qr",
                          "spectral clustering's label assignment: cluster_qr (authors' code) or k-means"),
        "db_on": _choice(["embedding", "affinity"], "embedding",
                         "Davies-Bouldin on W's n-dim spectral embedding (authors' code) or on W's rows (Alg. 2)"),
        "db_strict": _flag(True, "split only when min DB < 1 (authors' code); false = ≤ 1 (Alg. 2 l. 8)"),
        "n_range": _choice(["code", "n_max"], "code",
                           "candidates n = 2 … min(|C|/K_n + 1, n_max) − 1 (authors' code) or 2 … n_max (004 App. D)"),
        "cluster_sampling": _choice(["fixed", "proportional"], "fixed",
                                    "per-cluster sample min(round(ρK), |C|) (authors' code) or "
                                    "max(round(ρ|C|), min_sampled) (004 App. A eq. 26-28)"),
        "sampling": _choice(["uniform", "prioritised"], "uniform",
                            "uniform draws (authors' code, explore off) or priority to rarely sampled clients (§4.1)"),
        "min_cluster_size": {"oneOf": [{"type": "null"}, {"type": "integer", "minimum": 1},
                                       {"type": "string", "enum": ["n_star"]}], "default": None,
                             "description": "K_min: no split may leave fewer clients in a group; null = none "
                                            "(authors' code), 'n_star' = ceil(min_sampled / participation) "
                                            "(004 App. A Thm. A.5), or a number"},
        "resplit_guard": _flag(True, "only clusters larger than their per-round sample are ever split "
                                     "(authors' code); false = any cluster of 3 or more"),
        "rewards": _choice(["normalised", "raw"], "normalised",
                           "eq. 3 adds α·ω_k/Σω (authors' code) or α·ω_k (004's text)"),
        "moments": _choice(["weighted", "plain"], "weighted",
                           "eq. 1's mean and variance weighted by sample counts, population variance (authors' "
                           "code) or plain mean and sample variance"),
        "initial_p": _choice(["uniform", "zero"], "uniform", "P starts at 1/K² (authors' code) or 0 (Alg. 1 l. 4)"),
        "mse_scope": _choice(["sampled", "cluster"], "sampled",
                             "MSE of P's change over the co-sampled block (authors' code) or the whole cluster"),
        "patience": _flag(True, "Alg. 2 runs once MSE < ε held round(|C|/K_n) rounds in a row (authors' code); "
                                "false = at the first such round (Alg. 1 l. 15)"),
        "db_every_round": {"type": "boolean", "default": True,
                           "description": "record Alg. 2's Davies-Bouldin scores every round (trace only)"},
        "snapshot_every": {"type": ["integer", "null"], "minimum": 1, "default": None,
                           "description": "also record P, W and W's spectral embedding of every cluster every "
                                          "this many rounds (gwc_snapshots; trace only); null = only on the "
                                          "rounds where Alg. 2 decides"},
    }

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        n = ctx.n_clients
        self.weights = np.zeros(n)  # γ_k (eq. 2), initialised to 0
        start = 1.0 / (n * n) if self.params["initial_p"] == "uniform" else 0.0
        self.interaction = np.full((n, n), start)  # P (eq. 3): 1/K² (theirs) or the null matrix (Alg. 1 l. 4)
        self.mse: dict[int, float] = {0: 1.0}  # Alg. 1 l. 5
        self.patience: dict[int, int] = {0: 0}  # consecutive rounds with MSE < ε
        self.counts = np.zeros(n, dtype=np.int64)  # rounds each client has trained (sampling priority)
        self.next_id = 1
        self.last_events: list[dict[str, Any]] = []  # the splits of the latest aggregate() (with members; not state)

    # ----- client selection (Alg. 1 l. 9) --------------------------------------------------------------
    def sample_size(self, n_members: int) -> int:
        """K_n of a cluster of ``n_members`` (:func:`sample_size`)."""
        return sample_size(self.params, n_members, self.ctx.n_clients)

    def select_clients(self, rnd: int, engine_sample: np.ndarray) -> np.ndarray:
        """P_t = ∪_n P_t^(n): each cluster samples K_n of its available members (Alg. 1 l. 9)."""
        available = np.zeros(self.ctx.n_clients, dtype=bool)
        available[np.asarray(engine_sample, dtype=np.int64)] = True
        uniform = self.params["sampling"] == "uniform"
        chosen: list[np.ndarray] = []
        for cluster, members in self.assignment.clusters().items():
            size = self.sample_size(members.size)
            rng = self.ctx.generator(rnd, _STREAM_SAMPLE, cluster)
            counts = np.zeros_like(self.counts) if uniform else self.counts
            chosen.append(prioritised_sample(rng, members[available[members]], counts, size))
        return np.sort(np.concatenate(chosen))

    # ----- aggregation (Alg. 1 l. 11–19) ---------------------------------------------------------------
    @property
    def min_cluster_size(self) -> int:
        """K_min: 1 (none, the authors' code), the configured number, or n* = ⌈min_sampled / ρ⌉ (Thm. A.5)."""
        value = self.params["min_cluster_size"]
        if value is None:
            return 1
        if value == "n_star":
            return int(math.ceil(int(self.params["min_sampled"]) / float(self.params["participation"]) - 1e-9))
        return int(value)

    def candidate_ns(self, n_members: int) -> list[int]:
        """Alg. 2's candidate numbers of clusters for a cluster of ``n_members`` (:func:`candidate_ns`)."""
        return candidate_ns(self.params, n_members, self.ctx.n_clients)

    def splittable(self, n_members: int) -> bool:
        """Whether Alg. 2 may split a cluster of this size (:func:`splittable`)."""
        return splittable(self.params, n_members, self.ctx.n_clients)

    @classmethod
    def cannot_split(cls, params: Mapping[str, Any], population: Population) -> str | None:
        """FedGWC's first cluster is every client: where Alg. 2 may not split it (:func:`splittable`) or its
        candidate range is empty (:func:`candidate_ns`), no round can ever split, whatever the data. The usual
        cause: participation 1.0 (a split's own, which sets FedGWC's ``participation``), where the cluster's
        per-round sample K_n is the whole cluster."""
        p = cls.with_defaults(params)
        n = int(population.n_clients)
        k_n = sample_size(p, n, n)
        if not splittable(p, n, n):
            why = ("fewer than 3 clients" if n < 3 else
                   f"its per-round sample K_n = {k_n} (participation {float(p['participation']):g}) is the whole "
                   f"cluster of {n}, and resplit_guard splits only clusters larger than their sample")
            return f"FedGWC never splits its first cluster: {why}"
        if not candidate_ns(p, n, n):
            return (f"FedGWC's candidate range is empty: n < min(|C|/K_n + 1, n_max) = "
                    f"min({n}/{k_n} + 1, {int(p['n_max'])}) leaves no n ≥ 2 (participation {float(p['participation']):g})")
        return None

    def _alpha(self, n_sampled: int, n_members: int) -> float:
        alpha = self.params["alpha"]
        return float(alpha) if alpha is not None else min(1.0, n_sampled / n_members)

    def _cluster_kwargs(self) -> dict[str, Any]:
        p = self.params
        return {"upv": p["upv"], "minmax": bool(p["minmax"]), "labels": p["labels"], "db_on": p["db_on"],
                "db_strict": bool(p["db_strict"])}

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        clients = np.asarray(updates.clients, dtype=np.int64)
        n_samples = np.asarray(updates.n_samples, dtype=np.float64)
        self.counts[clients] += 1
        labels = self.assignment.labels.copy()
        events: list[dict[str, Any]] = []
        mse_now: dict[str, float] = {}
        db_by_cluster: dict[str, list[float | None]] = {}
        considered: list[int] = []
        sampled_per_cluster: dict[str, int] = {}
        candidates: dict[str, dict[str, Any]] = {}
        snapshots: dict[str, dict[str, Any]] = {}
        epsilon = float(self.params["epsilon"])
        for cluster, members in self.assignment.clusters().items():
            rows = np.flatnonzero(self.assignment.labels[clients] == cluster)
            sampled_per_cluster[str(cluster)] = int(rows.size)
            # what decides whether this cluster can ever split, recorded every round (a zero is read from the files)
            candidates[str(cluster)] = {"members": int(members.size), "k_n": self.sample_size(members.size),
                                        "splittable": self.splittable(members.size),
                                        "candidates": self.candidate_ns(members.size)}
            if rows.size < 2:
                continue
            sampled = clients[rows]
            omega = gaussian_rewards([updates.step_losses[r] for r in rows], n_samples[rows],
                                     self.params["moments"])  # eq. 1 (Alg. 1 l. 11)
            a = self._alpha(rows.size, members.size)
            self.weights[sampled] = (1 - a) * self.weights[sampled] + a * omega  # eq. 2
            if self.params["rewards"] == "normalised":
                omega = omega / max(float(omega.sum()), 1e-300)
            before = self.interaction[np.ix_(members, members)].copy()
            block = np.ix_(sampled, sampled)
            old_block = self.interaction[block].copy()
            self.interaction[block] = (1 - a) * old_block + a * omega[:, None]  # eq. 3 (l. 13)
            after = self.interaction[np.ix_(members, members)]
            if self.params["mse_scope"] == "sampled":
                raw = float(np.sum((self.interaction[block] - old_block) ** 2)) / rows.size ** 2
            else:
                raw = float(np.mean((after - before) ** 2))
            self.mse[cluster] = (1 - a) * self.mse.get(cluster, 1.0) + a * raw  # l. 14 (running, from 1)
            mse_now[str(cluster)] = self.mse[cluster]
            below = self.mse[cluster] < epsilon  # l. 15
            self.patience[cluster] = self.patience.get(cluster, 0) + 1 if below else 0
            k_n = self.sample_size(members.size)
            target = max(1, int(round(members.size / k_n))) if self.params["patience"] else 1
            converged = below and self.patience[cluster] >= target and self.splittable(members.size)
            every = self.params["snapshot_every"]
            snapshot = converged or (every is not None and updates.round % int(every) == 0)
            if members.size < 3 or not (converged or snapshot or self.params["db_every_round"]):
                continue
            seed = int(self.ctx.generator(updates.round, cluster, _STREAM_SPECTRAL).integers(2**31 - 1))
            ns = self.candidate_ns(members.size)
            local, scores = fedgw_cluster(after, int(self.params["n_max"]), float(self.params["beta"]), seed,
                                          self.min_cluster_size, candidates_n=ns, **self._cluster_kwargs())
            db_by_cluster[str(cluster)] = _finite_or_none(scores)
            if snapshot:
                snapshots[str(cluster)] = self._snapshot(members, after, local, scores, seed, converged)
            if not converged:
                continue
            considered.append(cluster)
            self.patience[cluster] = 0
            if local.max() == 0:
                # No split: MSE back to 1, so Alg. 2 runs again only once P has re-converged (the authors'
                # code, ``_run_clustering``).
                self.mse[cluster] = 1.0
                continue
            children = []  # l. 16–19: split, sub-matrices are rows/cols of P, MSE reset to 1
            for sub in np.unique(local):
                labels[members[local == sub]] = self.next_id
                self.mse[self.next_id] = 1.0
                self.patience[self.next_id] = 0
                children.append(self.next_id)
                self.next_id += 1
            self.mse.pop(cluster, None)
            self.patience.pop(cluster, None)
            events.append({"round": int(updates.round), "parent": cluster, "children": children,
                           "members": [as_int_list(members[local == s]) for s in np.unique(local)]})
        self.assignment = ClusterAssignment(labels)
        self.last_events = events
        finite_db = [v for s in db_by_cluster.values() for v in s if v is not None]
        diagnostics = {
            "epsilon": epsilon,
            "n_splits": len(events),
            "mse": mse_now,
            "min_mse": min(mse_now.values()) if mse_now else None,
            "davies_bouldin": db_by_cluster,
            "min_db": min(finite_db) if finite_db else None,
            "db_considered": considered,
            "sampled": sampled_per_cluster,
            "candidates": candidates,
            "split_events": [{k: v for k, v in e.items() if k != "members"} for e in events],
            "reward_weights": [float(w) for w in self.weights],  # γ_k of eq. 2, per client (trace)
        }
        if snapshots:
            diagnostics["gwc_snapshots"] = snapshots
        inherit = {c: e["parent"] for e in events for c in e["children"]}
        return StrategyResult(self.assignment, diagnostics, inherit=inherit)

    def _snapshot(self, members: np.ndarray, interaction: np.ndarray, local: np.ndarray, scores: Sequence[float],
                  seed: int, decided: bool) -> dict[str, Any]:
        """One cluster's P, W, W's 2-D spectral embedding, Alg. 2's labels and DB scores (004 Figs. 3, 5-8)."""
        affinity = affinity_matrix(interaction, float(self.params["beta"]), self.params["upv"],
                                   bool(self.params["minmax"]))
        return {"members": as_int_list(members), "P": interaction.tolist(), "W": affinity.tolist(),
                "embedding": spectral_embedding_2d(affinity, seed).tolist(), "labels": as_int_list(local),
                "davies_bouldin": _finite_or_none(scores), "decided": bool(decided)}

    def traffic(self, updates: RoundUpdates, model_bytes: int, n_models: int) -> Traffic:
        """Each sampled client receives its cluster's model and sends back its trained model and its training loss at
        every local step (float32), from which the server computes its Gaussian reward (eq. 1)."""
        n = len(updates.clients)
        losses = sum(len(ls) for ls in updates.step_losses) * LOSS_BYTES
        return Traffic(down=n * model_bytes, up=n * model_bytes + losses)

    # ----- checkpointing -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        import torch

        return {"labels": labels_tensor(self.assignment.labels), "weights": torch.as_tensor(self.weights),
                "interaction": torch.as_tensor(self.interaction), "counts": torch.as_tensor(self.counts),
                "mse": {int(k): float(v) for k, v in self.mse.items()},
                "patience": {int(k): int(v) for k, v in self.patience.items()}, "next_id": int(self.next_id)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.weights = np.asarray(state["weights"], dtype=np.float64).copy()
        self.interaction = np.asarray(state["interaction"], dtype=np.float64).copy()
        self.counts = np.asarray(state["counts"], dtype=np.int64).copy()
        self.mse = {int(k): float(v) for k, v in state["mse"].items()}
        self.patience = {int(k): int(v) for k, v in state.get("patience", {}).items()}
        self.next_id = int(state["next_id"])
