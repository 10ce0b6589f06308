"""Shared timing harness of the benchmark scripts: benchmarks a skeptic trusts.

* :func:`time_side_by_side` times named callables in one process: a warm-up pass (not recorded), then
  ``repeats`` passes, each running every variant once in an order rotated by one per pass (so no variant
  always runs first, right after another one's garbage or in the cache state it left).
* :class:`Recorder` prints min / median / max per variant and appends every raw timing to a CSV, with the
  CPU model (``lscpu`` "Model name"), torch version and torch's *actual* thread count at measurement time.
* :func:`add_common_args` / :func:`setup` give every script ``--quick``, ``--repeats``, ``--threads`` (really
  applied with ``torch.set_num_threads`` and checked, since cflcore's ``build_engine`` sets threads too) and
  ``--csv`` (default ``results/benchmarks/<name>.csv``; results/ is git-ignored), and seed torch, numpy and
  ``random``.
* :func:`assert_close` raises :class:`EquivalenceError` naming the variant, the quantity, the tolerance
  and the worst element when a fast path and its reference disagree.
"""
from __future__ import annotations

import argparse
import csv
import functools
import gc
import math
import os
import platform
import random
import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
CSV_COLUMNS = ("run_id", "benchmark", "case", "variant", "repeat", "seconds", "extrapolated",
               "cpu", "torch", "threads", "omp_num_threads", "python", "timestamp")


class EquivalenceError(AssertionError):
    """A benchmark variant computed something different from its reference."""


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """``lscpu``'s "Model name" (falls back to /proc/cpuinfo, then platform.processor())."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, check=False).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, flags=re.MULTILINE)
        if m:
            return m.group(1).strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), flags=re.MULTILINE)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def describe_machine() -> str:
    return (f"cpu {cpu_model()!r} ({os.cpu_count()} logical), torch {torch.__version__}, "
            f"torch threads {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------
def add_common_args(ap: argparse.ArgumentParser, default_repeats: int = 3, quick_repeats: int = 1) -> None:
    ap.add_argument("--quick", action="store_true", help="a small workload for a smoke run (<= 20 s)")
    ap.add_argument("--repeats", type=int, default=None,
                    help=f"timed passes per variant after one warm-up pass (default {default_repeats}; quick {quick_repeats})")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (torch.set_num_threads; recorded)")
    ap.add_argument("--csv", type=Path, default=None,
                    help="CSV the raw timings are appended to (default results/benchmarks/<benchmark>.csv)")
    ap.add_argument("--seed", type=int, default=0, help="seed of every generator the benchmark uses")
    ap.set_defaults(_default_repeats=default_repeats, _quick_repeats=quick_repeats)


def set_threads(n: int) -> None:
    """Set torch's intra-op threads and check that it took (build_engine resets them from its settings)."""
    torch.set_num_threads(int(n))
    check_threads(n)


def check_threads(n: int) -> None:
    if torch.get_num_threads() != int(n):
        raise RuntimeError(f"--threads {n} requested but torch runs {torch.get_num_threads()} threads "
                           f"(something reset torch.set_num_threads)")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup(args: argparse.Namespace, benchmark: str) -> "Recorder":
    """Apply ``--threads`` and ``--seed``, resolve ``--repeats`` and ``--csv``, print the machine line."""
    if args.repeats is None:
        args.repeats = args._quick_repeats if args.quick else args._default_repeats
    if args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")
    set_threads(args.threads)
    seed_everything(args.seed)
    path = args.csv or ROOT / "results" / "benchmarks" / f"{benchmark}.csv"
    rec = Recorder(benchmark, Path(path))
    print(f"{benchmark}: {describe_machine()}; repeats {args.repeats} (+1 warm-up); raw timings -> {rec.path}")
    return rec


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------
@dataclass
class Result:
    """Timings (seconds) of one variant, and what its last call returned."""

    name: str
    seconds: list[float] = field(default_factory=list)
    output: Any = None
    extrapolated: bool = False

    @property
    def min(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def max(self) -> float:
        return max(self.seconds)


def time_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def time_side_by_side(variants: Mapping[str, Callable[[], Any]], repeats: int,
                      warmup: bool | Mapping[str, Callable[[], Any]] = True, keep_output: bool = True,
                      collect: bool = True) -> dict[str, Result]:
    """Time every variant ``repeats`` times in rotated order (pass r starts with variant r mod k), after
    one untimed warm-up pass: the variants themselves (``warmup=True``), or given stand-ins (a mapping,
    e.g. the same code on a small slice when one call takes seconds). ``collect``: run the garbage
    collector before every call (outside the timing). The output of each variant's last timed call is kept
    (``keep_output``), e.g. for an equivalence check."""
    names = list(variants)
    results = {n: Result(n) for n in names}
    if warmup:
        warm = variants if warmup is True else warmup
        for n in names:
            if n in warm:
                warm[n]()
    for r in range(repeats):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            if collect:
                gc.collect()
            results[n].output = None  # let the previous output go before the next call allocates
            t, out = time_call(variants[n])
            results[n].seconds.append(t)
            if keep_output:
                results[n].output = out
            del out
    return results


# ---------------------------------------------------------------------------------------------
# Recording and printing
# ---------------------------------------------------------------------------------------------
class Recorder:
    """Appends raw timings to ``path`` (one row per timed call) and prints summary tables."""

    def __init__(self, benchmark: str, path: Path):
        self.benchmark = benchmark
        self.path = path
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"

    def record(self, case: str, results: Mapping[str, Result] | Sequence[Result]) -> None:
        rows = []
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        values = results.values() if isinstance(results, Mapping) else results
        for res in values:
            for i, s in enumerate(res.seconds, start=1):
                rows.append({"run_id": self.run_id, "benchmark": self.benchmark, "case": case, "variant": res.name,
                             "repeat": i, "seconds": f"{s:.6g}", "extrapolated": int(res.extrapolated),
                             "cpu": cpu_model(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                             "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
                             "python": platform.python_version(), "timestamp": stamp})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        if not new:
            with self.path.open(newline="") as fh:
                header = next(csv.reader(fh), [])
            if tuple(header) != CSV_COLUMNS:
                raise RuntimeError(f"{self.path} has columns {header}, expected {list(CSV_COLUMNS)}; "
                                   f"move it away or pass --csv")
        with self.path.open("a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
            if new:
                w.writeheader()
            w.writerows(rows)

    def table(self, title: str, results: Mapping[str, Result], baseline: str | None = None,
              case: str | None = None, notes: Mapping[str, str] | None = None, unit: str = "s",
              baseline_faster: bool = False) -> None:
        """Print min / median / max per variant and a ratio of medians against ``baseline``: the speed-up of
        each variant over the baseline (baseline / variant), or with ``baseline_faster`` how many times
        faster the baseline is than each variant (variant / baseline). Records the raw timings under ``case``."""
        if case is not None:
            self.record(case, results)
        print(title)
        width = max(len(n) for n in results) + 2
        label = f"{baseline} faster by" if baseline_faster else f"speed-up vs {baseline}"
        rw = max(12, len(label) + 2)
        head = f"  {'variant':<{width}}{'min':>10}{'median':>10}{'max':>10}{'n':>4}"
        if baseline:
            head += f"{label:>{rw}}"
        print(head)
        for name, res in results.items():
            line = (f"  {name:<{width}}{fmt(res.min, unit):>10}{fmt(res.median, unit):>10}{fmt(res.max, unit):>10}"
                    f"{len(res.seconds):>4}")
            if baseline:
                r = res.median / results[baseline].median if baseline_faster else results[baseline].median / res.median
                line += f"{r:>{rw - 1},.2f}x"
            if res.extrapolated:
                line += "  EXTRAPOLATED"
            if notes and name in notes:
                line += f"  {notes[name]}"
            print(line)


def fmt(seconds: float, unit: str = "s") -> str:
    if unit == "ms":
        return f"{seconds * 1e3:.2f}ms"
    if seconds >= 100:
        return f"{seconds:.0f}s"
    if seconds >= 1:
        return f"{seconds:.2f}s"
    return f"{seconds * 1e3:.1f}ms"


# ---------------------------------------------------------------------------------------------
# Equivalence
# ---------------------------------------------------------------------------------------------
def _numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        x = x.double() if x.is_floating_point() else x
        return x.numpy()
    return np.asarray(x, dtype=np.float64)


def assert_close(name: str, actual: Any, expected: Any, rtol: float = 0.0, atol: float = 0.0,
                 what: str = "result") -> float:
    """Raise :class:`EquivalenceError` unless ``|actual - expected| <= atol + rtol * |expected|`` everywhere
    (NaN never passes); return the largest absolute difference."""
    a, e = _numpy(actual), _numpy(expected)
    if a.shape != e.shape:
        raise EquivalenceError(f"{name}: {what} has shape {a.shape}, the reference {e.shape}")
    diff = np.abs(a - e)
    bound = atol + rtol * np.abs(e)
    bad = ~(diff <= bound)  # NaN compares False: counted as bad
    if bad.any():
        idx = np.unravel_index(int(np.argmax(np.where(bad, np.nan_to_num(diff, nan=np.inf), -1.0))), a.shape) if a.ndim else ()
        raise EquivalenceError(
            f"{name}: {what} differs from the reference beyond atol={atol:g}, rtol={rtol:g} at {int(bad.sum())} of "
            f"{a.size} entries; worst at index {tuple(int(i) for i in idx)}: {a[idx]!r} vs {e[idx]!r} "
            f"(|diff| {float(np.nanmax(np.nan_to_num(diff, nan=np.inf))):.3g})")
    return float(diff.max()) if diff.size else 0.0


def log_log_crossing(xs: Sequence[float], a: Sequence[float], b: Sequence[float]) -> float | None:
    """The x where curve ``b`` first rises above curve ``a``, linearly interpolated between neighbouring
    points in log-log space; None when it never does within ``xs``."""
    d = [math.log(bi) - math.log(ai) for ai, bi in zip(a, b)]
    for i in range(1, len(xs)):
        if d[i - 1] < 0 <= d[i]:
            lx0, lx1 = math.log(xs[i - 1]), math.log(xs[i])
            return math.exp(lx0 + (lx1 - lx0) * (-d[i - 1]) / (d[i] - d[i - 1]))
    if d and d[0] >= 0:
        return float(xs[0])
    return None


def build_engine(fed: Any, settings: Mapping[str, Any], seed: int, log: Any) -> tuple[Any, Any]:
    """cflcore's engine and its round-0 state, built as the train stage builds it: the run's strategy from its
    settings (cflcore.stages.train), handed to the engine."""
    from cflcore.fl import run as engine
    from cflcore.strategies import build_strategy

    return engine.build_engine(fed, settings, seed, log, strategy=build_strategy(settings["algorithm"]))
