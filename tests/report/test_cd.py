"""Critical-difference analysis (Friedman + Wilcoxon–Holm; 000 §5.4)."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from cflcore.report.statistics.cd import cd_analysis, draw_cd_diagram, find_cliques, holm_correction, mean_ranks


def synthetic_scores(n_blocks: int = 12, seed: int = 0) -> pd.DataFrame:
    """A and B tied (B = A ± a symmetric alternating offset), C clearly worse in every block."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.5, 0.8, n_blocks)
    offset = np.where(np.arange(n_blocks) % 2 == 0, 1.0, -1.0) * rng.uniform(0.001, 0.01, n_blocks)
    return pd.DataFrame({"A": base, "B": base + offset, "C": base - rng.uniform(0.1, 0.2, n_blocks)},
                        index=[f"scenario{i}" for i in range(n_blocks)])


def test_known_significant_and_tied_pairs():
    res = cd_analysis(synthetic_scores(), higher_is_better=True)
    assert res.friedman_p < 0.05 and res.n_blocks == 12
    assert res.algorithms[-1] == "C" and res.mean_ranks["C"] == 3.0
    scores = synthetic_scores()
    a_first = int((scores["A"] > scores["B"]).sum())  # blocks where A beats B (rank 1), else B does
    assert res.mean_ranks == {"A": (a_first + 2 * (12 - a_first)) / 12, "B": (2 * a_first + (12 - a_first)) / 12,
                              "C": 3.0}
    pair = {frozenset((a, b)): row for a, b, row in
            zip(res.pairwise["a"], res.pairwise["b"], res.pairwise.itertuples(index=False))}
    assert pair[frozenset("AC")].significant and pair[frozenset("BC")].significant
    assert not pair[frozenset("AB")].significant and pair[frozenset("AB")].p_holm > 0.5
    assert res.cliques == [sorted(["A", "B"], key=lambda a: res.mean_ranks[a])]


def holm_by_hand(p_values: list[float]) -> list[float]:
    """Holm's step-down procedure written out: sort ascending, multiply the i-th smallest (0-based) by m − i,
    keep the running maximum, cap at 1, and put the values back in the original order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def scores_with_graded_differences(n_blocks: int = 10, seed: int = 3) -> pd.DataFrame:
    """Four algorithms whose gaps grow from nil (A vs B) to large (A vs D), with noise: the six Wilcoxon p-values
    are spread out, so Holm's multipliers (6, 5, …, 1) and its running maximum both matter."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.4, 0.8, n_blocks)
    noise = rng.normal(0.0, 0.02, (n_blocks, 4))
    shifts = np.array([0.0, -0.005, -0.02, -0.06])
    return pd.DataFrame(base[:, None] + shifts + noise, columns=list("ABCD"))


def test_friedman_and_wilcoxon_holm_p_values_equal_scipy_and_holm_by_hand():
    from scipy import stats

    scores = scores_with_graded_differences()
    res = cd_analysis(scores, alpha=0.05)
    expected = stats.friedmanchisquare(*(scores[c].to_numpy() for c in scores.columns))
    assert res.friedman_statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert res.friedman_p == pytest.approx(expected.pvalue, rel=1e-12)
    pairs = [("A", "B"), ("A", "C"), ("A", "D"), ("B", "C"), ("B", "D"), ("C", "D")]
    raw = [stats.wilcoxon(scores[a], scores[b], zero_method="pratt").pvalue for a, b in pairs]
    holm = holm_by_hand(raw)
    got = res.pairwise.set_index(["a", "b"])
    assert list(got.index) == pairs
    np.testing.assert_allclose(got["p_value"].to_numpy(), raw, rtol=1e-12)
    np.testing.assert_allclose(got["p_holm"].to_numpy(), holm, rtol=1e-12)
    assert got["significant"].tolist() == [p < 0.05 for p in holm]
    # the fixture exercises Holm: corrected p-values differ from the raw ones and from Bonferroni's m·p
    assert not np.allclose(holm, raw) and not np.allclose(holm, np.minimum(1.0, 6 * np.asarray(raw)))
    assert 0 < sum(p < 0.05 for p in holm) < sum(p < 0.05 for p in raw)  # a pair significant only uncorrected
    order = np.argsort(raw, kind="stable")
    without_running_max = np.empty(6)
    without_running_max[order] = np.minimum(1.0, (6 - np.arange(6)) * np.asarray(raw)[order])
    assert not np.allclose(holm, without_running_max)  # the step-down's running maximum changes some values


def test_lower_is_better_flips_the_ranking():
    res = cd_analysis(synthetic_scores(), higher_is_better=False)
    assert res.algorithms[0] == "C" and res.mean_ranks["C"] == 1.0


def test_friedman_not_rejected_gives_one_bar():
    values = np.tile([0.3, 0.5, 0.4], (6, 1)) + np.array([[0.2, -0.2, 0.0], [-0.2, 0.2, 0.0]] * 3)
    scores = pd.DataFrame(values, columns=["A", "B", "C"])  # every algorithm has mean rank 2
    res = cd_analysis(scores)
    assert res.friedman_p >= 0.05 and res.cliques == [res.algorithms] and "no significant" in res.note


def test_holm_correction():
    assert np.allclose(holm_correction(np.array([0.01, 0.04, 0.03])), [0.03, 0.06, 0.06])
    assert np.allclose(holm_correction(np.array([0.5, 0.9])), [1.0, 1.0])
    assert holm_correction(np.array([])).size == 0


def test_mean_ranks_with_ties():
    scores = pd.DataFrame({"A": [1.0, 2.0], "B": [1.0, 1.0], "C": [0.0, 3.0]})
    assert mean_ranks(scores).to_dict() == {"A": 1.75, "B": 2.25, "C": 2.0}


def test_find_cliques_keeps_only_maximal_runs():
    sig = {frozenset("AC"), frozenset("AD"), frozenset("BD")}
    assert find_cliques(list("ABCD"), sig) == [["A", "B"], ["B", "C"], ["C", "D"]]
    assert find_cliques(list("ABC"), set()) == [["A", "B", "C"]]


@pytest.mark.parametrize("shape", [(1, 3), (5, 1), (0, 3)])
def test_too_few_scenarios_or_algorithms_draws_ranks_with_a_note(tmp_path, shape):
    scores = pd.DataFrame(np.random.default_rng(0).uniform(size=shape), columns=list("ABC")[: shape[1]])
    res = cd_analysis(scores)
    assert res.note and res.note.startswith("no test") and res.friedman_p is None and res.pairwise.empty
    paths = draw_cd_diagram(res, tmp_path / "cd", title="x")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].read_bytes()[:5] == b"%PDF-"


def test_two_algorithms_use_wilcoxon_only_and_nan_blocks_are_dropped(tmp_path):
    scores = synthetic_scores()[["A", "C"]]
    scores.iloc[0, 0] = np.nan
    res = cd_analysis(scores)
    assert res.friedman_p is None and "Friedman test skipped" in res.note and res.n_blocks == 11
    assert bool(res.pairwise["significant"].iloc[0]) and res.cliques == []
    png, pdf = draw_cd_diagram(res, tmp_path / "two")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:5] == b"%PDF-"


def test_diagram_with_cliques_writes_png_and_pdf(tmp_path):
    paths = draw_cd_diagram(cd_analysis(synthetic_scores()), tmp_path / "sub" / "cd_in", title="Insertion")
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)


def test_nemenyi_critical_difference_matches_demsar_2006():
    """Demšar (2006) §3.2.2's example: 4 algorithms over 14 data sets, CD = 2.569 √(4·5 / (6·14)) = 1.25."""
    from cflcore.report.statistics.cd import nemenyi_cd

    assert nemenyi_cd(4, 14) == pytest.approx(1.25, abs=0.005)
    assert nemenyi_cd(4, 28) < nemenyi_cd(4, 14)  # more blocks, a smaller difference needed


@pytest.mark.parametrize("seed", range(6))
def test_friedman_nemenyi_and_wilcoxon_holm_agree_with_scikit_posthocs(seed):
    """An outside oracle (issue 67 item 6; the ``test`` extra): scikit-posthocs' Durbin test, which on complete blocks
    is Friedman's χ² with the ties correction, its Nemenyi–Friedman p-values (a pair is apart by more than our CD exactly
    when its p is under α) and its Wilcoxon signed-rank with Holm's correction give what cd_analysis gives, on tables
    with ties (scores rounded to two places) and spread-out gaps."""
    sp = pytest.importorskip("scikit_posthocs")
    rng = np.random.default_rng(seed)
    k, n = int(rng.integers(3, 7)), int(rng.integers(8, 20))
    scores = pd.DataFrame(np.round(rng.uniform(0.3, 0.8, (n, 1)) + np.linspace(0, -0.15, k) + rng.normal(0, 0.05, (n, k)),
                                   2), columns=[f"m{i}" for i in range(k)])
    res = cd_analysis(scores, alpha=0.05)
    p_durbin, chi2, df = sp.test_durbin(scores.to_numpy())
    assert df == k - 1 and res.friedman_statistic == pytest.approx(chi2, rel=1e-9)
    assert res.friedman_p == pytest.approx(p_durbin, rel=1e-9)
    nemenyi = sp.posthoc_nemenyi_friedman(scores.to_numpy())
    for i, j in itertools.combinations(range(k), 2):
        gap = abs(res.mean_ranks[f"m{i}"] - res.mean_ranks[f"m{j}"])
        if abs(gap - res.nemenyi_cd) > 1e-9:  # not on the boundary
            assert (gap > res.nemenyi_cd) == (nemenyi.iloc[i, j] < 0.05), (i, j, gap, res.nemenyi_cd, nemenyi.iloc[i, j])
    long = scores.melt(var_name="method", value_name="score")
    theirs = sp.posthoc_wilcoxon(long, val_col="score", group_col="method", zero_method="pratt", p_adjust="holm")
    raw = sp.posthoc_wilcoxon(long, val_col="score", group_col="method", zero_method="pratt")
    for row in res.pairwise.itertuples(index=False):
        assert row.p_value == pytest.approx(raw.loc[row.a, row.b], rel=1e-9)
        assert row.p_holm == pytest.approx(theirs.loc[row.a, row.b], rel=1e-9)


def test_the_nemenyi_critical_difference_is_where_scikit_posthocs_p_crosses_alpha():
    """The CD itself: two methods whose mean ranks are apart by CD ∓ 1e-6 get a Nemenyi–Friedman p just above / below α
    from scikit-posthocs (it takes q from the same studentized range), for several k and N."""
    sp = pytest.importorskip("scikit_posthocs")
    from scipy import stats

    from cflcore.report.statistics.cd import nemenyi_cd

    for k, n in ((3, 8), (5, 12), (9, 8)):
        cd = nemenyi_cd(k, n, 0.05)
        for gap, above in ((cd - 1e-6, True), (cd + 1e-6, False)):
            # scikit-posthocs' statistic: |R_i − R_j| / √(k(k+1)/(6N)), p = studentized_range.sf(stat·√2, k, ∞)
            q = gap / np.sqrt(k * (k + 1) / (6 * n))
            p = float(stats.studentized_range.sf(q * np.sqrt(2), k, np.inf))
            assert (p > 0.05) == above
    # and that formula is scikit-posthocs': an exact table of ranks reproduces its p for the pair (m0, m1)
    ranks = np.tile(np.arange(1.0, 6.0), (12, 1))
    ranks[:4, [0, 1]] = ranks[:4, [1, 0]]
    p_theirs = sp.posthoc_nemenyi_friedman(-ranks).iloc[0, 4]
    gap = abs(ranks[:, 0].mean() - ranks[:, 4].mean())
    q = gap / np.sqrt(5 * 6 / (6 * 12))
    assert p_theirs == pytest.approx(float(stats.studentized_range.sf(q * np.sqrt(2), 5, np.inf)), rel=1e-6)
