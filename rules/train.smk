# Stage 3: federated training, one job per scenario x algorithm. Checkpoints live in
# <run>/checkpoints/ and are not declared outputs, so a killed job resumes where it stopped.
# Priority 1 (every other rule 0): all train jobs, the longest, start before the short evaluation jobs
# they unlock, so the study ends on short jobs and no core idles behind a late training run.


rule train:
    input:
        dataset=f"{RESULTS}/data/{{dataset}}.parquet",
        assignments=f"{RESULTS}/splits/{SCENARIO}/assignments.parquet",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    output:
        history=f"{RESULTS}/runs/{RUN}/history.parquet",
        server=f"{RESULTS}/runs/{RUN}/server.parquet",
        gram=f"{RESULTS}/runs/{RUN}/gram.parquet",
        divergence=f"{RESULTS}/runs/{RUN}/divergence.parquet",
        models=f"{RESULTS}/runs/{RUN}/models.pt",
        status=f"{RESULTS}/runs/{RUN}/status.json",
    params:
        run=p_run,
        seed=lambda w: int(w.seed),
        on_failure=config["on_run_failure"],
        # a failed run (on_run_failure: record) is retried by the next invocation through this param
        attempt=p_attempt,
        code=code_version("train"),
    log:
        f"{RESULTS}/logs/train/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train/{RUN}.tsv"
    threads: config["engine"]["threads"]
    priority: 1
    resources:
        mem_mb=mem_train,
        runtime=240,
        gpu=GPU,
    script:
        "../workflow_scripts/train.py"
