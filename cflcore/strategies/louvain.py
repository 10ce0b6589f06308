"""Louvain CFL (002): community detection on a client similarity graph, recomputed every round.

Aggregation (002 Algorithm 1): the client graph of known clients is updated with this round's
pairwise distances (trusted distance, eq. 2, or cosine), turned into similarities by min–max
normalisation (eq. 3) and cubed (``exponent``, §IV-A); Louvain communities (networkx; node order fixed per
run by default, ``louvain_order``) give the partition; each community model is the mean of its members' models (eq. 1),
which the engine's FedAvg aggregation computes. Cluster ids are kept stable across rounds by matching
communities to the previous partition (Hungarian on overlaps); ``inherit`` seeds every community's
model from the previous cluster most of its members came from.

Attribution (002 Algorithm 2, ``configure``/``personalised``): ``avg`` = the global model, the mean of
the community models (Alg. 1, l. 7); ``1nn`` = the community model nearest to the client's last local
model; ``wnn`` = the k = 3 nearest community models mixed with weights u = softmax(−β·trusted) (eq. 4,
β = 1). Eq. 4 as printed also multiplies by 1/|N_q|, which would make the weights sum to 1/k and shrink
the model towards zero; the u are already normalised, so the mix uses u alone (a convex mix). A client
never seen before gets the global model (Alg. 2, l. 4).

``late`` (002 §V-B2, after Espinoza-Castellon et al. 2022; ``late_start``): AVG while training rounds 0..``late_round``
(0-based, as in history.parquet; 002 clusters "at round 10" of Flower's 1-based rounds, our round 9, the
default), with Louvain's communities recorded every round as for AVG (002 Fig. 5c shows Late's ARI
converging before round 10, "following the clustering phase applied at round 10, the later cluster
personalization phase maintains the communities"); the communities found after ``late_round``'s training
are then frozen: no later round re-clusters, each community model is the mean of its members (eq. 1) and
each client is evaluated with its own community's model (from ``late_round`` on; 1NN's attribution with the frozen
partition). It trains (from ``late_round`` + 1 on) from the global model W_t (``late_start: global``, the default:
002 explains Late's low silhouette by its "reliance on a unique global model") or from its own community's model
(``own``, this package's earlier reading). A client never
seen by then stays a newcomer and gets the global model (Alg. 2, l. 4). The trusted distances are still
measured and recorded every round (divergence.parquet: the method's space, for its silhouette). A
``late_round`` at or after the last round is AVG throughout.

Global model W_t (002 Alg. 1, l. 7; ``global_model``): the unweighted mean of the community models, for
every attribution; the engine scores it beside the personalised models (002 Fig. 6).

Partial participation (``partial_participation``; docs/design-notes.md "Louvain CFL under partial
participation"):

* ``latest`` (default; 002 eq. 1 and its authors' graph builder, which keeps each node's latest model and
  recomputes every pair each round, then averages all members of a community): every client keeps its latest
  model (the one it sent the last time it was sampled); each round the trusted-distance graph is recomputed
  over all clients seen so far from their latest models, and each community model is eq. 1, the unweighted
  mean of *all* its members' latest models (:attr:`StrategyResult.models`; with full participation this is
  the engine's unweighted FedAvg of the sampled members, which the engine computes itself). Client-to-
  community distances (1NN / WNN) are measured for every seen client from its latest model. Memory: one
  (n_clients × P) float matrix kept between rounds and checkpointed (``latest``).
* ``co-sampled`` (this package's earlier reading of "a subset of the client distances", 002 §IV-B): edges are
  updated only between co-sampled clients (older edges stay); a community model is the mean of the members
  sampled that round (the engine's FedAvg); client-to-community distances are measured for the sampled
  clients against those means, and communities without a sampled member that round are not candidates for
  1NN / WNN.

In both, never-seen clients sit in cluster 0 (the initial model) until their first round.

Similarity (``similarity``): ``normalised`` = 002 eq. 3 then cubed, s = ((max − v)/(max − min))^e;
``raw`` = (max − v)^e without the min–max scaling (002 Fig. 2's "non-normalized" trial). The two differ
by the factor (max − min)^e, and modularity is invariant to scaling every edge weight, so Louvain's
partition is the same up to floating point; the similarity *distributions* differ (002 Fig. 2).

Layers (eq. 2 is a product over layers): ``layer_sizes`` (parameter counts per layer, in flat order),
else the engine's blocks (``eq2_product``: ``array``, the default, one factor per parameter array as the authors'
``methods.deep_relative_trust`` takes one per weight array, ``ctx.array_sizes``; ``module``, one factor per module,
its weight and bias merged, ``ctx.layer_sizes``), else the whole vector is ONE layer and trusted
distance reduces to ‖w_a − w_b‖ / ‖w_a‖. Eq. 2 is asymmetric; the graph uses the mean of both
directions. Models come from ``RoundUpdates.params`` (start + delta): when the engine did not keep the
start vectors (they exceed ``engine.memory_budget_mb``) the run stops with a ConfigError naming the
budget needed; distances between deltas are not the method's distances and are never substituted.

Resolution (002 §IV-B): "Low-resolution values lead to numerous small clusters, while high values lead
to a limited number of large clusters", the convention of python-louvain's ``best_partition``
(Lambiotte's Markov time r, modularity Σ_c [r·L_c/m − (d_c/2m)²]). networkx's ``resolution`` γ
multiplies the null-model term instead (Σ_c [L_c/m − γ(d_c/2m)²]: γ > 1 gives smaller communities), and
the two objectives are proportional for γ = 1/r. ``resolution`` here follows 002 and is passed to
networkx as 1/resolution; 002's default and ours is 1.0, where both conventions agree.

Departures from 002's authors' code (albenoit/DeepLearningTools), each an option whose default is the code's
behaviour where 002's numbers came from it (docs/seed-text-vs-code.md):

=====================  ==========================================  ============================================
parameter              default (the authors' code, or 002's text)  other value (this package's earlier reading)
=====================  ==========================================  ============================================
``eq2_product``        ``array``: one factor of eq. 2 per weight    ``module``: one factor per module (weight and
                       array (``methods.deep_relative_trust``;      bias merged, ``ModelLayout.layer_sizes``): 5
                       about 137 for MobileNet v1)                  factors for tinyvgg; smaller trusted distances
                                                                    make WNN's exp(−β·d) weights nearly uniform
``louvain_order``      ``fixed``: one networkx seed for the whole   ``per-round``: networkx re-seeded every round
                       run, so Louvain is deterministic in its      (node order shuffled anew)
                       graph (python-louvain ``randomize=False``)
``late_start``         ``global``: after ``late_round`` clients     ``own``: each frozen community trains from
                       train from W_t (002 §V-B2's "reliance on a   its own model, as 1NN does
                       unique global model"; no authors' code)
silhouette             both recorded: ``silhouette_method``         sklearn's (``silhouette_method``), over the
                       (sklearn) and ``silhouette_authors``         sampled clients
                       (``ClusteringEvaluator.silhouette_score``:
                       the node counted in a, nearest cluster by
                       centre, singletons ≈ 1)
=====================  ==========================================  ============================================

Smaller differences kept as they are (not options): the authors take t(i, j) one way for i < j, we average both
directions; their WNN starts after round 2, ours as soon as a client has distances; when max = min they return
the distances, we set every similarity to 1; their per-round ARI is −1 until every node has been seen, ours
counts unseen clients in cluster 0.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..clustering.graph import community_labels, normalised_similarity, raw_similarity
from ..clustering.partition import inherit_by_overlap, match_cluster_ids
from ..errors import ConfigError
from .base import (ClusterAssignment, EvaluateFn, RoundUpdates, StartSpec, Strategy, StrategyContext,
                           StrategyResult, register_strategy)
from ._common import labels_tensor

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch

NEWCOMER = 0  # cluster of clients never sampled yet (they start from the global model)
_CHUNK = 1 << 20


def layer_slices(layer_sizes: Sequence[int]) -> list[slice]:
    bounds = np.concatenate([[0], np.cumsum(np.asarray(layer_sizes, dtype=np.int64))])
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _layer_pairwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared pairwise distances (n × n) and squared norms (n,) of the rows of one layer, in float64, on x's device.
    Rows are centred per column block before the Gram product: distances are translation-invariant and
    centring avoids the cancellation of ‖a‖² + ‖b‖² − 2ab for nearly equal models."""
    import torch
    n, p = x.shape
    gram = torch.zeros(n, n, dtype=torch.float64, device=x.device)
    sq_norm = torch.zeros(n, dtype=torch.float64, device=x.device)
    for start in range(0, p, _CHUNK):
        block = x[:, start:start + _CHUNK].to(torch.float64)
        sq_norm += (block * block).sum(dim=1)
        block = block - block.mean(dim=0, keepdim=True)
        gram += block @ block.T
    diag = torch.diagonal(gram)
    sq_dist = torch.clamp(diag[:, None] + diag[None, :] - 2.0 * gram, min=0.0)
    sq_dist.fill_diagonal_(0.0)
    return sq_dist, sq_norm


def _relative(distance: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """‖a − b‖ / ‖a‖ row-wise; a zero-norm reference keeps the absolute distance (no division by 0)."""
    safe = np.where(norm > 0, norm, 1.0)
    return distance / safe[:, None]


def trusted_distance_matrix(models: torch.Tensor, layers: Sequence[slice]) -> np.ndarray:
    """Pairwise trusted distance (002 eq. 2), symmetrised: ½ (t(a, b) + t(b, a)),
    t(a, b) = Π_l (1 + ‖w_{a,l} − w_{b,l}‖ / ‖w_{a,l}‖) − 1."""
    import torch
    n = models.shape[0]
    log_prod = np.zeros((n, n))
    per_layer = [_layer_pairwise(models[:, sl]) for sl in layers]  # on the device; one copy to the host below
    sq_dists, sq_norms = (torch.stack(ts).cpu().numpy() for ts in zip(*per_layer)) if per_layer else ((), ())
    for sq_dist, sq_norm in zip(sq_dists, sq_norms):
        log_prod += np.log1p(_relative(np.sqrt(sq_dist), np.sqrt(sq_norm)))
    directed = np.expm1(log_prod)
    sym = 0.5 * (directed + directed.T)
    np.fill_diagonal(sym, 0.0)
    return sym


def trusted_to_references(models: torch.Tensor, references: torch.Tensor, layers: Sequence[slice]) -> np.ndarray:
    """t(w_q, W_c) of every model (rows) to every reference (community model), (n × K) — 002 eq. 2, 4."""
    import torch
    n, k = models.shape[0], references.shape[0]
    log_prod = np.zeros((n, k))
    sq_dists = torch.zeros(len(layers), n, k, dtype=torch.float64, device=models.device)
    sq_norms = torch.zeros(len(layers), n, dtype=torch.float64, device=models.device)
    for sq_dist, sq_norm, sl in zip(sq_dists, sq_norms, layers):
        for start in range(sl.start, sl.stop, _CHUNK):
            stop = min(start + _CHUNK, sl.stop)
            a = models[:, start:stop].to(torch.float64)
            b = references[:, start:stop].to(torch.float64)
            sq_norm += (a * a).sum(dim=1)
            sq_dist += torch.cdist(a, b).pow(2)
    for sq_dist, sq_norm in zip(sq_dists.cpu().numpy(), sq_norms.cpu().numpy()):  # one copy each to the host
        log_prod += np.log1p(_relative(np.sqrt(sq_dist), np.sqrt(sq_norm)))
    return np.expm1(log_prod)


def cosine_distance_matrix(models: torch.Tensor) -> np.ndarray:
    from ..clustering.divergence import cosine_divergence_matrix

    return cosine_divergence_matrix(models, "float64")


def require_models(updates: RoundUpdates) -> torch.Tensor:
    """The clients' new models (002 compares models, eq. 2), or a ConfigError when the engine dropped the
    start vectors because they exceed ``engine.memory_budget_mb``."""
    if updates.start is None:
        needed = updates.deltas.numel() * updates.deltas.element_size()
        needed_mb = int(math.ceil(needed / 2 ** 20))
        raise ConfigError(f"engine.memory_budget_mb: louvain needs the clients' models, and this round's "
                          f"{updates.deltas.shape[0]} start vectors take {needed_mb} MB, more than the budget; "
                          f"allowed: engine.memory_budget_mb >= {needed_mb}")
    return updates.params


def wnn_weights(distances: Mapping[int, float], k: int, beta: float) -> dict[int, float]:
    """002 eq. 4: the k nearest communities N_q, u_{q,j} = exp(−β d_j) / Σ_{l∈N_q} exp(−β d_l)."""
    nearest = sorted(distances.items(), key=lambda kv: (kv[1], kv[0]))[:k]
    ids = [c for c, _ in nearest]
    d = np.array([v for _, v in nearest], dtype=np.float64)
    logits = -beta * (d - d.min())  # shift for stability; cancels in the ratio
    u = np.exp(logits) / np.exp(logits).sum()
    return {int(c): float(w) for c, w in zip(ids, u)}


@register_strategy("louvain")
class LouvainCommunities(Strategy):
    needs_start_vectors = True  # eq. 2 compares the clients' models (start + delta), not their deltas
    params_schema = {
        "attribution": {"enum": ["avg", "1nn", "wnn", "late"], "default": "1nn",
                        "description": "002 Alg. 2: avg = global model W_t, 1nn = nearest community, wnn = eq. 4 mix; "
                                       "late = AVG, then the communities of round late_round frozen (002 §V-B2)"},
        "late_round": {"type": "integer", "minimum": 0, "default": 9,
                       "description": "late: the 0-based round whose communities are frozen (002 §V-B2 clusters at "
                                      "its round 10 of 1-based rounds, after Espinoza-Castellon et al. 2022)"},
        "resolution": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                       "description": "002's convention: higher = fewer, larger communities (networkx gets 1/resolution)"},
        "exponent": {"type": "number", "exclusiveMinimum": 0, "default": 3, "description": "the power of the edge weights (002 eq. 3)"},
        "k": {"type": "integer", "minimum": 1, "default": 3, "description": "neighbours of WNN (eq. 4)"},
        "beta": {"type": "number", "minimum": 0, "default": 1.0, "description": "WNN temperature (eq. 4)"},
        "distance": {"enum": ["trusted", "cosine"], "default": "trusted", "description": "trusted (002 eq. 2; needs the start vectors: a run whose vectors exceed engine.memory_budget_mb stops with an error naming it) or cosine"},
        "layer_sizes": {"type": ["array", "null"], "items": {"type": "integer", "minimum": 1}, "default": None, "description": "parameter counts per layer of eq. 2's product, in flat order (null: from the model, by eq2_product)"},
        "partial_participation": {
            "enum": ["latest", "co-sampled"], "default": "latest",
            "description": "latest = every client keeps its latest model, the graph is recomputed over all seen clients "
                           "and a community model averages all its members' latest models (002 eq. 1, authors' code); "
                           "co-sampled = edges only between clients sampled together, community model = mean of the "
                           "sampled members (the earlier reading)"},
        "eq2_product": {"enum": ["array", "module"], "default": "array",
                        "description": "002 eq. 2's product: one factor per parameter array (authors' code) or per "
                                       "module (weight and bias merged); ignored when layer_sizes is given"},
        "louvain_order": {"enum": ["fixed", "per-round"], "default": "fixed",
                          "description": "fixed = one networkx seed per run, Louvain deterministic in its graph "
                                         "(authors: python-louvain randomize=False); per-round = re-seeded each round"},
        "late_start": {"enum": ["global", "own"], "default": "global",
                       "description": "late, after late_round: clients train from the global model W_t (002 §V-B2) "
                                      "or from their own frozen community's model"},
        "similarity": {"enum": ["normalised", "raw"], "default": "normalised",
                       "description": "normalised = 002 eq. 3 then ^exponent; raw = (max - v)^exponent without the "
                                      "min-max scaling (002 Fig. 2's non-normalised trial; same Louvain partition)"},
    }

    @classmethod
    def replay_clusterer(cls, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The communities of the normalised similarity graph of the recorded distance (002 eq. 3, Algorithm 1
        l. 3; with full participation every client's distance is fresh)."""
        return {"clusterer": "louvain", "similarity": "normalised", "exponent": float(params["exponent"]),
                "resolution": float(params["resolution"])}

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        engine = "array_sizes" if self.params["eq2_product"] == "array" else "layer_sizes"
        sizes = self.params["layer_sizes"] or getattr(ctx, engine, None) or [ctx.n_params]
        if int(np.sum(sizes)) != ctx.n_params:
            raise ConfigError(f"louvain.layer_sizes: sums to {int(np.sum(sizes))}, the model has "
                              f"{ctx.n_params} parameters; allowed: sizes summing to {ctx.n_params} or null")
        self.layers = layer_slices(sizes)
        n = ctx.n_clients
        self.distance = np.full((n, n), np.nan)
        self.seen = np.zeros(n, dtype=bool)
        self.client_distance: dict[int, dict[int, float]] = {}
        self.communities: list[int] = []
        self.next_id = NEWCOMER + 1
        self.frozen = False  # late: the partition of round late_round is final
        self.latest: torch.Tensor | None = None  # partial_participation latest: (n × P) latest models, row q = client q

    @property
    def keeps_latest(self) -> bool:
        return self.params["partial_participation"] == "latest"

    def similarity(self, distance: np.ndarray) -> np.ndarray:
        """Edge weights of the client graph from distances: 002 eq. 3 then cubed, or the raw variant."""
        if self.params["similarity"] == "raw":
            return raw_similarity(distance, float(self.params["exponent"]))
        return normalised_similarity(distance, float(self.params["exponent"]))

    def pairwise(self, models: torch.Tensor) -> np.ndarray:
        """Symmetric client-to-client distances of ``models`` (rows): trusted (002 eq. 2) or cosine."""
        if self.params["distance"] == "trusted":
            return trusted_distance_matrix(models, self.layers)
        return cosine_distance_matrix(models)

    def remember(self, clients: np.ndarray, models: torch.Tensor) -> None:
        """Store the sampled clients' new models as their latest ones (``latest`` mode)."""
        import torch
        if self.latest is None:
            self.latest = torch.zeros(self.ctx.n_clients, models.shape[1], dtype=models.dtype, device=models.device)
        self.latest[torch.as_tensor(clients, device=self.latest.device)] = models.to(self.latest.dtype)

    def community_models(self, labels: np.ndarray, clients: np.ndarray) -> dict[int, torch.Tensor]:
        """002 eq. 1 over all members' latest models: W^{C_i} = (1/|C_i|) Σ_{k∈C_i} w^k, for every community with a
        member not sampled this round (the engine's unweighted FedAvg already gives it when all were sampled)."""
        import torch
        assert self.latest is not None
        sampled = set(int(q) for q in clients)
        out: dict[int, torch.Tensor] = {}
        for c in self.communities:
            members = np.flatnonzero((labels == c) & self.seen)
            if len(members) and not set(int(q) for q in members) <= sampled:
                out[int(c)] = self.latest[torch.as_tensor(members, device=self.latest.device)].mean(dim=0)
        return out

    @property
    def late(self) -> bool:
        return self.params["attribution"] == "late"

    # ----- aggregation (002 Algorithm 1) -----------------------------------------------------------
    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        import torch
        clients = np.asarray(updates.clients, dtype=np.int64)
        models = require_models(updates)
        self.seen[clients] = True
        seen = np.flatnonzero(self.seen)
        if self.keeps_latest:  # updateClientGraph (l. 2): every pair of seen clients, from their latest models
            self.remember(clients, models)
            assert self.latest is not None
            full = self.pairwise(self.latest[torch.as_tensor(seen, device=self.latest.device)])
            self.distance[np.ix_(seen, seen)] = full
            where = np.searchsorted(seen, clients)
            pairwise = full[np.ix_(where, where)]  # recorded: this round's sampled clients
        else:  # co-sampled: only the edges between clients sampled together (older edges stay)
            pairwise = self.pairwise(models)
            self.distance[np.ix_(clients, clients)] = pairwise
        if self.frozen:  # late, after late_round: the graph is recorded, the partition stays
            diagnostics = {"n_communities": len(self.communities), "n_seen": int(self.seen.sum()), "frozen": True}
            own = self.community_models(self.assignment.labels, clients) if self.keeps_latest else {}
            return StrategyResult(self.assignment, diagnostics, divergence=pairwise, models=own)
        sim = self.similarity(self.distance[np.ix_(seen, seen)])
        stream = (0x10BA,) if self.params["louvain_order"] == "fixed" else (updates.round, 0x10BA)
        seed = int(self.ctx.generator(*stream).integers(2**31 - 1))
        local = community_labels(sim, float(self.params["resolution"]), seed)  # l. 3
        groups = [seen[local == c] for c in range(int(local.max()) + 1)]
        previous = self.assignment.labels
        ids, self.next_id = match_cluster_ids(previous, groups, self.next_id, reserved=[NEWCOMER])
        labels = np.full(self.ctx.n_clients, NEWCOMER, dtype=np.int64)
        for g, c in zip(groups, ids):
            labels[g] = c
        self.assignment = ClusterAssignment(labels)
        self.communities = sorted(int(c) for c in ids)
        own: dict[int, torch.Tensor] = {}
        if self.keeps_latest:
            own = self.community_models(labels, clients)
            self._measure_latest_distances(labels)
        else:
            self._measure_client_distances(models, clients, labels)
        diagnostics: dict[str, Any] = {"n_communities": len(self.communities), "n_seen": int(self.seen.sum())}
        if self.late:
            self.frozen = updates.round >= int(self.params["late_round"])
            diagnostics["frozen"] = self.frozen
        return StrategyResult(self.assignment, diagnostics, divergence=pairwise,
                              inherit=inherit_by_overlap(previous, labels), models=own)

    def _distances_to(self, models: torch.Tensor, references: torch.Tensor) -> np.ndarray:
        """Distance of each model (rows) to each reference (community model): trusted (eq. 2, 4) or cosine."""
        import torch
        if self.params["distance"] == "trusted":
            return trusted_to_references(models, references, self.layers)
        from ..clustering.divergence import cosine_similarity_from_gram

        both = torch.cat([models.to(torch.float64), references.to(torch.float64)])
        sim = cosine_similarity_from_gram(both @ both.T)
        return 1.0 - sim[: models.shape[0], models.shape[0]:]

    def _measure_latest_distances(self, labels: np.ndarray) -> None:
        """``latest`` mode: trusted distance of every seen client's latest model to every community model (eq. 1 over
        all members' latest models), kept for 1NN / WNN attribution next round (002 Alg. 2)."""
        import torch
        if self.params["attribution"] in ("avg", "late") or not self.communities:
            return
        assert self.latest is not None
        seen = np.flatnonzero(self.seen)
        groups = [np.flatnonzero((labels == c) & self.seen) for c in self.communities] + [seen]
        # one upload of every community's members and the seen clients, split on the device (sizes known here)
        *members, seen_rows = torch.split(torch.as_tensor(np.concatenate(groups), device=self.latest.device),
                                          [len(g) for g in groups])
        means = torch.stack([self.latest[rows].to(torch.float64).mean(dim=0) for rows in members])
        dist = self._distances_to(self.latest[seen_rows], means)
        for row, q in enumerate(seen):
            self.client_distance[int(q)] = {c: float(dist[row, j]) for j, c in enumerate(self.communities)}

    def _measure_client_distances(self, models: torch.Tensor, clients: np.ndarray, labels: np.ndarray) -> None:
        """Trusted distance of each sampled client's model to each community model (eq. 1 mean of the
        sampled members), kept for 1NN / WNN attribution next round."""
        import torch
        if self.params["attribution"] in ("avg", "late"):
            return
        present = [c for c in self.communities if np.any(labels[clients] == c)]
        if not present:
            return
        device = models.device
        means = torch.stack([models[torch.as_tensor(np.flatnonzero(labels[clients] == c), device=device)]
                             .to(torch.float64).mean(dim=0) for c in present])
        dist = self._distances_to(models, means)
        for row, q in enumerate(clients):
            self.client_distance[int(q)] = {c: float(dist[row, j]) for j, c in enumerate(present)}

    # ----- attribution (002 Algorithm 2) -------------------------------------------------------------
    def start_spec(self, client: int, available: Sequence[int], training: bool = False) -> StartSpec:
        """The model client ``client`` starts from (``training``) / is evaluated with (Alg. 2, l. 4–12)."""
        available = [c for c in self.communities if c in set(available)]
        if not available:
            return int(self.assignment.labels[client])
        global_mix = {c: 1.0 / len(available) for c in available}
        mode = self.params["attribution"]
        if mode == "late":
            own = int(self.assignment.labels[client])
            if self.frozen and own in available and not (training and self.params["late_start"] == "global"):
                return own
            mode = "avg"  # before late_round, or a client never seen by then (Alg. 2, l. 4)
        known = {c: d for c, d in self.client_distance.get(int(client), {}).items() if c in available}
        if mode == "avg" or not known:
            spec: StartSpec = global_mix
        elif mode == "1nn":
            spec = min(known.items(), key=lambda kv: (kv[1], kv[0]))[0]
        else:
            spec = wnn_weights(known, int(self.params["k"]), float(self.params["beta"]))
        if isinstance(spec, dict) and len(spec) == 1:
            return int(next(iter(spec)))
        return spec

    def configure(self, rnd: int, clients: np.ndarray, evaluate: EvaluateFn,
                  models: Mapping[int, torch.Tensor]) -> dict[int, StartSpec]:
        return {int(q): self.start_spec(int(q), list(models), training=True) for q in clients}

    def personalised(self, models: Mapping[int, torch.Tensor]) -> dict[int, StartSpec]:
        return {q: self.start_spec(q, list(models)) for q in range(self.ctx.n_clients)}

    def global_model(self, models: Mapping[int, torch.Tensor]) -> StartSpec | None:
        """W_t, the unweighted mean of the community models (002 Alg. 1, l. 7), whatever the attribution."""
        available = [c for c in self.communities if c in set(models)]
        if not available:
            return None
        if len(available) == 1:
            return int(available[0])
        return {c: 1.0 / len(available) for c in available}

    # ----- checkpointing -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        import torch
        return {"labels": labels_tensor(self.assignment.labels), "distance": torch.as_tensor(self.distance),
                "seen": torch.as_tensor(self.seen), "communities": list(self.communities),
                "client_distance": {int(q): {int(c): float(d) for c, d in v.items()} for q, v in self.client_distance.items()},
                "next_id": int(self.next_id), "frozen": bool(self.frozen),
                **({"latest": self.latest.detach().cpu().clone()} if self.latest is not None else {})}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        import torch
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.distance = np.asarray(state["distance"], dtype=np.float64).copy()
        self.seen = np.asarray(state["seen"], dtype=bool).copy()
        self.communities = [int(c) for c in state["communities"]]
        self.client_distance = {int(q): {int(c): float(d) for c, d in v.items()} for q, v in state["client_distance"].items()}
        self.next_id = int(state["next_id"])
        self.frozen = bool(state.get("frozen", False))  # absent from checkpoints written before ``late``
        latest = state.get("latest")
        self.latest = None if latest is None else torch.as_tensor(latest).to(self.ctx.device).clone()
