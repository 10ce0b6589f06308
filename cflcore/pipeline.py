"""The pipeline's stages, one record each (docs/architecture.md §2): the one list of stages that the code hashes
(cflcore/provenance.py), the report's benchmark view (cflcore/report/benchmarks.py), the benchmark plan
(:func:`cflcore.stages.benchmark_jobs`) and the ``cfl`` command line read.

A stage is a kind of job: the ``cflcore.stages`` functions it runs (its code entries: what its code hash covers),
the Snakemake rules that run it and which jobs each runs, its wildcards, the named inputs and outputs of its rules,
the stages whose outputs it reads, and its ``cfl`` subcommand. The rules stay hand-written Snakemake (rules/*.smk);
tests/workflow/test_pipeline.py checks that they match these records: every rule belongs to a stage, and a rule's
named inputs and outputs are the union of those of the stages that list it. Adding a stage is one record here, one
rule and one entry function in cflcore/stages.py (docs/architecture.md §2, "Adding a stage").

Standard library only, on the ground floor: reading the records imports no plug-in and no torch, provenance can
read them, and no job's code hash but the report's covers this module. The report's parts are rules generated from
its catalogue (cflcore/report/catalogue.py, one ``report_<part>`` rule per part): the functions below take them as
an argument (rule -> what the part reads) from the modules that know the catalogue.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

_SCENARIO = ("dataset", "split", "clients", "seed")
_RUN = (*_SCENARIO, "algorithm")
_RUN_FILES = ("history", "server", "gram", "divergence", "traffic", "models", "status")

JOB_SETS = {
    "datasets": "one job per dataset of the study",
    "scenarios": "one job per scenario",
    "input_files": "one job per scenario and option of a file kind some variant declares (Strategy.inputs)",
    "runs": "one job per run",
    "replayed_runs": "one job per run with a what-if replay (config.whatif_runs)",
    "unreplayed_runs": "one job per run without a what-if replay",
    "kernel_runs": "one job per run and kernel path of report.kernel_paths (none where it is unset)",
    "late_client_runs": "one job per run with late clients (config.late_client_runs)",
    "explained_runs": "one job per explained run (config.explain_runs)",
    "part": "one job, named after its rule",
    "index": "one job, the report's last (it measures its own time)",
    "tuning": "one job, the calibration's choice (rule tune, on the tuning runs; no part of the study's report)",
}
"""Which jobs of a study a rule runs (:attr:`Stage.rules`): the benchmark plan lists each rule's jobs by these."""


@dataclass(frozen=True, kw_only=True)
class Stage:
    """One stage of the pipeline (module docstring)."""

    name: str
    """The stage: the key of its code hash (``provenance.code_version(name)`` in the rules) and of its record."""
    entries: tuple[str, ...]
    """The ``cflcore.stages`` functions its jobs run: what its code hash covers (cflcore/provenance.py)."""
    rules: Mapping[str, str]
    """The rules that run it -> which jobs each runs (a key of :data:`JOB_SETS`)."""
    wildcards: tuple[str, ...]
    inputs: tuple[str, ...] | None
    """The named inputs its rules declare for it (None: built from the report's catalogue)."""
    outputs: tuple[str, ...] | None
    """The named outputs its rules declare for it (None: built from the report's catalogue)."""
    upstream: tuple[str, ...]
    """The stages whose outputs its jobs read."""
    command: str
    """Its ``cfl`` subcommand."""
    help: str
    options: tuple[str, ...] = field(default=())
    """Extra ``cfl`` options of its command (beyond its wildcards), e.g. ``--summary`` of ``cfl split``."""
    rule_wildcards: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Wildcards a rule of the stage has beyond the stage's: rule ``train_kernels``'s kernel path."""


STAGES: tuple[Stage, ...] = (
    Stage(name="prepare_dataset", entries=("prepare_dataset",), rules={"prepare_dataset": "datasets"},
          wildcards=("dataset",), inputs=(), outputs=("dataset",), upstream=(), command="data",
          help="dataset -> results/data/{dataset}.parquet"),
    Stage(name="split", entries=("make_split",), rules={"split": "scenarios"}, wildcards=_SCENARIO,
          inputs=("dataset",), outputs=("assignments", "manifest"), upstream=("prepare_dataset",), command="split",
          help="dataset -> results/splits/{scenario}/", options=("summary",)),
    Stage(name="centralised_update_norms", entries=("centralised_update_norms",),
          rules={"centralised_update_norms": "input_files"}, wildcards=(*_SCENARIO, "round_size"),
          inputs=("dataset", "assignments", "manifest"), outputs=("norms",), upstream=("split",),
          command="centralised_update_norms",
          help="a centralised training's update norm per round, beside the split (a strategy input: SCL's proxy)"),
    Stage(name="train", entries=("train",), rules={"train": "replayed_runs", "train_evaluate": "unreplayed_runs",
                                                   "train_kernels": "kernel_runs"},
          wildcards=_RUN, rule_wildcards={"train_kernels": ("kernels",)},
          inputs=("dataset", "assignments", "manifest"), outputs=_RUN_FILES, upstream=("split", "centralised_update_norms"),
          command="train", help="federated training of one run"),
    Stage(name="evaluate", entries=("evaluate",), rules={"evaluate": "replayed_runs", "train_evaluate": "unreplayed_runs",
                                                         "train_kernels": "kernel_runs"},
          wildcards=_RUN, rule_wildcards={"train_kernels": ("kernels",)}, inputs=("history", "server", "gram", "status", "manifest"),
          outputs=("clustering", "personalisation"), upstream=("train",), command="evaluate",
          help="clustering and personalisation scores of one run"),
    Stage(name="whatif", entries=("whatif",), rules={"evaluate": "replayed_runs"}, wildcards=_RUN,
          inputs=("history", "server", "gram", "divergence", "status", "manifest"), outputs=("whatif",),
          upstream=("train",), command="whatif",
          help="replay the what-if clusterers on every recorded round of one run"),
    Stage(name="evaluate_late_clients", entries=("evaluate_late_clients",),
          rules={"evaluate_late_clients": "late_client_runs"}, wildcards=_RUN,
          inputs=("history", "server", "status", "manifest"), outputs=("late",), upstream=("train",),
          command="evaluate_late_clients", help="the late clients' scores of one run (000 §6.2)"),
    Stage(name="explain", entries=("explain",), rules={"explain": "explained_runs"}, wildcards=_RUN,
          inputs=("dataset", "assignments", "manifest", "models", "status"),
          outputs=("insdel", "samples", "summary", "saliency"), upstream=("train",), command="explain",
          help="insertion/deletion scores of one run"),
    Stage(name="report", entries=("report_part", "report_index"), rules={"report": "index"}, wildcards=(),
          inputs=None, outputs=None, upstream=("evaluate", "whatif", "evaluate_late_clients", "explain"),
          command="report", help="tables and figures of every run in the config"),
    Stage(name="tune", entries=("tune",), rules={"tune": "tuning"}, wildcards=(),
          inputs=("clustering", "personalisation", "server", "status"), outputs=("calibrated",),
          upstream=("train", "evaluate"), command="tune",
          help="a calibration: mode tune's choice of thresholds from the tuning runs -> config/calibrated/<config file>"),
)
"""Every stage, upstream first. The report's part rules join the report stage (:func:`with_report_parts`)."""

REPORT_PART_READS = {"evaluations": "evaluate", "whatif": "whatif", "late_clients": "evaluate_late_clients",
                     "explain": "explain"}
"""What a report part reads (catalogue.Part.reads) -> the stage that writes it; the index reads the parts."""

TARGET_RULES = ("all",)
"""Rules that run no stage: the Snakefile's default target."""


def stage(name: str, stages: tuple[Stage, ...] | None = None) -> Stage:
    """The record of the stage called ``name``."""
    stages = STAGES if stages is None else stages
    for s in stages:
        if s.name == name:
            return s
    raise KeyError(f"unknown stage {name!r}; allowed: {', '.join(s.name for s in stages)}")


def stage_entries(stages: tuple[Stage, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """Stage -> its code entries (cflcore/provenance.py)."""
    stages = STAGES if stages is None else stages
    return {s.name: s.entries for s in stages}


def with_report_parts(parts: Mapping[str, str], stages: tuple[Stage, ...] | None = None) -> tuple[Stage, ...]:
    """``stages`` with the report's part rules (rule -> what the part reads, :data:`REPORT_PART_READS`'s keys) added
    to the report stage, each running one job."""
    stages = STAGES if stages is None else stages
    unknown = sorted(set(parts.values()) - set(REPORT_PART_READS))
    if unknown:
        raise KeyError(f"report parts read {unknown}; known: {', '.join(REPORT_PART_READS)}")
    return tuple(replace(s, rules={**{rule: "part" for rule in parts}, **s.rules}) if s.name == "report" else s
                 for s in stages)


def rule_upstream(parts: Mapping[str, str], stages: tuple[Stage, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """Rule -> the rules whose outputs its jobs read, from the stages' upstream; a report part (``parts``: rule ->
    what it reads) reads the rules of the stage that writes that (:data:`REPORT_PART_READS`), the index the parts."""
    stages = STAGES if stages is None else stages
    rules_of = {s.name: tuple(s.rules) for s in stages}
    out: dict[str, tuple[str, ...]] = {}
    for s in with_report_parts(parts, stages):
        for rule, jobs in s.rules.items():
            if jobs == "part":
                ups = rules_of[REPORT_PART_READS[parts[rule]]]
            elif jobs == "index":
                ups = tuple(parts)
            else:  # a rule of two stages (train_evaluate) reads neither stage's rules: it writes the earlier's files
                own = {t.name for t in stages if rule in t.rules}
                ups = tuple(r for u in s.upstream if u not in own for r in rules_of[u])
            out[rule] = tuple(dict.fromkeys((*out.get(rule, ()), *ups)))
    return out


def aggregating_rules(parts: Mapping[str, str], stages: tuple[Stage, ...] | None = None) -> frozenset[str]:
    """Rules with one job that reads every job of its upstream rules (the report's parts and index, the tuning's
    choice)."""
    stages = STAGES if stages is None else stages
    return frozenset(r for s in with_report_parts(parts, stages) for r, jobs in s.rules.items()
                     if jobs in ("part", "index", "tuning"))


def rule_files(parts: Mapping[str, str] = {}, stages: tuple[Stage, ...] | None = None) -> dict[str, tuple[set[str], set[str]] | None]:
    """Rule -> (named inputs, named outputs) its rule declares: the union over the stages that list it (None where
    the catalogue builds them)."""
    stages = STAGES if stages is None else stages
    out: dict[str, tuple[set[str], set[str]] | None] = {}
    for s in with_report_parts(parts, stages):
        for rule in s.rules:
            if s.inputs is None or s.outputs is None:
                out[rule] = None
                continue
            ins, outs = out.setdefault(rule, (set(), set())) or (set(), set())
            out[rule] = (ins | set(s.inputs), outs | set(s.outputs))
    # a rule of two stages (train_evaluate) does not read what it writes itself: the later stage's run files
    return {rule: files if files is None else (files[0] - files[1], files[1]) for rule, files in out.items()}
