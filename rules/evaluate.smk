# Stage 4: one job per run scores it against the split's ground truth (clustering.parquet,
# personalisation.parquet) and replays the what-if clusterers on every recorded round (whatif.parquet):
# both are cheap, so one process pays the Python start-up and the scikit-learn / pandas imports once.
# A run without a what-if replay is scored by its train job (rule train_evaluate, rules/train.smk).


# What-if clustering: every clusterer of `whatif.clusterers` (and the run's own) replayed on
# every recorded round's divergence / Gram matrix. No torch models, no retraining: seconds per run. The
# job's params are the report's scoring settings and the what-if settings (the clusterer list and the run's
# own clusterer) with the code versions of both stages: changing either reruns the run's evaluate job.
rule evaluate:
    input:
        history=lay.run_file(RESULTS, RUN, fn.HISTORY),
        server=lay.run_file(RESULTS, RUN, fn.SERVER),
        gram=lay.run_file(RESULTS, RUN, fn.GRAM),
        divergence=lay.run_file(RESULTS, RUN, fn.DIVERGENCE),
        status=lay.run_file(RESULTS, RUN, fn.STATUS),
        manifest=lay.split_file(RESULTS, SCENARIO, fn.MANIFEST),
    output:
        clustering=lay.eval_file(RESULTS, RUN, fn.CLUSTERING),
        personalisation=lay.eval_file(RESULTS, RUN, fn.PERSONALISATION),
        whatif=lay.eval_file(RESULTS, RUN, fn.WHATIF),
    log:
        lay.log_file(RESULTS, "evaluate", RUN),
    benchmark:
        lay.benchmark_file(RESULTS, "evaluate", RUN)
    wildcard_constraints:
        algorithm=whatif_algorithm_constraint(),
    group:
        "run"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=lambda w, attempt: 20 * attempt,
    params:
        settings=p_evaluate_settings,
        whatif=p_whatif,
        seed=lambda w: int(w.seed),
        code=code_version("evaluate"),
        whatif_code=p_whatif_code,
    script:
        "../workflow_scripts/evaluate.py"


# Late-joining clients (000 §6.2): only runs whose variant has `late_clients` (common.smk late_client_runs).
rule evaluate_late_clients:
    input:
        history=lay.run_file(RESULTS, RUN, fn.HISTORY),
        server=lay.run_file(RESULTS, RUN, fn.SERVER),
        status=lay.run_file(RESULTS, RUN, fn.STATUS),
        manifest=lay.split_file(RESULTS, SCENARIO, fn.MANIFEST),
    output:
        late=lay.eval_file(RESULTS, RUN, fn.LATE_CLIENTS),
    log:
        lay.log_file(RESULTS, "evaluate_late_clients", RUN),
    benchmark:
        lay.benchmark_file(RESULTS, "evaluate_late_clients", RUN)
    group:
        "run"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=lambda w, attempt: 10 * attempt,
    params:
        code=code_version("evaluate_late_clients"),
    script:
        "../workflow_scripts/evaluate_late_clients.py"
