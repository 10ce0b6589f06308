"""The defaults of the config schema (``cflcore/schemas/config.schema.yaml``), for the code that receives a section
of the config: the schema is the only place a default is written (tests/strategies/test_plugins.py checks that no code
restates one as ``.get(key, default)``). Validated configs carry every default already (cflcore.config fills them
once); a train job's settings built by hand get them where they are typed (cflcore.settings), the data stage's in
cflcore.data.loaders.LoaderSettings."""
from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any, Mapping

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.yaml"


def schema_defaults(properties: Mapping[str, Any]) -> dict[str, Any]:
    """``{key: default}`` of a JSON-schema ``properties`` mapping (keys without a default are left out)."""
    return {k: copy.deepcopy(sub["default"]) for k, sub in properties.items() if "default" in sub}


@cache
def _schema() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))


def section_schema(path: str) -> dict[str, Any]:
    """The schema of a config section by dotted path: ``""`` (the top level), ``engine``, ``datasets.*`` (any
    dataset: ``additionalProperties``), ``whatif.clusterers[]`` (an item of an array)."""
    schema = _schema()
    for part in filter(None, path.split(".")):
        name, items = (part[:-2], True) if part.endswith("[]") else (part, False)
        schema = schema["additionalProperties"] if name == "*" else schema["properties"][name]
        if items:
            schema = schema["items"]
    return schema


def config_defaults(path: str) -> dict[str, Any]:
    """The defaults of one config section (:func:`section_schema`)."""
    return schema_defaults(section_schema(path).get("properties") or {})


def device_identity(device: str) -> str:
    """The ``device`` setting as a run's identity holds it: ``cuda:N`` -> ``cuda`` (which GPU of one machine a job
    takes changes no result: one GPU model, driver and torch build give the same bytes, docs/gpu.md), other values as
    written. The job gets the concrete device apart (``stages.train(device=...)``); the hardware it ran on is checked
    at resume (cflcore.fl.checkpoint) and recorded in status.json."""
    return "cuda" if str(device).startswith("cuda:") else str(device)
