"""Paper checks of the seeds' qualitative claims: one row per claim, ours against the paper's, and whether it holds.

000's check compares published table cells (cflcore.report.paper); 002 and 004 publish figures and
qualitative statements, so their checks are claims: a function of the study's runs that returns what we
measured, what the paper says, and ``holds`` = ``yes`` / ``no`` / ``n/a`` (the study has no run that can
test it, with the reason). A claim that does not hold carries the study's own explanation where the config
gives one (``report.claim_notes: {claim id: text}``: the investigation's result, next to the departures it
comes from), else a pointer to the traces that show it.

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

ACCURACY = "orch_acc"  # each client's own model on the balanced held-out set (002's "accuracy")


@dataclass(frozen=True)
class ClaimResult:
    claim_id: str
    paper: str  # seed
    where: str  # section / figure of the seed
    claim: str
    ours: str
    holds: str  # yes / no / n/a
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


def result(fn_id: str, paper: str, where: str, text: str, ours: str, holds: bool | None, note: str = "") -> ClaimResult:
    return ClaimResult(fn_id, paper, where, text, ours, "n/a" if holds is None else ("yes" if holds else "no"), note)


def factor_values(runs: pd.DataFrame, base: str, column: str) -> list:
    sub = select(runs, base)
    if not len(sub) or column not in sub:
        return []
    values = sub[column].dropna().unique().tolist()
    return sorted(values) if all(isinstance(v, (int, float)) for v in values) else values


# ---- 002 (Louvain community CFL), §V-B ---------------------------------------------------------------
FIG3, FIG4, SUPERCLASS = "louvain-fig3", "louvain-fig4", "louvain-superclass"
BOUNDED = {"ari": 1.0, ACCURACY: 1.0, "local_acc": 1.0, "global_orch_acc": 1.0, "silhouette": 1.0,
           "silhouette_method": 1.0}
"""Scores with an upper bound: two cells both at it (to the two printed digits) are a saturated tie."""
HALF_ARI_CLOSE_TO_ZERO = 0.3  # 002 §V-B3: 1NN's ARI at 50 % "close to 0"; read as ARI ≤ 0.3
COMMUNITIES_FOUND = 0.9  # "finds the communities" / "optimal detection": ARI ≥ 0.9, as for 002-mk1
AVG_SILHOUETTE = (0.5, 0.1)  # 002 §V-B3, Fig. 5b: AVG's silhouette "remains approximately 0.5": 0.5 ± 0.1


@dataclass(frozen=True)
class Cell:
    """A score over the seeds of one cell: mean, sample std (002's ± std envelope; NaN with one seed), seeds."""

    mean: float
    sd: float
    n: int

    def text(self, digits: int = 2) -> str:
        return fmt(self.mean, digits) + (f" ± {fmt(self.sd, digits)}" if self.n >= 2 and np.isfinite(self.sd) else "")


def cell(runs: pd.DataFrame, metric: str) -> Cell:
    if runs is None or not len(runs) or metric not in runs:
        return Cell(float("nan"), float("nan"), 0)
    values = pd.to_numeric(runs[metric], errors="coerce").dropna().to_numpy(dtype=np.float64)
    if not len(values):
        return Cell(float("nan"), float("nan"), 0)
    return Cell(float(values.mean()), float(values.std(ddof=1)) if len(values) >= 2 else float("nan"), len(values))


def envelope(a: Cell, b: Cell) -> float:
    """The tolerance of a comparison: the two cells' ± std seed envelopes combined, √(sd_a² + sd_b²) (0 where a
    cell has one seed)."""
    return float(np.hypot(*(c.sd if np.isfinite(c.sd) else 0.0 for c in (a, b))))


def order(a: Cell, b: Cell, metric: str) -> str:
    """``a`` against ``b``: ``greater`` / ``less`` beyond the seed envelope, ``tie`` within it, ``saturated`` when
    both sit at the metric's upper bound (a tie the proxy cannot order), ``missing`` without data."""
    if not (np.isfinite(a.mean) and np.isfinite(b.mean)):
        return "missing"
    tol, diff = envelope(a, b), a.mean - b.mean
    bound = BOUNDED.get(metric)
    if bound is not None and min(a.mean, b.mean) >= bound - 0.005 and abs(diff) <= tol + 0.005:
        return "saturated"
    return "greater" if diff > tol else "less" if diff < -tol else "tie"


def part(a: Cell, b: Cell, metric: str, want: str = "greater") -> str:
    """One comparison of a claim: ``yes`` / ``no`` / ``tie`` (within the seed envelope: does not hold) / ``sat`` (a
    saturated tie: untestable) / ``missing``. ``want`` = ``greater`` (a above b beyond the envelope) or
    ``comparable`` (within it)."""
    o = order(a, b, metric)
    if o in ("missing", "saturated"):
        return "sat" if o == "saturated" and want == "greater" else ("yes" if o == "saturated" else "missing")
    if want == "comparable":
        return "yes" if o == "tie" else "no"
    return "yes" if o == "greater" else "tie" if o == "tie" else "no"


def combine(parts: Mapping[str, str]) -> tuple[bool | None, str]:
    """A claim's verdict from its parts: any ``no`` or unsaturated ``tie`` fails it (002 claims a difference, and
    none shows beyond the seed envelope); else a saturated tie or a missing part makes it n/a (never "holds" on a
    tie); else it holds. The note names the parts that decided."""
    failed = [k for k, v in parts.items() if v == "no"]
    within = [k for k, v in parts.items() if v == "tie"]
    if failed or within:
        return False, "does not hold: " + "; ".join(
            [*failed, *(f"{k} (no difference beyond the seed envelope)" for k in within)])
    tied = [k for k, v in parts.items() if v == "sat"]
    missing = [k for k, v in parts.items() if v == "missing"]
    if tied:
        return None, ("n/a: a tie at a saturated value, which this proxy cannot order: " + "; ".join(tied)
                      + (f"; not measured: {'; '.join(missing)}" if missing else ""))
    if missing:
        return None, "n/a: not measured: " + "; ".join(missing)
    return (True, "") if parts else (None, "n/a: nothing to compare")


def verdict(fn_id: str, where: str, text: str, ours: str, parts: Mapping[str, str], note: str = "") -> ClaimResult:
    holds, why = combine(parts)
    return result(fn_id, "002", where, text, ours, holds, "; ".join(x for x in (why, note) if x))


def _mk_cells(data: ClaimData, metric: str, resolution: float = 1.0) -> tuple[list[float], list[Cell]]:
    shares = factor_values(data.runs, FIG3, "majority_share")
    return shares, [cell(select(data.runs, FIG3, majority_share=float(m), resolution=resolution), metric) for m in shares]


@claim("002")
def ari_rises_with_majority_share(data: ClaimData) -> ClaimResult:
    text = "ARI rises with the majority share m_k (1NN, resolution 1.0)"
    where = "§V-B1, Fig. 3b"
    shares, cells = _mk_cells(data, "ari")
    if len(shares) < 2:
        return result("002-ari-mk", "002", where, text, "no m_k sweep in this study", None)
    ours = "; ".join(f"m_k {m:g}: {c.text()}" for m, c in zip(shares, cells))
    parts = {f"m_k {shares[-1]:g} above m_k {shares[0]:g}": part(cells[-1], cells[0], "ari")}
    for (m0, a), (m1, b) in zip(zip(shares, cells), zip(shares[1:], cells[1:])):
        if order(b, a, "ari") == "less":
            parts[f"ARI falls from m_k {m0:g} to {m1:g} beyond the envelope"] = "no"
    return verdict("002-ari-mk", where, text, ours, parts)


@claim("002")
def two_communities_at_full_majority(data: ClaimData) -> ClaimResult:
    text = f"At m_k = 1.0 and resolution 1.0, Louvain finds the two communities (ARI ≈ 1, read as ≥ {COMMUNITIES_FOUND})"
    where = "§V-B1, Fig. 3b"
    runs = select(data.runs, FIG3, majority_share=1.0, resolution=1.0)
    if not len(runs):
        return result("002-mk1", "002", where, text, "no run at m_k 1.0, resolution 1.0", None)
    ari, k = cell(runs, "ari"), cell(runs, "n_clusters")
    return result("002-mk1", "002", where, text, f"final ARI {ari.text()}, {fmt(k.mean, 1)} clusters ({ari.n} seeds)",
                  bool(ari.mean >= COMMUNITIES_FOUND))


@claim("002")
def accuracy_depends_on_mk_not_resolution(data: ClaimData) -> ClaimResult:
    text = "Accuracy depends on m_k, not notably on the Louvain resolution"
    where = "§V-B1, Fig. 3a"
    shares = factor_values(data.runs, FIG3, "majority_share")
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(shares) < 2 or len(resolutions) < 2:
        return result("002-acc-res", "002", where, text, "needs an m_k × resolution sweep", None)
    grid = [[cell(select(data.runs, FIG3, majority_share=float(m), resolution=float(r)), ACCURACY) for r in resolutions]
            for m in shares]
    means = np.array([[c.mean for c in row] for row in grid])
    sds = np.array([[c.sd for c in row] for row in grid])
    across_mk = float(np.nanmax(np.nanmean(means, axis=1)) - np.nanmin(np.nanmean(means, axis=1)))
    across_res = float(np.nanmax(np.nanmax(means, axis=1) - np.nanmin(means, axis=1)))
    noise = float(np.sqrt(2) * np.nanmean(sds)) if np.isfinite(sds).any() else 0.0  # a difference of two cells' envelopes
    parts = {f"accuracy range across m_k {fmt(across_mk)} beyond the envelope {fmt(noise)}": "yes" if across_mk > noise else "no",
             f"range across resolutions {fmt(across_res)} below the range across m_k": "yes" if across_res < across_mk else "no"}
    return verdict("002-acc-res", where, text,
                   f"accuracy range across m_k {fmt(across_mk)}; largest range across resolutions at one m_k {fmt(across_res)}; "
                   f"seed envelope of a difference {fmt(noise)}", parts)


@claim("002")
def silhouette_rises_with_mk_and_resolution(data: ClaimData) -> ClaimResult:
    text = "Clusters are denser and better separated (silhouette) with more non-iid data and a higher resolution"
    where = "§V-B1, Fig. 3c"
    shares, cells = _mk_cells(data, silhouette_column(data.runs))
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(shares) < 2:
        return result("002-sil-mk", "002", where, text, "no m_k sweep in this study", None)
    col = silhouette_column(data.runs)
    parts = {f"m_k {shares[-1]:g} above m_k {shares[0]:g} (resolution 1.0)": part(cells[-1], cells[0], col)}
    ours = f"{col} at resolution 1.0: " + "; ".join(f"m_k {m:g}: {c.text()}" for m, c in zip(shares, cells))
    if len(resolutions) >= 2:
        lo, hi = min(resolutions), max(resolutions)
        orders = {m: order(cell(select(data.runs, FIG3, majority_share=float(m), resolution=float(hi)), col),
                           cell(select(data.runs, FIG3, majority_share=float(m), resolution=float(lo)), col), col)
                  for m in shares}
        above = [m for m, o in orders.items() if o == "greater"]
        below = [m for m, o in orders.items() if o == "less"]
        parts[f"resolution {hi:g} above {lo:g} beyond the envelope at most m_k and below at none"] = \
            "yes" if len(above) > len(shares) / 2 and not below else "no"
        ours += (f" | resolution {hi:g} vs {lo:g}: above at m_k {', '.join(f'{m:g}' for m in above) or 'none'}"
                 f"; below at m_k {', '.join(f'{m:g}' for m in below) or 'none'}")
    else:
        parts["resolution (no resolution sweep)"] = "missing"
    return verdict("002-sil-mk", where, text, ours, parts)


@claim("002")
def higher_resolution_fewer_clusters(data: ClaimData) -> ClaimResult:
    text = "A higher Louvain resolution gives fewer, larger clusters"
    where = "§IV-B, §V-B1"
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(resolutions) < 2:
        return result("002-res-clusters", "002", where, text, "no resolution sweep in this study", None)
    cells = [cell(select(data.runs, FIG3, resolution=float(r)), "n_clusters") for r in resolutions]
    parts = {f"resolution {resolutions[0]:g} more clusters than {resolutions[-1]:g}": part(cells[0], cells[-1], "n_clusters")}
    for (r0, a), (r1, b) in zip(zip(resolutions, cells), zip(resolutions[1:], cells[1:])):
        if order(b, a, "n_clusters") == "greater":
            parts[f"more clusters at {r1:g} than at {r0:g}"] = "no"
    return verdict("002-res-clusters", where, text,
                   "clusters (final round, all m_k): " + "; ".join(f"resolution {r:g}: {c.text(1)}" for r, c in zip(resolutions, cells)),
                   parts)


@claim("002")
def resolution_one_is_best(data: ClaimData) -> ClaimResult:
    text = "Resolution 1.0 is the best for community detection (ARI, at m_k 1.0)"
    where = "§V-B1, Fig. 3b"
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(resolutions) < 2 or 1.0 not in resolutions:
        return result("002-res-best", "002", where, text, "needs a resolution sweep through 1.0", None)
    cells = {r: cell(select(data.runs, FIG3, majority_share=1.0, resolution=float(r)), "ari") for r in resolutions}
    parts = {}
    for r, c in cells.items():
        if r != 1.0:
            o = order(cells[1.0], c, "ari")
            parts[f"1.0 vs {r:g}"] = {"greater": "yes", "less": "no", "tie": "yes", "saturated": "sat"}.get(o, "missing")
    return verdict("002-res-best", where, text,
                   "ARI at m_k 1.0: " + "; ".join(f"resolution {r:g}: {c.text()}" for r, c in cells.items()), parts,
                   "a tie within the seed envelope (unsaturated) counts as best-or-equal")


def _attribution_cells(data: ClaimData, participation: float = 1.0) -> dict[str, pd.DataFrame]:
    return {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": participation})
            for a in ("avg", "1nn", "wnn", "late")}


@claim("002")
def one_nn_beats_wnn(data: ClaimData) -> ClaimResult:
    text = "1NN yields superior metrics to WNN (ARI and accuracy, 100 % participation)"
    where = "§V-B2, Fig. 4"
    cells = _attribution_cells(data)
    if not len(cells["1nn"]) or not len(cells["wnn"]):
        return result("002-1nn-wnn", "002", where, text, "needs 1NN and WNN runs", None)
    one = {m: cell(cells["1nn"], m) for m in ("ari", ACCURACY)}
    wnn = {m: cell(cells["wnn"], m) for m in ("ari", ACCURACY)}
    parts = {f"{label}: 1NN above WNN": part(one[m], wnn[m], m) for m, label in (("ari", "ARI"), (ACCURACY, "accuracy"))}
    return verdict("002-1nn-wnn", where, text,
                   f"ARI 1NN {one['ari'].text()} vs WNN {wnn['ari'].text()}; accuracy 1NN {one[ACCURACY].text(3)} vs "
                   f"WNN {wnn[ACCURACY].text(3)}", parts)


@claim("002")
def full_participation_beats_half(data: ClaimData) -> ClaimResult:
    text = "100 % client participation gives higher scores than 50 % (1NN and WNN; ARI the most affected)"
    where = "§V-B2, Fig. 4"
    rows, parts = [], {}
    for attribution in ("1nn", "wnn"):
        full = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 1.0})
        half = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 0.5})
        if not len(full) or not len(half):
            continue
        for metric, label in ((ACCURACY, "acc"), ("ari", "ARI")):
            f, h = cell(full, metric), cell(half, metric)
            rows.append(f"{attribution} {label} {f.text()} vs {h.text()}")
            parts[f"{attribution} {label}"] = part(f, h, metric)
    if not rows:
        return result("002-participation", "002", where, text, "needs 100 % and 50 % runs", None)
    return verdict("002-participation", where, text, "; ".join(rows), parts,
                   "a difference counts beyond the two cells' ± std seed envelopes combined")


@claim("002")
def avg_late_highest_ari_lowest_silhouette(data: ClaimData) -> ClaimResult:
    text = "AVG and Late: comparable accuracy, higher ARI and the lowest silhouette (vs 1NN / WNN, 100 % participation)"
    where = "§V-B2, Fig. 4a-c"
    cells = {a: r for a, r in _attribution_cells(data).items() if len(r)}
    if not {"avg", "late"} <= set(cells) or not {"1nn", "wnn"} & set(cells):
        return result("002-avg-late", "002", where, text, "needs AVG, Late and 1NN/WNN runs", None)
    col = silhouette_column(data.runs)
    metrics = {"ARI": "ari", col: col, "accuracy": ACCURACY}
    c = {a: {label: cell(r, m) for label, m in metrics.items()} for a, r in cells.items()}
    parts = {}
    others = [a for a in cells if a not in ("avg", "late")]
    best = max(others, key=lambda a: c[a]["accuracy"].mean if np.isfinite(c[a]["accuracy"].mean) else -np.inf)
    for mine in ("avg", "late"):
        for other in others:
            parts[f"{mine} ARI above {other}"] = part(c[mine]["ARI"], c[other]["ARI"], "ari")
            parts[f"{mine} silhouette below {other}"] = part(c[other][col], c[mine][col], col)
        parts[f"{mine} accuracy comparable to {best} (the more accurate of 1NN / WNN)"] = part(
            c[mine]["accuracy"], c[best]["accuracy"], ACCURACY, "comparable")
    ours = " | ".join(f"{label} " + ", ".join(f"{a} {c[a][label].text(3 if label == 'accuracy' else 2)}" for a in c)
                      for label in metrics)
    return verdict("002-avg-late", where, text, ours, parts, "comparable = within the seed envelope")


@claim("002")
def ifca_below_louvain(data: ClaimData) -> ClaimResult:
    text = "IFCA is below Louvain CFL (accuracy and ARI, 100 % participation, m_k 0.7)"
    where = "§V-B2, Fig. 4a-b"
    ifca = select(data.runs, "ifca")
    louvain = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(ifca) or not len(louvain):
        return result("002-ifca", "002", where, text, "needs IFCA and Louvain 1NN runs", None)
    c = {name: {m: cell(r, m) for m in ("ari", ACCURACY)} for name, r in (("ifca", ifca), ("1nn", louvain))}
    parts = {"ARI: 1NN above IFCA": part(c["1nn"]["ari"], c["ifca"]["ari"], "ari"),
             "accuracy: 1NN above IFCA": part(c["1nn"][ACCURACY], c["ifca"][ACCURACY], ACCURACY)}
    return verdict("002-ifca", where, text,
                   f"ARI IFCA {c['ifca']['ari'].text()} vs 1NN {c['1nn']['ari'].text()}; accuracy IFCA "
                   f"{c['ifca'][ACCURACY].text(3)} vs 1NN {c['1nn'][ACCURACY].text(3)}", parts)


@claim("002")
def global_model_avg_above_1nn_above_ifca(data: ClaimData) -> ClaimResult:
    text = "The global model W_t is most accurate with AVG, slightly lower with 1NN, lowest with IFCA (100 %)"
    where = "§V-B3, Fig. 5a"
    avg = select(data.runs, FIG4, attribution="avg", **{"engine.participation": 1.0})
    one = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    metric = "global_orch_acc"
    a, o = cell(avg, metric), cell(one, metric)
    if not (np.isfinite(a.mean) and np.isfinite(o.mean)):
        return result("002-global-order", "002", where, text, "W_t is not recorded for AVG and 1NN runs", None)
    parts = {"AVG above 1NN": part(a, o, metric)}
    ifca = select(data.runs, "ifca")
    i = cell(ifca, metric)
    if np.isfinite(i.mean):
        parts["1NN above IFCA"] = part(o, i, metric)
        ifca_text = i.text(3)
    else:
        ifca_text = ("not recorded: IFCA trains k models from round 0 and has no global model W_t here "
                     "(Strategy.global_model), so that part is untested")
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
    rows = rows[rows["round"] >= 1]  # round 0: one model for everyone, no separation yet
    per_round = rows.groupby("round")[col].agg(["mean", "std"])
    if not len(per_round) or per_round["mean"].isna().all():
        return result("002-avg-sil", "002", where, text, "AVG's per-round silhouette is not recorded", None)
    mean = float(per_round["mean"].mean())
    across_rounds = float(per_round["mean"].std(ddof=1))
    across_seeds = float(per_round["std"].mean()) if per_round["std"].notna().any() else float("nan")
    parts = {f"level {fmt(mean)} within {level} ± {width}": "yes" if abs(mean - level) <= width else "no"}
    if np.isfinite(across_seeds):
        parts[f"flat: std over rounds {fmt(across_rounds)} ≤ mean seed std {fmt(across_seeds)}"] = \
            "yes" if across_rounds <= across_seeds else "no"
    else:
        parts["flat (one seed: no envelope)"] = "missing"
    return verdict("002-avg-sil", where, text,
                   f"{col} of AVG over rounds 1..: mean {fmt(mean)}, std over rounds {fmt(across_rounds)}, "
                   f"mean std over seeds {fmt(across_seeds)}", parts)


@claim("002")
def one_nn_half_participation_loses_communities(data: ClaimData) -> ClaimResult:
    text = (f"At 50 % participation 1NN's ARI falls close to 0 (read as ≤ {HALF_ARI_CLOSE_TO_ZERO}) while AVG and Late "
            f"keep the communities (≥ {COMMUNITIES_FOUND})")
    where = "§V-B3, Fig. 5c"
    half = {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": 0.5}) for a in ("1nn", "avg", "late")}
    if not len(half["1nn"]):
        return result("002-half-1nn", "002", where, text, "needs 1NN at 50 %", None)
    ari = {a: cell(r, "ari") for a, r in half.items()}
    parts = {f"1NN ARI {fmt(ari['1nn'].mean)} ≤ {HALF_ARI_CLOSE_TO_ZERO}": "yes" if ari["1nn"].mean <= HALF_ARI_CLOSE_TO_ZERO else "no"}
    for a in ("avg", "late"):
        parts[f"{a} ARI ≥ {COMMUNITIES_FOUND}"] = ("missing" if not np.isfinite(ari[a].mean)
                                                   else "yes" if ari[a].mean >= COMMUNITIES_FOUND else "no")
    return verdict("002-half-1nn", where, text, "final ARI at 50 %: " + ", ".join(f"{a} {c.text()}" for a, c in ari.items()),
                   parts)


@claim("002")
def community_models_beat_global(data: ClaimData) -> ClaimResult:
    text = "Community models beat the global model W_t on their clients' validation data (1NN, 100 %)"
    where = "§V-B3, Fig. 6"
    runs = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(runs) or "global_acc" not in runs or runs["global_acc"].isna().all():
        return result("002-global", "002", where, text, "W_t is not recorded for these runs", None)
    own, glob = cell(runs, "local_acc"), cell(runs, "global_acc")
    return verdict("002-global", where, text, f"community {own.text(3)} vs global {glob.text(3)} (local test sets)",
                   {"community above global": part(own, glob, "local_acc")})


def similarity_convergence(distances: pd.DataFrame, truth: Sequence[int] | None = None) -> dict[str, float]:
    """002 Fig. 2: how fast the distribution of pairwise similarities settles, for the normalised transform (eq. 3,
    cubed) and the raw one ((max − v)³): per round, the Wasserstein distance between that round's similarity values
    and the last round's, divided by the last round's range (each transform on its own scale, as Fig. 2 plots
    each on its own axis); the mean over rounds is the area under that curve: smaller = settles faster."""
    from scipy.stats import wasserstein_distance

    from ..clustering.graph import normalised_similarity, raw_similarity

    out: dict[str, float] = {}
    rounds = sorted(distances["round"].unique())
    if len(rounds) < 2:
        return out
    values: dict[str, list[np.ndarray]] = {"normalised": [], "raw": []}
    for rnd in rounds:
        part_ = distances[distances["round"] == rnd]
        ids = np.unique(np.concatenate([part_["i"].to_numpy(), part_["j"].to_numpy()]))
        pos = {int(c): k for k, c in enumerate(ids)}
        d = np.full((len(ids), len(ids)), np.nan)
        d[[pos[int(i)] for i in part_["i"]], [pos[int(j)] for j in part_["j"]]] = part_["value"].to_numpy()
        upper = np.triu_indices(len(ids), k=1)
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


@claim("002")
def normalised_similarity_converges_faster(data: ClaimData) -> ClaimResult:
    text = "With normalised distances (eq. 3) the similarity distributions converge faster than with raw ones"
    where = "§V-B1, Fig. 2"
    runs = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    loaded = {(r.spec.dataset, r.spec.clients, r.spec.split, r.spec.seed, r.spec.algorithm): r for r in data.loaded}
    areas: dict[str, list[float]] = {"normalised": [], "raw": []}
    for _, row in runs.iterrows():
        run = loaded.get((row["dataset"], row["clients"], row["split"], row["seed"], row["algorithm"]))
        path = None if run is None else Path(run.spec.run_dir) / "divergence.parquet"
        if path is None or not path.exists():
            continue
        conv = similarity_convergence(pd.read_parquet(path))
        if set(conv) == set(areas):
            for name in areas:
                areas[name].append(conv[name])
    if not areas["normalised"]:
        return result("002-fig2", "002", where, text, "needs the recorded distance matrices of 1NN at 100 % (divergence.parquet)",
                      None)
    norm = Cell(float(np.mean(areas["normalised"])), float(np.std(areas["normalised"], ddof=1)) if len(areas["normalised"]) > 1 else float("nan"), len(areas["normalised"]))
    raw = Cell(float(np.mean(areas["raw"])), float(np.std(areas["raw"], ddof=1)) if len(areas["raw"]) > 1 else float("nan"), len(areas["raw"]))
    return verdict("002-fig2", where, text,
                   f"mean Wasserstein distance to the last round's distribution, in units of its range (smaller = faster), "
                   f"over the 1NN 100 % runs' recorded trusted distances: normalised {norm.text(3)}, raw {raw.text(3)} "
                   f"({norm.n} seeds)", {"normalised below raw": part(raw, norm, "w1")},
                   "both transforms on the same distances: the raw one gives the same Louvain partition, only its values' scale moves")


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
        ari = cell(group, "ari")
        k = cell(group, "n_clusters")
        against = [_labels_against_classes(loaded[key]) for key in
                   zip(group["dataset"], group["clients"], group["split"], group["seed"], group["algorithm"]) if key in loaded]
        against = [a for a in against if a is not None]
        by_class = float(np.mean([a[1] for a in against])) if against else float("nan")
        rows.append(f"{attribution}: ARI vs groups {ari.text()}, vs majority classes {fmt(by_class)}, {fmt(k.mean, 1)} clusters")
        parts[f"{attribution} ARI vs groups ≥ {COMMUNITIES_FOUND}"] = "yes" if ari.mean >= COMMUNITIES_FOUND else "no"
        if np.isfinite(by_class) and by_class > ari.mean:
            parts[f"{attribution} found the majority classes rather than the groups"] = "no"
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
