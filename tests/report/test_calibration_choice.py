"""The tuning step's choice (issue 68 item 3; cflcore/report/calibration.py) on hand-made run summaries, and `snakemake
tune` end to end on a tiny study: it writes the calibrated file, and the study extending it runs with the chosen
values."""
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

import cflcore.config as cc
from cflcore.errors import CflError
from cflcore.report.acted import NO_ACTION
from cflcore.report.calibration import calibration_lines, combination_scores, pick
from cflcore.strategies.run_records import NoAction
from conftest import copy_workflow, snakemake_cmd

QUIET = NoAction("smallest mean update norm {norm} (round {round}) against ε₁ {eps1}",
                 {"norm": 0.15, "round": 19, "eps1": 0.05})
TUNING = {"scl@eps1=0.05": {"variant": "scl", "values": {"eps1": 0.05}},
          "scl@eps1=0.2": {"variant": "scl", "values": {"eps1": 0.2}},
          "scl@eps1=0.4": {"variant": "scl", "values": {"eps1": 0.4}},
          "bcl@distance_threshold=0.2": {"variant": "bcl", "values": {"distance_threshold": 0.2}},
          "bcl@distance_threshold=0.4": {"variant": "bcl", "values": {"distance_threshold": 0.4}}}


def summary(rows):
    """rows: (tuning variant, local_acc, NoAction or None), one per run (setting × tuning seed)."""
    return pd.DataFrame([{"algorithm": a, "local_acc": m, NO_ACTION: why} for a, m, why in rows])


def scores_of(rows, expected=None):
    expected = expected or pd.Series([a for a, _, _ in rows]).value_counts().to_dict()
    return combination_scores(summary(rows), TUNING, "local_acc", expected)


def test_the_highest_mean_over_settings_and_seeds_wins():
    rows = [("scl@eps1=0.05", 0.60, None), ("scl@eps1=0.05", 0.70, None),
            ("scl@eps1=0.2", 0.80, None), ("scl@eps1=0.2", 0.62, None),    # mean 0.71: the best
            ("scl@eps1=0.4", 0.90, None), ("scl@eps1=0.4", 0.40, None),    # one high run, mean 0.65
            ("bcl@distance_threshold=0.2", 0.5, None), ("bcl@distance_threshold=0.2", 0.5, None),
            ("bcl@distance_threshold=0.4", 0.6, None), ("bcl@distance_threshold=0.4", 0.4, None)]  # tie at 0.5
    scores = scores_of(rows)
    assert scores.set_index("tuning_variant").loc["scl@eps1=0.2", "score"] == pytest.approx(0.71)
    assert pick(scores) == {"scl": {"eps1": 0.2}, "bcl": {"distance_threshold": 0.2}}  # the tie: the grid's first


def test_a_value_at_which_the_method_did_not_act_cannot_win():
    """eps1 = 0.05 never splits: its runs keep FedAvg's accuracy, the highest here, and still cannot win; a value
    that acted in one run of two is scored on both."""
    rows = [("scl@eps1=0.05", 0.95, QUIET), ("scl@eps1=0.05", 0.93, QUIET),
            ("scl@eps1=0.2", 0.60, None), ("scl@eps1=0.2", 0.90, QUIET),
            ("scl@eps1=0.4", 0.70, None), ("scl@eps1=0.4", 0.70, None),
            ("bcl@distance_threshold=0.2", 0.5, None), ("bcl@distance_threshold=0.4", 0.5, None)]
    scores = scores_of(rows).set_index("tuning_variant")
    assert scores.loc["scl@eps1=0.05", "excluded"] == "did not act in any of its 2 runs"
    assert scores.loc["scl@eps1=0.2", "acted"] == 1 and scores.loc["scl@eps1=0.2", "excluded"] == ""
    assert pick(scores.reset_index())["scl"] == {"eps1": 0.2}  # 0.75 over both runs beats 0.70
    never = [(a, m, QUIET) for a, m, _ in rows if a.startswith("scl")] + rows[-2:]
    with pytest.raises(CflError, match=r"calibration.grid.scl: no combination can be chosen .*did not act"):
        pick(scores_of(never))


def test_a_value_that_cannot_split_a_setting_cannot_win():
    rows = [("scl@eps1=0.05", 0.9, None), ("scl@eps1=0.2", 0.6, None), ("scl@eps1=0.4", 0.5, None),
            ("bcl@distance_threshold=0.2", 0.5, None), ("bcl@distance_threshold=0.4", 0.5, None)]
    tuning = {**TUNING, "scl@eps1=0.05": {**TUNING["scl@eps1=0.05"], "cannot_split": {"label-swap": "why"}}}
    scores = combination_scores(summary(rows), tuning, "local_acc", {a: 1 for a in TUNING})
    assert scores.set_index("tuning_variant").loc["scl@eps1=0.05", "excluded"] == "cannot split here: label-swap: why"
    assert pick(scores)["scl"] == {"eps1": 0.2}


def test_a_failed_run_or_a_missing_metric_cannot_win():
    rows = [("scl@eps1=0.05", 0.9, None), ("scl@eps1=0.2", float("nan"), None), ("scl@eps1=0.4", 0.5, None),
            ("bcl@distance_threshold=0.2", 0.5, None), ("bcl@distance_threshold=0.4", 0.5, None)]
    expected = {a: 1 for a in TUNING} | {"scl@eps1=0.05": 2}  # one of its two runs failed (not loaded)
    scores = scores_of(rows, expected).set_index("tuning_variant")
    assert scores.loc["scl@eps1=0.05", "excluded"] == "1 of 2 runs failed or missing"
    assert scores.loc["scl@eps1=0.2", "excluded"] == "local_acc missing in 1 of 1 runs"
    assert pick(scores.reset_index())["scl"] == {"eps1": 0.4}


def test_the_report_prints_the_rule_and_the_chosen_values():
    block = {"mode": "tune", "tuning_seeds": [6, 7], "metric": "local_acc", "grid": {"scl": {"eps1": [0.05, 0.2]}},
             "chosen": {"scl": {"eps1": 0.2}}}
    lines = calibration_lines(block, ["bnc", "scl"])
    assert lines[0].startswith("Thresholds: tuned on seeds 6, 7") and "local_acc" in lines[0]
    assert lines[1] == "scl: eps1 = 0.2 (grid: eps1 in [0.05, 0.2])"
    assert "to be tuned" in calibration_lines({**block, "chosen": {}}, ["scl"])[0]
    assert calibration_lines(None, ["scl"]) == []
    assert "authors' defaults" in calibration_lines({"mode": "authors"}, ["scl"])[0]


STUDY = {"results_dir": "results", "device": "cpu",
         "study": {"datasets": ["digits"], "splits": ["nonoverlap-balanced"], "clients": [6], "seeds": [0],
                   "algorithms": ["ocfl-hdb"]},
         "datasets": {"digits": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 32,
                                 "local_epochs": 1, "rounds": 2}},
         "splits": {"nonoverlap-balanced": {"generator": "ocfl", "overlap": False, "imbalanced": False}},
         "algorithms": {"ocfl-hdb": {"method": "ocfl", "clusterer": "hdbscan"}},
         "engine": {"threads": 1}, "explain": {"enabled": False}, "whatif": {"enabled": False},
         "calibration": {"mode": "tune", "tuning_seeds": [5], "metric": "ari",
                         "grid": {"ocfl-hdb": {"min_cluster_fraction": [0.9, 0.3]}}}}


def sm(wd: Path, *args: str) -> str:
    p = subprocess.run(snakemake_cmd("--cores", "2", *args), cwd=wd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    return p.stdout + p.stderr


@pytest.mark.slow
def test_tune_writes_the_calibrated_file_and_the_study_extending_it_runs_with_the_chosen_values(tmp_path):
    """min_cluster_fraction 0.9 asks for one cluster of all 6 clients, which rules out the split's groups of 2 by
    construction: it cannot win though the grid lists it first; 0.3 (minimum cluster size 2, not the default 0.2's
    value) can."""
    wd = Path(copy_workflow(tmp_path / "wf"))
    (wd / "config" / "study.yaml").write_text(yaml.safe_dump(STUDY))
    sm(wd, "tune", "--configfile", "config/study.yaml")
    calibrated = wd / "config" / "calibrated" / "study.yaml"
    written = yaml.safe_load(calibrated.read_text())
    assert written["extends"] == "../study.yaml"
    assert written["calibration"]["chosen"] == {"ocfl-hdb": {"min_cluster_fraction": 0.3}}
    assert written["algorithms"] == {"ocfl-hdb": {"min_cluster_fraction": 0.3}}
    scores = written["calibration"]["record"]["scores"]
    assert scores["ocfl-hdb@min_cluster_fraction=0.9"].startswith("cannot split here: nonoverlap-balanced: ")
    assert 0 <= scores["ocfl-hdb@min_cluster_fraction=0.3"] <= 1
    runs = sorted(p.parent.name + "|" + p.parent.parent.name for p in (wd / "results" / "runs").rglob("status.json"))
    assert runs == ["ocfl-hdb@min_cluster_fraction=0.3|s5", "ocfl-hdb@min_cluster_fraction=0.9|s5"]  # tuning seed only
    assert cc.load_config(wd / "config" / "config.yaml", calibrated)["algorithms"]["ocfl-hdb"]["min_cluster_fraction"] == 0.3
    # the study's run, from the calibrated file: it runs with 0.3, so the study as written (0.2) would rerun it
    target = "results/eval/digits/nonoverlap-balanced/n6/s0/ocfl-hdb/clustering.parquet"
    sm(wd, target, "--configfile", "config/calibrated/study.yaml")
    assert "Nothing to be done" in sm(wd, "-n", target, "--configfile", "config/calibrated/study.yaml")
    assert "train_evaluate" in sm(wd, "-n", target, "--configfile", "config/study.yaml")
