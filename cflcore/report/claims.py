"""Paper checks of the seeds' qualitative claims: one row per claim, ours against the paper's, and a verdict.

000's check compares published table cells (cflcore.report.paper); 002 and 004 publish figures and
qualitative statements, so their checks are claims: a function of the study's runs that returns what we
measured, what the paper says, and a verdict (column ``holds``, one of :data:`VERDICTS`):

* ``holds``: every part of the claim shows beyond the seed noise, in the claimed direction;
* ``contradicted``: some part shows beyond the seed noise in the other direction (or outside the claimed range);
* ``inconclusive``: no part is contradicted, but some part lies within the seed noise or was not measured;
* ``n/a``: the study has no run that can test it (the row says why).

The seed noise (002's claims): a comparison of two cells is the t-interval (:data:`CONFIDENCE`, two-sided) of the
per-seed *paired* differences (the runs of one seed of one federation, :data:`PAIR_KEYS`, pair across cells;
Welch's interval where fewer than two seeds pair; one seed gives no interval). A claimed difference holds when
its interval excludes 0 on the claimed side, is contradicted when it excludes 0 on the other side, and is
inconclusive when it contains 0: a difference within the noise is never a verdict. A claimed level (ARI ≥ 0.9,
silhouette 0.5 ± 0.1) holds when the t-interval of the per-seed values lies inside the range, is contradicted
when it lies wholly outside, and is inconclusive when it straddles a bound. "Comparable" (accuracy, flatness) is an
equivalence test: the interval of the difference inside ± a stated margin (:data:`COMPARABLE_ACC`,
:data:`FLAT_DRIFT`) holds, wholly outside contradicts. With two seeds t is 12.7 and most differences are
inconclusive; three seeds (t 4.3) are the least that can tell. The reason (``note``) names every part with its
interval. A claim that does not hold carries the study's own explanation where the config gives one
(``report.claim_notes: {claim id: text}``), after the check's reason.

004's claims compare means against the thresholds of 004's text (``holds`` / ``contradicted`` / ``n/a``).

The registry :data:`CLAIMS` maps a seed (``"002"``, ``"004"``) to its claims; a study picks its checks with
``report.paper_checks``. A new claim is one decorated function.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .runs import diagnostics_cell

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


# ---- 002 (Louvain community CFL), §V-B ---------------------------------------------------------------
FIG3, FIG4, SUPERCLASS = "louvain-fig3", "louvain-fig4", "louvain-superclass"
W_T = "global_orch_acc"
"""002's accuracy in Figs. 3a, 4a and 5a: the global model W_t on the balanced held-out set (its authors' code
evaluates the global model: ``listiccfl_strategy.py`` ``evaluate``, ``graphcfl_strategy.py`` ``configure_evaluate``)."""
BOUNDED = {"ari": 1.0, ACCURACY: 1.0, "local_acc": 1.0, "global_orch_acc": 1.0, "silhouette": 1.0,
           "silhouette_method": 1.0, "silhouette_authors": 1.0}
"""Scores with an upper bound: two cells both at it with no difference are a saturated tie (inconclusive)."""
HALF_ARI_CLOSE_TO_ZERO = 0.3  # 002 §V-B3: 1NN's ARI at 50 % "close to 0"; read as ARI ≤ 0.3
COMMUNITIES_FOUND = 0.9  # "finds the communities" / "optimal detection": ARI ≥ 0.9
AVG_SILHOUETTE = (0.5, 0.1)  # 002 §V-B3, Fig. 5b: AVG's silhouette "remains approximately 0.5": 0.5 ± 0.1
COMPARABLE_ACC = 0.02  # "comparable" / "not notably" accuracy: a difference whose interval lies within ± 2 points
FLAT_DRIFT = 0.1  # "minimal variation over rounds": the drift (second half − first half) within ± 0.1
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


def verdict(fn_id: str, where: str, text: str, ours: str, parts: Mapping[str, str], note: str = "") -> ClaimResult:
    word, why = combine(parts)
    return result(fn_id, "002", where, text, ours, word, "; ".join(x for x in (why, note) if x))


def _mk_runs(data: ClaimData, resolution: float = 1.0) -> tuple[list[float], list[pd.DataFrame]]:
    shares = factor_values(data.runs, FIG3, "majority_share")
    return shares, [select(data.runs, FIG3, majority_share=float(m), resolution=resolution) for m in shares]


@claim("002")
def ari_rises_with_majority_share(data: ClaimData) -> ClaimResult:
    text = "ARI rises with the majority share m_k (1NN, resolution 1.0)"
    where = "§V-B1, Fig. 3b"
    shares, runs = _mk_runs(data)
    if len(shares) < 2:
        return result("002-ari-mk", "002", where, text, "no m_k sweep in this study", None)
    ours = "ARI: " + "; ".join(f"m_k {m:g}: {cell(r, 'ari').text()}" for m, r in zip(shares, runs))
    parts = dict([greater(f"m_k {shares[-1]:g} above m_k {shares[0]:g}", runs[-1], runs[0], "ari")])
    for (m0, a), (m1, b) in zip(zip(shares, runs), zip(shares[1:], runs[1:])):
        label, status = greater(f"m_k {m1:g} not below m_k {m0:g}", b, a, "ari")
        if status == "no":  # one step falling beyond the noise contradicts "rises"
            parts[label] = "no"
    return verdict("002-ari-mk", where, text, ours, parts)


@claim("002")
def two_communities_at_full_majority(data: ClaimData) -> ClaimResult:
    text = f"At m_k = 1.0 and resolution 1.0, Louvain finds the two communities (ARI ≈ 1, read as ≥ {COMMUNITIES_FOUND})"
    where = "§V-B1, Fig. 3b"
    runs = select(data.runs, FIG3, majority_share=1.0, resolution=1.0)
    if not len(runs):
        return result("002-mk1", "002", where, text, "no run at m_k 1.0, resolution 1.0", None)
    ari, k = cell(runs, "ari"), cell(runs, "n_clusters")
    return verdict("002-mk1", where, text, f"final ARI {ari.text()}, {fmt(k.mean, 1)} clusters ({ari.n} seeds)",
                   dict([threshold(f"ARI ≥ {COMMUNITIES_FOUND}", runs, "ari", lo=COMMUNITIES_FOUND)]))


@claim("002")
def accuracy_depends_on_mk_not_resolution(data: ClaimData) -> ClaimResult:
    text = "Accuracy (W_t) depends on m_k, not notably on the Louvain resolution"
    where = "§V-B1, Fig. 3a"
    shares = factor_values(data.runs, FIG3, "majority_share")
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(shares) < 2 or len(resolutions) < 2 or 1.0 not in resolutions:
        return result("002-acc-res", "002", where, text, "needs an m_k × resolution sweep through 1.0", None)
    at = {(m, r): select(data.runs, FIG3, majority_share=float(m), resolution=float(r)) for m in shares for r in resolutions}
    d = difference(at[(shares[0], 1.0)], at[(shares[-1], 1.0)], W_T)
    parts = dict([comparison(f"W_t accuracy differs between m_k {shares[0]:g} and {shares[-1]:g} (resolution 1)", d,
                             "missing" if not np.isfinite(d.mean) else "tie" if d.lo <= 0 <= d.hi else "yes", 3)])
    for m in shares:  # per m_k: every resolution's accuracy comparable to resolution 1.0's
        for r in resolutions:
            if r != 1.0:
                label, status = comparable(f"m_k {m:g}: resolution {r:g} vs 1", at[(m, r)], at[(m, 1.0)], W_T)
                parts[label] = status
    ours = "W_t accuracy: " + "; ".join(f"m_k {m:g}: " + ", ".join(f"res {r:g} {cell(at[(m, r)], W_T).text(3)}"
                                                                   for r in resolutions) for m in shares)
    return verdict("002-acc-res", where, text, ours, parts)


@claim("002")
def silhouette_rises_with_mk_and_resolution(data: ClaimData) -> ClaimResult:
    text = "Clusters are denser and better separated (silhouette) with more non-iid data and a higher resolution"
    where = "§V-B1, Fig. 3c"
    col = silhouette_column(data.runs)
    shares, runs = _mk_runs(data)
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(shares) < 2:
        return result("002-sil-mk", "002", where, text, "no m_k sweep in this study", None)
    parts = dict([greater(f"m_k {shares[-1]:g} above m_k {shares[0]:g} (resolution 1)", runs[-1], runs[0], col)])
    ours = f"{col} at resolution 1.0: " + "; ".join(f"m_k {m:g}: {cell(r, col).text()}" for m, r in zip(shares, runs))
    if len(resolutions) >= 2:
        lo, hi = min(resolutions), max(resolutions)
        for m in shares:  # per m_k: the highest resolution above the lowest
            label, status = greater(f"m_k {m:g}: resolution {hi:g} above {lo:g}",
                                    select(data.runs, FIG3, majority_share=float(m), resolution=float(hi)),
                                    select(data.runs, FIG3, majority_share=float(m), resolution=float(lo)), col)
            parts[label] = status
    else:
        parts["resolution (no resolution sweep)"] = "missing"
    return verdict("002-sil-mk", where, text, ours, parts)


@claim("002")
def higher_resolution_fewer_clusters(data: ClaimData) -> ClaimResult:
    text = "A higher Louvain resolution gives fewer, larger clusters"
    where = "§IV-B, §V-B1"
    resolutions = factor_values(data.runs, FIG3, "resolution")
    shares = factor_values(data.runs, FIG3, "majority_share") or [None]
    if len(resolutions) < 2:
        return result("002-res-clusters", "002", where, text, "no resolution sweep in this study", None)
    lo, hi = resolutions[0], resolutions[-1]
    parts, rows = {}, []
    for m in shares:  # per m_k: more clusters at the lowest resolution than at the highest; no step adding clusters
        at = {r: select(data.runs, FIG3, resolution=float(r), **({} if m is None else {"majority_share": float(m)}))
              for r in resolutions}
        name = "" if m is None else f"m_k {m:g}: "
        label, status = greater(f"{name}resolution {lo:g} more clusters than {hi:g}", at[lo], at[hi], "n_clusters", 1)
        parts[label] = status
        for r0, r1 in zip(resolutions, resolutions[1:]):
            label, status = greater(f"{name}not more clusters at {r1:g} than at {r0:g}", at[r0], at[r1], "n_clusters", 1)
            if status == "no":
                parts[label] = "no"
        rows.append(name + ", ".join(f"res {r:g} {cell(at[r], 'n_clusters').text(1)}" for r in resolutions))
    return verdict("002-res-clusters", where, text, "final clusters: " + "; ".join(rows), parts)


@claim("002")
def resolution_one_is_best(data: ClaimData) -> ClaimResult:
    text = "Resolution 1.0 is the best for community detection (ARI, at m_k 1.0)"
    where = "§V-B1, Fig. 3b"
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(resolutions) < 2 or 1.0 not in resolutions:
        return result("002-res-best", "002", where, text, "needs a resolution sweep through 1.0", None)
    at = {r: select(data.runs, FIG3, majority_share=1.0, resolution=float(r)) for r in resolutions}
    parts = dict(greater(f"resolution 1 above {r:g}", at[1.0], at[r], "ari") for r in resolutions if r != 1.0)
    return verdict("002-res-best", where, text,
                   "ARI at m_k 1.0: " + "; ".join(f"resolution {r:g}: {cell(c, 'ari').text()}" for r, c in at.items()),
                   parts)


def _attribution_cells(data: ClaimData, participation: float = 1.0) -> dict[str, pd.DataFrame]:
    return {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": participation})
            for a in ("avg", "1nn", "wnn", "late")}


@claim("002")
def one_nn_beats_wnn(data: ClaimData) -> ClaimResult:
    text = "1NN yields superior metrics to WNN (ARI and W_t accuracy, 100 % participation)"
    where = "§V-B2, Fig. 4"
    cells = _attribution_cells(data)
    if not len(cells["1nn"]) or not len(cells["wnn"]):
        return result("002-1nn-wnn", "002", where, text, "needs 1NN and WNN runs", None)
    parts = dict([greater("ARI: 1NN above WNN", cells["1nn"], cells["wnn"], "ari"),
                  greater("W_t accuracy: 1NN above WNN", cells["1nn"], cells["wnn"], W_T, 3)])
    return verdict("002-1nn-wnn", where, text,
                   f"ARI 1NN {cell(cells['1nn'], 'ari').text()} vs WNN {cell(cells['wnn'], 'ari').text()}; W_t accuracy "
                   f"1NN {cell(cells['1nn'], W_T).text(3)} vs WNN {cell(cells['wnn'], W_T).text(3)}", parts)


@claim("002")
def full_participation_beats_half(data: ClaimData) -> ClaimResult:
    text = "100 % client participation gives higher scores than 50 % (1NN and WNN, ARI and W_t accuracy)"
    where = "§V-B2, Fig. 4"
    rows, parts = [], {}
    for attribution in ("1nn", "wnn"):
        full = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 1.0})
        half = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 0.5})
        if not len(full) or not len(half):
            continue
        for metric, label in ((W_T, "W_t acc"), ("ari", "ARI")):
            rows.append(f"{attribution} {label} {cell(full, metric).text()} vs {cell(half, metric).text()}")
            key, status = greater(f"{attribution} {label}: 100 % above 50 %", full, half, metric)
            parts[key] = status
    if not rows:
        return result("002-participation", "002", where, text, "needs 100 % and 50 % runs", None)
    return verdict("002-participation", where, text, "; ".join(rows), parts)


@claim("002")
def avg_late_highest_ari_lowest_silhouette(data: ClaimData) -> ClaimResult:
    text = "AVG and Late: comparable accuracy, higher ARI and the lowest silhouette (vs 1NN / WNN, 100 % participation)"
    where = "§V-B2, Fig. 4a-c"
    cells = {a: r for a, r in _attribution_cells(data).items() if len(r)}
    if not {"avg", "late"} <= set(cells) or not {"1nn", "wnn"} & set(cells):
        return result("002-avg-late", "002", where, text, "needs AVG, Late and 1NN/WNN runs", None)
    col = silhouette_column(data.runs)
    metrics = {"ARI": "ari", col: col, "W_t accuracy": W_T}
    others = [a for a in cells if a not in ("avg", "late")]
    best = max(others, key=lambda a: cell(cells[a], W_T).mean if np.isfinite(cell(cells[a], W_T).mean) else -np.inf)
    parts = {}
    for mine in ("avg", "late"):
        for other in others:
            parts.update([greater(f"{mine} ARI above {other}", cells[mine], cells[other], "ari"),
                          greater(f"{mine} silhouette below {other}", cells[other], cells[mine], col)])
        parts.update([comparable(f"{mine} W_t accuracy comparable to {best} (the more accurate of 1NN / WNN)",
                                 cells[mine], cells[best], W_T)])
    ours = " | ".join(f"{label} " + ", ".join(f"{a} {cell(cells[a], m).text(3 if m == W_T else 2)}" for a in cells)
                      for label, m in metrics.items())
    return verdict("002-avg-late", where, text, ours, parts)


@claim("002")
def ifca_below_louvain(data: ClaimData) -> ClaimResult:
    text = "IFCA is below Louvain CFL (ARI and W_t accuracy, 100 % participation, m_k 0.7)"
    where = "§V-B2, Fig. 4a-b"
    ifca = select(data.runs, "ifca")
    louvain = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(ifca) or not len(louvain):
        return result("002-ifca", "002", where, text, "needs IFCA and Louvain 1NN runs", None)
    parts = dict([greater("ARI: 1NN above IFCA", louvain, ifca, "ari")])
    ifca_acc = cell(ifca, W_T)
    if np.isfinite(ifca_acc.mean):
        parts.update([greater("W_t accuracy: 1NN above IFCA", louvain, ifca, W_T, 3)])
    else:
        parts["W_t accuracy: IFCA's W_t is not recorded (IFCA has no global model here), missing"] = "missing"
    return verdict("002-ifca", where, text,
                   f"ARI IFCA {cell(ifca, 'ari').text()} vs 1NN {cell(louvain, 'ari').text()}; W_t accuracy IFCA "
                   f"{ifca_acc.text(3) if np.isfinite(ifca_acc.mean) else 'missing'} vs 1NN {cell(louvain, W_T).text(3)}",
                   parts)


@claim("002")
def global_model_avg_above_1nn_above_ifca(data: ClaimData) -> ClaimResult:
    text = "The global model W_t is most accurate with AVG, slightly lower with 1NN, lowest with IFCA (100 %)"
    where = "§V-B3, Fig. 5a"
    avg = select(data.runs, FIG4, attribution="avg", **{"engine.participation": 1.0})
    one = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    a, o = cell(avg, W_T), cell(one, W_T)
    if not (np.isfinite(a.mean) and np.isfinite(o.mean)):
        return result("002-global-order", "002", where, text, "W_t is not recorded for AVG and 1NN runs", None)
    parts = dict([greater("AVG above 1NN", avg, one, W_T, 3)])
    ifca = select(data.runs, "ifca")
    i = cell(ifca, W_T)
    if np.isfinite(i.mean):
        parts.update([greater("1NN above IFCA", one, ifca, W_T, 3)])
        ifca_text = i.text(3)
    else:
        ifca_text = "missing (IFCA trains k models from round 0 and has no global model W_t here)"
        parts["1NN above IFCA: IFCA's W_t missing"] = "missing"
    return verdict("002-global-order", where, text,
                   f"W_t accuracy on the held-out set: AVG {a.text(3)}, 1NN {o.text(3)}, IFCA {ifca_text}", parts)


@claim("002")
def avg_silhouette_half_and_flat(data: ClaimData) -> ClaimResult:
    level, width = AVG_SILHOUETTE
    text = f"AVG's silhouette stays ≈ {level} (read as {level} ± {width}) with minimal variation over rounds (100 %)"
    where = "§V-B3, Fig. 5b"
    runs = select(data.runs, FIG4, attribution="avg", **{"engine.participation": 1.0})
    rounds = data.rounds
    col = silhouette_column(data.runs)
    if not len(runs) or rounds is None or not len(rounds) or col not in rounds:
        return result("002-avg-sil", "002", where, text, "needs AVG's per-round silhouette", None)
    rows = rounds[rounds["algorithm"].isin(set(runs["algorithm"])) & rounds["split"].isin(set(runs["split"]))]
    rows = rows[rows["round"] >= 1].dropna(subset=[col])  # round 0: one model for everyone, no separation yet
    if not len(rows):
        return result("002-avg-sil", "002", where, text, "AVG's per-round silhouette is not recorded", None)
    levels, drifts = [], []
    for _, g in rows.groupby([k for k in PAIR_KEYS if k in rows]):
        g = g.sort_values("round")
        half = len(g) // 2
        levels.append(float(g[col].mean()))
        if half:
            drifts.append(float(g[col].iloc[half:].mean() - g[col].iloc[:half].mean()))
    lv, dr = t_interval(levels), t_interval(drifts)  # drifts: each seed against itself
    parts = {f"level within {level} ± {width}: {lv.text(2, signed=False)}": within(lv, level - width, level + width),
             f"flat: drift (second half − first half of the rounds) within ± {FLAT_DRIFT:g}: {dr.text()}":
                 within(dr, -FLAT_DRIFT, FLAT_DRIFT)}
    return verdict("002-avg-sil", where, text,
                   f"{col} of AVG over rounds 1..: per-seed mean {lv.text(2, signed=False)}, drift {dr.text()}", parts)


@claim("002")
def one_nn_half_participation_loses_communities(data: ClaimData) -> ClaimResult:
    text = (f"At 50 % participation 1NN's ARI falls close to 0 (read as ≤ {HALF_ARI_CLOSE_TO_ZERO}) while AVG and Late "
            f"keep the communities (≥ {COMMUNITIES_FOUND})")
    where = "§V-B3, Fig. 5c"
    half = {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": 0.5}) for a in ("1nn", "avg", "late")}
    if not len(half["1nn"]):
        return result("002-half-1nn", "002", where, text, "needs 1NN at 50 %", None)
    parts = dict([threshold(f"1NN ARI ≤ {HALF_ARI_CLOSE_TO_ZERO}", half["1nn"], "ari", hi=HALF_ARI_CLOSE_TO_ZERO)])
    for a in ("avg", "late"):
        parts.update([threshold(f"{a} ARI ≥ {COMMUNITIES_FOUND}", half[a], "ari", lo=COMMUNITIES_FOUND)])
    return verdict("002-half-1nn", where, text,
                   "final ARI at 50 %: " + ", ".join(f"{a} {cell(r, 'ari').text()}" for a, r in half.items()), parts)


@claim("002")
def community_models_beat_global(data: ClaimData) -> ClaimResult:
    text = "Community models beat the global model W_t on their clients' validation data (1NN, 100 %)"
    where = "§V-B3, Fig. 6"
    runs = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(runs) or "global_acc" not in runs or runs["global_acc"].isna().all():
        return result("002-global", "002", where, text, "W_t is not recorded for these runs", None)
    d = difference(runs, runs, "local_acc", "global_acc")
    return verdict("002-global", where, text,
                   f"community {cell(runs, 'local_acc').text(3)} vs global {cell(runs, 'global_acc').text(3)} (local test sets)",
                   dict([comparison("community above global", d, above(d), 3)]))


def _distance_rounds(distances: pd.DataFrame) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(round, client ids, distance matrix over them) per recorded round of a divergence.parquet frame."""
    out = []
    for rnd in sorted(distances["round"].unique()):
        part_ = distances[distances["round"] == rnd]
        ids = np.unique(np.concatenate([part_["i"].to_numpy(), part_["j"].to_numpy()]))
        pos = {int(c): k for k, c in enumerate(ids)}
        d = np.full((len(ids), len(ids)), np.nan)
        d[[pos[int(i)] for i in part_["i"]], [pos[int(j)] for j in part_["j"]]] = part_["value"].to_numpy()
        out.append((int(rnd), ids, d))
    return out


def similarity_convergence(distances: pd.DataFrame, truth: Sequence[int] | None = None) -> dict[str, float]:
    """002 Fig. 2: how fast the distribution of pairwise similarities settles, for the normalised transform (eq. 3,
    cubed) and the raw one ((max − v)³): per round, the Wasserstein distance between that round's similarity values
    and the last round's, divided by the last round's range (each transform on its own scale, as Fig. 2 plots
    each on its own axis); the mean over rounds is the area under that curve: smaller = settles faster."""
    from scipy.stats import wasserstein_distance

    from ..clustering.graph import normalised_similarity, raw_similarity

    out: dict[str, float] = {}
    recorded = _distance_rounds(distances)
    if len(recorded) < 2:
        return out
    values: dict[str, list[np.ndarray]] = {"normalised": [], "raw": []}
    for _, _, d in recorded:
        upper = np.triu_indices(len(d), k=1)
        for name, fn in (("normalised", normalised_similarity), ("raw", raw_similarity)):
            sim = fn(d, 3.0)[upper]
            values[name].append(sim[np.isfinite(sim)])
    for name, per_round in values.items():
        last = per_round[-1]
        scale = float(last.max() - last.min()) if len(last) else 0.0
        if scale <= 0:
            continue
        out[name] = float(np.mean([wasserstein_distance(v, last) / scale for v in per_round[:-1] if len(v)]))
    return out


def similarity_separation(distances: pd.DataFrame, truth: Sequence[int], first_round: int = 1) -> dict[str, float]:
    """002 Fig. 2's two modes: how well the similarity mass of all rounds from ``first_round`` on (the histogram
    002 plots) separates the pairs within a true community from the pairs between communities, for the normalised
    transform (eq. 3, cubed) and the raw one. The score is the AUC P(s_within > s_between) over the pooled values
    (0.5: no separation, 1: two disjoint modes). Within one round both transforms order the pairs alike; pooled
    over rounds the raw one's drifting scale mixes the modes, which is what Fig. 2 shows."""
    from scipy.stats import mannwhitneyu

    from ..clustering.graph import normalised_similarity, raw_similarity

    truth = np.asarray(truth)
    pooled: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {"normalised": ([], []), "raw": ([], [])}
    for rnd, ids, d in _distance_rounds(distances):
        if rnd < first_round or len(ids) < 2 or int(ids.max()) >= len(truth):
            continue
        upper = np.triu_indices(len(d), k=1)
        same = (truth[ids][:, None] == truth[ids][None, :])[upper]
        for name, fn in (("normalised", normalised_similarity), ("raw", raw_similarity)):
            sim = fn(d, 3.0)[upper]
            ok = np.isfinite(sim)
            pooled[name][0].append(sim[ok & same])
            pooled[name][1].append(sim[ok & ~same])
    out = {}
    for name, (inside, between) in pooled.items():
        a, b = np.concatenate(inside or [np.empty(0)]), np.concatenate(between or [np.empty(0)])
        if len(a) and len(b):
            out[name] = float(mannwhitneyu(a, b).statistic / (len(a) * len(b)))
    return out


@claim("002")
def normalised_similarity_separates_communities(data: ClaimData) -> ClaimResult:
    text = ("With normalised distances (eq. 3) the similarity mass separates into the within- and between-community "
            "modes, which the raw distances blur")
    where = "§V-B1, Fig. 2"
    runs = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    loaded = {(r.spec.dataset, r.spec.clients, r.spec.split, r.spec.seed, r.spec.algorithm): r for r in data.loaded}
    rows = []
    for _, row in runs.iterrows():
        run = loaded.get((row["dataset"], row["clients"], row["split"], row["seed"], row["algorithm"]))
        path = None if run is None else Path(run.spec.run_dir) / "divergence.parquet"
        truth = None if run is None else (run.manifest or {}).get("cluster_of_client")
        if path is None or not path.exists() or not truth:
            continue
        sep = similarity_separation(pd.read_parquet(path), truth)
        if set(sep) == {"normalised", "raw"}:
            rows.append({"dataset": row["dataset"], "clients": row["clients"], "seed": row["seed"], **sep})
    if not rows:
        return result("002-fig2", "002", where, text,
                      "needs the recorded distance matrices of 1NN at 100 % (divergence.parquet) and the true communities",
                      None)
    frame = pd.DataFrame(rows)
    d = difference(frame, frame, "normalised", "raw")
    return verdict("002-fig2", where, text,
                   f"AUC of within- vs between-community similarities pooled over rounds 1.. (0.5 = one mode, 1 = two "
                   f"disjoint modes), 1NN 100 %: normalised {cell(frame, 'normalised').text(3)}, raw "
                   f"{cell(frame, 'raw').text(3)}", dict([comparison("normalised above raw", d, above(d), 3)]))


def _labels_against_classes(run: Any) -> tuple[float, float, int] | None:
    """(ARI against the class groups, ARI against the majority classes, clusters) of a run's final partition."""
    from sklearn.metrics import adjusted_rand_score

    path = Path(run.spec.run_dir) / "history.parquet"
    majority = (run.manifest or {}).get("majority_class_of_client")
    if not path.exists() or not majority:
        return None
    history = pd.read_parquet(path, columns=["round", "client", "cluster"])
    final = history[history["round"] == history["round"].max()].sort_values("client")
    found = final["cluster"].to_numpy()
    classes = np.asarray(majority)[final["client"].to_numpy()]
    groups = np.asarray((run.manifest or {}).get("cluster_of_client") or [])
    truth = groups[final["client"].to_numpy()] if len(groups) else None
    ari_groups = float(adjusted_rand_score(truth, found)) if truth is not None else float("nan")
    return ari_groups, float(adjusted_rand_score(classes, found)), int(len(np.unique(found)))


@claim("002")
def superclass_communities(data: ClaimData) -> ClaimResult:
    text = (f"Louvain groups clients by superclass (the group of their majority class), not by class: ARI ≥ "
            f"{COMMUNITIES_FOUND} against the groups at m_k 0.7, resolution 1.0")
    where = "§V-B1 (animals / vehicles)"
    runs = select(data.runs, SUPERCLASS)
    if not len(runs):
        return result("002-superclass", "002", where, text,
                      "no superclass-like split in this study (CIFAR-10's majority split is one already)", None)
    rows, parts = [], {}
    loaded = {(r.spec.dataset, r.spec.clients, r.spec.split, r.spec.seed, r.spec.algorithm): r for r in data.loaded}
    for attribution, group in runs.groupby("attribution") if "attribution" in runs else [("1nn", runs)]:
        k = cell(group, "n_clusters")
        against = []
        for _, row in group.iterrows():
            key = (row["dataset"], row["clients"], row["split"], row["seed"], row["algorithm"])
            found = _labels_against_classes(loaded[key]) if key in loaded else None
            if found is not None:
                against.append({"dataset": row["dataset"], "clients": row["clients"], "seed": row["seed"],
                                "groups": row["ari"], "classes": found[1]})
        by = pd.DataFrame(against)
        rows.append(f"{attribution}: ARI vs groups {cell(group, 'ari').text()}, vs majority classes "
                    f"{cell(by, 'classes').text()}, {fmt(k.mean, 1)} clusters")
        parts.update([threshold(f"{attribution} ARI vs groups ≥ {COMMUNITIES_FOUND}", group, "ari", lo=COMMUNITIES_FOUND)])
        if len(by):
            d = difference(by, by, "classes", "groups")
            if above(d) == "yes":
                parts[comparison(f"{attribution} found the majority classes rather than the groups (ARI vs classes "
                                 f"− vs groups)", d, "no")[0]] = "no"
    return verdict("002-superclass", where, text, "; ".join(rows), parts,
                   "distance matrices ordered by group: figures/louvain_groups/")


# ---- 004 (FedGWC), §7 and App. G-J ------------------------------------------------------------------
BALANCED = "local_bacc"  # 004 App. F: balanced accuracy on the clients' local test sets


def _bacc(runs: pd.DataFrame) -> str:
    return "local_bacc_weighted" if "local_bacc_weighted" in runs and runs["local_bacc_weighted"].notna().any() else BALANCED


def _splits_of(runs: pd.DataFrame, prefix: str) -> list[str]:
    if runs is None or not len(runs):
        return []
    return [s for s in dict.fromkeys(runs["split_base"]) if str(s).startswith(prefix)]


def _at_k_by_accuracy(runs: pd.DataFrame, base: str, split: str, metric: str) -> tuple[float, Any]:
    """``metric`` of ``base`` on ``split`` at the k with the best mean balanced accuracy, and that k: 004 tunes
    IFCA's and FeSEM's k by accuracy (App. F; Table 8) and reports the other scores at that k (Table 1: C = 5 for
    both on CIFAR-100), not at the k that flatters the compared score."""
    sub = select(runs, base, split_base=split)
    if not len(sub):
        return float("nan"), None
    if "k" not in sub or sub["k"].isna().all():
        return mean_of(sub, metric), None
    col = _bacc(runs)
    scored = [(mean_of(g, col), k, mean_of(g, metric)) for k, g in sub.groupby("k")]
    scored = [t for t in scored if np.isfinite(t[0])]
    if not scored:
        return float("nan"), None
    _, k, value = max(scored, key=lambda t: t[0])
    return value, k


def paper004() -> pd.DataFrame:
    """004's Tables 1 and 3-9 (cflcore/reference/paper004_tables.csv), one row per printed cell."""
    from importlib import resources

    with resources.files("cflcore.reference").joinpath("paper004_tables.csv").open() as f:
        return pd.read_csv(f, dtype={"federation": str, "method": str})


def _paper_cells(table: int | Sequence[int], method: str, metric: str, federation: str | None = None,
                 aggregator: str | None = None) -> str:
    """004's printed values for one method and metric, e.g. "Table 4 cifar100 domains (50,50,0): 1.0 ± 0.0"."""
    ref = paper004()
    tables = [table] if isinstance(table, int) else list(table)
    rows = ref[ref["table"].isin(tables) & (ref["method"] == method) & (ref["metric"] == metric)]
    if federation is not None:
        rows = rows[rows["federation"] == federation]
    if aggregator is not None:
        rows = rows[rows["aggregator"] == aggregator]
    label = {"fedgwc": "FedGWC", "ifca": "IFCA", "fesem": "FeSEM"}.get(method, method)
    return "; ".join(f"{label} Table {r.table} {r.dataset} {r.federation}: {r['mean']}" + (f" ± {r.sd}" if pd.notna(r.sd) else "")
                     for _, r in rows.iterrows())


@claim("004")
def fedgwc_separates_visual_domains(data: ClaimData) -> ClaimResult:
    text = "FedGWC separates the visual domains: Rand index close to 1 on clean/noise and clean/blur federations"
    where = "§7.3, Tables 4 and 7"
    splits = [s for s in _splits_of(data.runs, "domains") if s != "domains-3"]
    if not splits:
        return result("004-domains", "004", where, text, "no two-domain federation in this study", None)
    rands = {s: mean_of(select(data.runs, "fedgwc", split_base=s), "rand") for s in splits}
    ks = {s: mean_of(select(data.runs, "fedgwc", split_base=s), "n_clusters") for s in splits}
    ours = "; ".join(f"{s}: Rand {fmt(r)}, {fmt(ks[s], 1)} clusters" for s, r in rands.items())
    ours += f" | 004: {_paper_cells((4, 7), 'fedgwc', 'rand', 'domains (50,50,0)')}"
    finite = [r for r in rands.values() if np.isfinite(r)]
    return result("004-domains", "004", where, text, ours, bool(finite and min(finite) >= 0.9) if finite else None)


@claim("004")
def fedgwc_negative_control(data: ClaimData) -> ClaimResult:
    """004 Fig. 6: on a homogeneous federation the running MSE of P falls below ε, and Alg. 2 then decides not to
    split. A run that never reaches ε tests nothing (n/a); where the server trace records Alg. 2's decisions
    (``db_considered``), a run in which it never decided tests nothing either, and the row gives each run's number
    of decisions and the best Davies–Bouldin score among them (a split needs DB < 1)."""
    text = ("Negative control: on a homogeneous federation FedGWC's running MSE reaches ε and it does not split "
            "(one cluster to the end)")
    where = "§7.2, Fig. 6"
    runs = [r for r in data.loaded if str(r.spec.split).startswith("homogeneous") and r.spec.algorithm == "fedgwc"
            and r.server is not None and {"min_mse", "epsilon", "n_clusters"} <= set(r.server.columns)]
    if not runs:
        return result("004-negative-control", "004", where, text, "no FedGWC run on a homogeneous federation", None)
    rows, reached_all, split_any = [], True, False
    for run in sorted(runs, key=lambda r: r.spec.seed):
        server = run.server.sort_values("round")
        below = server[pd.to_numeric(server["min_mse"], errors="coerce") < pd.to_numeric(server["epsilon"], errors="coerce")]
        most = int(pd.to_numeric(server["n_clusters"], errors="coerce").max())
        decided = ""
        if "db_considered" in server.columns:
            decisions = server[server["db_considered"].map(lambda cell: len(diagnostics_cell(cell) or ())) > 0]
            best_db = pd.to_numeric(decisions.get("min_db"), errors="coerce").min() if len(decisions) else np.nan
            decided = f", {len(decisions)} Alg. 2 decisions" + (f" (best DB {best_db:.2f})" if np.isfinite(best_db)
                                                                else "")
            reached_all &= len(decisions) > 0
        reached_all &= not below.empty
        split_any |= most > 1
        rows.append(f"s{run.spec.seed}: " + (f"MSE < ε from round {int(below['round'].iloc[0]) + 1}" if len(below)
                                            else "MSE never below ε") + decided + f", at most {most} cluster(s)")
    ours = "; ".join(rows)
    if not reached_all:
        return result("004-negative-control", "004", where, text, ours + " (a run that never reaches ε, or in "
                      "which Alg. 2 never decides, tests nothing)", None)
    return result("004-negative-control", "004", where, text, ours, not split_any)


def _fedgwc_beats_k_methods(data: ClaimData, split_prefix: str, metric: str) -> tuple[list[str], bool | None]:
    """Per split of ``split_prefix``: FedGWC's ``metric`` against IFCA's and FeSEM's at the k each reaches its best
    balanced accuracy (004 tunes k by accuracy); (one text per split, whether FedGWC is at least as good
    everywhere; None without such splits)."""
    rows, ok, seen = [], True, False
    for split in _splits_of(data.runs, split_prefix):
        gwc_runs = select(data.runs, "fedgwc", split_base=split)
        gwc = mean_of(gwc_runs, metric)
        tuned = {b: _at_k_by_accuracy(data.runs, b, split, metric) for b in ("ifca", "fesem")}
        tuned = {b: vk for b, vk in tuned.items() if np.isfinite(vk[0])}
        if not tuned or not len(gwc_runs):
            continue
        if not np.isfinite(gwc):  # one cluster in every seed: a clustering score is undefined, FedGWC found nothing
            seen, ok = True, False
            rows.append(f"{split}: FedGWC one cluster ({fmt(mean_of(gwc_runs, 'n_clusters'), 1)} on average), "
                        f"{metric} undefined")
            continue
        seen = True
        rows.append(f"{split}: FedGWC {fmt(gwc)} vs " + ", ".join(
            f"{b} {fmt(v)}" + (f" (k {k:g}, best accuracy)" if k is not None else "") for b, (v, k) in tuned.items()))
        ok &= bool(gwc >= max(v for v, _ in tuned.values()) - 0.01)
    return rows, (ok if seen else None)


@claim("004")
def fedgwc_beats_ifca_fesem_on_domains(data: ClaimData) -> ClaimResult:
    text = "FedGWC's Rand index on domain federations beats IFCA's and FeSEM's (their best k)"
    rows, holds = _fedgwc_beats_k_methods(data, "domains", "rand")
    # the domain federation the baselines run on offline is the three-domain one (domains-3 = 004's 40/30/30)
    paper = "; ".join(_paper_cells((4, 7), m, "rand", "domains (40,30,30)") for m in ("fedgwc", "ifca", "fesem"))
    return result("004-domains-baselines", "004", "§7.3, Tables 4 and 7", text,
                  ("; ".join(rows) or "needs FedGWC and IFCA/FeSEM on domains") + f" | 004: {paper}", holds)


@claim("004")
def fedgwc_best_was_on_mixes(data: ClaimData) -> ClaimResult:
    text = "FedGWC has the best WAS among the clustered methods on the heterogeneity mixes"
    rows, holds = _fedgwc_beats_k_methods(data, "mix", "was")
    paper = "; ".join(_paper_cells((3, 6), m, "was", "mix (40,30,30)") for m in ("fedgwc", "ifca", "fesem"))
    return result("004-was", "004", "§7.3, Tables 3 and 6", text,
                  ("; ".join(rows) or "needs FedGWC and IFCA/FeSEM on mixes") + f" | 004: {paper}", holds)


def _split_early(data: ClaimData, runs: pd.DataFrame) -> pd.Series:
    """Per run of ``runs``: whether its first split came in the first half of its rounds (first_clustering_round
    from the run summaries, the number of rounds from the per-round frame); False when unknown."""
    keys = ["dataset", "clients", "split", "seed", "algorithm"]
    summaries, rounds = data.summaries, data.rounds
    if not len(runs) or summaries is None or "first_clustering_round" not in summaries or rounds is None or not len(rounds):
        return pd.Series(False, index=runs.index)
    first = runs[keys].merge(summaries[[*keys, "first_clustering_round"]], on=keys, how="left")["first_clustering_round"]
    total = runs[keys].merge((rounds.groupby(keys)["round"].max() + 1).rename("n_rounds").reset_index(), on=keys,
                             how="left")["n_rounds"]
    early = (pd.to_numeric(first, errors="coerce") <= pd.to_numeric(total, errors="coerce") / 2).fillna(False)
    return pd.Series(early.to_numpy(dtype=bool), index=runs.index)


@claim("004")
def fedgwc_robust_to_beta(data: ClaimData) -> ClaimResult:
    text = "FedGWC is robust to β: balanced accuracy varies by at most ~4 points over β ∈ {0.1 … 4}"
    where = "App. G, Table 5"
    betas = factor_values(data.runs, "fedgwc-beta", "beta")
    if len(betas) < 2:
        return result("004-beta", "004", where, text, "no β sweep in this study", None)
    swept = select(data.runs, "fedgwc-beta")
    early = swept[_split_early(data, swept)]
    if early.empty:
        return result("004-beta", "004", where, text, "no run of the β sweep split in the first half of its rounds: "
                      "the sweep cannot show robustness of the clustered models", None)
    col = _bacc(data.runs)
    rows, spread = [], 0.0
    for split in dict.fromkeys(early["split_base"]):
        values = [mean_of(select(early, "fedgwc-beta", split_base=split, beta=float(b)), col) for b in betas]
        finite = [v for v in values if np.isfinite(v)]
        if len(finite) >= 2:
            spread = max(spread, max(finite) - min(finite))
            rows.append(f"{split}: " + ", ".join(f"β {b:g} {fmt(100 * v, 1)}" for b, v in zip(betas, values)))
    paper = paper004()
    t5 = paper[paper["table"] == 5]
    spreads = {d: float(g["mean"].max() - g["mean"].min()) for d, g in t5.groupby("dataset", sort=False)}
    ours = ("; ".join(rows) + f" (largest spread {fmt(100 * spread, 1)} points; runs that split in the first half only, "
            f"{len(early)} of {len(swept)})") if rows else f"fewer than two β values split early ({len(early)} of {len(swept)} runs)"
    ours += " | 004 Table 5 spreads: " + ", ".join(f"{d} {v:.1f}" for d, v in spreads.items())
    return result("004-beta", "004", where, text, ours, bool(spread <= 0.04) if rows else None)


@claim("004")
def clustering_helps_more_with_heterogeneity(data: ClaimData) -> ClaimResult:
    text = ("Per dataset (Table 1 sets α per dataset), clustering helps more as heterogeneity grows: FedGWC's gain over "
            "FedAvg is larger on the dataset's more heterogeneous Dirichlet federation")
    where = "§7.1, Table 1"
    col = _bacc(data.runs)
    runs = data.runs
    gains: dict[str, dict[str, float]] = {}
    for split in _splits_of(runs, "dirichlet"):
        for dataset in dict.fromkeys(select(runs, split_base=split)["dataset"]):
            gwc = mean_of(select(runs, "fedgwc", split_base=split, dataset=dataset), col)
            avg = mean_of(select(runs, "fedavg", split_base=split, dataset=dataset), col)
            if np.isfinite(gwc) and np.isfinite(avg):
                gains.setdefault(dataset, {})[split] = gwc - avg
    paper = paper004()
    t1 = paper[(paper["table"] == 1) & (paper["metric"] == "acc")]
    paper_gain = "; ".join(
        f"{d} ({g['federation'].iloc[0]}): FedGWC − FedAvg {float(g.loc[g['method'] == 'fedgwc', 'mean'].iloc[0]) - float(g.loc[g['method'] == 'fedavg', 'mean'].iloc[0]):+.1f} points"
        for d, g in t1.groupby("dataset", sort=False))
    alpha = {s: mean_of(runs[runs["split_base"] == s], "split_alpha") if "split_alpha" in runs else np.nan
             for per in gains.values() for s in per}
    usable = {d: per for d, per in gains.items() if len(per) >= 2 and all(np.isfinite(alpha[s]) for s in per)}
    if not usable:
        return result("004-heterogeneity", "004", where, text,
                      f"needs FedGWC and FedAvg on two Dirichlet federations of one dataset | 004: {paper_gain}", None)
    rows, ok = [], True
    for dataset, per in usable.items():
        ordered = sorted(per, key=lambda s: alpha[s])
        rows.append(f"{dataset}: " + ", ".join(f"{s} (α {alpha[s]:g}) {fmt(100 * per[s], 1)} points" for s in ordered))
        ok &= bool(per[ordered[0]] > per[ordered[-1]])
    return result("004-heterogeneity", "004", where, text, "; ".join(rows) + f" | 004: {paper_gain}", ok)


@claim("004")
def fedgwc_improves_each_aggregator(data: ClaimData) -> ClaimResult:
    text = "FedGWC improves each aggregator it wraps (FedAvg, FedAvgM, FedProx, pFedMe, Per-FedAvg)"
    where = "App. J, Table 9"
    col = _bacc(data.runs)
    pairs = (("fedgwc", "fedavg"), ("fedgwc-fedavgm", "fedavgm"), ("fedgwc-fedprox", "fedprox"),
             ("fedgwc-pfedme", "pfedme"), ("fedgwc-perfedavg", "perfedavg"))
    rows, ok, seen = [], True, False
    for split in _splits_of(data.runs, "dirichlet"):
        for wrapped, plain in pairs:
            w, p = mean_of(select(data.runs, wrapped, split_base=split), col), mean_of(select(data.runs, plain, split_base=split), col)
            if np.isfinite(w) and np.isfinite(p):
                seen = True
                rows.append(f"{split} {plain}: {fmt(100 * p, 1)} → {fmt(100 * w, 1)}")
                ok &= bool(w >= p - 0.005)
    ref = paper004()
    t9 = ref[(ref["table"] == 9) & ref["aggregator"].isin(["fedavg", "fedavgm", "fedprox", "pfedme", "per-fedavg"])]
    paper = "; ".join(f"{d} {a}: {g.loc[g['method'] != 'fedgwc', 'mean'].iloc[0]} → {g.loc[g['method'] == 'fedgwc', 'mean'].iloc[0]}"
                      for (d, a), g in t9.groupby(["dataset", "aggregator"], sort=False))
    return result("004-aggregators", "004", where, text,
                  ("; ".join(rows) or "needs the wrapped and plain aggregators") + f" | 004 Table 9: {paper}",
                  ok if seen else None)


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
