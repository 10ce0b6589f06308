"""A run's files as the engine writes them: ``models.pt`` (the final cluster models, and their loader for the explain
stage), the names of its tables (:data:`RUN_TABLES`), and the device a run's models go to (:func:`resolve_device`).

Format ``cflcore.models/1`` (``torch.load(weights_only=True)``)::

    {"format": "cflcore.models/1", "model": name, "model_kwargs": {in_channels, image_size, n_classes, ...},
     "round": last round, "cluster_models": {cluster id: state_dict}, "labels": LongTensor (n_clients,),
     "client_models": {client: {cluster: weight}}  # only clients whose personalised model is a mix
    }
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import CflError, ConfigError, DataError
from ..io import torch_save
from ..models import build_model

FORMAT = "cflcore.models/1"
RUN_TABLES = ("history.parquet", "server.parquet", "gram.parquet", "divergence.parquet")
"""The tables of a run's folder, beside ``models.pt`` and ``status.json`` (cflcore.layout.RUN_OUTPUTS names all six for
the rules; the train stage does not import the layout, so that editing the layout retrains nothing)."""


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda if available else cpu; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise CflError("device: 'cuda' requested but no CUDA GPU is available; use device: auto or cpu")
    if name not in ("cpu", "cuda"):
        raise ConfigError(f"device: {name!r} is not allowed; allowed: auto, cpu, cuda")
    return torch.device(name)


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
