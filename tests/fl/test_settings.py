"""Typed run settings (cflcore/settings.py): generated from the schema, built once per train job, and the run's
identity unchanged (its checkpoints' config hash is the hash of the plain dict it was given)."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from cflcore import config as cc
from cflcore.defaults import section_schema
from cflcore.errors import ConfigError
from cflcore.fl.checkpoint import config_hash
from cflcore.settings import NOT_TRAINING, EngineSettings, RunSettings, TrainingSettings
from conftest import REPO

SETTINGS = {"training": {"model": "tinyvgg", "model_kwargs": {"hidden": 8}, "optimizer": "adam", "lr": 0.003, "batch_size": 32,
                         "local_epochs": 3, "rounds": 10, "momentum": 0.0, "weight_decay": 0.0, "betas": [0.9, 0.999], "eps": 1e-08},
            "engine": {"participation": 0.5, "checkpoint_every": 4, "personalisation": {"kind": "pfedme", "lam": 15}},
            "algorithm": {"method": "louvain", "resolution": 0.5}, "device": "auto"}
FED = SimpleNamespace(manifest={"clients": 4}, n_clients=4, shape=(1, 8, 8), n_classes=6)


def test_config_hash_of_a_fixed_settings_dict_is_unchanged():
    """The value config_hash gave for these plain settings before they were typed (e3b90da): checkpoints written
    then still resume."""
    assert config_hash(RunSettings.of(SETTINGS), 3, FED) == "4cf9c45bba1f3af1"


@pytest.mark.parametrize("config", ["config.yaml", "paper.yaml", "louvain-002.yaml", "fedgwc-004-offline.yaml"])
def test_every_run_of_a_study_round_trips_exactly(config):
    """RunSettings.of(run_settings).as_dict() is run_settings itself, for every run of a study: the Snakemake params
    and the checkpoints' config hash do not move by a byte."""
    cfg = cc.load_config(f"{REPO}/config/{config}")
    for scenario, algorithm in cc.study_runs(cfg):
        plain = cc.run_settings(cfg, scenario["dataset"], algorithm, scenario["split"])
        assert RunSettings.of(plain).as_dict() == plain, algorithm


def test_blocks_are_the_schema_sections_with_its_defaults():
    engine = section_schema("engine")["properties"]
    typed = EngineSettings.of({"participation": 0.5, "personalisation": {"kind": "pfedme"}})
    assert [f.name for f in dataclasses.fields(typed) if f.name != "_source"] == list(engine)
    assert typed.participation == 0.5 and typed.trainer == engine["trainer"]["default"]
    assert typed.personalisation.kind == "pfedme"
    assert typed.personalisation.lam == section_schema("engine.personalisation")["properties"]["lam"]["default"]
    training = {f.name for f in dataclasses.fields(TrainingSettings.of(SETTINGS["training"]))} - {"_source"}
    assert training == set(section_schema("datasets.*")["properties"]) - set(NOT_TRAINING)


def test_values_are_typed_and_read_only_and_the_identity_is_what_was_given():
    run = RunSettings.of(SETTINGS)
    assert run.engine.personalisation.lam == 15.0 and isinstance(run.engine.personalisation.lam, float)
    assert run.training.betas == (0.9, 0.999) and run.device == "auto"
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.engine.participation = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        run.training.model_kwargs["hidden"] = 4  # type: ignore[index]
    resolved = dataclasses.replace(run, engine=dataclasses.replace(run.engine, memory_budget_mb=512))
    assert resolved.engine.memory_budget_mb == 512 and resolved.as_dict() == SETTINGS  # `auto` stays in the identity
    assert RunSettings.of({"training": SETTINGS["training"], "algorithm": {"method": "bnc"}}).device == \
        section_schema("")["properties"]["device"]["default"]


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^engine\.partcipation: unknown setting; allowed: trainer, "):
        EngineSettings.of({"partcipation": 0.5})
    with pytest.raises(ConfigError, match=r"^datasets\.\*\.lr: required, not given$"):
        TrainingSettings.of({k: v for k, v in SETTINGS["training"].items() if k != "lr"})


SETTINGS_READERS = {"cflcore/settings.py", "cflcore/settings_source.py", "cflcore/stages.py", "cflcore/fl/run.py",
                    "cflcore/fl/engine.py", "cflcore/fl/participation.py", "cflcore/fl/spec.py", "cflcore/fl/centralised.py", "cflcore/fl/checkpoint.py",
                    "cflcore/config/plan.py", "cflcore/config/validate.py", "cflcore/report/front_page.py",
                    "cflcore/report/front_context.py", "cflcore/report/papers/_ocfl_000_front.py"}
"""The modules that know the typed settings (import cflcore.settings): the train job's entry, the engine (a run and
its round), the module that writes the blocks from the schema, the config (:data:`NOT_TRAINING`; validation checks a
variant's ``training:`` block against ``training_schema``) and the report's
departures (the generic ones and 000's, against its training settings); the engine's parts below (optimisers,
server, personalisation, trainers) get values, never a settings block."""


def test_only_the_train_entry_and_the_engine_know_the_settings():
    found = set()
    for path in (Path(REPO) / "cflcore").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("settings") and \
                    (node.level > 0 or node.module == "cflcore.settings"):
                found.add(str(path.relative_to(REPO)))
    assert found | {"cflcore/settings.py"} == SETTINGS_READERS
