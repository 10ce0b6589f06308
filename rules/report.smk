# Stage 6: tables, figures and the HTML report (`snakemake --report results/report.html`).
#
# One rule per part of the report (cflcore/report/parts.py), each reading only what it draws, and rule
# `report` gathering their index entries into index.json with the per-rule benchmark tables.
# Decision (issue 21 §5): the figure families are rules of their own. Snakemake already runs jobs side by
# side and reruns only those whose inputs changed, so the report no longer starts a second interpreter of
# its own (the former cflcore/report/parallel.py, which also closed the only import circle, report/parallel.py
# <-> stages.py): with 2 cores the parts run two at a time, a new explain result redraws only the explain
# figures, and a new what-if replay only the heatmaps; each part's param is only the part of the plan it
# reads (cflcore.report.parts.PLAN_KEYS). The price is one interpreter start per part: on the tiny study
# (config/tiny.yaml, AMD EPYC, 2 busy cores) the parts took 1.5 (tables), 5.4 (figures), 4.0 (what-if),
# 1.5 (late clients), 10.6 (explain) and 0.4 (gathering) s of CPU, 23.4 s in all, against 18.2 s for the
# former single report job (Snakemake's benchmark files, results/report/tables/benchmarks_by_rule.csv).
#
# Tables are single files, figures one folder per kind (their number depends on the grid); every one is
# registered with report() under a category, a subcategory and labels (cflcore/report/labels.py: dataset,
# clients, split, seed, method, ... read from the file name) to filter by in the HTML report. Runs that
# failed are listed, not fatal. The landing page is report/workflow.rst (the Snakefile's `report:`
# directive); it includes front_page.rst, written by report_tables: at a glance, the headline table, the
# paper check with Kendall's tau, the departures.


include: "report_common.smk"


rule report_tables:
    input:
        unpack(evaluated_runs),
    output:
        part=f"{REPORT_DIR}/parts/tables.json",
        front_page=f"{REPORT_DIR}/front_page.rst",
        tables=[report_table(t) for t in REPORT_TABLE_LABELS if t not in ("table_late_clients", "sweep_scores")],
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
        # the numbers behind the sweep figures (cflcore/report/sweeps.py)
        sweep_scores=report_table("sweep_scores"),
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
        parts=[f"{REPORT_DIR}/parts/{part}.json" for part in ("tables", "figures", "whatif", "late_clients", "explain")],
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
