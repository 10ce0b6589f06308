"""A run's files as the engine writes them: ``models.pt`` (the final cluster models, and their loader for the explain
stage) and its tables (:data:`cflcore.filenames.RUN_TABLES`, :func:`write_outputs`). The device a run's models go to: cflcore/fl/device.py.

Format ``cflcore.models/1`` (``torch.load(weights_only=True)``)::

    {"format": "cflcore.models/1", "model": name, "model_kwargs": {in_channels, image_size, n_classes, ...},
     "round": last round, "cluster_models": {cluster id: state_dict}, "labels": LongTensor (n_clients,),
     "client_models": {client: {cluster: weight}}  # only clients whose personalised model is a mix
    }
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pyarrow as pa
import torch
from torch import nn

from .. import filenames as fn
from ..errors import DataError
from ..io import canonical_json, torch_save, write_parquet
from ..models import build_model

if TYPE_CHECKING:
    from .state import EngineState

FORMAT = "cflcore.models/1"


@dataclass
class RunModels:
    models: dict[int, nn.Module]  # cluster id -> network in eval mode
    labels: np.ndarray  # (n_clients,) client -> cluster
    model_name: str
    round: int
    client_models: dict[int, dict[int, float]] = field(default_factory=dict)
    model_kwargs: dict[str, Any] = field(default_factory=dict)


def save_run_models(path: str | Path, payload: dict[str, Any]) -> None:
    torch_save({"format": FORMAT, **payload}, path)


def load_run_models(path: str | Path, device: str | torch.device = "cpu") -> RunModels:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        blob = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001
        raise DataError(f"{path}: corrupt models file ({type(e).__name__}); delete it and rerun") from None
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise DataError(f"{path}: not a {FORMAT} file")
    kwargs = dict(blob["model_kwargs"])
    models = {}
    for cid, sd in blob["cluster_models"].items():
        net = build_model(blob["model"], **kwargs)
        dtype = next(iter(sd.values())).dtype if sd else torch.float32
        net = net.to(device=device, dtype=dtype if dtype.is_floating_point else torch.float32)
        net.load_state_dict(sd)
        models[int(cid)] = net.eval()
    return RunModels(models, blob["labels"].cpu().numpy().astype(np.int64), blob["model"], int(blob["round"]),
                     {int(c): {int(k): float(w) for k, w in m.items()} for c, m in blob.get("client_models", {}).items()},
                     kwargs)


# ----- the run's tables (filenames.RUN_TABLES) and models.pt, as the engine writes them at the end ------------------------------
HISTORY_SCHEMA = pa.schema([
    ("round", pa.int32()), ("client", pa.int32()), ("cluster", pa.int64()), ("sampled", pa.bool_()),
    ("train_loss", pa.float64()), ("local_loss", pa.float64()), ("local_acc", pa.float64()),
    ("local_f1", pa.float64()), ("local_bacc", pa.float64()), ("orch_loss", pa.float64()),
    ("orch_acc", pa.float64()), ("orch_f1", pa.float64()), ("orch_bacc", pa.float64()), ("model_key", pa.string()),
    # the strategy's global model (Strategy.global_model; 002 Fig. 6) on the client's local test set and on the
    # orchestrator set; null for methods without one and in rounds without evaluation
    ("global_loss", pa.float64()), ("global_acc", pa.float64()), ("global_f1", pa.float64()),
    ("global_bacc", pa.float64()), ("global_orch_acc", pa.float64()), ("global_orch_f1", pa.float64()),
])
GLOBAL_COLUMNS = ("global_loss", "global_acc", "global_f1", "global_bacc", "global_orch_acc", "global_orch_f1")
SERVER_COLUMNS = ["round", "n_clusters", "clustered_now", "temperature", "mean_train_loss", "mean_local_f1", "seconds"]


MOVING_COLUMNS = [("present", pa.bool_()), ("steps", pa.int32())]
"""history.parquet's columns where ``engine.availability`` or ``engine.stragglers`` is on (cflcore.fl.participation):
whether the client was available that round, and the local steps it made (null where it did not train). A run without
them writes the columns of earlier versions, byte for byte."""
TRAFFIC_SCHEMA = pa.schema([("round", pa.int32()), ("bytes_down", pa.int64()), ("bytes_up", pa.int64())])
"""traffic.parquet: per round, the bytes the method sent to the sampled clients and got back (Strategy.traffic)."""


def history_table(rows: list[dict[str, Any]]) -> pa.Table:
    schema = HISTORY_SCHEMA
    if rows and "present" in rows[0]:
        schema = pa.schema([*HISTORY_SCHEMA, *(pa.field(n, t) for n, t in MOVING_COLUMNS)])
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)


def traffic_table(rows: list[dict[str, Any]]) -> pa.Table:
    """traffic.parquet from the server rows (:data:`TRAFFIC_SCHEMA`)."""
    return pa.Table.from_pylist([{"round": r["round"], **r["traffic"]} for r in rows], schema=TRAFFIC_SCHEMA)


def _diag_column(values: list[Any]) -> pa.Array:
    """Scalars stay typed (bool / int / float); anything else becomes strings (canonical JSON)."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        if all(isinstance(v, int) for v in present):
            return pa.array(values, type=pa.int64())
        return pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    return pa.array([None if v is None else (v if isinstance(v, str) else canonical_json(v)) for v in values], type=pa.string())


def server_table(rows: list[dict[str, Any]]) -> pa.Table:
    """One row per round; one extra column per strategy diagnostic (union over rounds, null where absent).
    A diagnostic whose name clashes with an engine column is stored as ``strategy_<name>``."""
    cols: dict[str, pa.Array] = {
        "round": pa.array([r["round"] for r in rows], type=pa.int32()),
        "n_clusters": pa.array([r["n_clusters"] for r in rows], type=pa.int32()),
        "clustered_now": pa.array([r["clustered_now"] for r in rows], type=pa.bool_()),
        "temperature": pa.array([r["temperature"] for r in rows], type=pa.float64()),
        "mean_train_loss": pa.array([r["mean_train_loss"] for r in rows], type=pa.float64()),
        "mean_local_f1": pa.array([r["mean_local_f1"] for r in rows], type=pa.float64()),
        "seconds": pa.array([r["seconds"] for r in rows], type=pa.float64()),
    }
    keys = sorted({k for r in rows for k in r["diagnostics"]})
    for k in keys:
        name = f"strategy_{k}" if k in cols else k
        cols[name] = _diag_column([r["diagnostics"].get(k) for r in rows])
    return pa.table(cols)


def matrix_table(rows: list[list[float]]) -> pa.Table:
    a = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    return pa.table({"round": pa.array(a[:, 0].astype(np.int32)), "i": pa.array(a[:, 1].astype(np.int32)),
                     "j": pa.array(a[:, 2].astype(np.int32)), "value": pa.array(a[:, 3])})


def write_outputs(engine: Any, state: EngineState, out_dir: Path, last_round: int) -> None:
    """The run's tables and ``models.pt`` from the engine's final state (``engine``: cflcore.fl.engine.Engine, which
    imports this module, so it is not named here)."""
    write_parquet(history_table(state.history), out_dir / fn.HISTORY)
    write_parquet(server_table(state.server_rows), out_dir / fn.SERVER)
    write_parquet(matrix_table(state.gram_rows), out_dir / fn.GRAM)
    write_parquet(traffic_table(state.server_rows), out_dir / fn.TRAFFIC)
    if state.divergence_rows:
        write_parquet(matrix_table(state.divergence_rows), out_dir / fn.DIVERGENCE)
    specs = engine.strategy.personalised(state.models)
    cluster_models = {}
    for c in state.models:
        members = np.flatnonzero(state.labels == c)
        full = engine.full_vector(state, c, None, local=engine.mean_local(state, members))
        cluster_models[int(c)] = engine.model_layout.state_dict(engine.template, full)
    client_models = {int(i): {int(k): float(w) for k, w in s.items()} for i, s in specs.items() if isinstance(s, Mapping)}
    save_run_models(out_dir / fn.MODELS, {
        "model": engine.model_name, "model_kwargs": engine.model_kwargs, "round": int(last_round),
        "cluster_models": cluster_models, "labels": torch.as_tensor(state.labels, dtype=torch.long),
        "client_models": client_models})
