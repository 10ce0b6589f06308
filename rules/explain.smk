# Stage 5: Grad-CAM insertion/deletion per cluster model (000 §5, Algorithm 2).


rule explain:
    input:
        dataset=f"{RESULTS}/data/{{dataset}}.parquet",
        assignments=f"{RESULTS}/splits/{SCENARIO}/assignments.parquet",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
        models=f"{RESULTS}/runs/{RUN}/models.pt",
        status=f"{RESULTS}/runs/{RUN}/status.json",
    output:
        insdel=f"{RESULTS}/explain/{RUN}/insdel.parquet",
        samples=f"{RESULTS}/explain/{RUN}/samples.parquet",
        saliency=f"{RESULTS}/explain/{RUN}/saliency.npz",
    log:
        f"{RESULTS}/logs/explain/{RUN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/explain/{RUN}.tsv"
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
        device=config["device"],
        code=code_version("explain"),
    script:
        "../workflow_scripts/explain.py"
