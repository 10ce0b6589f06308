"""The report's tables and run figures (docs/architecture.md §10): the writers of the catalogue's kinds
``tables`` (Tables 1–2, personalisation, headline, at a glance, the paper check, Kendall's τ, ``run_scores``, the
seeds' claims and the front page), ``missing_runs``, ``run_figures`` (learning gap, temperature, clustering
progress, clusters per round, split traces) and ``whatif`` (the what-if heatmaps and ``whatif_delay.csv``).
Which kinds exist, their paths and captions: :mod:`cflcore.report.catalogue`; the orchestrator:
:mod:`cflcore.report.parts`.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from . import figures as fg
from . import tables as tb
from .front_page import (
    FRONT_PAGE,
    PaperCheck,
    claims_checks,
    glance_frame,
    glance_table,
    paper_check_rst,
    write_front_page,
)
from ..paper_sources import declared_output_captions
from .index import entry as index_entry
from .runs import HARDWARE_FIELDS, LoadedRun, MissingRun, RunSpec, hardware_record
from .papers.base import PAPERS, ClaimData, check_claims, paper_data, published_tables_paper
from .cross_paper import cross_analysis, cross_section_rst
from .home_checks import home_check_verdicts
from .acted import references, with_actions
from .sweeps import round_frame, sweep_summary
from ..sweep_expansion import SEPARATOR
from .traces import split_trace_figures

# our columns compared with the published tables' (published_tables_paper's METRIC_MAP)
COMPARISON_METRICS = ["ari", "ami", "homogeneity", "clustering_round", "pf1", "gf1", "pf1_final", "gf1_final"]


_entry = index_entry  # (kind, path, out_dir, dataset, clients): an index row, captioned by the catalogue


def split_name_map(specs: Sequence[RunSpec], loaded: Sequence[LoadedRun]) -> dict[str, str | None]:
    """Our split name -> the paper's (by name, else from a manifest's overlap/imbalanced parameters)."""
    manifests = {run.spec.split: run.manifest for run in loaded}
    published = published_tables_paper()
    return {s.split: published.split(s.split, manifests.get(s.split)) for s in specs}


def paper_check(specs: Sequence[RunSpec], loaded: Sequence[LoadedRun], summary: pd.DataFrame,
                groups: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paper check (``paper_vs_run``) and Kendall's τ per split, from the runs' summaries."""
    published = published_tables_paper()
    comparison = published.vs_run(tb.aggregate_seeds(summary, groups, COMPARISON_METRICS), split_name_map(specs, loaded))
    return comparison, published.ranking(comparison)


def comparison_tables(specs: Sequence[RunSpec], loaded: Sequence[LoadedRun]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The front page's data: the headline table, the paper check (``paper_vs_run``) and Kendall's τ per split."""
    summary, groups = tb.run_summaries(loaded), tb.expected_groups(specs)
    return (tb.headline_table(summary, groups)[0], *paper_check(specs, loaded, summary, groups))


def write_tables(specs: Sequence[RunSpec], loaded: Sequence[LoadedRun], out_dir: Path,
                 context: Mapping[str, Any] | None = None, sweep_index: Mapping[str, Any] | None = None,
                 kernel_sets: Mapping[str, Sequence[LoadedRun]] | None = None) -> list[dict[str, Any]]:
    """Tables 1–2, personalisation, headline, the paper check and Kendall's τ, ``run_scores.csv``, and the
    front page built from the same frames (``front_page.rst``, ``tables/departures.csv``; ``context`` =
    :func:`front_page.front_page_context` of the config, None: only the departures the results show).
    ``kernel_sets``: {kernel path: the runs trained again on it} (report.kernel_paths), each claim decided again on
    each (:func:`check_claims`)."""
    summary, groups = tb.run_summaries(loaded), tb.expected_groups(specs)
    table_dir = out_dir / "tables"
    entries: list[dict[str, Any]] = []
    t1, t1_wide = tb.clustering_table(summary, groups)
    t2, t2_wide = tb.clustering_round_table(summary, groups)
    tp, tp_wide = tb.personalisation_table(summary, groups)
    th, th_wide = tb.headline_table(summary, groups)
    mark = f" {tb.PUBLISHED_MARK} = {tb.PUBLISHED_NOTE} (the paper's own variant)."
    captions = {
        "table1_clustering": "Clustering scores (mean over rounds; ± std over seeds). homogeneity = the paper's COM." + mark,
        "table2_clustering_round": "Clustering round (1-based; SCL: last split); – = partition never changed." + mark,
        "table_personalisation": "PF1, GF1 and learning gap |PF1 - GF1| (means over clients and rounds)." + mark,
        "headline": "Final (last round) and mean PF1, GF1, ARI and clustering round (± std over seeds)." + mark,
    }
    for stem, (tidy, wide) in {"table1_clustering": (t1, t1_wide), "table2_clustering_round": (t2, t2_wide),
                               "table_personalisation": (tp, tp_wide), "headline": (th, th_wide)}.items():
        entries += [_entry(stem, p, out_dir) for p in tb.write_table(tidy, wide, stem, table_dir, captions[stem])]
    glance = glance_table(th)
    caption = (f"Final-round PF1 and ARI per method and split (means over seeds); {tb.HIGHEST_NOTE}.")
    entries += [_entry("at_a_glance", p, out_dir) for p in tb.write_table(glance, _glance_wide(glance), "at_a_glance",
                                                                           table_dir, caption)]
    comparison, ranking = paper_check(specs, loaded, summary, groups)
    entries += [_entry("paper_vs_run", p, out_dir) for p in tb.write_table(comparison, _paper_wide(comparison), "paper_vs_run",
                                                                            table_dir, declared_output_captions()["paper_vs_run"])]
    caption = "Kendall's tau between our and the paper's values over the methods both have, per split and metric."
    entries += [_entry("paper_ranking", p, out_dir) for p in tb.write_table(
        ranking, published_tables_paper().ranking_wide(ranking), "paper_ranking", table_dir, caption)]
    path = tb.write_text(summary.to_csv(index=False, float_format="%.10g"), table_dir / "run_scores.csv")
    entries.append(_entry("run_scores", path, out_dir))
    algorithms = list(dict.fromkeys(s.algorithm for s in specs))
    report_cfg = (context or {}).get("report") or {}
    told_true_k = list((context or {}).get("told_true_k") or ())
    variants = (context or {}).get("algorithms") or {}
    papers = report_cfg.get("paper_checks") or []
    bands = references(variants)  # the reference bands: drawn apart in the cross table, kept from the claims unless named
    unread = unnamed_bands(papers, bands, report_cfg.get("roles"))
    # once: every reader below shares them; each run's "did not act" beside its scores (claims and cross table read it)
    swept, rounds = with_actions(sweep_summary(loaded, sweep_index or {}), loaded, variants), round_frame(loaded)
    again = {name: without_variants(ClaimData(with_actions(sweep_summary(runs, sweep_index or {}), runs, variants),
                                              round_frame(runs),
                                              tb.run_summaries(runs), runs, told_true_k=frozenset(told_true_k)), unread)
             for name, runs in (kernel_sets or {}).items()}
    stages = {"seed_stages": dict(report_cfg.get("seed_stages") or {}),  # report.seed_stages: claims read in stages
              "seeds": tuple(((context or {}).get("study") or {}).get("seeds") or ())}
    claims = check_claims(papers, without_variants(ClaimData(swept, rounds, summary, loaded,
                                                             told_true_k=frozenset(told_true_k), **stages), unread),
                          report_cfg.get("claim_notes"), report_cfg.get("claims_not_carried"), report_cfg.get("roles"),
                          again)
    path = tb.write_text(claims.to_csv(index=False), table_dir / "paper_claims.csv")
    entries.append(_entry("paper_claims", path, out_dir))
    cross = (report_cfg.get("cross_paper") or {})
    lead = (cross_section_rst(cross_analysis(swept, cross, algorithms, told_true_k,
                                             (context or {}).get("cannot_split"), home_check_verdicts(context or {}, algorithms),
                                             bands))
            if cross else "")
    lead = front_tables_rst(papers,
                            ClaimData(swept, rounds, summary, loaded,
                                      ablation_claims=(context or {}).get("ablation_claims") or {}, **stages),
                            report_cfg.get("roles")) + lead
    paths = write_front_page(th, comparison, ranking, context, out_dir, algorithms, claims_checks(claims), lead)
    return entries + [_entry("front_page" if p.name == FRONT_PAGE else "departures", p, out_dir) for p in paths]


def unnamed_bands(papers: Sequence[str], bands: Mapping[str, str], roles: Mapping[str, Mapping[str, str]] | None
                  ) -> frozenset[str]:
    """The study's reference bands (cflcore.report.acted.references: FedAvg, the oracle, local training) that no
    checked paper names as a variant role (its ``roles``, or the study's ``report.roles`` mapping): claims about "every
    method" were written for the methods that cluster, so the runs of such a band are kept from the claims (issue 68);
    a band a paper names (FedAvg, the ``bnc`` of 000 and the heterogeneity claims) is read as before."""
    named = set()
    for paper in papers:
        cls = PAPERS.get(str(paper), field="report.paper_checks")
        named |= {r.name for r in cls.roles.values() if r.kind == "variant"}
        named |= {str(v) for k, v in ((roles or {}).get(str(paper)) or {}).items()
                  if k in cls.roles and cls.roles[k].kind == "variant"}
    return frozenset(b for b in bands if not any(b == n or b.startswith(n) for n in named))


def without_variants(data: ClaimData, variants: frozenset[str]) -> ClaimData:
    """``data`` without the runs of ``variants`` (their base names, swept variants included)."""
    if not variants:
        return data

    def frame(df: pd.DataFrame | None) -> pd.DataFrame | None:
        if df is None or not len(df) or "algorithm_base" not in df:
            return df
        return df[~df["algorithm_base"].isin(variants)]
    return replace(data, runs=frame(data.runs), rounds=frame(data.rounds), summaries=frame(data.summaries),
                   loaded=tuple(r for r in data.loaded if str(r.spec.algorithm).split(SEPARATOR)[0] not in variants))


def front_tables_rst(papers: Sequence[str], data: ClaimData, roles: Mapping[str, Mapping[str, str]] | None) -> str:
    """The tables the checked ``papers`` open the front page with (:attr:`cflcore.report.papers.base.Paper.front_tables`),
    each a section under its title, from ``data`` cast to the paper's roles."""
    parts = []
    for name in papers:
        paper = PAPERS.get(str(name), field="report.paper_checks")
        if not paper.front_tables:
            continue
        frames = paper.tables(paper_data(str(name), data, roles), True)
        for kind in paper.front_tables:
            title = paper.table_titles[kind]
            parts.append(paper_check_rst(PaperCheck(title[:1].upper() + title[1:], f"{paper.title}: "
                                                    f"``tables/{kind}.csv``.\n\n", [(title, frames[kind])])))
    return "".join(parts)


def _glance_wide(glance: pd.DataFrame) -> pd.DataFrame:
    """The compact view for Markdown / LaTeX: rows dataset × clients × method, the highest means marked."""
    parts = []
    for (dataset, clients), rows in glance.groupby(["dataset", "clients"], sort=False):
        cells, best = glance_frame(rows)
        marked = cells.where(~best.to_numpy(), cells.astype(str) + f" {tb.HIGHEST_MARK}")
        parts.append(marked.assign(dataset=dataset, clients=clients))
    if not parts:
        return pd.DataFrame(columns=["dataset", "clients", "method"])
    wide = pd.concat(parts, ignore_index=True).fillna("")
    return wide[["dataset", "clients", *[c for c in wide.columns if c not in ("dataset", "clients")]]]


def _paper_wide(comparison: pd.DataFrame) -> pd.DataFrame:
    out = comparison[["dataset", "clients", "split", "algorithm", "metric", "basis"]].copy()
    out["algorithm"] = out["algorithm"].map(tb.algorithm_label)
    rounds = (comparison["metric"] == "clustering_round").to_numpy()
    out["paper"] = [tb.format_cell(v, np.nan, 0 if r else 2) for v, r in zip(comparison["paper"], rounds)]
    out["ours"] = [tb.format_cell(m, s, 1 if r else 2) for m, s, r in zip(comparison["ours"], comparison["ours_std"], rounds)]
    out["note"] = comparison["note"]
    return out


def _temperature_curve(run: LoadedRun) -> fg.Curve | None:
    server = run.server
    if server is None or "temperature" not in server.columns or "round" not in server.columns:
        return None
    server = server.sort_values("round")
    values = pd.to_numeric(server["temperature"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(values).any():
        return None
    first = tb.summary_row(run.clustering, "mean").get("first_clustering_round")
    marker = None if first is None or pd.isna(first) else int(first) - 1
    return fg.Curve(f"s{run.spec.seed}", server["round"].to_numpy(dtype=np.int64), fg.normalise(values), marker)


ROUND_SCORES = ["ari", "n_clusters"]


def round_scores(runs: Sequence[LoadedRun]) -> pd.DataFrame:
    """Per run (every seed) and round, the clustering scores of :data:`ROUND_SCORES`: columns dataset, clients,
    split, algorithm, seed, round (0-based) and the scores (the ``round`` rows of clustering.parquet)."""
    columns = [*tb.GROUP_KEYS, "seed", "round", *ROUND_SCORES]
    parts = []
    for run in runs:
        rows = run.clustering[run.clustering["kind"] == "round"]
        s = run.spec
        parts.append(pd.DataFrame({"dataset": s.dataset, "clients": s.clients, "split": s.split,
                                   "algorithm": s.algorithm, "seed": s.seed,
                                   "round": rows["round"].to_numpy(dtype=np.int64),
                                   **{c: pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=np.float64)
                                      for c in ROUND_SCORES}}, columns=columns))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def write_figures(loaded: Sequence[LoadedRun], personal: pd.DataFrame, out_dir: Path) -> list[dict[str, Any]]:
    fig_dir, entries = out_dir / "figures", []

    def save(fig, kind: str, name: str, dataset: str | None, clients: int | None) -> None:
        entries.extend(_entry(kind, p, out_dir, dataset, clients) for p in fg.save_figure(fig, fig_dir / kind / name))

    datasets = list(dict.fromkeys(r.spec.dataset for r in loaded))
    for dataset in datasets:
        runs_d = [r for r in loaded if r.spec.dataset == dataset]
        for clients in dict.fromkeys(r.spec.clients for r in runs_d):
            runs_dc = [r for r in runs_d if r.spec.clients == clients]
            tag = f"{dataset}_n{clients}"
            rows = personal[(personal["dataset"] == dataset) & (personal["clients"] == clients) & (personal["n_seeds"] > 0)]
            if len(rows):
                save(fg.learning_gap_figure(rows, f"{dataset}, {clients} clients"), "learning_gap", tag, dataset, clients)
            runs_panels: dict[str, list[fg.Curve]] = {}
            for split in dict.fromkeys(r.spec.split for r in runs_dc):
                runs_s = [r for r in runs_dc if r.spec.split == split]
                for algorithm in dict.fromkeys(r.spec.algorithm for r in runs_s):
                    curves = [c for c in map(_temperature_curve, [r for r in runs_s if r.spec.algorithm == algorithm])
                              if c is not None]
                    if curves:
                        runs_panels[f"{split} / {algorithm}"] = curves
            if runs_panels:
                save(fg.temperature_runs_figure(runs_panels, f"Temperature per run: {dataset}, {clients} clients"),
                     "temperature_runs", tag, dataset, clients)
            scores = round_scores(runs_dc)
            save(fg.score_progress_figure(scores, f"ARI per round: {dataset}, {clients} clients"),
                 "clustering_progress", tag, dataset, clients)
            save(fg.n_clusters_figure(scores, f"Clusters per round: {dataset}, {clients} clients"),
                 "n_clusters", tag, dataset, clients)
        bands = temperature_bands(runs_d)
        if bands:
            save(fg.temperature_band_figure(bands, f"Normalised temperature per algorithm: {dataset}"),
                 "temperature_mean", dataset, dataset, None)
    all_bands = temperature_bands(loaded)
    if all_bands and len(datasets) > 1:
        save(fg.temperature_band_figure(all_bands, "Normalised temperature per algorithm: all datasets"),
             "temperature_mean", "all_datasets", None, None)
    for name, fig, dataset, clients in split_trace_figures(loaded):  # SCL / FedGWC criteria (report/traces.py)
        save(fig, "split_traces", name, dataset, clients)
    return entries


SEPARABLE_ARI = 0.99  # "earliest separable round": the first round a what-if clusterer reaches this ARI


def earliest_separable_round(frame: pd.DataFrame, threshold: float = SEPARABLE_ARI) -> dict[str, int | None]:
    """Per clusterer of a whatif.parquet table, the first 0-based round with ARI ≥ ``threshold`` (None if never)."""
    out: dict[str, int | None] = {}
    for name, group in frame.groupby("clusterer", sort=False):
        hit = group[group["ari"].astype("float64") >= threshold]
        out[str(name)] = int(hit["round"].min()) if len(hit) else None
    return out


def whatif_panel(run: LoadedRun) -> fg.WhatifPanel | None:
    """The clusterer × round ARI grid of one run's whatif.parquet (None without one)."""
    frame = run.whatif
    if frame is None or frame.empty:
        return None
    grid = frame.pivot_table(index="clusterer", columns="round", values="ari", aggfunc="first", sort=False, dropna=False)
    order = list(dict.fromkeys(frame["clusterer"].astype(str)))
    grid = grid.reindex(index=order).sort_index(axis=1)
    trigger = (run.whatif_meta or {}).get("run_clustering_round")
    return fg.WhatifPanel(order, grid.columns.to_numpy(dtype=np.int64), grid.to_numpy(dtype=np.float64, na_value=np.nan),
                          None if trigger is None else int(trigger), earliest_separable_round(frame))


def write_whatif_figures(loaded: Sequence[LoadedRun], out_dir: Path) -> list[dict[str, Any]]:
    """One what-if heatmap per scenario (a panel per algorithm) and ``whatif_delay.csv``: per run and
    clusterer, the run's clustering round (OCFL: its temperature trigger) against the clusterer's earliest
    round with ARI ≥ 0.99, both 1-based, and the delay between them."""
    fig_dir, entries, delays = out_dir / "figures" / "whatif_heatmap", [], []
    fig_dir.mkdir(parents=True, exist_ok=True)  # a declared directory() output, even when no run has a replay
    scenarios = dict.fromkeys((r.spec.dataset, r.spec.split, r.spec.clients, r.spec.seed) for r in loaded)
    for dataset, split, clients, seed in scenarios:
        panels = {}
        for run in loaded:
            if (run.spec.dataset, run.spec.split, run.spec.clients, run.spec.seed) != (dataset, split, clients, seed):
                continue
            panel = whatif_panel(run)
            if panel is None:
                continue
            panels[run.spec.algorithm] = panel
            for clusterer in panel.clusterers:
                first = panel.earliest.get(clusterer)
                delays.append({"dataset": dataset, "split": split, "clients": clients, "seed": seed,
                               "algorithm": run.spec.algorithm, "clusterer": clusterer,
                               "run_clustering_round": None if panel.trigger_round is None else panel.trigger_round + 1,
                               "earliest_separable_round": None if first is None else first + 1,
                               "delay": None if first is None or panel.trigger_round is None else panel.trigger_round - first})
        if panels:
            fig = fg.whatif_heatmap_figure(panels, f"What-if ARI: {dataset}, {split}, {clients} clients, seed {seed}")
            entries += [_entry("whatif_heatmap", p, out_dir, dataset, clients)
                        for p in fg.save_figure(fig, fig_dir / f"{dataset}_{split}_n{clients}_s{seed}")]
    if delays:
        table = pd.DataFrame(delays)
        for column in ("run_clustering_round", "earliest_separable_round", "delay"):
            table[column] = pd.array(table[column], dtype="Int64")
        path = tb.write_text(table.to_csv(index=False), fig_dir / "whatif_delay.csv")
        entries.append(_entry("whatif_heatmap", path, out_dir))
    return entries


def temperature_bands(runs: Sequence[LoadedRun]) -> dict[str, list[fg.Curve]]:
    """The temperature curves of ``runs`` grouped per number of clients × ALGORITHM (one band each).

    Every run records T, but after a method's first clustering its clients train different models, so a
    band pooling methods would mix method-specific dynamics; one band per algorithm keeps 000 Fig. 3's
    meaning (the mean over the splits, seeds — and here datasets — of ONE method)."""
    bands: dict[str, list[fg.Curve]] = {}
    for clients in dict.fromkeys(r.spec.clients for r in runs):
        for algorithm in dict.fromkeys(r.spec.algorithm for r in runs):
            group = [r for r in runs if r.spec.clients == clients and r.spec.algorithm == algorithm]
            curves = [c for c in map(_temperature_curve, group) if c is not None]
            if curves:
                bands[f"n={clients} · {tb.algorithm_label(algorithm)}"] = curves
    return bands


def hardware_table(loaded: Sequence[LoadedRun]) -> pd.DataFrame:
    """Where the runs ran: one row per distinct status.json ``hardware`` record, with its number of runs (– where a
    run recorded none). Results are bit-identical on one machine, not across instruction sets or devices, so a study
    whose runs ran on two machines shows two rows."""
    cols = list(HARDWARE_FIELDS)
    frame = pd.DataFrame([hardware_record(run.spec.status) for run in loaded], columns=cols)
    if not len(frame):
        return pd.DataFrame(columns=[*cols, "runs"])
    return frame.astype(object).where(frame.notna(), "–").astype(str).groupby(cols).size().rename("runs").reset_index()


def write_hardware(loaded: Sequence[LoadedRun], out_dir: Path) -> dict[str, Any]:
    return _entry("hardware", tb.write_text(hardware_table(loaded).to_csv(index=False),
                                            out_dir / "tables" / "hardware.csv"), out_dir)


def write_missing(missing: Sequence[MissingRun], out_dir: Path) -> dict[str, Any]:
    frame = pd.DataFrame([{"run": m.spec.run_id, "reason": m.reason} for m in missing], columns=["run", "reason"])
    return _entry("missing_runs", tb.write_text(frame.to_csv(index=False), out_dir / "missing_runs.csv"), out_dir)
