"""The one contract of every config-facing plug-in: strategies (``cflcore.strategies.base.Strategy``), clusterers
(``cflcore.clustering.clusterers.Clusterer``) and split generators (``cflcore.data.splits.SplitGenerator``).

A plug-in declares its parameters once, as a JSON-schema ``properties`` mapping (:attr:`Plugin.params_schema`)
whose ``default`` values are the only place its defaults are written. This base class
* fills those defaults and rejects unknown keys (:meth:`Plugin.with_defaults`; cheap, no jsonschema: a train
  job builds its strategy with it);
* validates a config entry against the schema, then fills and runs the plug-in's own checks
  (:meth:`Plugin.validate_params`; config validation, pass 3);
* declares the optional hooks a plug-in may override in its own file: :meth:`Plugin.check_params` (cross-field
  checks), :meth:`Plugin.check_population` (checks against a scenario's client count),
  :meth:`Plugin.told_true_k` (whether its parameters give it the true number of groups),
  :meth:`Plugin.cannot_split` (why its parameters rule out recovering a setting's groups before it runs) and, for
  strategies,
  ``replay_clusterer`` (``cflcore.strategies.base.Strategy``: how the what-if replay re-runs its clustering).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from .defaults import schema_defaults
from .errors import ConfigError

if TYPE_CHECKING:
    import jsonschema


def _path(err: "jsonschema.ValidationError") -> str:
    return ".".join(str(p) for p in err.absolute_path) or "<config>"


def _alternative(schema: Mapping[str, Any]) -> str | None:
    """One alternative of a ``oneOf`` / ``anyOf`` in words (a constant, null, a bounded number), or None."""
    if "const" in schema:
        return repr(schema["const"])
    kind = schema.get("type")
    if kind == "null":
        return "null"
    if kind in ("number", "integer"):
        lo = ("(", schema["exclusiveMinimum"]) if "exclusiveMinimum" in schema else ("[", schema.get("minimum"))
        hi = (")", schema["exclusiveMaximum"]) if "exclusiveMaximum" in schema else ("]", schema.get("maximum"))
        name = "a number" if kind == "number" else "an integer"
        if lo[1] is not None and hi[1] is not None:
            return f"{name} in {lo[0]}{lo[1]}, {hi[1]}{hi[0]}"
        if lo[1] is not None:
            return f"{name} {'>' if lo[0] == '(' else '>='} {lo[1]}"
        return name if hi[1] is None else f"{name} {'<' if hi[0] == ')' else '<='} {hi[1]}"
    return None


def _describe(err: "jsonschema.ValidationError") -> str:
    field = _path(err)
    if err.validator in ("oneOf", "anyOf"):
        alternatives = [_alternative(a) for a in err.validator_value]
        if all(alternatives):
            return f"{field}: {err.instance!r} is not allowed; allowed: {' or '.join(alternatives)}"  # type: ignore[arg-type]
    if err.validator == "enum":
        return f"{field}: {err.instance!r} is not allowed; allowed: {', '.join(map(str, err.validator_value))}"
    if err.validator == "additionalProperties":
        allowed = sorted((err.schema.get("properties") or {}).keys())
        return f"{field}: {err.message}; allowed: {', '.join(allowed)}"
    return f"{field}: {err.message}"


def schema_check(instance: Any, schema: Mapping[str, Any], prefix: str = "") -> None:
    """Validate ``instance`` against ``schema``: the first error (shallowest path first) as one ConfigError line
    naming the dotted field (``prefix`` + path) and, where the schema says, the allowed values."""
    import jsonschema  # where an entry is validated (config validation), not where a plug-in is built

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if errors:
        msg = _describe(errors[0])
        if prefix and not errors[0].absolute_path:  # an error on the object itself: "<prefix>: ...", not "<prefix>.<config>"
            raise ConfigError(f"{prefix.rstrip('.')}{msg[len('<config>'):]}")
        raise ConfigError(f"{prefix}{msg}")


def check_finite(node: Any, field: str = "") -> None:
    """No NaN or infinity anywhere (YAML's ``.nan`` / ``.inf``): JSON-schema bounds never refuse NaN (every comparison
    with it is false), so ``participation: .nan`` would pass them and fail inside a job."""
    if isinstance(node, float) and not math.isfinite(node):
        raise ConfigError(f"{field or '<config>'}: {node!r} is not allowed; allowed: a finite number")
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        check_finite(v, f"{field}.{k}" if field else str(k))


CLUSTER_COUNT_KEYS = ("k", "n_clusters")
"""Plug-in parameters that fix a number of clusters (OCFL K-Means ``k``, IFCA ``k``, a scikit-learn
clusterer's ``n_clusters``): they cannot exceed the number of clients of any scenario the variant runs in."""
ORACLE = "oracle"
"""A cluster count's value that means the number of true clusters, read from the split's manifest (000 §4.2)."""


@dataclass(frozen=True)
class Population:
    """What a setting gives a method to split, known before any job: its number of clients and the sizes of its
    ground-truth groups (None where the split's groups are not fixed by its config)."""

    n_clients: int
    group_sizes: tuple[int, ...] | None = None

    @property
    def smallest_group(self) -> int | None:
        return min(self.group_sizes) if self.group_sizes else None


PLUGIN_FACTS_KEY = "plugin_facts"
"""A validated config's facts about its study's variants that only their plug-ins know, derived at validation
(cflcore.config) so that the report reads them without importing a plug-in: ``told_true_k``, the variants whose
parameters tell them the true number of groups (:meth:`Plugin.told_true_k`), and ``cannot_split``,
``{algorithm: {split: reason}}``, the variants that cannot recover a split's groups by construction
(:meth:`Plugin.cannot_split` on that split's :class:`Population`). Beside them, one fact read from other studies'
config files rather than a plug-in, so that the report reads every derived fact in one place: ``home_checks``,
``{strategy method: [results folder, ...]}``, the home-check studies of ``report.cross_paper.home_checks`` that run
each method (cflcore.config.validate.home_check_studies), and ``ablations``, ``{claim id: [[study, results folder],
...]}``, the ablation studies the checked papers declare (cflcore.config.validate.ablation_studies)."""


class Plugin:
    """Base of the config-facing plug-ins (module docstring). ``plugin_kind`` names the kind in messages."""

    params_schema: ClassVar[Mapping[str, Any]] = {}
    registered_name: ClassVar[str] = "?"
    plugin_kind: ClassVar[str] = "plug-in"

    @classmethod
    def allowed_keys(cls) -> list[str]:
        return sorted(cls.params_schema)

    @classmethod
    def with_defaults(cls, params: Mapping[str, Any], field: str | None = None) -> dict[str, Any]:
        """``params`` over the schema defaults; an unknown key is a ConfigError naming ``<field>`` and the
        allowed keys."""
        unknown = sorted(set(params) - set(cls.params_schema))
        if unknown:
            where = field or cls.registered_name
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} for {cls.plugin_kind} {cls.registered_name}; "
                              f"allowed: {', '.join(cls.allowed_keys())}")
        return {**schema_defaults(cls.params_schema), **params}

    @classmethod
    def told_true_k(cls, params: Mapping[str, Any]) -> bool:
        """Whether ``params`` give the plug-in the true number of groups: one of its own cluster-count keys at
        :data:`ORACLE`. An oracle's advantage: the cross-paper table marks it, and the quantity-skew control names
        such a method apart (it splits because it is told to). ``params`` may omit defaults; a plug-in that nests
        the count, or delegates it, overrides this."""
        filled = {**schema_defaults(cls.params_schema), **params}
        return any(key in cls.params_schema and filled.get(key) == ORACLE for key in CLUSTER_COUNT_KEYS)

    @classmethod
    def cannot_split(cls, params: Mapping[str, Any], population: Population) -> str | None:
        """Why ``params`` cannot recover the groups of ``population`` by construction (an empty candidate range, a
        minimum cluster size above the smallest group), as one clause for a table cell; None where the plug-in can
        act. A cross table prints the reason instead of a score and leaves the cell out of its ranks, as a told k
        is marked (:meth:`told_true_k`). ``params`` may omit defaults. Default: it can always act."""
        return None

    @classmethod
    def validate_params(cls, params: Mapping[str, Any], field: str) -> dict[str, Any]:
        """Config validation of one entry: finite numbers (:func:`check_finite`: a schema's bounds pass NaN), the JSON
        schema (unknown keys, types, ranges; one-line errors naming ``<field>.<key>``), then the defaults, then
        :meth:`check_params`. Returns the entry with defaults."""
        check_finite(dict(params), field)
        schema_check(dict(params), {"type": "object", "additionalProperties": False,
                                    "properties": dict(cls.params_schema)}, prefix=f"{field}.")
        full = cls.with_defaults(params, field)
        cls.check_params(full, field)
        return {**params, **{k: v for k, v in full.items() if k not in params}}  # the entry's keys first, as written

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        """Cross-field checks of an entry with its defaults filled; raise ConfigError naming ``<field>.<key>``.
        Default: none."""

    @classmethod
    def check_population(cls, params: Mapping[str, Any], n_clients: int, field: str) -> None:
        """Checks of an entry (defaults filled) against a scenario's number of clients. Default: none."""


# ---- "did not act": a finished run's own records say its method never acted (issue 68) -------------------------

@dataclass(frozen=True)
class NoAction:
    """Why a run's method never acted: ``reason`` is one clause with ``{name}`` fields, ``figures`` the numbers
    that fill them; a cross table joins the seeds of a cell into ranges (:func:`no_action_text`)."""

    reason: str
    figures: Mapping[str, float] = field(default_factory=dict)

    def text(self) -> str:
        return no_action_text([self])


def _figure_text(values: list[float]) -> str:
    """"0.15" for one value (or several equal), "0.15–0.18" for a range; whole numbers printed whole, others to 2
    significant digits."""
    def one(v: float) -> str:
        return str(int(v)) if float(v).is_integer() and abs(v) < 1e6 else f"{v:.2g}"

    lo, hi = one(min(values)), one(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def no_action_text(reasons: list[NoAction]) -> str:
    """The seeds' reasons as one clause per distinct ``reason``, each figure the range over those seeds
    ("smallest mean update norm 0.15–0.18 (round 17–19) against ε₁ 0.03–0.06"); clauses joined by "; "."""
    by_reason: dict[str, list[NoAction]] = {}
    for r in reasons:
        by_reason.setdefault(r.reason, []).append(r)
    return "; ".join(reason.format(**{k: _figure_text([float(r.figures[k]) for r in rs]) for k in rs[0].figures})
                     for reason, rs in by_reason.items())
