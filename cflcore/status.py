"""``cfl status``: where every planned run of a study stands, read from its results directory.

The planned runs are the config's own study expansion (cflcore.config.study_runs); every path comes from
cflcore.layout. A run's state, in the order decided:

* **done** / **failed**: its ``status.json`` says ``ok`` / ``failed`` (with the recorded reason), unless a live writer
  started after that file was written (a run trained again by hand over an old result: then it is running);
* **running**: its progress record (cflcore.fl.progress, ``progress.jsonl``) names a live writer. On this host the
  writer's pid must exist (``os.kill(pid, 0)``) and, where /proc can tell, be the same process that wrote the record
  (its start time in clock ticks since boot, so a pid reused by a later process does not count). A writer on another
  host (a SLURM node) cannot be asked: it counts as live while its record is fresh, i.e. its last line is younger than
  :data:`STALE_ROUNDS` rounds at its own pace and at least :data:`STALE_MIN_SECONDS`;
* **resumable**: checkpoints are present but nothing writes: a killed or stopped run, which the next ``snakemake``
  or ``cfl train`` resumes from its newest checkpoint;
* **not started**: none of the above (a run stopped before its first checkpoint starts again from round 0; the note
  says so, and names the last failed attempt where failures.jsonl has one).

Speed is the mean wall time of the current attempt's last rounds (cflcore.fl.progress.ETA_WINDOW); a running run's ETA
is its record's, less the time since that line (before its first round ends: the pace of runs like it, as below).
The study's ETA is the work left (every unfinished run's rounds to go times its speed, or for a run with no record
yet the median speed of recorded runs of the same dataset and algorithm, else of the same dataset, else of all)
divided by the number of runs running now: an estimate that holds while as many keep running side by side. Failed
runs are not counted in it (the next invocation retries them).
"""
from __future__ import annotations

import os
import socket
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import filenames as fn
from . import layout
from .errors import CflError
from .fl.progress import ETA_WINDOW, process_start, read_progress
from .io import read_json

STALE_ROUNDS = 3
STALE_MIN_SECONDS = 600.0
STATES = ("running", "resumable", "not started", "failed", "done")


@dataclass
class RunState:
    run: str
    state: str  # one of STATES
    done_rounds: int  # rounds finished (the record's last round + 1; all of them when done)
    rounds: int
    seconds_per_round: float | None = None
    eta: float | None = None  # seconds left for this run at its own pace (None: unknown)
    note: str = ""


@dataclass
class StudyState:
    results: str
    runs: list[RunState]
    eta: float | None  # the study's estimate (module docstring); None: unknown or nothing left
    counts: dict[str, int] = field(default_factory=dict)
    foreign: int = 0  # run folders under results/runs that this config does not plan


def writer_alive(start: Mapping[str, Any] | None, last_time: float | None, seconds_per_round: float | None,
                 now: float) -> bool:
    """Whether the process that wrote a progress record's ``start`` line is still at work (module docstring)."""
    if not start or not isinstance(start.get("pid"), int):
        return False
    if start.get("host") == socket.gethostname():
        try:
            os.kill(start["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, owned by another user
        recorded, current = start.get("proc_start"), process_start(start["pid"])
        return recorded is None or current is None or recorded == current
    window = max(STALE_MIN_SECONDS, STALE_ROUNDS * (seconds_per_round or 0.0))
    return now - float(last_time if last_time is not None else start.get("time", 0.0)) <= window


def run_state(results: str, run: str, rounds: int, now: float | None = None) -> RunState:
    """One run's :class:`RunState` from its folder under ``results`` (``rounds``: the config's rounds for it; a record
    written for another number of rounds says so in the note)."""
    record = read_progress(layout.progress_file(results, run))
    state, start = _run_state(results, run, rounds, time.time() if now is None else now, record), record["start"]
    if start is not None and start.get("rounds") != rounds and state.state != "not started":
        state.note = "; ".join(n for n in (state.note, f"recorded with {start.get('rounds')} rounds, this config plans "
                                                       f"{rounds}: another config's run?") if n)
    return state


def _run_state(results: str, run: str, rounds: int, now: float, record: dict[str, Any]) -> RunState:
    start, lines = record["start"], record["rounds"]
    attempt = [r for r in lines if start is not None and r["round"] >= int(start.get("round", 0))]
    recent = [float(r["seconds"]) for r in (attempt or lines)[-ETA_WINDOW:] if isinstance(r.get("seconds"), (int, float))]
    speed = statistics.fmean(recent) if recent else None
    last = lines[-1] if lines else None
    done = int(last["round"]) + 1 if last else 0
    live = writer_alive(start, last.get("time") if last else None, speed, now)
    status_path = Path(layout.run_file(results, run, fn.STATUS))
    status = _read_status(status_path)
    if status is not None and not (live and float(start.get("time", 0.0)) > status_path.stat().st_mtime):
        if status.get("status") == "ok":
            return RunState(run, "done", rounds, rounds, speed, 0.0)
        if status.get("status") == "failed":
            return RunState(run, "failed", done, rounds, speed, None, str(status.get("reason", "")))
    left = max(rounds - done, 0)
    if live:
        if attempt and isinstance(attempt[-1].get("eta"), (int, float)):
            eta = max(float(attempt[-1]["eta"]) - (now - float(attempt[-1].get("time", now))), 0.0)
        else:
            eta = left * speed if speed is not None else None
        where = "" if start.get("host") == socket.gethostname() else f"on {start.get('host')} (record fresh)"
        return RunState(run, "running", done, rounds, speed, eta, where)
    if any(Path(layout.checkpoints_dir(results, run)).glob(f"{fn.CHECKPOINT_PREFIX}*{fn.CHECKPOINT_SUFFIX}")):
        return RunState(run, "resumable", done, rounds, speed, left * speed if speed is not None else None,
                        "checkpoints, no live writer: the next snakemake or cfl train resumes it")
    notes = []
    if lines:
        notes.append(f"stopped after round {done - 1} before its first checkpoint: starts again from round 0")
    if (failure := _last_failure(results, run)) is not None:
        notes.append(f"last failed attempt: {failure}")
    return RunState(run, "not started", 0, rounds, speed, None, "; ".join(notes))


def _read_status(path: Path) -> dict[str, Any] | None:
    try:
        status = read_json(path)
    except CflError:
        return None
    return status if isinstance(status, dict) else None


def _last_failure(results: str, run: str) -> str | None:
    import json

    try:
        lines = [ln for ln in Path(layout.failures_file(results, run)).read_text().splitlines() if ln.strip()]
    except FileNotFoundError:
        return None
    try:
        return str(json.loads(lines[-1]).get("reason", "")) if lines else None
    except (json.JSONDecodeError, AttributeError):
        return None


def planned_runs(cfg: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(run id, rounds) of every run the config plans, in the study's order."""
    from .config import run_settings, study_runs

    return [(layout.run_id(**s, algorithm=a), int(run_settings(cfg, s["dataset"], a, s["split"])["training"]["rounds"]))
            for s, a in study_runs(cfg)]


def _existing_runs(results: str) -> set[str]:
    """Run ids with a folder under results/runs (any file in it)."""
    root = Path(layout.runs_root(results))
    pattern = "/".join("*" for _ in layout.RUN_PATTERN.split("/"))
    return {p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_dir()} if root.is_dir() else set()


def study_state(cfg: Mapping[str, Any], now: float | None = None) -> StudyState:
    """Every planned run's :class:`RunState` and the study's counts and ETA. A results directory that does not
    exist, or whose runs folder holds runs but none this config plans, is a one-line CflError."""
    now = time.time() if now is None else now
    results = str(cfg["results_dir"]).rstrip("/")
    if not Path(results).is_dir():
        raise CflError(f"results_dir: {results!r} does not exist, so nothing of this config has run there; pass the "
                       f"config the study ran with (--config) or its folder (--set results_dir=DIR)")
    planned = planned_runs(cfg)
    existing = _existing_runs(results)
    ids = {r for r, _ in planned}
    if existing and not existing & ids:
        raise CflError(f"results_dir: {results!r} holds {len(existing)} runs but none of the {len(planned)} this config "
                       f"plans (e.g. it has {sorted(existing)[0]!r}, the config plans {planned[0][0]!r}); pass the "
                       f"config the study ran with (--config) or its folder (--set results_dir=DIR)")
    runs = [run_state(results, r, n, now) for r, n in planned]
    known = [r for r in runs if r.seconds_per_round is not None]
    for r in runs:  # a run still in its first round: the pace of runs like it
        if r.state == "running" and r.eta is None and (speed := _guess_speed(r.run, known)) is not None:
            r.eta = (r.rounds - r.done_rounds) * speed
            r.note = "; ".join(n for n in (r.note, "ETA from similar runs until its first round ends") if n)
    counts = {s: sum(1 for r in runs if r.state == s) for s in STATES}
    return StudyState(results, runs, _study_eta(runs), counts, len(existing - ids))


def _guess_speed(run: str, known: list[RunState]) -> float | None:
    """Median seconds per round of the ``known`` runs of the same dataset and algorithm, else of the same dataset,
    else of all; None when none is known."""
    def key(run: str, depth: int) -> tuple[str, ...]:
        ref = layout.parse_run_id(run)
        return ((ref.dataset, str(ref.algorithm)), (ref.dataset,), ())[depth]

    for depth in range(3):
        alike = [k.seconds_per_round for k in known if key(k.run, depth) == key(run, depth)]
        if alike:
            return statistics.median(alike)
    return None


def _study_eta(runs: list[RunState]) -> float | None:
    """Work left over the runs running now (module docstring); None when a run's pace cannot be guessed."""
    known = [r for r in runs if r.seconds_per_round is not None]
    work = 0.0
    for r in runs:
        if r.state in ("done", "failed"):
            continue
        if r.state == "running" and r.eta is not None:
            work += r.eta
            continue
        speed = r.seconds_per_round if r.seconds_per_round is not None else _guess_speed(r.run, known)
        if speed is None:
            return None
        work += (r.rounds - r.done_rounds) * speed
    if work == 0.0:
        return 0.0
    return work / max(1, sum(1 for r in runs if r.state == "running"))


# ---------------------------------------------------------------------------------------------
# Rendering (rich)
# ---------------------------------------------------------------------------------------------
def duration(seconds: float | None) -> str:
    """``1 h 05 min``, ``4 min 10 s``, ``12 s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


_STYLE = {"running": "bold cyan", "resumable": "yellow", "not started": "dim", "failed": "bold red", "done": "green"}


def summary(study: StudyState) -> str:
    """The study-level line: counts and ETA."""
    parts = ", ".join(f"{study.counts[s]} {s}" for s in STATES if study.counts.get(s))
    running = study.counts.get("running", 0)
    left = sum(study.counts.get(s, 0) for s in ("running", "resumable", "not started"))
    if not left:
        eta = "nothing left to train"
    else:
        eta = f"study ETA {duration(study.eta)}" + (f" at {running} running side by side" if running else "")
    foreign = f"; {study.foreign} other run folders under {layout.runs_root(study.results)}" if study.foreign else ""
    return f"{len(study.runs)} runs: {parts} · {eta}{foreign}"


def table(study: StudyState):
    """The study as a rich renderable: one row per planned run, the summary line as its caption."""
    from rich.table import Table

    t = Table(title=f"cfl status · {study.results}", caption=summary(study), caption_justify="left")
    for name, justify in (("run", "left"), ("state", "left"), ("round", "right"), ("s/round", "right"),
                          ("ETA", "right"), ("note", "left")):
        t.add_column(name, justify=justify, no_wrap=name in ("run", "state", "round"), overflow="fold")
    for r in study.runs:
        speed = f"{r.seconds_per_round:.2f}" if r.seconds_per_round is not None else "-"
        eta = duration(r.eta) if r.state not in ("done", "failed") else ""
        t.add_row(r.run, f"[{_STYLE[r.state]}]{r.state}[/]", f"{r.done_rounds}/{r.rounds}", speed, eta, r.note)
    return t


def show(cfg: Mapping[str, Any], watch: bool = False, interval: float = 2.0) -> int:
    """Print the study's status once, or (``watch``) refresh it in place every ``interval`` seconds until Ctrl-C."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 200)  # piped into a file: one line per run, run ids unbroken
    if not watch:
        console.print(table(study_state(cfg)))
        return 0
    from rich.live import Live

    try:
        with Live(table(study_state(cfg)), console=console, auto_refresh=False, screen=False) as live:
            while True:
                time.sleep(interval)
                live.update(table(study_state(cfg)), refresh=True)
    except KeyboardInterrupt:
        return 0
