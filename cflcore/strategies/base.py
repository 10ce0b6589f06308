"""The small interface between the federated engine and a clustering strategy, and the registry of strategies
(docs/architecture.md §5, §12).

Modelled on Flower's ``Strategy``: one class per federated method, ``configure`` before local training
and ``aggregate`` after it. The engine owns the cluster models and the server optimiser; a strategy
only decides *who belongs with whom* and *which model each client starts from*. The engine imports this contract
and nothing else of this package: the train stage builds the run's strategy (:func:`build_strategy`) and hands it
to the engine.

Conventions
-----------
* Client ids are global ints ``0..n_clients-1``; they never change, even after recursive splits.
* Cluster ids are ints chosen by the strategy. ``ClusterAssignment.labels[i]`` is client ``i``'s cluster.
* A model is a flat 1-D float tensor (trainable parameters, plus float buffers when the engine is
  configured to include them). The engine keeps ``models: dict[cluster_id, Tensor]``.
* A ``StartSpec`` tells which model a client uses: a cluster id, or a convex mix ``{cluster_id: weight}``
  (Louvain CFL's AVG / WNN attribution, 002 eq. 4).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from ..plugin import Plugin
from ..registry import Registry

if TYPE_CHECKING:  # torch is imported where it runs: validating a config imports no torch
    import torch

StartSpec = int | Mapping[int, float]
"""A cluster id, or a convex combination of cluster models ``{cluster_id: weight}``."""


@dataclass(frozen=True)
class ClusterAssignment:
    """The partition of all clients at the end of a round: ``labels[i]`` = cluster of client ``i``."""

    labels: np.ndarray  # int64, shape (n_clients,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", np.asarray(self.labels, dtype=np.int64).copy())

    @classmethod
    def single(cls, n_clients: int) -> "ClusterAssignment":
        return cls(np.zeros(n_clients, dtype=np.int64))

    @property
    def n_clusters(self) -> int:
        return int(len(np.unique(self.labels)))

    def clusters(self) -> dict[int, np.ndarray]:
        """cluster id -> sorted client ids."""
        return {int(c): np.flatnonzero(self.labels == c) for c in np.unique(self.labels)}

    def members(self, cluster: int) -> np.ndarray:
        return np.flatnonzero(self.labels == cluster)


@dataclass(frozen=True, kw_only=True)
class StrategyContext:
    """What a strategy may know at set-up: sizes, the seed and the device; never the ground truth
    except ``n_true_clusters`` (only for the ``oracle`` K-Means baseline, 000 §4.2) and, for a strategy that
    declares :attr:`Strategy.reads_true_groups` (the ``oracle`` reference band) only, ``true_groups``."""

    n_clients: int
    n_params: int
    seed: int
    device: torch.device
    participation: float = 1.0
    n_true_clusters: int | None = None
    dtype: torch.dtype | None = None  # None: torch.float32 (set in __post_init__; no torch at import)
    layer_sizes: tuple[int, ...] | None = None  # sizes of the flat vector's per-layer blocks (002 eq. 2)
    array_sizes: tuple[int, ...] | None = None  # sizes of its per-array blocks (002's authors' eq. 2)
    true_groups: np.ndarray | None = None  # each client's true group; None unless the strategy reads_true_groups

    def __post_init__(self) -> None:
        if self.dtype is None:
            import torch

            object.__setattr__(self, "dtype", torch.float32)  # frozen: the dataclass's own way to set a default late

    def generator(self, *stream: int) -> np.random.Generator:
        """A numpy generator derived from the root seed and a stream id (never a global RNG)."""
        return np.random.default_rng([self.seed, 0x5EED, *stream])


EvaluateFn = Callable[[Mapping[int, "torch.Tensor"], Sequence[int]], np.ndarray]
"""``evaluate(models, clients)`` -> array (len(clients), len(models)) of mean training loss of each
model (flat vector, keyed by any int) on each client's *training* data, in the order of ``models``."""


@dataclass
class RoundUpdates:
    """Everything the engine hands a strategy after local training (docs/architecture.md §5 step 3).

    ``deltas`` is the engine's one (N × P) round buffer: read it, never write it or keep a reference past
    ``aggregate`` (the engine turns it back into the trained vectors afterwards). The engine may hand it lazily
    (``materialise``): the buffer then holds the trained vectors and becomes the deltas, in place, only when a
    strategy reads ``deltas`` (or ``params``); strategies that read only the Gram matrix never pay for it. The
    Gram matrix ΔΔᵀ is the round's ONE product (cflcore.clustering.divergence.update_gram, float64-accumulated,
    its tolerance stated there): the engine computes it once, records it (gram.parquet, the temperature) and
    shares it here; :meth:`gram` and :meth:`divergence` return it (or Γ from it) whatever precision is asked."""

    round: int
    clients: np.ndarray  # global ids of the clients sampled (and trained) this round, sorted
    deltas: torch.Tensor = field(repr=False)  # (len(clients), P): theta_after - theta_start (see the class docstring)
    start: torch.Tensor | None  # (len(clients), P) start vectors; None unless the strategy needs_start_vectors
    step_losses: list[np.ndarray]  # per client: training loss of every local step, in order
    n_samples: np.ndarray  # per client: number of local training samples
    evaluate: EvaluateFn
    previous: ClusterAssignment
    shared_gram: torch.Tensor | None = field(default=None, repr=False, compare=False)
    """The round's one Gram product, when the engine has computed it (else :meth:`gram` computes it once)."""
    materialise: Callable[[], torch.Tensor] | None = field(default=None, repr=False, compare=False)
    """Lazy deltas: called once, on the first read of ``deltas``, it returns them (the engine: in place)."""

    def gram(self, precision: str | None = None) -> torch.Tensor:
        """ΔΔᵀ (n × n, float64), the round's one Gram product (cflcore.clustering.divergence.update_gram). The
        ``precision`` argument is accepted for strategies written before the engine computed one Gram product per round, and ignored: every strategy
        reads the same product, within the tolerance stated there. Do not modify the returned tensor: it is shared."""
        if self.shared_gram is None:
            from ..clustering.divergence import update_gram

            self.shared_gram = update_gram(self.deltas)
        return self.shared_gram

    def divergence(self, precision: str | None = None) -> np.ndarray:
        """Γ (000 Def. 6, eq. 8) of the deltas as a fresh float64 numpy array, from the shared :meth:`gram`."""
        from ..clustering.divergence import cosine_divergence_from_gram

        return cosine_divergence_from_gram(self.gram()).astype(np.float64)

    @property
    def materialised(self) -> bool:
        """Whether ``deltas`` holds the deltas (True unless the engine handed them lazily and nobody read them)."""
        return self.materialise is None

    @property
    def params(self) -> torch.Tensor:
        """The clients' new parameters (start + delta)."""
        if self.start is None:
            raise RuntimeError("start vectors were not kept for this round")
        return self.start + self.deltas


def _get_deltas(self: RoundUpdates) -> torch.Tensor:
    if self.materialise is not None:
        make, self.materialise = self.materialise, None
        self._deltas = make()
    return self._deltas


def _set_deltas(self: RoundUpdates, value: torch.Tensor | None) -> None:
    self._deltas = value


RoundUpdates.deltas = property(_get_deltas, _set_deltas)  # type: ignore[assignment]  # lazy field (dataclass __init__ sets it)


@dataclass
class StrategyResult:
    """What ``aggregate`` returns: the partition of all clients, and diagnostics for ``server.parquet``.

    ``diagnostics`` holds scalars (temperature, split events, chosen k, DB scores as JSON strings...);
    ``divergence`` is the n×n divergence matrix of the sampled clients when the method computes one.
    ``inherit`` maps a new cluster id to the cluster whose model (and server-optimiser state) it starts
    from; clusters absent from it keep their own model.
    """

    assignment: ClusterAssignment
    diagnostics: dict[str, Any] = field(default_factory=dict)
    divergence: np.ndarray | None = None
    inherit: dict[int, int] = field(default_factory=dict)
    aggregate_as: dict[int, int] = field(default_factory=dict)
    """client -> the cluster whose aggregation this round's update joins, instead of the client's cluster in
    ``assignment`` (a late client's joining update, trained from the pre-clustering model, 000 §6.2). A
    cluster id absent from ``assignment`` discards the update."""
    keep_models: tuple[int, ...] = ()
    """Clusters whose model the engine keeps although no client is in them (ids it does not hold are ignored):
    IFCA offers every one of its k models to every client each round, an empty one included (Ghosh et al. 2020,
    Algorithm 1). Any other cluster absent from ``assignment`` is dropped."""
    models: dict[int, torch.Tensor] = field(default_factory=dict)
    """cluster -> a model the strategy computed itself (flat shared vector), replacing the engine's aggregation
    of that cluster this round (Louvain CFL under partial participation: 002 eq. 1 over all members' latest
    models, not only the sampled ones). The cluster's server-optimiser state is kept as the engine left it."""


@dataclass(frozen=True)
class Traffic:
    """What one round sends over the wire, in bytes: from the server to the sampled clients (``down``) and back
    (``up``), summed over the clients (:meth:`Strategy.traffic`)."""

    down: int
    up: int


LOSS_BYTES = 4
"""A training loss a client sends up beside its model (FedGWC's per step, OCFL's late client's per cluster): a float32."""


class Strategy(Plugin, ABC):
    """Base class of every CFL method. Constructor holds hyper-parameters (scikit-learn style);
    ``setup`` receives the run's context; everything learned lives in ``state_dict()``.

    ``params_schema`` is a JSON-schema ``properties`` mapping for the method's config entries; the
    config validator checks every algorithm variant against it, so a plug-in carries its own schema
    (the plug-in contract, :class:`cflcore.plugin.Plugin`: defaults, unknown keys, the optional hooks
    ``check_params``, ``check_population`` and :meth:`replay_clusterer`).

    A method that needs more than the split before it trains declares it: :meth:`inputs` names the files its train
    job reads, each of a file kind the workflow builds without knowing the method (:data:`INPUT_KINDS`), and
    :meth:`resolve_params` turns them into parameters before the strategy is built (cflcore/strategies/scl.py is an example).
    """

    plugin_kind: ClassVar[str] = "method"
    needs_start_vectors: ClassVar[bool] = False
    """Whether ``aggregate`` reads ``RoundUpdates.start`` / ``params`` (the clients' models, not only their
    deltas). Only then does the engine keep an (N × P) matrix of start vectors next to the deltas."""
    reads_true_groups: ClassVar[bool] = False
    """Whether the strategy is handed every client's true group at set-up (``StrategyContext.true_groups``): a
    reference that is told the answer (cflcore/strategies/oracle.py), never a method that is scored on finding it."""
    orchestrator_last_round_only: ClassVar[bool] = False
    """Whether the engine scores this strategy's models on the orchestrator set at the last round only (its
    ``orch_*`` history columns null before it; 000 Def. 8's GF1 then reads the last round). For a reference with one
    model per client, read by its clients' own test sets (cflcore/strategies/local.py): scoring N models on the shared
    set at every evaluation costs more than their training. Every other strategy: at every evaluation round."""

    def __init__(self, **params: Any) -> None:
        """Hold the hyper-parameters: the ``params_schema`` defaults, updated by ``params`` (unknown keys refused)."""
        self.params = type(self).with_defaults(params)

    @classmethod
    def inputs(cls, params: Mapping[str, Any]) -> dict[str, str]:
        """The files this variant's train job reads beyond the split, ``{name: file kind}`` (default: none).

        A file kind is ``"<kind>/<option>"`` with ``<kind>`` in :data:`INPUT_KINDS`; the workflow builds each beside
        the scenario's split (cflcore.layout.input_file) with method-agnostic code, and a change to that code reruns
        only the variants that read it. ``params``: the variant's parameters with their defaults."""
        return {}

    @classmethod
    def resolve_params(cls, params: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with what the declared :meth:`inputs` determine filled in, given each input's path by name;
        the train stage calls it before :func:`build_strategy` (default: ``params`` unchanged)."""
        return dict(params)

    @classmethod
    def replay_clusterer(cls, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """Optional hook: the clusterer that re-runs this method's clustering on a run's recorded matrices (Γ, Gram),
        as ``cflcore.clustering`` clusterer parameters (``{clusterer: <name>, ...}``) for the what-if replay
        (``run:<clusterer>``), given the variant's parameters with defaults; None (the default) when the method's
        clustering cannot be replayed from those matrices."""
        return None

    # ----- lifecycle ---------------------------------------------------------------------------
    def setup(self, ctx: StrategyContext) -> None:
        self.ctx = ctx
        self.assignment = ClusterAssignment.single(ctx.n_clients)

    def initial_models(self, init: torch.Tensor, make_init: Callable[[int], torch.Tensor]) -> dict[int, torch.Tensor]:
        """Models at round 0: ``{0: init}`` by default. ``make_init(i)`` gives the i-th seeded
        independent initialisation (IFCA uses several)."""
        return {0: init}

    def select_clients(self, rnd: int, engine_sample: np.ndarray) -> np.ndarray:
        """The sorted global ids of the clients that train in round ``rnd`` (Flower's ``configure_fit``
        client selection). ``engine_sample`` is the engine's seeded sample (``engine.participation``);
        the default keeps it. A method with its own participation scheme (FedGWC, 004 §4) or with clients
        that join late (000 §6.2) overrides this; any randomness must come from ``self.ctx.generator``."""
        return engine_sample

    def absent_clients(self, rnd: int) -> np.ndarray:
        """Global ids of the clients not (yet) in the federation after round ``rnd`` (late joiners, 000 §6.2):
        the engine never trains them and records null metrics for them. Default: none."""
        return np.empty(0, dtype=np.int64)

    def configure(self, rnd: int, clients: np.ndarray, evaluate: EvaluateFn,
                  models: Mapping[int, torch.Tensor]) -> dict[int, StartSpec]:
        """Which model each sampled client starts this round from (default: its cluster's model)."""
        return {int(c): int(self.assignment.labels[c]) for c in clients}

    @abstractmethod
    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        """Given this round's updates, return the new partition of all clients (Algorithm 1, l. 15–25 of 000)."""

    def personalised(self, models: Mapping[int, torch.Tensor]) -> dict[int, StartSpec]:
        """The model each client is evaluated with after aggregation (default: its cluster's)."""
        return {i: int(c) for i, c in enumerate(self.assignment.labels)}

    def global_model(self, models: Mapping[int, torch.Tensor]) -> StartSpec | None:
        """The method's global model after aggregation, scored by the engine beside the personalised ones
        (history.parquet ``global_*``, 002 Fig. 6), or None when the method has none (the default).

        Louvain CFL: W_t, the mean of the community models (002 Alg. 1, l. 7); BNC (FedAvg): its one model.
        Methods whose one pre-clustering model is replaced by cluster models (OCFL, BCL, SCL, FedGWC) and
        IFCA (k models from round 0) keep None: a global model that exists in some rounds only is not one."""
        return None

    def traffic(self, updates: RoundUpdates, model_bytes: int, n_models: int) -> Traffic:
        """What this round sent (docs/architecture.md §12), declared by the method: by default each client of
        ``updates.clients`` receives one model (its cluster's, or the mix the server makes of several) and sends its
        trained model back. ``model_bytes``: one model's parameters × their dtype's bytes; ``n_models``: the models the
        server held when it configured the round. A method whose clients receive more (IFCA's k models) or send more
        (FedGWC's losses) overrides it; the engine records it in ``traffic.parquet``."""
        n = len(updates.clients)
        return Traffic(down=n * model_bytes, up=n * model_bytes)

    # ----- checkpointing -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Plain tensors / lists / numbers only: saved with ``torch.save`` and loaded with
        ``weights_only=True``."""
        import torch
        return {"labels": torch.as_tensor(self.assignment.labels)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.assignment = ClusterAssignment(np.asarray(state["labels"]))


CENTRALISED_UPDATE_NORMS = "centralised_update_norms"
INPUT_KINDS = (CENTRALISED_UPDATE_NORMS,)
"""The file kinds a strategy may declare among its :meth:`Strategy.inputs`: ``centralised_update_norms/<client|epoch>``,
a centralised training's update norm per round on the scenario's pooled data (cflcore/fl/centralised.py)."""

STRATEGIES: Registry[type[Strategy]] = Registry("method", package="cflcore.strategies")
register_strategy = STRATEGIES.register


def declared_inputs(variant: Mapping[str, Any]) -> dict[str, str]:
    """The files one config variant's train job reads beyond the split (:meth:`Strategy.inputs`), checked against
    :data:`INPUT_KINDS`."""
    params = dict(variant)
    cls = STRATEGIES.get(params.pop("method"), field="algorithms.*.method")
    declared = cls.inputs(cls.with_defaults(params))
    for name, kind in declared.items():
        if kind.split("/", 1)[0] not in INPUT_KINDS:
            raise ValueError(f"{cls.__name__}.inputs: {name!r} has file kind {kind!r}; known kinds: {', '.join(INPUT_KINDS)}")
    return declared


def resolve_params(variant: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """One config variant's parameters resolved from its declared inputs (:meth:`Strategy.resolve_params`)."""
    cls = STRATEGIES.get(variant["method"], field="algorithms.*.method")
    return cls.resolve_params(dict(variant), inputs)


def build_strategy(variant: Mapping[str, Any]) -> Strategy:
    """Instantiate the strategy of one config variant, e.g. ``{method: ocfl, clusterer: hdbscan}``."""
    params = dict(variant)
    cls = STRATEGIES.get(params.pop("method"), field="algorithms.*.method")
    return cls(**params)
