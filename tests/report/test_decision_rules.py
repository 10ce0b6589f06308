"""The pieces of issue 67's rule (cflcore.report.statistics.rules, verdicts): the metrics' steps in a setting, read
from a run's split manifest; the floor they set; the share test's seeds to decide; no extrapolation of a zero
spread."""
import numpy as np
import pandas as pd
import pytest

from cflcore.report.statistics import rules
from cflcore.report.statistics import verdicts as vd
from cflcore.report.sweeps import setting_steps


@pytest.mark.parametrize("groups, sizes, step", [(2, 5, 0.403), (4, 10, 0.068), (4, 40, 0.017)])
def test_aris_step_is_one_client_moved_out_of_the_true_partition(groups, sizes, step):
    """The issue's numbers: 0.40 at 2 × 5 clients (SCL's home), 0.07 at 4 × 10 (IFCA's), 0.02 at 4 × 40."""
    assert rules.ari_step(np.repeat(np.arange(groups), sizes)) == pytest.approx(step, abs=1e-3)
    assert np.isnan(rules.ari_step([0, 0, 0]))


def test_a_runs_steps_come_from_its_split_manifest():
    manifest = {"cluster_of_client": [0] * 5 + [1] * 5 + [2] * 5, "n_test": [20] * 14 + [40],
                "orchestrator_size": 1000}
    steps = setting_steps(manifest, 10)  # a run on the first 10 clients: 2 groups of 5, test sets of 20
    assert steps["ari_step"] == pytest.approx(rules.ari_step([0] * 5 + [1] * 5))
    assert steps["local_acc_step"] == pytest.approx(1 / (10 * 20))
    assert steps["orch_acc_step"] == pytest.approx(1 / (10 * 1000))
    assert np.isnan(setting_steps({"ground_truth": False, "cluster_of_client": [0, 1]}, 2)["ari_step"])


def test_a_paired_difference_is_floored_at_the_settings_step_and_the_earlier_rule_at_the_digit():
    """Three seeds, each 0.2 ahead (zero spread): the per-seed spread is floored at one step, the standard error at
    step / √3; at 4 × 40 (step 0.017) the floored t is 20 and it holds; at 2 × 5 (step 0.40) it is 0.87 and it does
    not; the earlier rule floored the standard error at 0.001 and held both."""
    def runs(name, ari, step):
        return pd.DataFrame([{"dataset": "d", "clients": 10, "seed": s, "algorithm": name, "ari": ari,
                              "ari_step": step} for s in range(3)])
    for step, word in ((0.017, vd.HOLDS), (0.40, vd.INCONCLUSIVE)):
        d = vd.difference(runs("a", 1.0, step), runs("b", 0.8, step), "ari")
        assert d.step == step and d.floor == pytest.approx(step / np.sqrt(3))
        assert vd.combine(dict([vd.comparison("a above b", d)])).word == word
        with rules.using(rules.DIGIT_FLOOR):
            assert d.floor == vd.SCORE_RESOLUTION and vd.combine(dict([vd.comparison("a above b", d)])).word == vd.HOLDS


def test_a_zero_spread_is_not_extrapolated():
    """[0.91, 0.91] against a mean claim "≥ 0.9": the earlier rule said 3 seeds would hold it; now no number is
    given, and two seeds do not decide a t-part."""
    part = vd.Part(vd.t_interval([0.91, 0.91]), 0.9)
    now = vd.combine({"level": part})
    assert now.word == vd.INCONCLUSIVE and now.seeds_to_decide == vd.NO_SPREAD
    with rules.using(rules.DIGIT_FLOOR):
        assert vd.combine({"level": part}).seeds_to_decide == "3 (to hold)"


@pytest.mark.parametrize("k, n, expected", [(6, 6, (17, "hold")), (5, 6, (570, "hold")), (17, 18, (34, "hold")),
                                            (4, 6, (45, "contradict")), (4, 5, (None, ""))])
def test_a_shares_seeds_to_decide_keep_its_observed_share(k, n, expected):
    assert rules.share_seeds_to_decide(k, n, rules.SHARE, vd.SIDE_ALPHA, vd.MAX_SEEDS) == expected


def test_an_unknown_rule_is_refused_in_one_line():
    with pytest.raises(ValueError, match="decision rule 'sign'; allowed: "):
        with rules.using("sign"):
            pass
