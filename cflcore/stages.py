"""One function per pipeline stage, shared by the Snakemake scripts and the ``cfl`` command line.

Each takes the canonical settings a rule passes through ``params:`` (plain dicts) and explicit paths,
so running a stage by hand and running it under Snakemake execute the same code on the same inputs.
"""
from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import CflError
from . import filenames as fn
from .io import read_json, write_json

log = logging.getLogger("cflcore")


def prepare_dataset(settings: Mapping[str, Any], out_path: str | Path) -> None:
    from .data import prepare_dataset as _prepare

    _prepare(settings["loader"], dict(settings), out_path)


def make_split(dataset_path: str | Path, settings: Mapping[str, Any], n_clients: int, seed: int,
               out_dir: str | Path, name: str = "split") -> dict[str, Any]:
    from .data.splits import make_split as _make_split

    return _make_split(dataset_path, dict(settings), int(n_clients), int(seed), out_dir, field=f"splits.{name}")


def train(dataset_path: str | Path, split_dir: str | Path, settings: Mapping[str, Any], seed: int,
          out_dir: str | Path, on_failure: str = "fail", tensorboard_dir: str | Path | None = None,
          monitors: Sequence[Any] = (), inputs: Mapping[str, str | Path] | None = None,
          device: str | None = None) -> dict[str, Any]:
    """Train one run; ``inputs``: the files its strategy declares beyond the split, by name (``Strategy.inputs``; the
    rule's input files of those names, or :func:`strategy_input_paths`). With ``on_failure='record'`` a failure inside training (e.g. a diverging loss)
    is written to ``status.json`` (and empty run files) instead of raised, so that the other runs and
    the report go on; the next Snakemake invocation retries it (:func:`failed_attempts`).

    Every round is recorded in ``out_dir/progress.jsonl`` (cflcore.fl.progress); with ``tensorboard_dir`` (config
    ``monitor.tensorboard``) its scalars also go to TensorBoard event files there; ``monitors`` are further watchers
    (``cfl train``'s progress bar). None of them is a declared output or a param: they change no rerun decision.
    ``device``: the config's concrete device (``cuda:1``; the settings hold its identity, defaults.device_identity).
    status.json's ``hardware`` records the device, driver, CUDA, torch and resolved chunking the run ran with.
    ``settings``: config.run_settings's plain dict, typed here once (cflcore.settings.RunSettings) after the strategy's
    declared inputs resolve its parameters; the job reads the typed settings from then on."""
    from .data.store import load_federated
    from .fl.run import train_run
    from .settings import RunSettings
    from .strategies.base import build_strategy, declared_inputs, resolve_params

    out_dir = Path(out_dir)
    t0 = time.time()
    fed = load_federated(dataset_path, split_dir)
    declared = declared_inputs(settings["algorithm"])  # files beyond the split (Strategy.inputs)
    if declared:
        missing = sorted(set(declared) - set(inputs or {}))
        if missing:
            raise CflError(f"the strategy's declared inputs {', '.join(missing)} were not given (Strategy.inputs)")
        given = {name: Path(inputs[name]) for name in declared}
        settings = {**settings, "algorithm": resolve_params(settings["algorithm"], given)}
    run = RunSettings.of(settings)  # typed once for the whole job (the schema's defaults under a hand-built dict)
    try:
        watchers = [*monitors]
        if tensorboard_dir is not None:
            from .fl.progress import TensorBoardMonitor

            watchers.append(TensorBoardMonitor(tensorboard_dir))
        hardware = train_run(fed, run, int(seed), out_dir, log=log, strategy=build_strategy(run.algorithm.as_dict()),
                             monitors=watchers, device=device)
    except CflError as e:
        if on_failure != "record":
            raise
        log.error("run failed: %s", e)
        _write_failed_run(out_dir, str(e))
        return {"status": "failed", "reason": str(e)}
    _ensure_divergence(out_dir)
    status = {"status": "ok", "seconds": round(time.time() - t0, 3), "hardware": hardware}
    write_json(status, out_dir / fn.STATUS)
    return status


def strategy_input_paths(cfg: Mapping[str, Any], dataset: str, split: str, clients: int | str, seed: int | str,
                         algorithm: str) -> dict[str, str]:
    """The paths of the files a run's strategy declares beyond the split (``Strategy.inputs``, as validation stored
    them: config.run_inputs), by name, beside the split: rule ``train``'s inputs and ``cfl train``'s."""
    from . import layout
    from .config import run_inputs

    results = str(cfg["results_dir"]).rstrip("/")
    scenario = layout.scenario_id(dataset, split, clients, seed)
    return {name: layout.input_file(results, scenario, kind) for name, kind in run_inputs(cfg, dataset, algorithm).items()}


def centralised_update_norms(dataset_path: str | Path, split_dir: str | Path, settings: Mapping[str, Any], seed: int,
                             out_path: str | Path) -> None:
    """Rule ``centralised_update_norms``: a centralised training's update norm per round on the scenario's pooled
    client training data, beside the split (cflcore/fl/centralised.py), for the strategies that declare it among
    their inputs. ``settings``: :func:`config.centralised_settings`."""
    from .data.store import load_federated
    from .fl.centralised import centralised_update_norms as norms_of, write_update_norms

    fed = load_federated(dataset_path, split_dir)
    norms = norms_of(fed, settings["training"], settings["engine"], int(seed), settings["round_size"])
    write_update_norms(norms, out_path, {"round_size": settings["round_size"], "rounds": len(norms), "seed": int(seed)})


def _ensure_divergence(out_dir: Path) -> None:
    """Methods that compute no divergence matrix get an empty (zero-row) ``divergence.parquet``,
    so every run has the same declared outputs."""
    import pyarrow as pa

    from .io import write_parquet

    path = out_dir / fn.DIVERGENCE
    if not path.exists():
        write_parquet(pa.table({"round": pa.array([], pa.int32()), "i": pa.array([], pa.int32()),
                                "j": pa.array([], pa.int32()), "value": pa.array([], pa.float64())}), path,
                      metadata={"computed": False})


def _write_failed_run(out_dir: Path, reason: str) -> None:
    """Empty (zero-row) run files plus a status.json naming the reason: never a table of NaNs."""
    import pyarrow as pa

    from .io import torch_save, write_parquet

    for name in fn.RUN_TABLES:
        write_parquet(pa.table({"round": pa.array([], pa.int32())}), out_dir / name,
                          metadata={"status": "failed", "reason": reason})
    torch_save({"format": "cflcore.models/1", "status": "failed", "reason": reason}, out_dir / fn.MODELS)
    write_json({"status": "failed", "reason": reason}, out_dir / fn.STATUS)
    _record_failure(out_dir, reason)


def run_status(run_dir: str | Path) -> dict[str, Any]:
    p = Path(run_dir) / fn.STATUS
    if not p.exists():
        return {"status": "missing", "reason": "no run files"}
    try:
        return read_json(p)
    except CflError as e:
        return {"status": "missing", "reason": str(e)}


def failed_attempts(run_dir: str | Path) -> int:
    """How many attempts of this run failed so far (lines of ``<run>/failures.jsonl``). Read only.

    Rule ``train`` passes this count as a param: a recorded failure (``on_failure='record'``) adds a line, so the
    next invocation sees a param different from the one the failed job ran with, and Snakemake's own params rerun
    trigger plans the run again (its declared outputs are removed by Snakemake before the job starts; its
    ``checkpoints/`` are not declared outputs, so the retry resumes from them). A successful retry adds no line,
    so the run then stays done. Nothing is written or deleted at parse time."""
    path = Path(run_dir) / fn.FAILURES
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except FileNotFoundError:
        return 0


def _record_failure(out_dir: Path, reason: str) -> None:
    """Append one line to ``failures.jsonl`` (append-only; written last, after the run's failure files)."""
    line = json.dumps({"attempt": failed_attempts(out_dir) + 1, "reason": reason}, sort_keys=True)
    with open(out_dir / fn.FAILURES, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def evaluate(run_dir: str | Path, manifest_path: str | Path, out_dir: str | Path,
             settings: Mapping[str, Any]) -> None:
    from .evaluate.clustering import evaluate_run

    evaluate_run(run_dir, manifest_path, out_dir, score_rounds=settings.get("score_rounds"))


def whatif(run_dir: str | Path, manifest_path: str | Path, out_path: str | Path,
           settings: Mapping[str, Any], seed: int) -> None:
    """Replay the configured clusterers on every recorded round of one run (cflcore.evaluate.whatif);
    ``settings`` = cflcore.config.whatif_settings."""
    from .evaluate.whatif import whatif_run

    t0 = time.time()
    frame = whatif_run(run_dir, manifest_path, out_path, settings, int(seed))
    log.info("whatif: %d rows (clusterer x round) in %.2f s", len(frame), time.time() - t0)


def evaluate_late_clients(run_dir: str | Path, manifest_path: str | Path, out_path: str | Path) -> None:
    """late_clients.parquet of a run with late-joining clients (000 §6.2; cflcore.evaluate.late_clients)."""
    from .evaluate.late_clients import evaluate_late_clients as _evaluate_late

    _evaluate_late(run_dir, manifest_path, out_path)


def explain(dataset_path: str | Path, split_dir: str | Path, run_dir: str | Path,
            settings: Mapping[str, Any], seed: int, out_dir: str | Path, device: str = "auto",
            deterministic: bool = True) -> None:
    """Rule ``explain``. ``deterministic`` is ``engine.deterministic``: on CUDA the attributions' backward passes
    run deterministic kernels too (cflcore.fl.device.set_deterministic), set before the models reach the GPU."""
    from .data.store import load_federated
    from .explain.framework import explain_run, write_empty_explain
    from .fl.artifacts import load_run_models
    from .fl.device import prepare_device

    status = run_status(run_dir)
    if status.get("status") != "ok":
        write_empty_explain(out_dir, reason=f"run {status.get('status')}: {status.get('reason', '')}")
        return
    dev = prepare_device(device, bool(deterministic))
    fed = load_federated(dataset_path, split_dir)
    models = load_run_models(Path(run_dir) / fn.MODELS, device=dev)
    explain_run(models, fed, dict(settings), int(seed), out_dir)


def clean_dir(path: str | Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def report_plan(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What the report stage needs from the config (the rule passes the same dict as a param): the run ids it
    expects (``runs``; the report builds each run's paths from cflcore.layout), those with late-joining clients
    and those explained, the per-run facts the front page and the figures read, and the files of other studies the
    parts read (cflcore.report.catalogue.STUDY_INPUTS)."""
    from . import layout
    from .config import explain_runs, late_client_runs, study_run_ids
    from .report.front_context import front_page_context

    from .report.catalogue import OUTPUTS, STUDY_INPUTS

    explain = cfg["explain"]
    explained = explain_runs(cfg)
    results = str(cfg["results_dir"]).rstrip("/")
    front = front_page_context(cfg)
    by_part: dict[str, set[str]] = {}
    by_part.setdefault(OUTPUTS["cross_paper"].part, set()).update(
        path for paths in (front.get("home_checks") or {}).values() for path in paths)
    by_part.setdefault(OUTPUTS["paper_claims"].part, set()).update(  # the tables that print the ablations' verdicts
        path for studies in (front.get("ablation_claims") or {}).values() for _, path in studies)
    other_studies = {part: sorted(paths) for part, paths in by_part.items() if paths}
    study_inputs = {STUDY_INPUTS: other_studies} if other_studies else {}
    return {**study_inputs, "results_dir": results, "runs": study_run_ids(cfg),
            "late_runs": late_client_runs(cfg),
            "explain_runs": explained, "grid_clients": explain["grid_clients"],
            "sweep_index": cfg.get("sweep_index") or {"algorithms": {}, "splits": {}},
            "front_page": front,
            "benchmarks": {"root": layout.benchmarks_dir(results), "jobs": benchmark_jobs(cfg, explained)}}


def benchmark_jobs(cfg: Mapping[str, Any], explain_runs: list[str]) -> dict[str, list[str]]:
    """rule -> the wildcards paths of the config's jobs upstream of rule ``report`` (their benchmark files are
    ``results/benchmarks/<rule>/<path>.tsv``; a rule without wildcards, e.g. ``report_tables``, has one job named
    after it; the ``report`` job's own time is measured by itself): each stage's rules (cflcore.pipeline.STAGES),
    with the jobs their records name (cflcore.pipeline.JOB_SETS)."""
    from . import layout, pipeline
    from .config import late_client_runs, run_inputs, study_run_ids, whatif_runs
    from .report.benchmarks import report_parts

    runs = study_run_ids(cfg)
    scenarios = sorted({layout.parse_run_id(r).scenario for r in runs})
    replayed = set(whatif_runs(cfg))  # rules train and evaluate; the others one job each, train_evaluate
    kernels = (cfg.get("report") or {}).get("kernel_paths") or []  # rule train_kernels: one job per run and path
    inputs: dict[str, set[str]] = {}  # a strategy input's kind is its rule's name; the option its last wildcard
    for r in runs:
        run = layout.parse_run_id(r)
        for kind in run_inputs(cfg, run.dataset, str(run.algorithm)).values():
            base, _, option = kind.partition("/")
            inputs.setdefault(base, set()).add(f"{run.scenario}/{option}")
    jobs = {"datasets": lambda rule: sorted({layout.parse_scenario_id(s).dataset for s in scenarios}),
            "scenarios": lambda rule: scenarios, "input_files": lambda rule: sorted(inputs.get(rule, ())),
            "runs": lambda rule: runs, "replayed_runs": lambda rule: [r for r in runs if r in replayed],
            "kernel_runs": lambda rule: [f"{k}/{r}" for k in kernels for r in runs],
            "unreplayed_runs": lambda rule: [r for r in runs if r not in replayed],
            "late_client_runs": lambda rule: late_client_runs(cfg), "explained_runs": lambda rule: explain_runs,
            "part": lambda rule: [rule]}
    return {rule: jobs[kind](rule) for stage in pipeline.with_report_parts(report_parts())
            for rule, kind in stage.rules.items() if kind not in ("index", "tuning")
            and (kind != "input_files" or rule in inputs) and (kind != "kernel_runs" or kernels)}


def report(cfg: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """The whole report in this process (``cfl report``): every part, then the index (cflcore.report.parts)."""
    from .report.parts import build_all

    return build_all(report_plan(cfg), out_dir)


def report_part(plan: Mapping[str, Any], part: str, out_dir: str | Path) -> dict[str, Any]:
    """One part of the report (rules ``report_<part>``; cflcore.report.parts.PARTS)."""
    from .report.parts import write_part

    return write_part(plan, part, out_dir)


def report_index(plan: Mapping[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Rule ``report``: the parts' index entries, the per-rule benchmark tables, index.json."""
    from .report.parts import gather

    return gather(plan, out_dir)


def tune_plan(cfg: Mapping[str, Any], study_file: str | Path) -> dict[str, Any]:
    """What rule ``tune`` needs from the config (its param): the tuning runs' ids, the calibration block, the tuning
    variants' entries and the study's config file, which the calibrated file extends (cflcore/config/calibration.py)."""
    from . import layout
    from .calibration_keys import CALIBRATION_KEY, TUNING_KEY
    from .config.calibration import tuning_runs

    block = cfg.get(CALIBRATION_KEY) or {}
    return {"results_dir": str(cfg["results_dir"]).rstrip("/"), "study_file": str(study_file),
            "runs": [layout.run_id(**s, algorithm=a) for s, a in tuning_runs(cfg)], CALIBRATION_KEY: block,
            "algorithms": {a: cfg["algorithms"][a] for a in block.get(TUNING_KEY) or {}}}


def tune(plan: Mapping[str, Any], out_path: str | Path) -> dict[str, Any]:
    """Rule ``tune``: one combination of thresholds per variant from the tuning runs, written to ``out_path`` as a
    config that extends the study (cflcore.report.calibration)."""
    from .calibration_keys import CALIBRATION_KEY, CHOSEN_KEY, TUNE
    from .errors import ConfigError
    from .report.calibration import tune as choose

    block = plan.get(CALIBRATION_KEY) or {}
    if block.get("mode") != TUNE:
        raise ConfigError("calibration.mode: snakemake tune needs mode: tune (with tuning_seeds, metric and grid)")
    if block.get(CHOSEN_KEY):
        raise ConfigError(f"calibration.{CHOSEN_KEY}: this config is already calibrated; run snakemake tune with the "
                          f"study's own config file")
    return choose(plan, out_path)
