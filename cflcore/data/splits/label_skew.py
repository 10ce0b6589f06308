"""Label skew: ground-truth groups that differ in their classes (docs/architecture.md §7).

* ``ocfl`` (000 §3.1, §4.1): three clusters with class sets per dataset family (:data:`DEFAULT_CLASS_SETS`),
  ``overlap`` picks the overlapping sets; ``imbalanced`` gives unequal cluster sizes and one Dirichlet(α)
  class vector per cluster over its class set (balanced: uniform over the set).
* ``majority`` (002 §V-1): client k has majority class l_k with P(l_k) = m (``majority_share``) and
  P(l) = (1 - m)/(C - 1) for the other classes; its ground-truth cluster is the class group holding l_k
  (``class_sets``; default for CIFAR-10 vehicles {0,1,8,9} vs animals {2..7}, as in 002; else the
  non-overlapping OCFL sets). Majority classes go round-robin over the groups (group 0's first class, group 1's
  first class, …, group 0's second class, …), so 10 clients on CIFAR-10 own the 10 classes once each, as in 002.
* ``dirichlet-mix`` (004 §7.3, App. H): client groups (``cluster_shares``) with different Dirichlet
  concentrations (``alphas``), each client its own class vector ~ Dir(α·1); α = 0 is one class per client.

Each takes a ``drift`` schedule (cflcore.data.drift): a client that moves into group g holds a new sample of g's class
distribution (``drift_plan``: the class vector of a client of g, drawn from the schedule's stream).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...errors import ConfigError
from ..drift import DRIFT_KEY, DRIFT_PARAM, check_schedule
from .base import (SPLIT_GENERATORS, ClientPlan, SplitContext, SplitGenerator, SplitPlan, apportion,
                   check_class_sets_in_dataset, check_enough_clients, check_group_shares, check_shares,
                   class_sets_param, clusters_of, dirichlet_weights, equal_sizes, shares_param, uniform_weights)

#: 000 §4.1 / docs/architecture.md §7: (non-overlapping, overlapping) class sets by number of classes. The overlapping sets for
#: BloodMNIST (8 classes) are not published; ours follow the 10-class pattern (set 0 plus the last two classes,
#: sets 1∪2 without their first class, sets 0∪1).
DEFAULT_CLASS_SETS: dict[int, dict[bool, list[list[int]]]] = {
    10: {False: [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]],
         True: [[0, 1, 2, 3, 8, 9], [4, 5, 6, 7, 8, 9], [0, 1, 2, 3, 4, 5]]},
    9: {False: [[0, 1, 2], [3, 4, 5], [6, 7, 8]],
        True: [[0, 1, 2, 7, 8], [4, 5, 6, 7, 8], [0, 1, 2, 3, 4, 5]]},
    8: {False: [[0, 1], [2, 3, 4], [5, 6, 7]],
        True: [[0, 1, 6, 7], [3, 4, 5, 6, 7], [0, 1, 2, 3, 4]]},
}
DEFAULT_SET_COUNT = len(DEFAULT_CLASS_SETS[10][False])
"""How many class sets :data:`DEFAULT_CLASS_SETS` gives for every class count (000's three clusters)."""

#: 002 §V: CIFAR-10's two superclasses (vehicles: airplane, automobile, ship, truck; animals: the rest).
CIFAR10_SUPERCLASSES = [[0, 1, 8, 9], [2, 3, 4, 5, 6, 7]]
LOADER_CLASS_GROUPS = {"cifar10": CIFAR10_SUPERCLASSES}
"""A ``majority`` split's default class groups by loader, before the class-count defaults (:data:`DEFAULT_CLASS_SETS`)."""

#: Cluster shares of the imbalanced OCFL splits. 000 says "20 % / ~47 % / ~33 %" and publishes 15 -> 3/7/5 and
#: 30 -> 7/14/9; as 0.2·30 = 6 exactly, no rounding of 20 % gives 7. We use the mean shares of the two published
#: allocations (0.217, 0.467, 0.317 -> 0.22/0.47/0.31) with largest-remainder rounding, which gives both exactly.
OCFL_IMBALANCED_SHARES = (0.22, 0.47, 0.31)


@SPLIT_GENERATORS.register("ocfl")
class OcflSplit(SplitGenerator):
    """The four splits of 000 §4.1 (non-)overlapping × (im)balanced, three ground-truth clusters."""

    params_schema = {
        "overlap": {"type": "boolean", "default": False, "description": "overlapping class sets per cluster (000 §4.1)"},
        "imbalanced": {"type": "boolean", "default": False,
                       "description": "clients per cluster 20/47/33 % with one Dirichlet class vector per cluster, "
                                      "else equal"},
        "alpha": {"type": "number", "exclusiveMinimum": 0, "default": 1.0,
                  "description": "Dirichlet concentration of each cluster's class vector (imbalanced splits)"},
        "class_sets": class_sets_param("the classes of each ground-truth cluster (default: 000's sets for the class "
                                       "count)"),
        "cluster_shares": shares_param(None, "share of clients per cluster (default: equal, or 20/47/33 % imbalanced)"),
        DRIFT_KEY: DRIFT_PARAM,
    }
    group_key = "class_sets"
    class_keys = ("class_sets",)
    drift_draws = True

    @classmethod
    def check_classes(cls, p: Mapping[str, Any], n_classes: int, loader: str, field: str) -> None:
        super().check_classes(p, n_classes, loader, field)
        if p.get("class_sets") is None and n_classes not in DEFAULT_CLASS_SETS:
            raise ConfigError(f"{field}.class_sets: null has no default class sets for loader {loader} "
                              f"({n_classes} classes); allowed: class_sets, or a loader with "
                              f"{', '.join(map(str, sorted(DEFAULT_CLASS_SETS)))} classes")

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        n_sets = len(p["class_sets"]) if p["class_sets"] is not None else DEFAULT_SET_COUNT
        check_schedule(p.get(DRIFT_KEY), n_sets, f"{field}.{DRIFT_KEY}")
        if p["cluster_shares"] is not None:
            check_shares(p["cluster_shares"], f"{field}.cluster_shares")
            if len(p["cluster_shares"]) != n_sets:
                raise ConfigError(f"{field}.cluster_shares: {len(p['cluster_shares'])} entries for {n_sets} clusters; "
                                  "allowed: one share per class set")
        elif p["imbalanced"] and p["class_sets"] is not None and len(p["class_sets"]) != DEFAULT_SET_COUNT:
            raise ConfigError(f"{field}.cluster_shares: required for imbalanced splits with "
                              f"{len(p['class_sets'])} class sets (the default 20/47/33 % is for 3)")

    def class_sets(self, ctx: SplitContext) -> list[list[int]]:
        if self.params["class_sets"] is not None:
            sets = [list(map(int, s)) for s in self.params["class_sets"]]
        elif ctx.n_classes in DEFAULT_CLASS_SETS:
            sets = DEFAULT_CLASS_SETS[ctx.n_classes][bool(self.params["overlap"])]
        else:
            raise ConfigError(f"{self.field}.class_sets: no default class sets for {ctx.n_classes} classes "
                              f"(defaults exist for {', '.join(map(str, sorted(DEFAULT_CLASS_SETS)))}); set class_sets")
        check_class_sets_in_dataset(sets, ctx, self.field)
        return sets

    def sizes(self, n_clients: int, n_clusters: int) -> list[int]:
        shares = self.params["cluster_shares"]
        if shares is not None:
            return apportion(n_clients, shares)
        if self.params["imbalanced"]:
            return apportion(n_clients, OCFL_IMBALANCED_SHARES)
        return equal_sizes(n_clients, n_clusters)

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        sets = self.params["class_sets"]
        return tuple(self.sizes(n_clients, len(sets) if sets is not None else DEFAULT_SET_COUNT))

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        """Balanced: y ~ Unif(Y^c); imbalanced: y ~ Categorical(v^c), v^c ~ Dir(α·1) once per cluster (000 §3.1)."""
        sets = self.class_sets(ctx)
        check_enough_clients(n_clients, len(sets), self.field)
        if self.params["imbalanced"]:
            weights = [dirichlet_weights(float(self.params["alpha"]), s, ctx.n_classes, cluster_rng) for s in sets]
        else:
            weights = [uniform_weights(s, ctx.n_classes) for s in sets]
        clusters = clusters_of(self.sizes(n_clients, len(sets)))
        clients = [ClientPlan(cluster=c, class_weights=weights[c]) for c in clusters]
        return SplitPlan(len(sets), sets, clients, {"cluster_class_weights": [w.tolist() for w in weights]})

    def drift_plan(self, group: int, plan: SplitPlan, ctx: SplitContext, rng: np.random.Generator) -> ClientPlan:
        """The group's class vector, as its clients have it (nothing drawn)."""
        return ClientPlan(cluster=group, class_weights=np.asarray(plan.cluster_info["cluster_class_weights"][group],
                                                                  dtype=np.float64))


def majority_order(sets: list[list[int]]) -> list[tuple[int, int]]:
    """(group, majority class) of clients 0, 1, …, repeating: round-robin over the groups (group 0's first class,
    group 1's first class, …, group 0's second class, …)."""
    depth = max(len(s) for s in sets)
    return [(g, s[i]) for i in range(depth) for g, s in enumerate(sets) if i < len(s)]


def default_majority_sets(loader: str, n_classes: int) -> list[list[int]] | None:
    """A ``majority`` split's class groups without ``class_sets``: the loader's (:data:`LOADER_CLASS_GROUPS`), else the
    non-overlapping sets for the class count; None where there are none."""
    if loader in LOADER_CLASS_GROUPS:
        return LOADER_CLASS_GROUPS[loader]
    return DEFAULT_CLASS_SETS[n_classes][False] if n_classes in DEFAULT_CLASS_SETS else None


@SPLIT_GENERATORS.register("majority")
class MajoritySplit(SplitGenerator):
    """002 §V-1: every client has a majority class with share m_k; ground truth = the group of that class."""

    params_schema = {
        "majority_share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 0.7,
                           "description": "the share m_k of a client's majority class (002 §V-1)"},
        "class_sets": class_sets_param("the disjoint class groups, one per ground-truth cluster (default: CIFAR-10's "
                                       "vehicles / animals, else 000's non-overlapping sets for the class count)"),
        "group_spread": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.0,
                         "description": "a share of the majority mass moved to the other classes of its group (a "
                                        "declared departure for proxies; 0: 002's split)"},
        DRIFT_KEY: DRIFT_PARAM,
    }
    key_neutral = {"group_spread": 0.0}  # added after the first studies: 0 draws as before it
    group_key = "class_sets"
    class_keys = ("class_sets",)
    drift_draws = True

    @classmethod
    def check_classes(cls, p: Mapping[str, Any], n_classes: int, loader: str, field: str) -> None:
        super().check_classes(p, n_classes, loader, field)
        if p.get("class_sets") is None and loader not in LOADER_CLASS_GROUPS and n_classes not in DEFAULT_CLASS_SETS:
            raise ConfigError(f"{field}.class_sets: null has no default class grouping for loader {loader} "
                              f"({n_classes} classes); allowed: class_sets, or a loader with "
                              f"{', '.join(map(str, sorted(DEFAULT_CLASS_SETS)))} classes")
        if p.get("class_sets") is None:  # the default groups are the loader's: their count is known here
            check_schedule(p.get(DRIFT_KEY), len(default_majority_sets(loader, n_classes) or ()),
                           f"{field}.{DRIFT_KEY}")

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        if p["class_sets"] is not None:
            flat = [c for s in p["class_sets"] for c in s]
            if len(flat) != len(set(flat)):
                raise ConfigError(f"{field}.class_sets: the class groups of a majority split must be disjoint")
            check_schedule(p.get(DRIFT_KEY), len(p["class_sets"]), f"{field}.{DRIFT_KEY}")

    def class_sets(self, ctx: SplitContext) -> list[list[int]]:
        sets = ([list(map(int, s)) for s in self.params["class_sets"]] if self.params["class_sets"] is not None
                else default_majority_sets(ctx.loader, ctx.n_classes))
        if sets is None:
            raise ConfigError(f"{self.field}.class_sets: no default class grouping for {ctx.n_classes} classes; set class_sets")
        check_class_sets_in_dataset(sets, ctx, self.field)
        return sets

    def group_sizes(self, n_clients: int) -> tuple[int, ...] | None:
        """Given ``class_sets``, the round-robin's clients per group; None for the default groups (the loader's)."""
        sets = self.params["class_sets"]
        if sets is None:
            return None
        order = majority_order(sets)
        groups = [order[k % len(order)][0] for k in range(n_clients)]
        return tuple(int(s) for s in np.bincount(groups, minlength=len(sets)))

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        """P_k(l_k) = m_k, P_k(l_o) = (1 - m_k)/(C - 1) for l_o ≠ l_k (002 §V-1; ``group_spread`` 0, the default).

        ``group_spread`` s > 0 (a declared departure, for proxies whose class groups no image feature carries, e.g.
        MNIST digit groups standing in for CIFAR's animals / vehicles): a share s of the majority mass moves from l_k
        to the other classes of its group G, P_k(l_k) = m_k (1 - s), P_k(g) = (1 - m_k)/(C - 1) + m_k s / (|G| - 1) for g in G
        other than l_k, every other class (1 - m_k)/(C - 1) as above. Clients keep distinct majority classes, as in 002, and a
        community's clients share data in proportion to m_k, as CIFAR's superclass mates share features: close to
        iid at m_k = 1/C, communities strongest at m_k = 1. A one-class group keeps its mass on l_k."""
        sets = self.class_sets(ctx)
        check_enough_clients(n_clients, len(sets), self.field)
        order = majority_order(sets)
        clients = []
        for k in range(n_clients):
            group, majority = order[k % len(order)]
            clients.append(self.client_plan(sets, group, majority, ctx.n_classes))
        return SplitPlan(len(sets), sets, clients)

    def client_plan(self, sets: list[list[int]], group: int, majority: int, n_classes: int) -> ClientPlan:
        """A client of ``group`` with majority class ``majority``: :meth:`generate`'s class vector."""
        m = float(self.params["majority_share"])
        w = np.full(n_classes, (1.0 - m) / (n_classes - 1) if n_classes > 1 else 0.0)
        mates = [c for c in sets[group] if c != majority]
        spread = float(self.params["group_spread"]) if mates else 0.0
        w[mates] += m * spread / max(len(mates), 1)
        w[majority] = m * (1.0 - spread)
        return ClientPlan(cluster=group, class_weights=w / w.sum(), info={"majority_class": majority})

    def drift_plan(self, group: int, plan: SplitPlan, ctx: SplitContext, rng: np.random.Generator) -> ClientPlan:
        """A client of ``group`` whose majority class is drawn uniformly among the group's classes (the round-robin
        gives each of them an equal share of the group's clients)."""
        classes = plan.class_sets[group]
        return self.client_plan(plan.class_sets, group, int(classes[int(rng.integers(len(classes)))]), ctx.n_classes)


@SPLIT_GENERATORS.register("dirichlet-mix")
class DirichletMixSplit(SplitGenerator):
    """004 §7.3 / App. H: groups of clients with different heterogeneity α (e.g. 40 % α=1000, 30 % α=0.05, 30 % α=0)."""

    params_schema = {
        "cluster_shares": shares_param([0.4, 0.3, 0.3]),
        "alphas": {"type": "array", "minItems": 1, "items": {"type": "number", "minimum": 0},
                   "default": [1000.0, 0.05, 0.0], "description": "one heterogeneity α per group (004 §7.3)"},
        DRIFT_KEY: DRIFT_PARAM,
    }
    group_key = "alphas"
    drift_draws = True

    @classmethod
    def check_params(cls, p: Mapping[str, Any], field: str) -> None:
        check_group_shares(p, field, "alphas")
        check_schedule(p.get(DRIFT_KEY), len(p["alphas"]), f"{field}.{DRIFT_KEY}")

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        return tuple(apportion(n_clients, self.params["cluster_shares"]))

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        """Each client of group g: class vector ~ Dir(α_g·1_C) over all classes; α_g = 0: a single class."""
        alphas = [float(a) for a in self.params["alphas"]]
        check_enough_clients(n_clients, len(alphas), self.field)
        all_classes = list(range(ctx.n_classes))
        clusters = clusters_of(self.group_sizes(n_clients))
        clients = [ClientPlan(cluster=c, class_weights=dirichlet_weights(alphas[c], all_classes, ctx.n_classes, client_rngs[k]),
                              info={"alpha": alphas[c]}) for k, c in enumerate(clusters)]
        return SplitPlan(len(alphas), [all_classes for _ in alphas], clients)

    def drift_plan(self, group: int, plan: SplitPlan, ctx: SplitContext, rng: np.random.Generator) -> ClientPlan:
        """A class vector ~ Dir(α_g·1) of the group's α, as its clients draw theirs."""
        alpha = float(self.params["alphas"][group])
        return ClientPlan(cluster=group, class_weights=dirichlet_weights(alpha, list(range(ctx.n_classes)),
                                                                         ctx.n_classes, rng), info={"alpha": alpha})
