# Shared helpers: config validation, wildcard constraints, target lists and canonical params.
# Every value a job depends on goes through `params:` as a canonical (sorted-key) JSON string, so
# Snakemake's params trigger reruns exactly the affected jobs (reference/slurm.md, "Rerun triggers").

import json
import re
from pathlib import Path

from snakemake.utils import validate

import cflcore.config as cc
from cflcore.io import canonical_json
from cflcore.provenance import code_version
from cflcore.stages import failed_attempts, report_plan
from cflcore.sweeps import NAME_PATTERN as SWEPT_NAME

# 1) JSON-schema validation (fills defaults), 2) registry checks (method/clusterer/model names,
# per-method parameter schemas). Both run before any job is scheduled. The registry checks import torch and
# scikit-learn; their result is remembered in .snakemake/ under a hash of the config, cflcore's sources and
# the library versions (cflcore.config.validate_config_cached), so later starts skip those imports.
# a config file may `extends:` another (cflcore.config.read_config_file): resolve before validating
_cli_files = [Path(f).absolute() for f in workflow.overwrite_configfiles]
_resolved = cc.snakemake_config(
    config,
    [f for f in workflow.configfiles if Path(f).absolute() not in _cli_files],
    _cli_files,
    workflow.config_settings.config,
)
config.clear()
config.update(_resolved)
validate(config, "../config/schema.yaml")
try:
    _validated = cc.validate_config_cached(config, Path(".snakemake") / "cflcore" / "validated-config")
except cc.ConfigError as e:
    raise WorkflowError(f"config error: {e}") from None
config.clear()
config.update(_validated)

RESULTS = config["results_dir"].rstrip("/")
STUDY = config["study"]
ALGORITHMS = STUDY["algorithms"]


# split and algorithm names may carry a sweep's factor values (cflcore.sweeps: louvain@resolution=0.5); no "/"
wildcard_constraints:
    dataset=r"[A-Za-z0-9_-]+",
    split=SWEPT_NAME,
    clients=r"[0-9]+",
    seed=r"[0-9]+",
    algorithm=SWEPT_NAME,


SCENARIO = "{dataset}/{split}/n{clients}/s{seed}"
RUN = "{dataset}/{split}/n{clients}/s{seed}/{algorithm}"


def scenario_list():
    return [cc.scenario_id(**s) for s in cc.scenarios(config)]


def run_list():
    """Every run of the grid; a variant with a `splits:` list runs on those splits only."""
    return [f"{cc.scenario_id(**s)}/{a}" for s, a in cc.study_runs(config)]


def whatif_algorithm_constraint():
    """The `algorithm` wildcard constraint of the `evaluate` rule, i.e. the variants whose runs get a what-if replay
    (cc.whatif_runs: all of the study's, those of `whatif.algorithms`, none when `whatif.enabled` is false)."""
    names = sorted({run.rsplit("/", 1)[1] for run in cc.whatif_runs(config)}, key=lambda a: (-len(a), a))
    return "|".join(re.escape(a) for a in names) or "(?!)"  # (?!) matches nothing


def explain_enabled():
    return bool(config["explain"].get("enabled", True))


def explain_runs():
    only = (STUDY.get("explain") or {}).get("clients")
    runs = [f"{cc.scenario_id(**s)}/{a}" for s, a in cc.study_runs(config) if not only or s["clients"] in only]
    return runs if explain_enabled() else []


REPORT_DIR = f"{RESULTS}/report"
REPORT_TABLES = [
    "table1_clustering",
    "table2_clustering_round",
    "table_personalisation",
    "paper_vs_run",
    "table_late_clients",
]
# tables with CSV only (no Markdown / LaTeX twin)
CSV_TABLES = ["sweep_scores", "paper_claims"]
# where the study's time went (cflcore/report/benchmarks.py), from every job's benchmark file
BENCHMARK_TABLES = ["benchmarks_by_rule", "critical_path", "benchmark_summary"]


def all_targets():
    return [f"{REPORT_DIR}/index.json"]


def stop_rescheduling_timers():
    """Cancel the timers Snakemake's job rate limiter left to re-run the scheduler (threading.Timer; the
    workflow's own are the only ones): at the workflow's end they would only delay the exit."""
    import threading

    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()


# ---- canonical params ------------------------------------------------------------------------
def p_data(w):
    return canonical_json(cc.data_settings(config, w.dataset))


def p_split(w):
    return canonical_json(cc.split_settings(config, w.split))


def p_run(w):
    return canonical_json(cc.run_settings(config, w.dataset, w.algorithm))


def p_attempt(w):
    """Failed attempts of the run so far (read only): a recorded failure changes this param, so Snakemake's params
    rerun trigger plans the run again at the next invocation (cflcore.stages.failed_attempts). No parse writes
    or deletes anything under results/."""
    return failed_attempts(f"{RESULTS}/runs/{w.dataset}/{w.split}/n{w.clients}/s{w.seed}/{w.algorithm}")


def p_explain(w):
    return canonical_json(cc.explain_settings(config, w.dataset))


def p_whatif(w):
    """The what-if clusterer list and the run's own clusterer only (cc.whatif_settings)."""
    return canonical_json(cc.whatif_settings(config, w.dataset, w.algorithm))


def mem_train(w):
    return 4000 if cc.dataset_settings(config, w.dataset)["model"] in ("ocfl-cnn", "resnet34") else 2000


GPU = 1 if config["engine"].get("gpu") else 0


# ---- report stage ---------------------------------------------------------------------------
FIGURE_KINDS = {
    "learning_gap": "PF1 / GF1 learning gap (000 Fig. 2)",
    "temperature_mean": "Normalised temperature (000 Figs. 3-4)",
    "temperature_runs": "Temperature per run (000 Figs. 10-14)",
    "clustering_progress": "Clustering score per round (001 Fig. 1)",
    "n_clusters": "Number of clusters per round",
    "whatif_heatmap": "What-if clustering: ARI per clusterer and round (trigger vs earliest separable round)",
    "late_clients": "Late-joining clients: PF1 of late vs founding clients (000 §6.2)",
    "split_traces": "Split criteria per round: SCL update norms vs eps1/eps2, FedGWC MSE vs eps and DB",
    "sweeps": "Factor sweeps: final scores against the swept values (002 Figs. 3-4)",
    "round_envelopes": "Per-round scores, mean and std envelope over seeds (002 Fig. 5)",
}
EXPLAIN_KINDS = {
    "saliency_grid": "Saliency grids (000 Fig. 5)",
    "insdel_box": "Insertion / deletion AUC (000 Figs. 6-7)",
    "cd": "Critical-difference diagrams (000 Figs. 8, 17)",
}


def report_inputs(w):
    runs = run_list()
    files = {
        "clustering": [f"{RESULTS}/eval/{r}/clustering.parquet" for r in runs],
        "personalisation": [f"{RESULTS}/eval/{r}/personalisation.parquet" for r in runs],
    }
    files["insdel"] = [f"{RESULTS}/explain/{r}/insdel.parquet" for r in explain_runs()]
    files["whatif"] = [f"{RESULTS}/eval/{r}/whatif.parquet" for r in cc.whatif_runs(config)]
    files["late_clients"] = [f"{RESULTS}/eval/{r}/late_clients.parquet" for r in cc.late_client_runs(config)]
    return files


def report_runs_param():
    """The report stage's plan (runs, explained runs, the front page's config context): the same dict
    `cfl report` builds, so the workflow and the command line write the same report."""
    return canonical_json(report_plan(config))
