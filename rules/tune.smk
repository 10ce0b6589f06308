# The calibration's tuning step (issue 68 item 3; cflcore/config/calibration.py): `snakemake tune --configfile
# config/<study>.yaml` trains and scores every combination of `calibration.grid` on `calibration.tuning_seeds` (the
# study's settings; ordinary train and evaluate jobs, named as a sweep names its variants: scl@eps1=0.05), then picks
# one combination per variant (cflcore/report/calibration.py) and writes config/calibrated/<study>.yaml, which
# extends the study with the chosen values: `snakemake --configfile config/calibrated/<study>.yaml` runs it. Not part
# of the study's own targets: a study without `calibration: {mode: tune}` has no tuning runs, and its tune job says so.

import os

import cflcore.config.calibration as calibration
from cflcore.stages import tune_plan

# the study's config file, the last --configfile (Snakemake merges them in order); the Snakefile's own otherwise
STUDY_FILE = os.path.relpath(_cli_files[-1]) if _cli_files else cc.BASE_CONFIG
TUNING_RUNS = [lay.run_id(**s, algorithm=a) for s, a in calibration.tuning_runs(config)]


rule tune:
    input:
        clustering=[lay.eval_file(RESULTS, r, fn.CLUSTERING) for r in TUNING_RUNS],
        personalisation=[lay.eval_file(RESULTS, r, fn.PERSONALISATION) for r in TUNING_RUNS],
        server=[lay.run_file(RESULTS, r, fn.SERVER) for r in TUNING_RUNS],
        status=[lay.run_file(RESULTS, r, fn.STATUS) for r in TUNING_RUNS],
    output:
        calibrated=calibration.calibrated_file(STUDY_FILE),
    log:
        lay.log_file(RESULTS, "tune", "tune"),
    benchmark:
        lay.benchmark_file(RESULTS, "tune", "tune")
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        plan=canonical_json(tune_plan(config, STUDY_FILE)),
        code=code_version("tune"),
    script:
        "../workflow_scripts/tune.py"
