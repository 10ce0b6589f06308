# Shared helpers: config validation, wildcard constraints, target lists and canonical params.
# Every value a job depends on goes through `params:` as a canonical (sorted-key) JSON string, so
# Snakemake's params trigger reruns exactly the affected jobs (docs/running.md, "Rerun only what changed";
# on a cluster: docs/cluster.md, "What reruns").

import json
import re
from pathlib import Path

from snakemake.utils import validate

import cflcore.config as cc
import cflcore.filenames as fn
import cflcore.layout as lay
from cflcore.defaults import device_identity
from cflcore.external import external_only
from cflcore.io import canonical_json
from cflcore.kernel_paths import NAME_PATTERN as KERNEL_NAME_PATTERN
from cflcore.provenance import code_version
from cflcore.stages import failed_attempts, report_plan, strategy_input_paths
from cflcore.sweep_expansion import NAME_PATTERN as SWEPT_NAME

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
# cflcore's validation first: its errors (schema ones included) are one line naming the field; Snakemake's own
# validate() then passes on the same config (it would print a schema error as a multi-line dump)
try:
    _validated = cc.validate_config_cached(
        config, Path(".snakemake") / "cflcore" / "validated-config", dry_run=workflow.output_settings.dryrun
    )  # -n: set at parse time
except cc.ConfigError as e:
    raise WorkflowError(f"config error: {e}") from None
validate(config, "../config/schema.yaml")
config.clear()
config.update(_validated)

RESULTS = config["results_dir"].rstrip("/")
STUDY = config["study"]


# split and algorithm names may carry a sweep's factor values (cflcore.sweep_expansion: louvain@resolution=0.5); no "/"
wildcard_constraints:
    dataset=r"[A-Za-z0-9_-]+",
    split=SWEPT_NAME,
    clients=r"[0-9]+",
    seed=r"[0-9]+",
    algorithm=SWEPT_NAME,
    round_size=r"client|epoch",


# every path below comes from cflcore.layout (the run id, each output's path and name; the report's: its catalogue)
SCENARIO = lay.SCENARIO_PATTERN
RUN = lay.RUN_PATTERN


def run_list():
    """Every run of the grid; a variant with a `splits:` list runs on those splits only."""
    return cc.study_run_ids(config)


def whatif_algorithm_constraint():
    """The `algorithm` wildcard constraint of the `evaluate` rule, i.e. the variants whose runs get a what-if replay
    (cc.whatif_runs: all of the study's, those of `whatif.algorithms`, none when `whatif.enabled` is false)."""
    names = sorted({run.rsplit("/", 1)[1] for run in cc.whatif_runs(config)}, key=lambda a: (-len(a), a))
    return "|".join(re.escape(a) for a in names) or "(?!)"  # (?!) matches nothing


def unreplayed_algorithm_constraint():
    """The `algorithm` wildcard constraint of the `train_evaluate` rule: every variant name but those of
    whatif_algorithm_constraint (a name of theirs followed by the run folder's `/` does not match)."""
    return f"(?!(?:{whatif_algorithm_constraint()})/){SWEPT_NAME}"


def explain_runs():
    """The runs the explain stage explains (cc.explain_runs: none when `explain.enabled` is false)."""
    return cc.explain_runs(config)


def all_targets():
    return [lay.report_file(RESULTS, fn.REPORT_INDEX[0])]


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


# A stage that hashes every built-in plug-in of its kind (the split generators, the loaders, the papers) hashes an
# external plug-in's own source only where its job selects one (cflcore.external, cflcore.provenance.code_version).
def p_data_code(w):
    return code_version("prepare_dataset", external_only({"dataset": cc.data_settings(config, w.dataset)["loader"]}))


def p_split_code(w):
    return code_version("split", external_only({"split generator": cc.split_settings(config, w.split)["generator"]}))


REPORT_CODE = code_version("report", external_only({"paper": tuple(config["report"].get("paper_checks") or ())}))


def p_run(w):
    return canonical_json(cc.run_settings(config, w.dataset, w.algorithm, w.split))


def p_attempt(w):
    """Failed attempts of the run so far (read only): a recorded failure changes this param, so Snakemake's params
    rerun trigger plans the run again at the next invocation (cflcore.stages.failed_attempts). No parse writes
    or deletes anything under results/."""
    return failed_attempts(lay.run_dir(RESULTS, lay.run_id(w.dataset, w.split, w.clients, w.seed, w.algorithm)))


def p_kernel_attempt(w):
    """p_attempt for a run trained again on kernel path ``w.kernels`` (rule train_kernels), in its own folder."""
    run = lay.run_id(w.dataset, w.split, w.clients, w.seed, w.algorithm)
    return failed_attempts(lay.run_dir(lay.kernel_results(RESULTS, w.kernels), run))


def p_train_code(w):
    """The hash of the code a train job runs: the engine, its own method and model (cflcore.provenance)."""
    return code_version("train", cc.run_plugins(config, w.dataset, w.algorithm))  # an external clusterer too


# The params of a training job, in rules train and train_evaluate (the second adds the scoring's two). They are the
# run's settings and seed, what to do on a failure, the failed attempts so far (a recorded failure changes this param,
# so the next invocation retries the run) and the code's hash.
TRAIN_PARAMS = dict(
    run=p_run,
    seed=lambda w: int(w.seed),
    on_failure=config["on_run_failure"],
    attempt=p_attempt,
    code=p_train_code,
)


# report.kernel_paths (cflcore/kernel_paths.py): the kernel paths the study's runs are trained again on (rule
# train_kernels), and those runs' scores, which the paper check reads (rules/report_common.smk)
KERNEL_PATHS = tuple(config["report"].get("kernel_paths") or ())


def kernel_runs_scores(w):
    """The scores of every run of the study trained again on each kernel path (none when report.kernel_paths is unset)."""
    return [
        lay.eval_file(lay.kernel_results(RESULTS, k), r, name)
        for k in KERNEL_PATHS
        for r in run_list()
        for name in fn.EVAL_OUTPUTS
    ]


def strategy_input_files(w):
    """The files the run's strategy declares beyond the split (Strategy.inputs), by name, beside the split."""
    return strategy_input_paths(config, w.dataset, w.split, w.clients, w.seed, w.algorithm)


def p_centralised(w):
    return canonical_json(cc.centralised_settings(config, w.dataset, w.round_size))


def p_centralised_code(w):
    """The centralised training's code: its stage and the dataset's model (cflcore.provenance)."""
    return code_version("centralised_update_norms", {"model": cc.dataset_settings(config, w.dataset)["model"]})


def p_explain_code(w):
    """The hash of the code an explain job runs: the explain stage and its run's model."""
    return code_version("explain", cc.explain_plugins(config, w.dataset, w.algorithm))


def p_explain(w):
    return canonical_json(cc.explain_settings(config, w.dataset, w.algorithm))


def p_evaluate_settings(w):
    """The one key of the report block evaluation reads (score_rounds): the block's other keys are the report's,
    so changing them reruns no evaluation."""
    return canonical_json({"score_rounds": config["report"]["score_rounds"]})


def p_whatif(w):
    """The what-if clusterer list and the run's own clusterer only (cc.whatif_settings)."""
    return canonical_json(cc.whatif_settings(config, w.dataset, w.algorithm))


def p_whatif_code(w):
    """The replay's code: every built-in clusterer, and an external one the run's own clustering replays."""
    return code_version(
        "whatif", external_only({"clusterer": cc.whatif_clusterer_names(config, w.dataset, w.algorithm)})
    )


def mem_train(w):
    """A train job's memory (MB) by its run's model (its variant's own where it names one); a job without a variant
    (the centralised proxy, one per scenario) by its dataset's model."""
    algorithm = getattr(w, "algorithm", None)
    if algorithm:
        model = cc.run_training(config, w.dataset, algorithm)["model"]
    else:
        model = cc.dataset_settings(config, w.dataset)["model"]
    return 4000 if model in ("ocfl-cnn", "resnet34") else 2000


GPU = 1 if config["engine"].get("gpu") else 0
