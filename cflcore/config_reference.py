"""The config reference, docs/configuration.md, generated from the schema: every key of the study config
(cflcore/schemas/config.schema.yaml) and every plug-in's parameters (their ``params_schema``), with types, allowed
values, defaults and descriptions. The schema is the one home of what a key means; this page is its rendering.

``python -m cflcore.config_reference > docs/configuration.md`` writes it;
tests/config/test_config_reference.py fails when the file and the schema disagree. Every line is at most
:data:`WIDTH` characters, so the page reads in a terminal as well as on GitHub.
"""
from __future__ import annotations

import functools
import json
import re
import sys
import textwrap
from typing import Any, Iterator, Mapping

WIDTH = 120
OUTPUT = "docs/configuration.md"
COMMAND = "python -m cflcore.config_reference > docs/configuration.md"

INTRO = """\
# Configuration reference

Generated from the schema by `{command}`: do not edit by hand.
Every key below is a key of a study's config file; `config/schema.yaml` (a link to
`cflcore/schemas/config.schema.yaml`) holds the study's keys and each plug-in's `params_schema` its parameters.
How to write a config, layer files and override keys: [config/README.md](../config/README.md).
Validation checks every file against these, before any job runs, and an error names the dotted field and the
allowed values.

Notation: `<name>` is any name you choose (a dataset, a split, a variant); `[]` an item of a list; the default
is what validation fills in when a key is left out. A field that names something says what it may name ("Names
..."), and a field that asks something of the data how much it may ask ("Allowed: ..."): validation refuses a name
that points at nothing and a request the data cannot fill (cflcore/config_checks.py).
"""


def _value(v: Any) -> str:
    return f"`{json.dumps(v, ensure_ascii=False)}`" if not isinstance(v, str) else f"`{v}`"


def _kind(schema: Mapping[str, Any]) -> str:
    """Type, allowed values and bounds of one schema node, in words."""
    parts = []
    if "enum" in schema:
        parts.append("one of " + ", ".join(_value(v) for v in schema["enum"]))
    elif "const" in schema:
        parts.append("exactly " + _value(schema["const"]))
    else:
        kinds = schema.get("type")
        if isinstance(kinds, list):
            parts.append(" or ".join(str(k) for k in kinds))
        elif kinds:
            parts.append(str(kinds))
        for alt in ("oneOf", "anyOf"):
            if alt in schema:
                parts.append(" or ".join(_kind(s) or "any" for s in schema[alt]))
    bounds = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}
    parts += [f"{sign} {schema[key]}" for key, sign in bounds.items() if key in schema]
    if "pattern" in schema:
        parts.append(f"matching `{schema['pattern']}`")
    if "minItems" in schema:
        parts.append(f"at least {schema['minItems']} item{'s' if schema['minItems'] != 1 else ''}")
    if "maxItems" in schema:
        parts.append(f"at most {schema['maxItems']} items")
    items = schema.get("items")
    if isinstance(items, Mapping) and items.get("type") != "object" and _kind(items):
        parts.append(f"items: {_kind(items)}")
    return ", ".join(p for p in parts if p)


@functools.cache
def _names() -> dict[str, str]:
    from .config_checks import naming_fields

    return naming_fields()


def _entry(path: str, schema: Mapping[str, Any], required: bool, field: str | None = None) -> list[str]:
    """One key as a bullet: its dotted path, what it takes, its default, then its description and, for a field that
    names something, what it may name (cflcore.config_checks.naming_fields: what validation checks it against, by
    its config ``field``, default ``path``), wrapped."""
    facts = [f for f in (_kind(schema), "required" if required else "",
                         f"default {_value(schema['default'])}" if "default" in schema else "") if f]
    head = f"- `{path}`" + (f" ({'; '.join(facts)})" if facts else "")
    text = " ".join(str(schema.get("description", "")).split())
    names = _names().get(field or path)
    if names:
        text = f"{text.rstrip('.')}. {names}" if text else names
    body = f"{head}: {text}" if text else head
    lines = textwrap.wrap(body, WIDTH, subsequent_indent="  ", break_long_words=True, break_on_hyphens=False)
    return [lines[0], *(_literal(line) for line in lines[1:])]


def _literal(line: str) -> str:
    """A continuation line that Markdown would read as a list item or a heading, escaped (``- x`` -> ``\\- x``)."""
    text, indent = line.lstrip(), line[: len(line) - len(line.lstrip())]
    if re.match(r"([-*+]|#+)(\s|$)", text):
        return f"{indent}\\{text}"
    number = re.match(r"(\d+)([.)])(\s|$)", text)
    return f"{indent}{number.group(1)}\\{text[len(number.group(1)):]}" if number else line


def _walk(path: str, schema: Mapping[str, Any], required: bool = False) -> Iterator[list[str]]:
    """Every key under ``path``, depth first, in the schema's order."""
    yield _entry(path, schema, required)
    needed = set(schema.get("required", ()))
    for key, sub in (schema.get("properties") or {}).items():
        yield from _walk(f"{path}.{key}" if path else key, sub, key in needed)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping) and (extra.get("properties") or extra.get("description")):
        yield from _walk(f"{path}.<name>", extra)
    items = schema.get("items")
    if isinstance(items, Mapping) and items.get("properties"):
        yield from _walk(f"{path}[]", items)


def _section(title: str, lines: Iterator[list[str]], intro: str = "") -> list[str]:
    out = ["", f"## {title}", ""]
    if intro:
        out += textwrap.wrap(" ".join(intro.split()), WIDTH) + [""]
    for entry in lines:
        out += entry
    return out


def _plugin_sections(title: str, field: str, registry: Any, entry: str | None = None) -> list[str]:
    """One subsection per registered plug-in: its docstring's first paragraph and its parameters, as its
    ``params_schema`` declares them (``entry``: the config field of a plug-in's entry, ``splits.<name>``, under which a
    parameter that names something says what it may name)."""
    out = ["", f"## {title}", ""]
    out += textwrap.wrap(f"The plug-ins a config names in {field}, with the parameters each takes there.", WIDTH) + [""]
    for name in registry.names():
        plugin = registry.get(name)
        out += [f"### `{name}`", ""]
        doc = (plugin.__doc__ or "").strip().split("\n\n")[0]
        if doc:
            out += textwrap.wrap(" ".join(doc.split()), WIDTH) + [""]
        params = getattr(plugin, "params_schema", {}) or {}
        if not params:
            out += ["No parameters.", ""]
            continue
        for key, sub in params.items():
            if key == registry_key(registry):
                continue
            out += _entry(key, sub, False, f"{entry}.{key}" if entry else None)
        out.append("")
    return out[:-1]


def registry_key(registry: Any) -> str:
    """The key that names the plug-in itself in its config entry (a split generator's ``generator``)."""
    return "generator" if registry.kind == "split generator" else ""


def render() -> str:
    """docs/configuration.md's text (a function of the schema and the registered plug-ins only)."""
    from .clustering.clusterers import CLUSTERERS
    from .config import load_schema
    from .data.splits import SPLIT_GENERATORS
    from .strategies.base import STRATEGIES

    schema = load_schema()
    lines = [INTRO.format(command=COMMAND).rstrip("\n")]
    lines += textwrap.wrap(" ".join(str(schema.get("description", "")).split()), WIDTH)
    needed = set(schema.get("required", ()))
    blocks = {k: sub for k, sub in schema["properties"].items() if sub.get("properties") or sub.get("additionalProperties")}
    lines += _section("Top-level keys", (_entry(k, sub, k in needed) for k, sub in schema["properties"].items()
                                         if k not in blocks))
    for key, sub in blocks.items():
        lines += _section(f"`{key}`", _walk(key, sub, key in needed))
    lines += _plugin_sections("Methods", "`algorithms.<name>.method`", STRATEGIES)
    lines += _plugin_sections("Clusterers", "`algorithms.<name>.clusterer` (OCFL) and `whatif.clusterers[].clusterer`", CLUSTERERS)
    lines += _plugin_sections("Split generators", "`splits.<name>.generator`", SPLIT_GENERATORS, "splits.<name>")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
