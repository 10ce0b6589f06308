"""Logging set-up shared by the Snakemake scripts and the CLI: one log file per job, one-line errors."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Callable, TypeVar

from .errors import CflError

T = TypeVar("T")


def setup_logging(log_path: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="a"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=handlers, force=True)
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    return logging.getLogger("cflcore")


def run_logged(log_path: str | Path | None, fn: Callable[[], T]) -> T:
    """Run ``fn`` with logging to ``log_path``; a CflError becomes one ERROR line and exit status 1."""
    log = setup_logging(log_path)
    try:
        return fn()
    except CflError as e:
        log.error("%s", e)
        sys.exit(1)
