"""Bad availability and straggler settings (engine.availability, engine.stragglers; cflcore/fl/participation.py) are
refused at validation, before any job, in one line naming the field and what is allowed; good ones pass, and a run
whose options stay at their default keeps the settings (its identity) of earlier versions."""
from __future__ import annotations

import pytest

import cflcore.config as cc
from test_config_feasibility import TINY, layered, refused

QUIET_ALL = [{"group": g, "rounds": [1, 1]} for g in range(3)]


@pytest.mark.parametrize("engine,message", [
    ({"availability": {"mode": "sometimes"}},
     "engine.availability.mode: 'sometimes' is not allowed; allowed: uniform, group, label, markov"),
    ({"stragglers": {"share": 0}}, "engine.stragglers.share: 0 is not allowed; allowed: null or a number in (0, 1]"),
    ({"stragglers": {"share": 1.5}}, "engine.stragglers.share: 1.5 is not allowed; allowed: null or a number in (0, 1]"),
    ({"stragglers": {"share": 0.5, "min_steps": 0}}, "engine.stragglers.min_steps: 0 is less than the minimum of 1"),
    ({"availability": {"mode": "group", "group_rates": [0, 0, 0]}},
     "engine.availability: round 0 leaves no client able to show up"),
    ({"availability": {"mode": "group", "quiet": QUIET_ALL}},
     "engine.availability: round 1 leaves no client able to show up"),
    ({"availability": {"mode": "group", "group_rates": [0.5, 0.5]}},
     "engine.availability.group_rates: 2 rates for the split's 3 groups"),
    ({"availability": {"mode": "group", "quiet": [{"group": 3, "rounds": [0, 1]}]}},
     "engine.availability.quiet[0].group: 3 is not a group of the split"),
    ({"availability": {"mode": "group", "quiet": [{"group": 0, "rounds": [1, 3]}]}},
     "engine.availability.quiet[0].rounds: [1, 3] is not a stretch of this run's 3 rounds"),
    ({"availability": {"mode": "label"}}, "engine.availability.classes: [] names no class for mode label"),
    ({"availability": {"mode": "markov", "p_on": 0}}, "engine.availability.p_on: 0"),
])
def test_bad_availability_and_straggler_settings_are_refused_in_one_line(tmp_path, engine, message):
    assert message in refused(layered({"engine": engine}, base=TINY), tmp_path)


def test_a_variants_own_availability_is_named_by_its_field(tmp_path):
    msg = refused(layered({"algorithms": {"bnc": {"engine": {"availability": {"mode": "group",
                                                                                 "group_rates": [0, 0, 0]}}}}}, base=TINY),
                  tmp_path)
    assert msg.startswith("algorithms.bnc.engine.availability: round 0 leaves no client")


def test_stragglers_are_refused_with_personalisation(tmp_path):
    msg = refused(layered({"engine": {"stragglers": {"share": 0.5}, "personalisation": {"kind": "pfedme"}}}, base=TINY),
                  tmp_path)
    assert msg.startswith("engine.stragglers.share: 0.5 is not allowed; allowed: None")


def test_good_settings_pass_and_defaults_leave_the_run_identity_alone(tmp_path):
    plain = cc.validate_config_cached(TINY, tmp_path / "a")
    for scenario, algorithm in cc.study_runs(plain):
        engine = cc.run_settings(plain, scenario["dataset"], algorithm, scenario["split"])["engine"]
        assert "availability" not in engine and "stragglers" not in engine
    moving = {"availability": {"mode": "group", "group_rates": [1, 0.5, 0], "quiet": [{"group": 0, "rounds": [1, 2]}]},
              "stragglers": {"share": 0.3, "min_steps": 2}}
    cfg = cc.validate_config_cached(layered({"engine": moving}, base=TINY), tmp_path / "b")
    scenario, algorithm = cc.study_runs(cfg)[0]
    engine = cc.run_settings(cfg, scenario["dataset"], algorithm, scenario["split"])["engine"]
    assert engine["availability"]["mode"] == "group" and engine["stragglers"]["share"] == 0.3


def test_a_splits_own_engine_block_sets_its_runs_only(tmp_path):
    """`splits.<name>.engine` (a setting of one study, e.g. config/dynamics-offline.yaml's absent group): the engine
    options of that split's runs only, never a generator parameter; a variant's own engine block still wins; a bad
    one is refused in one line naming the split's field."""
    quiet = {"availability": {"mode": "group", "quiet": [{"group": 0, "rounds": [1, 1]}]}}
    own = {"splits": {"nonoverlap-balanced": {"engine": quiet},
                      "overlap-imbalanced": {"generator": "ocfl", "overlap": True, "imbalanced": True}},
           "algorithms": {"bnc-straggle": {"method": "bnc", "engine": {"availability": {"mode": "uniform"},
                                                                      "stragglers": {"share": 0.5}}}},
           "study": {"splits": ["nonoverlap-balanced", "overlap-imbalanced"], "algorithms": ["bnc", "bnc-straggle"]}}
    cfg = cc.validate_config_cached(layered(own, base=TINY), tmp_path / "a")
    assert "engine" not in cc.split_settings(cfg, "nonoverlap-balanced")
    engine = cc.run_settings(cfg, "digits", "bnc", "nonoverlap-balanced")["engine"]
    assert engine["availability"] == quiet["availability"] and "stragglers" not in engine
    assert "availability" not in cc.run_settings(cfg, "digits", "bnc", "overlap-imbalanced")["engine"]
    variant = cc.run_settings(cfg, "digits", "bnc-straggle", "nonoverlap-balanced")["engine"]
    assert "availability" not in variant and variant["stragglers"]["share"] == 0.5  # the variant's block wins
    bad = {"splits": {"nonoverlap-balanced": {"engine": {"availability": {"mode": "group", "group_rates": [0, 0, 0]}}}}}
    assert refused(layered(bad, base=TINY), tmp_path).startswith(
        "splits.nonoverlap-balanced.engine.availability: round 0 leaves no client")
    bad = {"splits": {"nonoverlap-balanced": {"engine": {"stragglers": {"share": 2}}}}}
    assert refused(layered(bad, base=TINY), tmp_path).startswith("splits.nonoverlap-balanced.engine.stragglers.share")
