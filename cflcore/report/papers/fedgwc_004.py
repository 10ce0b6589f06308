"""004's claims (FedGWC, §7 and App. G-J), checked on the study's runs against 004's text and its tables
(cflcore/reference/paper004_tables.csv).

Every claim that compares two cells or a cell with a threshold takes the framework's tie rule (:mod:`cflcore.report.statistics.verdicts`):
the per-seed *paired* difference's t-interval (runs of one seed of one federation pair across methods, splits and
β), and a difference within the seed noise is ``inconclusive``, never ``holds`` (nor ``contradicted``). The
negative control (Fig. 6) counts per-run events (a split; MSE below ε), not a difference of means: one run that
splits contradicts it, so it has no tie."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..runs import diagnostics_cell
from ..statistics.seed_stats import SeedSummary, summarise
from ..statistics.verdicts import comparison, difference, greater, per_seed, t_interval, threshold
from .base import (ClaimData, ClaimResult, Paper, Role, SettingHome, claim, factor_values, fmt, mean_of, register_paper, result, select,
                   verdict)

PAPER = "004"
DOMAINS_SEPARATED = 0.9  # "Rand index close to 1": the interval of FedGWC's Rand over seeds at or above 0.9
BETA_SPREAD = 0.04  # App. G: balanced accuracy within ~4 points over β: each β's paired difference to the best within

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
    tuned, k = _runs_at_k_by_accuracy(runs, base, split, metric)
    return mean_of(tuned, metric), k


def _runs_at_k_by_accuracy(runs: pd.DataFrame, base: str, split: str, metric: str) -> tuple[pd.DataFrame, Any]:
    """The runs of ``base`` on ``split`` at the k :func:`_at_k_by_accuracy` picks (every run where k is not swept;
    none where no k has a finite accuracy), and that k."""
    sub = select(runs, base, split_base=split)
    if not len(sub) or "k" not in sub or sub["k"].isna().all():
        return sub, None
    col = _bacc(runs)
    scored = [(mean_of(g, col), k, g) for k, g in sub.groupby("k")]
    scored = [t for t in scored if np.isfinite(t[0])]
    if not scored:
        return sub.iloc[0:0], None
    _, k, best = max(scored, key=lambda t: t[0])
    return best, k


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


@claim("004", "004-domains", version=2)
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
    parts = dict(threshold(f"{s}: FedGWC's Rand at or above {DOMAINS_SEPARATED:g}",
                           select(data.runs, "fedgwc", split_base=s), "rand", lo=DOMAINS_SEPARATED) for s in splits)
    return verdict(PAPER, "004-domains", where, text, ours, parts)


@claim("004", "004-negative-control", version=2)
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


def _fedgwc_beats_k_methods(data: ClaimData, split_prefix: str, metric: str) -> tuple[list[str], dict[str, str]]:
    """Per split of ``split_prefix``: FedGWC's ``metric`` against IFCA's and FeSEM's at the k each reaches its best
    balanced accuracy (004 tunes k by accuracy); (one text per split, the claim's parts: per split and baseline,
    FedGWC above it beyond the seed noise, paired per seed; empty without such splits)."""
    rows, parts = [], {}
    for split in _splits_of(data.runs, split_prefix):
        gwc_runs = select(data.runs, "fedgwc", split_base=split)
        gwc = mean_of(gwc_runs, metric)
        tuned = {b: _runs_at_k_by_accuracy(data.runs, b, split, metric) for b in ("ifca", "fesem")}
        tuned = {b: rk for b, rk in tuned.items() if np.isfinite(mean_of(rk[0], metric))}
        if not tuned or not len(gwc_runs):
            continue
        if not np.isfinite(gwc):  # one cluster in every seed: a clustering score is undefined, FedGWC found nothing
            label = (f"{split}: FedGWC one cluster ({fmt(mean_of(gwc_runs, 'n_clusters'), 1)} on average), "
                     f"{metric} undefined")
            rows.append(label)
            parts[label] = "no"
            continue
        rows.append(f"{split}: FedGWC {fmt(gwc)} vs " + ", ".join(
            f"{b} {fmt(mean_of(r, metric))}" + (f" (k {k:g}, best accuracy)" if k is not None else "")
            for b, (r, k) in tuned.items()))
        parts.update(greater(f"{split}: FedGWC above {b}", gwc_runs, r, metric) for b, (r, _) in tuned.items())
    return rows, parts


@claim("004", "004-domains-baselines", version=2)
def fedgwc_beats_ifca_fesem_on_domains(data: ClaimData) -> ClaimResult:
    text = "FedGWC's Rand index on domain federations beats IFCA's and FeSEM's (their best k)"
    rows, parts = _fedgwc_beats_k_methods(data, "domains", "rand")
    # the domain federation the baselines run on offline is the three-domain one (domains-3 = 004's 40/30/30)
    paper = "; ".join(_paper_cells((4, 7), m, "rand", "domains (40,30,30)") for m in ("fedgwc", "ifca", "fesem"))
    return verdict(PAPER, "004-domains-baselines", "§7.3, Tables 4 and 7", text,
                   ("; ".join(rows) or "needs FedGWC and IFCA/FeSEM on domains") + f" | 004: {paper}", parts)


@claim("004", "004-was", version=2)
def fedgwc_best_was_on_mixes(data: ClaimData) -> ClaimResult:
    text = "FedGWC has the best WAS among the clustered methods on the heterogeneity mixes"
    rows, parts = _fedgwc_beats_k_methods(data, "mix", "was")
    paper = "; ".join(_paper_cells((3, 6), m, "was", "mix (40,30,30)") for m in ("fedgwc", "ifca", "fesem"))
    return verdict(PAPER, "004-was", "§7.3, Tables 3 and 6", text,
                   ("; ".join(rows) or "needs FedGWC and IFCA/FeSEM on mixes") + f" | 004: {paper}", parts)


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


@claim("004", "004-beta", version=2)
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
    rows, spread, parts = [], 0.0, {}
    for split in dict.fromkeys(early["split_base"]):
        cells = {float(b): select(early, "fedgwc-beta", split_base=split, beta=float(b)) for b in betas}
        values = [mean_of(r, col) for r in cells.values()]
        finite = [v for v in values if np.isfinite(v)]
        if len(finite) >= 2:
            spread = max(spread, max(finite) - min(finite))
            rows.append(f"{split}: " + ", ".join(f"β {b:g} {fmt(100 * v, 1)}" for b, v in zip(betas, values)))
            best = max((b for b, v in zip(cells, values) if np.isfinite(v)), key=lambda b: mean_of(cells[b], col))
            for b, r in cells.items():  # every β within BETA_SPREAD of the best one (paired per seed)
                if b != best and np.isfinite(mean_of(r, col)):
                    d = difference(cells[best], r, col)
                    parts.update([comparison(f"{split}: β {best:g} − β {b:g} within ± {BETA_SPREAD:g}", d, digits=3,
                                             lo=-BETA_SPREAD, hi=BETA_SPREAD, strict=False)])
    paper = paper004()
    t5 = paper[paper["table"] == 5]
    spreads = {d: float(g["mean"].max() - g["mean"].min()) for d, g in t5.groupby("dataset", sort=False)}
    ours = ("; ".join(rows) + f" (largest spread {fmt(100 * spread, 1)} points; runs that split in the first half only, "
            f"{len(early)} of {len(swept)})") if rows else f"fewer than two β values split early ({len(early)} of {len(swept)} runs)"
    ours += " | 004 Table 5 spreads: " + ", ".join(f"{d} {v:.1f}" for d, v in spreads.items())
    if not rows:
        return result("004-beta", "004", where, text, ours, None)
    return verdict(PAPER, "004-beta", where, text, ours, parts)


@claim("004", "004-heterogeneity", version=2)
def clustering_helps_more_with_heterogeneity(data: ClaimData) -> ClaimResult:
    text = ("Per dataset (Table 1 sets α per dataset), clustering helps more as heterogeneity grows: FedGWC's gain over "
            "FedAvg is larger on the dataset's more heterogeneous Dirichlet federation")
    where = "§7.1, Table 1"
    col = _bacc(data.runs)
    runs = data.runs
    gains: dict[str, dict[str, float]] = {}
    seed_gains: dict[str, dict[str, pd.Series]] = {}  # FedGWC − FedAvg per seed (paired within the split)
    for split in _splits_of(runs, "dirichlet"):
        for dataset in dict.fromkeys(select(runs, split_base=split)["dataset"]):
            gwc_runs = select(runs, "fedgwc", split_base=split, dataset=dataset)
            avg_runs = select(runs, "fedavg", split_base=split, dataset=dataset)
            gwc, avg = mean_of(gwc_runs, col), mean_of(avg_runs, col)
            if np.isfinite(gwc) and np.isfinite(avg):
                gains.setdefault(dataset, {})[split] = gwc - avg
                seed_gains.setdefault(dataset, {})[split] = (per_seed(gwc_runs, col) - per_seed(avg_runs, col)).dropna()
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
    rows, parts = [], {}
    for dataset, per in usable.items():
        ordered = sorted(per, key=lambda s: alpha[s])
        rows.append(f"{dataset}: " + ", ".join(f"{s} (α {alpha[s]:g}) {fmt(100 * per[s], 1)} points" for s in ordered))
        hard, soft = seed_gains[dataset][ordered[0]], seed_gains[dataset][ordered[-1]]
        common = hard.index.intersection(soft.index)  # the seeds both federations ran: gain − gain, paired
        d = t_interval((hard[common] - soft[common]).to_numpy(), "paired seeds")
        parts.update([comparison(f"{dataset}: gain on {ordered[0]} above gain on {ordered[-1]}", d, digits=3)])
    return verdict(PAPER, "004-heterogeneity", where, text, "; ".join(rows) + f" | 004: {paper_gain}", parts)


@claim("004", "004-aggregators", version=2)
def fedgwc_improves_each_aggregator(data: ClaimData) -> ClaimResult:
    text = "FedGWC improves each aggregator it wraps (FedAvg, FedAvgM, FedProx, pFedMe, Per-FedAvg)"
    where = "App. J, Table 9"
    col = _bacc(data.runs)
    pairs = (("fedgwc", "fedavg"), ("fedgwc-fedavgm", "fedavgm"), ("fedgwc-fedprox", "fedprox"),
             ("fedgwc-pfedme", "pfedme"), ("fedgwc-perfedavg", "perfedavg"))
    rows, parts = [], {}
    for split in _splits_of(data.runs, "dirichlet"):
        for wrapped, plain in pairs:
            w_runs, p_runs = select(data.runs, wrapped, split_base=split), select(data.runs, plain, split_base=split)
            w, p = mean_of(w_runs, col), mean_of(p_runs, col)
            if np.isfinite(w) and np.isfinite(p):
                rows.append(f"{split} {plain}: {fmt(100 * p, 1)} → {fmt(100 * w, 1)}")
                parts.update([greater(f"{split}: {wrapped} above {plain}", w_runs, p_runs, col, 3)])
    ref = paper004()
    t9 = ref[(ref["table"] == 9) & ref["aggregator"].isin(["fedavg", "fedavgm", "fedprox", "pfedme", "per-fedavg"])]
    paper = "; ".join(f"{d} {a}: {g.loc[g['method'] != 'fedgwc', 'mean'].iloc[0]} → {g.loc[g['method'] == 'fedgwc', 'mean'].iloc[0]}"
                      for (d, a), g in t9.groupby(["dataset", "aggregator"], sort=False))
    return verdict(PAPER, "004-aggregators", where, text,
                   ("; ".join(rows) or "needs the wrapped and plain aggregators") + f" | 004 Table 9: {paper}", parts)



# ---- 004's printed cells beside ours (tables/paper004_cells.csv) ------------------------------------------------
# Every printed cell of 004's Tables 1 and 3-9 beside this study's. A cell is compared where the study ran the same
# federation structure (004's federation → our split families below: two or three visual domains, a heterogeneity
# mix, a Dirichlet federation) with the same method and aggregator (and β for Table 5); the dataset, scale and budget
# differ (the front page's departures), and ours is the mean ± std over seeds of the final round's score, every
# matching split of ours listed. Every other cell says "not run in this study", with what is missing. IFCA's and
# FeSEM's k is the one with their best balanced accuracy, as 004 tunes it (App. F), whatever C the paper's cell printed.
# 004's federation -> the split families (config/fedgwc-004*.yaml) with its structure
FEDERATIONS: dict[str, tuple[str, ...]] = {
    "mix (40,30,30)": ("mix-3", "mix10-3"),
    "mix (10,90,0)": ("mix-het", "mix10-het"),
    "mix (10,0,90)": ("mix-xhet", "mix10-xhet"),
    "domains (50,50,0)": ("domains-noise",),
    "domains (50,0,50)": ("domains-blur",),
    "domains (40,30,30)": ("domains-3",),
}
# (004's method, aggregator) -> our variant family; Table 9's plain aggregators are their own method
VARIANTS: dict[tuple[str, str], str] = {
    ("fedgwc", "fedavg"): "fedgwc", ("fedgwc", "fedavgm"): "fedgwc-fedavgm", ("fedgwc", "fedprox"): "fedgwc-fedprox",
    ("fedavg", "fedavg"): "fedavg", ("fedavgm", "fedavgm"): "fedavgm", ("fedprox", "fedprox"): "fedprox",
    ("fedavgm", "fedavg"): "fedavgm", ("fedprox", "fedavg"): "fedprox",
    ("ifca", "fedavg"): "ifca", ("fesem", "fedavg"): "fesem", ("cfl", "fedavg"): "scl",
    # Table 9's personalised rows: engine.personalisation under BNC ("No clusters") and under FedGWC; ours score
    # the personalised models (pFedMe's personal model, Per-FedAvg after one adaptation step), as 004's do
    ("pfedme", "pfedme"): "pfedme", ("fedgwc", "pfedme"): "fedgwc-pfedme",
    ("per-fedavg", "per-fedavg"): "perfedavg", ("fedgwc", "per-fedavg"): "fedgwc-perfedavg",
}
COLUMNS = ["table", "dataset", "federation", "method", "aggregator", "beta", "clusters", "metric", "paper",
           "ours", "our_splits", "status"]


def _splits_for(runs: pd.DataFrame, federation: str) -> list[str]:
    bases = list(dict.fromkeys(runs["split_base"])) if len(runs) and "split_base" in runs else []
    if federation.startswith("dirichlet"):
        return [s for s in bases if str(s).startswith("dirichlet")]
    return [s for s in bases if s in FEDERATIONS.get(federation, ())]


def _score(runs: pd.DataFrame, variant: str, split: str, metric: str, beta: float | None) -> tuple[float, float, int, object]:
    """(mean, sample std over seeds (NaN for one seed), seeds, k) of ``metric`` for ``variant`` on ``split`` (accuracies in points)."""
    column = {"acc": _bacc(runs), "bacc": _bacc(runs)}.get(metric, metric)
    scale = 100.0 if metric in ("acc", "bacc") else 1.0
    k = None
    if variant in ("ifca", "fesem"):
        _, k = _at_k_by_accuracy(runs, variant, split, column)
    factors = {"beta": float(beta)} if beta is not None else {}
    if k is not None:
        factors["k"] = k
    base = "fedgwc-beta" if beta is not None else variant
    sub = select(runs, base, split_base=split, **factors)
    values = pd.to_numeric(sub[column], errors="coerce") if column in sub else pd.Series(dtype=float)
    s = summarise(values.to_numpy(dtype=float) * scale)
    return s.mean, s.std, s.n, k


def paper004_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per printed cell of 004 (cflcore/reference/paper004_tables.csv) with ours beside it where this
    study has the same federation structure, method and aggregator (``runs``: the sweep summary, one row per run)."""
    rows = []
    for cell in paper004().itertuples(index=False):
        paper = f"{cell.mean:g}" + (f" ± {cell.sd:g}" if pd.notna(cell.sd) else "")
        base = {"table": cell.table, "dataset": cell.dataset, "federation": cell.federation, "method": cell.method,
                "aggregator": cell.aggregator, "beta": cell.beta, "clusters": cell.clusters, "metric": cell.metric,
                "paper": paper}
        variant = VARIANTS.get((str(cell.method), str(cell.aggregator)))
        splits = _splits_for(runs, str(cell.federation)) if variant else []
        beta = None if pd.isna(cell.beta) else float(cell.beta)
        found = []
        for split in splits:
            mean, std, n, k = _score(runs, variant, split, str(cell.metric), beta)
            if n:
                found.append((split, SeedSummary(mean, std, n).text(1 if cell.metric in ("acc", "bacc") else 2), n, k))
        if found:
            ours = "; ".join(f"{s}: {v} ({n} seeds{f', k {k:g}' if k is not None else ''})" for s, v, n, k in found)
            rows.append({**base, "ours": ours, "our_splits": ", ".join(s for s, *_ in found), "status": "compared"})
        else:
            why = ("no such method here" if variant is None else
                   "no such federation here" if not splits else f"{variant} not run on {', '.join(splits)}")
            rows.append({**base, "ours": "", "our_splits": "", "status": f"not run in this study ({why})"})
    return pd.DataFrame(rows, columns=COLUMNS)


@register_paper("004")
class FedGWC004(Paper):
    """004: FedGWC (Gaussian-weighted loss rewards, spectral clustering, the Wasserstein Adjusted Score); its own
    table: every printed cell of its Tables 1 and 3-9 beside ours (``paper004_cells``)."""

    title = "FedGWC (004)"
    homes = {PAPER: SettingHome("FedGWC's settings", methods=("fedgwc",), accuracy="local_bacc", rand=True)}
    table_titles = {
        "paper004_cells": "every printed cell of 004's Tables 1, 3-9 beside ours, or not run in this study",
    }
    output_titles = {
        "fedgwc": "FedGWC: accuracy and split rounds, P and W, spectral embedding, class shares (004 Figs. 2, 3, 5-8)",
    }
    roles = {
        "fedgwc": Role("variant", "fedgwc", "FedGWC over FedAvg"),
        "fedgwc_beta": Role("variant", "fedgwc-beta", "FedGWC swept over β (App. G)"),
        "ifca": Role("variant", "ifca", "IFCA, its k tuned by accuracy"),
        "fesem": Role("variant", "fesem", "FeSEM, its k tuned by accuracy"),
        "fedavg": Role("variant", "fedavg", "FedAvg"),
        "domains_noise": Role("split", "domains-noise", "two visual domains: clean and noise (50/50)"),
        "domains_blur": Role("split", "domains-blur", "two visual domains: clean and blur (50/50)"),
        "domains_3": Role("split", "domains-3", "three visual domains (40/30/30)"),
        "mix_3": Role("split", "mix-3", "a heterogeneity mix (40/30/30)"),
        "dirichlet": Role("split", "dirichlet", "a Dirichlet federation (every split whose name starts with it)"),
        "homogeneous": Role("split", "homogeneous", "a homogeneous federation, the negative control (Fig. 6)"),
    }

    @classmethod
    def tables(cls, data: ClaimData, checked: bool) -> dict[str, pd.DataFrame]:
        cells = paper004_cells(data.runs) if checked and data.runs is not None else pd.DataFrame(columns=COLUMNS)
        return {"paper004_cells": cells}
