"""Standard label partitions with no ground-truth groups (docs/architecture.md §7): every client is in cluster 0 and
the manifest says ``ground_truth: false``, so the external scores (ARI, Rand, …) are n/a."""
from __future__ import annotations

import numpy as np

from .base import SPLIT_GENERATORS, ClientPlan, SplitContext, SplitGenerator, SplitPlan, dirichlet_weights


@SPLIT_GENERATORS.register("dirichlet")
class DirichletSplit(SplitGenerator):
    """The per-client Dirichlet label partition of Hsu, Qi & Brown 2019 ("Measuring the effects of non-identical
    data distribution for federated visual classification", §3: each client's class distribution q ~ Dir(αp), p the
    class prior): every client's class vector ~ Dir(α·1) (``dirichlet_weights``, as ``dirichlet-mix`` draws each
    group's), i.e. Hsu et al.'s with a uniform prior and their α = ours × the number of classes, realised by the
    shared sampler (``samples_per_client`` draws with replacement, 000 §4.1; Hsu et al. sample without).

    It is *not* the per-label partition that Flower's ``DirichletPartitioner`` (after Yurochkin et al. 2019) and,
    as issue 70 reports, FL-bench's ``dirichlet`` draw: they split each label over the clients by a Dir(α) over the
    clients (adap/flower, datasets/flwr_datasets/partitioner/dirichlet_partitioner.py:231,
    ``class_k_division_proportions = self._rng.dirichlet(self._alpha)`` inside ``for k in self._unique_classes``),
    so client sizes vary. Flower's per-client equivalent is ``InnerDirichletPartitioner`` (after Acar et al. 2021,
    FedDyn; inner_dirichlet_partitioner.py:203, ``class_priors = self._rng.dirichlet(alpha=self._alpha,
    size=self._num_partitions)``), which fills given partition sizes without replacement. No groups: every client
    is in cluster 0 and the manifest says ``ground_truth: false``, so external scores (ARI) are n/a."""

    params_schema = {"alpha": {"type": "number", "exclusiveMinimum": 0, "default": 0.5,
                               "description": "Dirichlet concentration of each client's class vector"}}

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        all_classes = list(range(ctx.n_classes))
        clients = [ClientPlan(cluster=0, class_weights=dirichlet_weights(float(self.params["alpha"]), all_classes,
                                                                          ctx.n_classes, client_rngs[k]))
                   for k in range(n_clients)]
        return SplitPlan(1, [all_classes], clients, ground_truth=False)


@SPLIT_GENERATORS.register("shards")
class ShardsSplit(SplitGenerator):
    """McMahan et al. 2017's pathological partition (FL-bench's and Flower's ``ShardPartitioner``): the train samples
    (all, or a seeded ``clients × samples_per_client`` of them) sorted by label, cut into ``clients ×
    shards_per_client`` equal shards, each client given ``shards_per_client`` shards at random, without replacement.
    No groups (``ground_truth: false``, ARI n/a)."""

    params_schema = {"shards_per_client": {"type": "integer", "minimum": 1, "default": 2,
                                           "description": "label-sorted shards per client (McMahan et al. 2017)"}}

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        s = int(self.params["shards_per_client"])
        pool = ctx.train_idx
        spc = self.params["samples_per_client"]
        if spc is not None and n_clients * spc < len(pool):
            pool = np.sort(cluster_rng.choice(pool, size=n_clients * spc, replace=False))
        labels = ctx.train_labels[np.searchsorted(ctx.train_idx, pool)]
        by_label = pool[np.lexsort((pool, labels))]
        shards = np.array_split(by_label, n_clients * s)
        order = cluster_rng.permutation(len(shards))
        all_classes = list(range(ctx.n_classes))
        clients = []
        for k in range(n_clients):
            idx = np.sort(np.concatenate([shards[j] for j in order[k * s:(k + 1) * s]]))
            hist = np.bincount(ctx.train_labels[np.searchsorted(ctx.train_idx, idx)], minlength=ctx.n_classes)
            clients.append(ClientPlan(cluster=0, class_weights=hist / max(hist.sum(), 1), fixed_idx=idx))
        return SplitPlan(1, [all_classes], clients, ground_truth=False)
