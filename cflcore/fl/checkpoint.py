"""Checkpoints of the whole engine state in ``<run_dir>/checkpoints/round_XXXXX.pt`` (docs/architecture.md §5 step 5).

Plain tensors / lists / dicts / numbers / strings only, so ``torch.load(weights_only=True)`` reads them.
Written atomically; the newest ``keep`` are kept. A checkpoint whose config hash differs, or that
cannot be read, is skipped with a warning.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import torch

from ..io import torch_save

FORMAT = "cflcore.checkpoint/1"
_NAME = re.compile(r"^round_(\d{5,})\.pt$")


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints"


def save_checkpoint(run_dir: str | Path, rnd: int, state: dict[str, Any], keep: int = 2) -> Path:
    folder = checkpoint_dir(run_dir)
    path = folder / f"round_{rnd:05d}.pt"
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


def load_latest(run_dir: str | Path, config_hash: str, log: logging.Logger) -> dict[str, Any] | None:
    """The newest readable checkpoint with ``config_hash``, or None."""
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
        return ck
    return None
