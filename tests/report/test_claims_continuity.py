"""One test family, continuous in the data (cflcore.report.statistics.verdicts.assess): an exact tie (every seed the same
value) and a near tie (every seed moved by less than the metric's resolution) get the same verdict, between
"inconclusive" and "contradicted" in particular, unless the tie itself sits within one standard error of the test's
critical value (where any test must flip for some move). Fails on a rule that sends exact ties to another test (the
sign test of the earlier rule: ARI (0, 0, 0) inconclusive, (0, 0.01, 0) contradicted)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import t

from cflcore.report.statistics import verdicts as vd

H = vd.resolution_of("ari")


def verdict(values, lo, hi, strict) -> str:
    part = vd.Part(vd.t_interval(values, "paired seeds", H), lo, hi, strict)
    return vd.combine({"part": part}).word


def near_critical(tie: float, n: int, lo: float, hi: float) -> bool:
    """The exact tie's t statistic (standard error at its floor, H) within 1 of ± the critical value."""
    crit = float(t.ppf(1 - vd.SIDE_ALPHA, n - 1))
    stats = [(tie - lo) / H] if np.isfinite(lo) else []
    stats += [(hi - tie) / H] if np.isfinite(hi) else []
    return any(abs(abs(s) - crit) < 1.0 for s in stats)


RANGES = st.sampled_from([(0.9, np.inf, False), (-1.0, 0.3, False), (0.0, np.inf, True), (-0.02, 0.02, False)])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(n=st.integers(2, 12), tie=st.floats(-1.0, 1.0), rng=RANGES,
       moves=st.lists(st.floats(-0.999, 0.999), min_size=12, max_size=12))
def test_an_exact_tie_and_its_near_ties_get_the_same_verdict(n, tie, rng, moves):
    lo, hi, strict = rng
    exact = np.full(n, tie)
    near = exact + H * np.asarray(moves[:n])
    part_exact, part_near = (vd.Part(vd.t_interval(v, "paired seeds", H), lo, hi, strict) for v in (exact, near))
    for a, b in zip(vd.t_statistics(part_exact), vd.t_statistics(part_near)):
        assert abs(a - b) < 1.0  # a move below the resolution moves t by less than 1
    words = {verdict(exact, lo, hi, strict), verdict(near, lo, hi, strict)}
    if not near_critical(tie, n, lo, hi):
        assert len(words) == 1, (exact, near, words)
    assert words != {vd.INCONCLUSIVE, vd.CONTRADICTED} or near_critical(tie, n, lo, hi)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(n=st.integers(2, 40), rng=RANGES, moves=st.lists(st.floats(-0.999, 0.999), min_size=40, max_size=40))
def test_values_within_the_resolution_of_a_claims_end_never_decide(n, rng, moves):
    lo, hi, strict = rng
    end = lo if np.isfinite(lo) else hi
    values = end + H * np.asarray(moves[:n])
    part = vd.Part(vd.t_interval(values, "paired seeds", H), lo, hi, strict)
    assert vd.within_resolution(part) and verdict(values, lo, hi, strict) == vd.INCONCLUSIVE
    a = vd.assess(part)
    assert a.why in ("exact", "saturated") and vd.seeds_needed(a, part, vd.SIDE_ALPHA) is None


def test_the_issues_example_reads_alike():
    """ARI (0, 0, 0) and (0, 0.01, 0) against "ARI ≥ 0.9": both contradicted (far below, beyond the resolution)."""
    assert verdict([0.0, 0.0, 0.0], 0.9, np.inf, False) == verdict([0.0, 0.01, 0.0], 0.9, np.inf, False) == \
        vd.CONTRADICTED
