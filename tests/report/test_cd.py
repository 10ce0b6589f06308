"""Critical-difference analysis (Friedman + Wilcoxon–Holm; 000 §5.4)."""
from __future__ import annotations

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
