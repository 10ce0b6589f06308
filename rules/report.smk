# Stage 6: tables, figures and the HTML report (`snakemake --report results/report.html`).
# Tables are single files with their own captions; figures are one folder per kind (their number
# depends on the grid), each with its own caption. Runs that failed are listed, not fatal.

FIGURE_KINDS = {
    "learning_gap": "PF1 / GF1 learning gap (000 Fig. 2)",
    "temperature_mean": "Normalised temperature (000 Figs. 3-4)",
    "temperature_runs": "Temperature per run (000 Figs. 10-14)",
    "clustering_progress": "Clustering score per round (001 Fig. 1)",
    "n_clusters": "Number of clusters per round",
}
EXPLAIN_KINDS = {
    "saliency_grid": "Saliency grids (000 Fig. 5)",
    "insdel_box": "Insertion / deletion AUC (000 Figs. 6-7)",
    "cd": "Critical-difference diagrams (000 Figs. 8, 17)",
}


def report_inputs(w):
    runs = run_list()
    files = {
        "clustering": [f"{RESULTS}/eval/{r}/clustering.parquet" for r in runs],
        "personalisation": [f"{RESULTS}/eval/{r}/personalisation.parquet" for r in runs],
    }
    files["insdel"] = [f"{RESULTS}/explain/{r}/insdel.parquet" for r in explain_runs()]
    return files


def report_runs_param():
    return canonical_json({
        "results_dir": RESULTS,
        "study": STUDY,
        "explain_runs": explain_runs(),
        "grid_clients": config["explain"].get("grid_clients"),
    })


rule report:
    input:
        unpack(report_inputs),
    output:
        index=f"{REPORT_DIR}/index.json",
        tables=[
            report(
                f"{REPORT_DIR}/tables/{t}.csv",
                caption=f"../report/captions/{t}.rst",
                category="Tables",
            )
            for t in REPORT_TABLES
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
        f"{RESULTS}/logs/report/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report/report.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../workflow_scripts/report.py"
