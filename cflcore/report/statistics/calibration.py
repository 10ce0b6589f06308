"""The error rates of the decision rules (:mod:`.rules`), measured on null tables shaped like this project's (issue 67):
a bounded, bimodal score, where a seed either hits the bound (ARI 1.00) or misses at a value f, ties at the bound, and
a true value just on the wrong side of the claim. Read by tests/report/test_verdict_calibration.py and drawn by
benchmarks/verdict_power.py (docs/figures/verdict_power.png).

Every verdict here is the report's own (:func:`.verdicts.verdict_word`, the word of :func:`.verdicts.combine`, of one
part under the rule named): a table of the
two-point score is decided by its counts alone (how many seeds hit the bound; for a paired difference, how many seeds
are ahead, behind or tied), since a verdict does not depend on the seeds' order; so the rule is evaluated once per
possible count and the many tables drawn (numpy, vectorised, seeded) are looked up by their counts. A claim read in two
stages (:data:`.rules.SEED_STAGES`) is looked up twice, by the first stage's counts (its first n1 seeds) at the first
stage's level and by all the seeds' at the second's, and takes the first word where it decides
(:func:`.stages.staged_words`, the report's :func:`.stages.read_in_stages` on many tables at once).
"""
from __future__ import annotations

import contextlib
from functools import cache

import numpy as np

from . import rules
from . import verdicts as vd
from .stages import stage_levels, staged_words

LEVEL = 0.9  # the claims' level: "ARI ≥ 0.9"
ARI_DIGIT = vd.SCORE_RESOLUTION


def _at(level: float | None):
    """The parts' one-sided level: a stage's (:func:`.rules.at_level`), or the rule's own where ``level`` is None."""
    return rules.at_level(level) if level is not None else contextlib.nullcontext()


@cache
def _level_words(rule: str, n: int, miss: float, share: float, level: float | None = None) -> tuple[str, ...]:
    """The verdict of "ARI ≥ :data:`LEVEL`" (in at least ``share`` of seeds, under the share rule; the mean under
    :data:`.rules.DIGIT_FLOOR`) for each k = 0..n seeds at 1.00, the others at ``miss``; at one-sided ``level``."""
    words = []
    with rules.using(rule), _at(level):
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
    return _rates(np.asarray(_level_words(rule, n, miss, share))[k])


@cache
def _paired_words(rule: str, n: int, gap: float, step: float, level: float | None = None) -> np.ndarray:
    """The verdict of "A above B" (a paired difference) for every count (ahead, behind) of n seeds, as an array indexed
    by them: a seed's difference is +``gap``, −``gap`` or 0 (both at the bound or both missing); the standard error
    floored at ``step``; at one-sided ``level``."""
    words = np.full((n + 1, n + 1), "", dtype=object)
    with rules.using(rule), _at(level):
        for ahead in range(n + 1):
            for behind in range(n + 1 - ahead):
                values = [gap] * ahead + [-gap] * behind + [0.0] * (n - ahead - behind)
                d = vd.t_interval(values, "paired seeds", ARI_DIGIT, step)
                words[ahead, behind] = vd.verdict_word({"A above B": vd.Part(d, 0.0, np.inf, True)})
    return words


def paired_rates(rule: str, n: int, hit: float, miss: float, step: float, reps: int = 20_000,
                 seed: int = 0) -> tuple[float, float]:
    """The share of ``reps`` null tables read "holds" and "contradicted" for "A above B" where A and B are the same
    two-point score (1.00 with probability ``hit``, else ``miss``; true difference 0, so either verdict is wrong),
    paired by seed, under ``rule`` with ARI's step ``step`` in the setting."""
    rng = np.random.default_rng(seed)
    a, b = rng.random((reps, n)) < hit, rng.random((reps, n)) < hit
    ahead, behind = (a & ~b).sum(axis=1), (b & ~a).sum(axis=1)
    return _rates(_paired_words(rule, n, 1.0 - miss, step)[ahead, behind])


def _rates(words: np.ndarray) -> tuple[float, float]:
    """The shares of ``words`` that are "holds" and "contradicted"."""
    return float(np.mean(words == vd.HOLDS)), float(np.mean(words == vd.CONTRADICTED))


def staged_level_rates(stages: tuple[int, int], hit: float, miss: float, share: float = rules.SHARE,
                       levels: tuple[float, ...] = stage_levels(), reps: int = 20_000,
                       seed: int = 0) -> tuple[float, float]:
    """:func:`level_rates` for the claim read in two stages (:data:`.rules.SEED_STAGES`, cflcore.report.statistics.stages):
    the first ``stages[0]`` seeds of each table at ``levels[0]``, and where that is not decided, all ``stages[1]`` at
    ``levels[1]`` (the rule's: Bonferroni's halves; a naive second look: the full level at both)."""
    (n1, n), rng = stages, np.random.default_rng(seed)
    hits = rng.random((reps, n)) < hit
    first = np.asarray(_level_words(rules.SEED_STAGES, n1, miss, share, levels[0]))[hits[:, :n1].sum(axis=1)]
    last = np.asarray(_level_words(rules.SEED_STAGES, n, miss, share, levels[1]))[hits.sum(axis=1)]
    return _rates(staged_words(first, last))


def staged_paired_rates(stages: tuple[int, int], hit: float, miss: float, step: float,
                        levels: tuple[float, ...] = stage_levels(), reps: int = 20_000,
                        seed: int = 0) -> tuple[float, float]:
    """:func:`paired_rates` for the claim read in two stages (:func:`staged_level_rates`)."""
    (n1, n), rng = stages, np.random.default_rng(seed)
    a, b = rng.random((reps, n)) < hit, rng.random((reps, n)) < hit
    ahead, behind = a & ~b, b & ~a
    first = _paired_words(rules.SEED_STAGES, n1, 1.0 - miss, step, levels[0])[
        ahead[:, :n1].sum(axis=1), behind[:, :n1].sum(axis=1)]
    last = _paired_words(rules.SEED_STAGES, n, 1.0 - miss, step, levels[1])[ahead.sum(axis=1), behind.sum(axis=1)]
    return _rates(staged_words(first, last))


def bound(nominal: float, reps: int) -> float:
    """The largest rate a rule of level ``nominal`` may show on ``reps`` tables: nominal plus three Monte Carlo
    standard errors."""
    return nominal + 3.0 * float(np.sqrt(nominal * (1.0 - nominal) / reps))
