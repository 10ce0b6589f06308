"""Labels of the report's figures in the HTML report (Snakemake ``report(..., labels=...)``, rules/report.smk).

Snakemake shows the files of one (sub)category as a table with one column per label, which the reader can
filter and sort. Figures are found in their folder by the pattern ``{name}.png``; :func:`figure_labels` reads
the labels back from ``name`` as the report's writers compose it (report/build.py, late_clients.py, traces.py,
sweeps.py, fedgwc_figures.py, explain_figures.py), matching the study's own dataset, split and algorithm names
(which may hold ``_``). The label columns of each kind are the catalogue's (``ReportOutput.labels``,
:mod:`cflcore.report.catalogue`): every file of one kind gets those keys, and no two files of a kind the same
values. Imported when the Snakefile is parsed: standard library only.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from .catalogue import OUTPUTS

MODE_TITLES = {"in_cluster": "in-cluster", "out_cluster": "out-of-cluster", "orchestrator": "orchestrator"}


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
    """The labels of figure ``stem`` (its file name without ``.png``) of ``kind`` (a figure kind of the catalogue),
    for the study (the config's ``study`` block: datasets, splits), keyed by the kind's catalogue labels. A name
    that does not parse keeps the keys, the first holding the name."""
    datasets, splits = list(study.get("datasets") or []), list(study.get("splits") or [])
    keys = OUTPUTS[kind].labels if kind in OUTPUTS else ()
    if keys == ("dataset", "split", "clients", "seed"):  # <dataset>_<split>_n<clients>_s<seed>
        found = _scenario(stem.removeprefix("explain_saliency_"), datasets, splits)
        return found or {"dataset": stem, "split": "", "clients": "", "seed": ""}
    if keys[:2] == ("dataset", "clients"):  # <dataset>_n<clients>[_<rest>]: rest is the third label
        found = _clients(stem, datasets)
        labels: dict[str, Any] = {"dataset": found[0] if found else stem, "clients": found[1] if found else ""}
        for key in keys[2:]:
            labels[key] = found[2] if found else ""
        return labels
    if keys == ("figure",):
        return {"figure": stem}
    if keys == ("dataset",):
        return {"dataset": "all datasets" if stem == "all_datasets" else stem}
    if keys == ("plot", "samples"):  # explain_box_<mode> / explain_sanity
        if stem.startswith("explain_box_"):
            mode = stem.removeprefix("explain_box_")
            return {"plot": "insertion / deletion AUC", "samples": MODE_TITLES.get(mode, mode)}
        return {"plot": "model-randomisation sanity check" if stem == "explain_sanity" else stem, "samples": "all"}
    if keys == ("samples", "metric"):  # explain_cd_<mode>_<metric>
        for mode, title in MODE_TITLES.items():
            if stem.startswith(f"explain_cd_{mode}_"):
                return {"samples": title, "metric": stem.removeprefix(f"explain_cd_{mode}_")}
        return {"samples": stem, "metric": ""}
    return {"figure": stem}
