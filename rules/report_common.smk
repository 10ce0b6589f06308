# Helpers of rules/report.smk (kept apart: `snakemake --lint` asks for rules and functions in separate files):
# the report's plan per part, where each table and figure goes in the HTML report, and the parts' inputs.

# a line opening with `report` is the Snakefile keyword: the report() flag goes by another name in functions
from snakemake.io import report as report_file

from cflcore.report.labels import figure_labels
from cflcore.report.parts import part_plan

REPORT_PLAN = report_plan(config)


def part_param(part):
    """The part of the report's plan (stages.report_plan) this part reads, as canonical JSON: a config change
    reruns only the parts it concerns (cflcore.report.parts.PLAN_KEYS). A function of the wildcards, not the
    string itself: Snakemake formats a string param with the wildcards, and config text may hold braces
    (e.g. a departure's "class groups {0} and {1}")."""
    value = canonical_json(part_plan(REPORT_PLAN, part))
    return lambda wildcards: value


# table -> (subcategory, labels): the tables' place in the HTML report
REPORT_TABLE_LABELS = {
    "at_a_glance": (
        "Front page",
        {"table": "at a glance: final PF1 and ARI, best marked"},
    ),
    "headline": (
        "Front page",
        {"table": "headline: final and mean PF1, GF1, ARI, clustering round"},
    ),
    "paper_ranking": ("Front page", {"table": "Kendall's tau against 000's ranking"}),
    "departures": ("Front page", {"table": "departures by design"}),
    "paper_vs_run": (
        "Paper check",
        {"table": "000 Tables 1-2 and Figure 2 beside ours"},
    ),
    "table1_clustering": ("Paper tables", {"table": "000 Table 1: clustering scores"}),
    "table2_clustering_round": (
        "Paper tables",
        {"table": "000 Table 2: clustering round"},
    ),
    "table_personalisation": ("Paper tables", {"table": "PF1, GF1, learning gap"}),
    "run_scores": ("Runs", {"table": "one row per run (every seed)"}),
    "missing_runs": ("Runs", {"table": "missing runs and their reasons"}),
    "table_late_clients": (
        "Late-joining clients",
        {"table": "late vs founding clients (000 §6.2)"},
    ),
    "paper_claims": (
        "Paper check",
        {"table": "the seeds' claims (002, 004) against this study"},
    ),
    "sweep_scores": (
        "Factor sweeps",
        {"table": "final scores per swept value: mean, std, seeds"},
    ),
}
# tables with Markdown and LaTeX versions beside the CSV
WIDE_TABLES = [
    "at_a_glance",
    "headline",
    "paper_ranking",
    "paper_vs_run",
    "table1_clustering",
    "table2_clustering_round",
    "table_personalisation",
]
# part -> its figure kinds (folders under figures/); titles: FIGURE_KINDS / EXPLAIN_KINDS (rules/common.smk)
PART_FIGURES = {
    "figures": [
        "learning_gap",
        "temperature_mean",
        "temperature_runs",
        "clustering_progress",
        "n_clusters",
        "split_traces",
        "sweeps",
        "round_envelopes",
        "louvain_groups",
        "fedgwc",
    ],
    "whatif": ["whatif_heatmap"],
    "late_clients": ["late_clients"],
    "explain": ["saliency_grid", "insdel_box", "cd"],
}
BENCHMARK_LABELS = {
    "benchmarks_by_rule": "per rule: jobs, wall and CPU seconds, peak memory",
    "critical_path": "the longest chain of jobs",
    "benchmark_summary": "critical path against the sum of all jobs",
}


def report_table(name):
    """A table's CSV, registered in the HTML report under Tables / its subcategory, with its labels."""
    subcategory, labels = REPORT_TABLE_LABELS[name]
    path = f"{REPORT_DIR}/missing_runs.csv" if name == "missing_runs" else f"{REPORT_DIR}/tables/{name}.csv"
    return report_file(
        path,
        caption=f"../report/captions/{name}.rst",
        category="Tables",
        subcategory=subcategory,
        labels=labels,
    )


def wide_versions(names):
    return [f"{REPORT_DIR}/tables/{name}.{fmt}" for name in names for fmt in ("md", "tex")]


def report_figures(part):
    """The part's figure folders, each a subcategory of Figures (Explainability for the explain part); every
    PNG labelled from its file name."""
    explain = part == "explain"
    folders = []
    for kind in PART_FIGURES[part]:
        folders.append(
            report_file(
                directory(f"{REPORT_DIR}/figures/{kind}"),
                patterns=["{name}.png"],
                caption=f"../report/captions/{'explain_' if explain else ''}{kind}.rst",
                category="Explainability" if explain else "Figures",
                subcategory=(EXPLAIN_KINDS if explain else FIGURE_KINDS)[kind],
                labels=lambda w, kind=kind: figure_labels(kind, w.name, STUDY),
            )
        )
    return folders


def evaluated_runs(w):
    runs = run_list()
    return {
        "clustering": [f"{RESULTS}/eval/{r}/clustering.parquet" for r in runs],
        "personalisation": [f"{RESULTS}/eval/{r}/personalisation.parquet" for r in runs],
    }


def whatif_inputs(w):
    return {
        **evaluated_runs(w),
        "whatif": [f"{RESULTS}/eval/{r}/whatif.parquet" for r in cc.whatif_runs(config)],
    }


def late_inputs(w):
    return {"late_clients": [f"{RESULTS}/eval/{r}/late_clients.parquet" for r in cc.late_client_runs(config)]}


def explain_inputs(w):
    runs = explain_runs()
    return {
        "insdel": [f"{RESULTS}/explain/{r}/insdel.parquet" for r in runs],
        "saliency": [f"{RESULTS}/explain/{r}/saliency.npz" for r in runs],
    }
