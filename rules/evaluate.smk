# Stage 4: clustering and personalisation scores of one run against the split's ground truth.


rule evaluate:
    input:
        history=f"{RESULTS}/runs/{RUN}/history.parquet",
        server=f"{RESULTS}/runs/{RUN}/server.parquet",
        gram=f"{RESULTS}/runs/{RUN}/gram.parquet",
        status=f"{RESULTS}/runs/{RUN}/status.json",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    output:
        clustering=f"{RESULTS}/eval/{RUN}/clustering.parquet",
        personalisation=f"{RESULTS}/eval/{RUN}/personalisation.parquet",
    params:
        settings=lambda w: canonical_json(config["report"]),
        code=code_version("evaluate"),
    log:
        f"{RESULTS}/logs/evaluate/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate/{RUN}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    script:
        "../workflow_scripts/evaluate.py"
