# Stage 3: federated training, one job per scenario x algorithm. Checkpoints live in
# <run>/checkpoints/ and are not declared outputs, so a killed job resumes where it stopped; so does
# <run>/failures.jsonl, the record of failed attempts that makes the next invocation retry a failed run.
# Group "run": on a cluster, a run's train, evaluate and explain jobs go in one submission (Snakefile).
# Priority 1 (every other rule 0): all train jobs, the longest, start before the short evaluation jobs
# they unlock, so the study ends on short jobs and no core idles behind a late training run.
# Rule train takes the runs with a what-if replay (their rule evaluate scores them); rule train_evaluate the
# others, and scores them in the same process (rule evaluate's scores, stages.evaluate): the scoring's Python
# start-up and its scikit-learn / pandas imports, about 2 s a run, are paid once with the training's.


rule train:
    input:
        # the files the run's strategy declares beyond the split (Strategy.inputs; e.g. rule
        # centralised_update_norms); most strategies declare none
        unpack(strategy_input_files),
        dataset=lay.dataset_file(RESULTS, "{dataset}"),
        assignments=lay.split_file(RESULTS, SCENARIO, fn.ASSIGNMENTS),
        manifest=lay.split_file(RESULTS, SCENARIO, fn.MANIFEST),
    output:
        # history, server, gram, divergence, traffic, models, status: cflcore.filenames.RUN_OUTPUTS, named by their stems
        **lay.run_outputs(RESULTS, RUN),
    log:
        lay.log_file(RESULTS, "train", RUN),
    benchmark:
        lay.benchmark_file(RESULTS, "train", RUN)
    wildcard_constraints:
        algorithm=whatif_algorithm_constraint(),
    priority: 1
    group:
        "run"
    threads: config["engine"]["threads"]
    resources:
        mem_mb=mem_train,
        # minutes; a job resubmitted after a TIMEOUT (profile `retries`) gets more time, and resumes
        # from its checkpoint
        runtime=lambda w, attempt: 240 * attempt,
        gpu=GPU,
    params:
        **TRAIN_PARAMS,
    script:
        "../workflow_scripts/train.py"


# The runs without a what-if replay: rule train's job, and the scores (the comment above rule train). Its log is
# the run's training log, as rule train's (cflcore.report.runs reads a failed run's reason there).
use rule train as train_evaluate with:
    output:
        **lay.run_outputs(RESULTS, RUN),
        # rule evaluate's scores
        clustering=lay.eval_file(RESULTS, RUN, fn.CLUSTERING),
        personalisation=lay.eval_file(RESULTS, RUN, fn.PERSONALISATION),
    benchmark:
        lay.benchmark_file(RESULTS, "train_evaluate", RUN)
    wildcard_constraints:
        algorithm=unreplayed_algorithm_constraint(),
    params:
        **TRAIN_PARAMS,
        settings=p_evaluate_settings,
        evaluate_code=code_version("evaluate"),


# Issue 67, item 4: a run of the study trained and scored again on a CPU kernel path of report.kernel_paths
# (cflcore/kernel_paths.py), into <results_dir>/kernels/<path>/ (cflcore.layout.kernel_results), as rule train_evaluate
# does (no what-if replay). Its data, split and strategy inputs are the study's own and its settings and code the
# same: only the kernels differ. The job sets its path's environment before it imports torch (workflow_scripts/train.py).
use rule train as train_kernels with:
    output:
        **lay.run_outputs(lay.kernel_results(RESULTS, "{kernels}"), RUN),
        clustering=lay.eval_file(lay.kernel_results(RESULTS, "{kernels}"), RUN, fn.CLUSTERING),
        personalisation=lay.eval_file(lay.kernel_results(RESULTS, "{kernels}"), RUN, fn.PERSONALISATION),
    log:
        lay.log_file(lay.kernel_results(RESULTS, "{kernels}"), "train", RUN),
    benchmark:
        lay.benchmark_file(RESULTS, "train_kernels", f"{{kernels}}/{RUN}")
    wildcard_constraints:
        algorithm=SWEPT_NAME,
        kernels=KERNEL_NAME_PATTERN,
    params:
        **{**TRAIN_PARAMS, "attempt": p_kernel_attempt},
        settings=p_evaluate_settings,
        evaluate_code=code_version("evaluate"),
        kernels=lambda w: w.kernels,


# A strategy input of file kind `centralised_update_norms/<round size>` (cflcore/fl/centralised.py): the update norm
# per round of a centralised training on the scenario's pooled client data, beside the split. Only scenarios with a
# variant whose strategy declares it get one (its train jobs ask for it).
rule centralised_update_norms:
    input:
        dataset=lay.dataset_file(RESULTS, "{dataset}"),
        assignments=lay.split_file(RESULTS, SCENARIO, fn.ASSIGNMENTS),
        manifest=lay.split_file(RESULTS, SCENARIO, fn.MANIFEST),
    output:
        norms=lay.input_file(RESULTS, SCENARIO, "centralised_update_norms/{round_size}"),
    log:
        lay.log_file(RESULTS, "centralised_update_norms", f"{SCENARIO}/{{round_size}}"),
    benchmark:
        lay.benchmark_file(RESULTS, "centralised_update_norms", f"{SCENARIO}/{{round_size}}")
    threads: config["engine"]["threads"]
    resources:
        mem_mb=mem_train,
        runtime=120,
    params:
        settings=p_centralised,
        seed=lambda w: int(w.seed),
        code=p_centralised_code,
    script:
        "../workflow_scripts/centralised_update_norms.py"
