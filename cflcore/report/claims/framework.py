"""Paper checks of the seeds' qualitative claims: one row per claim, ours against the paper's, and a verdict.

000's check compares published table cells (cflcore.report.paper); 002 and 004 publish figures and
qualitative statements, so their checks are claims: a function of the study's runs that returns what we
measured, what the paper says, and a row (:data:`CLAIM_COLUMNS`):

* ``holds`` (the verdict, one of :data:`VERDICTS`): ``holds`` (every part beyond the seed noise on the paper's
  side), ``contradicted`` (some part beyond the noise on the other side), ``inconclusive`` (neither), ``n/a`` (the
  study has no run that can test it, or its proxy cannot carry it: ``report.claims_not_carried``);
* ``lean`` (:data:`LEANS`): where the numbers lean, ``toward`` the paper (every measured part on its side),
  ``against`` it (some part on the other side) or ``none`` (exact ties, saturation);
* ``reason``: in words, why the row is what it is: within the seed noise, no difference (an exact tie between
  identical runs: more seeds cannot change it), saturated (every seed at the metric's bound), one seed, a part not
  measured; for n/a rows what is missing;
* ``seeds_to_decide``: for an inconclusive row, the seeds that would decide it at the observed effect and spread
  (:func:`seeds_needed`), or "never" with the blocker;
* ``kind``: ``evidence``, or ``sanity`` where the study's design makes the claim true whatever the method does
  (002: a labels-only baseline satisfies it too);
* ``note``: every part with its numbers and test, and the multiplicity rule.

A claim is made of parts (:class:`Part`): a per-seed value, or a per-seed *paired* difference (the runs of one seed
of one federation, :data:`PAIR_KEYS`, pair across cells; seeds that do not pair are named in the row), claimed to lie
in a range (above 0; at or above a level; within ± a margin for "comparable", an equivalence test). Each part is
tested one-sided at (1 − :data:`CONFIDENCE`) / 2 (:func:`assess`): by the one-sample t-test, or, where a value
reaches its metric's bound (:data:`BOUNDED`: ARI, accuracy, silhouette at 1) or every seed gives the same value,
by the sign test (scipy.stats.binomtest on the seeds on either side): a t-interval of bounded values runs past
the bound, and one of equal values has width 0 on any number of seeds. Multiplicity (:func:`combine`): a claim
holds when every part holds (an intersection–union test, no correction needed) and is contradicted when one
part is against it by Holm's step-down test over its parts. The study's own explanation of a row
(``report.claim_notes: {claim id: text}``) follows the check's note.

The registry :data:`CLAIMS` maps a seed (``"002"``, ``"004"``) to its claims; a study picks its checks with
``report.paper_checks``. A new claim is one decorated function, in its paper's module of this package (named after
the method: :mod:`.louvain_002`, :mod:`.fedgwc_004`); this module is the framework they share (the row type, the
registry, the selection helpers, the intervals and the verdict logic).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd


ACCURACY = "orch_acc"  # each client's own model on the balanced held-out set
HOLDS, CONTRADICTED, INCONCLUSIVE, NA = "holds", "contradicted", "inconclusive", "n/a"
VERDICTS = (HOLDS, CONTRADICTED, INCONCLUSIVE, NA)


@dataclass(frozen=True)
class ClaimResult:
    claim_id: str
    paper: str  # seed
    where: str  # section / figure of the seed
    claim: str
    ours: str
    holds: str  # a verdict of VERDICTS: holds / contradicted / inconclusive / n/a
    note: str = ""
    lean: str = "none"  # of LEANS: where the numbers lean, toward the paper or against it (or none)
    reason: str = ""  # in words: why the row is what it is (noise, exact tie, saturation, a missing part, n/a's why)
    seeds_to_decide: str = ""  # inconclusive rows: the seeds that would decide at the observed effect and spread
    kind: str = "evidence"  # evidence, or a sanity check the study's design makes true (the row says why)


@dataclass
class ClaimData:
    """What a claim may read: the per-run sweep summary (cflcore.report.sweeps.sweep_summary: base names,
    factor values, final-round scores), the per-round frame (sweeps.round_frame) and the run summaries
    (tables.run_summaries: scores averaged over rounds)."""

    runs: pd.DataFrame
    rounds: pd.DataFrame = field(default_factory=pd.DataFrame)
    summaries: pd.DataFrame = field(default_factory=pd.DataFrame)
    loaded: Sequence[Any] = ()
    """The loaded runs (cflcore.report.runs.LoadedRun: spec with run_dir, manifest), for claims that read a run's
    own files (002 Fig. 2: the recorded distance matrices; the superclass split: final partitions)."""
    told_true_k: frozenset[str] = frozenset()
    """The variants told the true number of groups (cflcore.plugin.Plugin.told_true_k): they split
    because they are told to, which a claim about who splits must set apart."""


CLAIM_COLUMNS = ("claim_id", "paper", "where", "claim", "ours", "holds", "lean", "reason", "seeds_to_decide", "kind",
                 "note")
"""paper_claims.csv's columns: the verdict (``holds``) with its lean beside it, the reason in words, the seeds that
would decide an inconclusive row, evidence or sanity check, and the parts with their numbers (``note``)."""

ClaimFn = Callable[[ClaimData], ClaimResult]
CLAIMS: dict[str, list[ClaimFn]] = {}


def claim(paper: str, claim_id: str) -> Callable[[ClaimFn], ClaimFn]:
    """Register a claim of seed ``paper`` under ``claim_id``, the id its rows carry and a study's config names
    (``report.claim_notes``, ``report.claims_not_carried``). Both arguments are string literals or module constants:
    config validation reads them from the source, never importing the report (cflcore/config_checks.py)."""
    def register(fn: ClaimFn) -> ClaimFn:
        fn.claim_id = claim_id  # type: ignore[attr-defined]
        CLAIMS.setdefault(paper, []).append(fn)
        return fn
    return register


# ---- selection helpers -----------------------------------------------------------------------
def select(runs: pd.DataFrame, base: str | None = None, **factors: Any) -> pd.DataFrame:
    """The runs of variant family ``base`` whose factor columns equal ``factors`` (a column absent = no match).
    ``split_base`` and ``algorithm`` may be given as factors too."""
    if runs is None or not len(runs):
        return pd.DataFrame()
    mask = np.ones(len(runs), dtype=bool)
    if base is not None:
        mask &= (runs["algorithm_base"] == base).to_numpy()
    for key, value in factors.items():
        if key not in runs:
            return runs.iloc[0:0]
        column = runs[key]
        if isinstance(value, float):
            mask &= np.isclose(pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64), value)
        else:
            mask &= (column == value).to_numpy()
    return runs[mask]


def mean_of(runs: pd.DataFrame, metric: str) -> float:
    if runs is None or not len(runs) or metric not in runs:
        return float("nan")
    values = pd.to_numeric(runs[metric], errors="coerce").dropna()
    return float(values.mean()) if len(values) else float("nan")


def silhouette_column(runs: pd.DataFrame) -> str:
    """The silhouette in the space the method clusters in when recorded, else on the updates."""
    return "silhouette_method" if "silhouette_method" in runs and runs["silhouette_method"].notna().any() else "silhouette"


def fmt(value: float, digits: int = 2) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def result(fn_id: str, paper: str, where: str, text: str, ours: str, holds: bool | str | None,
           note: str = "", reason: str = "") -> ClaimResult:
    """A claim's row decided without parts (an event count, or n/a); ``holds`` True / False / None (n/a) or a
    verdict word of :data:`VERDICTS`. The reason defaults to ``ours`` for n/a rows (what the study lacks)."""
    if isinstance(holds, str):
        word = holds
    else:
        word = NA if holds is None else (HOLDS if holds else CONTRADICTED)
    if word not in VERDICTS:
        raise ValueError(f"claim {fn_id}: verdict {word!r}; allowed: {', '.join(VERDICTS)}")
    lean = {HOLDS: "toward", CONTRADICTED: "against"}.get(word, "none")
    why = reason or (f"n/a: {ours}" if word == NA else "decided by a count of events, not a difference of means")
    return ClaimResult(fn_id, paper, where, text, ours, word, note, lean, why)


def factor_values(runs: pd.DataFrame, base: str, column: str) -> list:
    sub = select(runs, base)
    if not len(sub) or column not in sub:
        return []
    values = sub[column].dropna().unique().tolist()
    return sorted(values) if all(isinstance(v, (int, float)) for v in values) else values




# ---- cells, intervals and verdicts -------------------------------------------------------------------
BOUNDED = {"ari": 1.0, ACCURACY: 1.0, "local_acc": 1.0, "global_orch_acc": 1.0, "global_acc": 1.0, "silhouette": 1.0,
           "silhouette_method": 1.0, "silhouette_authors": 1.0, "rand": 1.0, "labels_only_ari": 1.0}
"""Scores with an upper bound: a part whose seeds reach it is tested by the sign test (:func:`assess`), and two cells
both at it on every seed are a saturated tie (inconclusive, more seeds cannot order them)."""
COMPARABLE_ACC = 0.02  # "comparable" / "not notably" accuracy: a difference whose interval lies within ± 2 points
CONFIDENCE = 0.95  # two-sided intervals over seeds: each side of a part is tested at (1 − CONFIDENCE) / 2
SIDE_ALPHA = (1 - CONFIDENCE) / 2
PAIR_KEYS = ("dataset", "clients", "seed")  # runs of one seed of one federation pair across cells
MAX_SEEDS = 1000  # the seed count search of :func:`seeds_needed` stops here ("more than 1000")
TOWARD, AGAINST, NONE = "toward", "against", "none"
LEANS = (TOWARD, AGAINST, NONE)
EVIDENCE, SANITY = "evidence", "sanity"
"""A row's ``kind``: evidence for or against the paper, or a sanity check (the study's design makes the claim true
whatever the method does, e.g. a baseline that only reads the clients' label histograms satisfies it too)."""


@dataclass(frozen=True)
class Cell:
    """A score over the seeds of one cell: mean, sample std (002's ± std envelope; NaN with one seed), seeds."""

    mean: float
    sd: float
    n: int

    def text(self, digits: int = 2) -> str:
        return fmt(self.mean, digits) + (f" ± {fmt(self.sd, digits)}" if self.n >= 2 and np.isfinite(self.sd) else "")


def cell(runs: pd.DataFrame, metric: str) -> Cell:
    values = per_seed(runs, metric).to_numpy(dtype=np.float64)
    if not len(values):
        return Cell(float("nan"), float("nan"), 0)
    return Cell(float(values.mean()), float(values.std(ddof=1)) if len(values) >= 2 else float("nan"), len(values))


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


def at_bound(values: Sequence[float], metric: str | None) -> bool:
    """Whether some value reaches ``metric``'s bound (:data:`BOUNDED`), or the values' t-interval runs past it: then
    the sign test decides (:func:`assess`), not a t-interval that leaves the metric's range."""
    bound = BOUNDED.get(metric or "")
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if bound is None or not len(v):
        return False
    return bool(np.any(v >= bound - 1e-9)) or (len(v) >= 2 and t_interval(v).hi > bound)


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided :data:`CONFIDENCE` t-interval over seeds; ``n`` seeds (pairs when ``paired``).
    One seed gives an infinite interval: no noise estimate, nothing can be told. ``values`` are the per-seed
    values (or paired differences) it rests on, ``unpaired`` the seeds of either cell that found no pair."""

    mean: float
    lo: float
    hi: float
    n: int
    how: str = "seeds"  # "seeds" (one cell), "paired seeds" (per-seed differences), "seeds, unpaired" (Welch)
    values: tuple = ()
    unpaired: str = ""
    bounded: bool = False  # a value (or a compared cell) reaches its metric's bound

    def text(self, digits: int = 2, signed: bool = True) -> str:
        if not np.isfinite(self.mean):
            return "–"
        f = (lambda v: f"{v:+.{digits}f}") if signed else (lambda v: f"{v:.{digits}f}")
        ci = f"[{f(self.lo)}, {f(self.hi)}]" if np.isfinite(self.lo) and np.isfinite(self.hi) else "[no interval]"
        if self.bounded and len(self.values):  # at a metric's bound the sign test decides: the seeds' range, no t
            ci = f"[seeds {f(min(self.values))} to {f(max(self.values))}]"
        return f"{f(self.mean)} {ci} ({self.n} {self.how}{'; ' + self.unpaired if self.unpaired else ''})"


def t_interval(values: Sequence[float], how: str = "seeds") -> Interval:
    """One-sample t-interval of the mean of ``values`` (per-seed scores or per-seed paired differences)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return Interval(float("nan"), float("nan"), float("nan"), 0, how)
    mean = float(v.mean())
    if len(v) < 2:
        return Interval(mean, -np.inf, np.inf, 1, how, tuple(v))
    half = float(t.ppf(0.5 + CONFIDENCE / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return Interval(mean, mean - half, mean + half, len(v), how, tuple(v))


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
    if len(common) >= 2:
        d = t_interval((sa[common] - sb[common]).to_numpy(), "paired seeds")
        return Interval(d.mean, d.lo, d.hi, d.n, d.how, d.values, unpaired, bounded)
    if not len(sa) or not len(sb):
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    mean = float(sa.mean() - sb.mean())
    n = min(len(sa), len(sb))
    if len(sa) < 2 or len(sb) < 2:
        return Interval(mean, -np.inf, np.inf, n, "seeds, unpaired", bounded=bounded)
    va, vb = sa.var(ddof=1) / len(sa), sb.var(ddof=1) / len(sb)
    se = float(np.sqrt(va + vb))
    dof = (va + vb) ** 2 / (va ** 2 / (len(sa) - 1) + vb ** 2 / (len(sb) - 1)) if se > 0 else 1.0
    half = float(t.ppf(0.5 + CONFIDENCE / 2, dof) * se)
    return Interval(mean, mean - half, mean + half, n, "seeds, unpaired", bounded=bounded)


# ---- parts of a claim: the tests ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    """One part of a claim: the mean of ``d.values`` (per-seed values, or per-seed paired differences) is claimed
    to lie in [``lo``, ``hi``] (``strict``: above ``lo`` strictly, a claimed difference, where an exact 0 is a
    tie). :func:`assess` tests it; ``status`` fixes a part the claim decides itself (``missing``; an event count's
    ``no``)."""

    d: Interval
    lo: float = -np.inf
    hi: float = np.inf
    strict: bool = False
    status: str = ""


@dataclass(frozen=True)
class Assessment:
    """A part's test: ``p_toward`` (one-sided p that the claim's side is not reached), ``p_against`` (that the
    other side is not), the test's name and counts, ``lean`` and, for a part that cannot decide, ``why`` (one of
    :data:`REASONS`' keys)."""

    p_toward: float
    p_against: float
    test: str
    lean: str
    why: str = ""  # "", "noise", "exact", "saturated", "one seed", "missing"
    n: int = 0
    mean: float = float("nan")
    sd: float = float("nan")
    q: float = float("nan")  # sign test: the share of seeds on the claim's side

    @property
    def toward(self) -> bool:
        """The part reaches the claim's side beyond the seed noise (one-sided at :data:`SIDE_ALPHA`)."""
        return self.p_toward < SIDE_ALPHA


REASONS = {"noise": "within the seed noise", "exact": "no difference (identical on every seed: more seeds cannot "
           "change it)", "saturated": "saturated (every seed at the metric's bound: the metric cannot order them)",
           "one seed": "one seed (no noise estimate)", "missing": "a part not measured"}


BLOCKERS = {"exact": "an exact tie (no difference)", "saturated": "a part saturated at the bound",
            "one seed": "a part rests on one seed", "missing": "a part is not measured"}
"""Why more seeds cannot decide a row (the ``seeds_to_decide`` column)."""


def _sides(v: np.ndarray, lo: float, hi: float, strict: bool) -> list[tuple[int, int]]:
    """Per finite end of [lo, hi]: (seeds on the claim's side, seeds on the other side); seeds exactly at a strict
    end are ties (neither)."""
    out = []
    if np.isfinite(lo):
        out.append((int(np.sum(v > lo) + (0 if strict else np.sum(v == lo))), int(np.sum(v < lo))))
    if np.isfinite(hi):
        out.append((int(np.sum(v <= hi)), int(np.sum(v > hi))))
    return out


def _sign_p(k: int, n: int) -> float:
    from scipy.stats import binomtest

    return float(binomtest(k, n, 0.5, alternative="greater").pvalue) if n else 1.0


def _t_p(mean: float, sd: float, n: int, lo: float, hi: float) -> tuple[float, float]:
    from scipy.stats import t

    se = sd / np.sqrt(n)
    toward, against = [], []
    for end, sign in ((lo, 1.0), (hi, -1.0)):
        if np.isfinite(end):
            stat = sign * (mean - end) / se
            toward.append(float(t.sf(stat, n - 1)))
            against.append(float(t.cdf(stat, n - 1)))
    return max(toward), min(against)


def assess(part: Part) -> Assessment:
    """Test one part. Seeds that all agree, or values at their metric's bound (ARI, accuracy, silhouette at 1),
    take the sign test (scipy.stats.binomtest: the count of seeds on either side of each end; a t-interval of
    bounded values would run past the bound, and one of equal values has width 0); every other part the one-sample
    t-test of the per-seed values (the t-interval of :data:`CONFIDENCE`). A claimed difference whose seeds are all
    exactly 0 is "no difference" (or "saturated" at the bound), never noise; one seed cannot tell."""
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
    if len(v) < 2:
        if d.how == "seeds, unpaired" and np.isfinite(d.lo) and np.isfinite(d.hi):  # Welch's interval, no values
            se = max((d.hi - d.lo) / 2 / 1.96, 1e-300)
            return Assessment(*_t_p(mean, se * np.sqrt(d.n), d.n, part.lo, part.hi), "Welch", lean, "noise", d.n, mean)
        return Assessment(1.0, 1.0, "–", lean, "one seed", len(v), mean)
    if part.strict and np.all(v == part.lo):
        return Assessment(1.0, 1.0, "exact", NONE, "saturated" if d.bounded else "exact", len(v), mean, 0.0)
    sd = float(v.std(ddof=1))
    if d.bounded or sd == 0:
        sides = _sides(v, part.lo, part.hi, part.strict)
        p_toward = max(_sign_p(k_in, k_in + k_out) for k_in, k_out in sides)
        p_against = min(_sign_p(k_out, k_in + k_out) for k_in, k_out in sides)
        q = min(k_in / (k_in + k_out) if k_in + k_out else 0.5 for k_in, k_out in sides)
        lean = NONE if q == 0.5 else TOWARD if q > 0.5 else AGAINST
        k_in, k_out = min(sides, key=lambda s: s[0] - s[1])
        return Assessment(p_toward, p_against, f"sign test {k_in} of {k_in + k_out} seeds on the claim's side",
                          lean, "", len(v), mean, sd, q)
    p_toward, p_against = _t_p(mean, sd, len(v), part.lo, part.hi)
    return Assessment(p_toward, p_against, "t", lean, "", len(v), mean, sd)


def seeds_needed(a: Assessment, part: Part, alpha: float) -> int | None:
    """The fewest seeds at which the part, keeping its observed mean and spread (t) or its share of seeds on
    either side (sign test), would decide in the direction it leans at one-sided level ``alpha``; None when more
    than :data:`MAX_SEEDS` (or never: an exact tie, no spread estimate)."""
    if a.lean == NONE or a.why in ("exact", "saturated", "missing", "one seed") or a.n < 2:
        return None
    for n in range(a.n, MAX_SEEDS + 1):
        if a.test == "t":
            p_toward, p_against = _t_p(a.mean, a.sd, n, part.lo, part.hi)
        elif a.test.startswith("sign"):
            k = int(round(a.q * n))
            p_toward, p_against = _sign_p(k, n), _sign_p(n - k, n)
        else:
            return None
        if (p_toward if a.lean == TOWARD else p_against) < alpha:
            return n
    return None


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


def threshold(label: str, runs: pd.DataFrame, metric: str, lo: float = -np.inf, hi: float = np.inf) -> tuple[str, Part]:
    """The cell's mean over seeds within [lo, hi] (its t-interval; the sign test where a seed is at the bound)."""
    values = per_seed(runs, metric).to_numpy()
    v = t_interval(values)
    v = Interval(v.mean, v.lo, v.hi, v.n, v.how, v.values, bounded=at_bound(values, metric))
    return f"{label}: {v.text(2, signed=False)}", Part(v, lo, hi)


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
    m = len(measured)
    rejected = _holm([a.p_against for _, _, a in measured], SIDE_ALPHA)
    status = {}
    for (k, _, a), r in zip(measured, rejected):
        status[k] = "no" if r else "yes" if a.toward and not a.why else (a.why or "noise")
    by: dict[str, list[str]] = {}
    for k, s in status.items():
        by.setdefault(s, []).append(k)
    leans = [a.lean for _, _, a in measured]
    word = CONTRADICTED if by.get("no") else INCONCLUSIVE if (len(by.get("yes", [])) < m or missing) else HOLDS
    lean = (AGAINST if word == CONTRADICTED or AGAINST in leans else
            TOWARD if all(l == TOWARD for l in leans) else NONE)
    if word == HOLDS:
        reason = "every part beyond the seed noise on the paper's side"
    elif word == CONTRADICTED:
        reason = f"{len(by['no'])} of {m} parts beyond the seed noise against the paper (Holm)"
    else:
        counts = [f"{REASONS[w]}: {len(by[w])} part{'s' if len(by[w]) > 1 else ''}"
                  for w in ("noise", "exact", "saturated", "one seed") if by.get(w)]
        if missing:
            counts.append(f"{REASONS['missing']}: {len(missing)}")
        reason = "; ".join(counts)
    need = ""
    if word == INCONCLUSIVE:
        blockers = [s for s in status.values() if s in ("exact", "saturated", "one seed")] + (["missing"] if missing else [])
        if lean == AGAINST:  # the fewest seeds that would contradict one against-leaning part (Bonferroni over m)
            ns = [seeds_needed(a, p, SIDE_ALPHA / m) for k, p, a in measured if a.lean == AGAINST and status[k] != "no"]
            ns = [n for n in ns if n is not None]
            need = (f"{min(ns)} (to contradict)" if ns else f"more than {MAX_SEEDS}" if not blockers
                    else "never: " + BLOCKERS[blockers[0]])
        elif lean == TOWARD and blockers:
            need = "never: " + BLOCKERS[blockers[0]]
        elif lean == TOWARD:  # every part not yet holding must reach its side
            ns = [seeds_needed(a, p, SIDE_ALPHA) for k, p, a in measured if status[k] != "yes"]
            need = f"more than {MAX_SEEDS}" if any(n is None for n in ns) else f"{max(ns)} (to hold)"
        else:
            need = "never: " + (BLOCKERS[blockers[0]] if blockers else "no lean")
    pieces = []
    labels = {"no": "contradicted beyond the seed noise", "noise": REASONS["noise"], "exact": REASONS["exact"],
              "saturated": REASONS["saturated"], "one seed": REASONS["one seed"],
              "yes": "beyond the seed noise as claimed"}
    tests = {k: a.test for k, _, a in measured}
    for w, text in labels.items():
        if by.get(w):
            pieces.append(f"{text}: " + "; ".join(k + (f" ({tests[k]})" if tests[k].startswith("sign") else "")
                                                   for k in by[w]))
    if missing:
        pieces.insert(len(pieces) - (1 if by.get("yes") else 0), "not measured: " + "; ".join(missing))
    rule = (f"multiplicity: {m} parts; holds needs every part at p < {SIDE_ALPHA:g} one-sided (intersection–union), "
            f"contradicted needs one part at Holm's level over the {m} parts" if m > 1 else "")
    note = f"{word}: " + " | ".join(pieces) + (f" ({rule})" if rule else "")
    return Decision(word, lean, reason, need, note)


def verdict(paper: str, fn_id: str, where: str, text: str, ours: str, parts: Mapping[str, str | Part],
            note: str = "", kind: str = EVIDENCE) -> ClaimResult:
    """Seed ``paper``'s claim row from its parts (:func:`combine`): the verdict, its lean, reason and seeds to decide,
    and the parts' numbers before ``note``."""
    dec = combine(parts)
    return ClaimResult(fn_id, paper, where, text, ours, dec.word, "; ".join(x for x in (dec.note, note) if x),
                       dec.lean, dec.reason, dec.seeds_to_decide, kind)



# ---- running the checks ---------------------------------------------------------------------
def check_claims(papers: Sequence[str], data: ClaimData, notes: Mapping[str, str] | None = None,
                 not_carried: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per claim of each of ``papers``; ``notes`` (report.claim_notes) are appended to a claim's own note;
    a claim of ``not_carried`` (report.claims_not_carried: {claim id: why the study's proxy cannot carry it}) is
    n/a with that reason, its measured values and the check's own verdict on them kept in the row."""
    rows = []
    for paper in papers:
        for fn in CLAIMS.get(str(paper), []):
            try:
                res = fn(data)
            except (KeyError, ValueError, IndexError) as e:  # a claim never stops the report
                res = ClaimResult(fn.claim_id, str(paper), "", fn.__name__, f"could not be evaluated: {e}", NA,
                                  reason=f"n/a: could not be evaluated: {e}")
            if not_carried and res.claim_id in not_carried:
                res = ClaimResult(res.claim_id, res.paper, res.where, res.claim, res.ours, NA,
                                  f"the check's own verdict on these runs: {res.holds} (lean {res.lean}): {res.note}",
                                  NONE, f"n/a: the proxy cannot carry this claim: {not_carried[res.claim_id]}")
            row = asdict(res)
            if notes and res.claim_id in notes:  # the study's explanation, after the check's own reason
                row["note"] = " | ".join(x for x in (res.note, str(notes[res.claim_id])) if x)
            rows.append(row)
    return pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))
