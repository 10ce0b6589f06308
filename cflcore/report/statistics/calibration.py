"""The error rates of the decision rules (:mod:`.rules`), measured on null tables shaped like this project's (issue 67):
a bounded, bimodal score, where a seed either hits the bound (ARI 1.00) or misses at a value f, ties at the bound, and
a true value just on the wrong side of the claim. Read by tests/report/test_verdict_calibration.py and drawn by
benchmarks/verdict_power.py (docs/figures/verdict_power.png).

Every verdict here is the report's own (:func:`.verdicts.verdict_word`, the word of :func:`.verdicts.combine`, of one
part under the rule named): a table of the
two-point score is decided by its counts alone (how many seeds hit the bound; for a paired difference, how many seeds
are ahead, behind or tied), since a verdict does not depend on the seeds' order; so the rule is evaluated once per
possible count and the many tables drawn (numpy, vectorised, seeded) are looked up by their counts.
"""
from __future__ import annotations

from functools import cache

import numpy as np

from . import rules
from . import verdicts as vd

LEVEL = 0.9  # the claims' level: "ARI ≥ 0.9"
ARI_DIGIT = vd.SCORE_RESOLUTION


@cache
def _level_words(rule: str, n: int, miss: float, share: float) -> tuple[str, ...]:
    """The verdict of "ARI ≥ :data:`LEVEL`" (in at least ``share`` of seeds, under the share rule; the mean under
    :data:`.rules.DIGIT_FLOOR`) for each k = 0..n seeds at 1.00, the others at ``miss``."""
    words = []
    with rules.using(rule):
        for k in range(n + 1):
            values = [1.0] * k + [miss] * (n - k)
            part = vd.Part(vd.t_interval(values, resolution=ARI_DIGIT), LEVEL, np.inf, share=share)
            words.append(vd.verdict_word({"level": part}))
    return tuple(words)


def level_rates(rule: str, n: int, hit: float, miss: float, share: float = rules.SHARE, reps: int = 20_000,
                seed: int = 0) -> tuple[float, float]:
    """The share of ``reps`` null tables of ``n`` seeds (each at 1.00 with probability ``hit``, else at ``miss``) read
    "holds" and "contradicted" for the level claim under ``rule`` (:func:`_level_words`)."""
    rng = np.random.default_rng(seed)
    k = (rng.random((reps, n)) < hit).sum(axis=1)
    words = np.asarray(_level_words(rule, n, miss, share))[k]
    return float(np.mean(words == vd.HOLDS)), float(np.mean(words == vd.CONTRADICTED))


@cache
def _paired_words(rule: str, n: int, gap: float, step: float) -> dict[tuple[int, int], str]:
    """The verdict of "A above B" (a paired difference) for every count (ahead, behind) of n seeds: a seed's difference
    is +``gap``, −``gap`` or 0 (both at the bound or both missing); the standard error floored at ``step``."""
    words = {}
    with rules.using(rule):
        for ahead in range(n + 1):
            for behind in range(n + 1 - ahead):
                values = [gap] * ahead + [-gap] * behind + [0.0] * (n - ahead - behind)
                d = vd.t_interval(values, "paired seeds", ARI_DIGIT, step)
                words[(ahead, behind)] = vd.verdict_word({"A above B": vd.Part(d, 0.0, np.inf, True)})
    return words


def paired_rates(rule: str, n: int, hit: float, miss: float, step: float, reps: int = 20_000,
                 seed: int = 0) -> tuple[float, float]:
    """The share of ``reps`` null tables read "holds" and "contradicted" for "A above B" where A and B are the same
    two-point score (1.00 with probability ``hit``, else ``miss``; true difference 0, so either verdict is wrong),
    paired by seed, under ``rule`` with ARI's step ``step`` in the setting."""
    rng = np.random.default_rng(seed)
    a, b = rng.random((reps, n)) < hit, rng.random((reps, n)) < hit
    ahead, behind = (a & ~b).sum(axis=1), (b & ~a).sum(axis=1)
    table = _paired_words(rule, n, 1.0 - miss, step)
    lookup = np.empty((n + 1, n + 1), dtype=object)
    for (i, j), word in table.items():
        lookup[i, j] = word
    words = lookup[ahead, behind]
    return float(np.mean(words == vd.HOLDS)), float(np.mean(words == vd.CONTRADICTED))


def bound(nominal: float, reps: int) -> float:
    """The largest rate a rule of level ``nominal`` may show on ``reps`` tables: nominal plus three Monte Carlo
    standard errors."""
    return nominal + 3.0 * float(np.sqrt(nominal * (1.0 - nominal) / reps))
