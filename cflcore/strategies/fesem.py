"""FeSEM: federated stochastic expectation-maximisation over model parameters (Xie, Long, Shen, Zhou,
Wang, Jiang & Zhang, "Multi-center federated learning", arXiv 2005.01026; Long et al., World Wide Web
26, 2023), a clustered baseline of 004 (Tables 1, 3, 4, 6-8) that needs the number of clusters k.

The objective is a K-means over client models: min Σ_i Σ_k r_i^(k) ‖W_i − W̃^(k)‖² (squared L2 distance of
the flattened parameters). Every round, after each sampled client has trained its centre's model locally
(so W_i is the client's new local model):

* E-step: r_i = argmin_k ‖W_i − W̃^(k)‖² over the current centres W̃ (the models the clients were sent);
  ties go to the smallest cluster id. Clients not sampled keep their last assignment.
* M-step: W̃^(k) = mean of the local models of k's sampled members. This is the engine's per-cluster
  aggregation (server SGD at lr 1 with ``aggregation: unweighted`` is exactly that mean; the engine's
  other server optimisers and FedProx compose with it as options).

Next round each client starts from its centre (Strategy.configure's default).

Initialisation (seeded): the centres are seeded once, at the first round, by k-means++ (Arthur &
Vassilvitskii 2007; ``sklearn.cluster.kmeans_plusplus``, ``random_state`` from ``ctx.generator``) over the
local models of that round's sampled clients, who all trained from the engine's one initial model; that
round's E-step then assigns against those k seeds. Departure: the paper "randomly initialises" the k
centres; k independent random network initialisations would make the first E-step degenerate (every
client's local model, trained from one shared start, is nearest the same random centre), so the seeds
are drawn from the clients' first local models instead, as k-means++ does with data points.

A centre left without members disappears from the partition and the engine drops its model (as for
IFCA), so the number of clusters can fall below k; ``cluster_sizes`` in server.parquet shows it.
State (``state_dict``): the partition and whether the centres were seeded; every other quantity is
recomputed from the round's updates.

The authors' code (anonymousgit2020/fedsem, read at b8ad277; docs/results.md "FeSEM on its home ground") assigns
otherwise, and ``assignment`` chooses (the paper's E-step above stays the default: 004's study runs it):

* ``e-step``: the above;
* ``code-kmeans``: the code's step (``models/mlhead_trainer.py`` lines 183-193 and 233-243). Every client has a
  point: its last-layer kernel (``dense_1/kernel``, ``models/mh_constants.py`` lines 2 and 10), taken from its latest
  local model and stale for the clients not trained this round (``mlhead_utilfuncs.py`` lines 29-36); before any
  training, a uniform(-0.149, 0.149) random point (``mlhead_clus_server.py`` lines 144-151). Before round 0 and
  after every round, k-means from scratch over all the points in the current client order, its centroids starting at
  the first K points, 5 Lloyd iterations (``models/kmean_model.py`` lines 17-48). The order is then shuffled
  (``mlhead_clus_server.py`` line 159) and the labels are read against the shuffled order (lines 214-224): the
  k-means labels land on other clients, so the code's partition is a random one with k-means' cluster sizes. The K
  head models are one initial model (``mlhead_trainer.py`` line 137), each the mean of the models trained from it
  this round (the M-step over the partition the clients trained in: ``aggregate_as``); a head without members keeps
  its model (``keep_models``);
* ``code-kmeans-aligned``: the same, each k-means label read for the client whose point it is (what the code's
  comment "to sync the sorted clients with shuffle step", line 215, intends).

Departures of the two code steps: scikit-learn's Lloyd (``KMeans``, ``init`` the first K points, one run, 4 updates
then the labels: the code's 5th assignment) in float64, where TensorFlow's float32 leaves an emptied centroid NaN
and scikit-learn moves it to a far point; the shuffles and random points drawn from the run's seed; the code does not
re-cluster after its last round (``mlhead_trainer.py`` line 234), ours does, so the engine scores each client's model
under the next round's partition. The kernel is the flat vector's last weight array (its second-to-last per-array
block, before the last layer's bias), as ``fesem-cnn``'s ``dense_1``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import CflError
from ..plugin import ORACLE
from .base import (ClusterAssignment, EvaluateFn, RoundUpdates, StartSpec, Strategy, StrategyContext,
                           StrategyResult, register_strategy)
from ._common import cluster_count, labels_tensor

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch

_STREAM_INIT = 0xFE5
_STREAM_POINTS, _STREAM_ORDER = 0xFE51, 0xFE52
ASSIGNMENTS = ("e-step", "code-kmeans", "code-kmeans-aligned")
"""FeSEM's assignment steps (the module docstring): the paper's, the authors' code's, the code's with aligned labels."""
LLOYD_UPDATES = 4
"""kmean_model.py lines 44-47: 5 iterations, each returning the assignment before its centroid update: 4 updates."""
INIT_POINT_RANGE = 0.149
"""mlhead_clus_server.py line 146: the clients' points before any training, uniform(-0.149, 0.149)."""


def squared_distances(models: torch.Tensor, centres: torch.Tensor) -> np.ndarray:
    """‖W_i − W̃_k‖² in float64, (n_models, n_centres) (the E-step's distance)."""
    import torch
    a, b = models.to(torch.float64), centres.to(torch.float64)
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(d.cpu().numpy(), 0.0)


def e_step(distances: np.ndarray, centre_ids: list[int]) -> np.ndarray:
    """r_i = the id of the nearest centre per row (first = smallest id on ties; ``centre_ids`` sorted)."""
    return np.asarray(centre_ids, dtype=np.int64)[np.argmin(np.asarray(distances, dtype=np.float64), axis=1)]


def kmeanspp_seeds(models: torch.Tensor, k: int, seed: int) -> np.ndarray:
    """Row indices of ``k`` k-means++ seeds among ``models`` (scikit-learn's greedy k-means++)."""
    import torch
    from sklearn.cluster import kmeans_plusplus  # lazy: keeps job start-up short

    x = models.to(torch.float64).cpu().numpy()
    _, indices = kmeans_plusplus(x, n_clusters=k, random_state=seed)
    return np.asarray(indices, dtype=np.int64)


def kernel_block(array_sizes: tuple[int, ...] | None) -> slice:
    """The flat vector's last weight array (its second-to-last per-array block; the last is that layer's bias)."""
    if not array_sizes or len(array_sizes) < 2 or array_sizes[-2] % array_sizes[-1]:
        raise CflError("fesem.assignment: the code's k-means reads the last layer's kernel, and this model's flat "
                       f"vector ends in arrays of {list(array_sizes or ())[-2:]} values, not a kernel and its bias")
    end = sum(array_sizes[:-1])
    return slice(end - array_sizes[-2], end)


def lloyd_labels(points: np.ndarray, k: int) -> np.ndarray:
    """kmean_model.py's k-means: centroids at the first ``k`` rows, :data:`LLOYD_UPDATES` Lloyd updates, the labels."""
    from sklearn.cluster import KMeans  # lazy: keeps job start-up short

    x = np.asarray(points, dtype=np.float64)
    km = KMeans(n_clusters=k, init=x[:k], n_init=1, max_iter=LLOYD_UPDATES, tol=0.0, algorithm="lloyd")
    return km.fit(x).labels_.astype(np.int64)


def code_partition(points: np.ndarray, order: np.ndarray, shuffled: np.ndarray, k: int,
                   aligned: bool) -> np.ndarray:
    """One clustering of the authors' code: k-means over the points in client ``order`` (run_clustering), its labels
    given to the clients of ``order`` (aligned) or, as the code does, of the ``shuffled`` order (lines 159, 214-224)."""
    learned = lloyd_labels(np.asarray(points)[order], k)
    labels = np.empty(len(order), dtype=np.int64)
    labels[order if aligned else shuffled] = learned
    return labels


@register_strategy("fesem")
class FeSEM(Strategy):
    params_schema = {
        "k": {"description": "number of centres (004 tunes 2-5, Table 8): 'oracle' (true number) or an int",
              "default": 3, "oneOf": [{"const": ORACLE}, {"type": "integer", "minimum": 1}]},
        "assignment": {"description": "the E-step of the paper (e-step), the authors' code's k-means over the "
                                      "last-layer kernels with its labels read against a reshuffled client order "
                                      "(code-kmeans), or that k-means with each label on its own client "
                                      "(code-kmeans-aligned); see cflcore/strategies/fesem.py",
                       "default": "e-step", "enum": list(ASSIGNMENTS)},
    }

    def setup(self, ctx: StrategyContext) -> None:
        super().setup(ctx)
        self.k = cluster_count(self.params["k"], ctx.n_true_clusters, "fesem")
        self.seeded = False
        self._sent: dict[int, torch.Tensor] = {}
        self.code = self.params["assignment"] != "e-step"
        if self.code:  # the authors' code: random points, a random client order, round 0's k-means
            self.kernel = kernel_block(ctx.array_sizes)
            rng = self.ctx.generator(_STREAM_POINTS)
            self.order = rng.permutation(ctx.n_clients)
            size = self.kernel.stop - self.kernel.start
            self.points = rng.uniform(-INIT_POINT_RANGE, INIT_POINT_RANGE, (ctx.n_clients, size))
            self.assignment = ClusterAssignment(self._recluster(-1))

    def _recluster(self, rnd: int) -> np.ndarray:
        """The code's clustering after round ``rnd`` (-1: before round 0); advances the client order."""
        shuffled = self.order[self.ctx.generator(_STREAM_ORDER, rnd + 1).permutation(len(self.order))]
        labels = code_partition(self.points, self.order, shuffled, self.k,
                                self.params["assignment"] == "code-kmeans-aligned")
        self.order = shuffled
        return labels

    def initial_models(self, init: torch.Tensor, make_init) -> dict[int, torch.Tensor]:
        """The code's K heads all start as the one initial model (mlhead_trainer.py line 137); the E-step's one."""
        return {c: init.clone() for c in range(self.k)} if self.code else {0: init}

    def configure(self, rnd: int, clients: np.ndarray, evaluate: EvaluateFn,
                  models: Mapping[int, torch.Tensor]) -> dict[int, StartSpec]:
        self._sent = dict(models)  # the current centres W̃ (the engine hands fresh copies)
        return super().configure(rnd, clients, evaluate, models)

    def local_models(self, updates: RoundUpdates) -> torch.Tensor:
        """W_i of the sampled clients: start + delta (the start is their centre when not kept by the engine)."""
        import torch
        if updates.start is not None:
            return updates.params
        starts = torch.stack([self._sent[int(self.assignment.labels[c])] for c in updates.clients])
        return starts.to(updates.deltas) + updates.deltas

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        return self._aggregate_code(updates) if self.code else self._aggregate_e_step(updates)

    def _aggregate_code(self, updates: RoundUpdates) -> StrategyResult:
        """Heads = means over the partition trained in; the next partition from the code's k-means on the points."""
        import torch
        local = self.local_models(updates)
        before = self.assignment.labels.copy()
        self.points[updates.clients] = local[:, self.kernel].to(torch.float64).cpu().numpy()
        labels = self._recluster(updates.round)
        self.assignment = ClusterAssignment(labels)
        sizes = {str(int(c)): int(n) for c, n in zip(*np.unique(labels, return_counts=True))}
        diagnostics = {"cluster_sizes": sizes, "reassigned": int(np.sum(before != labels))}
        return StrategyResult(self.assignment, diagnostics,
                              aggregate_as={int(c): int(before[c]) for c in updates.clients},
                              keep_models=tuple(range(self.k)))

    def _aggregate_e_step(self, updates: RoundUpdates) -> StrategyResult:
        import torch
        local = self.local_models(updates)
        labels = self.assignment.labels.copy()
        inherit: dict[int, int] = {}
        diagnostics: dict[str, Any] = {}
        if not self.seeded:
            if len(updates.clients) < self.k:
                raise CflError(f"fesem.k: {self.k} centres need at least {self.k} clients in the first round; "
                               f"{len(updates.clients)} were sampled")
            seed = int(self.ctx.generator(_STREAM_INIT).integers(2 ** 31 - 1))
            rows = kmeanspp_seeds(local, self.k, seed)
            centres, ids = local[torch.as_tensor(rows, device=local.device)], list(range(self.k))
            src = int(self.assignment.labels[updates.clients[0]])  # everyone trained from the one initial model
            inherit = {c: src for c in ids}
            diagnostics["seed_clients"] = [int(updates.clients[r]) for r in rows]
            self.seeded = True
        else:
            ids = sorted(self._sent)
            centres = torch.stack([self._sent[c] for c in ids]).to(local)
        distances = squared_distances(local, centres)
        choice = e_step(distances, ids)
        moved = int(np.sum(labels[updates.clients] != choice))
        labels[updates.clients] = choice
        self.assignment = ClusterAssignment(labels)
        sizes = {str(int(c)): int(n) for c, n in zip(*np.unique(labels, return_counts=True))}
        diagnostics.update({"cluster_sizes": sizes, "reassigned": moved,
                            "objective": float(distances[np.arange(len(choice)), np.searchsorted(ids, choice)].mean())})
        return StrategyResult(self.assignment, diagnostics, inherit=inherit)

    def state_dict(self) -> dict[str, Any]:
        state = {"labels": labels_tensor(self.assignment.labels), "seeded": bool(self.seeded)}
        if self.code:
            import torch
            state.update(points=torch.from_numpy(self.points.copy()), order=torch.from_numpy(self.order.copy()))
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))
        self.seeded = bool(state["seeded"])
        if self.code:
            self.points = np.asarray(state["points"], dtype=np.float64).copy()
            self.order = np.asarray(state["order"], dtype=np.int64).copy()

