"""Tables 1 and 2 of 000 and the personalisation table, from the runs' evaluation files.

Each table is written three ways: CSV (tidy, one row per dataset × clients × split × algorithm, with
mean, std over seeds, number of seeds, missing runs), and Markdown / LaTeX in the paper's wide layout
(rows dataset × clients × algorithm, columns split × metric, cells "mean ± std" when > 1 seed, the sample std of
cflcore.report.statistics.seed_stats; ARI cells add "k of n ≥ 0.9" and mark a bimodal cell).
A "–" cell means, as in the paper, that no seed of the group ever had more than one cluster (Table 1)
or that the partition never changed (Table 2); "missing" means no run of the group produced results.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..io import atomic_path
from .runs import LoadedRun, RunSpec
from .statistics.seed_stats import K_OF_N_METRICS, SeedSummary, from_columns, summary_columns

GROUP_KEYS = ["dataset", "clients", "split", "algorithm"]
TABLE1_METRICS = ["ari", "ami", "completeness", "homogeneity"]
TABLE2_METRICS = ["clustering_round"]
PERSONALISATION_METRICS = ["pf1", "gf1", "learning_gap", "local_bacc", "orch_bacc"]
EXTRA_CLUSTERING = ["rand", "v_measure", "silhouette", "davies_bouldin", "was", "wadb", "first_clustering_round"]
# last-round values (the ``final`` rows of the eval tables), as ``<metric>_final`` columns of the run summary
FINAL_METRICS = ["ari", "pf1", "gf1"]
# the front page's headline: final and mean PF1, GF1, ARI and the clustering round
HEADLINE_METRICS = ["pf1_final", "pf1", "gf1_final", "gf1", "ari_final", "ari", "clustering_round"]
PUBLISHED_SUFFIX = "-published"
PUBLISHED_MARK = "†"
PUBLISHED_NOTE = "published bug reproduced"
BEST_MARK = "★"  # the best beyond the seed noise (cflcore.report.cross_paper.mark_best): a test
# the highest mean of a column, a description, not a test: the at-a-glance tables mark it so, and keep ★ for a test
HIGHEST_MARK = "▲"
HIGHEST_NOTE = (f"{HIGHEST_MARK} = the highest mean of its column at the two decimals shown, ties all marked (not a "
                f"test: {BEST_MARK}, best beyond the seed noise, is the cross-paper table's)")


def is_published_variant(algorithm: str) -> bool:
    """``*-published`` variants reproduce a bug of the paper's own code on purpose (config/paper.yaml)."""
    return str(algorithm).endswith(PUBLISHED_SUFFIX)


def algorithm_label(algorithm: str) -> str:
    """The name shown in wide tables: ``ocfl-aff-published †`` for a published-bug variant."""
    return f"{algorithm} {PUBLISHED_MARK}" if is_published_variant(algorithm) else str(algorithm)


def summary_row(frame: pd.DataFrame, kind: str) -> dict:
    """The first row of ``kind`` (``mean`` / ``final``) of an eval table as a dict ({} when absent)."""
    rows = frame[frame["kind"] == kind]
    return rows.iloc[0].to_dict() if len(rows) else {}


def run_summaries(runs: Sequence[LoadedRun]) -> pd.DataFrame:
    """One row per loaded run: identity, its ``mean`` clustering scores and personalisation scores."""
    records = []
    for run in runs:
        s = run.spec
        clustering, personal = summary_row(run.clustering, "mean"), summary_row(run.personalisation, "mean")
        finals = {**summary_row(run.clustering, "final"), **summary_row(run.personalisation, "final")}
        record = {"dataset": s.dataset, "clients": s.clients, "split": s.split, "seed": s.seed, "algorithm": s.algorithm}
        for metric in [*TABLE1_METRICS, *TABLE2_METRICS, *EXTRA_CLUSTERING]:
            record[metric] = clustering.get(metric)
        flag = clustering.get("ever_clustered")
        record["ever_clustered"] = bool(flag) if flag is not None and not pd.isna(flag) else False
        for metric in PERSONALISATION_METRICS:
            record[metric] = personal.get(metric)
        for metric in FINAL_METRICS:
            record[f"{metric}_final"] = finals.get(metric)
        records.append(record)
    numeric = [*TABLE1_METRICS, *TABLE2_METRICS, *EXTRA_CLUSTERING, *PERSONALISATION_METRICS,
               *(f"{m}_final" for m in FINAL_METRICS)]
    columns = ["dataset", "clients", "split", "seed", "algorithm", *TABLE1_METRICS, *TABLE2_METRICS,
               *EXTRA_CLUSTERING, "ever_clustered", *PERSONALISATION_METRICS, *(f"{m}_final" for m in FINAL_METRICS)]
    frame = pd.DataFrame(records, columns=columns)
    for metric in numeric:
        frame[metric] = pd.to_numeric(frame[metric], errors="coerce").astype("float64")
    return frame


def expected_groups(specs: Sequence[RunSpec]) -> pd.DataFrame:
    """The dataset × clients × split × algorithm groups the config expects, in config order, with seed counts."""
    frame = pd.DataFrame([{"dataset": s.dataset, "clients": s.clients, "split": s.split,
                           "algorithm": s.algorithm, "seed": s.seed} for s in specs], columns=[*GROUP_KEYS, "seed"])
    return frame.groupby(GROUP_KEYS, sort=False).size().rename("n_expected").reset_index()


def aggregate_seeds(summary: pd.DataFrame, groups: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """Mean, sample std (ddof 1; NaN for one seed) and seeds of ``metrics`` over seeds, for every expected group
    (cflcore.report.statistics.seed_stats.summary_columns; ARI adds the seeds ≥ 0.9 and ≤ 0.2)."""
    rows = []
    for _, group in groups.iterrows():
        key = {k: group[k] for k in GROUP_KEYS}
        mask = np.logical_and.reduce([summary[k] == v for k, v in key.items()]) if len(summary) else np.zeros(0, bool)
        runs = summary[mask] if len(summary) else summary
        row = {**key, "n_seeds": int(len(runs)), "n_missing": int(group["n_expected"] - len(runs)),
               "n_clustered": int(runs["ever_clustered"].sum()) if len(runs) else 0,
               "published_variant": is_published_variant(key["algorithm"])}
        for metric in metrics:
            values = runs[metric].to_numpy(dtype=np.float64) if len(runs) else np.zeros(0)
            row.update(summary_columns(values, metric, counts=metric in K_OF_N_METRICS))
        rows.append(row)
    return pd.DataFrame(rows)


def format_cell(mean: float, std: float, digits: int = 2) -> str:
    """"0.96" or "0.96 ± 0.01" (std shown when defined, i.e. more than one seed); "–" for NaN."""
    return SeedSummary(np.nan if mean is None else mean, np.nan if std is None else std, 0).text(digits)


def wide_layout(aggregated: pd.DataFrame, metrics: Sequence[str], dash_unclustered: bool, digits: int = 2) -> pd.DataFrame:
    """Rows dataset × clients × algorithm, columns split/metric, formatted cells."""
    records = []
    for _, row in aggregated.iterrows():
        for metric in metrics:
            if row["n_seeds"] == 0:
                cell = "missing"
            elif dash_unclustered and row["n_clustered"] == 0:
                cell = "–"
            else:
                cell = from_columns(row, metric).text(digits, k_of_n=metric in K_OF_N_METRICS)
            records.append({"dataset": row["dataset"], "clients": row["clients"], "algorithm": algorithm_label(row["algorithm"]),
                            "column": f"{row['split']} {metric}", "cell": cell})
    if not records:
        return pd.DataFrame(columns=["dataset", "clients", "algorithm"])
    long = pd.DataFrame(records)
    order = list(dict.fromkeys(long["column"]))
    wide = long.pivot_table(index=["dataset", "clients", "algorithm"], columns="column", values="cell",
                            aggfunc="first", sort=False)
    return wide.reindex(columns=order).reset_index().rename_axis(columns=None)


def write_text(text: str, path: Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return path


def write_table(tidy: pd.DataFrame, wide: pd.DataFrame, stem: str, out_dir: Path, caption: str) -> list[Path]:
    """``{stem}.csv`` (tidy), ``{stem}.md`` and ``{stem}.tex`` (wide), all atomic."""
    out_dir = Path(out_dir)
    csv = write_text(tidy.to_csv(index=False, float_format="%.10g"), out_dir / f"{stem}.csv")
    md = write_text(f"{caption}\n\n{wide.to_markdown(index=False)}\n", out_dir / f"{stem}.md")
    latex = wide.to_latex(index=False, caption=caption, label=f"tab:{stem}", escape=True)
    tex = write_text(latex.replace("±", r"$\pm$").replace("–", "--"), out_dir / f"{stem}.tex")
    return [csv, md, tex]


def clustering_table(summary: pd.DataFrame, groups: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """000 Table 1 (ARI, AMI, completeness, homogeneity = published COM) plus the extra scores in the CSV."""
    tidy = aggregate_seeds(summary, groups, [*TABLE1_METRICS, "rand", "v_measure", "silhouette",
                                             "davies_bouldin", "was", "wadb"])
    return tidy, wide_layout(tidy, TABLE1_METRICS, dash_unclustered=True)


def clustering_round_table(summary: pd.DataFrame, groups: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """000 Table 2: 1-based clustering round (SCL: last split), "–" when the partition never changed."""
    tidy = aggregate_seeds(summary, groups, ["clustering_round", "first_clustering_round"])
    return tidy, wide_layout(tidy, ["clustering_round"], dash_unclustered=False, digits=1)


def personalisation_table(summary: pd.DataFrame, groups: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """PF1, GF1 and learning gap |PF1 − GF1| (000 §4.4), plus balanced accuracies in the CSV."""
    tidy = aggregate_seeds(summary, groups, PERSONALISATION_METRICS)
    return tidy, wide_layout(tidy, ["pf1", "gf1", "learning_gap"], dash_unclustered=False)


def headline_table(summary: pd.DataFrame, groups: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The front page's table: final (last round) and mean (over the scored rounds) PF1, GF1 and ARI, and
    the clustering round (1-based; SCL: last split), each a mean over seeds (± std over seeds)."""
    tidy = aggregate_seeds(summary, groups, HEADLINE_METRICS)
    return tidy, wide_layout(tidy, HEADLINE_METRICS, dash_unclustered=False)
