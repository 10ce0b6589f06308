"""The ``report`` stage: tables, "paper versus this run", figures, an index and the missing runs.

Layout of ``out_dir`` (``results/report/``)::

    tables/table1_clustering.{csv,md,tex}        000 Table 1 (+ RI, V, silhouette, DB, WAS, WADB in the CSV)
    tables/table2_clustering_round.{csv,md,tex}  000 Table 2
    tables/table_personalisation.{csv,md,tex}    PF1, GF1, learning gap, balanced accuracies
    tables/paper_vs_run.{csv,md,tex}             published 000 Tables 1–2 beside ours
    tables/run_scores.csv                        one row per run (every seed)
    figures/<kind>/<dataset>[_n<clients>].{png,pdf}   kinds: FIGURE_KINDS (every folder exists, maybe empty)
    missing_runs.csv                             run, reason
    index.json, index.csv                        every file written: kind, path, format, caption, dataset, clients
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..io import write_json
from . import figures as fg
from . import tables as tb
from .paper import paper_split, paper_vs_run
from .runs import LoadedRun, MissingRun, RunSpec, load_runs

CAPTION_DIR = "report/captions"
FIGURE_KINDS = ("learning_gap", "temperature_mean", "temperature_runs", "clustering_progress", "n_clusters")


def _entry(kind: str, path: Path, out_dir: Path, dataset: str | None = None, clients: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "path": str(path.relative_to(out_dir)), "format": path.suffix.lstrip("."),
            "caption": f"{CAPTION_DIR}/{kind}.rst", "dataset": dataset, "clients": clients}


def split_name_map(specs: Sequence[RunSpec], loaded: Sequence[LoadedRun]) -> dict[str, str | None]:
    """Our split name -> the paper's (by name, else from a manifest's overlap/imbalanced parameters)."""
    manifests = {run.spec.split: run.manifest for run in loaded}
    return {s.split: paper_split(s.split, manifests.get(s.split)) for s in specs}


def write_tables(specs: Sequence[RunSpec], loaded: Sequence[LoadedRun], out_dir: Path) -> list[dict[str, Any]]:
    summary, groups = tb.run_summaries(loaded), tb.expected_groups(specs)
    table_dir = out_dir / "tables"
    entries: list[dict[str, Any]] = []
    t1, t1_wide = tb.clustering_table(summary, groups)
    t2, t2_wide = tb.clustering_round_table(summary, groups)
    tp, tp_wide = tb.personalisation_table(summary, groups)
    captions = {
        "table1_clustering": "Clustering scores (mean over rounds; ± std over seeds). homogeneity = the paper's COM.",
        "table2_clustering_round": "Clustering round (1-based; SCL: last split); – = partition never changed.",
        "table_personalisation": "PF1, GF1 and learning gap |PF1 - GF1| (means over clients and rounds).",
    }
    for stem, (tidy, wide) in {"table1_clustering": (t1, t1_wide), "table2_clustering_round": (t2, t2_wide),
                               "table_personalisation": (tp, tp_wide)}.items():
        entries += [_entry(stem, p, out_dir) for p in tb.write_table(tidy, wide, stem, table_dir, captions[stem])]
    merged = t1.merge(t2.drop(columns=["n_seeds", "n_missing", "n_clustered"]), on=tb.GROUP_KEYS, how="left")
    comparison = paper_vs_run(merged, split_name_map(specs, loaded))
    caption = "Published values of 000 Tables 1-2 beside this study's (mnist5k is compared with the paper's MNIST)."
    entries += [_entry("paper_vs_run", p, out_dir) for p in tb.write_table(comparison, _paper_wide(comparison), "paper_vs_run", table_dir, caption)]
    path = tb.write_text(summary.to_csv(index=False, float_format="%.10g"), table_dir / "run_scores.csv")
    entries.append(_entry("run_scores", path, out_dir))
    return entries


def _paper_wide(comparison: pd.DataFrame) -> pd.DataFrame:
    out = comparison[["dataset", "clients", "split", "algorithm", "metric"]].copy()
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


def _score_curve(runs: Sequence[LoadedRun], column: str, label: str) -> fg.Curve | None:
    """Mean over seeds of a per-round clustering column."""
    series = [r.clustering[r.clustering["kind"] == "round"].set_index("round")[column].astype("float64") for r in runs]
    if not series:
        return None
    mean = pd.concat(series, axis=1).mean(axis=1)
    return fg.Curve(label, mean.index.to_numpy(dtype=np.int64), mean.to_numpy(dtype=np.float64))


def write_figures(loaded: Sequence[LoadedRun], personal: pd.DataFrame, out_dir: Path) -> list[dict[str, Any]]:
    fig_dir, entries = out_dir / "figures", []
    for kind in FIGURE_KINDS:  # declared as directory() outputs by the report rule: always create them
        (fig_dir / kind).mkdir(parents=True, exist_ok=True)

    def save(fig, kind: str, name: str, dataset: str | None, clients: int | None) -> None:
        entries.extend(_entry(kind, p, out_dir, dataset, clients) for p in fg.save_figure(fig, fig_dir / kind / name))

    datasets = list(dict.fromkeys(r.spec.dataset for r in loaded))
    all_bands: dict[str, list[fg.Curve]] = {}
    for dataset in datasets:
        runs_d = [r for r in loaded if r.spec.dataset == dataset]
        bands: dict[str, list[fg.Curve]] = {}
        for clients in dict.fromkeys(r.spec.clients for r in runs_d):
            runs_dc = [r for r in runs_d if r.spec.clients == clients]
            tag = f"{dataset}_n{clients}"
            rows = personal[(personal["dataset"] == dataset) & (personal["clients"] == clients) & (personal["n_seeds"] > 0)]
            if len(rows):
                save(fg.learning_gap_figure(rows, f"{dataset}, {clients} clients"), "learning_gap", tag, dataset, clients)
            runs_panels: dict[str, list[fg.Curve]] = {}
            score_panels: dict[str, list[fg.Curve]] = {}
            count_panels: dict[str, list[fg.Curve]] = {}
            for split in dict.fromkeys(r.spec.split for r in runs_dc):
                runs_s = [r for r in runs_dc if r.spec.split == split]
                score_panels[split], count_panels[split] = [], []
                for algorithm in dict.fromkeys(r.spec.algorithm for r in runs_s):
                    runs_a = [r for r in runs_s if r.spec.algorithm == algorithm]
                    curves = [c for c in map(_temperature_curve, runs_a) if c is not None]
                    if curves:
                        runs_panels[f"{split} / {algorithm}"] = curves
                        bands.setdefault(f"n={clients}", []).extend(curves)
                        all_bands.setdefault(f"n={clients}", []).extend(curves)
                    score_panels[split].append(_score_curve(runs_a, "ari", algorithm))
                    count_panels[split].append(_score_curve(runs_a, "n_clusters", algorithm))
            if runs_panels:
                save(fg.temperature_runs_figure(runs_panels, f"Temperature per run: {dataset}, {clients} clients"),
                     "temperature_runs", tag, dataset, clients)
            save(fg.score_progress_figure(score_panels, f"ARI per round: {dataset}, {clients} clients"),
                 "clustering_progress", tag, dataset, clients)
            save(fg.n_clusters_figure(count_panels, f"Clusters per round: {dataset}, {clients} clients"),
                 "n_clusters", tag, dataset, clients)
        if bands:
            save(fg.temperature_band_figure(bands, f"Normalised temperature: {dataset}"), "temperature_mean",
                 dataset, dataset, None)
    if all_bands:
        save(fg.temperature_band_figure(all_bands, "Normalised temperature: all datasets"), "temperature_mean",
             "all_datasets", None, None)
    return entries


def write_missing(missing: Sequence[MissingRun], out_dir: Path) -> dict[str, Any]:
    frame = pd.DataFrame([{"run": m.spec.run_id, "reason": m.reason} for m in missing], columns=["run", "reason"])
    return _entry("missing_runs", tb.write_text(frame.to_csv(index=False), out_dir / "missing_runs.csv"), out_dir)


def build_report(runs: Sequence[RunSpec], out_dir: str | Path) -> dict[str, Any]:
    """Write every table and figure for the expected ``runs`` into ``out_dir``; return the index.

    Runs without evaluation files are listed in ``missing_runs.csv`` with their reason and shown as
    "missing" in the tables; they never stop the report.
    """
    out_dir = Path(out_dir)
    loaded, missing = load_runs(runs)
    entries = write_tables(runs, loaded, out_dir)
    personal, _ = tb.personalisation_table(tb.run_summaries(loaded), tb.expected_groups(runs))
    entries += write_figures(loaded, personal, out_dir)
    entries.append(write_missing(missing, out_dir))
    index = {"n_expected": len(runs), "n_loaded": len(loaded), "n_missing": len(missing),
             "missing": [{"run": m.spec.run_id, "reason": m.reason} for m in missing], "files": entries}
    tb.write_text(pd.DataFrame(entries).to_csv(index=False), out_dir / "index.csv")
    write_json(index, out_dir / "index.json")
    return index
