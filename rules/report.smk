# Stage 6: tables, figures and the HTML report (`snakemake --report results/report.html`).
#
# One rule per part of the report, generated in a loop from the catalogue (cflcore/report/catalogue.py: every
# kind's part, writer, path, caption, category and labels), each reading only what it draws, and rule
# `report` gathering their index entries into index.json with the per-rule benchmark tables.
# Decision: the figure families are rules of their own. Snakemake already runs jobs side by
# side and reruns only those whose inputs changed, so the report no longer starts a second interpreter of
# its own: with 2 cores the parts run two at a time, a new explain result redraws only the explain figures,
# and a new what-if replay only the heatmaps; each part's param is only the part of the plan it reads
# (catalogue.Part.plan_keys). The price is one interpreter start per part (the per-rule times are in
# results/report/tables/benchmarks_by_rule.csv).
#
# Tables are single files, figures one folder per kind (their number depends on the grid); every one is
# registered with report() under a category, a subcategory and labels (cflcore/report/labels.py: dataset,
# clients, split, seed, method, ... read from the file name) to filter by in the HTML report. Runs that
# failed are listed, not fatal. The landing page is report/workflow.rst (the Snakefile's `report:`
# directive); it includes front_page.rst, written by report_tables: at a glance, the headline table, the
# paper check with Kendall's tau, the departures.


include: "report_common.smk"


for report_part in catalogue.PARTS:

    rule:
        name:
            report_part.rule
        input:
            unpack(part_inputs(report_part)),
        output:
            **part_outputs(report_part.name),
        log:
            lay.log_file(RESULTS, "report", report_part.rule),
        benchmark:
            lay.benchmark_file(RESULTS, report_part.rule, report_part.rule)
        threads: 1
        resources:
            mem_mb=report_part.mem_mb,
            runtime=report_part.runtime,
        params:
            runs=part_param(report_part.name),
            part=report_part.name,
            code=REPORT_CODE,
        script:
            "../workflow_scripts/report_part.py"


rule report:
    input:
        parts=[report_path(lay.part_index_file(p.name)) for p in catalogue.PARTS],
        # every part's files: when the report reruns (e.g. its code changed), a part whose files it asks for are
        # missing (a new figure kind's folder) reruns too; Snakemake looks for missing outputs only among those
        # a later job asks for
        outputs=part_files(),
    output:
        index=report_path(fn.REPORT_INDEX[0]),
        index_csv=report_path(fn.REPORT_INDEX[1]),
        # where the study's time went: per-rule benchmark table and critical path
        benchmark_tables=[registered_table(o) for o in catalogue.outputs_of("index")],
    log:
        lay.log_file(RESULTS, "report", "report"),
    benchmark:
        lay.benchmark_file(RESULTS, "report", "report")
    threads: 1
    resources:
        mem_mb=catalogue.INDEX.mem_mb,
        runtime=catalogue.INDEX.runtime,
    params:
        runs=part_param("index"),
        code=REPORT_CODE,
    script:
        "../workflow_scripts/report.py"
