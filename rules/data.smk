# Stage 1 and 2: datasets -> Parquet (cached per dataset), data splits -> Parquet + manifest.


rule prepare_dataset:
    output:
        dataset=lay.dataset_file(RESULTS, "{dataset}"),
    log:
        lay.log_file(RESULTS, "prepare_dataset", "{dataset}"),
    benchmark:
        lay.benchmark_file(RESULTS, "prepare_dataset", "{dataset}")
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=p_data,
        code=p_data_code,
    script:
        "../workflow_scripts/prepare_dataset.py"


rule split:
    input:
        dataset=lay.dataset_file(RESULTS, "{dataset}"),
    output:
        assignments=lay.split_file(RESULTS, SCENARIO, fn.ASSIGNMENTS),
        manifest=lay.split_file(RESULTS, SCENARIO, fn.MANIFEST),
    log:
        lay.log_file(RESULTS, "split", SCENARIO),
    benchmark:
        lay.benchmark_file(RESULTS, "split", SCENARIO)
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=p_split,
        code=p_split_code,
    script:
        "../workflow_scripts/split.py"
