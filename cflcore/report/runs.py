"""The runs a report expects, and loading them: a run whose files are absent or unreadable becomes a
:class:`MissingRun` with a one-line reason (a failed job under ``--keep-going``), never an exception."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .. import filenames as fn
from .. import layout
from ..errors import CflError
from ..io import parquet_metadata, read_json, read_parquet

OK_STATUSES = {"ok", "done", "success", "succeeded", "complete", "completed", "finished"}


def diagnostics_cell(value: Any) -> Any:
    """One cell of a strategy's diagnostics column in ``server.parquet`` (a canonical JSON string, or null),
    parsed: the dict or list it holds, None for null."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return json.loads(value) if isinstance(value, str) else value


def diagnostics_mapping(value: Any) -> dict[str, Any]:
    """A diagnostics cell that holds a {cluster: value} mapping, as a dict ({} for null or any other value)."""
    parsed = diagnostics_cell(value)
    return dict(parsed) if isinstance(parsed, dict) else {}


@dataclass(frozen=True)
class RunSpec:
    """One expected run (scenario × algorithm) and the paths of its files."""

    dataset: str
    split: str
    clients: int
    seed: int
    algorithm: str
    eval_dir: Path
    run_dir: Path
    manifest: Path
    log: Path | None = None
    status: Path | None = None

    @property
    def run_id(self) -> str:
        return layout.run_id(self.dataset, self.split, self.clients, self.seed, self.algorithm)


@dataclass(frozen=True)
class LoadedRun:
    """A run's evaluation tables, its server log (temperature) and split manifest."""

    spec: RunSpec
    clustering: pd.DataFrame
    personalisation: pd.DataFrame
    server: pd.DataFrame | None
    manifest: Mapping[str, Any]
    whatif: pd.DataFrame | None = None  # eval/.../whatif.parquet (cflcore.evaluate.whatif), when the run has one
    whatif_meta: Mapping[str, Any] | None = None  # its Parquet metadata (run_clustering_round, ...)
    traffic: pd.DataFrame | None = None  # runs/.../traffic.parquet (Strategy.traffic), when the run has one


@dataclass(frozen=True)
class MissingRun:
    spec: RunSpec
    reason: str


def run_specs(results_dir: str | Path, runs: Sequence[str], kernels: str | None = None) -> list[RunSpec]:
    """The runs ``runs`` (run ids, e.g. a report plan's, cflcore.stages.report_plan) with the standard paths of
    docs/architecture.md §2 under ``results_dir`` (cflcore.layout); ``kernels``: the same runs trained again on
    that kernel path (report.kernel_paths), under its folder, their splits the study's own."""
    results = str(results_dir).rstrip("/")
    trained = layout.kernel_results(results, kernels) if kernels else results
    specs = []
    for run in runs:
        ref = layout.parse_run_id(run)
        specs.append(RunSpec(
            ref.dataset, ref.split, ref.clients, ref.seed, str(ref.algorithm),
            eval_dir=Path(layout.eval_dir(trained, run)), run_dir=Path(layout.run_dir(trained, run)),
            manifest=Path(layout.split_file(results, ref.scenario, fn.MANIFEST)),
            log=Path(layout.log_file(trained, "train", run)), status=Path(layout.run_file(trained, run, fn.STATUS)),
        ))
    return specs


def last_log_line(path: Path | None) -> str | None:
    """The last non-empty line of a log file (None when absent or empty)."""
    if path is None or not Path(path).is_file():
        return None
    lines = [ln.strip() for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else None


HARDWARE_FIELDS = ("name", "kind", "device", "cpu_capability", "torch", "cuda", "driver", "trainer")
"""The fields of status.json's ``hardware`` (cflcore.fl.run) that say where a run ran; the report's hardware table
has one column each. ``cuda`` is torch's build, also on a CPU."""


def _status_json(path: Path | None) -> Any:
    """A run's status.json, None where there is none; a CflError where it cannot be read."""
    return read_json(path) if path is not None and Path(path).is_file() else None


def hardware_record(path: Path | None) -> dict[str, Any]:
    """A run's status.json ``hardware`` record, :data:`HARDWARE_FIELDS` only (empty where a run has none)."""
    try:
        status = _status_json(path)
    except CflError:
        return {}
    hardware = status.get("hardware") if isinstance(status, dict) else None
    return {k: hardware.get(k) for k in HARDWARE_FIELDS} if isinstance(hardware, dict) else {}


def failed_status_reason(path: Path | None) -> str | None:
    """The reason recorded in a run's status.json when its status is not a success (None otherwise)."""
    try:
        status = _status_json(path)
    except CflError as e:
        return str(e)
    if not isinstance(status, dict) or str(status.get("status", "")).lower() in OK_STATUSES:
        return None
    for key in ("reason", "error", "message"):
        if status.get(key):
            return " ".join(str(status[key]).split())[:300]
    return f"status {status.get('status')!r}"


def missing_reason(spec: RunSpec) -> str:
    """One-line reason: status.json's, else the log's last line, else which files are absent."""
    reason = failed_status_reason(spec.status)
    if reason:
        return reason
    if (Path(spec.run_dir) / fn.HISTORY).exists():
        return "no eval files (training finished; the evaluate job did not)"
    return last_log_line(spec.log) or "no run files"


def load_run(spec: RunSpec) -> LoadedRun | MissingRun:
    """Read a run's eval tables, server.parquet (optional) and manifest, or say why it is missing."""
    clustering_path = Path(spec.eval_dir) / fn.CLUSTERING
    personalisation_path = Path(spec.eval_dir) / fn.PERSONALISATION
    if not clustering_path.exists() or not personalisation_path.exists():
        return MissingRun(spec, missing_reason(spec))
    try:
        metadata = parquet_metadata(clustering_path)
        if metadata.get("status") == "failed":
            return MissingRun(spec, str(metadata.get("reason") or "run failed"))
        clustering = read_parquet(clustering_path).to_pandas()
        if clustering.empty:
            return MissingRun(spec, missing_reason(spec))
        personalisation = read_parquet(personalisation_path).to_pandas()
        server_path = Path(spec.run_dir) / fn.SERVER
        server = read_parquet(server_path).to_pandas() if server_path.exists() else None
        traffic_path = Path(spec.run_dir) / fn.TRAFFIC
        traffic = read_parquet(traffic_path).to_pandas() if traffic_path.exists() else None
        manifest = read_json(spec.manifest) if Path(spec.manifest).exists() else {}
    except CflError as e:
        return MissingRun(spec, str(e))
    whatif, whatif_meta = load_whatif(Path(spec.eval_dir) / fn.WHATIF)
    return LoadedRun(spec, clustering, personalisation, server, manifest, whatif, whatif_meta, traffic)


def load_whatif(path: Path) -> tuple[pd.DataFrame | None, dict[str, Any] | None]:
    """A run's whatif.parquet and its metadata; (None, None) when absent, failed, empty or unreadable
    (the what-if heatmap then leaves the run out; the run's other results still count)."""
    if not path.exists():
        return None, None
    try:
        metadata = parquet_metadata(path)
        frame = read_parquet(path).to_pandas()
    except CflError:
        return None, None
    if metadata.get("status") == "failed" or frame.empty:
        return None, None
    return frame, metadata


def load_runs(specs: Sequence[RunSpec]) -> tuple[list[LoadedRun], list[MissingRun]]:
    loaded = [load_run(s) for s in specs]
    return [r for r in loaded if isinstance(r, LoadedRun)], [r for r in loaded if isinstance(r, MissingRun)]
