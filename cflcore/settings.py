"""A train job's settings, typed: one frozen dataclass per block (docs/architecture.md §5, "Typed settings").

:class:`RunSettings` holds the blocks of ``cflcore.config.run_settings``: ``training`` (:class:`TrainingSettings`, a
dataset's training recipe), ``engine`` (:class:`EngineSettings`, with ``engine.personalisation`` as the nested
:class:`PersonalisationSettings`), ``algorithm`` (:class:`AlgorithmSettings`: the strategy plug-in and its parameters,
which the plug-in's own schema types) and ``device``. The train job builds it once at its entry
(:meth:`RunSettings.of` in cflcore.stages.train; cflcore.fl.run.build_engine for the tests and benchmarks that call
the engine directly, and it takes a RunSettings as it is); the engine reads attributes
(``settings.engine.participation``), never a dict key, and no module re-applies a default or casts a value again.

The blocks below are written from the config schema (``cflcore/schemas/config.schema.yaml``) by
``python -m cflcore.settings_source``: their fields, in the schema's order, with the schema's types and defaults, so a
type checker sees them and the schema stays the one home of each (tests/config/test_settings_source.py fails when
the two disagree). A new engine setting is one schema entry, then that command. :meth:`~_Block.of` refuses an unknown
key or a missing required one in one line, casts a given scalar to its field's type (``float``, ``int``, ``bool``, and
the items of a ``tuple[float, ...]``: the casts the engine's readers made one by one before), and lets the class's
defaults (the schema's) fill what a block leaves out (validated configs carry them all; the tests' and the command
line's hand-built settings do not). It keeps the plain dict it was built from, and :meth:`~_Block.as_dict` gives it
back exactly: the run's identity (its Snakemake params, its checkpoints' config hash, cflcore.fl.checkpoint) stays that
dict, byte for byte (a YAML ``15`` stays ``15``, not ``15.0``). Lists become tuples and mappings read-only, so a block
cannot be changed after it is built; ``dataclasses.replace`` gives a changed copy (the engine's ``auto`` values
resolved for its device, cflcore.fl.spec.resolved_engine) whose identity is still the dict the run was given.

This module imports no torch or pandas and reads no schema at import (floor 2, just above cflcore.defaults,
docs/architecture.md §4): every Snakemake parse imports it (cflcore.config reads :data:`NOT_TRAINING`).
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Mapping

from .defaults import section_schema
from .errors import ConfigError

NOT_TRAINING = ("loader", "test_fraction", "max_train", "explain_samples", "algorithm_params", "splits")
"""Keys of a dataset's block (``datasets.*``) that are not its training recipe (:class:`TrainingSettings`)."""


def training_schema() -> dict[str, Any]:
    """The schema of a training recipe: the ``datasets.*`` entry's properties less :data:`NOT_TRAINING`, none of them
    required. An algorithm variant's ``training:`` block is checked against it (it overrides some of its dataset's
    recipe for the variant's runs only, cflcore.config.plan.run_settings)."""
    properties = {k: v for k, v in section_schema("datasets.*")["properties"].items() if k not in NOT_TRAINING}
    return {"type": "object", "additionalProperties": False, "properties": properties}


def frozen_value(value: Any) -> Any:
    """A JSON value made read-only: lists -> tuples, mappings -> read-only mappings (recursively)."""
    if isinstance(value, (list, tuple)):
        return tuple(frozen_value(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen_value(v) for k, v in value.items()})
    return value


_CASTS = {"float": float, "int": int, "bool": bool}
"""A scalar field's cast by its annotation (cflcore.settings_source.CASTS writes the defaults the same way)."""


def _cast(value: Any, cast: type) -> Any:
    if isinstance(value, (int, float)) and not (cast is not bool and isinstance(value, bool)):
        return cast(value)
    return value


def _typed(value: Any, kind: str) -> Any:
    """``value`` cast to its field's annotation ``kind`` where that is one scalar type or a tuple of floats; a ``null``
    or a string of a mixed field (``memory_budget_mb: auto``) stays as given."""
    if kind in _CASTS:
        return frozen_value(_cast(value, _CASTS[kind]))
    if kind == "tuple[float, ...]" and isinstance(value, (list, tuple)):
        return tuple(_cast(v, float) for v in value)
    return frozen_value(value)


def block_values(block: Any) -> dict[str, Any]:
    """A block's fields by name, typed (for a value object whose fields are the block's: cflcore.fl.personal)."""
    return {f.name: getattr(block, f.name) for f in dataclasses.fields(block) if f.name != "_source"}


def plain_value(value: Any) -> Any:
    """The plain JSON value of :func:`frozen_value` (tuples -> lists, mappings -> dicts)."""
    if isinstance(value, (_Block, AlgorithmSettings, RunSettings)):
        return value.as_dict()
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain_value(v) for k, v in value.items()}
    return value


class _Block:
    """What every settings block shares; the blocks themselves are below, written from the schema."""

    FIELD: ClassVar[str]  # the block's name in one-line errors (``engine``, ``datasets.*``)
    _source: Mapping[str, Any]

    @classmethod
    def of(cls, values: Any) -> Any:
        """The block from its plain dict (the class's defaults, the schema's, under what it leaves out); a block as
        it is."""
        if isinstance(values, cls):
            return values
        values = dict(values or {})
        fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "_source"}  # type: ignore[arg-type]
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError(f"{cls.FIELD}.{unknown[0]}: unknown setting; allowed: {', '.join(fields)}")
        missing = sorted(k for k, f in fields.items() if k not in values and f.default is dataclasses.MISSING
                         and f.default_factory is dataclasses.MISSING)
        if missing:
            raise ConfigError(f"{cls.FIELD}.{missing[0]}: required, not given")
        kwargs = {}
        for key, f in fields.items():
            nested = globals().get(str(f.type))
            if isinstance(nested, type) and issubclass(nested, _Block):
                kwargs[key] = nested.of(values.get(key))
            elif key in values:
                kwargs[key] = _typed(values[key], str(f.type))
        return cls(**kwargs, _source=frozen_value(values))

    def as_dict(self) -> dict[str, Any]:
        """The plain dict this block was built from, exactly (a ``dataclasses.replace`` copy keeps it)."""
        return plain_value(self._source)


# --- the blocks, written from the schema by `python -m cflcore.settings_source`: do not edit by hand ---
@dataclasses.dataclass(frozen=True, kw_only=True)
class PersonalisationSettings(_Block):
    """``engine.personalisation``: pFedMe / Per-FedAvg (cflcore.fl.personal)."""

    FIELD: ClassVar[str] = "engine.personalisation"
    kind: Literal["none", "pfedme", "perfedavg"] = "none"
    lam: float = 15.0
    inner_steps: int = 5
    personal_lr: float = 0.09
    inner_l2: float = 0.001
    personal_model: Literal["local", "theta"] = "local"
    all_clients: bool = False
    beta: float = 0.001
    update: Literal["fo", "hf"] = "fo"
    hf_delta: float = 0.001
    _source: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AvailabilitySettings(_Block):
    """``engine.availability``: which clients can take part in a round (cflcore.fl.participation)."""

    FIELD: ClassVar[str] = "engine.availability"
    mode: Literal["uniform", "group", "label", "markov"] = "uniform"
    group_rates: tuple[float, ...] = ()
    quiet: tuple[Mapping[str, Any], ...] = ()
    classes: tuple[int, ...] = ()
    beta: float = 0.5
    p_on: float = 0.5
    p_off: float = 0.5
    _source: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class StragglerSettings(_Block):
    """``engine.stragglers``: sampled clients that make only part of their local steps (cflcore.fl.participation)."""

    FIELD: ClassVar[str] = "engine.stragglers"
    share: None | float = None
    min_steps: int = 1
    _source: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineSettings(_Block):
    """The ``engine`` block (cflcore.fl.engine, cflcore.fl.run)."""

    FIELD: ClassVar[str] = "engine"
    trainer: Literal["loop", "vmap", "auto"] = "auto"
    server_optimizer: Literal["sgd", "adam", "yogi"] = "sgd"
    server_lr: float = 1.0
    server_betas: tuple[float, ...] = (0.9, 0.99)
    server_eps: float = 0.001
    server_momentum: float = 0.0
    proximal_mu: float = 0.0
    aggregation: Literal["unweighted", "weighted"] = "unweighted"
    participation: float = 1.0
    availability: AvailabilitySettings = dataclasses.field(default_factory=AvailabilitySettings)
    stragglers: StragglerSettings = dataclasses.field(default_factory=StragglerSettings)
    personalisation: PersonalisationSettings = dataclasses.field(default_factory=PersonalisationSettings)
    eval_every: int = 1
    checkpoint_every: int = 5
    bn_buffers_in_delta: bool = True
    bn_stats: Literal["aggregate", "local"] = "aggregate"
    precision: Literal["fp32", "bf16", "fp64"] = "fp32"
    memory_budget_mb: int | Literal["auto"] = "auto"
    gpu_jobs: int = 4
    ragged_batches: Literal["auto", "split", "pad"] = "auto"
    channels_last: Literal[True, False, "auto"] = False
    deterministic: bool = True
    compile: bool = False
    conv_form: Literal["grouped", "loop", "unfold"] = "grouped"
    fc_tf32: bool = False
    threads: int = 1
    gpu: bool = False
    _source: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingSettings(_Block):
    """A dataset's training recipe: its ``datasets.*`` keys less :data:`NOT_TRAINING`."""

    FIELD: ClassVar[str] = "datasets.*"
    model: str
    model_kwargs: Mapping[str, Any] | None = dataclasses.field(default_factory=lambda: frozen_value({}))
    optimizer: Literal["sgd", "adam"]
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, ...] = (0.9, 0.999)
    eps: float = 1e-08
    lr_decay: float = 1.0
    optimizer_state: Literal["per_round", "kept"] = "per_round"
    batch_size: int
    local_epochs: int
    rounds: int
    _source: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
# --- end of the blocks written from the schema ---


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlgorithmSettings:
    """The ``algorithm`` block: the strategy plug-in (``method``) and its parameters, which the plug-in's own schema
    types and defaults (cflcore.strategies.base.Strategy.with_defaults)."""

    method: str
    params: Mapping[str, Any]

    @classmethod
    def of(cls, values: Any) -> "AlgorithmSettings":
        if isinstance(values, cls):
            return values
        values = dict(values or {})
        if "method" not in values:
            raise ConfigError("algorithm.method: required, not given")
        return cls(method=str(values.pop("method")), params=frozen_value(values))

    def as_dict(self) -> dict[str, Any]:
        """``{method: ..., **params}`` as plain JSON values: what cflcore.strategies.build_strategy takes."""
        return {"method": self.method, **plain_value(self.params)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Everything a train job depends on besides its input files (cflcore.config.run_settings), typed. ``device`` is
    the run's identity of its device (cflcore.defaults.device_identity)."""

    training: TrainingSettings
    engine: EngineSettings
    algorithm: AlgorithmSettings
    device: str
    _source: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, values: Any) -> "RunSettings":
        """From ``config.run_settings``'s plain dict, or a partial one built by hand (the top-level ``device`` and
        each block's keys default to the schema's); a RunSettings as it is."""
        if isinstance(values, cls):
            return values
        values = dict(values)
        blocks = {"training": TrainingSettings, "engine": EngineSettings, "algorithm": AlgorithmSettings}
        unknown = sorted(set(values) - {*blocks, "device"})
        if unknown:
            raise ConfigError(f"run settings: unknown block {unknown[0]!r}; allowed: training, engine, algorithm, device")
        device = values["device"] if "device" in values else section_schema("")["properties"]["device"]["default"]
        typed = {key: block.of(values.get(key)) for key, block in blocks.items()}
        return cls(**typed, device=str(device), _source=frozen_value(values))

    def as_dict(self) -> dict[str, Any]:
        """The plain dict this was built from, exactly: the run's identity, e.g. its checkpoints' config hash
        (cflcore.fl.checkpoint.config_hash); a ``dataclasses.replace`` copy keeps it."""
        return plain_value(self._source)
