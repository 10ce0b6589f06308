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


# Late-joining clients (000 §6.2): only runs whose variant has `late_clients` (common.smk late_client_runs).
rule evaluate_late_clients:
    input:
        history=f"{RESULTS}/runs/{RUN}/history.parquet",
        server=f"{RESULTS}/runs/{RUN}/server.parquet",
        status=f"{RESULTS}/runs/{RUN}/status.json",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    output:
        late=f"{RESULTS}/eval/{RUN}/late_clients.parquet",
    params:
        code=code_version("late_clients"),
    log:
        f"{RESULTS}/logs/evaluate_late_clients/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate_late_clients/{RUN}.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../workflow_scripts/evaluate_late_clients.py"


# What-if clustering (issue 12 §1): every clusterer of `whatif.clusterers` (and the run's own) replayed on
# every recorded round's divergence / Gram matrix. No torch models, no retraining: seconds per run. Its
# params are only the what-if settings and the run's own clusterer, so changing the clusterer list
# reruns exactly the whatif jobs (and the report).
rule whatif:
    input:
        history=f"{RESULTS}/runs/{RUN}/history.parquet",
        gram=f"{RESULTS}/runs/{RUN}/gram.parquet",
        divergence=f"{RESULTS}/runs/{RUN}/divergence.parquet",
        status=f"{RESULTS}/runs/{RUN}/status.json",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    output:
        whatif=f"{RESULTS}/eval/{RUN}/whatif.parquet",
    params:
        settings=p_whatif,
        seed=lambda w: int(w.seed),
        code=code_version("whatif"),
    log:
        f"{RESULTS}/logs/whatif/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/whatif/{RUN}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    script:
        "../workflow_scripts/whatif.py"
