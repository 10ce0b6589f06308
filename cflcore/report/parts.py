"""The report stage's one orchestrator: a part at a time (rules/report.smk, one Snakemake job each), or all of
them in one process (``cfl report``, :func:`build_all`; :func:`build_report` for a list of runs), gathered by
:func:`gather` (rule ``report``).

Which part writes which kind, and with which writer, is the catalogue's (:mod:`cflcore.report.catalogue`):
:func:`write_part` creates the part's figure folders (the rules declare them), runs the writers the catalogue
names for it (:data:`WRITERS`) and records their index entries in ``parts/<part>.json``. Snakemake runs the
parts side by side and reruns only those whose inputs changed (a new explain result redraws the explain
figures, not the tables); every file is the same either way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .. import layout
from ..errors import CflError
from ..io import read_json, write_json
from . import catalogue
from .index import entry, write_index

# This module is imported when the Snakefile is parsed (rules/report_common.smk) and by the
# gathering job: the report's modules (pandas, matplotlib, scipy) are imported inside the writers.

PARTS = tuple(p.name for p in catalogue.PARTS)


def part_plan(plan: Mapping[str, Any], part: str) -> dict[str, Any]:
    """The part of ``plan`` that ``part`` reads (:attr:`catalogue.Part.plan_keys`): the rule's param."""
    return {key: plan.get(key) for key in catalogue.part(part).plan_keys}



def part_index(out_dir: str | Path, part: str) -> Path:
    return Path(out_dir) / layout.part_index_file(part)


def plan_specs(plan: Mapping[str, Any]) -> list:
    """The runs the plan (stages.report_plan) expects, with their standard paths (:class:`runs.RunSpec`)."""
    from .runs import run_specs

    return run_specs(str(plan["results_dir"]), plan["runs"])


@dataclass
class ReportInputs:
    """What the writers read: the expected runs (loaded once, on first use), the plan's other keys
    (stages.report_plan: ``front_page``, ``sweep_index``, ``late_runs``, ``explain_runs``, ``grid_clients``,
    ``results_dir``) and the report folder."""

    specs: Sequence[Any]
    out_dir: Path
    plan: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def runs(self) -> tuple[list, list]:
        """(loaded, missing) runs (:func:`runs.load_runs`)."""
        from .runs import load_runs

        return load_runs(self.specs)

    @property
    def loaded(self) -> list:
        return self.runs[0]

    def entry(self, kind: str, path: Path, dataset: str | None = None, clients: int | None = None) -> dict[str, Any]:
        """An index entry of a catalogue kind (:func:`index.entry`)."""
        return entry(kind, path, self.out_dir, dataset, clients)


# ---- the writers the catalogue names (catalogue.ReportOutput.writer): ReportInputs -> index entries ----------
def _tables(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .build import write_tables
    from .runs import load_runs, run_specs

    context = inputs.plan.get("front_page")
    kernels = ((context or {}).get("report") or {}).get("kernel_paths") or []  # the runs trained again on each
    runs = [spec.run_id for spec in inputs.specs]
    kernel_sets = {name: load_runs(run_specs(inputs.plan["results_dir"], runs, name))[0] for name in kernels}
    return write_tables(inputs.specs, inputs.loaded, inputs.out_dir, context, inputs.plan.get("sweep_index"),
                        kernel_sets)


def _scl_epsilons(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .scl_epsilons import scl_epsilon_table
    from .tables import write_text

    path = write_text(scl_epsilon_table(inputs.loaded).to_csv(index=False, float_format="%.6g"),
                      inputs.out_dir / "tables" / "scl_epsilons.csv")
    return [inputs.entry("scl_epsilons", path)]


def _paper_tables(inputs: ReportInputs) -> list[dict[str, Any]]:
    """Every registered paper's own tables (cflcore.report.papers.base.Paper.tables): with the study's rows for the
    papers it checks (``report.paper_checks``), the header only for the others."""
    import pandas as pd

    from .acted import with_actions
    from .papers.base import PAPERS, ClaimData, paper_data
    from .sweeps import round_frame, sweep_summary
    from .tables import write_text

    report = (inputs.plan.get("front_page") or {}).get("report") or {}
    variants = (inputs.plan.get("front_page") or {}).get("algorithms") or {}
    checked = {str(p) for p in report.get("paper_checks") or []}
    ablations = (inputs.plan.get("front_page") or {}).get("ablation_claims") or {}
    seeds = ((inputs.plan.get("front_page") or {}).get("study") or {}).get("seeds") or ()
    data = (ClaimData(with_actions(sweep_summary(inputs.loaded, inputs.plan.get("sweep_index") or {}), inputs.loaded,
                                   variants), round_frame(inputs.loaded),
                      loaded=inputs.loaded, ablation_claims=ablations, seed_stages=report.get("seed_stages") or {},
                      seeds=tuple(seeds)) if checked
            else ClaimData(pd.DataFrame(), loaded=inputs.loaded))
    entries = []
    for name in PAPERS.names():
        paper = PAPERS.get(name)
        cast = paper_data(name, data, report.get("roles")) if name in checked else data
        for kind, frame in paper.tables(cast, name in checked).items():
            path = write_text(frame.to_csv(index=False), inputs.out_dir / catalogue.OUTPUTS[kind].paths()[0])
            entries.append(inputs.entry(kind, path))
    return entries


def _cross_paper(inputs: ReportInputs) -> list[dict[str, Any]]:
    """The cross-paper table and CD diagram (``report.cross_paper``; empty table without it)."""
    from .acted import references, with_actions
    from .cross_paper import cross_analysis, write_cross_paper
    from .home_checks import home_check_verdicts
    from .sweeps import sweep_summary

    context = inputs.plan.get("front_page") or {}
    block = (context.get("report") or {}).get("cross_paper") or {}
    methods = list(dict.fromkeys(s.algorithm for s in inputs.specs))
    summary = (with_actions(sweep_summary(inputs.loaded, inputs.plan.get("sweep_index") or {}), inputs.loaded,
                            context.get("algorithms") or {}) if block else None)
    return write_cross_paper(cross_analysis(summary, block, methods, context.get("told_true_k") or [],
                                            context.get("cannot_split") or {}, home_check_verdicts(context, methods),
                                            references(context.get("algorithms") or {})),
                             inputs.out_dir, inputs.entry)


def _missing_runs(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .build import write_missing

    return [write_missing(inputs.runs[1], inputs.out_dir)]


def _hardware(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .build import write_hardware

    return [write_hardware(inputs.loaded, inputs.out_dir)]


def _run_figures(inputs: ReportInputs) -> list[dict[str, Any]]:
    from . import tables as tb
    from .build import write_figures

    personal, _ = tb.personalisation_table(tb.run_summaries(inputs.loaded), tb.expected_groups(inputs.specs))
    return write_figures(inputs.loaded, personal, inputs.out_dir)


def _sweeps(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .sweeps import write_sweep_outputs

    return write_sweep_outputs(inputs.loaded, inputs.plan.get("sweep_index") or {}, inputs.out_dir, inputs.entry)


def _fedgwc(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .fedgwc_figures import write_fedgwc_figures

    return write_fedgwc_figures(inputs.loaded, inputs.out_dir, inputs.entry)


def _traffic(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .traffic_figures import write_traffic_figures

    return write_traffic_figures(inputs.loaded, inputs.out_dir, inputs.entry)


def _whatif(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .build import write_whatif_figures

    return write_whatif_figures(inputs.loaded, inputs.out_dir)


def _late_clients(inputs: ReportInputs) -> list[dict[str, Any]]:
    from .late_clients import write_late_clients

    late = set(inputs.plan.get("late_runs") or [])
    return write_late_clients([s for s in inputs.specs if s.run_id in late], inputs.out_dir, inputs.entry)


def _explain(inputs: ReportInputs) -> list[dict[str, Any]]:
    """The explain figures of the plan's explained runs (saliency grids, insertion/deletion, CD diagrams)."""
    from .explain_figures import cd_figures, insdel_boxplot_figures, saliency_grid_figures

    results, figs = str(inputs.plan.get("results_dir", "")).rstrip("/"), inputs.out_dir / "figures"
    refs = []
    for run in inputs.plan.get("explain_runs") or []:
        ref = layout.parse_run_id(run)
        refs.append({"dataset": ref.dataset, "split": ref.split, "clients": ref.clients, "seed": ref.seed,
                     "algorithm": ref.algorithm, "explain_dir": Path(layout.explain_dir(results, run))})
    if not refs:
        return []
    drawn = {"saliency_grid": saliency_grid_figures(refs, figs / "saliency_grid", inputs.plan.get("grid_clients")),
             "insdel_box": insdel_boxplot_figures(refs, figs / "insdel_box"),
             "cd": cd_figures(refs, figs / "cd")}
    return [inputs.entry(kind, path) for kind, paths in drawn.items() for path in paths]


WRITERS: dict[str, Callable[[ReportInputs], list[dict[str, Any]]]] = {
    "tables": _tables, "scl_epsilons": _scl_epsilons, "paper_tables": _paper_tables,
    "cross_paper": _cross_paper, "missing_runs": _missing_runs, "hardware": _hardware, "run_figures": _run_figures, "sweeps": _sweeps,
    "fedgwc": _fedgwc, "traffic": _traffic, "whatif": _whatif, "late_clients": _late_clients, "explain": _explain,
}
"""writer name (catalogue) -> the function that writes its kinds and returns their index entries. The
``benchmarks`` writer is rule ``report``'s own (:func:`gather`, written last)."""


def runs_summary(inputs: ReportInputs) -> dict[str, Any]:
    """The index's account of the runs: expected, loaded, missing (with their reasons)."""
    loaded, missing = inputs.runs
    return {"n_expected": len(inputs.specs), "n_loaded": len(loaded), "n_missing": len(missing),
            "missing": [{"run": m.spec.run_id, "reason": m.reason} for m in missing]}


def _write(inputs: ReportInputs, part: str) -> dict[str, Any]:
    if part not in PARTS:
        raise CflError(f"unknown report part {part!r}; allowed: {', '.join(PARTS)}")
    for kind in catalogue.outputs_of(part, "figures"):  # declared as directory() outputs: always created
        (inputs.out_dir / kind.paths()[0]).mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"part": part, "entries": [e for w in catalogue.writers_of(part) for e in WRITERS[w](inputs)]}
    if part == "tables":  # the account of expected / loaded / missing runs, for the index
        record["runs"] = runs_summary(inputs)
    write_json(record, part_index(inputs.out_dir, part))
    return record


def write_part(plan: Mapping[str, Any], part: str, out_dir: str | Path) -> dict[str, Any]:
    """Rule ``report_<part>``: the part's files and ``parts/<part>.json``: ``{"part", "entries"}`` (and ``"runs"``,
    the account of expected / loaded / missing runs, for ``tables``)."""
    specs = plan_specs(plan) if "runs" in plan else []
    return _write(ReportInputs(specs, Path(out_dir), plan), part)


def gather(plan: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Rule ``report``: every part's entries, the benchmark tables (last: the job measures its own row) and
    ``index.json`` / ``index.csv``."""
    out_dir = Path(out_dir)
    records = {part: read_json(part_index(out_dir, part)) for part in PARTS}
    entries = [entry for part in PARTS for entry in records[part]["entries"]]
    return write_index(out_dir, records["tables"]["runs"], entries, plan.get("benchmarks"))


def _write_all(inputs: ReportInputs) -> dict[str, Any]:
    for part in PARTS:
        _write(inputs, part)
    return gather(inputs.plan, inputs.out_dir)


def build_all(plan: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Every part in this process, one after the other, then :func:`gather` (``cfl report``)."""
    return _write_all(ReportInputs(plan_specs(plan), Path(out_dir), plan))


def build_report(runs: Sequence[Any], out_dir: str | Path, context: Mapping[str, Any] | None = None,
                 late_runs: Sequence[str] = (), benchmarks: Mapping[str, Any] | None = None,
                 sweep_index: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The whole report for the expected ``runs`` (:class:`runs.RunSpec`, e.g. outside a config) in this
    process; returns the index. Runs without evaluation files are listed in ``missing_runs.csv`` with their
    reason and shown as "missing" in the tables; they never stop the report. ``context``
    (:func:`front_context.front_page_context` of the config) feeds the front page's departures; ``late_runs`` (run
    ids with late-joining clients, 000 §6.2) get the late-client table and figure; ``benchmarks``: see
    :func:`index.write_index`. No runs are explained here (the explain part needs a config's plan)."""
    plan = {"front_page": context, "late_runs": list(late_runs), "benchmarks": benchmarks, "sweep_index": sweep_index}
    return _write_all(ReportInputs(list(runs), Path(out_dir), plan))
