# Stage 1 and 2: datasets -> Parquet (cached per dataset), data splits -> Parquet + manifest.


rule prepare_dataset:
    output:
        f"{RESULTS}/data/{{dataset}}.parquet",
    log:
        f"{RESULTS}/logs/prepare_dataset/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare_dataset/{{dataset}}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=p_data,
        code=code_version("data"),
    script:
        "../workflow_scripts/prepare_dataset.py"


rule split:
    input:
        dataset=f"{RESULTS}/data/{{dataset}}.parquet",
    output:
        assignments=f"{RESULTS}/splits/{SCENARIO}/assignments.parquet",
        manifest=f"{RESULTS}/splits/{SCENARIO}/manifest.json",
    log:
        f"{RESULTS}/logs/split/{SCENARIO}.log",
    benchmark:
        f"{RESULTS}/benchmarks/split/{SCENARIO}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=p_split,
        code=code_version("splits"),
    script:
        "../workflow_scripts/split.py"
