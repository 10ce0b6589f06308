# cfl-pipeline: a Clustered Federated Learning study as one cached DAG.
#   snakemake --cores all                                   # the default offline study
#   snakemake --cores all --configfile config/paper.yaml    # the paper's grid (real data in data_root)
#   snakemake --profile profiles/slurm --configfile config/paper.yaml
#   snakemake tune --configfile config/<study>.yaml   # a calibration's tuning step (rules/tune.smk)
# All logic lives in the `cflcore` package; rules only wire files and parameters.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# The HTML report's landing page: the headline table, the paper check and the departures by design
# (report/workflow.rst includes results/report/front_page.rst, written by rule report).
report: "report/workflow.rst"


# Jobs that take well under a second run in the main Snakemake process, never as cluster submissions.
localrules:
    all,
    split,


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/explain.smk"
include: "rules/report.smk"
include: "rules/tune.smk"


rule all:
    default_target: True
    input:
        all_targets(),


# profiles/default spaces Snakemake's scheduler re-runs 10 s apart; the one pending when the workflow ends
# (a non-daemon timer thread) would keep snakemake from exiting for that long.
onsuccess:
    stop_rescheduling_timers()


onerror:
    stop_rescheduling_timers()
