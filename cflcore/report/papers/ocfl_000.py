"""000 (OCFL, one-shot clustered FL; with 001, its authors' shorter earlier paper): its published Tables 1–2 and
Figure 2 beside this study's (the "paper versus this run" table), registered as the paper check every study runs
(:class:`Ocfl000`, ``published_tables``: cflcore.report.build and cflcore.report.front_page find it through the
registry, cflcore.report.papers.base.published_tables_paper). Its departures by design and its front-page section
(Tables 1–2 and Figure 2 beside ours, Kendall's τ) are :mod:`._ocfl_000_front`'s.

The published CSVs live in ``cflcore/reference/`` (source and caveats in its README.md and
paper_tables_notes.md). Like is compared with like:

* paper ``rand`` ↔ our ARI; paper ``com`` ↔ our homogeneity (the published COM is homogeneity);
* paper ``ami`` ↔ our AMI, except for ``ocfl-hdb`` whose published AMI column holds the ARI;
* paper ``clustering_round`` ↔ our ``clustering_round`` (1-based; SCL: last split);
* paper ``pf1`` / ``gf1`` (000 Figure 2: mean over all clients and ALL rounds, recomputed from the authors'
  raw runs, see ``reference/derive_paper_fig2_f1.md``) ↔ our mean PF1 / GF1, and the paper's last-round
  ``pf1_final`` / ``gf1_final`` ↔ ours.
Table 1 averages over the first 50 rounds (set ``report.score_rounds: 50`` to match).
Our ``mnist5k`` is a 5,000-image subset of MNIST and is compared with the paper's full-MNIST rows.
A ``*-published`` variant (the paper's own bug, reproduced) is compared with the paper's row of its base
method, and marked as such.

:func:`ranking_agreement` says whether the methods come in the same order as in the paper: Kendall's τ
(``scipy.stats.kendalltau``, τ-b) per dataset × clients × split × metric.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ...errors import DataError
from ..tables import PUBLISHED_NOTE, PUBLISHED_SUFFIX, is_published_variant
from . import _ocfl_000_front as front
from .base import Paper, PaperCheck, PaperDepartures, SettingHome, register_paper

PAPER = "000"
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "reference"
PAPER_DATASETS = ("mnist", "fmnist", "cifar10", "pathmnist", "bloodmnist")
DATASET_ALIASES = {"mnist5k": "mnist"}
DATASET_NOTES = {"mnist5k": "ours: 5k-image MNIST subset; paper: full MNIST"}
PAPER_SPLITS = ("nonoverlap-balanced", "nonoverlap-imbalanced", "overlap-balanced", "overlap-imbalanced")
SPLIT_SHORT = dict(zip(PAPER_SPLITS, ("NB", "NI", "OB", "OI")))
"""The splits' short names, as the front page's compact tables head their columns."""
# paper metric -> (our summary column, note)
METRIC_MAP = {"rand": ("ari", ""), "ami": ("ami", ""), "com": ("homogeneity", "published COM = homogeneity"),
              "clustering_round": ("clustering_round", "1-based; SCL: last split"),
              "pf1": ("pf1", "paper: Fig. 2, mean over all rounds"), "gf1": ("gf1", "paper: Fig. 2, mean over all rounds"),
              "pf1_final": ("pf1_final", "last round"), "gf1_final": ("gf1_final", "last round")}
F1_METRICS = ("pf1", "gf1", "pf1_final", "gf1_final")
# what each published value averages over (shown beside it)
METRIC_BASIS = {"rand": "mean, first 50 rounds", "ami": "mean, first 50 rounds", "com": "mean, first 50 rounds",
                "clustering_round": "round", "pf1": "mean, all rounds", "gf1": "mean, all rounds",
                "pf1_final": "last round", "gf1_final": "last round"}


def read_reference(name: str) -> pd.DataFrame:
    path = REFERENCE_DIR / name
    if not path.exists():
        raise DataError(f"{path}: published reference table not found (package data missing)")
    return pd.read_csv(path)


def paper_table1() -> pd.DataFrame:
    """000 Table 1 as published: dataset, clients, split, algorithm, rand, ami, com, source (NaN = "–")."""
    return read_reference("paper_table1_clustering.csv")


def paper_table2() -> pd.DataFrame:
    """000 Table 2 as published: dataset, clients, split, algorithm, clustering_round, source (NaN = "–")."""
    return read_reference("paper_table2_clustering_round.csv")


def paper_fig2() -> pd.DataFrame:
    """000 Figure 2's data per run: dataset, clients, split, algorithm, pf1, gf1, pf1_final, gf1_final,
    rounds, n_rows, source (recomputed from the authors' raw runs with their notebook's formula)."""
    return read_reference("paper_fig2_f1.csv")


def paper_f1_text_claims() -> pd.DataFrame:
    """The PF1 numbers the paper's text states (§4.6.1), each with its quote and seed line."""
    return read_reference("paper_f1_text_claims.csv")


def paper_table3() -> pd.DataFrame:
    """000 Appendix A.1 Table 3 (+ the model of §4.2): the training settings per dataset."""
    return read_reference("paper_table3_training.csv")


def paper_algorithm(algorithm: str) -> str:
    """The paper's method for one of ours: a ``*-published`` variant is its base method's row."""
    name = str(algorithm)
    return name[: -len(PUBLISHED_SUFFIX)] if is_published_variant(name) else name


def paper_dataset(dataset: str) -> str | None:
    """The paper's dataset name for one of ours (mnist5k → mnist), None when the paper has no such dataset."""
    name = DATASET_ALIASES.get(dataset, dataset)
    return name if name in PAPER_DATASETS else None


def paper_split(split: str, manifest: Mapping[str, Any] | None = None) -> str | None:
    """The paper's split name: the split's own name if it is one, else from the manifest's ``overlap`` /
    ``imbalanced`` parameters of an ``ocfl`` generator (top level or under ``params``)."""
    if split in PAPER_SPLITS:
        return split
    manifest = manifest or {}
    params = {**manifest, **(manifest.get("params") or {})}
    if params.get("generator", "ocfl") != "ocfl" or "overlap" not in params or "imbalanced" not in params:
        return None
    return f"{'overlap' if params['overlap'] else 'nonoverlap'}-{'imbalanced' if params['imbalanced'] else 'balanced'}"


def published_long() -> pd.DataFrame:
    """Both published tables in long form: dataset, clients, split, algorithm, metric, paper."""
    t1 = paper_table1().melt(id_vars=["dataset", "clients", "split", "algorithm"], value_vars=["rand", "ami", "com"],
                             var_name="metric", value_name="paper")
    t2 = paper_table2().rename(columns={"clustering_round": "paper"}).assign(metric="clustering_round")
    f1 = paper_fig2().melt(id_vars=["dataset", "clients", "split", "algorithm"], value_vars=list(F1_METRICS),
                           var_name="metric", value_name="paper")
    return pd.concat([t1, t2[t1.columns], f1[t1.columns]], ignore_index=True)


def paper_vs_run(aggregated: pd.DataFrame, split_names: Mapping[str, str | None]) -> pd.DataFrame:
    """One row per (our group × published metric) that the paper also reports.

    ``aggregated`` holds per-group ``<col>_mean``/``_std``/``n_seeds`` for ari, ami, homogeneity,
    clustering_round and (when present) pf1, gf1, pf1_final, gf1_final; ``split_names`` maps our split
    names to the paper's (None = not comparable). Metrics whose columns are absent are skipped.
    """
    published = published_long()
    rows = []
    for _, group in aggregated.iterrows():
        dataset, split = paper_dataset(group["dataset"]), split_names.get(group["split"])
        if dataset is None or split is None:
            continue
        method = paper_algorithm(group["algorithm"])
        match = published[(published["dataset"] == dataset) & (published["clients"] == int(group["clients"]))
                          & (published["split"] == split) & (published["algorithm"] == method)]
        for _, cell in match.iterrows():
            column, note = METRIC_MAP[cell["metric"]]
            if cell["metric"] == "ami" and method == "ocfl-hdb":
                column, note = "ari", "published OCFL-HDB AMI column holds ARI; compared with our ARI"
            if f"{column}_mean" not in group.index:
                continue
            ours = group.get(f"{column}_mean", np.nan)
            clustering_metric = cell["metric"] in ("rand", "ami", "com")
            never = clustering_metric and group.get("n_clustered", 1) == 0
            ours = np.nan if never or group["n_seeds"] == 0 else ours
            notes = [n for n in (note, DATASET_NOTES.get(group["dataset"], ""),
                                 PUBLISHED_NOTE if is_published_variant(group["algorithm"]) else "",
                                 "ours: never clustered (–)" if never else "",
                                 "paper: – (never clustered / never changed)" if pd.isna(cell["paper"]) else "",
                                 "ours: missing" if group["n_seeds"] == 0 else "") if n]
            rows.append({
                "dataset": group["dataset"], "paper_dataset": dataset, "clients": int(group["clients"]),
                "split": group["split"], "paper_split": split, "algorithm": group["algorithm"],
                "paper_algorithm": method, "published_variant": is_published_variant(group["algorithm"]),
                "metric": cell["metric"], "basis": METRIC_BASIS[cell["metric"]], "paper": cell["paper"], "ours": ours,
                "ours_std": group.get(f"{column}_std", np.nan), "n_seeds": int(group["n_seeds"]),
                "difference": ours - cell["paper"], "note": "; ".join(notes),
            })
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


COMPARISON_COLUMNS = ["dataset", "paper_dataset", "clients", "split", "paper_split", "algorithm", "paper_algorithm",
                      "published_variant", "metric", "basis", "paper", "ours", "ours_std", "n_seeds", "difference", "note"]
RANKING_COLUMNS = ["dataset", "clients", "split", "metric", "variants", "n_methods", "methods", "tau", "p_value", "verdict"]


def kendall_tau(ours: Sequence[float], paper: Sequence[float]) -> tuple[float, float]:
    """Kendall's τ-b between two score vectors over the same methods (NaN when < 2 methods or constant)."""
    x, y = np.asarray(ours, dtype=np.float64), np.asarray(paper, dtype=np.float64)
    if x.size < 2 or np.unique(x).size < 2 or np.unique(y).size < 2:
        return float("nan"), float("nan")
    result = stats.kendalltau(x, y)
    return float(result.statistic), float(result.pvalue)


def ranking_verdict(tau: float, p_value: float, alpha: float = 0.05) -> str:
    """A word for a τ: same order (τ = 1), agrees (τ > 0, p < alpha), weak (τ > 0), disagrees (τ ≤ 0)."""
    if not np.isfinite(tau):
        return "undefined"
    if tau >= 1 - 1e-12:
        return "same order"
    if tau > 0:
        return "agrees" if np.isfinite(p_value) and p_value < alpha else "weak agreement (not significant)"
    return "disagrees"


def _ranked_cells(cells: pd.DataFrame, prefer_published: bool) -> pd.DataFrame:
    """One row per paper method with a value on both sides: our fixed variant where both it and its
    ``*-published`` twin ran (``prefer_published``: the twin), else whichever ran."""
    cells = cells[np.isfinite(cells["ours"].astype(float)) & np.isfinite(cells["paper"].astype(float))]
    cells = cells.sort_values("published_variant", ascending=not prefer_published, kind="stable")
    return cells.drop_duplicates("paper_algorithm", keep="first")


def ranking_agreement(comparison: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Kendall's τ between our and the paper's values over the methods both have, per dataset × clients ×
    split × metric. ``variants`` = ``ours`` (one row per paper method, our bug-fixed variant where its
    ``*-published`` twin also ran) and, when a twin pair ran, ``published substituted`` (each twin replaces
    its base method: the paper's code as published)."""
    rows = []
    if comparison.empty:
        return pd.DataFrame(columns=RANKING_COLUMNS)
    metrics = list(metrics) if metrics is not None else list(dict.fromkeys(comparison["metric"]))
    keys = ["dataset", "clients", "split", "metric"]
    for key, cells in comparison[comparison["metric"].isin(metrics)].groupby(keys, sort=False):
        twins = cells.groupby("paper_algorithm")["published_variant"].nunique().gt(1).any()
        modes = [("ours", False)] + ([("published substituted", True)] if twins else [])
        for label, published in modes:
            ranked = _ranked_cells(cells, published)
            tau, p_value = kendall_tau(ranked["ours"], ranked["paper"])
            rows.append({**dict(zip(keys, key)), "variants": label, "n_methods": int(len(ranked)),
                         "methods": " ".join(ranked["algorithm"]), "tau": tau, "p_value": p_value,
                         "verdict": ranking_verdict(tau, p_value)})
    return pd.DataFrame(rows, columns=RANKING_COLUMNS)


@register_paper("000")
class Ocfl000(Paper):
    """000: OCFL (with 001). Its check is the published tables' cells beside ours (:func:`paper_vs_run`, Kendall's τ:
    :func:`ranking_agreement`), which every study's report writes; it has no claims of its own."""

    title = "OCFL (000): its Tables 1-2 and Figure 2"
    published_tables = True
    homes = {PAPER: SettingHome("OCFL's settings", methods=("ocfl",), accuracy="pf1")}
    output_titles = {  # with 001 (its Fig. 1: the clustering progress)
        "paper_ranking": "Kendall's tau against 000's ranking",
        "paper_vs_run": "000 Tables 1-2 and Figure 2 beside ours",
        "table1_clustering": "000 Table 1: clustering scores",
        "table2_clustering_round": "000 Table 2: clustering round",
        "scl_epsilons": "SCL's eps1, eps2, cooldown and their source (000 Table 4)",
        "learning_gap": "PF1 / GF1 learning gap (000 Fig. 2)",
        "temperature_mean": "Normalised temperature (000 Figs. 3-4)",
        "temperature_runs": "Temperature per run (000 Figs. 10-14)",
        "clustering_progress": "Clustering score per round (001 Fig. 1)",
        "table_late_clients": "late vs founding clients (000 §6.2)",
        "late_clients": "Late-joining clients: PF1 of late vs founding clients (000 §6.2)",
        "saliency_grid": "Saliency grids (000 Fig. 5)",
        "insdel_box": "Insertion / deletion AUC (000 Figs. 6-7)",
        "cd": "Critical-difference diagrams (000 Figs. 8, 17)",
    }
    output_captions = {
        "paper_vs_run": ("Published values of 000 Tables 1-2 and Figure 2 (PF1/GF1) beside this study's "
                         "(mnist5k is compared with the paper's MNIST; *-published variants with their base method's row)."),
        "table_late_clients": ("Late-joining clients (000 §6.2): attachment accuracy, joining round (1-based) and PF1 of "
                               "late vs founding clients from the joining round on, and in the last round (± std over seeds)."),
    }
    reference_dir = REFERENCE_DIR
    dataset_aliases = DATASET_ALIASES
    split_short = SPLIT_SHORT
    read_reference = staticmethod(read_reference)
    table1 = staticmethod(paper_table1)
    table3 = staticmethod(paper_table3)
    fig2 = staticmethod(paper_fig2)
    algorithm = staticmethod(paper_algorithm)
    dataset = staticmethod(paper_dataset)
    split = staticmethod(paper_split)
    vs_run = staticmethod(paper_vs_run)
    ranking = staticmethod(ranking_agreement)
    ranking_wide = staticmethod(front.ranking_frame)

    @classmethod
    def departures(cls, context: Mapping[str, Any], headline: pd.DataFrame, comparison: pd.DataFrame) -> PaperDepartures:
        return front.departures(context, headline, comparison)

    @classmethod
    def front_sections(cls, comparison: pd.DataFrame, ranking: pd.DataFrame) -> list[PaperCheck]:
        return [front.ocfl_paper_check(comparison, ranking)]
