# Stage 6: tables, figures and the HTML report (`snakemake --report results/report.html`).
#
# One rule per part of the report (cflcore/report/parts.py), each reading only what it draws, and rule
# `report` gathering their index entries into index.json with the per-rule benchmark tables.
# Decision (issue 21 §5): the figure families are rules of their own. Snakemake already runs jobs side by
# side and reruns only those whose inputs changed, so the report no longer starts a second interpreter of
# its own (the former cflcore/report/parallel.py, which also closed the only import circle, report/parallel.py
# <-> stages.py): with 2 cores the parts run two at a time, a new explain result redraws only the explain
# figures, and a new what-if replay only the heatmaps. The price is one interpreter start per part (about
# 1-2 s of CPU each, measured in the commit that made this change).
#
# Tables are single files, figures one folder per kind (their number depends on the grid); every one is
# registered with report() under a category, a subcategory and labels (cflcore/report/labels.py: dataset,
# clients, split, seed, method, ... read from the file name) to filter by in the HTML report. Runs that
# failed are listed, not fatal. The landing page is report/workflow.rst (the Snakefile's `report:`
# directive); it includes front_page.rst, written by report_tables: at a glance, the headline table, the
# paper check with Kendall's tau, the departures.

# a line opening with `report` is the Snakefile keyword: the report() flag goes by another name in functions
from snakemake.io import report as report_file

from cflcore.report.labels import figure_labels
from cflcore.report.parts import part_plan

REPORT_PLAN = report_plan(config)


def part_param(part):
    """The part of the report's plan (stages.report_plan) this part reads, as canonical JSON: a config change
    reruns only the parts it concerns (cflcore.report.parts.PLAN_KEYS)."""
    return canonical_json(part_plan(REPORT_PLAN, part))


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
    path = (
        f"{REPORT_DIR}/missing_runs.csv"
        if name == "missing_runs"
        else f"{REPORT_DIR}/tables/{name}.csv"
    )
    return report_file(
        path,
        caption=f"../report/captions/{name}.rst",
        category="Tables",
        subcategory=subcategory,
        labels=labels,
    )


def wide_versions(names):
    return [
        f"{REPORT_DIR}/tables/{name}.{fmt}" for name in names for fmt in ("md", "tex")
    ]


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
        "personalisation": [
            f"{RESULTS}/eval/{r}/personalisation.parquet" for r in runs
        ],
    }


def whatif_inputs(w):
    return {
        **evaluated_runs(w),
        "whatif": [
            f"{RESULTS}/eval/{r}/whatif.parquet" for r in cc.whatif_runs(config)
        ],
    }


def late_inputs(w):
    return {
        "late_clients": [
            f"{RESULTS}/eval/{r}/late_clients.parquet"
            for r in cc.late_client_runs(config)
        ]
    }


def explain_inputs(w):
    runs = explain_runs()
    return {
        "insdel": [f"{RESULTS}/explain/{r}/insdel.parquet" for r in runs],
        "saliency": [f"{RESULTS}/explain/{r}/saliency.npz" for r in runs],
    }


rule report_tables:
    input:
        unpack(evaluated_runs),
    output:
        part=f"{REPORT_DIR}/parts/tables.json",
        front_page=f"{REPORT_DIR}/front_page.rst",
        tables=[
            report_table(t)
            for t in REPORT_TABLE_LABELS
            if t not in ("table_late_clients",)
        ],
        wide=wide_versions(WIDE_TABLES),
    log:
        f"{RESULTS}/logs/report/report_tables.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_tables/report_tables.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        runs=part_param("tables"),
        part="tables",
        code=code_version("report"),
    script:
        "../workflow_scripts/report_part.py"


rule report_figures:
    input:
        unpack(evaluated_runs),
    output:
        part=f"{REPORT_DIR}/parts/figures.json",
        figures=report_figures("figures"),
    log:
        f"{RESULTS}/logs/report/report_figures.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_figures/report_figures.tsv"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=30,
    params:
        runs=part_param("figures"),
        part="figures",
        code=code_version("report"),
    script:
        "../workflow_scripts/report_part.py"


rule report_whatif:
    input:
        unpack(whatif_inputs),
    output:
        part=f"{REPORT_DIR}/parts/whatif.json",
        figures=report_figures("whatif"),
    log:
        f"{RESULTS}/logs/report/report_whatif.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_whatif/report_whatif.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        runs=part_param("whatif"),
        part="whatif",
        code=code_version("report"),
    script:
        "../workflow_scripts/report_part.py"


rule report_late_clients:
    input:
        unpack(late_inputs),
    output:
        part=f"{REPORT_DIR}/parts/late_clients.json",
        table=report_table("table_late_clients"),
        wide=wide_versions(["table_late_clients"]),
        figures=report_figures("late_clients"),
    log:
        f"{RESULTS}/logs/report/report_late_clients.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_late_clients/report_late_clients.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        runs=part_param("late_clients"),
        part="late_clients",
        code=code_version("report"),
    script:
        "../workflow_scripts/report_part.py"


rule report_explain:
    input:
        unpack(explain_inputs),
    output:
        part=f"{REPORT_DIR}/parts/explain.json",
        figures=report_figures("explain"),
    log:
        f"{RESULTS}/logs/report/report_explain.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_explain/report_explain.tsv"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=30,
    params:
        runs=part_param("explain"),
        part="explain",
        code=code_version("report"),
    script:
        "../workflow_scripts/report_part.py"


rule report:
    input:
        parts=[
            f"{REPORT_DIR}/parts/{part}.json"
            for part in ("tables", "figures", "whatif", "late_clients", "explain")
        ],
    output:
        index=f"{REPORT_DIR}/index.json",
        index_csv=f"{REPORT_DIR}/index.csv",
        # where the study's time went (issue 13): per-rule benchmark table and critical path
        benchmark_tables=[
            report(
                f"{REPORT_DIR}/tables/{t}.csv",
                caption=f"../report/captions/{t}.rst",
                category="Benchmarks",
                labels={"table": label},
            )
            for t, label in BENCHMARK_LABELS.items()
        ],
    log:
        f"{RESULTS}/logs/report/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/report.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        runs=part_param("index"),
        code=code_version("report"),
    script:
        "../workflow_scripts/report.py"
