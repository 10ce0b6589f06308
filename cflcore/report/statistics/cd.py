"""Critical-difference analysis (Demšar 2006) as used in 000 §5.4 (Figs. 8 and 17).

Scores form a table: one row per *block* (a scenario: dataset × split × clients × seed, the
"datasets" of Demšar) and one column per algorithm. Algorithms are ranked within each block (1 =
best, ties share the average rank) and placed by mean rank. A Friedman test
(``scipy.stats.friedmanchisquare``) asks whether any difference exists; then every pair is compared
with the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``) and the p-values are Holm-corrected
(the "Wilcoxon–Holm" procedure of Benavoli et al. 2016 / Ismail Fawaz's cd-diagram code). Groups of
algorithms, adjacent in rank, no two of which differ significantly, are joined by a bar. When the
Friedman test does not reject, one bar joins all (000: "no statistical differences were detected").

The Nemenyi critical difference (Demšar 2006, §3.2.2: two mean ranks differ when apart by more than
q_α √(k(k+1)/(6N)), q_α the studentized range quantile over √2, scipy.stats.studentized_range) is reported beside
the diagram's Wilcoxon–Holm bars (``nemenyi_cd``).

Friedman, Nemenyi and Wilcoxon need complete blocks (every algorithm scored in every block). A missing score is
handled one of two ways (``incomplete``, :func:`complete_scores`): ``"blocks"`` drops the blocks with a missing score
(complete-case by block: sound where a score is missing at random, e.g. a run not made), ``"methods"`` drops the
algorithms missing from some block and keeps every block (sound where a score is missing *because of the
algorithm*, e.g. it cannot act there: dropping those blocks would take the settings hardest for one algorithm away
from every other, and ranking among the present algorithms of each block would mix ranks out of different k, which
neither Friedman's statistic nor Nemenyi's CD allows). The dropped algorithms are named (``CDResult.dropped``) and the
mean ranks are always those of the data the tests use.

Too little data for a test (fewer than 2 algorithms, or fewer than 2 complete blocks) gives the mean
ranks with a ``note`` and no test; Friedman needs ≥ 3 algorithms, so with 2 only the Wilcoxon test runs.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from ...io import atomic_path  # noqa: E402
from ..figures import tight_bbox  # noqa: E402


@dataclass
class CDResult:
    """Outcome of :func:`cd_analysis`; ``algorithms`` is sorted best (lowest mean rank) first."""

    algorithms: list[str]
    mean_ranks: dict[str, float]
    n_blocks: int
    alpha: float
    higher_is_better: bool
    friedman_statistic: float | None = None
    friedman_p: float | None = None
    pairwise: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["a", "b", "p_value", "p_holm", "significant"]))
    cliques: list[list[str]] = field(default_factory=list)
    note: str | None = None
    nemenyi_cd: float | None = None  # the Nemenyi critical difference of mean ranks at ``alpha`` (k ≥ 2, N ≥ 2)
    dropped: list[str] = field(default_factory=list)  # algorithms missing from some block, left out ("methods")

    def table(self) -> pd.DataFrame:
        """One row per algorithm: mean rank and the clique indices it belongs to."""
        return pd.DataFrame({
            "algorithm": self.algorithms,
            "mean_rank": [self.mean_ranks[a] for a in self.algorithms],
            "cliques": [",".join(str(i) for i, c in enumerate(self.cliques) if a in c) for a in self.algorithms],
        })


def holm_correction(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: p_(i) ← max_{j ≤ i} min(1, (m − j + 1) p_(j)).
    Hand-rolled: scipy has no Holm (``false_discovery_control`` is BH/BY) and statsmodels is not a dependency."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def mean_ranks(scores: pd.DataFrame, higher_is_better: bool = True) -> pd.Series:
    """Mean over blocks (rows) of each algorithm's within-block rank (1 = best; ties averaged)."""
    values = -scores.to_numpy(dtype=np.float64) if higher_is_better else scores.to_numpy(dtype=np.float64)
    ranks = stats.rankdata(values, axis=1, method="average")
    return pd.Series(ranks.mean(axis=0), index=scores.columns)


def wilcoxon_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p-value; identical samples (all differences zero) give 1.0."""
    diff = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    if np.allclose(diff, 0.0):
        return 1.0
    return float(stats.wilcoxon(a, b, zero_method="pratt").pvalue)


def pairwise_wilcoxon_holm(scores: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """All algorithm pairs: raw Wilcoxon p, Holm-adjusted p and whether it is below ``alpha``."""
    pairs = list(itertools.combinations(scores.columns, 2))
    raw = np.array([wilcoxon_p(scores[a].to_numpy(), scores[b].to_numpy()) for a, b in pairs])
    adjusted = holm_correction(raw)
    return pd.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs], "p_value": raw,
                         "p_holm": adjusted, "significant": adjusted < alpha})


def friedman_test(scores: pd.DataFrame) -> tuple[float, float]:
    """Friedman χ² over blocks; all-tied data (statistic undefined) counts as p = 1."""
    stat, p = stats.friedmanchisquare(*(scores[c].to_numpy() for c in scores.columns))
    if not np.isfinite(p):
        return 0.0, 1.0
    return float(stat), float(p)


def nemenyi_cd(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi's critical difference of mean ranks for ``k`` algorithms over ``n`` blocks (Demšar 2006, eq. after
    Table 5): q_α √(k(k+1)/(6n)), with q_α = the studentized range's (1 − α) quantile for k groups, infinite df, / √2."""
    q = float(stats.studentized_range.ppf(1 - alpha, k, np.inf)) / np.sqrt(2)
    return q * float(np.sqrt(k * (k + 1) / (6 * n)))


def find_cliques(ordered: list[str], significant: set[frozenset[str]]) -> list[list[str]]:
    """Maximal runs of rank-adjacent algorithms, ≥ 2 long, with no significant pair inside."""
    runs = []
    for i in range(len(ordered)):
        j = i
        while j + 1 < len(ordered) and all(frozenset((ordered[k], ordered[j + 1])) not in significant
                                           for k in range(i, j + 1)):
            j += 1
        if j > i:
            runs.append((i, j))
    maximal = [r for r in runs if not any(o != r and o[0] <= r[0] and r[1] <= o[1] for o in runs)]
    return [ordered[i:j + 1] for i, j in maximal]


INCOMPLETE = ("blocks", "methods")
"""How :func:`complete_scores` makes a table complete: drop the incomplete blocks, or the algorithms not in every block."""


def complete_scores(scores: pd.DataFrame, incomplete: str = "blocks") -> tuple[pd.DataFrame, list[str]]:
    """The complete table the rank statistics use, and the algorithms left out. ``"blocks"``: every row with a missing
    score is dropped (no algorithm is left out). ``"methods"``: rows without any score are dropped (a block nobody
    scores, e.g. a split without groups), then every algorithm missing from a remaining row; all other blocks stay."""
    if incomplete not in INCOMPLETE:
        raise ValueError(f"incomplete: {incomplete!r} is not one of {list(INCOMPLETE)}")
    if incomplete == "blocks":
        return scores.dropna(axis=0, how="any"), []
    scored = scores.dropna(axis=0, how="all")
    dropped = [str(a) for a in scored.columns[scored.isna().any(axis=0)]]
    return scored.drop(columns=dropped), dropped


def cd_analysis(scores: pd.DataFrame, higher_is_better: bool = True, alpha: float = 0.05,
                incomplete: str = "blocks") -> CDResult:
    """Friedman then Wilcoxon–Holm over the complete table of ``scores`` (rows = blocks, columns = algorithms), made
    complete by dropping blocks or algorithms (``incomplete``, :func:`complete_scores`); the mean ranks are those of
    the same table."""
    complete, dropped = complete_scores(scores, incomplete)
    k, n = complete.shape[1], complete.shape[0]
    ranks = mean_ranks(complete, higher_is_better) if n else pd.Series(np.nan, index=complete.columns)
    ordered = sorted(complete.columns, key=lambda a: (ranks[a], str(a)))
    result = CDResult(list(ordered), {a: float(ranks[a]) for a in ordered}, n, alpha, higher_is_better,
                      dropped=dropped)
    if k < 2 or n < 2:
        result.note = f"no test: {k} algorithm(s) over {n} complete scenario(s); need ≥ 2 of each"
        return result
    result.nemenyi_cd = nemenyi_cd(k, n, alpha)
    if k >= 3:
        result.friedman_statistic, result.friedman_p = friedman_test(complete)
    else:
        result.note = "2 algorithms: Friedman test skipped (needs ≥ 3), Wilcoxon only"
    result.pairwise = pairwise_wilcoxon_holm(complete, alpha)
    if result.friedman_p is not None and result.friedman_p >= alpha:
        result.cliques = [list(ordered)]
        result.note = f"Friedman p = {result.friedman_p:.3g} ≥ {alpha}: no significant differences"
        return result
    significant = {frozenset((a, b)) for a, b, s in
                   result.pairwise[["a", "b", "significant"]].itertuples(index=False) if s}
    result.cliques = find_cliques(list(ordered), significant)
    return result


def draw_cd_diagram(result: CDResult, path_stem: str | Path, title: str = "") -> list[Path]:
    """A Demšar-style diagram (rank axis, algorithms hung from their mean rank, bars joining cliques);
    written as ``<stem>.png`` and ``<stem>.pdf``. Works without a test (ranks and the note only)."""
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    algos = result.algorithms
    k = max(len(algos), 2)
    height = 1.4 + 0.28 * (len(algos) + 1) / 2 + 0.18 * len(result.cliques)
    fig, ax = plt.subplots(figsize=(7.0, height))
    ax.set_xlim(0.5, k + 0.5)
    ax.set_ylim(-(len(algos) + 2) / 2 * 0.3 - 0.25 * len(result.cliques) - 0.5, 0.6)
    ax.axis("off")
    ax.hlines(0, 1, k, color="black", lw=1)
    for r in range(1, k + 1):
        ax.vlines(r, 0, 0.08, color="black", lw=1)
        ax.text(r, 0.14, str(r), ha="center", va="bottom", fontsize=8)
    half = (len(algos) + 1) // 2
    for i, algo in enumerate(algos):
        rank = result.mean_ranks[algo]
        if not np.isfinite(rank):
            continue
        left = i < half
        y = -0.3 * ((i if left else len(algos) - 1 - i) + 1) - 0.25 * len(result.cliques)
        x_text = 0.55 if left else k + 0.45
        ax.plot([rank, rank, x_text], [0, y, y], color="black", lw=0.8)
        ax.text(x_text, y + 0.03, f"{algo} ({rank:.2f})", ha="left" if left else "right", va="bottom", fontsize=8)
    for j, clique in enumerate(result.cliques):
        ranks = [result.mean_ranks[a] for a in clique]
        y = -0.12 - 0.2 * j
        ax.hlines(y, min(ranks) - 0.05, max(ranks) + 0.05, color="black", lw=3.5)
    subtitle = "rank 1 = best (" + ("higher" if result.higher_is_better else "lower") + " AUC is better)"
    if result.friedman_p is not None:
        subtitle += f"; Friedman p = {result.friedman_p:.3g}"
    subtitle += f"; N = {result.n_blocks} blocks; Wilcoxon–Holm α = {result.alpha}"
    if result.nemenyi_cd is not None:
        subtitle += f"; Nemenyi CD = {result.nemenyi_cd:.2f}"
    if result.dropped:
        subtitle += f"\nleft out (no score in every block): {', '.join(result.dropped)}"
    ax.set_title(f"{title}\n{subtitle}" if title else subtitle, fontsize=9)
    if result.note:
        ax.text((k + 1) / 2, ax.get_ylim()[0] + 0.1, result.note, ha="center", va="bottom", fontsize=8,
                style="italic", color="dimgray")
    return save_figure(fig, stem)


def save_figure(fig: plt.Figure, stem: str | Path, formats: tuple[str, ...] = ("png", "pdf")) -> list[Path]:
    """Save ``fig`` as ``<stem>.<fmt>`` for each format, each atomically (cflcore.io.atomic_path); closes it."""
    paths = []
    try:
        bbox = tight_bbox(fig, 150)
        for fmt in formats:
            path = Path(stem).with_suffix(f".{fmt}")
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, bbox_inches=bbox, dpi=150)
            paths.append(path)
    finally:
        plt.close(fig)
    return paths
