"""Labels of the report's figures in the HTML report (Snakemake ``report(..., labels=...)``, rules/report.smk).

Snakemake shows the files of one (sub)category as a table with one column per label, which the reader can
filter and sort. Figures are found in their folder by the pattern ``{name}.png``; :func:`figure_labels` reads
the labels back from ``name`` as the report's writers compose it (report/build.py, late_clients.py, traces.py,
explain_figures.py), matching the study's own dataset, split and algorithm names (which may hold ``_``).
Every file of one kind gets the same keys, and no two files of a kind the same values.
Imported when the Snakefile is parsed: standard library only.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

MODE_TITLES = {"in_cluster": "in-cluster", "out_cluster": "out-of-cluster", "orchestrator": "orchestrator"}
SCENARIO_KINDS = ("whatif_heatmap", "saliency_grid")
CLIENT_KINDS = ("learning_gap", "temperature_runs", "clustering_progress", "n_clusters", "late_clients")


def _scenario(stem: str, datasets: Sequence[str], splits: Sequence[str]) -> dict[str, Any] | None:
    """``<dataset>_<split>_n<clients>_s<seed>`` against the study's names."""
    for dataset in sorted(datasets, key=len, reverse=True):
        for split in sorted(splits, key=len, reverse=True):
            m = re.fullmatch(re.escape(f"{dataset}_{split}_n") + r"(\d+)_s(\d+)", stem)
            if m:
                return {"dataset": dataset, "split": split, "clients": int(m[1]), "seed": int(m[2])}
    return None


def _clients(stem: str, datasets: Sequence[str]) -> tuple[str, int, str] | None:
    """``<dataset>_n<clients>[_<rest>]`` against the study's datasets: (dataset, clients, rest)."""
    for dataset in sorted(datasets, key=len, reverse=True):
        m = re.fullmatch(re.escape(f"{dataset}_n") + r"(\d+)(?:_(.+))?", stem)
        if m:
            return dataset, int(m[1]), m[2] or ""
    return None


def figure_labels(kind: str, stem: str, study: Mapping[str, Any]) -> dict[str, Any]:
    """The labels of figure ``stem`` (its file name without ``.png``) of ``kind`` (a folder under figures/),
    for the study (the config's ``study`` block: datasets, splits). A name that does not parse keeps the
    kind's keys, the first holding the name."""
    datasets, splits = list(study.get("datasets") or []), list(study.get("splits") or [])
    if kind in SCENARIO_KINDS:
        found = _scenario(stem.removeprefix("explain_saliency_"), datasets, splits)
        return found or {"dataset": stem, "split": "", "clients": "", "seed": ""}
    if kind in CLIENT_KINDS or kind == "split_traces":
        found = _clients(stem, datasets)
        labels: dict[str, Any] = {"dataset": found[0] if found else stem, "clients": found[1] if found else ""}
        if kind == "split_traces":
            labels["method"] = found[2] if found else ""
        return labels
    if kind in ("sweeps", "round_envelopes", "fedgwc"):  # <dataset>_n<clients>_<base variant>_<base split> / _<split>_<family>
        found = _clients(stem, datasets)
        return {"dataset": found[0] if found else stem, "clients": found[1] if found else "",
                {"sweeps": "sweep", "round_envelopes": "split and methods", "fedgwc": "run and figure"}[kind]:
                found[2] if found else ""}
    if kind == "temperature_mean":
        return {"dataset": "all datasets" if stem == "all_datasets" else stem}
    if kind == "insdel_box":
        if stem.startswith("explain_box_"):
            mode = stem.removeprefix("explain_box_")
            return {"plot": "insertion / deletion AUC", "samples": MODE_TITLES.get(mode, mode)}
        return {"plot": "model-randomisation sanity check" if stem == "explain_sanity" else stem, "samples": "all"}
    if kind == "cd":
        for mode, title in MODE_TITLES.items():
            if stem.startswith(f"explain_cd_{mode}_"):
                return {"samples": title, "metric": stem.removeprefix(f"explain_cd_{mode}_")}
        return {"samples": stem, "metric": ""}
    return {"figure": stem}
