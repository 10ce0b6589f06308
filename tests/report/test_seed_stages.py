"""A claim read in the stages a study states before adding seeds (issue 67, item 2; cflcore.report.statistics.stages,
rules.SEED_STAGES, report.seed_stages): stage 1 on the first n1 seeds at one-sided 1.25 %, stage 2 on all the seeds
at 1.25 % only if stage 1 is inconclusive. It decides at stage 1, decides at stage 2, or is inconclusive at both, and
the row says which; the one-stage reading stays beside it as the claim's earlier version."""
import numpy as np
import pandas as pd
import pytest

from cflcore.report.papers import base as cl
from cflcore.report.papers import home
from cflcore.report.statistics import rules, stages
from cflcore.report.statistics import verdicts as vd

CLAIM = "home-ifca-rotations"


def runs(aris) -> pd.DataFrame:
    """IFCA's home runs, one per seed 0, 1, ... with the given final ARIs."""
    return pd.DataFrame([{"dataset": "mnist5k", "clients": 40, "seed": s, "algorithm": home.IFCA_VARIANT,
                          "algorithm_base": home.IFCA_VARIANT, "split": home.IFCA_SPLIT, "split_base": home.IFCA_SPLIT,
                          "ari": float(a), "n_clusters": 4.0, "local_acc": 0.9} for s, a in enumerate(aris)])


def row(aris, sizes=(6, 18)) -> pd.Series:
    frame = cl.check_claims([home.PAPER], cl.ClaimData(runs(aris)), seed_stages={CLAIM: list(sizes)},
                            seeds=list(range(len(aris))))
    return frame.set_index("claim_id").loc[CLAIM]


def test_the_levels_split_two_and_a_half_percent_equally():
    assert stages.stage_levels() == pytest.approx((vd.SIDE_ALPHA / 2, vd.SIDE_ALPHA / 2))
    assert sum(stages.stage_levels()) == pytest.approx(vd.SIDE_ALPHA)


def test_a_stage_one_decision_reads_no_further_seeds():
    """None of the first 6 seeds finds the groups: P(X = 0 | 6, 0.8) = 6.4e-5 < 1.25 %, contradicted at stage 1,
    whatever seeds 6-17 show (all 1.00 here)."""
    r = row([0.2] * 6 + [1.0] * 12)
    assert r["holds"] == vd.CONTRADICTED and r["stage"].startswith("decided at stage 1 of 2")
    assert "stage 2" not in r["stage"] and "0 of 6 seeds" in r["claim"] + r["note"]
    assert "decided at stage 1 of 2" in r["reason"]


def test_a_stage_two_decision_after_an_inconclusive_first_look():
    """4 of the first 6 (inconclusive), 8 of 18 in all: P(X ≤ 8 | 18, 0.8) < 1.25 %, contradicted at stage 2."""
    r = row([1.0] * 4 + [0.2] * 2 + [1.0] * 4 + [0.2] * 8)
    assert r["holds"] == vd.CONTRADICTED and r["stage"].startswith("decided at stage 2 of 2")
    assert "stage 1 (6 seeds: 0–5, one-sided 1.25%): inconclusive" in r["stage"]
    assert "stage 2 (18 seeds: 0–17, one-sided 1.25%): contradicted" in r["stage"]
    held = row([1.0] * 24, sizes=(6, 24))  # 0.8^24 = 0.0047 < 1.25 %: holds at stage 2 of a longer study
    assert held["holds"] == vd.HOLDS and held["stage"].startswith("decided at stage 2 of 2")


def test_inconclusive_at_both_stages_and_the_one_stage_reading_beside_it():
    """18 of 18 seeds at 1.00 hold in one look at 2.5 % (0.8^18 = 0.018) but not at stage 2's 1.25 %: the price of the
    first look (the share claim needs 20 seeds to hold at 1.25 %). The earlier version, one stage, keeps "holds"."""
    r = row([1.0] * 18)
    assert r["holds"] == vd.INCONCLUSIVE and r["lean"] == vd.TOWARD
    assert r["stage"].startswith("inconclusive at both stages")
    assert r["version"].startswith("v3 (") and rules.SEED_STAGES not in r["earlier"].split(" | ")[0] \
        and r["earlier"].startswith("v2 (") and r["earlier"].split(" | ")[0].endswith("holds (lean toward)")
    unstaged = cl.check_claims([home.PAPER], cl.ClaimData(runs([1.0] * 18))).set_index("claim_id").loc[CLAIM]
    assert unstaged["holds"] == vd.HOLDS and "stage" not in unstaged  # no stages stated: one stage at 2.5 %


def test_a_studys_other_claims_are_read_in_one_stage():
    frame = cl.check_claims([home.PAPER], cl.ClaimData(runs([1.0] * 18)), seed_stages={CLAIM: [6, 18]},
                            seeds=list(range(18))).set_index("claim_id")
    assert frame.loc["home-scl-rotated-half", "stage"] == "one stage"
    assert list(frame.columns).index("stage") == list(frame.columns).index("reason") - 1


def test_a_stage_tests_its_parts_at_its_level():
    """The binomial p of 20 of 20 seeds in range, 0.8^20 = 0.0115, holds at 1.25 % and at 2.5 %; of 18 of 18, 0.018,
    only at 2.5 %."""
    def word(k: int, n: int) -> str:
        part = vd.Part(vd.t_interval([1.0] * k + [0.5] * (n - k)), 0.9, np.inf, share=rules.SHARE)
        return vd.verdict_word({"level": part})
    assert word(18, 18) == vd.HOLDS and word(20, 20) == vd.HOLDS
    with rules.using(rules.SEED_STAGES), rules.at_level(stages.stage_levels()[0]):
        assert word(18, 18) == vd.INCONCLUSIVE and word(20, 20) == vd.HOLDS
    with pytest.raises(ValueError, match="allowed: 0 < level < 0.5"):
        with rules.at_level(0.0):
            pass


def test_a_t_part_needs_more_seeds_at_a_stages_level():
    """Seeds all showing the same difference (zero spread, only the step floors it) happen up to 1/4^n of the time on a
    bimodal score: 3 seeds decide at 2.5 % (1/64 < 2.5 %), 4 at 1.25 % (1/64 > 1.25 %)."""
    assert rules.min_t_seeds(vd.SIDE_ALPHA) == rules.MIN_T_SEEDS == 3
    assert rules.min_t_seeds(stages.stage_levels()[0]) == 4
    d = vd.t_interval([0.55, 0.55, 0.55], "paired seeds", step=0.068)
    part = vd.Part(d, 0.0, np.inf, True)
    assert vd.assess(part).why == "" and vd.verdict_word({"A above B": part}) == vd.HOLDS
    with rules.using(rules.SEED_STAGES), rules.at_level(stages.stage_levels()[0]):
        assert vd.assess(part).why == "few seeds" and vd.verdict_word({"A above B": part}) == vd.INCONCLUSIVE


def test_the_vectorised_stages_are_the_reports_reading():
    """cflcore.report.statistics.calibration composes many tables' stage verdicts with staged_words: the first stage's
    word where it decides, else the last's, as read_in_stages reads one claim."""
    first = np.array([vd.HOLDS, vd.CONTRADICTED, vd.INCONCLUSIVE, vd.NA, vd.INCONCLUSIVE], dtype=object)
    last = np.array([vd.INCONCLUSIVE, vd.HOLDS, vd.HOLDS, vd.CONTRADICTED, vd.INCONCLUSIVE], dtype=object)
    plan = stages.SeedStages((2, 4), (0, 1, 2, 3))
    for f, l, got in zip(first, last, stages.staged_words(first, last)):
        readings = stages.read_in_stages(lambda seeds, f=f, l=l: f if len(seeds) == 2 else l, lambda w: w, plan)
        assert readings[-1] == got


def test_the_front_page_prints_the_stage_and_the_family_counts_the_staged_claim():
    from cflcore.report.front_page import claims_checks

    claims = cl.check_claims([home.PAPER], cl.ClaimData(runs([1.0] * 18)), seed_stages={CLAIM: [6, 18]},
                             seeds=list(range(18)))
    check = claims_checks(claims)[0]
    frame = check.tables[0][1]
    assert "Stage" in frame.columns and list(frame.columns).index("Stage") == list(frame.columns).index("Reason") - 1
    assert "*Stage*" in check.text and "1 of them read in 2 stages after seeds were added" in check.text


def test_the_home_table_reads_the_claim_in_the_studys_stages():
    """The home table's verdict of IFCA's claim is paper_claims.csv's: in stages where the study states them."""
    staged = cl.ClaimData(runs([1.0] * 18), seed_stages={CLAIM: (6, 18)}, seeds=tuple(range(18)))
    row_of = {r["method"]: r for _, r in home.home_table(staged).iterrows()}
    ifca = next(r for method, r in row_of.items() if method.startswith("IFCA"))
    assert ifca["verdict"].startswith(f"{vd.INCONCLUSIVE} (lean toward; {CLAIM})")
    one = home.home_table(cl.ClaimData(runs([1.0] * 18)))
    assert one.loc[one["method"] == ifca["method"], "verdict"].iloc[0].startswith(f"{vd.HOLDS} (lean toward")
    assert cl.check_claims([home.PAPER], staged).set_index("claim_id").loc[CLAIM, "holds"] == vd.INCONCLUSIVE
