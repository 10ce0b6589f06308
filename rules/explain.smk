# Stage 5: Grad-CAM insertion/deletion per cluster model (000 §5, Algorithm 2).


rule explain:
    input:
        dataset=lay.dataset_file(RESULTS, "{dataset}"),
        assignments=lay.split_file(RESULTS, SCENARIO, fn.ASSIGNMENTS),
        manifest=lay.split_file(RESULTS, SCENARIO, fn.MANIFEST),
        models=lay.run_file(RESULTS, RUN, fn.MODELS),
        status=lay.run_file(RESULTS, RUN, fn.STATUS),
    output:
        insdel=lay.explain_file(RESULTS, RUN, fn.INSDEL),
        samples=lay.explain_file(RESULTS, RUN, fn.SAMPLES),
        summary=lay.explain_file(RESULTS, RUN, fn.EXPLAIN_SUMMARY),
        saliency=lay.explain_file(RESULTS, RUN, fn.SALIENCY),
    log:
        lay.log_file(RESULTS, "explain", RUN),
    benchmark:
        lay.benchmark_file(RESULTS, "explain", RUN)
    group:
        "run"
    threads: 1
    resources:
        mem_mb=mem_train,
        runtime=lambda w, attempt: 60 * attempt,
        gpu=GPU,
    params:
        settings=p_explain,
        seed=lambda w: int(w.seed),
        # the device's identity (cuda:N -> cuda: picking another GPU reruns nothing); the script reads the
        # concrete one from the config
        device=device_identity(config["device"]),
        # engine.deterministic: deterministic CUDA kernels for the attributions too (no effect on a CPU)
        deterministic=config["engine"]["deterministic"],
        code=p_explain_code,
    script:
        "../workflow_scripts/explain.py"
