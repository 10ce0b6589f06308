"""Checkpoints of the whole engine state in ``<run_dir>/checkpoints/round_XXXXX.pt`` (docs/architecture.md §5 step 5).

Plain tensors / lists / dicts / numbers / strings only, so ``torch.load(weights_only=True)`` reads them.
Written atomically; the newest ``keep`` are kept. A checkpoint whose config hash differs, or that
cannot be read, is skipped with a warning. Each records the device kind it was written on
(cflcore.fl.device.device_kind: ``cpu`` or the GPU's model); a job on another kind never resumes from it (the bytes
of the two kinds differ, and a run must not mix them): it says so in one warning line and the run restarts from
round 0.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import torch

from .. import filenames as fn
from ..io import stable_hash, torch_save
from .optim import state_from_plain, state_to_plain
from .state import EngineState

if TYPE_CHECKING:
    from ..data.federated import FederatedData
    from ..settings import RunSettings
    from ..strategies.base import Strategy

FORMAT = "cflcore.checkpoint/1"
_NAME = re.compile(rf"^{re.escape(fn.CHECKPOINT_PREFIX)}(\d{{5,}}){re.escape(fn.CHECKPOINT_SUFFIX)}$")


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / fn.CHECKPOINTS


def save_checkpoint(run_dir: str | Path, rnd: int, state: dict[str, Any], keep: int = 2) -> Path:
    folder = checkpoint_dir(run_dir)
    path = folder / f"{fn.CHECKPOINT_PREFIX}{rnd:05d}{fn.CHECKPOINT_SUFFIX}"
    torch_save({"format": FORMAT, "round": int(rnd), **state}, path)
    for old in _sorted(folder)[keep:]:
        old.unlink(missing_ok=True)
    return path


def _sorted(folder: Path) -> list[Path]:
    """Checkpoint files, newest round first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def load_latest(run_dir: str | Path, config_hash: str, log: logging.Logger, device_kind: str | None = None) -> dict[str, Any] | None:
    """The newest readable checkpoint with ``config_hash``, or None. With ``device_kind``, one written on another
    kind of device (or before kinds were recorded) is not resumed: one warning line, and None (the run restarts)."""
    for path in _sorted(checkpoint_dir(run_dir)):
        try:
            ck = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - any unreadable file is skipped, never fatal
            log.warning("skipping corrupt checkpoint %s (%s)", path, type(e).__name__)
            continue
        if not isinstance(ck, dict) or ck.get("format") != FORMAT:
            log.warning("skipping checkpoint %s: unknown format", path)
            continue
        if ck.get("config_hash") != config_hash:
            log.warning("skipping checkpoint %s: config hash %s differs from this run's %s", path, ck.get("config_hash"), config_hash)
            continue
        if device_kind is not None and ck.get("device_kind") != device_kind:
            log.warning("not resuming from checkpoint %s: written on %s, this job runs on %s; restarting the run from "
                        "round 0 (results of two device kinds are never mixed)", path.name,
                        ck.get("device_kind", "an unrecorded device"), device_kind)
            return None
        return ck
    return None


# ----- (de)serialisation of the engine's state: plain tensors / lists / dicts only ------------------------------
def plain(v: Any) -> Any:
    """numpy scalars -> Python scalars (checkpoints hold plain values only)."""
    return v.item() if isinstance(v, np.generic) else v


def state_to_checkpoint(state: EngineState, strategy: Strategy, config_hash: str,
                        device_kind: str | None = None) -> dict[str, Any]:
    cpu = lambda d: {int(k): v.detach().cpu().clone() for k, v in d.items()}  # noqa: E731
    return {
        "config_hash": config_hash,
        "device_kind": device_kind,
        "next_round": state.next_round,
        "models": cpu(state.models), "extra": cpu(state.extra),
        "server_state": {int(c): {k: v.detach().cpu().clone() for k, v in s.items()} for c, s in state.server_state.items()},
        "client_local": cpu(state.client_local),
        "labels": torch.as_tensor(state.labels, dtype=torch.long),
        "strategy": strategy.state_dict(),
        "history": [{k: plain(v) for k, v in r.items()} for r in state.history],
        "server_rows": [{k: plain(v) for k, v in r.items()} for r in state.server_rows],
        "divergence_rows": torch.tensor(state.divergence_rows, dtype=torch.float64).reshape(-1, 4),
        "gram_rows": torch.tensor(state.gram_rows, dtype=torch.float64).reshape(-1, 4),
        "personal": cpu(state.personal),
        "client_optimizer": {int(c): state_to_plain(s) for c, s in state.client_optimizer.items()},
    }


def state_from_checkpoint(ck: Mapping[str, Any], device: torch.device, dtype: torch.dtype) -> EngineState:
    dev = lambda d: {int(k): v.to(device=device, dtype=dtype) for k, v in d.items()}  # noqa: E731
    return EngineState(
        next_round=int(ck["next_round"]), models=dev(ck["models"]), extra=dev(ck["extra"]),
        server_state={int(c): {k: v.to(device=device, dtype=dtype) for k, v in s.items()} for c, s in ck["server_state"].items()},
        client_local=dev(ck["client_local"]), labels=ck["labels"].numpy().astype(np.int64),
        history=[dict(r) for r in ck["history"]], server_rows=[dict(r) for r in ck["server_rows"]],
        divergence_rows=ck["divergence_rows"].tolist(), gram_rows=ck["gram_rows"].tolist(), personal=dev(ck["personal"]),
        client_optimizer={int(c): state_from_plain(s, device, dtype) for c, s in ck.get("client_optimizer", {}).items()})


def config_hash(settings: RunSettings, seed: int, fed: FederatedData) -> str:
    """stable_hash of the run settings (the plain dict the run was given, :meth:`RunSettings.as_dict`), the seed and
    the split manifest's hash (checkpoint validity)."""
    return stable_hash({"settings": settings.as_dict(), "seed": int(seed), "split": stable_hash(fed.manifest),
                        "n_clients": fed.n_clients, "shape": list(fed.shape), "n_classes": fed.n_classes})
