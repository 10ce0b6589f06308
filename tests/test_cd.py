"""Critical-difference analysis (Friedman + Wilcoxon–Holm; 000 §5.4)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cflcore.report.cd import cd_analysis, draw_cd_diagram, find_cliques, holm_correction, mean_ranks


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
    assert np.isclose(sum(res.mean_ranks.values()), 6.0)
    pair = {frozenset((a, b)): row for a, b, row in
            zip(res.pairwise["a"], res.pairwise["b"], res.pairwise.itertuples(index=False))}
    assert pair[frozenset("AC")].significant and pair[frozenset("BC")].significant
    assert not pair[frozenset("AB")].significant and pair[frozenset("AB")].p_holm > 0.5
    assert res.cliques == [sorted(["A", "B"], key=lambda a: res.mean_ranks[a])]


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
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in paths)


def test_two_algorithms_use_wilcoxon_only_and_nan_blocks_are_dropped(tmp_path):
    scores = synthetic_scores()[["A", "C"]]
    scores.iloc[0, 0] = np.nan
    res = cd_analysis(scores)
    assert res.friedman_p is None and "Friedman test skipped" in res.note and res.n_blocks == 11
    assert bool(res.pairwise["significant"].iloc[0]) and res.cliques == []
    assert all(p.exists() for p in draw_cd_diagram(res, tmp_path / "two"))


def test_diagram_with_cliques_writes_png_and_pdf(tmp_path):
    paths = draw_cd_diagram(cd_analysis(synthetic_scores()), tmp_path / "sub" / "cd_in", title="Insertion")
    assert all(p.exists() and p.stat().st_size > 1000 for p in paths)
