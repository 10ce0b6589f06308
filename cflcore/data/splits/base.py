"""The split-generator contract (docs/architecture.md §7, §12): what a generator sees of the dataset
(:class:`SplitContext`), what it decides per client (:class:`ClientPlan`, :class:`SplitPlan`), the parameters every
generator takes (:data:`COMMON_PARAMS`), the registry, and the helpers the families share (group sizes, class
vectors, shares).

A generator is one class in one module of this package, registered with ``@SPLIT_GENERATORS.register("<name>")``,
the name a split entry gives as ``generator:``. Beside itself it declares

* its parameters, as the JSON-schema ``params_schema`` of every config-facing plug-in (cflcore.plugin.Plugin):
  types, bounds, defaults and descriptions, the one place each is written; :data:`COMMON_PARAMS` are added to
  every generator's. Config validation checks a split entry against it, and docs/configuration.md prints it;
* the checks a schema cannot express (lengths that must agree, shares that sum to 1), in ``check_params``;
* the ground-truth groups its parameters fix, in ``group_sizes`` (their number is its length);
* ``generate``: a :class:`SplitPlan` of every client, realised by the shared sampler (cflcore.data.splits.build).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping, Sequence

import numpy as np

from ...errors import ConfigError
from ...plugin import Plugin
from ...registry import Registry


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


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------
MIN_SAMPLES_PER_CLIENT = 10
"""Smallest ``samples_per_client`` accepted: with the 70/30 local split (000 §4.1) it leaves a client at
least 7 training and 3 test samples before duplicates are dropped; fewer make local F1 and the client's
update meaningless (2 draws left one training sample)."""

COMMON_PARAMS: dict[str, dict[str, Any]] = {
    "generator": {"type": "string"},  # the entry's own name for its generator (the registry's key)
    "samples_per_client": {
        "type": ["integer", "null"], "minimum": MIN_SAMPLES_PER_CLIENT, "default": None,
        "description": f"draws per client (null: len(train)/clients; at least {MIN_SAMPLES_PER_CLIENT}, which leaves "
                       "7 training and 3 test samples)"},
    "local_test_fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.3,
                            "description": "each client's local test share (000: 0.3)"},
    "replace": {"type": "boolean", "default": True,
                "description": "true: each client draws with replacement (000 §4.1); false: no train image in two "
                               "clients, each client's draws split over classes by its class vector (largest "
                               "remainder) and taken without replacement from what earlier clients left"},
}
"""The parameters of every generator, before its own (:meth:`SplitGenerator.__init_subclass__`): the shared
sampler's (cflcore.data.splits.build)."""

COMMON_KEY_NEUTRAL: dict[str, Any] = {"replace": True}
"""Common parameters added after splits were published, left out of the streams' key and the manifest at these
values (cflcore.data.splits.build.build_split), so every split written before them keeps its draws and files bit for
bit."""

SHARES_TOLERANCE = 1e-6
"""How far from 1 the sum of ``cluster_shares`` may be (float rounding: 0.2 + 0.47 + 0.33 is not exactly 1)."""


def shares_param(default: list[float] | None, description: str = "share of clients per group") -> dict[str, Any]:
    """The schema of a ``cluster_shares`` parameter (null allowed where its default is null); :func:`check_shares`
    checks the sum."""
    return {"type": "array" if default is not None else ["array", "null"], "minItems": 1,
            "items": {"type": "number", "exclusiveMinimum": 0}, "default": default,
            "description": f"{description}; must sum to 1 (within {SHARES_TOLERANCE:g})"}


def class_sets_param(description: str) -> dict[str, Any]:
    """The schema of a ``class_sets`` parameter: null, or lists of distinct class indices (within the dataset: checked
    against its loader's class count, :meth:`SplitGenerator.check_classes`)."""
    return {"type": ["array", "null"], "minItems": 1, "default": None, "description": description,
            "items": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "integer", "minimum": 0}}}


def check_shares(v: Sequence[float], field: str) -> None:
    """Positive shares (the schema's) that sum to 1: a sum of 0.7 would leave what the missing 0.3 means to
    :func:`apportion`'s silent renormalisation."""
    total = float(sum(v))
    if abs(total - 1.0) > SHARES_TOLERANCE:
        raise ConfigError(f"{field}: {list(v)!r} sums to {total:.6g}; allowed: positive shares that sum to 1 "
                          f"(within {SHARES_TOLERANCE:g})")


def check_group_shares(p: Mapping[str, Any], field: str, group_key: str) -> None:
    """``cluster_shares`` has one entry per entry of ``group_key`` (a rotation's ``angles``) and sums to 1."""
    if len(p[group_key]) != len(p["cluster_shares"]):
        raise ConfigError(f"{field}.{group_key}: {len(p[group_key])} entries but cluster_shares has "
                          f"{len(p['cluster_shares'])}; allowed: one entry per cluster")
    check_shares(p["cluster_shares"], f"{field}.cluster_shares")


# ---------------------------------------------------------------------------------------------
# Group sizes and class vectors
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
# The generator contract
# ---------------------------------------------------------------------------------------------
SPLIT_GENERATORS: Registry[type["SplitGenerator"]] = Registry("split generator", package="cflcore.data.splits")


class SplitGenerator(Plugin):
    """Base class (module docstring): ``params_schema`` (its own parameters; :data:`COMMON_PARAMS` are added),
    ``check_params``, ``group_sizes`` and ``generate`` (the per-client plan)."""

    key_neutral: ClassVar[dict[str, Any]] = {}  # parameters left out of the streams' key at these values (build_split)
    plugin_kind: ClassVar[str] = "generator"
    group_key: ClassVar[str] = ""
    """The parameter with one entry per ground-truth group (a rotation's ``angles``), named in the error of a client
    count too small for its groups; "" where the generator has none."""
    class_keys: ClassVar[tuple[str, ...]] = ()
    """Parameters that name classes of the dataset: lists of class indices (``class_sets``, ``swaps``)."""
    drift_draws: ClassVar[bool] = False
    """With a ``drift`` schedule (cflcore.data.drift): True where a group is a class distribution, so a client that
    moves into it holds a new sample drawn by :meth:`drift_plan`; False where a group is a transform of a client's
    own samples (cflcore.data.splits.grouped.GroupedShiftSplit.group_transforms)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.params_schema = {**COMMON_PARAMS, **cls.params_schema}

    def __init__(self, params: Mapping[str, Any], field: str = "split"):
        self.field = field
        self.params = self.normalise(params, field)

    @classmethod
    def normalise(cls, params: Mapping[str, Any], field: str | None = None) -> dict[str, Any]:
        """Parameters with defaults filled in (``generator`` first, then the schema's order); unknown keys refused."""
        full = cls.with_defaults(params, field)
        return {"generator": cls.registered_name, **{k: full[k] for k in cls.params_schema if k != "generator"}}

    @classmethod
    def validate_params(cls, params: Mapping[str, Any], field: str) -> dict[str, Any]:
        """The plug-in contract's validation (schema, defaults, :meth:`check_params`), an unknown key named first as
        :meth:`with_defaults` names it (``<field>: unknown key 'x' for generator <name>; allowed: ...``)."""
        cls.with_defaults(params, field)
        return super().validate_params(params, field)

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

    def group_sizes(self, n_clients: int) -> tuple[int, ...] | None:
        """The clients of each ground-truth group where the parameters alone fix them, one entry per group (so its
        length is the number of groups, whatever ``n_clients``); None where the dataset or the draws decide them.
        Validation reads it before any job: a client count must give every group a client
        (cflcore.config_checks), and a method's ``cannot_split`` reads the sizes (cflcore.plugin.Population). The
        generator's ``generate`` makes groups of exactly these sizes."""
        return None

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        raise NotImplementedError

    def drift_plan(self, group: int, plan: SplitPlan, ctx: SplitContext, rng: np.random.Generator) -> ClientPlan:
        """A :data:`drift_draws` generator's plan of a client that a drift schedule moves into ``group``: the class
        vector its new sample is drawn by, from the schedule's stream ``rng`` (cflcore.data.drift)."""
        raise NotImplementedError
