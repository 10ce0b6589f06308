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
from .io import read_json, write_json

log = logging.getLogger("cflcore")

RUN_OUTPUTS = ("history.parquet", "server.parquet", "gram.parquet", "divergence.parquet", "models.pt", "status.json")


def prepare_dataset(settings: Mapping[str, Any], out_path: str | Path) -> None:
    from .data import prepare_dataset as _prepare

    _prepare(settings["loader"], dict(settings), out_path)


def make_split(dataset_path: str | Path, settings: Mapping[str, Any], n_clients: int, seed: int,
               out_dir: str | Path) -> dict[str, Any]:
    from .data.splits import make_split as _make_split

    return _make_split(dataset_path, dict(settings), int(n_clients), int(seed), out_dir)


def train(dataset_path: str | Path, split_dir: str | Path, settings: Mapping[str, Any], seed: int,
          out_dir: str | Path, on_failure: str = "fail") -> dict[str, Any]:
    """Train one run. With ``on_failure='record'`` a failure inside training (e.g. a diverging loss)
    is written to ``status.json`` (and empty run files) instead of raised, so that the other runs and
    the report go on; the next Snakemake invocation forgets and retries it."""
    from .data.store import load_federated
    from .fl.run import train_run

    out_dir = Path(out_dir)
    t0 = time.time()
    fed = load_federated(dataset_path, split_dir)
    try:
        train_run(fed, dict(settings), int(seed), out_dir, log=log)
    except CflError as e:
        if on_failure != "record":
            raise
        log.error("run failed: %s", e)
        _write_failed_run(out_dir, str(e))
        return {"status": "failed", "reason": str(e)}
    status = {"status": "ok", "seconds": round(time.time() - t0, 3)}
    write_json(status, out_dir / "status.json")
    return status


def _write_failed_run(out_dir: Path, reason: str) -> None:
    """Empty (zero-row) run files plus a status.json naming the reason: never a table of NaNs."""
    import pyarrow as pa
    import torch

    from .io import atomic_path, write_parquet

    for name in RUN_OUTPUTS:
        if name.endswith(".parquet"):
            write_parquet(pa.table({"round": pa.array([], pa.int32())}), out_dir / name,
                          metadata={"status": "failed", "reason": reason})
    with atomic_path(out_dir / "models.pt") as tmp:
        torch.save({"format": "cflcore.models/1", "status": "failed", "reason": reason}, tmp)
    write_json({"status": "failed", "reason": reason}, out_dir / "status.json")


def run_status(run_dir: str | Path) -> dict[str, Any]:
    p = Path(run_dir) / "status.json"
    if not p.exists():
        return {"status": "missing", "reason": "no run files"}
    try:
        return read_json(p)
    except CflError as e:
        return {"status": "missing", "reason": str(e)}


def forget_failed_runs(results_dir: str | Path) -> list[Path]:
    """Delete the outputs of runs whose status.json says ``failed`` so that they are retried.
    Checkpoints are kept (a retried run resumes). Returns the run directories forgotten."""
    forgotten = []
    root = Path(results_dir) / "runs"
    if not root.exists():
        return forgotten
    for status in root.glob("*/*/*/*/*/status.json"):
        try:
            failed = json.loads(status.read_text()).get("status") == "failed"
        except (OSError, json.JSONDecodeError):
            failed = True
        if failed:
            for name in RUN_OUTPUTS:
                (status.parent / name).unlink(missing_ok=True)
            forgotten.append(status.parent)
            log.warning("retrying failed run %s", status.parent)
    return forgotten


def evaluate(run_dir: str | Path, manifest_path: str | Path, out_dir: str | Path,
             settings: Mapping[str, Any]) -> None:
    from .report.evaluate import evaluate_run

    evaluate_run(run_dir, manifest_path, out_dir, score_rounds=settings.get("score_rounds"))


def explain(dataset_path: str | Path, split_dir: str | Path, run_dir: str | Path,
            settings: Mapping[str, Any], seed: int, out_dir: str | Path, device: str = "auto") -> None:
    from .data.store import load_federated
    from .explain import explain_run, write_empty_explain
    from .fl.artifacts import load_run_models
    from .fl.device import resolve_device

    status = run_status(run_dir)
    if status.get("status") != "ok":
        write_empty_explain(out_dir, reason=f"run {status.get('status')}: {status.get('reason', '')}")
        return
    dev = resolve_device(device)
    fed = load_federated(dataset_path, split_dir)
    models = load_run_models(Path(run_dir) / "models.pt", device=dev)
    explain_run(models, fed, dict(settings), int(seed), out_dir)


def clean_dir(path: str | Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
