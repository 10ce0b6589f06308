"""Factor sweeps: one config entry varied over a list of values, each value its own cached run.

A sweep is written on the algorithm variant or the split it varies, under ``sweep:``::

    algorithms:
      louvain:
        method: louvain
        attribution: 1nn
        sweep:
          resolution: [0.5, 1.0, 2.0]          # a parameter of the method
          engine.participation: [1.0, 0.5]     # an engine option, for this variant only
    splits:
      majority:
        generator: majority
        sweep: {majority_share: [0.1, 0.4, 0.7, 1.0]}

Several keys in one ``sweep`` are crossed. Validation expands every swept entry into one concrete entry per
combination, named ``<base>@<key>=<value>[,<key>=<value>…]`` (``louvain@resolution=0.5,participation=1.0``;
``<key>`` is the last segment of a dotted key), and replaces the base name wherever the config refers to it
(``study.algorithms``, ``study.splits``, a variant's or a dataset's ``splits:``, ``whatif.algorithms``, per-dataset
``algorithm_params``). Everything downstream (the DAG, the run directories, the tables) sees ordinary named
variants and splits, so adding a value adds only its jobs, removing one leaves the others cached, and
changing one value reruns only that value's jobs: a job's params hold the expanded settings, never the
name. A value that is not a number, a boolean or a short word (a list of Dirichlet α, say) is written as a
mapping ``{label: value}`` and named by its label.

``sweep_index`` (added to the validated config) maps every expanded name to its base and its factor values;
the report draws each sweep's metric against its values from it (cflcore.report.sweeps).
"""
from __future__ import annotations

import copy
import itertools
import re
from typing import Any, Collection, Mapping

from .errors import ConfigError

SWEEP_KEY = "sweep"
INDEX_KEY = "sweep_index"
SEPARATOR = "@"
ENGINE_PREFIX = "engine."
KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]*$")
NAME_PATTERN = r"[A-Za-z0-9_-]+(?:@[A-Za-z0-9_.]+=[A-Za-z0-9_.+-]+(?:,[A-Za-z0-9_.]+=[A-Za-z0-9_.+-]+)*)?"
"""A variant or split name after expansion (the ``{algorithm}`` and ``{split}`` wildcards): no ``/``."""


def value_label(value: Any, field: str) -> str:
    """How a swept value appears in a name: ``0.5``, ``1.0``, ``1e-05``, ``true``, ``avg``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str) and LABEL_PATTERN.match(value) and ".." not in value:
        return value
    raise ConfigError(f"{field}: {value!r} cannot be part of a run name; allowed: numbers, booleans, words of "
                      f"letters, digits, '_', '.', '+', '-', or a mapping {{label: value}} for any other value")


def sweep_values(spec: Any, field: str) -> list[tuple[str, Any]]:
    """``[(label, value), …]`` of one swept key: a non-empty list, or a non-empty mapping label → value."""
    if isinstance(spec, Mapping):
        items = [(str(k), v) for k, v in spec.items()]
        for label, _ in items:
            value_label(label, f"{field}.{label}")  # labels obey the same pattern
    elif isinstance(spec, list):
        items = [(value_label(v, f"{field}[{i}]"), v) for i, v in enumerate(spec)]
    else:
        raise ConfigError(f"{field}: {spec!r} is not allowed; allowed: a non-empty list of values or a mapping {{label: value}}")
    if not items:
        raise ConfigError(f"{field}: an empty sweep is not allowed; allowed: a non-empty list of values")
    labels = [label for label, _ in items]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"{field}: values {labels} repeat; each swept value must be distinct")
    return items


def _set_value(entry: dict[str, Any], key: str, value: Any) -> None:
    if key.startswith(ENGINE_PREFIX):
        entry["engine"] = {**(entry.get("engine") or {}), key[len(ENGINE_PREFIX):]: copy.deepcopy(value)}
    else:
        entry[key] = copy.deepcopy(value)


def expand_entry(base: str, entry: Mapping[str, Any], field: str, allow_engine: bool) -> dict[str, dict[str, Any]]:
    """One swept entry → ``{expanded name: (entry without sweep, values set)}`` in crossing order, plus the
    factor record under ``INDEX_KEY`` of each (``{"base": …, "factors": {key: value}, "labels": {key: label}}``)."""
    spec = entry[SWEEP_KEY]
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(f"{field}.{SWEEP_KEY}: {spec!r} is not allowed; allowed: a non-empty mapping key → list of values")
    keys = list(spec)
    short = {}
    allowed = "a parameter name, or engine.<option>" if allow_engine else "a parameter name"
    for key in keys:
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            raise ConfigError(f"{field}.{SWEEP_KEY}: key {key!r} is not allowed; allowed: {allowed}")
        if "." in key and not (allow_engine and key.startswith(ENGINE_PREFIX)):
            raise ConfigError(f"{field}.{SWEEP_KEY}.{key}: not allowed; allowed: {allowed}")
        if key in ("method", "generator", "splits", SWEEP_KEY, "engine"):
            raise ConfigError(f"{field}.{SWEEP_KEY}.{key}: {key!r} cannot be swept; allowed: the entry's parameters")
        short[key] = key.rsplit(".", 1)[-1]
    if len(set(short.values())) != len(short):
        short = {k: k for k in keys}  # two keys end alike (resolution and engine.resolution): name by the full key
    values = [sweep_values(spec[k], f"{field}.{SWEEP_KEY}.{k}") for k in keys]
    plain = {k: copy.deepcopy(v) for k, v in entry.items() if k != SWEEP_KEY}
    out: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*values):
        concrete = copy.deepcopy(plain)
        for key, (_, value) in zip(keys, combo):
            _set_value(concrete, key, value)
        name = base + SEPARATOR + ",".join(f"{short[k]}={label}" for k, (label, _) in zip(keys, combo))
        record = {"base": base, "factors": {k: copy.deepcopy(v) for k, (_, v) in zip(keys, combo)},
                  "labels": {k: label for k, (label, _) in zip(keys, combo)}}
        out[name] = {"entry": concrete, "record": record}
    return out


def _expand_names(names: list[str], mapping: Mapping[str, list[str]]) -> list[str]:
    return list(dict.fromkeys(n for name in names for n in mapping.get(name, [name])))


def expand_sweeps(cfg: dict[str, Any], engine_options: Collection[str] = ()) -> dict[str, Any]:
    """Expand every ``sweep:`` of ``algorithms`` and ``splits`` in place (module docstring); return ``cfg``.

    Checks here need no plug-in: keys are names (dotted only for ``engine.<option>``, which must be an engine
    option), lists non-empty, values nameable. Each expanded variant is then validated like any other by the
    later passes (a value out of range names the expanded variant's field)."""
    index = cfg[INDEX_KEY] = cfg.get(INDEX_KEY) or {"algorithms": {}, "splits": {}}
    engine_options = set(engine_options)
    for section, allow_engine in (("algorithms", True), ("splits", False)):
        renamed: dict[str, list[str]] = {}
        expanded: dict[str, Any] = {}
        for base, entry in cfg[section].items():
            if not isinstance(entry, Mapping) or SWEEP_KEY not in entry:
                expanded[base] = entry
                continue
            field = f"{section}.{base}"
            if allow_engine and engine_options:
                for key in entry[SWEEP_KEY] or {}:
                    if isinstance(key, str) and key.startswith(ENGINE_PREFIX) and key[len(ENGINE_PREFIX):] not in engine_options:
                        raise ConfigError(f"{field}.{SWEEP_KEY}.{key}: unknown engine option; allowed: "
                                          f"{', '.join('engine.' + o for o in sorted(engine_options))}")
            for name, item in expand_entry(base, entry, field, allow_engine).items():
                if name in cfg[section]:
                    raise ConfigError(f"{field}.{SWEEP_KEY}: expands to {name!r}, which is also defined by hand")
                expanded[name] = item["entry"]
                index[section][name] = item["record"]
                renamed.setdefault(base, []).append(name)
        cfg[section] = expanded
        if not renamed:
            continue
        study = cfg["study"]
        if section == "splits":
            study["splits"] = _expand_names(list(study["splits"]), renamed)
            for entry in [*cfg["algorithms"].values(), *cfg["datasets"].values()]:
                if isinstance(entry, dict) and entry.get("splits"):
                    entry["splits"] = _expand_names(list(entry["splits"]), renamed)
        else:
            if study.get("algorithms"):
                study["algorithms"] = _expand_names(list(study["algorithms"]), renamed)
            whatif = cfg.get("whatif") or {}
            if whatif.get("algorithms"):
                whatif["algorithms"] = _expand_names(list(whatif["algorithms"]), renamed)
            for ds in cfg["datasets"].values():
                overrides = ds.get("algorithm_params") or {}
                for base, names in renamed.items():
                    if base not in overrides:
                        continue
                    override = overrides.pop(base)
                    for name in names:
                        record = index["algorithms"][name]["factors"]
                        # the swept value wins over a per-dataset override of the same key
                        overrides[name] = {**override, **{k: v for k, v in record.items()
                                                          if not k.startswith(ENGINE_PREFIX) and k in override}}
    return cfg


def factor_table(index: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"algorithms": {name: record}, "splits": {name: record}}`` with an empty record for unswept names
    (the report plan carries ``sweep_index`` as is)."""
    return {"algorithms": dict(index.get("algorithms") or {}), "splits": dict(index.get("splits") or {})}
