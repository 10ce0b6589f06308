"""The decision rules a claim's parts are tested by, by name, and the pieces the current rule adds to the t-family of
:mod:`.verdicts`: the exact binomial test of a share of seeds, and the metrics' real steps in a setting.

A rule is part of a claim's version (cflcore/report/papers/versions.py: each version records the rule it was read
under): :data:`CURRENT` is the rule a claim is read under today, :data:`DIGIT_FLOOR` the rule of 86306b5 to c3b7635,
kept callable so the report shows a claim's earlier verdict beside the new one (:func:`using`).

* :data:`DIGIT_FLOOR` (86306b5): every part by the one-sample t-test, one-sided at 2.5 %, its standard error floored
  at the printed digit (1e-3 for a score). On a bounded, bimodal score it holds far more often than 2.5 % when the
  claim is false (ARI [1.00, 1.00] against "ARI ≥ 0.9": t = 100): tests/report/test_verdict_calibration.py.
* :data:`SHARE_AND_STEP` (issue 67): a level claim on a bounded, discrete score ("ARI ≥ 0.9") is a claim about the
  share of seeds that reach it, the share stated with the claim (:data:`SHARE`), decided by the exact one-sided
  binomial test of k successes of n seeds (:func:`share_test`; its bounds are Clopper–Pearson's): holds when the
  one-sided lower bound clears the share, contradicted when the upper bound lies below it. A claim about a mean or a
  paired difference keeps the t-test, its standard error floored at the metric's real step in the setting
  (:func:`ari_step`, :func:`accuracy_step`), and it needs :data:`MIN_T_SEEDS` seeds (:func:`min_t_seeds` at a lower
  level): with two, an equal difference on both (zero spread, likely on a discrete score) decides at any floor below
  it, which the calibration test measures.
* :data:`SEED_STAGES` (issue 67, item 2): a claim a study reads again after adding seeds, the stages stated before the
  second look (``report.seed_stages``, :mod:`.stages`): stage 1 on the first n1 seeds at one-sided 1.25 %, and only
  if it is inconclusive, stage 2 on all the seeds at 1.25 %, each stage tested as under :data:`SHARE_AND_STEP`. The
  levels add up to 2.5 % per side (Bonferroni, :data:`STAGES`); a study that states no stages reads the claim in one
  stage at 2.5 %, as :data:`SHARE_AND_STEP`.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Sequence

import numpy as np

DIGIT_FLOOR = "t, se floored at the printed digit (86306b5)"
SHARE_AND_STEP = "share of seeds by exact binomial; t with the per-seed spread floored at the metric's step (issue 67)"
SEED_STAGES = ("share and step in the two stages a study states before its second look (report.seed_stages), the "
               "one-sided level split equally between them (Bonferroni); one stage where none is stated (issue 67)")
RULES = (DIGIT_FLOOR, SHARE_AND_STEP, SEED_STAGES)
CURRENT = SHARE_AND_STEP
"""The rule claims are read under today unless a claim's reading is in stages; a claim's current version in
versions.json records it (:data:`IN_FORCE`)."""
IN_FORCE = (SHARE_AND_STEP, SEED_STAGES)
"""The rules a claim's current version may record: :data:`SEED_STAGES` reads as :data:`SHARE_AND_STEP` within a stage
and, where its study states no stages, in one stage."""
STAGES = 2
"""The looks of :data:`SEED_STAGES`: the seeds a study first ran, then all of them after it added seeds. Each look is
tested at the one-sided level / :data:`STAGES` per side (:func:`.stages.stage_levels`): Bonferroni's split, valid
whatever the seeds the looks share (a wrong verdict at either look is at most the sum of the looks' levels). A Pocock
or O'Brien–Fleming split would need the joint law of the two looks' statistics, which differs between the binomial and
the t-parts and, for the t, depends on the unknown spread; tests/report/test_verdict_calibration.py measures this
split's rates on the null shapes of the other rules."""
SHARE = 0.8
"""The share of seeds a level claim states ("ARI ≥ 0.9 in at least 80 % of seeds"), fixed before the data: a method
that recovers the groups does so in most seeds, not in one. With every seed succeeding, the exact test holds from
17 seeds on (0.8^17 < 0.025)."""
SAME_DIFFERENCE = 0.25
"""The largest chance that one seed shows a given nonzero paired difference of a two-point score with no true
difference (ahead with p(1 − p) ≤ 1/4): n seeds all showing it, a zero spread that only the step floors, happen up to
1/4^n of the time (:func:`min_t_seeds`)."""


def min_t_seeds(alpha: float) -> int:
    """The fewest seeds a t-part decides on at one-sided ``alpha`` under :data:`SHARE_AND_STEP` (and within a stage of
    :data:`SEED_STAGES`): the smallest n with 1/4^n ≤ α (:data:`SAME_DIFFERENCE`), 3 at 2.5 %, 4 at a stage's 1.25 %.
    At two seeds and 2.5 %, or three and 1.25 %, seeds that all show the same difference decide more often than the
    level on a bimodal score (tests/report/test_verdict_calibration.py)."""
    return max(2, int(np.ceil(np.log(alpha) / np.log(SAME_DIFFERENCE) - 1e-9)))


MIN_T_SEEDS = 3
"""The fewest seeds a t-part decides on under :data:`SHARE_AND_STEP` at one-sided 2.5 %: :func:`min_t_seeds`'s (a test
holds them equal)."""

STEP_COLUMNS = {"ari": "ari_step", "labels_only_ari": "ari_step", "local_acc": "local_acc_step",
                "orch_acc": "orch_acc_step"}
"""Metric -> the run summary's column of its real step in the run's setting (:func:`ari_step`: one client moved out of
the true partition; :func:`accuracy_step`: one test answer of one client; cflcore.report.sweeps.setting_steps), the
floor of a t-part's standard error under :data:`SHARE_AND_STEP`. A metric without one is floored at its printed digit
(cflcore.report.statistics.verdicts.RESOLUTION)."""

_RULE: contextvars.ContextVar[str] = contextvars.ContextVar("decision_rule", default=CURRENT)


def current() -> str:
    """The rule in force (:data:`CURRENT` unless inside :func:`using`)."""
    return _RULE.get()


@contextlib.contextmanager
def using(rule: str) -> Iterator[None]:
    """Read the claims inside under ``rule`` (one of :data:`RULES`): an earlier version's verdict on the same runs."""
    if rule not in RULES:
        raise ValueError(f"decision rule {rule!r}; allowed: {', '.join(RULES)}")
    token = _RULE.set(rule)
    try:
        yield
    finally:
        _RULE.reset(token)


_LEVEL: contextvars.ContextVar[float | None] = contextvars.ContextVar("stage_level", default=None)


def level(default: float) -> float:
    """The one-sided level a part is tested at: a stage's (inside :func:`at_level`), else ``default``."""
    stage = _LEVEL.get()
    return default if stage is None else stage


@contextlib.contextmanager
def at_level(alpha: float) -> Iterator[None]:
    """Test the parts inside at one-sided ``alpha`` per side (a stage of :data:`SEED_STAGES`)."""
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"a stage's one-sided level {alpha!r}; allowed: 0 < level < 0.5")
    token = _LEVEL.set(float(alpha))
    try:
        yield
    finally:
        _LEVEL.reset(token)


def share_test(k: int, n: int, share: float) -> tuple[float, float]:
    """The exact one-sided binomial p-values of ``k`` successes in ``n`` seeds against the claimed ``share``: (that the
    share is not above it, P(X ≥ k | share); that it is not below it, P(X ≤ k | share)). The first is below α
    exactly when the one-sided Clopper–Pearson lower bound at 1 − α clears the share (scipy.stats.binomtest)."""
    from scipy.stats import binomtest

    if n < 1:
        return 1.0, 1.0
    return (float(binomtest(int(k), int(n), share, alternative="greater").pvalue),
            float(binomtest(int(k), int(n), share, alternative="less").pvalue))


def share_bounds(k: int, n: int, confidence: float) -> tuple[float, float]:
    """The two-sided Clopper–Pearson interval of the share of successes at ``confidence`` (each side one-sided at
    (1 − confidence) / 2)."""
    from scipy.stats import binomtest

    if n < 1:
        return 0.0, 1.0
    ci = binomtest(int(k), int(n)).proportion_ci(confidence, method="exact")
    return float(ci.low), float(ci.high)


def share_seeds_to_decide(k: int, n: int, share: float, alpha: float, max_seeds: int) -> tuple[int | None, str]:
    """The fewest seeds N ≥ n at which the observed share k / n would decide: (N, "hold" or "contradict"), N None when
    more than ``max_seeds`` or the observed share equals the claimed one (no lean). At N the successes are the observed
    share's, rounded against the decision (floor to hold, ceil to contradict)."""
    from scipy.stats import binom

    if n < 1 or k / n == share:
        return None, ""
    ns = np.arange(max(n, 1), max_seeds + 1)
    if k / n > share:
        ks = np.floor(k / n * ns + 1e-9)
        p = binom.sf(ks - 1, ns, share)  # P(X ≥ k)
        word = "hold"
    else:
        ks = np.ceil(k / n * ns - 1e-9)
        p = binom.cdf(ks, ns, share)  # P(X ≤ k)
        word = "contradict"
    hit = np.flatnonzero(p < alpha)
    return (int(ns[hit[0]]) if len(hit) else None), word


def ari_step(groups: Sequence[int]) -> float:
    """ARI's step in a setting: the smallest loss of ARI from a perfect partition of the clients into their true
    ``groups`` (one label per client) when one client moves into another group (sklearn's adjusted_rand_score):
    0.40 at 2 groups × 5 clients, 0.068 at 4 × 10, 0.017 at 4 × 40. NaN with fewer than two groups."""
    from sklearn.metrics import adjusted_rand_score

    truth = np.asarray(groups)
    labels, sizes = np.unique(truth, return_counts=True)
    if len(labels) < 2:
        return float("nan")
    steps = []
    seen = set()
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            if i == j or sizes[i] < 2 or (sizes[i], sizes[j]) in seen:
                continue
            seen.add((sizes[i], sizes[j]))
            moved = truth.copy()
            moved[np.flatnonzero(truth == a)[0]] = b
            steps.append(1.0 - float(adjusted_rand_score(truth, moved)))
    return min(steps) if steps else float("nan")


def accuracy_step(n_test: Sequence[int] | int, n_clients: int) -> float:
    """A mean over ``n_clients`` clients of their accuracies: its step is one test answer of one client, 1 / (clients ×
    the largest client's test set ``n_test``). NaN without a test set."""
    largest = int(np.max(np.asarray(n_test))) if np.size(n_test) else 0
    return 1.0 / (int(n_clients) * largest) if largest > 0 and n_clients > 0 else float("nan")


def family_statement(claims: int, sanity: int = 0, rule: str = CURRENT, side_alpha: float = 0.025,
                     staged: int = 0) -> str:
    """The study's claims as a family, said once (issue 67): how many claims it tests and at what level each (``staged``
    of them read in :data:`SEED_STAGES`' stages), and what that means for the family (no correction across claims)."""
    if claims < 1:
        return ""
    how = ("a level on a bounded score by the exact binomial test of its share of seeds, a mean or a paired "
           "difference by the t-test with its standard error floored at the metric's step"
           if rule == SHARE_AND_STEP else "every part by the t-test, its standard error floored at the printed digit")
    expected = claims * side_alpha
    any_one = 1.0 - (1.0 - side_alpha) ** claims
    return (f"This study tests {claims} claim{'s' if claims != 1 else ''}"
            + (f" ({sanity} of them sanity checks)" if sanity else "")
            + f", each at one-sided {side_alpha:.1%} per side ({how}"
            + (f"; {staged} of them read in {STAGES} stages after seeds were added, each stage at "
               f"{side_alpha / STAGES:.2%}" if staged else "")
            + "): a claim holds when every part reaches the "
            f"claim's side at that level (intersection–union) and is contradicted when one part is against it by "
            f"Holm's test over its parts. There is no correction across claims: were every claim false at its "
            f"boundary, about {expected:.1f} would hold by chance, and at least one with probability {any_one:.0%}.")
