"""The report's front page: ``front_page.rst``, included by ``report/workflow.rst`` (the workflow-level
``report:`` description, i.e. the landing page of ``snakemake --report``).

It holds, in this order:

* **at a glance**: per dataset × clients one compact table, methods × splits, the final-round PF1 and ARI (means
  over seeds), the highest mean of each column bold and marked ▲ (a description, not a test) (:func:`glance_frame`);
* the **headline**: final (last round) and mean PF1, GF1, ARI and the clustering round per method and split
  (:func:`cflcore.report.tables.headline_table`);
* the **paper checks**, a list of :class:`PaperCheck` sections: the claims of the papers the study checks
  (:func:`claims_checks`), then the sections of each paper it reports on (:func:`reported_papers`,
  cflcore.report.papers.base.Paper.front_sections: e.g. the published tables beside ours);
* the **departures by design**, one line each saying what it does to the comparison: each reported paper's
  (cflcore.report.papers.base.Paper.departures), the splits', the engine's and the metric's (computed from the study's
  config, :func:`front_page_context`, and from the results), and the study's own (``report.departures``).

All tables are RST ``csv-table`` directives, so the page renders with docutils alone (Snakemake's report).
"""
from __future__ import annotations

import csv
import io
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..calibration_keys import CALIBRATION_KEY
from . import tables as tb
from .calibration import calibration_lines
from ..settings import EngineSettings
from .front_context import (Departure, engine_departures, format_value, front_page_context,  # noqa: F401
                            metric_departure, split_departures)
from .papers.base import PAPERS, PaperCheck
from .papers.base import published_tables_paper as _published
from .statistics.rules import family_statement
from .statistics.seed_stats import K_OF_N_METRICS, from_columns

FRONT_PAGE = "front_page.rst"
HEADLINE_COLUMNS = {"pf1_final": "PF1 final", "pf1": "PF1 mean", "gf1_final": "GF1 final", "gf1": "GF1 mean",
                    "ari_final": "ARI final", "ari": "ARI mean", "clustering_round": "clustering round"}
GLANCE_METRICS = {"pf1_final": "PF1", "ari_final": "ARI"}
"""The compact view's metrics (final round, higher is better) and their column labels."""
HIGHEST_MARK = tb.HIGHEST_MARK
GLANCE_DIGITS = 2


def reported_papers(paper_checks: Sequence[str], comparison: pd.DataFrame) -> list[str]:
    """The papers whose departures and sections the front page shows: the study's ``report.paper_checks``, and the
    paper whose published tables every report sets beside its runs (cflcore.report.papers.base.published_tables_paper)
    where the study checks no other paper or has a cell it publishes."""
    published = _published().registered_name
    papers = [str(p) for p in paper_checks]
    return papers + ([published] if published not in papers and (not papers or not comparison.empty) else [])


def departures(context: Mapping[str, Any] | None, headline: pd.DataFrame, comparison: pd.DataFrame,
               algorithms: Sequence[str] = ()) -> list[Departure]:
    """Every departure by design, from the config ``context`` (None: only what the results show): each reported
    paper's (:func:`reported_papers`, cflcore.report.papers.base.Paper.departures), its settings' before the
    splits' and the engine's, its methods' after them; then the metric's and the study's own (``report.departures``)."""
    context = context or {}
    study = context.get("study") or {}
    report = context.get("report") or {}
    filled = {**study,
              "datasets": list(study.get("datasets") or (headline["dataset"].unique() if len(headline) else [])),
              "clients": list(study.get("clients") or (headline["clients"].unique() if len(headline) else [])),
              "algorithms": list(study.get("algorithms") or algorithms)}
    papers = [PAPERS.get(p, field="report.paper_checks").departures({**context, "study": filled}, headline, comparison)
              for p in reported_papers(report.get("paper_checks") or (), comparison)]
    out: list[Departure] = [d for paper in papers for d in paper.settings]
    out += split_departures(context.get("splits") or {})
    # the schema's defaults under a partial context
    out += engine_departures(EngineSettings.of(context.get("engine")), _published().registered_name)
    out += [d for paper in papers for d in paper.methods]
    out.append(metric_departure())
    # the study's departures from its own paper (report.departures: 002's, 004's configs), as the config states them
    out += [Departure(**d) for d in report.get("departures") or ()]
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


def split_label(split: str) -> str:
    short = _published().split_short.get(split)
    return f"{split} ({short})" if short else split


def headline_frame(headline: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, g in headline.iterrows():
        row = {"split": split_label(g["split"]), "method": method_label(g["algorithm"])}
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


def departures_rst(items: Sequence[Departure]) -> str:
    return "\n".join(f"- **{_rst_escape(d.topic)}** — ours: {_rst_escape(d.ours)}; paper: {_rst_escape(d.paper)}. "
                     f"*Effect:* {_rst_escape(d.effect)}" for d in items) + "\n"


def _section(title: str, char: str) -> str:
    return f"{title}\n{char * max(len(title), 4)}\n\n"


def group_rows(frame: pd.DataFrame) -> list[tuple[tuple[str, int], pd.DataFrame]]:
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
        if "kernels" in rows:
            text += ("*Kernels*: each claim decided again on the same runs trained with the CPU's kernels held to "
                     "each path of ``report.kernel_paths``; a verdict that flips on one is inconclusive, its reason "
                     "naming each path's verdict.\n\n")
        if "stage" in rows:
            text += ("*Stage*: a claim the study reads again after adding seeds is read in the stages "
                     "``report.seed_stages`` states (the first seeds, then all of them, each at one-sided 1.25 %); "
                     "the column says which stage decided and every stage's verdict.\n\n")
        columns = [c for c in ("where", "claim", "ours", "holds", "lean", "kernels", "stage", "reason", "seeds_to_decide", "kind", "version",
                               "earlier", "note")
                   if c in rows and (c != "earlier" or rows[c].fillna("").astype(str).str.len().gt(0).any())]
        frame = rows[columns].rename(columns=lambda c: c.replace("_", " ").capitalize())
        checks.append(PaperCheck(f"Paper check ({paper}): its claims against this study", text, [(f"{paper}: claims", frame)]))
    tested = claims[claims["holds"].isin(("holds", "contradicted", "inconclusive"))]
    staged = int((~tested["stage"].fillna("one stage").isin(["one stage"])).sum()) if "stage" in tested else 0
    family = family_statement(len(tested), int((tested["kind"] == "sanity").sum()) if "kind" in tested else 0,
                              staged=staged)
    if checks and family:  # once per study, before the first paper's claims
        checks[0] = replace(checks[0], text=family + "\n\n" + checks[0].text)
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
    for (dataset, clients), rows in group_rows(glance):
        cells, best = glance_frame(rows)
        parts.append(csv_table(cells, f"At a glance: {dataset}, {clients} clients", best, "front-page glance") + "\n")
    if glance.empty:
        parts.append("*No runs.*\n\n")
    return "".join(parts)


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
        calibration = calibration_lines((context or {}).get(CALIBRATION_KEY), study["algorithms"])
        if calibration:
            parts.append("\n".join(f"- {_rst_escape(line)}" for line in calibration) + "\n\n")
    parts.append("Each cell is the mean over seeds (± std over seeds when more than one). *final* = the last round; "
                 "*mean* = the mean over the scored rounds, pre-clustering rounds included "
                 f"(as {_published().registered_name} publishes); "
                 "clustering round: 1-based, SCL its last split, – never clustered. "
                 f"Methods marked *({tb.PUBLISHED_NOTE})* are the paper's own variants with its bug on purpose.\n\n")
    for (dataset, clients), rows in group_rows(headline):
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
    the study's own paper checks, shown first; each reported paper's sections follow (:func:`reported_papers`,
    cflcore.report.papers.base.Paper.front_sections)."""
    out_dir = Path(out_dir)
    items = departures(context, headline, comparison, algorithms)
    frame = pd.DataFrame([asdict(d) for d in items], columns=["topic", "ours", "paper", "effect"])
    csv_path = tb.write_text(frame.to_csv(index=False), out_dir / "tables" / "departures.csv")
    papers = reported_papers(((context or {}).get("report") or {}).get("paper_checks") or (), comparison)
    checks = [*extra_checks, *(check for p in papers for check in PAPERS.get(p).front_sections(comparison, ranking))]
    rst = tb.write_text(render_front_page(headline, checks, items, context, lead), out_dir / FRONT_PAGE)
    return [rst, csv_path]
