"""``lab-blocks``: ``blocks`` groups of clients, each group's clients holding one contiguous block of the classes
(10 classes in 4 blocks: {0,1,2}, {3,4,5}, {6,7}, {8,9}), uniformly; equal groups, the remainder to the first."""
from __future__ import annotations

import numpy as np

from cflcore.data.splits.base import (SPLIT_GENERATORS, ClientPlan, SplitContext, SplitGenerator, SplitPlan,
                                      check_enough_clients, clusters_of, equal_sizes, uniform_weights)


@SPLIT_GENERATORS.register("lab-blocks")
class ClassBlocks(SplitGenerator):
    params_schema = {"blocks": {"type": "integer", "minimum": 2, "default": 4,
                                "description": "groups, each holding one contiguous block of the classes"}}

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        return tuple(equal_sizes(n_clients, int(self.params["blocks"])))

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        blocks = int(self.params["blocks"])
        check_enough_clients(n_clients, blocks, self.field)
        class_sets = [block.tolist() for block in np.array_split(np.arange(ctx.n_classes), blocks)]
        clients = [ClientPlan(cluster=c, class_weights=uniform_weights(class_sets[c], ctx.n_classes))
                   for c in clusters_of(self.group_sizes(n_clients))]
        return SplitPlan(blocks, class_sets, clients, {"cluster_blocks": [str(s) for s in class_sets]})
