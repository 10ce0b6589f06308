"""Split generators: which client holds which samples, and the ground-truth cluster of every client (docs/architecture.md §7).

``make_split(dataset_path, settings, n_clients, seed, out_dir)`` writes ``assignments.parquet`` and
``manifest.json``. Every generator decides, per client, a ground-truth cluster and a class-probability vector
(and, for ``domains``, a visual domain); one shared sampler then realises the clients' data the way the OCFL
generator does (000 §3.1, §4.1): each client draws ``samples_per_client`` samples *with replacement* from the
dataset's train part according to its class vector (so samples are shared within and across clusters),
duplicates are dropped, and a seeded ``local_test_fraction`` of the distinct samples becomes the local test
set. The orchestrator set is the dataset's test part.

Generators (``generator:`` in a split entry):

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
* ``domains`` (004 §7.3, Table 4/7): near-uniform classes (Dir(``alpha``), default 100) but groups of clients see
  clean, noised (``noise_std``, pixels in [0, 1]) or blurred (``blur_sigma``) images; the domain of each client is
  recorded in the manifest and applied by ``cflcore.data.store.load_federated``.

Randomness: ``np.random.SeedSequence([seed, hash(generator, params, n_clients, dataset)])`` spawns one stream for
cluster-level draws and one per client, so the same inputs give bit-identical files.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from .. import filenames as fn
from ..errors import ConfigError, DataError
from ..io import read_json, read_parquet, stable_hash, write_json, write_parquet
from ..plugin import Plugin
from ..registry import Registry
from .store import read_dataset_labels

if TYPE_CHECKING:  # pandas only for split_summary (the split job does not import it)
    import pandas as pd

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

#: 002 §V: CIFAR-10's two superclasses (vehicles: airplane, automobile, ship, truck; animals: the rest).
CIFAR10_SUPERCLASSES = [[0, 1, 8, 9], [2, 3, 4, 5, 6, 7]]
LOADER_CLASS_GROUPS = {"cifar10": CIFAR10_SUPERCLASSES}
"""A ``majority`` split's default class groups by loader, before the class-count defaults (:data:`DEFAULT_CLASS_SETS`)."""

#: Cluster shares of the imbalanced OCFL splits. 000 says "20 % / ~47 % / ~33 %" and publishes 15 -> 3/7/5 and
#: 30 -> 7/14/9; as 0.2·30 = 6 exactly, no rounding of 20 % gives 7. We use the mean shares of the two published
#: allocations (0.217, 0.467, 0.317 -> 0.22/0.47/0.31) with largest-remainder rounding, which gives both exactly.
OCFL_IMBALANCED_SHARES = (0.22, 0.47, 0.31)

ROLE_CODES = {"train": 0, "test": 1, "orchestrator": 2}


# ---------------------------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SplitContext:
    """What a generator sees of the dataset: the train part's labels and the dataset's classes."""

    train_idx: np.ndarray  # idx of the train rows
    train_labels: np.ndarray  # their labels
    test_idx: np.ndarray  # idx of the test rows (the orchestrator set)
    n_classes: int
    classes: list[str]
    loader: str
    dataset: str

    def class_pools(self) -> list[np.ndarray]:
        """idx of the train samples of every class."""
        return [self.train_idx[self.train_labels == c] for c in range(self.n_classes)]


@dataclass
class ClientPlan:
    """One client before sampling: its ground-truth cluster, class probabilities and (optional) visual domain.

    ``draw_fraction`` scales the split's draws per client (quantity skew); ``label_swaps`` are label pairs exchanged
    in the client's train and test labels (concept shift on labels); ``fixed_idx`` replaces the sampler with a
    given set of distinct train samples (partitions without replacement: shards)."""

    cluster: int
    class_weights: np.ndarray
    domain: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    draw_fraction: float | None = None
    label_swaps: list[list[int]] | None = None
    fixed_idx: np.ndarray | None = None


@dataclass
class SplitPlan:
    n_clusters: int
    class_sets: list[list[int]]
    clients: list[ClientPlan]
    cluster_info: dict[str, Any] = field(default_factory=dict)
    ground_truth: bool = True  # False: a standard partition with no groups (every client in cluster 0; ARI n/a)


@dataclass
class ClientSamples:
    train_idx: np.ndarray
    test_idx: np.ndarray


# ---------------------------------------------------------------------------------------------
# Parameter checks (one-line ConfigErrors naming the field)
# ---------------------------------------------------------------------------------------------
def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def check_bool(v: Any, field: str) -> None:
    if not isinstance(v, bool):
        raise ConfigError(f"{field}: {v!r} is not allowed; allowed: true, false")


def check_number(v: Any, field: str, low: float, high: float = float("inf"), low_open: bool = True,
                 high_open: bool = False) -> None:
    ok = _is_number(v) and (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ConfigError(f"{field}: {v!r} is not allowed; allowed: a number in {lo}{low}, {high}{hi}")


MIN_SAMPLES_PER_CLIENT = 10
"""Smallest ``samples_per_client`` accepted: with the 70/30 local split (000 §4.1) it leaves a client at
least 7 training and 3 test samples before duplicates are dropped; fewer make local F1 and the client's
update meaningless (2 draws left one training sample)."""


def check_samples(v: Any, field: str) -> None:
    if v is not None and not (_is_int(v) and v >= MIN_SAMPLES_PER_CLIENT):
        raise ConfigError(f"{field}: {v!r} is not allowed; allowed: null (len(train)/clients) or an integer "
                          f">= {MIN_SAMPLES_PER_CLIENT}")


def check_class_sets(v: Any, field: str) -> None:
    ok = isinstance(v, list) and len(v) >= 1 and all(
        isinstance(s, list) and len(s) >= 1 and all(_is_int(c) and c >= 0 for c in s) and len(set(s)) == len(s)
        for s in v)
    if not ok:
        raise ConfigError(f"{field}: {v!r} is not allowed; allowed: a list of non-empty lists of distinct class indices >= 0")


def check_number_list(v: Any, field: str, low: float, low_open: bool) -> None:
    if not isinstance(v, list) or not v:
        raise ConfigError(f"{field}: {v!r} is not allowed; allowed: a non-empty list of numbers")
    for i, x in enumerate(v):
        check_number(x, f"{field}[{i}]", low, low_open=low_open)


# ---------------------------------------------------------------------------------------------
# Cluster sizes
# ---------------------------------------------------------------------------------------------
def apportion_counts(n: int, weights: np.ndarray) -> list[int]:
    """``n`` over ``weights`` by largest remainder (Hamilton; ties to the lower index), zeros allowed (:func:`apportion`
    then gives every cluster a client)."""
    quotas = n * np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    counts = np.floor(quotas).astype(np.int64)
    order = np.argsort(-(quotas - counts), kind="stable")
    counts[order[: n - int(counts.sum())]] += 1
    return [int(c) for c in counts]


def apportion(n_clients: int, shares: Sequence[float]) -> list[int]:
    """Clients per cluster: largest-remainder (Hamilton) rounding of ``n_clients·share`` (ties to the lower
    cluster index), then every cluster gets >= 1 client (taken from the largest). Hand-rolled: a few lines,
    no library offers apportionment."""
    sizes = np.asarray(apportion_counts(n_clients, np.asarray(shares, dtype=np.float64)), dtype=np.int64)
    for c in range(len(sizes)):
        if sizes[c] == 0:
            sizes[int(np.argmax(sizes))] -= 1
            sizes[c] = 1
    return [int(s) for s in sizes]


def equal_sizes(n_clients: int, n_clusters: int) -> list[int]:
    """Balanced: ``n // k`` clients each, the remainder to the first clusters."""
    return [n_clients // n_clusters + (1 if c < n_clients % n_clusters else 0) for c in range(n_clusters)]


def min_clients(n_clusters: int) -> int:
    """The fewest clients a split of ``n_clusters`` ground-truth clusters takes: one per cluster, and at least 3."""
    return max(3, n_clusters)


def check_enough_clients(n_clients: int, n_clusters: int, field: str) -> None:
    minimum = min_clients(n_clusters)
    if n_clients < minimum:
        raise ConfigError(f"clients: {n_clients} is too few for {field} ({n_clusters} clusters); minimum {minimum}")


def check_class_sets_in_dataset(class_sets: list[list[int]], ctx: SplitContext, field: str) -> None:
    for s in class_sets:
        for c in s:
            if c >= ctx.n_classes:
                raise ConfigError(
                    f"{field}.class_sets: class {c} is not in dataset {ctx.dataset}; its classes are "
                    f"0..{ctx.n_classes - 1} ({', '.join(ctx.classes)})")


def uniform_weights(classes: Sequence[int], n_classes: int) -> np.ndarray:
    w = np.zeros(n_classes)
    w[list(classes)] = 1.0 / len(classes)
    return w


def dirichlet_weights(alpha: float, classes: Sequence[int], n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """A class vector ~ Dir(α·1) over ``classes`` (000 §3.1); α = 0 is the limit: one class, chosen uniformly."""
    w = np.zeros(n_classes)
    if alpha == 0:
        w[int(rng.choice(np.asarray(classes)))] = 1.0
        return w
    v = rng.dirichlet(np.full(len(classes), float(alpha)))
    if not np.all(np.isfinite(v)) or v.sum() <= 0:  # tiny α can underflow every gamma draw to 0
        v = np.zeros(len(classes))
        v[int(rng.integers(len(classes)))] = 1.0
    w[list(classes)] = v / v.sum()
    return w


def clusters_of(sizes: Sequence[int]) -> list[int]:
    """Contiguous client blocks: clients 0..s0-1 in cluster 0, the next s1 in cluster 1, …"""
    return [c for c, s in enumerate(sizes) for _ in range(s)]


# ---------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------
COMMON_KEY_NEUTRAL: dict[str, Any] = {"replace": True}
"""Common parameters added after splits were published, left out of the streams' key and the manifest at these
values (:func:`build_split`), so every split written before them keeps its draws and files bit for bit."""
SPLIT_GENERATORS: Registry[type["SplitGenerator"]] = Registry("split generator")


class SplitGenerator(Plugin):
    """Base class: parameters with defaults, their checks, and ``generate`` (the per-client plan).

    A generator declares its own parameters' defaults in ``defaults`` (its checks are code:
    :meth:`check_own_params`); :class:`cflcore.plugin.Plugin`'s ``params_schema`` is built from them, so the
    defaults and the unknown-key check are the plug-in contract's."""

    defaults: ClassVar[dict[str, Any]] = {}
    key_neutral: ClassVar[dict[str, Any]] = {}  # parameters left out of the streams' key at these values (build_split)
    common_defaults: ClassVar[dict[str, Any]] = {"samples_per_client": None, "local_test_fraction": 0.3, "replace": True}
    plugin_kind: ClassVar[str] = "generator"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.params_schema = {"generator": {"type": "string"},
                             **{k: {"default": v} for k, v in {**cls.common_defaults, **cls.defaults}.items()}}

    def __init__(self, params: Mapping[str, Any], field: str = "split"):
        self.field = field
        self.params = self.normalise(params, field)

    @classmethod
    def normalise(cls, params: Mapping[str, Any], field: str | None = None) -> dict[str, Any]:
        """Parameters with defaults filled in (``generator`` first, then the schema's order); unknown keys refused."""
        full = cls.with_defaults(params, field)
        return {"generator": cls.registered_name, **{k: full[k] for k in cls.params_schema if k != "generator"}}

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        """Unknown keys and out-of-range values raise a one-line ConfigError naming ``field.key``."""
        p = cls.normalise(params, field)
        check_samples(p["samples_per_client"], f"{field}.samples_per_client")
        check_bool(p["replace"], f"{field}.replace")
        check_number(p["local_test_fraction"], f"{field}.local_test_fraction", 0.0, 1.0, high_open=True)
        cls.check_own_params(p, field)

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        """Generator-specific checks (dataset-independent)."""

    group_key: ClassVar[str] = ""
    """The parameter with one entry per ground-truth cluster (a rotation's ``angles``), "" where the dataset decides."""
    class_keys: ClassVar[tuple[str, ...]] = ()
    """Parameters that name classes of the dataset: lists of class indices (``class_sets``, ``swaps``)."""

    @classmethod
    def planned_clusters(cls, p: Mapping[str, Any]) -> int | None:
        """The number of ground-truth clusters the parameters fix before the data is read (None: the dataset's)."""
        groups = p.get(cls.group_key) if cls.group_key else None
        return len(groups) if isinstance(groups, list) else None

    @classmethod
    def named_classes(cls, p: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
        """``(key[i], class index)`` for every class the parameters name (:data:`class_keys`)."""
        for key in cls.class_keys:
            for i, group in enumerate(p.get(key) or []):
                for c in group:
                    yield f"{key}[{i}]", int(c)

    @classmethod
    def check_classes(cls, p: Mapping[str, Any], n_classes: int, loader: str, field: str) -> None:
        """The dataset-dependent checks that need only its class count (known before its data job: the loader's
        cflcore.data.loaders.SourceFacts): every class the parameters name is one of the dataset's."""
        for where, c in cls.named_classes(p):
            if c >= n_classes:
                raise ConfigError(f"{field}.{where}: class {c} is not a class of loader {loader} ({n_classes} classes); "
                                  f"allowed: class indices 0..{n_classes - 1}")

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        raise NotImplementedError

    def group_sizes(self, n_clients: int) -> tuple[int, ...] | None:
        """The clients of each ground-truth group, where the parameters alone fix them (a method's
        ``cannot_split`` reads them before any job, cflcore.plugin.Population); None where the dataset or the
        draws decide them. The generator's ``generate`` makes groups of exactly these sizes."""
        return None


SHARES_TOLERANCE = 1e-6
"""How far from 1 the sum of ``cluster_shares`` may be (float rounding: 0.2 + 0.47 + 0.33 is not exactly 1)."""


def check_shares(v: Any, field: str) -> None:
    """A non-empty list of positive shares that sum to 1: a sum of 0.7 would leave what the missing 0.3 means to
    :func:`apportion`'s silent renormalisation."""
    check_number_list(v, field, 0.0, low_open=True)
    total = float(sum(v))
    if abs(total - 1.0) > SHARES_TOLERANCE:
        raise ConfigError(f"{field}: {v!r} sums to {total:.6g}; allowed: positive shares that sum to 1 "
                          f"(within {SHARES_TOLERANCE:g})")


def _check_shares_alphas(p: dict[str, Any], field: str, list_key: str) -> None:
    check_number_list(p["cluster_shares"], f"{field}.cluster_shares", 0.0, low_open=True)
    if len(p[list_key]) != len(p["cluster_shares"]):
        raise ConfigError(f"{field}.{list_key}: {len(p[list_key])} entries but cluster_shares has "
                          f"{len(p['cluster_shares'])}; allowed: one entry per cluster")
    check_shares(p["cluster_shares"], f"{field}.cluster_shares")


@SPLIT_GENERATORS.register("ocfl")
class OcflSplit(SplitGenerator):
    """The four splits of 000 §4.1 (non-)overlapping × (im)balanced, three ground-truth clusters."""

    defaults = {"overlap": False, "imbalanced": False, "alpha": 1.0, "class_sets": None, "cluster_shares": None}
    group_key = "class_sets"
    class_keys = ("class_sets",)

    @classmethod
    def check_classes(cls, p: Mapping[str, Any], n_classes: int, loader: str, field: str) -> None:
        super().check_classes(p, n_classes, loader, field)
        if p.get("class_sets") is None and n_classes not in DEFAULT_CLASS_SETS:
            raise ConfigError(f"{field}.class_sets: null has no default class sets for loader {loader} "
                              f"({n_classes} classes); allowed: class_sets, or a loader with "
                              f"{', '.join(map(str, sorted(DEFAULT_CLASS_SETS)))} classes")

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        check_bool(p["overlap"], f"{field}.overlap")
        check_bool(p["imbalanced"], f"{field}.imbalanced")
        check_number(p["alpha"], f"{field}.alpha", 0.0)
        if p["class_sets"] is not None:
            check_class_sets(p["class_sets"], f"{field}.class_sets")
        if p["cluster_shares"] is not None:
            check_shares(p["cluster_shares"], f"{field}.cluster_shares")
            n_sets = len(p["class_sets"]) if p["class_sets"] is not None else 3
            if len(p["cluster_shares"]) != n_sets:
                raise ConfigError(f"{field}.cluster_shares: {len(p['cluster_shares'])} entries for {n_sets} clusters; "
                                  "allowed: one share per class set")
        elif p["imbalanced"] and p["class_sets"] is not None and len(p["class_sets"]) != 3:
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

    def group_sizes(self, n_clients: int) -> tuple[int, ...] | None:
        sets = self.params["class_sets"]
        n_sets = len(sets) if sets is not None else len(next(iter(DEFAULT_CLASS_SETS.values()))[False])
        return tuple(self.sizes(n_clients, n_sets))

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


@SPLIT_GENERATORS.register("majority")
class MajoritySplit(SplitGenerator):
    """002 §V-1: every client has a majority class with share m_k; ground truth = the group of that class."""

    defaults = {"majority_share": 0.7, "class_sets": None, "group_spread": 0.0}
    key_neutral = {"group_spread": 0.0}  # added after the first studies: 0 draws as before it
    group_key = "class_sets"
    class_keys = ("class_sets",)

    @classmethod
    def check_classes(cls, p: Mapping[str, Any], n_classes: int, loader: str, field: str) -> None:
        super().check_classes(p, n_classes, loader, field)
        if p.get("class_sets") is None and loader not in LOADER_CLASS_GROUPS and n_classes not in DEFAULT_CLASS_SETS:
            raise ConfigError(f"{field}.class_sets: null has no default class grouping for loader {loader} "
                              f"({n_classes} classes); allowed: class_sets, or a loader with "
                              f"{', '.join(map(str, sorted(DEFAULT_CLASS_SETS)))} classes")

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        check_number(p["majority_share"], f"{field}.majority_share", 0.0, 1.0)
        check_number(p["group_spread"], f"{field}.group_spread", 0.0, 1.0, low_open=False)
        if p["class_sets"] is not None:
            check_class_sets(p["class_sets"], f"{field}.class_sets")
            flat = [c for s in p["class_sets"] for c in s]
            if len(flat) != len(set(flat)):
                raise ConfigError(f"{field}.class_sets: the class groups of a majority split must be disjoint")

    def class_sets(self, ctx: SplitContext) -> list[list[int]]:
        if self.params["class_sets"] is not None:
            sets = [list(map(int, s)) for s in self.params["class_sets"]]
        elif ctx.loader in LOADER_CLASS_GROUPS:
            sets = LOADER_CLASS_GROUPS[ctx.loader]
        elif ctx.n_classes in DEFAULT_CLASS_SETS:
            sets = DEFAULT_CLASS_SETS[ctx.n_classes][False]
        else:
            raise ConfigError(f"{self.field}.class_sets: no default class grouping for {ctx.n_classes} classes; set class_sets")
        check_class_sets_in_dataset(sets, ctx, self.field)
        return sets

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
        depth = max(len(s) for s in sets)
        order = [(g, s[i]) for i in range(depth) for g, s in enumerate(sets) if i < len(s)]  # round-robin over groups
        m = float(self.params["majority_share"])
        clients = []
        for k in range(n_clients):
            group, majority = order[k % len(order)]
            w = np.full(ctx.n_classes, (1.0 - m) / (ctx.n_classes - 1) if ctx.n_classes > 1 else 0.0)
            mates = [c for c in sets[group] if c != majority]
            spread = float(self.params["group_spread"]) if mates else 0.0
            w[mates] += m * spread / max(len(mates), 1)
            w[majority] = m * (1.0 - spread)
            clients.append(ClientPlan(cluster=group, class_weights=w / w.sum(), info={"majority_class": majority}))
        return SplitPlan(len(sets), sets, clients)


@SPLIT_GENERATORS.register("dirichlet-mix")
class DirichletMixSplit(SplitGenerator):
    """004 §7.3 / App. H: groups of clients with different heterogeneity α (e.g. 40 % α=1000, 30 % α=0.05, 30 % α=0)."""

    defaults = {"cluster_shares": [0.4, 0.3, 0.3], "alphas": [1000.0, 0.05, 0.0]}
    group_key = "alphas"

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        check_number_list(p["alphas"], f"{field}.alphas", 0.0, low_open=False)
        _check_shares_alphas(p, field, "alphas")

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


@SPLIT_GENERATORS.register("domains")
class DomainsSplit(SplitGenerator):
    """004 §7.3 (Tables 4, 7): groups of clients with clean, noisy or blurred images, near-uniform classes.

    004 does not give its noise σ or blur radius. The authors' code (davedleo/FedGWC, datasets/CIFAR100/utils.py)
    blurs with PIL's GaussianBlur(radius) before normalising and adds N(0, σ²) *after* normalising (units of
    the channel std, about 0.27 of the pixel range on CIFAR), unclipped and redrawn at every access. Ours
    (cflcore.data.store): noise in pixel units [0, 1], clipped back to [0, 1] and drawn once per client (a
    fixed corruption, so every run is deterministic); on MNIST's black background clipping keeps only the
    positive half of the noise. The defaults (noise_std 0.2, blur_sigma 1.0) barely move MNIST's training
    losses (AUC of the per-client mean loss clean vs noise 0.55, clean vs blur 0.60);
    noise_std 0.6 and blur_sigma 2.0 separate them (AUC 1.00 and 0.86)."""

    defaults = {"domains": ["clean", "noise", "blur"], "cluster_shares": [0.4, 0.3, 0.3], "alpha": 100.0,
                "noise_std": 0.2, "blur_sigma": 1.0}
    kinds = ("clean", "noise", "blur")
    group_key = "domains"

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        d = p["domains"]
        if not isinstance(d, list) or not d or any(x not in cls.kinds for x in d) or len(set(d)) != len(d):
            raise ConfigError(f"{field}.domains: {d!r} is not allowed; allowed: distinct entries of {', '.join(cls.kinds)}")
        _check_shares_alphas(p, field, "domains")
        check_number(p["alpha"], f"{field}.alpha", 0.0)
        check_number(p["noise_std"], f"{field}.noise_std", 0.0, low_open=False)
        check_number(p["blur_sigma"], f"{field}.blur_sigma", 0.0)

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        return tuple(apportion(n_clients, self.params["cluster_shares"]))

    def domain_record(self, kind: str, rng: np.random.Generator) -> dict[str, Any]:
        if kind == "noise":
            return {"domain": "noise", "noise_std": float(self.params["noise_std"]),
                    "noise_seed": int(rng.integers(2**31 - 1))}
        if kind == "blur":
            return {"domain": "blur", "blur_sigma": float(self.params["blur_sigma"])}
        return {"domain": "clean"}

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        kinds = list(self.params["domains"])
        check_enough_clients(n_clients, len(kinds), self.field)
        all_classes = list(range(ctx.n_classes))
        clusters = clusters_of(self.group_sizes(n_clients))
        clients = []
        for k, c in enumerate(clusters):
            w = dirichlet_weights(float(self.params["alpha"]), all_classes, ctx.n_classes, client_rngs[k])
            clients.append(ClientPlan(cluster=c, class_weights=w, domain=self.domain_record(kinds[c], client_rngs[k])))
        return SplitPlan(len(kinds), [all_classes for _ in kinds], clients, {"cluster_domains": kinds})


# ---------------------------------------------------------------------------------------------
# Concept and quantity shifts (leahcimali's five heterogeneities; Sattler's rotated half) and standard partitions
# ---------------------------------------------------------------------------------------------
ROTATION_ANGLES = (0, 90, 180, 270)
"""leahcimali/Comparative-Evaluation-of-Clustered-Federated-Learning-Methods (src/utils_data.py,
``concept-shift-on-features``): four groups rotated by 0°, 90°, 180°, 270° (``np.rot90``, counter-clockwise)."""

LABEL_SWAPS = ([1, 7], [2, 7], [4, 7], [3, 8], [5, 6], [7, 9])
"""The same code's ``concept-shift-on-labels``: six groups, each swapping one label pair."""

FEATURE_KINDS = ("none", "erode", "dilate")
"""The same code's ``features-distribution-skew``: three groups, images as they are, eroded or dilated."""

QUANTITY_FRACTIONS = (0.1, 0.2, 0.6, 1.0)
"""The same code's ``quantity-skew``: four groups holding 10 %, 20 %, 60 % and 100 % of their share."""


def check_int_list(v: Any, field: str, low: int, high: int) -> None:
    if not isinstance(v, list) or not v or not all(_is_int(x) and low <= x <= high for x in v):
        raise ConfigError(f"{field}: {v!r} is not allowed; allowed: a non-empty list of integers in {low}..{high}")


def check_labels_in_dataset(pairs: Sequence[Sequence[int]], ctx: SplitContext, field: str) -> None:
    for i, pair in enumerate(pairs):
        for c in pair:
            if c >= ctx.n_classes:
                raise ConfigError(f"{field}[{i}]: label {c} is not in dataset {ctx.dataset}; its classes are "
                                  f"0..{ctx.n_classes - 1} ({', '.join(ctx.classes)})")


class GroupedShiftSplit(SplitGenerator):
    """Groups of clients that differ by one shift (``group_key``: one entry per group), sizes ``cluster_shares``
    (null: equal groups, the remainder to the first), classes uniform (``alpha`` null, leahcimali's 100 samples per
    label) or each client's class vector ~ Dir(α·1) (Hsu et al. 2019; Sattler's demo draws α 1.0)."""

    common_group_defaults: ClassVar[dict[str, Any]] = {"cluster_shares": None, "alpha": None}

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        cls.check_groups(p[cls.group_key], f"{field}.{cls.group_key}")
        if p["alpha"] is not None:
            check_number(p["alpha"], f"{field}.alpha", 0.0)
        if p["cluster_shares"] is not None:
            _check_shares_alphas(p, field, cls.group_key)

    @classmethod
    def check_groups(cls, v: Any, field: str) -> None:
        raise NotImplementedError

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        """The ClientPlan fields (domain, label_swaps, n_draws, info) of a client of ``group``."""
        raise NotImplementedError

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_shifts": [str(g) for g in self.params[self.group_key]]}

    def check_in_dataset(self, ctx: SplitContext) -> None:
        """Dataset-dependent checks (labels within the dataset's classes)."""

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        """``cluster_shares`` apportioned, or equal groups (the remainder to the first)."""
        shares = self.params["cluster_shares"]
        n_groups = len(self.params[self.group_key])
        return tuple(apportion(n_clients, shares) if shares is not None else equal_sizes(n_clients, n_groups))

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        self.check_in_dataset(ctx)
        groups = list(self.params[self.group_key])
        check_enough_clients(n_clients, len(groups), self.field)
        sizes = self.group_sizes(n_clients)
        all_classes = list(range(ctx.n_classes))
        alpha = self.params["alpha"]
        clients = []
        for k, c in enumerate(clusters_of(sizes)):
            w = (uniform_weights(all_classes, ctx.n_classes) if alpha is None
                 else dirichlet_weights(float(alpha), all_classes, ctx.n_classes, client_rngs[k]))
            clients.append(ClientPlan(cluster=c, class_weights=w, **self.group_plan(c, client_rngs[k])))
        return SplitPlan(len(groups), [all_classes for _ in groups], clients, self.cluster_info())


DIRICHLET_OVER = ("classes", "clients")
"""A rotation split's ``dirichlet_over``: classes (each client's class vector ~ Dir(α) over the classes, its draws by
the shared sampler) or clients (each class's train images divided among the clients by shares ~ Dir(α) over the
clients: a partition of the whole train part, Sattler et al.'s ``split_noniid``, :func:`partition_by_class_shares`)."""


def partition_by_class_shares(ctx: SplitContext, n_clients: int, alpha: float, rng: np.random.Generator
                              ) -> list[np.ndarray]:
    """Every train image to one client: class c's images, in a random order, cut at the cumulative shares of
    Dir(α·1) over the clients, one draw per class (felisat/clustered-federated-learning data_utils.py:4-23,
    ``split_noniid``). The images of each client, sorted; a client may get few or none."""
    shares = rng.dirichlet(np.full(n_clients, float(alpha)), ctx.n_classes)
    parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
    for c, pool in enumerate(ctx.class_pools()):
        pool = rng.permutation(pool)
        cuts = (np.cumsum(shares[c])[:-1] * len(pool)).astype(int)
        for k, chunk in enumerate(np.split(pool, cuts)):
            parts[k].append(chunk)
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


@SPLIT_GENERATORS.register("rotation")
class RotationSplit(GroupedShiftSplit):
    """Concept shift on features, P(x | y) differs: group g sees every image (train and local test) rotated by
    ``angles[g]`` degrees counter-clockwise. Sources: leahcimali's ``concept-shift-on-features`` (0/90/180/270°,
    ``np.rot90``); felisat/clustered-federated-learning's demo (half the clients rotated by 180°, Dirichlet α 1.0:
    ``angles: [180, 0]``, ``cluster_shares: [0.5, 0.5]``, ``alpha: 1.0``); IFCA (Ghosh et al. 2020) on rotated
    MNIST. The rotation is recorded per client in the manifest (``domains``) and applied where the data is loaded
    (cflcore.data.store.apply_domain): multiples of 90° exactly (``torch.rot90``), others by
    ``scipy.ndimage.rotate`` (bilinear, zero fill). The orchestrator set stays unrotated."""

    defaults = {"angles": list(ROTATION_ANGLES), **GroupedShiftSplit.common_group_defaults, "dirichlet_over": "classes"}
    key_neutral = {"dirichlet_over": "classes"}  # added after the first rotation studies: classes draws as before it
    group_key = "angles"

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        super().check_own_params(p, field)
        if p["dirichlet_over"] not in DIRICHLET_OVER:
            raise ConfigError(f"{field}.dirichlet_over: {p['dirichlet_over']!r} is not allowed; allowed: "
                              f"{', '.join(DIRICHLET_OVER)}")
        if p["dirichlet_over"] == "clients" and (p["alpha"] is None or p["samples_per_client"] is not None
                                                 or p["replace"]):
            raise ConfigError(f"{field}.dirichlet_over: clients partitions the train part by Dir(alpha) over the "
                              f"clients; allowed with a number alpha, samples_per_client null and replace false only "
                              f"(got alpha {p['alpha']!r}, samples_per_client {p['samples_per_client']!r}, replace "
                              f"{p['replace']!r})")

    @classmethod
    def check_groups(cls, v: Any, field: str) -> None:
        check_int_list(v, field, 0, 359)
        if len(set(v)) != len(v):
            raise ConfigError(f"{field}: {v!r} is not allowed; allowed: distinct angles in 0..359")

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        plan = super().generate(ctx, n_clients, cluster_rng, client_rngs)
        if self.params["dirichlet_over"] == "clients":
            parts = partition_by_class_shares(ctx, n_clients, float(self.params["alpha"]), cluster_rng)
            for client, idx in zip(plan.clients, parts):
                client.fixed_idx = idx
                client.class_weights = np.bincount(ctx.train_labels[np.searchsorted(ctx.train_idx, idx)],
                                                   minlength=ctx.n_classes) / max(1, len(idx))
        return plan

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        angle = int(self.params["angles"][group])
        return {"domain": {"domain": "rotate", "angle": angle}, "info": {"angle": angle}}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_domains": [f"rotate {a}" for a in self.params["angles"]]}


@SPLIT_GENERATORS.register("label-swap")
class LabelSwapSplit(GroupedShiftSplit):
    """Concept shift on labels, P(y | x) differs: group g exchanges the labels of ``swaps[g]`` = [a, b] in its
    clients' train and local test labels (images unchanged). Source: leahcimali's ``concept-shift-on-labels`` (six
    groups: (1,7), (2,7), (4,7), (3,8), (5,6), (7,9)). Recorded per client in the manifest (``label_swaps``) and
    applied where the data is loaded (cflcore.data.store.swap_labels); the orchestrator keeps the true labels."""

    defaults = {"swaps": [list(p) for p in LABEL_SWAPS], **GroupedShiftSplit.common_group_defaults}
    group_key = "swaps"
    class_keys = ("swaps",)

    @classmethod
    def check_groups(cls, v: Any, field: str) -> None:
        if not isinstance(v, list) or not v:
            raise ConfigError(f"{field}: {v!r} is not allowed; allowed: a non-empty list of label pairs [a, b]")
        for i, pair in enumerate(v):
            if not (isinstance(pair, list) and len(pair) == 2 and all(_is_int(c) and c >= 0 for c in pair)):
                raise ConfigError(f"{field}[{i}]: {pair!r} is not allowed; allowed: a pair [a, b] of labels >= 0")
            if pair[0] == pair[1]:
                raise ConfigError(f"{field}[{i}]: {pair!r} swaps label {pair[0]} with itself; allowed: two different labels")

    def check_in_dataset(self, ctx: SplitContext) -> None:
        check_labels_in_dataset(self.params["swaps"], ctx, f"{self.field}.swaps")

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        pair = [int(c) for c in self.params["swaps"][group]]
        return {"label_swaps": [pair], "info": {"swap": pair}}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_shifts": [f"swap {a}<->{b}" for a, b in self.params["swaps"]]}


@SPLIT_GENERATORS.register("feature-skew")
class FeatureSkewSplit(GroupedShiftSplit):
    """Feature distribution skew: group g's images as they are (``none``), eroded or dilated (greyscale
    morphology, a ``morphology_size`` × ``morphology_size`` square, ``scipy.ndimage.grey_erosion`` /
    ``grey_dilation``). Source: leahcimali's ``features-distribution-skew`` (three groups: as they are, eroded,
    dilated; its code uses OpenCV's erode / dilate, the same operators on uint8 images). Recorded per client in the
    manifest (``domains``) and applied where the data is loaded; the orchestrator set stays as it is."""

    defaults = {"features": list(FEATURE_KINDS), "morphology_size": 3, **GroupedShiftSplit.common_group_defaults}
    group_key = "features"

    @classmethod
    def check_groups(cls, v: Any, field: str) -> None:
        if not isinstance(v, list) or not v or any(x not in FEATURE_KINDS for x in v) or len(set(v)) != len(v):
            raise ConfigError(f"{field}: {v!r} is not allowed; allowed: distinct entries of {', '.join(FEATURE_KINDS)}")

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        super().check_own_params(p, field)
        if not (_is_int(p["morphology_size"]) and 2 <= p["morphology_size"] <= 7):
            raise ConfigError(f"{field}.morphology_size: {p['morphology_size']!r} is not allowed; allowed: an integer in 2..7")

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        kind = self.params["features"][group]
        domain = ({"domain": "clean"} if kind == "none"
                  else {"domain": kind, "morphology_size": int(self.params["morphology_size"])})
        return {"domain": domain}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_domains": list(self.params["features"])}


@SPLIT_GENERATORS.register("quantity-skew")
class QuantitySkewSplit(GroupedShiftSplit):
    """Quantity skew: group g's clients draw ``fractions[g]`` of the per-client share (``samples_per_client``, or
    len(train)/clients), from one class distribution: the groups differ only in how much data they hold, a
    negative control for clustering. Source: leahcimali's ``quantity-skew`` (10 %, 20 %, 60 %, 100 %)."""

    defaults = {"fractions": list(QUANTITY_FRACTIONS), **GroupedShiftSplit.common_group_defaults}
    group_key = "fractions"

    @classmethod
    def check_groups(cls, v: Any, field: str) -> None:
        check_number_list(v, field, 0.0, low_open=True)
        for i, x in enumerate(v):
            check_number(x, f"{field}[{i}]", 0.0, 1.0)

    def group_plan(self, group: int, rng: np.random.Generator) -> dict[str, Any]:
        fraction = float(self.params["fractions"][group])
        return {"draw_fraction": fraction, "info": {"fraction": fraction}}

    def cluster_info(self) -> dict[str, Any]:
        return {"cluster_shifts": [f"{float(f):g} of the share" for f in self.params["fractions"]]}


@SPLIT_GENERATORS.register("dirichlet")
class DirichletSplit(SplitGenerator):
    """The standard per-client Dirichlet label partition (Hsu et al. 2019; FL-bench's and Flower's
    ``DirichletPartitioner``): every client's class vector ~ Dir(α·1) (:func:`dirichlet_weights`, as ``dirichlet-mix``
    draws each group's), realised by the shared sampler (with replacement, 000 §4.1; Hsu et al. and Flower
    partition without replacement). No groups: every client is in cluster 0 and the manifest says
    ``ground_truth: false``, so external scores (ARI) are n/a."""

    defaults = {"alpha": 0.5}

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        check_number(p["alpha"], f"{field}.alpha", 0.0)

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

    defaults = {"shards_per_client": 2}

    @classmethod
    def check_own_params(cls, p: dict[str, Any], field: str) -> None:
        if not (_is_int(p["shards_per_client"]) and p["shards_per_client"] >= 1):
            raise ConfigError(f"{field}.shards_per_client: {p['shards_per_client']!r} is not allowed; allowed: an integer >= 1")

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


# ---------------------------------------------------------------------------------------------
# Sampling and writing
# ---------------------------------------------------------------------------------------------
def draw_client_samples(class_weights: np.ndarray, pools: list[np.ndarray], n_draws: int, local_test_fraction: float,
                        rng: np.random.Generator, client: int) -> ClientSamples:
    """Draw ``n_draws`` samples with replacement by class vector, drop duplicates, split train/test (000 §4.1)."""
    counts = rng.multinomial(n_draws, class_weights)
    drawn = []
    for c in np.flatnonzero(counts):
        if len(pools[c]) == 0:
            raise DataError(f"client {client} needs class {c}, but the dataset's train part has no sample of it")
        drawn.append(rng.choice(pools[c], size=int(counts[c]), replace=True))
    distinct = np.unique(np.concatenate(drawn)) if drawn else np.empty(0, dtype=np.int64)
    return local_split(distinct, local_test_fraction, rng, client)


class DisjointDraws:
    """``replace: false``: every client's draws without replacement from what the clients before it left, so no
    train image is in two clients (the partitions of Sattler's demo and of IFCA's code, and leahcimali's). A client's
    ``n_draws`` are split over classes by its class vector with largest-remainder rounding (:func:`apportion`; with
    replacement, 000 §4.1 draws the counts from a multinomial instead), then drawn uniformly without replacement
    within each class. Clients draw in order, each with its own stream. A class with too few images left is a one-line
    DataError naming the split (a smaller ``samples_per_client`` or ``replace: true`` would fit)."""

    def __init__(self, pools: list[np.ndarray], field: str):
        self.left = [np.asarray(p, dtype=np.int64).copy() for p in pools]
        self.field = field

    def __call__(self, class_weights: np.ndarray, pools: list[np.ndarray], n_draws: int, local_test_fraction: float,
                 rng: np.random.Generator, client: int) -> ClientSamples:
        weights = np.asarray(class_weights, dtype=np.float64)
        counts = np.zeros(len(weights), dtype=np.int64)
        classes = np.flatnonzero(weights > 0)
        counts[classes] = apportion_counts(n_draws, weights[classes])
        drawn = []
        for c in np.flatnonzero(counts):
            if counts[c] > len(self.left[c]):
                raise DataError(f"{self.field}.replace: false: client {client} needs {int(counts[c])} images of class "
                                f"{c}, {len(self.left[c])} are left; allowed: fewer samples_per_client or clients, or "
                                "replace: true")
            pick = rng.choice(len(self.left[c]), size=int(counts[c]), replace=False)
            drawn.append(self.left[c][pick])
            self.left[c] = np.delete(self.left[c], pick)
        distinct = np.unique(np.concatenate(drawn)) if drawn else np.empty(0, dtype=np.int64)
        return local_split(distinct, local_test_fraction, rng, client)


def local_train_bound(n_draws: int, local_test_fraction: float) -> int:
    """The most local train samples ``n_draws`` draws give a client: :func:`local_split` holds out
    ceil(local_test_fraction · n) of its n distinct samples (scikit-learn's rounding), and n <= ``n_draws``."""
    return n_draws - int(np.ceil(local_test_fraction * n_draws))


def local_split(distinct: np.ndarray, local_test_fraction: float, rng: np.random.Generator, client: int) -> ClientSamples:
    """A seeded ``local_test_fraction`` of a client's distinct samples becomes its local test set (000 §4.1)."""
    if len(distinct) < 2:
        raise DataError(f"client {client} drew {len(distinct)} distinct samples; need >= 2 for a local train/test split "
                        "(raise samples_per_client)")
    from sklearn.model_selection import train_test_split  # lazy: keeps job start-up short
    train, test = train_test_split(distinct, test_size=local_test_fraction, random_state=int(rng.integers(2**31 - 1)))
    return ClientSamples(np.sort(train).astype(np.int64), np.sort(test).astype(np.int64))


def assignments_table(samples: list[ClientSamples], clusters: Sequence[int], orchestrator_idx: np.ndarray) -> pa.Table:
    """docs/architecture.md §3 ``assignments.parquet``, sorted by (client, role train<test<orchestrator, idx)."""
    client, cluster, role, idx = [np.full(len(orchestrator_idx), -1)], [np.full(len(orchestrator_idx), -1)], \
        [np.full(len(orchestrator_idx), ROLE_CODES["orchestrator"])], [orchestrator_idx]
    for k, (s, c) in enumerate(zip(samples, clusters)):
        for code, ids in ((ROLE_CODES["train"], s.train_idx), (ROLE_CODES["test"], s.test_idx)):
            client.append(np.full(len(ids), k))
            cluster.append(np.full(len(ids), c))
            role.append(np.full(len(ids), code))
            idx.append(ids)
    cl, cu, ro, ix = (np.concatenate(a).astype(np.int64) for a in (client, cluster, role, idx))
    order = np.lexsort((ix, ro, cl))
    names = {v: k for k, v in ROLE_CODES.items()}
    return pa.table({
        "client": pa.array(cl[order].astype(np.int32)),
        "cluster": pa.array(cu[order].astype(np.int32)),
        "role": pa.array([names[int(r)] for r in ro[order]], type=pa.string()),
        "idx": pa.array(ix[order].astype(np.int64)),
    })


def label_histogram(idx: np.ndarray, labels_by_idx: np.ndarray, n_classes: int) -> list[int]:
    return np.bincount(labels_by_idx[idx], minlength=n_classes).astype(int).tolist()


def swapped(histogram: list[int], swaps: Sequence[Sequence[int]] | None) -> list[int]:
    """A client's label histogram as its data shows it: the counts of every swapped pair exchanged."""
    for a, b in swaps or ():
        histogram[a], histogram[b] = histogram[b], histogram[a]
    return histogram


def split_context(dataset_path: str | os.PathLike) -> SplitContext:
    labels, part, meta = read_dataset_labels(dataset_path)
    idx = np.arange(len(labels), dtype=np.int64)
    train = part == "train"
    return SplitContext(train_idx=idx[train], train_labels=labels[train], test_idx=idx[part == "test"],
                        n_classes=int(meta["n_classes"]), classes=[str(c) for c in meta["classes"]],
                        loader=str(meta.get("loader", "")), dataset=Path(dataset_path).stem)


def split_streams(seed: int, params: Mapping[str, Any], n_clients: int, ctx: SplitContext
                  ) -> tuple[np.random.Generator, list[np.random.Generator]]:
    """One cluster-level generator and one per client, all from ``[seed, hash(params, n_clients, dataset)]``."""
    key = stable_hash({"params": dict(params), "n_clients": n_clients, "loader": ctx.loader,
                       "n_train": len(ctx.train_idx), "n_classes": ctx.n_classes})
    children = np.random.SeedSequence([int(seed), int(key, 16)]).spawn(n_clients + 1)
    return np.random.default_rng(children[0]), [np.random.default_rng(c) for c in children[1:]]


def build_split(ctx: SplitContext, settings: Mapping[str, Any], n_clients: int, seed: int,
                field: str = "split") -> tuple[pa.Table, dict[str, Any]]:
    """The assignments table and the manifest of one scenario (nothing is written)."""
    if not isinstance(settings, Mapping) or "generator" not in settings:
        raise ConfigError(f"{field}.generator: missing; allowed: {', '.join(SPLIT_GENERATORS.names())}")
    cls = SPLIT_GENERATORS.get(settings["generator"], field=f"{field}.generator")
    cls.check_params(settings, field)
    if not _is_int(n_clients) or n_clients < 3:
        raise ConfigError(f"clients: {n_clients!r} is not allowed; allowed: an integer >= 3")
    if not _is_int(seed) or seed < 0:
        raise ConfigError(f"seed: {seed!r} is not allowed; allowed: an integer >= 0")
    generator = cls(settings, field)
    params = generator.params
    # a parameter added after splits were published enters the streams' key and the manifest only when it departs
    # from its neutral value, so every split written before it keeps its draws and its files bit for bit
    neutral = {**COMMON_KEY_NEUTRAL, **cls.key_neutral}
    key_params = {k: v for k, v in params.items() if k not in neutral or v != neutral[k]}
    cluster_rng, client_rngs = split_streams(seed, key_params, n_clients, ctx)
    plan = generator.generate(ctx, int(n_clients), cluster_rng, client_rngs)
    n_draws = params["samples_per_client"] or max(2, len(ctx.train_idx) // n_clients)
    pools = ctx.class_pools()
    test_fraction = float(params["local_test_fraction"])
    draw = draw_client_samples if params["replace"] else DisjointDraws(pools, field)
    samples = [local_split(p.fixed_idx, test_fraction, client_rngs[k], k) if p.fixed_idx is not None
               else draw(p.class_weights, pools, client_draws(p, int(n_draws)), test_fraction, client_rngs[k], k)
               for k, p in enumerate(plan.clients)]
    clusters = [p.cluster for p in plan.clients]
    table = assignments_table(samples, clusters, ctx.test_idx)

    labels_by_idx = np.zeros(int(max(ctx.train_idx.max(initial=-1), ctx.test_idx.max(initial=-1))) + 1, dtype=np.int64)
    labels_by_idx[ctx.train_idx] = ctx.train_labels
    hist_train = [swapped(label_histogram(s.train_idx, labels_by_idx, ctx.n_classes), p.label_swaps)
                  for s, p in zip(samples, plan.clients)]
    hist_test = [swapped(label_histogram(s.test_idx, labels_by_idx, ctx.n_classes), p.label_swaps)
                 for s, p in zip(samples, plan.clients)]
    manifest: dict[str, Any] = {
        "generator": params["generator"],
        "params": key_params,
        "dataset": ctx.dataset,
        "loader": ctx.loader,
        "classes": ctx.classes,
        "n_classes": ctx.n_classes,
        "seed": int(seed),
        "n_clients": int(n_clients),
        "n_clusters": plan.n_clusters,
        "cluster_of_client": clusters,
        "clients_per_cluster": np.bincount(clusters, minlength=plan.n_clusters).astype(int).tolist(),
        "class_sets": plan.class_sets,
        "samples_per_client": int(n_draws),
        "class_weights": [np.round(p.class_weights, 12).tolist() for p in plan.clients],
        "label_histograms": [[a + b for a, b in zip(tr, te)] for tr, te in zip(hist_train, hist_test)],
        "label_histograms_train": hist_train,
        "label_histograms_test": hist_test,
        "n_train": [len(s.train_idx) for s in samples],
        "n_test": [len(s.test_idx) for s in samples],
        "orchestrator_size": int(len(ctx.test_idx)),
        **plan.cluster_info,
    }
    info_keys = sorted({k for p in plan.clients for k in p.info})
    for key in info_keys:
        manifest[f"{key}_of_client"] = [p.info.get(key) for p in plan.clients]
    if any(p.domain is not None for p in plan.clients):
        manifest["domains"] = [p.domain or {"domain": "clean"} for p in plan.clients]
    if any(p.label_swaps for p in plan.clients):
        manifest["label_swaps"] = [p.label_swaps or [] for p in plan.clients]
    if not plan.ground_truth:
        manifest["ground_truth"] = False
    return table, manifest


def client_draws(plan: ClientPlan, n_draws: int) -> int:
    """A client's draws: the split's, or its ``draw_fraction`` of them (rounded, at least 2)."""
    return n_draws if plan.draw_fraction is None else max(2, int(round(plan.draw_fraction * n_draws)))


def make_split(dataset_path: str | os.PathLike, settings: Mapping[str, Any], n_clients: int, seed: int,
               out_dir: str | os.PathLike, field: str = "split") -> dict[str, Any]:
    """Write ``{out_dir}/assignments.parquet`` and ``manifest.json`` atomically; return the manifest.

    ``field`` names the split in error messages (e.g. ``splits.overlap-balanced``). Bad input raises before
    anything is written."""
    ctx = split_context(dataset_path)
    table, manifest = build_split(ctx, settings, n_clients, seed, field)
    out_dir = Path(out_dir)
    write_parquet(table, out_dir / fn.ASSIGNMENTS)
    write_json(manifest, out_dir / fn.MANIFEST)
    return manifest


# ---------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------
def split_summary(split_dir: str | os.PathLike) -> pd.DataFrame:
    """Per ground-truth cluster: clients, class set, classes present, distinct samples per client (mean/min/max),
    mean local train/test sizes (and the domain where there is one). ``attrs`` holds the orchestrator size."""
    import pandas as pd

    split_dir = Path(split_dir)
    manifest = read_json(split_dir / fn.MANIFEST)
    table = read_parquet(split_dir / fn.ASSIGNMENTS, columns=["client", "role"])
    clients = table.column("client").to_numpy()
    per_client = np.bincount(clients[clients >= 0], minlength=int(manifest["n_clients"]))
    cluster_of = np.asarray(manifest["cluster_of_client"])
    hist = np.asarray(manifest["label_histograms"])
    rows = []
    for c in range(int(manifest["n_clusters"])):
        mine = cluster_of == c
        sizes = per_client[mine]
        row = {
            "cluster": c,
            "clients": int(mine.sum()),
            "class_set": list(manifest["class_sets"][c]),
            "classes_present": np.flatnonzero(hist[mine].sum(axis=0)).tolist() if mine.any() else [],
            "samples_mean": float(sizes.mean()) if len(sizes) else 0.0,
            "samples_min": int(sizes.min()) if len(sizes) else 0,
            "samples_max": int(sizes.max()) if len(sizes) else 0,
            "train_mean": float(np.mean(np.asarray(manifest["n_train"])[mine])) if mine.any() else 0.0,
            "test_mean": float(np.mean(np.asarray(manifest["n_test"])[mine])) if mine.any() else 0.0,
        }
        if "cluster_domains" in manifest:
            row["domain"] = manifest["cluster_domains"][c]
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["orchestrator_size"] = int(manifest["orchestrator_size"])
    df.attrs["generator"] = manifest["generator"]
    return df
