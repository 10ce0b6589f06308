"""Published values of 000 Tables 1–2 beside this study's (the "paper versus this run" table).

The published CSVs live in ``cflcore/reference/`` (source and caveats in its README.md and
paper_tables_notes.md). Like is compared with like:

* paper ``rand`` ↔ our ARI; paper ``com`` ↔ our homogeneity (the published COM is homogeneity);
* paper ``ami`` ↔ our AMI, except for ``ocfl-hdb`` whose published AMI column holds the ARI;
* paper ``clustering_round`` ↔ our ``clustering_round`` (1-based; SCL: last split).
The paper averages over the first 50 rounds (set ``report.score_rounds: 50`` to match).
Our ``mnist5k`` is a 5,000-image subset of MNIST and is compared with the paper's full-MNIST rows.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..errors import DataError

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "reference"
PAPER_DATASETS = ("mnist", "fmnist", "cifar10", "pathmnist", "bloodmnist")
DATASET_ALIASES = {"mnist5k": "mnist"}
DATASET_NOTES = {"mnist5k": "ours: 5k-image MNIST subset; paper: full MNIST"}
PAPER_SPLITS = ("nonoverlap-balanced", "nonoverlap-imbalanced", "overlap-balanced", "overlap-imbalanced")
# paper metric -> (our summary column, note)
METRIC_MAP = {"rand": ("ari", ""), "ami": ("ami", ""), "com": ("homogeneity", "published COM = homogeneity"),
              "clustering_round": ("clustering_round", "1-based; SCL: last split")}


def _read_reference(name: str) -> pd.DataFrame:
    path = REFERENCE_DIR / name
    if not path.exists():
        raise DataError(f"{path}: published reference table not found (package data missing)")
    return pd.read_csv(path)


def paper_table1() -> pd.DataFrame:
    """000 Table 1 as published: dataset, clients, split, algorithm, rand, ami, com, source (NaN = "–")."""
    return _read_reference("paper_table1_clustering.csv")


def paper_table2() -> pd.DataFrame:
    """000 Table 2 as published: dataset, clients, split, algorithm, clustering_round, source (NaN = "–")."""
    return _read_reference("paper_table2_clustering_round.csv")


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
    return pd.concat([t1, t2[t1.columns]], ignore_index=True)


def paper_vs_run(aggregated: pd.DataFrame, split_names: Mapping[str, str | None]) -> pd.DataFrame:
    """One row per (our group × published metric) that the paper also reports.

    ``aggregated`` holds per-group ``<col>_mean``/``_std``/``n_seeds`` for ari, ami, homogeneity and
    clustering_round; ``split_names`` maps our split names to the paper's (None = not comparable).
    """
    published = published_long()
    rows = []
    for _, group in aggregated.iterrows():
        dataset, split = paper_dataset(group["dataset"]), split_names.get(group["split"])
        if dataset is None or split is None:
            continue
        match = published[(published["dataset"] == dataset) & (published["clients"] == int(group["clients"]))
                          & (published["split"] == split) & (published["algorithm"] == group["algorithm"])]
        for _, cell in match.iterrows():
            column, note = METRIC_MAP[cell["metric"]]
            if cell["metric"] == "ami" and group["algorithm"] == "ocfl-hdb":
                column, note = "ari", "published OCFL-HDB AMI column holds ARI; compared with our ARI"
            ours = group.get(f"{column}_mean", np.nan)
            never = cell["metric"] != "clustering_round" and group.get("n_clustered", 1) == 0
            ours = np.nan if never or group["n_seeds"] == 0 else ours
            notes = [n for n in (note, DATASET_NOTES.get(group["dataset"], ""),
                                 "ours: never clustered (–)" if never else "",
                                 "paper: – (never clustered / never changed)" if pd.isna(cell["paper"]) else "",
                                 "ours: missing" if group["n_seeds"] == 0 else "") if n]
            rows.append({
                "dataset": group["dataset"], "paper_dataset": dataset, "clients": int(group["clients"]),
                "split": group["split"], "paper_split": split, "algorithm": group["algorithm"],
                "metric": cell["metric"], "paper": cell["paper"], "ours": ours,
                "ours_std": group.get(f"{column}_std", np.nan), "n_seeds": int(group["n_seeds"]),
                "difference": ours - cell["paper"], "note": "; ".join(notes),
            })
    columns = ["dataset", "paper_dataset", "clients", "split", "paper_split", "algorithm", "metric", "paper",
               "ours", "ours_std", "n_seeds", "difference", "note"]
    return pd.DataFrame(rows, columns=columns)
