"""The report's statistics: the verdict framework every paper check uses (one convention, imported by the papers,
:mod:`cflcore.report.papers`, and the cross-paper comparison).

A claim is made of parts (:class:`Part`): a per-seed value, or a per-seed *paired* difference (the runs of one seed
of one federation, :data:`PAIR_KEYS`, pair across cells; seeds that do not pair are named in the row), claimed to lie
in a range (above 0; at or above a level; within ± a margin for "comparable", an equivalence test). A part takes the
test of its kind (:func:`assess`, under the decision rule in force, :mod:`.rules`): a level on a bounded, discrete
score (:func:`threshold`) is a share of seeds, "in at least :data:`.rules.SHARE` of seeds", decided by the exact
binomial test; any other part takes the one-sample t-test of the per-seed values, one-sided at
(1 − :data:`CONFIDENCE`) / 2, with the standard error of the mean floored at the metric's step in the setting
(:func:`step_of`; the printed digit, :data:`RESOLUTION`, where the runs carry no step, and under the earlier rule).
Their error rates are measured in tests/report/test_verdict_calibration.py (:mod:`.calibration`). Multiplicity
(:func:`combine`): a claim holds when every part holds (an intersection–union test, no correction needed) and is
contradicted when one part is against it by Holm's step-down test over its parts.

The verdicts (:data:`VERDICTS`): ``holds`` (every part beyond the seed noise on the paper's side), ``contradicted``
(some part beyond the noise on the other side), ``inconclusive`` (neither), ``n/a`` (nothing measured); the leans
(:data:`LEANS`): where the numbers lean, ``toward`` the paper, ``against`` it or ``none``. A score over seeds is
summarised by :mod:`cflcore.report.statistics.seed_stats`; ranks and critical differences over methods are
:mod:`cflcore.report.statistics.cd`'s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from . import rules
from .rules import DIGIT_FLOOR, MIN_T_SEEDS, SHARE, STEP_COLUMNS
from .seed_stats import K_OF_N_METRICS, SeedSummary, summarise


ACCURACY = "orch_acc"  # each client's own model on the balanced held-out set
HOLDS, CONTRADICTED, INCONCLUSIVE, NA = "holds", "contradicted", "inconclusive", "n/a"
VERDICTS = (HOLDS, CONTRADICTED, INCONCLUSIVE, NA)

BOUNDED = {"ari": 1.0, ACCURACY: 1.0, "local_acc": 1.0, "global_orch_acc": 1.0, "global_acc": 1.0, "silhouette": 1.0,
           "silhouette_method": 1.0, "silhouette_authors": 1.0, "rand": 1.0, "labels_only_ari": 1.0}
"""Scores with an upper bound: two cells both at it on every seed are a saturated tie (inconclusive, more seeds cannot
order them: the row's reason says "saturated")."""
SCORE_RESOLUTION = 1e-3
"""The resolution of a score in [−1, 1] (ARI, Rand, accuracies, silhouettes, WAS): the finest digit the report reads
of it (a claim's difference is printed to three decimals, e.g. Δ +0.143)."""
COUNT_RESOLUTION = 0.1
"""The resolution of a mean of counts (clusters, rounds): the report prints them to one decimal."""
RESOLUTION = {"n_clusters": COUNT_RESOLUTION, "clustering_round": COUNT_RESOLUTION,
              "first_clustering_round": COUNT_RESOLUTION, "raw": COUNT_RESOLUTION, "normalised": COUNT_RESOLUTION}
"""Per metric, its resolution where it is not :data:`SCORE_RESOLUTION` (:func:`resolution_of`): two values closer
than it are not told apart, and the standard error of a mean is never taken below it (:func:`assess`)."""
COMPARABLE_ACC = 0.02  # "comparable" / "not notably" accuracy: a difference whose interval lies within ± 2 points
CONFIDENCE = 0.95  # two-sided intervals over seeds: each side of a part is tested at (1 − CONFIDENCE) / 2
SIDE_ALPHA = (1 - CONFIDENCE) / 2  # a stage of a claim read in stages tests at its share of it (rules.level, .stages)
PAIR_KEYS = ("dataset", "clients", "seed")  # runs of one seed of one federation pair across cells
MAX_SEEDS = 1000  # the seed count search of :func:`seeds_needed` stops here ("more than 1000")
TOWARD, AGAINST, NONE = "toward", "against", "none"
LEANS = (TOWARD, AGAINST, NONE)
EVIDENCE, SANITY = "evidence", "sanity"
"""A row's ``kind``: evidence for or against the paper, or a sanity check (the study's design makes the claim true
whatever the method does, e.g. a baseline that only reads the clients' label histograms satisfies it too)."""


@dataclass(frozen=True)
class Cell:
    """A score over seeds of one cell (cflcore.report.statistics.seed_stats: mean, sample std, NaN with one seed, seeds); ARI
    cells (``counts``) print the seeds that found the groups beside it ("3 of 6 ≥ 0.9")."""

    mean: float
    sd: float
    n: int
    found: int = 0
    missed: int = 0
    counts: bool = False

    def text(self, digits: int = 2) -> str:
        return SeedSummary(self.mean, self.sd, self.n, self.found, self.missed).text(digits, k_of_n=self.counts)


def cell(runs: pd.DataFrame, metric: str) -> Cell:
    s = summarise(per_seed(runs, metric).to_numpy(dtype=np.float64))
    return Cell(s.mean, s.std, s.n, s.found, s.missed, metric in K_OF_N_METRICS)


def per_seed(runs: pd.DataFrame, metric: str, keys: Sequence[str] = PAIR_KEYS) -> pd.Series:
    """``metric`` per seed (``keys``, default :data:`PAIR_KEYS`; a mean where a seed has several runs), NaNs
    dropped."""
    if runs is None or not len(runs) or metric not in runs:
        return pd.Series(dtype=np.float64)
    keys = [k for k in keys if k in runs]
    values = runs.assign(_v=pd.to_numeric(runs[metric], errors="coerce")).dropna(subset=["_v"])
    if not len(values):
        return pd.Series(dtype=np.float64)
    return values.groupby(keys)["_v"].mean() if keys else values["_v"].reset_index(drop=True)


def resolution_of(metric: str | None) -> float:
    """``metric``'s resolution (:data:`RESOLUTION`, else :data:`SCORE_RESOLUTION`)."""
    return RESOLUTION.get(metric or "", SCORE_RESOLUTION)


def at_bound(values: Sequence[float], metric: str | None) -> bool:
    """Whether some value reaches ``metric``'s bound (:data:`BOUNDED`, within its resolution): a difference of two
    such cells that ties on every seed is "saturated", not an exact tie (the test is the same, :func:`assess`)."""
    bound = BOUNDED.get(metric or "")
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if bound is None or not len(v):
        return False
    return bool(np.any(v >= bound - resolution_of(metric)))


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided :data:`CONFIDENCE` t-interval over seeds (its standard error floored at
    ``resolution``, the test of :func:`assess`); ``n`` seeds (pairs when ``paired``). One seed gives an infinite
    interval: no noise estimate, nothing can be told. ``values`` are the per-seed values (or paired differences) it
    rests on, ``unpaired`` the seeds of either cell that found no pair."""

    mean: float
    lo: float
    hi: float
    n: int
    how: str = "seeds"  # "seeds" (one cell), "paired seeds" (per-seed differences), "seeds, unpaired" (Welch)
    values: tuple = ()
    unpaired: str = ""
    bounded: bool = False  # a value (or a compared cell) reaches its metric's bound
    resolution: float = SCORE_RESOLUTION  # the metric's printed digit: the floor of the standard error until issue 67
    step: float = float("nan")  # the metric's real step in the setting (rules.STEP_COLUMNS): the floor since

    @property
    def floor(self) -> float:
        """The floor of the standard error under the rule in force (:mod:`.rules`): the metric's step in the setting
        where known, else its printed digit; the printed digit under :data:`.rules.DIGIT_FLOOR`."""
        if rules.current() == DIGIT_FLOOR or not np.isfinite(self.step):
            return self.resolution
        return float(self.step) / np.sqrt(max(int(self.n), 1))  # a per-seed spread of at least one step

    def text(self, digits: int = 2, signed: bool = True) -> str:
        if not np.isfinite(self.mean):
            return "–"
        f = (lambda v: f"{v:+.{digits}f}") if signed else (lambda v: f"{v:.{digits}f}")
        ci = f"[{f(self.lo)}, {f(self.hi)}]" if np.isfinite(self.lo) and np.isfinite(self.hi) else "[no interval]"
        return f"{f(self.mean)} {ci} ({self.n} {self.how}{'; ' + self.unpaired if self.unpaired else ''})"


def standard_error(sd: float, n: int, resolution: float) -> float:
    """The standard error of a mean of ``n`` values of sample std ``sd``, floored at ``resolution``: a mean is not
    known more finely than its values are (:func:`assess`)."""
    return max(float(sd) / np.sqrt(n), float(resolution))


def step_of(runs: pd.DataFrame | None, metric: str | None) -> float:
    """``metric``'s real step in the setting of ``runs`` (:data:`.rules.STEP_COLUMNS`, the finest over the runs); NaN
    where the runs do not carry it."""
    column = STEP_COLUMNS.get(metric or "")
    if runs is None or not len(runs) or column is None or column not in runs:
        return float("nan")
    values = pd.to_numeric(runs[column], errors="coerce").dropna()
    return float(values.min()) if len(values) else float("nan")


def t_interval(values: Sequence[float], how: str = "seeds", resolution: float = SCORE_RESOLUTION,
               step: float = float("nan")) -> Interval:
    """One-sample t-interval of the mean of ``values`` (per-seed scores or per-seed paired differences), its standard
    error floored at the rule's floor (:attr:`Interval.floor`: ``step / √n`` where the step is known, else
    ``resolution``)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return Interval(float("nan"), float("nan"), float("nan"), 0, how, resolution=resolution, step=step)
    mean = float(v.mean())
    if len(v) < 2:
        return Interval(mean, -np.inf, np.inf, 1, how, tuple(v), resolution=resolution, step=step)
    floor = Interval(mean, 0.0, 0.0, len(v), resolution=resolution, step=step).floor
    half = float(t.ppf(0.5 + CONFIDENCE / 2, len(v) - 1) * standard_error(v.std(ddof=1), len(v), floor))
    return Interval(mean, mean - half, mean + half, len(v), how, tuple(v), resolution=resolution, step=step)


def _seed_names(index: pd.Index) -> str:
    return ", ".join(str(k[-1] if isinstance(k, tuple) else k) for k in index)


def difference(a: pd.DataFrame, b: pd.DataFrame, metric: str, metric_b: str | None = None,
               keys: Sequence[str] = PAIR_KEYS) -> Interval:
    """``metric`` of runs ``a`` minus ``metric_b`` (default: the same) of runs ``b``: the t-interval of the per-seed
    paired differences where at least two seeds pair (same ``keys``: dataset, clients and seed), else Welch's
    interval of the difference of the two cells' means (unpaired; one seed on either side gives no interval).
    Seeds of either cell without a pair are named in ``unpaired`` (count and seeds), never dropped silently."""
    from scipy.stats import t

    mb = metric_b or metric
    sa, sb = per_seed(a, metric, keys), per_seed(b, mb, keys)
    common = sa.index.intersection(sb.index)
    only_a, only_b = sa.index.difference(common), sb.index.difference(common)
    unpaired = ""
    if len(common) and (len(only_a) or len(only_b)):
        unpaired = (f"{len(only_a) + len(only_b)} seeds unpaired, left out: "
                    + "; ".join(f"{side} only: {_seed_names(ix)}" for side, ix in (("first", only_a), ("second", only_b))
                                if len(ix)))
    bounded = at_bound(sa.to_numpy(), metric) or at_bound(sb.to_numpy(), mb)
    res = max(resolution_of(metric), resolution_of(mb))
    steps = [x for x in (step_of(a, metric), step_of(b, mb)) if np.isfinite(x)]
    step = max(steps) if steps else float("nan")
    if len(common) >= 2:
        d = t_interval((sa[common] - sb[common]).to_numpy(), "paired seeds", res, step)
        return Interval(d.mean, d.lo, d.hi, d.n, d.how, d.values, unpaired, bounded, res, step)
    if not len(sa) or not len(sb):
        return Interval(float("nan"), float("nan"), float("nan"), 0, resolution=res, step=step)
    mean = float(sa.mean() - sb.mean())
    n = min(len(sa), len(sb))
    if len(sa) < 2 or len(sb) < 2:
        return Interval(mean, -np.inf, np.inf, n, "seeds, unpaired", bounded=bounded, resolution=res, step=step)
    va, vb = sa.var(ddof=1) / len(sa), sb.var(ddof=1) / len(sb)
    # the floor of each side's standard error, added as the variances are (one step's spread on each side)
    floor_a, floor_b = (Interval(mean, 0.0, 0.0, len(x), resolution=res, step=step).floor for x in (sa, sb))
    stepped = rules.current() != DIGIT_FLOOR and np.isfinite(step)
    se = max(float(np.sqrt(va + vb)), float(np.hypot(floor_a, floor_b)) if stepped else floor_a)
    dof = (va + vb) ** 2 / (va ** 2 / (len(sa) - 1) + vb ** 2 / (len(sb) - 1)) if va + vb > 0 else 1.0
    half = float(t.ppf(0.5 + CONFIDENCE / 2, dof) * se)
    return Interval(mean, mean - half, mean + half, n, "seeds, unpaired", bounded=bounded, resolution=res, step=step)


# ---- parts of a claim: the tests ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    """One part of a claim: the mean of ``d.values`` (per-seed values, or per-seed paired differences) is claimed
    to lie in [``lo``, ``hi``] (``strict``: above ``lo`` strictly, a claimed difference, where an exact 0 is a
    tie). :func:`assess` tests it; ``status`` fixes a part the claim decides itself (``missing``; an event count's
    ``no``). ``share``: a level claim on a bounded, discrete score, read under :data:`.rules.SHARE_AND_STEP` as "a
    seed's value lies in [lo, hi] in at least this share of seeds" (the exact binomial test); under the earlier rule
    its mean is tested as any other part's."""

    d: Interval
    lo: float = -np.inf
    hi: float = np.inf
    strict: bool = False
    status: str = ""
    share: float | None = None


@dataclass(frozen=True)
class Assessment:
    """A part's test: ``p_toward`` (one-sided p that the claim's side is not reached), ``p_against`` (that the
    other side is not), the test's name and counts, ``lean`` and, for a part that cannot decide, ``why`` (one of
    :data:`REASONS`' keys)."""

    p_toward: float
    p_against: float
    test: str
    lean: str
    why: str = ""  # "", "noise", "exact", "saturated", "one seed", "few seeds", "missing"
    n: int = 0
    mean: float = float("nan")
    sd: float = float("nan")
    k: int = -1  # a share part: the seeds whose value lies in the claimed range

    @property
    def toward(self) -> bool:
        """The part reaches the claim's side beyond the seed noise (one-sided at :data:`SIDE_ALPHA`, or its stage's)."""
        return self.p_toward < rules.level(SIDE_ALPHA)


REASONS = {"noise": "within the seed noise", "exact": "no difference (every seed within the metric's resolution: more "
           "seeds cannot change it)", "saturated": "saturated (every seed at the metric's bound: the metric cannot order them)",
           "one seed": "one seed (no noise estimate)", "few seeds": "too few seeds for a t decision at the part's "
           f"level ({MIN_T_SEEDS} at one-sided 2.5 %, more at a stage's: rules.min_t_seeds)", "missing": "a part not measured"}


BLOCKERS = {"exact": "an exact tie (no difference at the metric's resolution)", "saturated": "a part saturated at the bound",
            "one seed": "a part rests on one seed", "missing": "a part is not measured"}
"""Why more seeds cannot decide a row (the ``seeds_to_decide`` column)."""


def _t_p(mean: float, se: float, dof: int, lo: float, hi: float) -> tuple[float, float]:
    """One-sided t p-values of a mean with standard error ``se`` against [lo, hi]: (that the claim's side is not
    reached, the largest over the finite ends; that the other side is not, the smallest)."""
    from scipy.stats import t

    toward, against = [], []
    for end, sign in ((lo, 1.0), (hi, -1.0)):
        if np.isfinite(end):
            stat = sign * (mean - end) / se
            toward.append(float(t.sf(stat, dof)))
            against.append(float(t.cdf(stat, dof)))
    return max(toward), min(against)


def t_statistics(part: Part) -> list[float]:
    """The part's t statistic against each finite end (toward the claim's side positive), its standard error floored
    at the resolution (:func:`standard_error`); [] without two finite values."""
    v = np.asarray(part.d.values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return []
    se = standard_error(v.std(ddof=1), len(v), part.d.floor)
    return [sign * (float(v.mean()) - end) / se for end, sign in ((part.lo, 1.0), (part.hi, -1.0)) if np.isfinite(end)]


def within_resolution(part: Part) -> bool:
    """Every value closer to one end of the part's range than the metric's resolution: an exact tie at the metric's
    resolution (a difference of 0, or a level sitting on the claim's end), which no number of seeds can decide."""
    v = np.asarray(part.d.values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return False
    h = part.d.resolution  # the printed digit: an exact tie is one at the digit, whatever the floor of the test
    return any(np.isfinite(end) and bool(np.all(np.abs(v - end) < h)) for end in (part.lo, part.hi))


def assess(part: Part) -> Assessment:
    """Test one part: the one-sample t-test of its per-seed values (or paired differences) against each finite end of
    its range, one-sided, with the standard error of the mean floored at the metric's resolution h
    (:data:`RESOLUTION`; :func:`standard_error`): se = max(s / √n, h).

    Why one family, and this one. The test must not depend on the data: the earlier rule (the sign test where every
    seed agreed or a value reached its bound, else the t-test) read ARI (0, 0, 0) as inconclusive (3 of 3 seeds: sign
    p 0.125) and (0, 0.01, 0) as contradicted (t p < 1e-5), a jump between an exact tie and a near tie. The t-test
    is kept for every part because it is the test the report's intervals already show (the t-interval), it has power
    on the three seeds the cross-paper study runs, where an exact sign test cannot reject at all (1/8 > 0.025), and it
    is the test Demšar (2006, JMLR 7, §3.1.2) describes for paired comparisons, with the caveats he names (normality,
    commensurability) stated in the row's numbers. Its one discontinuity, a zero standard error on tied seeds, is
    removed by the floor: a value is read only to its resolution (JCGM 100:2008, the GUM, F.2.2.1: the resolution of an
    indication bounds what can be known of the quantity), so the mean's standard error is taken no smaller than h
    (conservative: the GUM's rectangular reading would give h/√12 for one value). Two consequences, tested in
    tests/report/test_claims_continuity.py: (i) values all within h of a claim's end give |t| < 1, never a verdict,
    however many seeds (the row's reason: "no difference" or "saturated"); (ii) moving the values of an exact tie by
    less than h moves its t statistic by less than 1, so an exact tie and its near ties get the same verdict unless
    the tie itself lies within one standard error of the critical value, where every test must flip somewhere.

    A part with one seed cannot tell ("one seed"); a part whose seeds do not pair takes Welch's interval (its own
    standard error, floored alike).

    Issue 67 (:data:`.rules.SHARE_AND_STEP`, the rule in force unless :func:`.rules.using` says otherwise): the floor
    above, the printed digit, removed the t-test's only guard, the observed spread, exactly where a bounded score ties
    at its bound (ARI [1.00, 1.00] against "≥ 0.9": t = 100), and false "holds" ran far above 2.5 %
    (tests/report/test_verdict_calibration.py). Now a part with a ``share`` (a level claim on a bounded, discrete
    score) is the exact binomial test of the seeds in range (:func:`.rules.share_test`), whatever their values; any
    other part keeps the t-test, its per-seed spread floored at the metric's real step in the setting (standard error
    at least step / √n, :attr:`Interval.floor`), and
    decides from :data:`.rules.MIN_T_SEEDS` seeds on (:func:`.rules.min_t_seeds` at a stage's level; "few seeds")."""
    from scipy.stats import t

    d = part.d
    v = np.asarray(d.values, dtype=np.float64)
    v = v[np.isfinite(v)] if len(v) else v
    if part.status:
        lean = {"yes": TOWARD, "no": AGAINST}.get(part.status, NONE)
        return Assessment(float(part.status != "yes"), float(part.status != "no"), "fixed", lean,
                          "missing" if part.status == "missing" else "", len(v), d.mean)
    if not np.isfinite(d.mean):
        return Assessment(1.0, 1.0, "–", NONE, "missing")
    mean = float(d.mean)
    inside = (mean > part.lo if part.strict else mean >= part.lo) and mean <= part.hi
    on_end = mean in (part.lo, part.hi)
    lean = NONE if on_end else TOWARD if inside else AGAINST
    if part.share is not None and rules.current() != DIGIT_FLOOR and len(v):
        return _assess_share(part, v)
    if len(v) < 2:
        if d.how == "seeds, unpaired" and np.isfinite(d.lo) and np.isfinite(d.hi):  # Welch's interval, no values
            se = max((d.hi - d.lo) / 2 / float(t.ppf(0.5 + CONFIDENCE / 2, max(d.n - 1, 1))), d.floor)
            return Assessment(*_t_p(mean, se, max(d.n - 1, 1), part.lo, part.hi), "Welch", lean, "noise", d.n, mean)
        return Assessment(1.0, 1.0, "–", lean, "one seed", len(v), mean)
    sd = float(v.std(ddof=1))
    p_toward, p_against = _t_p(mean, standard_error(sd, len(v), d.floor), len(v) - 1, part.lo, part.hi)
    if within_resolution(part):  # an exact tie at the resolution: |t| < 1, and more seeds cannot change it
        why = "saturated" if d.bounded else "exact"
        return Assessment(p_toward, p_against, "t", NONE, why, len(v), mean, sd)
    if len(v) < rules.min_t_seeds(rules.level(SIDE_ALPHA)) and rules.current() != DIGIT_FLOOR:
        return Assessment(1.0, 1.0, "t", lean, "few seeds", len(v), mean, sd)
    return Assessment(p_toward, p_against, "t", lean, "", len(v), mean, sd)


def in_range(part: Part, values: np.ndarray) -> np.ndarray:
    """Which per-seed ``values`` lie in the part's claimed range (above ``lo`` strictly where ``strict``)."""
    above_lo = values > part.lo if part.strict else values >= part.lo
    return above_lo & (values <= part.hi)


def _assess_share(part: Part, v: np.ndarray) -> Assessment:
    """A share part: k of the n seeds in range against the claimed share (:func:`.rules.share_test`); the lean is
    the observed share's side of it."""
    k, n, share = int(in_range(part, v).sum()), len(v), float(part.share or 0.0)
    p_toward, p_against = rules.share_test(k, n, share)
    lean = TOWARD if k / n > share else AGAINST if k / n < share else NONE
    return Assessment(p_toward, p_against, "binomial", lean, "", n, float(v.mean()), float(v.std(ddof=1)) if n > 1
                      else float("nan"), k)


def seeds_needed(a: Assessment, part: Part, alpha: float) -> int | None:
    """The fewest seeds at which the part, keeping its observed mean and spread, would decide in the direction it
    leans at one-sided level ``alpha`` (the t-test of :func:`assess`, its standard error floored at the resolution);
    None when more than :data:`MAX_SEEDS` (or never: a tie at the resolution, no spread estimate)."""
    if a.test == "binomial":
        return rules.share_seeds_to_decide(a.k, a.n, float(part.share or 0.0), alpha, MAX_SEEDS)[0]
    if a.lean == NONE or a.why in ("exact", "saturated", "missing", "one seed") or a.n < 2 or a.test != "t":
        return None
    if not (a.sd > 0) and rules.current() != DIGIT_FLOOR:
        return None  # a zero spread is not extrapolated (issue 67: [0.91, 0.91] said "3 (to hold)")
    for n in range(max(a.n, rules.min_t_seeds(rules.level(SIDE_ALPHA)) if rules.current() != DIGIT_FLOOR else 2),
                   MAX_SEEDS + 1):
        p_toward, p_against = _t_p(a.mean, standard_error(a.sd, n, part.d.floor), n - 1, part.lo, part.hi)
        if (p_toward if a.lean == TOWARD else p_against) < alpha:
            return n
    return None


NO_SPREAD = "unknown: the seeds show no spread (a zero spread is not extrapolated)"


def _no_spread(a: Assessment) -> bool:
    """A t-part whose seeds all show the same value under the rule in force: :func:`seeds_needed` does not extrapolate
    it (issue 67)."""
    return a.test == "t" and a.n >= 2 and not (a.sd > 0) and not a.why and rules.current() != DIGIT_FLOOR \
        or a.test == "t" and a.why == "few seeds" and not (a.sd > 0)


def _holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down rejections of ``p_values`` at family level ``alpha``."""
    order = np.argsort(p_values, kind="stable")
    reject = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] >= alpha / (len(p_values) - rank):
            break
        reject[i] = True
    return reject


def as_part(status: str | Part) -> Part:
    """A claim's part given as a status word the claim decided itself: ``missing``, ``no`` or ``yes``."""
    if isinstance(status, Part):
        return status
    if status not in ("missing", "no", "yes"):
        raise ValueError(f"a part's fixed status {status!r}; allowed: missing, no, yes")
    return Part(Interval(float("nan"), float("nan"), float("nan"), 0), status=status)


def comparison(label: str, d: Interval, status: str | Part = "", digits: int = 2, lo: float = 0.0,
               hi: float = np.inf, strict: bool = True) -> tuple[str, Part]:
    """A part of a claim: its label with the measured interval, and the test (by default: ``d`` above 0; a
    ``status`` word fixes it)."""
    if isinstance(status, Part):
        return f"{label}: Δ {d.text(digits)}", status
    return f"{label}: Δ {d.text(digits)}", Part(d, lo, hi, strict, status if status in ("missing", "no", "yes") else "")


def greater(label: str, a: pd.DataFrame, b: pd.DataFrame, metric: str, digits: int = 2,
            keys: Sequence[str] = PAIR_KEYS) -> tuple[str, Part]:
    """``a`` above ``b`` on ``metric`` (paired per seed over ``keys``)."""
    d = difference(a, b, metric, keys=keys)
    return comparison(label, d, digits=digits)


def comparable(label: str, a: pd.DataFrame, b: pd.DataFrame, metric: str, margin: float = COMPARABLE_ACC,
               digits: int = 3, keys: Sequence[str] = PAIR_KEYS) -> tuple[str, Part]:
    """``a`` comparable to ``b``: the paired difference's mean within ± ``margin`` (an equivalence test, TOST)."""
    d = difference(a, b, metric, keys=keys)
    return comparison(f"{label} (within ± {margin:g})", d, digits=digits, lo=-margin, hi=margin, strict=False)


def threshold(label: str, runs: pd.DataFrame, metric: str, lo: float = -np.inf, hi: float = np.inf,
              share: float | None = SHARE) -> tuple[str, Part]:
    """A level claim on ``metric``: a seed's value within [lo, hi] in at least ``share`` of the seeds (:func:`assess`:
    the exact binomial test of the seeds in range; the earlier rule tested the cell's mean, its t-interval). The label
    says k of n seeds in range, and the claimed share. ``share`` None: a claim on the mean (a count, not a bounded
    score), its t-interval against [lo, hi]."""
    values = per_seed(runs, metric).to_numpy()
    v = t_interval(values, resolution=resolution_of(metric), step=step_of(runs, metric))
    v = Interval(v.mean, v.lo, v.hi, v.n, v.how, v.values, bounded=at_bound(values, metric), resolution=v.resolution,
                 step=v.step)
    part = Part(v, lo, hi, share=share)
    if rules.current() == DIGIT_FLOOR or share is None:
        return f"{label}: {v.text(2, signed=False)}", part
    k = int(in_range(part, np.asarray(v.values, dtype=np.float64)).sum())
    return f"{label} in ≥ {share:.0%} of seeds: {k} of {v.n} seeds; mean {v.text(2, signed=False)}", part


def above(d: Interval) -> str:
    """A claimed positive difference at the interval's level: ``yes`` (the interval above 0), ``no`` (below 0),
    ``tie`` (the interval holds 0), ``missing`` (for tables that report an interval, e.g. the ablations)."""
    if not np.isfinite(d.mean):
        return "missing"
    return "yes" if d.lo > 0 else "no" if d.hi < 0 else "tie"


def within(d: Interval, lo: float, hi: float) -> str:
    """A claimed value (or difference) within [lo, hi] at the interval's level: ``yes`` (the interval inside),
    ``no`` (wholly outside), ``tie`` (it straddles a bound), ``missing``."""
    if not np.isfinite(d.mean):
        return "missing"
    if d.lo >= lo and d.hi <= hi:
        return "yes"
    return "no" if d.hi < lo or d.lo > hi else "tie"


@dataclass(frozen=True)
class Decision:
    word: str  # a verdict of VERDICTS
    lean: str  # of LEANS
    reason: str  # in words, for every row
    seeds_to_decide: str  # inconclusive rows: the seeds that would decide at the observed effect and spread
    note: str  # every part with its numbers and test


def _statuses(measured: Sequence[tuple[str, Part, Assessment]], missing: bool) -> tuple[dict[str, str], str]:
    """Each measured part's status (``no``: against by Holm; ``yes``: on the claim's side; else its reason) and the
    claim's verdict word (:func:`combine`)."""
    rejected = _holm([a.p_against for _, _, a in measured], rules.level(SIDE_ALPHA))
    status = {k: "no" if r else "yes" if a.toward and not a.why else (a.why or "noise")
              for (k, _, a), r in zip(measured, rejected)}
    yes = sum(s == "yes" for s in status.values())
    word = CONTRADICTED if "no" in status.values() else INCONCLUSIVE if (yes < len(measured) or missing) else HOLDS
    return status, word


def verdict_word(parts: Mapping[str, Part]) -> str:
    """The verdict of measured ``parts`` alone, without the row's reason and seeds to decide (:func:`combine`'s word;
    the calibration's many tables, cflcore.report.statistics.calibration)."""
    return _statuses([(k, p, assess(p)) for k, p in parts.items()], False)[1]


def combine(parts: Mapping[str, str | Part]) -> Decision:
    """A claim's verdict from its parts (:func:`assess` each). Multiplicity over the m measured parts: the claim
    *holds* when every part reaches its side at (1 − :data:`CONFIDENCE`) / 2 one-sided (an intersection–union
    test: all parts must hold, so no correction is needed); it is *contradicted* when some part lies on the other
    side by Holm's step-down test over the m parts at the same family level; else it is *inconclusive*, with the
    reason (noise, an exact tie, saturation, one seed, a missing part); with no measured part it is n/a. The lean:
    toward the paper when every measured part lies on its side, against when some part lies on the other side,
    else none."""
    if not parts:
        return Decision(NA, NONE, "not measured", "", "n/a: not measured")
    items = [(k, as_part(v)) for k, v in parts.items()]
    assessed = [(k, p, assess(p)) for k, p in items]
    measured = [(k, p, a) for k, p, a in assessed if a.why != "missing"]
    missing = [k for k, _, a in assessed if a.why == "missing"]
    if not measured:
        return Decision(NA, NONE, "not measured", "", "n/a: not measured: " + "; ".join(missing))
    m, alpha = len(measured), rules.level(SIDE_ALPHA)
    status, word = _statuses(measured, bool(missing))
    by: dict[str, list[str]] = {}
    for k, s in status.items():
        by.setdefault(s, []).append(k)
    leans = [a.lean for _, _, a in measured]
    lean = (AGAINST if word == CONTRADICTED or AGAINST in leans else
            TOWARD if all(l == TOWARD for l in leans) else NONE)
    if word == HOLDS:
        reason = "every part beyond the seed noise on the paper's side"
    elif word == CONTRADICTED:
        reason = f"{len(by['no'])} of {m} parts beyond the seed noise against the paper (Holm)"
    else:
        counts = [f"{REASONS[w]}: {len(by[w])} part{'s' if len(by[w]) > 1 else ''}"
                  for w in ("noise", "exact", "saturated", "one seed", "few seeds") if by.get(w)]
        if missing:
            counts.append(f"{REASONS['missing']}: {len(missing)}")
        reason = "; ".join(counts)
    need = ""
    if word == INCONCLUSIVE:
        blockers = [s for s in status.values() if s in ("exact", "saturated", "one seed")] + (["missing"] if missing else [])
        flat = [k for k, _, a in measured if status[k] not in ("yes", "no") and _no_spread(a)]
        if lean == AGAINST:  # the fewest seeds that would contradict one against-leaning part (Bonferroni over m)
            ns = [seeds_needed(a, p, alpha / m) for k, p, a in measured if a.lean == AGAINST and status[k] != "no"]
            ns = [n for n in ns if n is not None]
            need = (f"{min(ns)} (to contradict)" if ns else NO_SPREAD if flat else f"more than {MAX_SEEDS}"
                    if not blockers else "never: " + BLOCKERS[blockers[0]])
        elif lean == TOWARD and blockers:
            need = "never: " + BLOCKERS[blockers[0]]
        elif lean == TOWARD:  # every part not yet holding must reach its side
            ns = [seeds_needed(a, p, alpha) for k, p, a in measured if status[k] != "yes"]
            need = (NO_SPREAD if flat else f"more than {MAX_SEEDS}" if any(n is None for n in ns)
                    else f"{max(ns)} (to hold)")
        else:
            need = "never: " + (BLOCKERS[blockers[0]] if blockers else "no lean")
    pieces = []
    labels = {"no": "contradicted beyond the seed noise", "noise": REASONS["noise"], "exact": REASONS["exact"],
              "saturated": REASONS["saturated"], "one seed": REASONS["one seed"], "few seeds": REASONS["few seeds"],
              "yes": "beyond the seed noise as claimed"}
    for w, text in labels.items():
        if by.get(w):
            pieces.append(f"{text}: " + "; ".join(by[w]))
    if missing:
        pieces.insert(len(pieces) - (1 if by.get("yes") else 0), "not measured: " + "; ".join(missing))
    rule = (f"multiplicity: {m} parts; holds needs every part at p < {alpha:g} one-sided (intersection–union), "
            f"contradicted needs one part at Holm's level over the {m} parts" if m > 1 else "")
    note = f"{word}: " + " | ".join(pieces) + (f" ({rule})" if rule else "")
    return Decision(word, lean, reason, need, note)

