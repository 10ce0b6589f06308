"""The typed settings blocks of cflcore/settings.py, written from the config schema (docs/architecture.md §5).

Each block is a frozen dataclass whose fields are the properties of one schema section, in the schema's order, with
the types the schema gives (``number`` -> ``float``, an ``enum`` -> a ``Literal``, ``oneOf`` -> a union, an
``array`` -> a tuple, ``object`` -> a read-only mapping) and the schema's defaults; a required key without a default
has none. The source is real, so an editor or a type checker sees every field; the schema stays the one home of
names, types and defaults: ``python -m cflcore.settings_source`` rewrites the blocks' region of cflcore/settings.py,
and tests/config/test_settings_source.py fails when that region and the schema disagree.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping

from .defaults import section_schema
from .settings import NOT_TRAINING

TARGET = Path(__file__).with_name("settings.py")
BEGIN = "# --- the blocks, written from the schema by `python -m cflcore.settings_source`: do not edit by hand ---\n"
END = "# --- end of the blocks written from the schema ---\n"
COMMAND = "python -m cflcore.settings_source"

BLOCKS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("PersonalisationSettings", "engine.personalisation",
     "``engine.personalisation``: pFedMe / Per-FedAvg (cflcore.fl.personal).", ()),
    ("AvailabilitySettings", "engine.availability",
     "``engine.availability``: which clients can take part in a round (cflcore.fl.participation).", ()),
    ("StragglerSettings", "engine.stragglers",
     "``engine.stragglers``: sampled clients that make only part of their local steps (cflcore.fl.participation).", ()),
    ("EngineSettings", "engine", "The ``engine`` block (cflcore.fl.engine, cflcore.fl.run).", ()),
    ("TrainingSettings", "datasets.*",
     "A dataset's training recipe: its ``datasets.*`` keys less :data:`NOT_TRAINING`.", NOT_TRAINING),
)
"""Class name, schema section, docstring and the section's keys left out, upstream blocks first (a block that nests
another comes after it)."""

_SCALARS = {"number": "float", "integer": "int", "boolean": "bool", "string": "str", "null": "None",
            "object": "Mapping[str, Any]"}


def _py(value: Any) -> str:
    """A JSON value as a Python literal (lists as tuples: blocks are read-only)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(_py(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(value)


def annotation(schema: Mapping[str, Any]) -> str:
    """The Python type of a schema property."""
    if "enum" in schema:
        return f"Literal[{', '.join(_py(v) for v in schema['enum'])}]"
    if "const" in schema:
        return f"Literal[{_py(schema['const'])}]"
    alternatives = schema.get("oneOf") or schema.get("anyOf")
    if alternatives:
        return " | ".join(annotation(a) for a in alternatives)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(annotation({**schema, "type": k}) for k in kind)
    if kind == "array":
        return f"tuple[{annotation(schema.get('items') or {})}, ...]"
    return _SCALARS.get(kind, "Any")


CASTS = {"float": float, "int": int, "bool": bool}
"""A scalar field's cast by its annotation: what :meth:`cflcore.settings._Block.of` applies to a given value (a YAML
``15`` for a ``number`` field becomes ``15.0``), and what the defaults below are written as."""


def _default(schema: Mapping[str, Any], kind: str) -> str:
    value = schema["default"]
    cast = CASTS.get(kind)
    if cast is not None and isinstance(value, (int, float)):
        value = cast(value)
    if isinstance(value, Mapping):
        return f"dataclasses.field(default_factory=lambda: frozen_value({json.dumps(value)}))"
    return _py(value)


def _field(key: str, schema: Mapping[str, Any], required: bool, nested: Mapping[str, str]) -> str:
    if key in nested:
        return f"    {key}: {nested[key]} = dataclasses.field(default_factory={nested[key]})"
    kind = annotation(schema)
    if "default" in schema:
        return f"    {key}: {kind} = {_default(schema, kind)}"
    if required:
        return f"    {key}: {kind}"
    return f"    {key}: {kind} | None = None"


def render_block(name: str, path: str, doc: str, exclude: tuple[str, ...], nested: Mapping[str, str]) -> str:
    """One block's source."""
    schema = section_schema(path)
    required = set(schema.get("required", ()))
    lines = ["@dataclasses.dataclass(frozen=True, kw_only=True)", f"class {name}(_Block):", f'    """{doc}"""', "",
             f"    FIELD: ClassVar[str] = {json.dumps(path)}"]
    lines += [_field(key, sub, key in required, nested) for key, sub in schema["properties"].items()
              if key not in exclude]
    lines.append("    _source: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)")
    return "\n".join(lines) + "\n"


def render() -> str:
    """The blocks' region of cflcore/settings.py, its markers included."""
    made: dict[str, str] = {}
    blocks = []
    for name, path, doc, exclude in BLOCKS:
        properties = section_schema(path)["properties"]
        nested = {key: made[key] for key in properties if key in made}  # a property that is a block made above
        blocks.append(render_block(name, path, doc, exclude, nested))
        made[path.rpartition(".")[2]] = name
    return BEGIN + "\n\n".join(blocks) + END


def region(text: str) -> str:
    """The blocks' region of a settings.py text, its markers included ("" when it has none)."""
    start, end = text.find(BEGIN), text.find(END)
    return text[start:end + len(END)] if 0 <= start < end else ""


def main() -> int:
    text = TARGET.read_text(encoding="utf-8")
    old = region(text)
    if not old:
        print(f"{TARGET}: no region between the markers {BEGIN.strip()!r} and {END.strip()!r}", file=sys.stderr)
        return 1
    TARGET.write_text(text.replace(old, render()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
