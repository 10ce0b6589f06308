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
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

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
FIG3, FIG4 = "louvain-fig3", "louvain-fig4"


@claim("002")
def ari_rises_with_majority_share(data: ClaimData) -> ClaimResult:
    text = "ARI rises with the majority share m_k (1NN, resolution 1.0)"
    where = "§V-B1, Fig. 3b"
    shares = factor_values(data.runs, FIG3, "majority_share")
    if len(shares) < 2:
        return result("002-ari-mk", "002", where, text, "no m_k sweep in this study", None)
    aris = [mean_of(select(data.runs, FIG3, majority_share=float(m), resolution=1.0), "ari") for m in shares]
    ours = "; ".join(f"m_k {m:g}: {fmt(a)}" for m, a in zip(shares, aris))
    finite = [a for a in aris if np.isfinite(a)]
    holds = len(finite) >= 2 and aris[-1] > aris[0] and all(b >= a - 0.05 for a, b in zip(aris, aris[1:]))
    return result("002-ari-mk", "002", where, text, ours, holds if finite else None)


@claim("002")
def two_communities_at_full_majority(data: ClaimData) -> ClaimResult:
    text = "At m_k = 1.0 and resolution 1.0, Louvain finds the two communities (ARI ≈ 1)"
    where = "§V-B1, Fig. 3b"
    runs = select(data.runs, FIG3, majority_share=1.0, resolution=1.0)
    if not len(runs):
        return result("002-mk1", "002", where, text, "no run at m_k 1.0, resolution 1.0", None)
    ari, k = mean_of(runs, "ari"), mean_of(runs, "n_clusters")
    return result("002-mk1", "002", where, text, f"final ARI {fmt(ari)}, {fmt(k, 1)} clusters ({len(runs)} seeds)",
                  bool(ari >= 0.9))


@claim("002")
def accuracy_depends_on_mk_not_resolution(data: ClaimData) -> ClaimResult:
    text = "Accuracy depends on m_k, not notably on the Louvain resolution"
    where = "§V-B1, Fig. 3a"
    shares = factor_values(data.runs, FIG3, "majority_share")
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(shares) < 2 or len(resolutions) < 2:
        return result("002-acc-res", "002", where, text, "needs an m_k × resolution sweep", None)
    grid = np.array([[mean_of(select(data.runs, FIG3, majority_share=float(m), resolution=float(r)), ACCURACY)
                      for r in resolutions] for m in shares])
    across_mk = float(np.nanmax(np.nanmean(grid, axis=1)) - np.nanmin(np.nanmean(grid, axis=1)))
    across_res = float(np.nanmax(np.nanmax(grid, axis=1) - np.nanmin(grid, axis=1)))
    return result("002-acc-res", "002", where, text,
                  f"accuracy range across m_k {fmt(across_mk)}; largest range across resolutions at one m_k {fmt(across_res)}",
                  bool(across_mk > across_res))


@claim("002")
def silhouette_rises_with_mk(data: ClaimData) -> ClaimResult:
    text = "Clusters are denser and better separated (silhouette) with more non-iid data"
    where = "§V-B1, Fig. 3c"
    shares = factor_values(data.runs, FIG3, "majority_share")
    if len(shares) < 2:
        return result("002-sil-mk", "002", where, text, "no m_k sweep in this study", None)
    col = silhouette_column(data.runs)
    values = [mean_of(select(data.runs, FIG3, majority_share=float(m), resolution=1.0), col) for m in shares]
    ours = f"{col}: " + "; ".join(f"m_k {m:g}: {fmt(v)}" for m, v in zip(shares, values))
    finite = [v for v in values if np.isfinite(v)]
    return result("002-sil-mk", "002", where, text, ours, (values[-1] > values[0]) if len(finite) >= 2 else None)


def _attribution_cells(data: ClaimData, participation: float = 1.0) -> dict[str, pd.DataFrame]:
    return {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": participation})
            for a in ("avg", "1nn", "wnn", "late")}


@claim("002")
def one_nn_beats_wnn(data: ClaimData) -> ClaimResult:
    text = "1NN ≥ WNN on ARI and accuracy (100 % participation)"
    where = "§V-B2, Fig. 4"
    cells = _attribution_cells(data)
    if not len(cells["1nn"]) or not len(cells["wnn"]):
        return result("002-1nn-wnn", "002", where, text, "needs 1NN and WNN runs", None)
    a1, aw = mean_of(cells["1nn"], "ari"), mean_of(cells["wnn"], "ari")
    c1, cw = mean_of(cells["1nn"], ACCURACY), mean_of(cells["wnn"], ACCURACY)
    tol = 0.01  # a tie within one point counts as ≥
    return result("002-1nn-wnn", "002", where, text,
                  f"ARI 1NN {fmt(a1)} vs WNN {fmt(aw)}; accuracy 1NN {fmt(c1, 3)} vs WNN {fmt(cw, 3)}",
                  bool(a1 >= aw - tol and c1 >= cw - tol))


@claim("002")
def full_participation_beats_half(data: ClaimData) -> ClaimResult:
    text = "100 % client participation ≥ 50 % (1NN and WNN: accuracy, ARI)"
    where = "§V-B2, Fig. 4"
    rows, ok, seen = [], True, False
    for attribution in ("1nn", "wnn"):
        full = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 1.0})
        half = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 0.5})
        if not len(full) or not len(half):
            continue
        seen = True
        for metric, label in ((ACCURACY, "acc"), ("ari", "ARI")):
            f, h = mean_of(full, metric), mean_of(half, metric)
            rows.append(f"{attribution} {label} {fmt(f)} vs {fmt(h)}")
            ok &= bool(f >= h - 0.01)
    if not seen:
        return result("002-participation", "002", where, text, "needs 100 % and 50 % runs", None)
    return result("002-participation", "002", where, text, "; ".join(rows), ok)


@claim("002")
def avg_late_highest_ari_lowest_silhouette(data: ClaimData) -> ClaimResult:
    text = "AVG and Late reach the highest ARI but the lowest silhouette (100 % participation)"
    where = "§V-B2, Fig. 4b-c"
    cells = {a: r for a, r in _attribution_cells(data).items() if len(r)}
    if not {"avg", "late"} <= set(cells) or not {"1nn", "wnn"} & set(cells):
        return result("002-avg-late", "002", where, text, "needs AVG, Late and 1NN/WNN runs", None)
    col = silhouette_column(data.runs)
    ari = {a: mean_of(r, "ari") for a, r in cells.items()}
    sil = {a: mean_of(r, col) for a, r in cells.items()}
    others = [a for a in cells if a not in ("avg", "late")]
    holds = (min(ari["avg"], ari["late"]) >= max(ari[a] for a in others) - 0.01
             and max(sil["avg"], sil["late"]) <= min(sil[a] for a in others) + 0.01)
    ours = "ARI " + ", ".join(f"{a} {fmt(v)}" for a, v in ari.items()) + f"; {col} " + \
        ", ".join(f"{a} {fmt(v)}" for a, v in sil.items())
    return result("002-avg-late", "002", where, text, ours, bool(holds))


@claim("002")
def ifca_below_louvain(data: ClaimData) -> ClaimResult:
    text = "IFCA is below Louvain CFL (accuracy and ARI, 100 % participation, m_k 0.7)"
    where = "§V-B2, Fig. 4a-b"
    ifca = select(data.runs, "ifca")
    louvain = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(ifca) or not len(louvain):
        return result("002-ifca", "002", where, text, "needs IFCA and Louvain 1NN runs", None)
    ai, al = mean_of(ifca, "ari"), mean_of(louvain, "ari")
    ci, cl = mean_of(ifca, ACCURACY), mean_of(louvain, ACCURACY)
    return result("002-ifca", "002", where, text,
                  f"ARI IFCA {fmt(ai)} vs 1NN {fmt(al)}; accuracy IFCA {fmt(ci, 3)} vs 1NN {fmt(cl, 3)}",
                  bool(ai <= al + 0.01 and ci <= cl + 0.01))


@claim("002")
def one_nn_half_participation_loses_communities(data: ClaimData) -> ClaimResult:
    text = "At 50 % participation 1NN's ARI falls towards 0 while AVG and Late keep the communities"
    where = "§V-B3, Fig. 5c"
    half = {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": 0.5}) for a in ("1nn", "avg", "late")}
    if not all(len(r) for r in half.values()):
        return result("002-half-1nn", "002", where, text, "needs 1NN, AVG and Late at 50 %", None)
    ari = {a: mean_of(r, "ari") for a, r in half.items()}
    return result("002-half-1nn", "002", where, text, ", ".join(f"{a} {fmt(v)}" for a, v in ari.items()),
                  bool(ari["1nn"] < min(ari["avg"], ari["late"])))


@claim("002")
def community_models_beat_global(data: ClaimData) -> ClaimResult:
    text = "Community models beat the global model W_t on their clients' validation data (1NN, 100 %)"
    where = "§V-B3, Fig. 6"
    runs = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(runs) or "global_acc" not in runs or runs["global_acc"].isna().all():
        return result("002-global", "002", where, text, "W_t is not recorded for these runs", None)
    own, glob = mean_of(runs, "local_acc"), mean_of(runs, "global_acc")
    return result("002-global", "002", where, text, f"community {fmt(own, 3)} vs global {fmt(glob, 3)} (local test sets)",
                  bool(own >= glob))


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
    text = "FedGWC improves each aggregator it wraps (FedAvg, FedAvgM, FedProx)"
    where = "App. J, Table 9"
    col = _bacc(data.runs)
    pairs = (("fedgwc", "fedavg"), ("fedgwc-fedavgm", "fedavgm"), ("fedgwc-fedprox", "fedprox"))
    rows, ok, seen = [], True, False
    for split in _splits_of(data.runs, "dirichlet"):
        for wrapped, plain in pairs:
            w, p = mean_of(select(data.runs, wrapped, split_base=split), col), mean_of(select(data.runs, plain, split_base=split), col)
            if np.isfinite(w) and np.isfinite(p):
                seen = True
                rows.append(f"{split} {plain}: {fmt(100 * p, 1)} → {fmt(100 * w, 1)}")
                ok &= bool(w >= p - 0.005)
    ref = paper004()
    t9 = ref[(ref["table"] == 9) & ref["aggregator"].isin(["fedavg", "fedavgm", "fedprox"])]
    paper = "; ".join(f"{d} {a}: {g.loc[g['method'] != 'fedgwc', 'mean'].iloc[0]} → {g.loc[g['method'] == 'fedgwc', 'mean'].iloc[0]}"
                      for (d, a), g in t9.groupby(["dataset", "aggregator"], sort=False))
    return result("004-aggregators", "004", where, text,
                  ("; ".join(rows) or "needs the wrapped and plain aggregators") + f" | 004 Table 9: {paper}",
                  ok if seen else None)


# ---- running the checks ---------------------------------------------------------------------
def check_claims(papers: Sequence[str], data: ClaimData, notes: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per claim of each of ``papers``; a claim's ``note`` from ``notes`` (report.claim_notes) when given."""
    rows = []
    for paper in papers:
        for fn in CLAIMS.get(str(paper), []):
            try:
                res = fn(data)
            except (KeyError, ValueError, IndexError) as e:  # a claim never stops the report
                res = ClaimResult(fn.__name__, str(paper), "", fn.__name__, f"could not be evaluated: {e}", "n/a")
            row = asdict(res)
            if notes and res.claim_id in notes:
                row["note"] = str(notes[res.claim_id])
            rows.append(row)
    return pd.DataFrame(rows, columns=[f.name for f in ClaimResult.__dataclass_fields__.values()])
