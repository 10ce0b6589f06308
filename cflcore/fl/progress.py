"""A run's live per-round record (``<run>/progress.jsonl``) and the other watchers of a training run.

The engine (cflcore.fl.run.train_run) hands every finished round to its monitors: :class:`ProgressRecord` always,
:class:`TensorBoardMonitor` when the config's ``monitor.tensorboard`` is on, a progress bar when ``cfl train`` runs on
a terminal (cflcore.cli). A monitor only reads what the round already computed (its server row, the labels and the
split's ground truth); no monitor changes a Parquet output, draws a random number or evaluates anything again.

``progress.jsonl`` lives beside the run's ``checkpoints/`` and is not a declared output of rule ``train``, so it never
changes Snakemake's rerun decisions. One JSON object per line:

* ``{"event": "start", "round": first round of this attempt, "rounds": rounds in all, "pid", "host", "proc_start",
  "time"}``: a new attempt (a fresh start or a resume); ``pid``/``host``/``proc_start`` name the writing process
  (``proc_start``: its start time in clock ticks since boot from /proc on Linux, else null), so that
  ``cfl status`` can tell a live writer from a dead one (cflcore.status);
* ``{"event": "round", "round", "rounds", "loss" (mean training loss of the sampled clients), "local_f1" (mean local
  F1, null in rounds without evaluation), "clusters", "ari" (against the split's true clusters, null when the split
  has none), "temperature" (null where the method has none), "seconds" (wall time since the previous round of this
  attempt ended, checkpointing included), "eta" (seconds left: the rounds to go times the mean of this attempt's
  last :data:`ETA_WINDOW` rounds), "time"}``.

Writes: a start rewrites the file atomically (cflcore.io.atomic_path) with the round lines of rounds before the
attempt's first round (a resume from a checkpoint keeps exactly the rounds it resumes after, so every round is in the
record once) and the new start line; each round then appends one line with a single ``write`` on an ``O_APPEND``
descriptor. A reader ignores a last line without its newline (a writer killed mid-write).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections import deque
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Protocol

import numpy as np

from ..extras import check_tensorboard
from ..filenames import PROGRESS
from ..io import atomic_path

ETA_WINDOW = 5  # rounds whose mean duration predicts the rest
class Monitor(Protocol):
    """What the engine tells a watcher of a run: the attempt's first round, each finished round, the end."""

    def start(self, first_round: int, n_rounds: int) -> None: ...

    def round(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def round_record(row: Mapping[str, Any], n_rounds: int, labels: np.ndarray, truth: np.ndarray | None) -> dict[str, Any]:
    """The engine's view of a finished round for its monitors: the server row's scalars (cflcore.fl.run), the number
    of rounds and the ARI of the round's partition against ``truth`` (the split's true clusters, None if unknown)."""
    ari = None
    if truth is not None and len(truth) == len(labels):
        ari = _ari(np.asarray(truth, dtype=np.int64).tobytes(), np.asarray(labels, dtype=np.int64).tobytes())
    return {"round": int(row["round"]), "rounds": int(n_rounds), "loss": _num(row["mean_train_loss"]),
            "local_f1": _num(row["mean_local_f1"]), "clusters": int(row["n_clusters"]), "ari": ari,
            "temperature": _num(row["temperature"])}


@lru_cache(maxsize=8)
def _ari(truth: bytes, labels: bytes) -> float:
    """scikit-learn's ARI of two int64 label vectors given as bytes: a partition that a run keeps for many rounds is
    scored once (the call costs about a millisecond, mostly input checks)."""
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(np.frombuffer(truth, dtype=np.int64), np.frombuffer(labels, dtype=np.int64)))


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22; Linux), or None where
    it cannot be read. With the pid it names a process uniquely: a pid reused by a later process has a later start."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text()
    except OSError:
        return None
    try:  # the command name (field 2) is in parentheses and may hold spaces: split after its closing one
        return int(text[text.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


class ProgressRecord:
    """``<run_dir>/progress.jsonl`` (module docstring)."""

    def __init__(self, run_dir: str | os.PathLike, clock=time.time):
        self.path = Path(run_dir) / PROGRESS
        self.clock = clock
        self.recent: deque[float] = deque(maxlen=ETA_WINDOW)
        self.mark = 0.0

    def start(self, first_round: int, n_rounds: int) -> None:
        kept = [r for r in read_progress(self.path)["rounds"] if r["round"] < first_round]
        pid = os.getpid()
        start = {"event": "start", "round": int(first_round), "rounds": int(n_rounds), "pid": pid,
                 "host": socket.gethostname(), "proc_start": process_start(pid), "time": self.clock()}
        with atomic_path(self.path) as tmp:
            tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in [*kept, start]))
        self.mark = time.perf_counter()

    def round(self, record: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        seconds, self.mark = now - self.mark, now
        self.recent.append(seconds)
        left = int(record["rounds"]) - int(record["round"]) - 1
        line = {"event": "round", **record, "seconds": seconds, "eta": left * float(np.mean(self.recent)),
                "time": self.clock()}
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)

    def close(self) -> None:
        pass


def read_progress(path: str | os.PathLike) -> dict[str, Any]:
    """``{"start": the newest start line or None, "rounds": round lines in file order}`` of a progress record; an
    absent file gives no lines, and a line that is not complete JSON (a writer killed mid-line) is skipped."""
    start, rounds = None, []
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {"start": None, "rounds": []}
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("event") == "start":
            start = obj
        elif obj.get("event") == "round" and isinstance(obj.get("round"), int):
            rounds.append(obj)
    return {"start": start, "rounds": rounds}


# ---------------------------------------------------------------------------------------------
# TensorBoard (optional extra)
# ---------------------------------------------------------------------------------------------
TENSORBOARD_SCALARS = ("loss", "local_f1", "clusters", "ari", "temperature")


class TensorBoardMonitor:
    """A run's per-round scalars (:data:`TENSORBOARD_SCALARS`, tag ``run/<name>``, step = round) as TensorBoard event
    files in ``log_dir`` (one folder per run: cflcore.model_layout.tensorboard_dir). A fresh start empties the folder;
    a resume opens a new event file with ``purge_step`` = its first round, so TensorBoard's reader drops the
    previous attempt's events from that round on and shows every round once."""

    def __init__(self, log_dir: str | os.PathLike):
        check_tensorboard()
        self.log_dir = Path(log_dir)
        self.writer = None

    def start(self, first_round: int, n_rounds: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        if first_round == 0:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        self.writer = SummaryWriter(str(self.log_dir), purge_step=first_round or None)

    def round(self, record: Mapping[str, Any]) -> None:
        for name in TENSORBOARD_SCALARS:
            if record.get(name) is not None:
                self.writer.add_scalar(f"run/{name}", float(record[name]), int(record["round"]))
        self.writer.flush()  # live: tensorboard --logdir shows the round now, not after flush_secs

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

