"""The typed settings are the schema's: the blocks of cflcore/settings.py are written from it
(cflcore/settings_source.py) and match it, and no dataclass that mirrors a schema section restates a default the
schema does not hold (docs/architecture.md §5, "Typed settings")."""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import pytest

from cflcore import settings, settings_source
from cflcore.data.loaders import LoaderSettings
from cflcore.defaults import section_schema
from cflcore.fl.optim import ClientOptimizer
from cflcore.fl.server import ServerOptimizer
from cflcore.fl.trainers import TrainSpec
from cflcore.strategies.base import StrategyContext

SERVER_KEYS = {"kind": "server_optimizer", "lr": "server_lr", "betas": "server_betas", "eps": "server_eps",
               "momentum": "server_momentum"}

MIRRORS: dict[type, tuple[tuple[str, ...], dict[str, str]]] = {
    settings.EngineSettings: (("engine",), {}),
    settings.PersonalisationSettings: (("engine.personalisation",), {}),
    settings.TrainingSettings: (("datasets.*",), {}),
    TrainSpec: (("engine", "datasets.*"), {}),
    StrategyContext: (("engine",), {}),
    ServerOptimizer: (("engine",), SERVER_KEYS),
    ClientOptimizer: (("datasets.*",), {"kind": "optimizer"}),
    LoaderSettings: (("datasets.*", ""), {}),
}
"""Every dataclass whose fields are config keys -> the schema sections its fields come from, and the fields named
otherwise there."""


def _plain(value: Any) -> Any:
    return settings.plain_value(value)


def restated_defaults(cls: type, sections: tuple[str, ...], renamed: dict[str, str]) -> list[str]:
    """The fields of ``cls`` whose default is not their schema key's default (a key without one included)."""
    properties: dict[str, Any] = {}
    for section in reversed(sections):  # the first section wins a name both have
        properties.update(section_schema(section)["properties"])
    wrong = []
    for f in dataclasses.fields(cls):
        key = renamed.get(f.name, f.name)
        if key not in properties or f.name == "_source":
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
            if dataclasses.is_dataclass(default):
                continue  # a nested block: checked as a block of its own
        else:
            continue
        schema = properties[key]
        if "default" not in schema or _plain(default) != schema["default"]:
            wrong.append(f"{cls.__name__}.{f.name} = {default!r}, the schema's {key}: {schema.get('default', 'none')!r}")
    return wrong


def test_the_blocks_are_written_from_the_schema():
    text = Path(settings.__file__).read_text(encoding="utf-8")
    assert settings_source.region(text) == settings_source.render(), (
        f"cflcore/settings.py's blocks disagree with the schema; rewrite them: {settings_source.COMMAND}")


def test_a_changed_schema_changes_the_blocks(monkeypatch):
    """The drift check can fail: a default moved in the schema is a different rendering."""
    real = section_schema

    def moved(path: str) -> dict[str, Any]:
        schema = real(path)
        if path != "engine":
            return schema
        properties = {**schema["properties"], "participation": {**schema["properties"]["participation"], "default": 0.5}}
        return {**schema, "properties": properties}

    monkeypatch.setattr(settings_source, "section_schema", moved)
    assert "participation: float = 0.5" in settings_source.render()
    assert settings_source.render() != settings_source.region(Path(settings.__file__).read_text(encoding="utf-8"))


def test_every_block_field_has_the_schema_type_and_name():
    hints = typing.get_type_hints(settings.EngineSettings, vars(settings))
    assert [f.name for f in dataclasses.fields(settings.EngineSettings)][:-1] == list(section_schema("engine")["properties"])
    assert hints["participation"] is float and hints["threads"] is int and hints["deterministic"] is bool
    assert hints["personalisation"] is settings.PersonalisationSettings
    assert typing.get_args(hints["trainer"]) == ("loop", "vmap", "auto")
    assert set(typing.get_args(hints["memory_budget_mb"])) == {int, typing.Literal["auto"]}
    training = [f.name for f in dataclasses.fields(settings.TrainingSettings)][:-1]
    assert training == [k for k in section_schema("datasets.*")["properties"] if k not in settings.NOT_TRAINING]


@pytest.mark.parametrize("cls", list(MIRRORS), ids=lambda c: c.__name__)
def test_no_dataclass_restates_a_default(cls):
    sections, renamed = MIRRORS[cls]
    assert restated_defaults(cls, sections, renamed) == []


def test_a_restated_default_is_found():
    """The check above can fail: the old TrainSpec's memory budget (2048 where the schema says auto) and a default
    the schema does not have (a learning rate) are both named."""

    @dataclasses.dataclass
    class Restating:
        memory_budget_mb: int = 2048
        lr: float = 0.01
        precision: str = "fp32"

    wrong = restated_defaults(Restating, ("engine", "datasets.*"), {})
    assert len(wrong) == 2 and "memory_budget_mb" in wrong[0] and "lr" in wrong[1]


def test_a_typed_block_casts_and_refuses():
    engine = settings.EngineSettings.of({"participation": 1, "server_betas": [0, 1], "threads": 2.0})
    assert engine.participation == 1.0 and isinstance(engine.participation, float)
    assert engine.server_betas == (0.0, 1.0) and all(isinstance(b, float) for b in engine.server_betas)
    assert isinstance(engine.threads, int)
    assert engine.as_dict() == {"participation": 1, "server_betas": [0, 1], "threads": 2.0}
    assert engine.memory_budget_mb == "auto" and engine.personalisation.kind == "none"
    with pytest.raises(dataclasses.FrozenInstanceError):
        engine.participation = 0.5  # type: ignore[misc]
