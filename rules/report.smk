# Stage 6: tables, figures and the HTML report (`snakemake --report results/report.html`).
# Tables are single files with their own captions; figures are one folder per kind (their number
# depends on the grid), each with its own caption. Runs that failed are listed, not fatal.
# The report's landing page is report/workflow.rst (the Snakefile's `report:` directive); it includes
# front_page.rst, written here: the headline table, the paper check with Kendall's tau, the departures.

FRONT_TABLES = list(lay.FRONT_TABLES)


rule report:
    input:
        unpack(report_inputs),
    output:
        index=f"{REPORT_DIR}/index.json",
        front_page=f"{REPORT_DIR}/front_page.rst",
        front_tables=[
            report(
                f"{REPORT_DIR}/tables/{t}.csv",
                caption=f"../report/captions/{t}.rst",
                category="Tables",
            )
            for t in FRONT_TABLES
        ],
        tables=[
            report(
                f"{REPORT_DIR}/tables/{t}.csv",
                caption=f"../report/captions/{t}.rst",
                category="Tables",
            )
            for t in REPORT_TABLES
        ],
        csv_tables=[
            report(
                f"{REPORT_DIR}/tables/{t}.csv",
                caption=f"../report/captions/{t}.rst",
                category="Tables",
            )
            for t in CSV_TABLES
        ],
        # where the study's time went (issue 13): per-rule benchmark table and critical path
        benchmark_tables=[
            report(
                f"{REPORT_DIR}/tables/{t}.csv",
                caption=f"../report/captions/{t}.rst",
                category="Benchmarks",
            )
            for t in BENCHMARK_TABLES
        ],
        markdown=[f"{REPORT_DIR}/tables/{t}.md" for t in REPORT_TABLES],
        latex=[f"{REPORT_DIR}/tables/{t}.tex" for t in REPORT_TABLES],
        figures=[
            report(
                directory(f"{REPORT_DIR}/figures/{kind}"),
                patterns=["{name}.png"],
                caption=f"../report/captions/{kind}.rst",
                category="Figures",
                subcategory=title,
            )
            for kind, title in FIGURE_KINDS.items()
        ],
        explain_figures=[
            report(
                directory(f"{REPORT_DIR}/figures/{kind}"),
                patterns=["{name}.png"],
                caption=f"../report/captions/explain_{kind}.rst",
                category="Explainability",
                subcategory=title,
            )
            for kind, title in EXPLAIN_KINDS.items()
        ],
    params:
        runs=report_runs_param(),
        code=code_version("report"),
    log:
        lay.log_file(RESULTS, "report", "report"),
    benchmark:
        lay.benchmark_file(RESULTS, "report", "report")
    # the study's last job, alone on the machine: a second process draws half of the figures
    # (cflcore/report/parallel.py); with --cores 1 Snakemake gives it one thread and it draws them all
    threads: 2
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../workflow_scripts/report.py"
