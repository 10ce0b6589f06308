# Stage 4: one job per run scores it against the split's ground truth (clustering.parquet,
# personalisation.parquet) and replays the what-if clusterers on every recorded round (whatif.parquet):
# both are cheap, so one process pays the Python start-up and the scikit-learn / pandas imports once.


# What-if clustering (issue 12 §1): every clusterer of `whatif.clusterers` (and the run's own) replayed on
# every recorded round's divergence / Gram matrix. No torch models, no retraining: seconds per run. The
# job's params are the report's scoring settings and the what-if settings (the clusterer list and the run's
# own clusterer) with the code versions of both stages: changing either reruns the run's evaluate job.
rule evaluate:
    input:
        history=f"{RESULTS}/runs/{RUN}/history.parquet",
        server=f"{RESULTS}/runs/{RUN}/server.parquet",
        gram=f"{RESULTS}/runs/{RUN}/gram.parquet",
        divergence=f"{RESULTS}/runs/{RUN}/divergence.parquet",
        status=f"{RESULTS}/runs/{RUN}/status.json",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    output:
        clustering=f"{RESULTS}/eval/{RUN}/clustering.parquet",
        personalisation=f"{RESULTS}/eval/{RUN}/personalisation.parquet",
        whatif=f"{RESULTS}/eval/{RUN}/whatif.parquet",
    log:
        f"{RESULTS}/logs/evaluate/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate/{RUN}.tsv"
    wildcard_constraints:
        algorithm=whatif_algorithm_constraint(),
    group:
        "run"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=lambda w, attempt: 20 * attempt,
    params:
        settings=lambda w: canonical_json(config["report"]),
        whatif=p_whatif,
        seed=lambda w: int(w.seed),
        code=code_version("evaluate"),
        whatif_code=code_version("whatif"),
    script:
        "../workflow_scripts/evaluate.py"


# The runs without a what-if replay (`whatif.enabled: false`, or a variant outside `whatif.algorithms`):
# the scores only. Rule evaluate takes every run it matches.
rule evaluate_no_whatif:
    input:
        history=f"{RESULTS}/runs/{RUN}/history.parquet",
        server=f"{RESULTS}/runs/{RUN}/server.parquet",
        gram=f"{RESULTS}/runs/{RUN}/gram.parquet",
        status=f"{RESULTS}/runs/{RUN}/status.json",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    output:
        clustering=f"{RESULTS}/eval/{RUN}/clustering.parquet",
        personalisation=f"{RESULTS}/eval/{RUN}/personalisation.parquet",
    log:
        f"{RESULTS}/logs/evaluate_no_whatif/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate_no_whatif/{RUN}.tsv"
    group:
        "run"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=lambda w, attempt: 20 * attempt,
    params:
        settings=lambda w: canonical_json(config["report"]),
        code=code_version("evaluate"),
    script:
        "../workflow_scripts/evaluate.py"


ruleorder: evaluate > evaluate_no_whatif


# Late-joining clients (000 §6.2): only runs whose variant has `late_clients` (common.smk late_client_runs).
rule evaluate_late_clients:
    input:
        history=f"{RESULTS}/runs/{RUN}/history.parquet",
        server=f"{RESULTS}/runs/{RUN}/server.parquet",
        status=f"{RESULTS}/runs/{RUN}/status.json",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    output:
        late=f"{RESULTS}/eval/{RUN}/late_clients.parquet",
    log:
        f"{RESULTS}/logs/evaluate_late_clients/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/evaluate_late_clients/{RUN}.tsv"
    group:
        "run"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=lambda w, attempt: 10 * attempt,
    params:
        code=code_version("late_clients"),
    script:
        "../workflow_scripts/evaluate_late_clients.py"
