"""A train job's settings, typed: one frozen dataclass per block (docs/architecture.md §5, "Typed settings").

:class:`RunSettings` holds the blocks of ``cflcore.config.run_settings``: ``training`` (:class:`TrainingSettings`, a
dataset's training recipe), ``engine`` (:class:`EngineSettings`, with ``engine.personalisation`` as the nested
:class:`PersonalisationSettings`), ``algorithm`` (:class:`AlgorithmSettings`: the strategy plug-in and its parameters,
which the plug-in's own schema types) and ``device``. The train job builds it once at its entry
(:meth:`RunSettings.of` in cflcore.stages.train; cflcore.fl.run.build_engine for the tests and benchmarks that call
the engine directly, and it takes a RunSettings as it is); the engine reads attributes
(``settings.engine.participation``), never a dict key, and no module re-applies a default.

Every block's fields are generated from its section of the config schema (``cflcore/schemas/config.schema.yaml``),
so a new engine setting is one schema entry: its name, its default and its description are written there only.
:meth:`~_Block.of` fills the schema's defaults under what a block leaves out (validated configs carry them all; the
tests' and the command line's hand-built settings do not), refuses an unknown key or a missing required one in one
line, and casts a scalar to its schema type (``number`` -> float, ``integer`` -> int, ``boolean`` -> bool; the casts
the engine's readers made one by one before). It keeps the plain dict it was built from, and
:meth:`~_Block.as_dict` gives it back exactly: the run's identity (its Snakemake params, its checkpoints' config hash,
cflcore.fl.checkpoint) stays that dict, byte for byte (a YAML ``15`` stays ``15``, not ``15.0``). Lists become tuples
and mappings read-only, so a block cannot be changed after it is built; ``dataclasses.replace`` gives a changed copy
(the engine's ``auto`` values resolved for its device, cflcore.fl.run.build_engine) whose identity is still the
dict the run was given.

This module imports no torch or pandas (floor 2, just above cflcore.defaults, docs/architecture.md §4). The blocks
are made on first use (reading the schema costs tens of milliseconds, which every Snakemake parse would pay).
"""
from __future__ import annotations

import copy
import dataclasses
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

from .defaults import section_schema
from .errors import ConfigError

NOT_TRAINING = ("loader", "test_fraction", "max_train", "explain_samples", "algorithm_params", "splits")
"""Keys of a dataset's block (``datasets.*``) that are not its training recipe (:class:`TrainingSettings`)."""


def frozen_value(value: Any) -> Any:
    """A JSON value made read-only: lists -> tuples, mappings -> read-only mappings (recursively)."""
    if isinstance(value, (list, tuple)):
        return tuple(frozen_value(v) for v in value)
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen_value(v) for k, v in value.items()})
    return value


_CASTS = {"number": float, "integer": int, "boolean": bool}


def _typed(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` cast to its schema ``type`` where that is one scalar type (a ``null`` or a string of a mixed field
    such as ``memory_budget_mb: auto`` stays as given)."""
    cast = _CASTS.get(schema.get("type")) if isinstance(schema.get("type"), str) else None
    if cast is not None and isinstance(value, (int, float)) and not (cast is not bool and isinstance(value, bool)):
        return cast(value)
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
    """What every settings block shares; the fields come from the schema (:func:`_block`)."""

    FIELD: ClassVar[str]  # the block's name in one-line errors (``engine``, ``datasets.*``)
    PROPERTIES: ClassVar[Mapping[str, Any]]  # the schema's properties of the block's fields
    REQUIRED: ClassVar[frozenset[str]]  # keys without a default that a block must give
    NESTED: ClassVar[Mapping[str, type]]  # fields that are blocks themselves
    _source: Mapping[str, Any]

    @classmethod
    def of(cls, values: Any) -> Any:
        """The block from its plain dict (the schema's defaults under what it leaves out); a block as it is."""
        if isinstance(values, cls):
            return values
        values = dict(values or {})
        unknown = sorted(set(values) - set(cls.PROPERTIES))
        if unknown:
            raise ConfigError(f"{cls.FIELD}.{unknown[0]}: unknown setting; allowed: {', '.join(cls.PROPERTIES)}")
        missing = sorted(cls.REQUIRED - set(values))
        if missing:
            raise ConfigError(f"{cls.FIELD}.{missing[0]}: required, not given")
        kwargs = {}
        for key, sub in cls.PROPERTIES.items():
            if key in cls.NESTED:
                kwargs[key] = cls.NESTED[key].of(values.get(key))
            else:
                kwargs[key] = _typed(values[key] if key in values else copy.deepcopy(sub.get("default")), sub)
        return cls(**kwargs, _source=frozen_value(values))

    def as_dict(self) -> dict[str, Any]:
        """The plain dict this block was built from, exactly (a ``dataclasses.replace`` copy keeps it)."""
        return plain_value(self._source)


def _block(name: str, path: str, doc: str, exclude: tuple[str, ...] = (), nested: Mapping[str, type] | None = None) -> type:
    """A frozen dataclass whose fields are the properties of config section ``path`` (less ``exclude``), in the
    schema's order; ``nested``: fields that are blocks of their own. Fields carry no default: :meth:`_Block.of` fills
    the schema's."""
    schema = section_schema(path)
    properties = {k: v for k, v in schema["properties"].items() if k not in exclude}
    nested = dict(nested or {})
    fields: list[Any] = [(key, nested.get(key, Any)) for key in properties]
    fields.append(("_source", Mapping, dataclasses.field(default_factory=dict, repr=False, compare=False)))
    required = frozenset(k for k in schema.get("required", ()) if k in properties and "default" not in properties[k])
    return dataclasses.make_dataclass(
        name, fields, bases=(_Block,), frozen=True, kw_only=True,
        namespace={"__doc__": doc, "__module__": __name__, "FIELD": path, "PROPERTIES": MappingProxyType(properties),
                   "REQUIRED": required, "NESTED": MappingProxyType(nested)})


_GENERATED = {  # name -> (schema section, docstring, keys left out, nested blocks by field)
    "PersonalisationSettings": ("engine.personalisation", "``engine.personalisation``: pFedMe / Per-FedAvg (cflcore.fl.personal).",
                                (), {}),
    "EngineSettings": ("engine", "The ``engine`` block (cflcore.fl.run).", (), {"personalisation": "PersonalisationSettings"}),
    "TrainingSettings": ("datasets.*", "A dataset's training recipe: its ``datasets.*`` keys less :data:`NOT_TRAINING`.",
                         NOT_TRAINING, {}),
}


def __getattr__(name: str) -> type:
    """The generated blocks, made on first use: reading the schema costs tens of milliseconds, which every Snakemake
    parse would pay (cflcore.config imports :data:`NOT_TRAINING` from here)."""
    if name in globals():  # made already (a call by name, not an attribute lookup)
        return globals()[name]
    if name not in _GENERATED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    path, doc, exclude, nested = _GENERATED[name]
    made = _block(name, path, doc, exclude, {k: __getattr__(v) for k, v in nested.items()})
    globals()[name] = made
    return made


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


def _run_blocks() -> dict[str, Any]:
    return {"training": __getattr__("TrainingSettings"), "engine": __getattr__("EngineSettings"),
            "algorithm": AlgorithmSettings}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Everything a train job depends on besides its input files (cflcore.config.run_settings), typed. ``device`` is
    the run's identity of its device (cflcore.defaults.device_identity)."""

    training: Any  # TrainingSettings (generated, so not nameable in an annotation checkers read)
    engine: Any  # EngineSettings
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
        blocks = _run_blocks()
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
