"""Synthetic tables for the paper-check tests: a seed jitter that is exactly zero-mean per cell, so a cell's mean
over the seeds is the planted value and any two cells' paired differences vary from seed to seed (a noise the
check must estimate), and the three tables every claim is fed (tests/report/test_claims_*_verdicts.py):

* true with noise: every claim holds beyond the noise;
* false beyond the noise (``delta`` = :data:`BEYOND`): the claim is contradicted;
* false within the noise (``delta`` = :data:`WITHIN`): inconclusive, leaning against the paper."""
import numpy as np

SEEDS = tuple(range(18))
"""18 seeds: enough for t-intervals of a few points, and for a level claim ("in at least 80 % of seeds", the exact
binomial test of cflcore.report.statistics.rules) to hold when every seed reaches it (0.8^17 < 0.025)."""
BEYOND, WITHIN = 0.2, 0.0015
"""How far a false table moves the claim's compared value past the claim, in the claim's units."""
_Z = np.linspace(-1.0, 1.0, len(SEEDS))  # mean exactly 0, sd 0.68


def noise(seed: int, index: int, size: float = 0.02) -> float:
    """Cell ``index``'s jitter for ``seed``: ``size`` × a per-cell permutation of evenly spaced values in [−1, 1], so
    every cell's jitter sums to 0 over :data:`SEEDS` and two cells' jitters differ seed by seed."""
    order = np.random.default_rng([7, index]).permutation(len(SEEDS))
    return float(size * _Z[order[SEEDS.index(seed)]])
