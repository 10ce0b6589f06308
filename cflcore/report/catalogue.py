"""The report's catalogue: every table, figure kind and page the report writes, in one place
(docs/architecture.md §10).

One :class:`ReportOutput` per kind says which part of the report writes it (:data:`PARTS`, one Snakemake job
each), which writer of :mod:`cflcore.report.parts` draws it, where it lands under ``results/report/``, its
caption (``report/captions/<caption>.rst``), and where and under which labels the HTML report shows it. Everything
else reads this module: the report rules are generated from it in a loop (rules/report.smk), the part jobs call
the writers it names (:func:`cflcore.report.parts.write_part`), the figures' labels follow the keys it declares
(:mod:`cflcore.report.labels`), and every index entry takes its caption from it. Adding a kind is one entry here,
one caption file and the writer that draws it; a paper's own tables are its module's (``table_titles``, read from
the papers' source by cflcore.paper_sources.declared_paper_tables, never importing a paper), and so are the titles
of the kinds drawn after a paper (a title "" here: the paper's ``output_titles``, e.g. "… (000 Fig. 2)").

Imported when the Snakefile is parsed, and outside the train and evaluate stages' code (a new kind reruns the
report only): the standard library and cflcore.paper_sources' reading of the papers' source only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..paper_sources import declared_output_titles, declared_paper_tables

Form = Literal["table", "figures", "page"]
WIDE_FORMATS = ("csv", "md", "tex")
"""A table with Markdown and LaTeX versions beside the CSV (only the CSV is registered in the HTML report)."""


@dataclass(frozen=True)
class Part:
    """One job of the report stage (rule ``report_<name>``): what it reads and what it may use."""

    name: str
    reads: Literal["evaluations", "whatif", "late_clients", "explain", "parts"]
    plan_keys: tuple[str, ...]
    """What the part reads of the report's plan (stages.report_plan): the rule's param, so that a config change
    reruns only the parts it concerns (e.g. a departure's setting the tables and front page, not the figures)."""
    mem_mb: int = 2000
    runtime: int = 30  # minutes

    @property
    def rule(self) -> str:
        return "report" if self.name == "index" else f"report_{self.name}"


@dataclass(frozen=True)
class ReportOutput:
    """One kind of the report's outputs.

    ``form``: ``table`` (``tables/<kind>.<format>`` for each of ``formats``), ``figures`` (the folder
    ``figures/<kind>/``, one PNG and PDF per figure; how many depends on the grid) or ``page`` (``<kind>.rst``).
    ``category`` / ``subcategory`` / ``title`` place it in the HTML report (a table's ``title`` is its label; a
    figure kind's is its subcategory); ``category`` None: not shown there. ``labels``: a figure kind's label
    columns in the HTML report, read back from each file name (:func:`cflcore.report.labels.figure_labels`)."""

    kind: str
    part: str
    writer: str
    form: Form
    title: str
    category: str | None = None
    subcategory: str = ""
    formats: tuple[str, ...] = ("csv",)
    caption_name: str = ""
    labels: tuple[str, ...] = ()
    folder: str = "tables"

    @property
    def caption(self) -> str:
        """The caption's file name under report/captions/ without ``.rst``."""
        return self.caption_name or self.kind

    def paths(self) -> list[str]:
        """The outputs' paths relative to the report folder: a table's files (CSV first), a figure kind's folder
        or the page."""
        if self.form == "figures":
            return [f"figures/{self.kind}"]
        if self.form == "page":
            return [f"{self.kind}.rst"]
        prefix = f"{self.folder}/" if self.folder else ""
        return [f"{prefix}{self.kind}.{fmt}" for fmt in self.formats]


_RUNS = ("results_dir", "runs")
PARTS: tuple[Part, ...] = (
    Part("tables", "evaluations", (*_RUNS, "front_page", "sweep_index")),
    Part("figures", "evaluations", (*_RUNS, "sweep_index"), mem_mb=3000),
    Part("whatif", "whatif", _RUNS),
    Part("late_clients", "late_clients", (*_RUNS, "late_runs")),
    Part("explain", "explain", ("results_dir", "explain_runs", "grid_clients"), mem_mb=3000),
)
INDEX = Part("index", "parts", ("benchmarks",), mem_mb=1000, runtime=10)
"""Rule ``report``: gathers the parts' index entries and writes the per-rule benchmark tables, last."""

STUDY_INPUTS = "study_inputs"
"""The report plan's key (cflcore.stages.report_plan) of the files of other studies a part reads (part -> paths: the
cross-paper table's home checks' ``paper_claims.csv``); those that exist when the Snakefile is parsed are the part's
inputs (rules/report_common.smk), so that a re-made one re-makes the part. Absent where the study reads none."""
CLAIMS_TABLE = "paper_claims"
"""The papers' claims with their verdicts (``tables/paper_claims.csv``), which other studies' reports read too (the
cross-paper table's home checks, cflcore.report.front_context.home_check_files)."""
_CLIENTS = ("dataset", "clients")
_SCENARIO = ("dataset", "split", "clients", "seed")


def _cited(kind: str) -> str:
    """The title of a kind drawn after a paper, as the paper's module gives it (``output_titles``, read from the
    papers' source by cflcore.paper_sources.declared_output_titles, never importing a paper)."""
    titles = declared_output_titles()
    if kind not in titles:
        raise KeyError(f"report output {kind!r} has no title: give it one here or in a paper's output_titles "
                       f"(titled there: {', '.join(sorted(titles)) or 'none'})")
    return titles[kind]


def _table(kind: str, part: str, writer: str, subcategory: str, title: str = "", wide: bool = False,
           folder: str = "tables", category: str = "Tables") -> ReportOutput:
    """A table kind; ``title`` "": the title a paper's module gives it (:func:`_cited`)."""
    return ReportOutput(kind, part, writer, "table", title or _cited(kind), category, subcategory,
                        WIDE_FORMATS if wide else ("csv",), folder=folder)


def _figures(kind: str, part: str, writer: str, title: str, labels: tuple[str, ...], explain: bool = False) -> ReportOutput:
    """A figure kind; ``title`` "": the title a paper's module gives it (:func:`_cited`)."""
    title = title or _cited(kind)
    return ReportOutput(kind, part, writer, "figures", title, "Explainability" if explain else "Figures", title,
                        ("png", "pdf"), f"explain_{kind}" if explain else "", labels)


OUTPUTS: dict[str, ReportOutput] = {o.kind: o for o in (
    # ---- part "tables" (report/build.py write_tables; front page: report/front_page.py) ----
    _table("cross_paper", "tables", "cross_paper", "Front page",
           "every method on every seed's home setting (report.cross_paper)", wide=True),
    _figures("cross_paper_cd", "tables", "cross_paper", "Cross-paper comparison: critical difference of final ARI",
             ("figure",)),
    _figures("cross_paper_heatmap", "tables", "cross_paper", "Cross-paper comparison: final ARI and accuracy as heatmaps",
             ("figure",)),
    _table("at_a_glance", "tables", "tables", "Front page", "at a glance: final PF1 and ARI, best marked", wide=True),
    _table("headline", "tables", "tables", "Front page", "headline: final and mean PF1, GF1, ARI, clustering round",
           wide=True),
    _table("paper_ranking", "tables", "tables", "Front page", wide=True),
    _table("departures", "tables", "tables", "Front page", "departures by design"),
    _table("paper_vs_run", "tables", "tables", "Paper check", wide=True),
    _table(CLAIMS_TABLE, "tables", "tables", "Paper check",
           "the papers' claims against this study (report.paper_checks)"),
    *(_table(kind, "tables", "paper_tables", "Paper check", title) for kind, title in declared_paper_tables().items()),
    _table("table1_clustering", "tables", "tables", "Paper tables", wide=True),
    _table("table2_clustering_round", "tables", "tables", "Paper tables", wide=True),
    _table("table_personalisation", "tables", "tables", "Paper tables", "PF1, GF1, learning gap", wide=True),
    _table("run_scores", "tables", "tables", "Runs", "one row per run (every seed)"),
    _table("scl_epsilons", "tables", "scl_epsilons", "Paper check"),
    ReportOutput("front_page", "tables", "tables", "page", "the HTML report's landing page (report/workflow.rst)"),
    _table("missing_runs", "tables", "missing_runs", "Runs", "missing runs and their reasons", folder=""),
    _table("hardware", "tables", "hardware", "Runs", "where the runs ran: device, CPU and instruction set, torch"),
    # ---- part "figures" ----
    _figures("learning_gap", "figures", "run_figures", "", _CLIENTS),
    _figures("temperature_mean", "figures", "run_figures", "", ("dataset",)),
    _figures("temperature_runs", "figures", "run_figures", "", _CLIENTS),
    _figures("clustering_progress", "figures", "run_figures", "", _CLIENTS),
    _figures("n_clusters", "figures", "run_figures", "Number of clusters per round", _CLIENTS),
    _figures("split_traces", "figures", "run_figures",
             "Split criteria per round: SCL update norms vs eps1/eps2, FedGWC MSE vs eps and DB", (*_CLIENTS, "method")),
    _figures("sweeps", "figures", "sweeps", "", (*_CLIENTS, "sweep")),
    _figures("round_envelopes", "figures", "sweeps", "", (*_CLIENTS, "split and methods")),
    _table("sweep_scores", "figures", "sweeps", "Factor sweeps", "final scores per swept value: mean, std, seeds"),
    _figures("louvain_groups", "figures", "sweeps", "", (*_CLIENTS, "split")),
    _figures("fedgwc", "figures", "fedgwc", "", (*_CLIENTS, "run and figure")),
    _figures("accuracy_per_megabyte", "figures", "traffic", "Accuracy against cumulative megabytes sent, per method",
             (*_CLIENTS, "split")),
    # ---- part "whatif" (its folder also holds whatif_delay.csv) ----
    _figures("whatif_heatmap", "whatif", "whatif",
             "What-if clustering: ARI per clusterer and round (trigger vs earliest separable round)", _SCENARIO),
    # ---- part "late_clients" (report/late_clients.py, 000 §6.2) ----
    _table("table_late_clients", "late_clients", "late_clients", "Late-joining clients", wide=True),
    _figures("late_clients", "late_clients", "late_clients", "", _CLIENTS),
    # ---- part "explain" (report/explain_figures.py) ----
    _figures("saliency_grid", "explain", "explain", "", _SCENARIO, explain=True),
    _figures("insdel_box", "explain", "explain", "", ("plot", "samples"), explain=True),
    _figures("cd", "explain", "explain", "", ("samples", "metric"), explain=True),
    # ---- rule "report" (report/benchmarks.py): where the study's time went, written last ----
    _table("benchmarks_by_rule", "index", "benchmarks", "", "per rule: jobs, wall and CPU seconds, peak memory",
           category="Benchmarks"),
    _table("critical_path", "index", "benchmarks", "", "the longest chain of jobs", category="Benchmarks"),
    _table("benchmark_summary", "index", "benchmarks", "", "critical path against the sum of all jobs",
           category="Benchmarks"),
)}


def part(name: str) -> Part:
    """The part called ``name`` (``index``: rule ``report``)."""
    for p in (*PARTS, INDEX):
        if p.name == name:
            return p
    raise KeyError(f"unknown report part {name!r}; allowed: {', '.join(p.name for p in (*PARTS, INDEX))}")


def outputs_of(part_name: str, form: Form | None = None) -> list[ReportOutput]:
    """The kinds ``part_name`` writes (of one ``form``), in catalogue order."""
    return [o for o in OUTPUTS.values() if o.part == part_name and (form is None or o.form == form)]


def writers_of(part_name: str) -> list[str]:
    """The writers ``part_name`` runs, in catalogue order, each once."""
    return list(dict.fromkeys(o.writer for o in outputs_of(part_name)))


def caption_file(kind: str, caption_dir: str = "report/captions") -> str:
    """The caption of ``kind`` (a catalogue kind): ``report/captions/<caption>.rst``."""
    return f"{caption_dir}/{OUTPUTS[kind].caption}.rst"
