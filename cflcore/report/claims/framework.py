"""Paper checks of the seeds' qualitative claims: one row per claim, ours against the paper's, and a verdict.

000's check compares published table cells (cflcore.report.paper); 002 and 004 publish figures and
qualitative statements, so their checks are claims: a function of the study's runs that returns what we
measured, what the paper says, and a verdict (column ``holds``, one of :data:`VERDICTS`):

* ``holds``: every part of the claim shows beyond the seed noise, in the claimed direction;
* ``contradicted``: some part shows beyond the seed noise in the other direction (or outside the claimed range);
* ``inconclusive``: no part is contradicted, but some part lies within the seed noise or was not measured;
* ``n/a``: the study has no run that can test it (the row says why).

The seed noise (002's and 004's claims): a comparison of two cells is the t-interval (:data:`CONFIDENCE`,
two-sided) of the per-seed *paired* differences (the runs of one seed of one federation, :data:`PAIR_KEYS`, pair
across cells; Welch's interval where fewer than two seeds pair; one seed gives no interval). A claimed difference
holds when its interval excludes 0 on the claimed side, is contradicted when it excludes 0 on the other side, and is
inconclusive when it contains 0: a difference within the noise is never a verdict. A claimed level (ARI ≥ 0.9,
silhouette 0.5 ± 0.1) holds when the t-interval of the per-seed values lies inside the range, is contradicted
when it lies wholly outside, and is inconclusive when it straddles a bound. "Comparable" (accuracy, flatness) is an
equivalence test: the interval of the difference inside ± a stated margin (:data:`COMPARABLE_ACC`,
:data:`.louvain_002.FLAT_DRIFT`) holds, wholly outside contradicts. With two seeds t is 12.7 and most differences are
inconclusive; three seeds (t 4.3) are the least that can tell. The reason (``note``) names every part with its
interval. A claim that does not hold carries the study's own explanation where the config gives one
(``report.claim_notes: {claim id: text}``), after the check's reason.

004's claims take the same tie rule: the per-seed paired difference of two cells (methods, splits,
β) or a cell's t-interval against 004's threshold; see :mod:`.fedgwc_004`.

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


ClaimFn = Callable[[ClaimData], ClaimResult]
CLAIMS: dict[str, list[ClaimFn]] = {}


def claim(paper: str) -> Callable[[ClaimFn], ClaimFn]:
    def register(fn: ClaimFn) -> ClaimFn:
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
           note: str = "") -> ClaimResult:
    """A claim's row; ``holds`` True / False / None (n/a) or a verdict word of :data:`VERDICTS`."""
    if isinstance(holds, str):
        word = holds
    else:
        word = NA if holds is None else (HOLDS if holds else CONTRADICTED)
    if word not in VERDICTS:
        raise ValueError(f"claim {fn_id}: verdict {word!r}; allowed: {', '.join(VERDICTS)}")
    return ClaimResult(fn_id, paper, where, text, ours, word, note)


def factor_values(runs: pd.DataFrame, base: str, column: str) -> list:
    sub = select(runs, base)
    if not len(sub) or column not in sub:
        return []
    values = sub[column].dropna().unique().tolist()
    return sorted(values) if all(isinstance(v, (int, float)) for v in values) else values




# ---- cells, intervals and verdicts -------------------------------------------------------------------
BOUNDED = {"ari": 1.0, ACCURACY: 1.0, "local_acc": 1.0, "global_orch_acc": 1.0, "silhouette": 1.0,
           "silhouette_method": 1.0, "silhouette_authors": 1.0, "rand": 1.0}
"""Scores with an upper bound: two cells both at it with no difference are a saturated tie (inconclusive)."""
COMPARABLE_ACC = 0.02  # "comparable" / "not notably" accuracy: a difference whose interval lies within ± 2 points
CONFIDENCE = 0.95  # two-sided t-intervals over seeds
PAIR_KEYS = ("dataset", "clients", "seed")  # runs of one seed of one federation pair across cells


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


def per_seed(runs: pd.DataFrame, metric: str) -> pd.Series:
    """``metric`` per seed (:data:`PAIR_KEYS`; a mean where a seed has several runs), NaNs dropped."""
    if runs is None or not len(runs) or metric not in runs:
        return pd.Series(dtype=np.float64)
    keys = [k for k in PAIR_KEYS if k in runs]
    values = runs.assign(_v=pd.to_numeric(runs[metric], errors="coerce")).dropna(subset=["_v"])
    if not len(values):
        return pd.Series(dtype=np.float64)
    return values.groupby(keys)["_v"].mean() if keys else values["_v"].reset_index(drop=True)


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided :data:`CONFIDENCE` t-interval over seeds; ``n`` seeds (pairs when ``paired``).
    One seed gives an infinite interval: no noise estimate, nothing can be told."""

    mean: float
    lo: float
    hi: float
    n: int
    how: str = "seeds"  # "seeds" (one cell), "paired seeds" (per-seed differences), "seeds, unpaired" (Welch)

    def text(self, digits: int = 2, signed: bool = True) -> str:
        if not np.isfinite(self.mean):
            return "–"
        f = (lambda v: f"{v:+.{digits}f}") if signed else (lambda v: f"{v:.{digits}f}")
        ci = f"[{f(self.lo)}, {f(self.hi)}]" if np.isfinite(self.lo) and np.isfinite(self.hi) else "[no interval]"
        return f"{f(self.mean)} {ci} ({self.n} {self.how})"


def t_interval(values: Sequence[float], how: str = "seeds") -> Interval:
    """One-sample t-interval of the mean of ``values`` (per-seed scores or per-seed paired differences)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return Interval(float("nan"), float("nan"), float("nan"), 0, how)
    mean = float(v.mean())
    if len(v) < 2:
        return Interval(mean, -np.inf, np.inf, 1, how)
    half = float(t.ppf(0.5 + CONFIDENCE / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return Interval(mean, mean - half, mean + half, len(v), how)


def difference(a: pd.DataFrame, b: pd.DataFrame, metric: str, metric_b: str | None = None) -> Interval:
    """``metric`` of runs ``a`` minus ``metric_b`` (default: the same) of runs ``b``: the t-interval of the per-seed
    paired differences where at least two seeds pair (same dataset, clients and seed), else Welch's interval of the
    difference of the two cells' means (unpaired; one seed on either side gives no interval)."""
    from scipy.stats import t

    sa, sb = per_seed(a, metric), per_seed(b, metric_b or metric)
    common = sa.index.intersection(sb.index)
    if len(common) >= 2:
        return t_interval((sa[common] - sb[common]).to_numpy(), "paired seeds")
    if not len(sa) or not len(sb):
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    mean = float(sa.mean() - sb.mean())
    n = min(len(sa), len(sb))
    if len(sa) < 2 or len(sb) < 2:
        return Interval(mean, -np.inf, np.inf, n, "seeds, unpaired")
    va, vb = sa.var(ddof=1) / len(sa), sb.var(ddof=1) / len(sb)
    se = float(np.sqrt(va + vb))
    dof = (va + vb) ** 2 / (va ** 2 / (len(sa) - 1) + vb ** 2 / (len(sb) - 1)) if se > 0 else 1.0
    half = float(t.ppf(0.5 + CONFIDENCE / 2, dof) * se)
    return Interval(mean, mean - half, mean + half, n, "seeds, unpaired")


def above(d: Interval) -> str:
    """A claimed positive difference: ``yes`` (the interval above 0), ``no`` (below 0: contradicted), ``tie``
    (the interval holds 0: within the seed noise), ``missing``."""
    if not np.isfinite(d.mean):
        return "missing"
    return "yes" if d.lo > 0 else "no" if d.hi < 0 else "tie"


def within(d: Interval, lo: float, hi: float) -> str:
    """A claimed value (or difference) within [lo, hi]: ``yes`` (the interval inside), ``no`` (the interval wholly
    outside), ``tie`` (it straddles a bound), ``missing``."""
    if not np.isfinite(d.mean):
        return "missing"
    if d.lo >= lo and d.hi <= hi:
        return "yes"
    return "no" if d.hi < lo or d.lo > hi else "tie"


def comparison(label: str, d: Interval, status: str, digits: int = 2) -> tuple[str, str]:
    """A part of a claim: its label with the measured interval, and its status."""
    return f"{label}: Δ {d.text(digits)}", status


def greater(label: str, a: pd.DataFrame, b: pd.DataFrame, metric: str, digits: int = 2) -> tuple[str, str]:
    """``a`` above ``b`` on ``metric`` (paired per seed); a tie at the metric's upper bound says so."""
    d = difference(a, b, metric)
    status = above(d)
    bound = BOUNDED.get(metric)
    if status == "tie" and bound is not None and min(cell(a, metric).mean, cell(b, metric).mean) >= bound - 0.005:
        label += " (both saturated at the bound)"
    return comparison(label, d, status, digits)


def comparable(label: str, a: pd.DataFrame, b: pd.DataFrame, metric: str, margin: float = COMPARABLE_ACC,
               digits: int = 3) -> tuple[str, str]:
    """``a`` comparable to ``b``: the paired difference's interval within ± ``margin`` (an equivalence test)."""
    d = difference(a, b, metric)
    return comparison(f"{label} (within ± {margin:g})", d, within(d, -margin, margin), digits)


def threshold(label: str, runs: pd.DataFrame, metric: str, lo: float = -np.inf, hi: float = np.inf) -> tuple[str, str]:
    """The cell's mean over seeds within [lo, hi] (its t-interval inside: yes; wholly outside: no; else tie)."""
    v = t_interval(per_seed(runs, metric).to_numpy())
    return f"{label}: {v.text(2, signed=False)}", within(v, lo, hi)


def combine(parts: Mapping[str, str]) -> tuple[str, str]:
    """A claim's verdict from its parts, and the reason, which names every part with its numbers: any part
    contradicted beyond the seed noise (``no``) makes it ``contradicted``; else any part within the noise (``tie``)
    or not measured (``missing``) makes it ``inconclusive``; a claim with no measured part is ``n/a``; else (every
    part beyond the noise in the claimed direction) it ``holds``."""
    by = {s: [k for k, v in parts.items() if v == s] for s in ("yes", "no", "tie", "missing")}
    if not parts or len(by["missing"]) == len(parts):
        return NA, "n/a: not measured" + (": " + "; ".join(by["missing"]) if by["missing"] else "")
    pieces = []
    if by["no"]:
        pieces.append("contradicted beyond the seed noise: " + "; ".join(by["no"]))
    if by["tie"]:
        pieces.append("within the seed noise: " + "; ".join(by["tie"]))
    if by["missing"]:
        pieces.append("not measured: " + "; ".join(by["missing"]))
    if by["yes"]:
        pieces.append("beyond the seed noise as claimed: " + "; ".join(by["yes"]))
    word = CONTRADICTED if by["no"] else INCONCLUSIVE if (by["tie"] or by["missing"]) else HOLDS
    return word, f"{word}: " + " | ".join(pieces)


def verdict(paper: str, fn_id: str, where: str, text: str, ours: str, parts: Mapping[str, str],
            note: str = "") -> ClaimResult:
    """Seed ``paper``'s claim row from its parts (:func:`combine`): the verdict, and the reason before ``note``."""
    word, why = combine(parts)
    return result(fn_id, paper, where, text, ours, word, "; ".join(x for x in (why, note) if x))



# ---- running the checks ---------------------------------------------------------------------
def check_claims(papers: Sequence[str], data: ClaimData, notes: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per claim of each of ``papers``; ``notes`` (report.claim_notes) are appended to a claim's own note."""
    rows = []
    for paper in papers:
        for fn in CLAIMS.get(str(paper), []):
            try:
                res = fn(data)
            except (KeyError, ValueError, IndexError) as e:  # a claim never stops the report
                res = ClaimResult(fn.__name__, str(paper), "", fn.__name__, f"could not be evaluated: {e}", "n/a")
            row = asdict(res)
            if notes and res.claim_id in notes:  # the study's explanation, after the check's own reason
                row["note"] = " | ".join(x for x in (res.note, str(notes[res.claim_id])) if x)
            rows.append(row)
    return pd.DataFrame(rows, columns=[f.name for f in ClaimResult.__dataclass_fields__.values()])
