"""FedGWC: interaction-aware Gaussian weighting for clustered FL (004 §4, Algorithms 1–2, App. A, App. F).

Participation (004 §4.1, §4.3 and App. A eq. 26–28): every round each cluster's server samples its own
participants P_t^(n) ⊆ C^(n): K_n = max(round(ρ·|C_n|), 3) clients (capped at |C_n|), ρ = ``participation``,
"uniform random sampling … with a dynamic adjustment process to prioritize clients that are
infrequently sampled" (§4.1). The adjustment follows the authors' code (``explore``): client k of the
cluster is drawn with probability ∝ exp(c_min − c_k), c_k = number of rounds k has trained so far, so a
client sampled once more than the least-sampled one is e times less likely to be drawn. Draws come from
``ctx.generator(round, stream, cluster)``; the counts are part of ``state_dict`` (exact resume). The
engine's own sample (``engine.participation``) is the set of clients available that round; by default
everyone is.

Per cluster, every round, from the sampled members' per-step training losses l_k^{t,s}:
* Gaussian rewards r_k^{t,s} = exp(−(l_k^{t,s} − m^{t,s})² / (2 σ^{t,s}²)) with the members' mean and
  sample variance per step, averaged over steps: ω_k^t (eq. 1);
* Gaussian weights γ_k ← (1 − α) γ_k + α ω_k (eq. 2) and the interaction matrix
  P_kj ← (1 − α) P_kj + α ω_k for co-sampled (k, j) (eq. 3); weights and entries of unsampled clients stay
  unchanged (eq. 3, second case). α = ``alpha``, or by default the cluster's participation rate
  K_n / |C_n| (App. F: "α_t = α equal to the participation rate"; the authors' code uses the same ratio
  per cluster);
* MSE_(n): "initialized to 1 … allowing a gradual decrease" and "updated" each round (§4.3, Alg. 1 l. 5,
  14, 19), i.e. a running average like the weights: MSE ← (1 − α) MSE + α · mean((P_(n)^{t+1} − P_(n)^t)²)
  over the cluster's whole sub-matrix (the authors' code smooths the same way); reset to 1 for the
  children of a split, so a new cluster cannot split again at once. When it falls below ε the cluster is
  considered for a split (Alg. 1 l. 15): unbiased perception vectors and the RBF affinity
  W_kj = exp(−β ‖v_k^j − v_j^k‖²) (eq. 4), spectral clustering (sklearn, affinity="precomputed", seeded)
  for n = 2 … n_max, Davies–Bouldin on the rows of W; no split when every DB > 1, else n = argmin DB
  (Alg. 2). Recursive per cluster (Alg. 1 l. 8).
* Over-splitting guard K_min (004 App. A Thm. A.5, ``min_cluster_size``): a candidate of Alg. 2 that
  leaves a group with fewer than K_min clients is not eligible; by default K_min = n* = ⌈3/ρ⌉, the
  smallest cluster that still samples ρ|C| ≥ 3 clients, so splitting never raises the sampling rate.
  (The authors' code has a similar guard: only clusters larger than the per-round sample are split.)

Diagnostics (every round, columns of server.parquet): ``epsilon``; ``mse`` {cluster: MSE of P_(n)} and
``min_mse`` for the clusters updated this round; ``davies_bouldin`` {cluster: [DB_2, …]} and ``min_db``;
``db_considered`` (the clusters whose MSE was below ε, i.e. where Alg. 2 decided); ``sampled``
{cluster: K_n}. With ``db_every_round`` (default) Alg. 2's scores are computed for every updated cluster
every round, as a trace for the report; only those of clusters with MSE < ε can split.

Matrix snapshots (004 Figs. 3, 5-8): ``gwc_snapshots`` {cluster: {members, P, W, embedding, labels,
davies_bouldin, decided}} on every round where Alg. 2 decides (MSE < ε), and every ``snapshot_every``
rounds when set; ``embedding`` is W's seeded 2-D spectral embedding (sklearn). Read them with
cflcore.report.fedgwc_figures.matrix_snapshots.

Differences from the authors' code (davedleo/FedGWC, agents/servers.py ``ServerFedGWC``), read line by line:
* fixed here: after Alg. 2 decides not to split, the cluster's MSE goes back to 1 (their ``_run_clustering``);
  before, a converged cluster re-ran Alg. 2 every round until a noisy DB dipped below 1.
* kept as 004 writes it (deliberate departures from their code):
  - eq. 3 adds α·ω_k; their code adds α·ω_k / Σ_{j∈P_t} ω_j (rewards normalised over the round's sample);
  - the UPV of client k is row k of P (§4.2: "the k-th row of P"); their code uses the columns (``W.T``),
    and min-max scales P to [0, 1] before eq. 4, so their β acts on a rescaled matrix;
  - Alg. 2 l. 7 scores DB on the rows of W; their code scores it on W's spectral embedding with n
    components, and assigns labels with ``cluster_qr`` (ours: k-means, n_init 10, as in Ng et al.);
  - m and σ² of eq. 1 are the plain mean and the sample variance (ddof 1); theirs weight by local sample
    counts and use the population variance (+1e-16); their optional "loss sampling" (synthetic losses
    drawn from N(m, σ²) up to ``loss_sampling_size``) is a no-op at their defaults and is not implemented;
  - MSE is the mean squared change over the cluster's whole sub-matrix; theirs is over the co-sampled
    block (sse / |P_t|²) of the normalised entries. Both plateau at a floor set by α and the reward
    variance (constant α never lets P settle): here about ρ²·α²·Var(ω), e.g. 0.5e-3 to 2e-3 at 30 clients
    and ρ = 0.5, so 004's ε = 1e-5 (calibrated for theirs at K = 100, ρ = 0.1) is never reached there;
  - a cluster samples max(round(ρ|C_n|), 3) clients (App. A eq. 26-28, App. F "participation per
    cluster"); theirs samples min(round(ρK), |C_n|) in every cluster, so the total grows with the clusters;
  - they split only after MSE < ε held for round(|C_n| / N) consecutive rounds ("patience"); 004 has no
    patience and neither do we;
  - P starts at 0 (Alg. 1 l. 4); theirs at 1/K²;
  - n runs over 2…n_max (App. D: n_max 5-10); theirs over 2…min(|C|/N + 1, 5) − 1;
  - K_min (Thm. A.5) blocks candidates leaving a small group; theirs allows any split but never
    re-splits a cluster of ≤ N clients;
  - their ``explore`` sampling (priority to rarely sampled clients) is off by default and its counters are
    never incremented, so their runs sample uniformly; we follow §4.1's prioritised sampling;
  - S: they run a fixed number of local iterations (7, batch 64, drop_last); we run the engine's local
    epochs, so S = epochs × batches;
  - DB: split when min DB ≤ 1 (Alg. 2 l. 8); theirs requires < 1.

Documented degenerate behaviour (never NaN): steps are aligned up to the shortest loss trace of the
cluster's sampled members; a step where every member has the same loss (σ = 0) rewards everyone 1;
a cluster with fewer than two sampled members is not updated; clusters with fewer than three members
are never split (a UPV needs K − 2 ≥ 1 entries); a clustering whose centroids coincide (e.g. identical
rows of W) scores DB = +∞ instead of sklearn's 0 (recorded as null).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from .base import ClusterAssignment, RoundUpdates, Strategy, StrategyContext, StrategyResult, register_strategy
from ._common import as_int_list, labels_tensor

_STREAM_SAMPLE, _STREAM_SPECTRAL = 0x6A5, 0x6C


def gaussian_rewards(step_losses: Sequence[np.ndarray]) -> np.ndarray:
    """ω_k: step-averaged Gaussian rewards of each client's loss trace w.r.t. the group (004 eq. 1)."""
    length = min(len(l) for l in step_losses)
    if length == 0:
        return np.ones(len(step_losses))
    losses = np.stack([np.asarray(l, dtype=np.float64)[:length] for l in step_losses])  # (K, S)
    mean = losses.mean(axis=0)
    var = losses.var(axis=0, ddof=1)
    dev2 = (losses - mean) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        rewards = np.where(var > 0, np.exp(-dev2 / (2.0 * np.where(var > 0, var, 1.0))), 1.0)
    return rewards.mean(axis=1)


def upv_affinity(interaction: np.ndarray, beta: float) -> np.ndarray:
    """W_kj = exp(−β ‖v_k^j − v_j^k‖²) (004 eq. 4), v_k^j = row k of P without entries k and j.
    Vectorised: ‖v_k^j − v_j^k‖² = ‖P_k − P_j‖² − (P_kk − P_jk)² − (P_kj − P_jj)²."""
    p = np.asarray(interaction, dtype=np.float64)
    sq = (p * p).sum(axis=1)
    row_dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * p @ p.T, 0.0)
    diag = np.diag(p)
    own = (diag[:, None] - p.T) ** 2  # (P_kk − P_jk)²
    other = (p - diag[None, :]) ** 2  # (P_kj − P_jj)²
    upv = np.maximum(row_dist - own - other, 0.0)
    np.fill_diagonal(upv, 0.0)
    return np.exp(-beta * upv)


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


def fedgw_cluster(interaction: np.ndarray, n_max: int, beta: float, seed: int,
                  min_size: int = 1) -> tuple[np.ndarray, list[float]]:
    """004 Algorithm 2 on one cluster's P: labels (all 0 when there is no split) and DB_n for n = 2…n_max.

    ``min_size`` is K_min of 004 App. A Thm. A.5: a candidate with a group smaller than it is not eligible
    (its DB is still reported)."""
    from sklearn.cluster import SpectralClustering

    size = interaction.shape[0]
    affinity = upv_affinity(interaction, beta)  # l. 3–4
    scores: list[float] = []
    candidates: list[np.ndarray] = []
    if np.ptp(affinity) > 1e-12:
        for n in range(2, min(n_max, size - 1) + 1):  # l. 5
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                labels = SpectralClustering(n_clusters=n, affinity="precomputed", random_state=seed,
                                            assign_labels="kmeans", n_init=10).fit_predict(affinity)  # l. 6
            candidates.append(labels.astype(np.int64))
            scores.append(davies_bouldin(affinity, labels))  # l. 7
    eligible = [i for i, lab in enumerate(candidates) if np.bincount(lab).min() >= min_size and scores[i] <= 1.0]
    if not eligible:  # l. 8–9: every DB > 1 (or no candidate keeps K_min clients per group)
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


@register_strategy("fedgwc")
class GaussianWeightingClustering(Strategy):
    params_schema = {
        "participation": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.1,
                          "description": "share ρ of each cluster's clients sampled per round, at least "
                                         "min_sampled (004 App. A eq. 26-28; App. F: 0.1)"},
        "min_sampled": {"type": "integer", "minimum": 2, "default": 3,
                        "description": "fewest clients a cluster samples per round (004 App. A eq. 26: 3)"},
        "alpha": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 1, "default": None,
                  "description": "running-average coefficient of eq. 2-3; null = the cluster's participation "
                                 "rate K_n/|C_n| (004 App. F)"},
        "beta": {"type": "number", "exclusiveMinimum": 0, "default": 0.5, "description": "RBF spread (eq. 4)"},
        "epsilon": {"type": "number", "exclusiveMinimum": 0, "default": 1.0e-5,
                    "description": "split a cluster once the MSE change of its interaction matrix is below this "
                                   "(004 App. F: 1e-5)"},
        "n_max": {"type": "integer", "minimum": 2, "default": 5},
        "min_cluster_size": {"type": ["integer", "null"], "minimum": 1, "default": None,
                             "description": "K_min: no split may leave fewer clients in a group; null = "
                                            "ceil(min_sampled / participation), 004 App. A Thm. A.5's n*"},
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
        self.interaction = np.zeros((n, n))  # P (eq. 3), initialised to the null matrix (Alg. 1 l. 4)
        self.mse: dict[int, float] = {0: 1.0}  # Alg. 1 l. 5
        self.counts = np.zeros(n, dtype=np.int64)  # rounds each client has trained (sampling priority)
        self.next_id = 1
        self.last_events: list[dict[str, Any]] = []  # the splits of the latest aggregate() (with members; not state)

    # ----- client selection (Alg. 1 l. 9) --------------------------------------------------------------
    def select_clients(self, rnd: int, engine_sample: np.ndarray) -> np.ndarray:
        """P_t = ∪_n P_t^(n): each cluster samples K_n of its available members, prioritising the rarely
        sampled ones (004 §4.1, Alg. 1 l. 9, App. A eq. 28)."""
        available = np.zeros(self.ctx.n_clients, dtype=bool)
        available[np.asarray(engine_sample, dtype=np.int64)] = True
        rho, minimum = float(self.params["participation"]), int(self.params["min_sampled"])
        chosen: list[np.ndarray] = []
        for cluster, members in self.assignment.clusters().items():
            size = cluster_sample_size(members.size, rho, minimum)
            rng = self.ctx.generator(rnd, _STREAM_SAMPLE, cluster)
            chosen.append(prioritised_sample(rng, members[available[members]], self.counts, size))
        return np.sort(np.concatenate(chosen))

    # ----- aggregation (Alg. 1 l. 11–19) ---------------------------------------------------------------
    @property
    def min_cluster_size(self) -> int:
        """K_min (004 App. A Thm. A.5): the configured value, else n* = ⌈min_sampled / ρ⌉, the smallest
        cluster that still samples ρ|C| ≥ min_sampled clients, so splits never raise the sampling rate."""
        if self.params["min_cluster_size"] is not None:
            return int(self.params["min_cluster_size"])
        return int(math.ceil(int(self.params["min_sampled"]) / float(self.params["participation"]) - 1e-9))

    def _alpha(self, n_sampled: int, n_members: int) -> float:
        alpha = self.params["alpha"]
        return float(alpha) if alpha is not None else n_sampled / n_members

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        clients = np.asarray(updates.clients, dtype=np.int64)
        self.counts[clients] += 1
        labels = self.assignment.labels.copy()
        events: list[dict[str, Any]] = []
        mse_now: dict[str, float] = {}
        db_by_cluster: dict[str, list[float | None]] = {}
        considered: list[int] = []
        sampled_per_cluster: dict[str, int] = {}
        snapshots: dict[str, dict[str, Any]] = {}
        epsilon = float(self.params["epsilon"])
        for cluster, members in self.assignment.clusters().items():
            rows = np.flatnonzero(self.assignment.labels[clients] == cluster)
            sampled_per_cluster[str(cluster)] = int(rows.size)
            if rows.size < 2:
                continue
            sampled = clients[rows]
            omega = gaussian_rewards([updates.step_losses[r] for r in rows])  # eq. 1 (Alg. 1 l. 11)
            a = self._alpha(rows.size, members.size)
            self.weights[sampled] = (1 - a) * self.weights[sampled] + a * omega  # eq. 2
            before = self.interaction[np.ix_(members, members)].copy()
            block = np.ix_(sampled, sampled)
            self.interaction[block] = (1 - a) * self.interaction[block] + a * omega[:, None]  # eq. 3 (l. 13)
            after = self.interaction[np.ix_(members, members)]
            raw = float(np.mean((after - before) ** 2))
            self.mse[cluster] = (1 - a) * self.mse.get(cluster, 1.0) + a * raw  # l. 14 (running, from 1)
            mse_now[str(cluster)] = self.mse[cluster]
            converged = self.mse[cluster] < epsilon  # l. 15
            every = self.params["snapshot_every"]
            snapshot = converged or (every is not None and updates.round % int(every) == 0)
            if members.size < 3 or not (converged or snapshot or self.params["db_every_round"]):
                continue
            seed = int(self.ctx.generator(updates.round, cluster, _STREAM_SPECTRAL).integers(2**31 - 1))
            local, scores = fedgw_cluster(after, int(self.params["n_max"]), float(self.params["beta"]), seed,
                                          self.min_cluster_size)
            db_by_cluster[str(cluster)] = _finite_or_none(scores)
            if snapshot:
                snapshots[str(cluster)] = self._snapshot(members, after, local, scores, seed, converged)
            if not converged:
                continue
            considered.append(cluster)
            if local.max() == 0:
                # No split: MSE back to 1, so Alg. 2 runs again only once P has re-converged (the authors'
                # code, ``_run_clustering``). Without it a converged cluster re-ran Alg. 2 every round and
                # split at the first round whose noisy DB dipped below 1.
                self.mse[cluster] = 1.0
            if local.max() > 0:  # l. 16–19: split, sub-matrices are rows/cols of P, MSE reset to 1
                children = []
                for sub in np.unique(local):
                    labels[members[local == sub]] = self.next_id
                    self.mse[self.next_id] = 1.0
                    children.append(self.next_id)
                    self.next_id += 1
                self.mse.pop(cluster, None)
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
        affinity = upv_affinity(interaction, float(self.params["beta"]))
        return {"members": as_int_list(members), "P": interaction.tolist(), "W": affinity.tolist(),
                "embedding": spectral_embedding_2d(affinity, seed).tolist(), "labels": as_int_list(local),
                "davies_bouldin": _finite_or_none(scores), "decided": bool(decided)}

    # ----- checkpointing -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        import torch

        return {"labels": labels_tensor(self.assignment.labels), "weights": torch.as_tensor(self.weights),
                "interaction": torch.as_tensor(self.interaction), "counts": torch.as_tensor(self.counts),
                "mse": {int(k): float(v) for k, v in self.mse.items()}, "next_id": int(self.next_id)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.weights = np.asarray(state["weights"], dtype=np.float64).copy()
        self.interaction = np.asarray(state["interaction"], dtype=np.float64).copy()
        self.counts = np.asarray(state["counts"], dtype=np.int64).copy()
        self.mse = {int(k): float(v) for k, v in state["mse"].items()}
        self.next_id = int(state["next_id"])
