"""The calibration block (issue 68 item 3; cflcore/config/calibration.py): one form for every method with a
threshold, checked before any job (one-line errors naming the field), and the tuning variants it adds."""
import copy
from pathlib import Path

import pytest

import cflcore.config as cc
from cflcore.calibration_keys import TUNING_KEY
from cflcore.config.calibration import calibrated_file, tuning_runs
from cflcore.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
TINY = {"study": {"datasets": ["digits"], "splits": ["nonoverlap-balanced"], "clients": [6], "seeds": [0, 1],
                  "algorithms": ["bnc", "ocfl-hdb", "scl", "louvain"]},
        "datasets": {"digits": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 32,
                                "local_epochs": 1, "rounds": 3}},
        "splits": {"nonoverlap-balanced": {"generator": "ocfl", "overlap": False, "imbalanced": False}},
        "explain": {"enabled": False}}
TUNE = {"mode": "tune", "tuning_seeds": [7, 8], "metric": "local_acc",
        "grid": {"ocfl-hdb": {"min_cluster_fraction": [0.2, 0.5]},
                 "scl": {"eps1": [0.1, 0.2], "eps2": [0.5]}}}


def config(calibration, **sections):
    overrides = {**copy.deepcopy(TINY), "calibration": copy.deepcopy(calibration), **sections}
    return cc.load_config(REPO / "config" / "config.yaml", overrides=overrides)


def test_grid_expands_into_tuning_variants_on_the_tuning_seeds_only():
    cfg = config(TUNE)
    tuning = cfg["calibration"][TUNING_KEY]
    assert list(tuning) == ["ocfl-hdb@min_cluster_fraction=0.2", "ocfl-hdb@min_cluster_fraction=0.5",
                            "scl@eps1=0.1,eps2=0.5", "scl@eps1=0.2,eps2=0.5"]
    assert tuning["scl@eps1=0.2,eps2=0.5"] == {"variant": "scl", "values": {"eps1": 0.2, "eps2": 0.5},
                                              "cannot_split": {}}
    assert list(tuning["ocfl-hdb@min_cluster_fraction=0.5"]["cannot_split"]) == ["nonoverlap-balanced"]  # size 3 > 2
    assert cfg["algorithms"]["scl@eps1=0.2,eps2=0.5"]["eps1"] == 0.2
    assert cfg["algorithms"]["scl@eps1=0.2,eps2=0.5"]["cooldown"] == cfg["algorithms"]["scl"]["cooldown"]
    assert cfg["study"]["algorithms"] == ["bnc", "ocfl-hdb", "scl", "louvain"]  # the study itself is unchanged
    runs = tuning_runs(cfg)
    assert {s["seed"] for s, _ in runs} == {7, 8} and {a for _, a in runs} == set(tuning)
    assert len(runs) == 2 * len(tuning)


def test_no_calibration_and_authors_add_nothing():
    plain = cc.load_config(REPO / "config" / "config.yaml", overrides=copy.deepcopy(TINY))
    assert "calibration" not in plain and tuning_runs(plain) == []
    cfg = config({"mode": "authors"})
    assert tuning_runs(cfg) == [] and set(cfg["algorithms"]) == set(plain["algorithms"])


@pytest.mark.parametrize("calibration, message", [
    ({**TUNE, "tuning_seeds": [1, 9]}, r"calibration.tuning_seeds: \[1\] are also study.seeds"),
    ({**TUNE, "grid": {"fedgwc": {"epsilon": [0.1]}}}, r"calibration.grid.fedgwc: not a variant of the study"),
    ({**TUNE, "grid": {"scl": {"max_clusters": [2]}}}, r"calibration.grid.scl.max_clusters: not a threshold of method "
                                                      r"scl; allowed: epsilon, eps1"),
    ({**TUNE, "grid": {"bnc": {"lr": [0.1]}}}, r"calibration.grid.bnc.lr: not a threshold of method bnc; allowed: none"),
    ({**TUNE, "grid": {"ocfl-hdb": {"min_cluster_fraction": [0.2, 1.5]}}},
     r"calibration.grid.ocfl-hdb.min_cluster_fraction: 1.5 is greater than the maximum of 1"),
    ({**TUNE, "grid": {"ocfl-hdb": {"min_cluster_fraction": []}}}, r"calibration.grid.ocfl-hdb.min_cluster_fraction"),
    ({**TUNE, "grid": {"scl": {"proxy_factor": [2.0, 5.0]}}}, r"calibration.grid.scl.proxy_factor: used only with "
                                                            r"epsilon: proxy"),
    ({"mode": "authors", "grid": TUNE["grid"]}, r"calibration.grid: only with mode: tune"),
    ({"mode": "tune", "grid": TUNE["grid"]}, r"calibration.tuning_seeds: required with mode: tune"),
    ({**TUNE, "metric": "loss"}, r"calibration.metric: 'loss' is not allowed; allowed: local_acc"),
    ({**TUNE, "chosen": {"scl": {"eps1": 0.3}}}, r"calibration.chosen.scl.eps1: 0.3 is not a value of"),
    ({**TUNE, "chosen": {"scl": {"eps1": 0.2}}}, r"calibration.chosen.scl.eps1: 0.2, but algorithms.scl.eps1 is 0.6"),
])
def test_bad_calibration_is_one_line_naming_the_field(calibration, message):
    with pytest.raises(ConfigError, match=message) as err:
        config(calibration)
    assert "\n" not in str(err.value)


def test_scl_proxy_thresholds_are_tuned_under_proxy_and_explicit_ones_with_epsilon_explicit_in_the_grid():
    cfg = config({**TUNE, "grid": {"scl": {"epsilon": ["explicit"], "eps1": [0.1]}}},
                 algorithms={"scl": {"method": "scl", "epsilon": "proxy"}})
    assert cfg["algorithms"]["scl@epsilon=explicit,eps1=0.1"]["epsilon"] == "explicit"
    with pytest.raises(ConfigError, match=r"calibration.grid.scl.eps1: used only with epsilon: explicit"):
        config({**TUNE, "grid": {"scl": {"eps1": [0.1]}}}, algorithms={"scl": {"method": "scl", "epsilon": "proxy"}})


def test_chosen_values_that_the_variant_runs_with_pass():
    cfg = config({**TUNE, "chosen": {"scl": {"eps1": 0.2, "eps2": 0.5}}},
                 algorithms={"scl": {"method": "scl", "eps1": 0.2, "eps2": 0.5, "cooldown": 2}})
    assert cfg["algorithms"]["scl"]["eps1"] == 0.2


def test_calibrated_file_sits_beside_the_study_config():
    assert calibrated_file("config/heterogeneity-offline.yaml") == "config/calibrated/heterogeneity-offline.yaml"
