"""A variant's own training recipe (``algorithms.<v>.training``, over its dataset's: cflcore.config.plan.run_training):
it reaches that variant's runs only, every consumer of a run's recipe reads it (the train and explain code hashes, the
batch-size warning, 000's training departures), only a dataset entry's recipe keys are accepted, and a variant without
one runs its dataset's recipe unchanged (no shipped study's settings move)."""
from __future__ import annotations

import copy
import logging
from pathlib import Path

import pytest

import cflcore.config as cc
from cflcore.errors import ConfigError
from cflcore.provenance import code_version
from cflcore.settings import NOT_TRAINING, EngineSettings
from conftest import REPO

CONFIG_DIR = Path(REPO) / "config"
TINY = cc.read_config_file(CONFIG_DIR / "tiny.yaml")


def _tiny(**training) -> dict:
    cfg = copy.deepcopy(TINY)
    if training:
        cfg["algorithms"]["bnc"]["training"] = training
    return cfg


def _dataset_recipe(cfg: dict, dataset: str) -> dict:
    return {k: v for k, v in cfg["datasets"][dataset].items() if k not in NOT_TRAINING}


def test_a_variants_recipe_reaches_its_runs_only():
    cfg = cc.validate_config(_tiny(batch_size=8, optimizer_state="kept"), plugins=False)
    own = cc.run_settings(cfg, "digits", "bnc", "nonoverlap-balanced")
    assert own["training"] == {**_dataset_recipe(cfg, "digits"), "batch_size": 8, "optimizer_state": "kept"}
    assert "training" not in own["algorithm"]  # the study's, never the strategy's
    assert "training" not in cc.strategy_params(cfg["algorithms"]["bnc"])
    for other in ("ocfl-km", "ocfl-hdb"):
        assert cc.run_settings(cfg, "digits", other)["training"] == _dataset_recipe(cfg, "digits")


def test_a_variant_without_a_recipe_runs_its_datasets_unchanged():
    cfg = cc.validate_config(_tiny(), plugins=False)
    for scenario, algorithm in cc.study_runs(cfg):
        settings = cc.run_settings(cfg, scenario["dataset"], algorithm, scenario["split"])
        assert settings["training"] == _dataset_recipe(cfg, scenario["dataset"])
        assert list(settings) == ["training", "engine", "algorithm", "device"]


@pytest.mark.parametrize("name", sorted(f.name for f in CONFIG_DIR.glob("*.yaml") if f.name != "schema.yaml"))
def test_no_shipped_study_gives_a_variant_its_own_recipe(name):
    """So every shipped study's run settings (hence its params and checkpoint hashes) are its datasets' recipes, as
    before variants could carry one (the test above: a variant without one runs its dataset's unchanged)."""
    cfg = cc.deep_update(cc.read_config_file(CONFIG_DIR / "config.yaml"), cc.read_config_file(CONFIG_DIR / name))
    variants = [*(cfg.get("algorithms") or {}).values()]
    variants += [v for ds in (cfg.get("datasets") or {}).values() for v in (ds.get("algorithm_params") or {}).values()]
    assert not [v for v in variants if "training" in (v or {})]


@pytest.mark.parametrize("training, field", [
    ({"loader": "digits"}, "algorithms.bnc.training.loader"),
    ({"splits": ["nonoverlap-balanced"]}, "algorithms.bnc.training.splits"),
    ({"explain_samples": 5}, "algorithms.bnc.training.explain_samples"),
    ({"learning_rate": 0.1}, "algorithms.bnc.training.learning_rate"),
])
def test_a_key_that_is_not_a_recipe_key_is_refused_naming_it(training, field):
    with pytest.raises(ConfigError) as err:
        cc.validate_config(_tiny(**training), plugins=False)
    message = str(err.value)
    assert message.startswith(f"{field}: not a training recipe key; allowed: model, ") and "optimizer_state" in message
    assert "\n" not in message


@pytest.mark.parametrize("training, expected", [
    ({"optimizer_state": "sometimes"}, "algorithms.bnc.training.optimizer_state: 'sometimes' is not allowed"),
    ({"batch_size": 0}, "algorithms.bnc.training.batch_size: 0"),
    ({"model": "no-such-net"}, "algorithms.bnc.training.model: unknown model 'no-such-net'"),
])
def test_a_recipe_value_is_checked_as_the_dataset_entry_checks_it(training, expected):
    with pytest.raises(ConfigError, match="^" + expected.replace(".", r"\.").replace("(", r"\(")):
        cc.validate_config(_tiny(**training), plugins=False)


def test_the_train_and_explain_code_hashes_follow_the_variants_model():
    plain = cc.validate_config(_tiny(), plugins=False)
    own = cc.validate_config(_tiny(model="lenet5"), plugins=False)
    assert cc.run_plugins(own, "digits", "bnc") == {"method": "bnc", "model": "lenet5"}
    assert cc.run_plugins(own, "digits", "ocfl-km") == cc.run_plugins(plain, "digits", "ocfl-km")
    assert code_version("train", cc.run_plugins(own, "digits", "bnc")) != \
        code_version("train", cc.run_plugins(plain, "digits", "bnc"))
    assert cc.explain_settings(own, "digits", "bnc")["model"] == "lenet5"
    assert cc.explain_settings(own, "digits", "ocfl-km") == cc.explain_settings(plain, "digits", "ocfl-km")
    assert code_version("explain", cc.explain_plugins(own, "digits", "bnc")) != \
        code_version("explain", cc.explain_plugins(plain, "digits", "bnc"))


def test_the_batch_warning_names_the_variant_whose_recipe_sets_the_batch(tmp_path, caplog):
    # 45 draws less the local test part: 31 local train samples; the dataset's batch 32 and bnc's own 64 exceed them
    cfg = _tiny(batch_size=64)
    cfg["splits"]["nonoverlap-balanced"]["samples_per_client"] = 45
    cfg["results_dir"] = str(tmp_path / "results")
    with caplog.at_level(logging.WARNING, logger="cflcore.config_checks"):
        cc.validate_config(cfg, plugins=False)
    told = sorted(r.getMessage().split(" is more than")[0] for r in caplog.records if "batch_size" in r.getMessage())
    assert told == ["config warning: algorithms.bnc.training.batch_size: 64",
                    "config warning: datasets.digits.batch_size: 32"], told


def test_000s_departures_name_a_variant_with_its_own_training():
    from cflcore.report.papers._ocfl_000_front import variant_training_departures

    recipe = {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.01, "batch_size": 32, "local_epochs": 3,
              "weight_decay": 0.0, "rounds": 50}
    variants = {"ocfl-km": {"method": "ocfl"}, "ocfl-adam": {"method": "ocfl", "training": {"optimizer": "adam"}}}
    found = variant_training_departures("mnist5k", recipe, variants, EngineSettings.of({}))
    assert [d.topic for d in found] == ["Training (mnist5k, ocfl-adam)"]
    assert "optimizer adam" in found[0].ours and "optimizer sgd" in found[0].paper


def _kept(engine: dict | None = None, device: str = "cpu", own: bool = True) -> dict:
    cfg = _tiny(optimizer_state="kept") if own else _tiny()
    if not own:
        cfg["datasets"]["digits"]["optimizer_state"] = "kept"
    cfg["engine"] = {**(cfg.get("engine") or {}), **(engine or {})}
    cfg["device"] = device
    return cfg


@pytest.mark.parametrize("own, field", [(True, "algorithms.bnc.training.optimizer_state"),
                                        (False, "datasets.digits.optimizer_state")])
def test_kept_optimizer_state_where_the_run_would_refuse_it_is_refused_before_any_job(own, field):
    """pFedMe's trainer starts every inner problem afresh (cflcore.fl.run refuses kept states at run time too)."""
    with pytest.raises(ConfigError) as err:
        cc.validate_config(_kept({"personalisation": {"kind": "pfedme"}}, "cpu", own), plugins=False)
    message = str(err.value)
    assert message.startswith(f"{field}: kept cannot run with engine.personalisation.kind pfedme")
    assert "allowed: per_round" in message and "\n" not in message


@pytest.mark.parametrize("engine, device", [({"trainer": "loop"}, "cuda"), ({"trainer": "auto"}, "cpu"),
                                            ({"trainer": "vmap"}, "cpu"), ({"trainer": "auto"}, "cuda")])
def test_kept_optimizer_state_on_either_trainer_is_accepted(engine, device):
    cfg = cc.validate_config(_kept(engine, device), plugins=False)
    assert cc.run_settings(cfg, "digits", "bnc", "nonoverlap-balanced")["training"]["optimizer_state"] == "kept"
