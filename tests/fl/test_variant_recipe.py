"""A variant's own training recipe trains: on real MNIST-5k (the default study's first scenario, tests/conftest.py
``mnist_study``), two BNC variants that differ only in their ``training: {optimizer_state: ...}`` give the same first
round (every client's Adam starts afresh in round 0 either way) and different later rounds (``kept`` continues each
client's moments), through the settings the train rule passes (cflcore.config.run_settings) and ``stages.train``."""
import copy

import pandas as pd

from cflcore import config as cc

ROUNDS = 2


def test_a_variants_kept_optimizer_state_changes_its_training(mnist_study, tmp_path):
    cfg = copy.deepcopy(mnist_study.cfg)
    for name, state in (("bnc-fresh", "per_round"), ("bnc-kept", "kept")):
        cfg["algorithms"][name] = {"method": "bnc", "training": {"rounds": ROUNDS, "optimizer_state": state}}
    cfg["study"]["algorithms"] = ["bnc-fresh", "bnc-kept"]
    cfg = cc.validate_config(cfg, plugins=False)
    histories = {}
    for name in ("bnc-fresh", "bnc-kept"):
        settings = cc.run_settings(cfg, mnist_study.DATASET, name, mnist_study.SPLIT)
        assert settings["training"]["rounds"] == ROUNDS and settings["training"]["optimizer"] == "adam"
        assert mnist_study.train(name, tmp_path / name, settings)["status"] == "ok"
        histories[name] = pd.read_parquet(tmp_path / name / "history.parquet")
    fresh, kept = histories["bnc-fresh"], histories["bnc-kept"]
    assert sorted(fresh["round"].unique()) == sorted(kept["round"].unique()) == list(range(ROUNDS))
    first = fresh["round"] == 0
    pd.testing.assert_frame_equal(fresh[first].reset_index(drop=True), kept[kept["round"] == 0].reset_index(drop=True))
    assert not fresh[~first].reset_index(drop=True).equals(kept[kept["round"] != 0].reset_index(drop=True))
