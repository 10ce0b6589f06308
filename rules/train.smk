# Stage 3: federated training, one job per scenario x algorithm. Checkpoints live in
# <run>/checkpoints/ and are not declared outputs, so a killed job resumes where it stopped.
# Priority 1 (every other rule 0): all train jobs, the longest, start before the short evaluation jobs
# they unlock, so the study ends on short jobs and no core idles behind a late training run.


rule train:
    input:
        dataset=lay.dataset_file(RESULTS, "{dataset}"),
        assignments=lay.split_file(RESULTS, SCENARIO, "assignments.parquet"),
        manifest=lay.split_file(RESULTS, SCENARIO, "manifest.json"),
    output:
        # history, server, gram, divergence, models, status: cflcore.layout.RUN_OUTPUTS, named by their stems
        **lay.run_outputs(RESULTS, RUN),
    params:
        run=p_run,
        seed=lambda w: int(w.seed),
        on_failure=config["on_run_failure"],
        code=code_version("train"),
    log:
        lay.log_file(RESULTS, "train", RUN),
    benchmark:
        lay.benchmark_file(RESULTS, "train", RUN)
    threads: config["engine"]["threads"]
    priority: 1
    resources:
        mem_mb=mem_train,
        runtime=240,
        gpu=GPU,
    script:
        "../workflow_scripts/train.py"
