"""The report stage in parts, one Snakemake job each (rules/report.smk), gathered by the ``report`` job.

Each part reads only what it draws and writes its files plus ``parts/<part>.json`` (its index entries):

* ``tables`` — Tables 1–2, personalisation, headline, at a glance, the paper check, τ, ``run_scores.csv``,
  ``missing_runs.csv`` and the front page (report/build.py :func:`~cflcore.report.build.write_tables`);
* ``figures`` — learning gap, temperature, clustering progress, clusters per round, split traces, the factor
  sweeps and per-round seed envelopes (report/sweeps.py), 004's FedGWC figures (report/fedgwc_figures.py);
* ``whatif`` — the what-if heatmaps and ``whatif_delay.csv``;
* ``late_clients`` — the late-joining clients' table and figure (000 §6.2);
* ``explain`` — saliency grids, insertion/deletion box plots and CD diagrams of the explained runs.

:func:`gather` (rule ``report``) then writes the per-rule benchmark tables and ``index.json`` / ``index.csv``.
Snakemake runs the parts side by side and reruns only those whose inputs changed (a new explain result
redraws the explain figures, not the tables); ``cfl report`` runs them one after the other
(:func:`build_all`). Every file is the same either way.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..errors import CflError
from ..io import read_json, write_json
from .index import write_index

# This module is imported when the Snakefile is parsed (stages.benchmark_jobs names the part rules) and by the
# gathering job: the report's modules (pandas, matplotlib, scipy) are imported inside the functions that draw.

PARTS = ("tables", "figures", "whatif", "late_clients", "explain")
EXPLAIN_FIGURE_KINDS = ("saliency_grid", "insdel_box", "cd")


RUN_KEYS = ("results_dir", "study", "algorithm_splits", "dataset_splits")
PLAN_KEYS = {"tables": (*RUN_KEYS, "front_page", "sweep_index"), "figures": (*RUN_KEYS, "sweep_index"), "whatif": RUN_KEYS,
             "late_clients": (*RUN_KEYS, "late_runs"), "explain": ("results_dir", "explain_runs", "grid_clients"),
             "index": ("benchmarks",)}
"""What each part reads of the plan (stages.report_plan); ``index`` is rule ``report`` (:func:`gather`)."""


def part_plan(plan: Mapping[str, Any], part: str) -> dict[str, Any]:
    """The part of ``plan`` that ``part`` reads: the rule's param, so that a config change reruns only the parts
    it concerns (e.g. a departure's setting the tables and front page, not the figures)."""
    return {key: plan.get(key) for key in PLAN_KEYS[part]}


def part_rule(part: str) -> str:
    """The Snakemake rule that writes ``part`` (rules/report.smk)."""
    return f"report_{part}"


def part_index(out_dir: str | Path, part: str) -> Path:
    return Path(out_dir) / "parts" / f"{part}.json"


def plan_specs(plan: Mapping[str, Any]) -> list:
    """The runs the plan (stages.report_plan) expects, with their standard paths (:class:`runs.RunSpec`)."""
    from .runs import run_specs_from_config

    return run_specs_from_config({"study": plan["study"], "results_dir": str(plan["results_dir"]),
                                  "algorithm_splits": plan.get("algorithm_splits") or {},
                                  "dataset_splits": plan.get("dataset_splits") or {}})


def explain_figures(plan: Mapping[str, Any], out_dir: Path) -> list[dict[str, Any]]:
    """The explain figures of the plan's explained runs into ``out_dir/figures/<kind>``; every kind's folder
    exists afterwards (the rule declares them)."""
    from .build import _entry
    from .explain_figures import (
        cd_figures,
        insdel_boxplot_figures,
        saliency_grid_figures,
    )

    from .. import layout

    results, figs = str(plan["results_dir"]).rstrip("/"), out_dir / "figures"
    refs = []
    for run in plan["explain_runs"]:
        ref = layout.parse_run_id(run)
        refs.append({"dataset": ref.dataset, "split": ref.split, "clients": ref.clients, "seed": ref.seed,
                     "algorithm": ref.algorithm, "explain_dir": Path(layout.explain_dir(results, run))})
    for kind in EXPLAIN_FIGURE_KINDS:
        (figs / kind).mkdir(parents=True, exist_ok=True)
    if not refs:
        return []
    drawn = {"saliency_grid": saliency_grid_figures(refs, figs / "saliency_grid", plan.get("grid_clients")),
             "insdel_box": insdel_boxplot_figures(refs, figs / "insdel_box"),
             "cd": cd_figures(refs, figs / "cd")}
    return [_entry(kind, path, out_dir, caption=f"explain_{kind}") for kind, paths in drawn.items() for path in paths]


def write_part(plan: Mapping[str, Any], part: str, out_dir: str | Path) -> dict[str, Any]:
    """Write one part's files and ``parts/<part>.json``: ``{"part", "entries"}`` (and ``"runs"``, the account of
    expected / loaded / missing runs, for ``tables``)."""
    if part not in PARTS:
        raise CflError(f"unknown report part {part!r}; allowed: {', '.join(PARTS)}")
    from . import tables as tb
    from .build import (
        CAPTION_DIR,
        _entry,
        runs_summary,
        write_figures,
        write_missing,
        write_tables,
        write_whatif_figures,
    )
    from .late_clients import write_late_clients
    from .runs import load_runs
    from .fedgwc_figures import write_fedgwc_figures
    from .sweeps import write_sweep_outputs

    out_dir = Path(out_dir)
    record: dict[str, Any] = {"part": part}
    if part == "late_clients":
        late = set(plan.get("late_runs") or [])
        record["entries"] = write_late_clients([s for s in plan_specs(plan) if s.run_id in late], out_dir, CAPTION_DIR)
    elif part == "explain":
        record["entries"] = explain_figures(plan, out_dir)
    else:
        specs = plan_specs(plan)
        loaded, missing = load_runs(specs)
        if part == "tables":
            entries = write_tables(specs, loaded, out_dir, plan.get("front_page"), plan.get("sweep_index"))
            record["entries"] = [*entries, write_missing(missing, out_dir)]
            record["runs"] = runs_summary(specs, loaded, missing)
        elif part == "figures":
            personal, _ = tb.personalisation_table(tb.run_summaries(loaded), tb.expected_groups(specs))
            def entry(kind, path, dataset, clients):
                return _entry(kind, path, out_dir, dataset, clients)

            record["entries"] = (write_figures(loaded, personal, out_dir)
                                 # factor sweeps and seed envelopes (report/sweeps.py), 004's FedGWC figures
                                 + write_sweep_outputs(loaded, plan.get("sweep_index") or {}, out_dir, entry)
                                 + write_fedgwc_figures(loaded, out_dir, entry))
        else:
            record["entries"] = write_whatif_figures(loaded, out_dir)
    write_json(record, part_index(out_dir, part))
    return record


def gather(plan: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Rule ``report``: every part's entries, the benchmark tables (last: the job measures its own row) and
    ``index.json`` / ``index.csv``."""
    out_dir = Path(out_dir)
    records = {part: read_json(part_index(out_dir, part)) for part in PARTS}
    entries = [entry for part in PARTS for entry in records[part]["entries"]]
    return write_index(out_dir, records["tables"]["runs"], entries, plan.get("benchmarks"))


def build_all(plan: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Every part in this process, one after the other, then :func:`gather` (``cfl report``)."""
    for part in PARTS:
        write_part(plan, part, out_dir)
    return gather(plan, out_dir)
