"""Where the study's time went: a per-rule table of the Snakemake benchmark files and the critical path.

Every rule writes ``results/benchmarks/<rule>/<wildcards>.tsv`` (Snakemake's ``benchmark:``; columns ``s``,
``h:m:s``, ``max_rss``, ``max_vms``, ``max_uss``, ``max_pss``, ``io_in``, ``io_out``, ``mean_load``,
``cpu_time``). The report job (report/build.py, last step) writes into ``results/report/tables/``:

* ``benchmarks_by_rule.csv`` — per rule: jobs, total / mean / max wall seconds, total / mean CPU seconds, the
  largest peak RSS (MB), and how many of the rule's jobs and seconds lie on the critical path; a last row
  ``all jobs``;
* ``critical_path.csv`` — the longest chain of jobs through the DAG by wall seconds (data → split → train →
  evaluate / explain → report), one row per job with its start and finish on the chain;
* ``benchmark_summary.csv`` — the critical path against the sum of all jobs' wall seconds and the span of
  the benchmark records (first job start to last job end, from the files' modification times).

Snakemake writes a job's benchmark file after the job, so the report cannot read its own: its row is
measured by the report process itself (:func:`current_process_record`: wall time since the process started,
CPU time of it and its finished children, their peak RSS) when the tables are written, its last step.

The dependencies between jobs are :func:`workflow_upstream` (rule -> the rules whose outputs it reads, from the
stages' records in cflcore/pipeline.py) with the
wildcard layout of the rules: a job depends on the upstream job whose wildcards path is a prefix of its own
(``train`` ``mnist5k/nonoverlap-balanced/n15/s0/bnc`` on ``split`` ``mnist5k/nonoverlap-balanced/n15/s0``
on ``prepare_dataset`` ``mnist5k``); a rule in :func:`aggregating_rules` depends on every job of its
upstream rules. tests/workflow/test_pipeline.py checks that the records name every rule of rules/*.smk.

Snakemake samples a job's CPU time and memory every 0.5 s (every 30 s after the first 15 s), so ``cpu_time``
misses the last interval of a job and a job shorter than one interval may have no sample (``NA``, empty
here); the wall seconds ``s`` are exact. Standard library only (psutil if present, for the report's start).
"""
from __future__ import annotations

import csv
import io
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .. import layout, pipeline
from ..io import atomic_path
from . import catalogue

def report_parts() -> dict[str, str]:
    """The report's part rules -> what each reads (catalogue.Part.reads), for :mod:`cflcore.pipeline`."""
    return {part.rule: part.reads for part in catalogue.PARTS}


def workflow_upstream() -> dict[str, tuple[str, ...]]:
    """rule -> the rules whose outputs its jobs read (transitive inputs, e.g. explain -> split, are implied), from
    the stages' records (cflcore.pipeline.rule_upstream)."""
    return pipeline.rule_upstream(report_parts())


def aggregating_rules() -> frozenset[str]:
    """The rules whose one job reads every job of its upstream rules (the report's parts and index)."""
    return pipeline.aggregating_rules(report_parts())
"""Rules whose one job reads every job of its upstream rules."""
ALL_JOBS = "all jobs"
REPORT_JOB = ("report", "report")
"""(rule, wildcards path) of the job that writes these tables: measured by itself, not read from a file."""

BY_RULE_COLUMNS = ["rule", "jobs", "wall_s_total", "wall_s_mean", "wall_s_max", "cpu_s_total", "cpu_s_mean",
                   "max_rss_mb", "critical_path_jobs", "critical_path_s"]
PATH_COLUMNS = ["step", "rule", "job", "wall_s", "cpu_s", "max_rss_mb", "start_s", "finish_s"]
SUMMARY_COLUMNS = ["quantity", "seconds", "note"]


@dataclass(frozen=True)
class BenchmarkJob:
    """One job's benchmark record: ``job`` is its wildcards path (``mnist5k/.../s0/bnc``; the rule name for a
    rule without wildcards); ``end`` the record's modification time (≈ the job's end, epoch seconds)."""

    rule: str
    job: str
    wall_s: float
    cpu_s: float | None
    max_rss_mb: float | None
    end: float | None = None

    @property
    def start(self) -> float | None:
        return None if self.end is None else self.end - self.wall_s


def _number(text: str | None) -> float | None:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def read_benchmark(path: str | os.PathLike, rule: str, job: str) -> BenchmarkJob | None:
    """The record of one benchmark TSV (the mean over ``benchmark`` repeats, the largest RSS); None if the file
    is missing, empty or has no wall time."""
    path = Path(path)
    try:
        text = path.read_text()
        end = path.stat().st_mtime
    except OSError:
        return None
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    walls = [w for w in (_number(r.get("s")) for r in rows) if w is not None]
    if not walls:
        return None
    cpus = [c for c in (_number(r.get("cpu_time")) for r in rows) if c is not None]
    rss = [m for m in (_number(r.get("max_rss")) for r in rows) if m is not None]
    return BenchmarkJob(rule, job, sum(walls) / len(walls), sum(cpus) / len(cpus) if cpus else None,
                        max(rss) if rss else None, end)


def _process_start() -> float | None:
    """Epoch seconds at which this process started (psutil, else /proc), or None."""
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - psutil missing or no /proc: no start time, no span for this job
        pass
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def current_process_record(rule: str, job: str) -> BenchmarkJob | None:
    """This process as a benchmark record: wall seconds since it started, CPU seconds of it and of its
    finished children (the report's second process), and their peak RSS summed (an upper bound of the
    peak of the sum, which Snakemake's ``max_rss`` samples)."""
    import resource

    start = _process_start()
    if start is None:
        return None
    now = time.time()
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return BenchmarkJob(rule, job, now - start, cpu, (me.ru_maxrss + kids.ru_maxrss) / 1024, now)


def benchmark_path(root: str | os.PathLike, rule: str, job: str) -> Path:
    """The workflow's layout (cflcore.layout): ``<root>/<rule>/<job>.tsv`` (root = ``results/benchmarks``)."""
    return Path(layout.benchmark_in(str(root), rule, job))


def read_benchmarks(root: str | os.PathLike, jobs: Mapping[str, Iterable[str]]) -> tuple[list[BenchmarkJob], list[str]]:
    """Records of ``jobs`` (rule -> the wildcards paths of its jobs) under ``root``, and the files that gave none."""
    records, missing = [], []
    for rule, keys in jobs.items():
        for key in keys:
            path = benchmark_path(root, rule, key)
            record = read_benchmark(path, rule, key)
            if record is None:
                missing.append(str(path))
            else:
                records.append(record)
    return records, missing


def discover_jobs(root: str | os.PathLike) -> dict[str, list[str]]:
    """rule -> the jobs that have a benchmark file under ``root``: for the command line, which has no DAG
    (files of jobs that are no longer in the grid are included too)."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {d.name: sorted(str(p.relative_to(d).with_suffix("")) for p in d.rglob("*.tsv"))
            for d in sorted(root.iterdir()) if d.is_dir()}


def rule_order(rules: Iterable[str], upstream: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """``rules`` upstream first (depth in ``upstream``, by default :func:`workflow_upstream`; unknown rules first),
    then by name."""
    upstream = workflow_upstream() if upstream is None else upstream
    depth: dict[str, int] = {}

    def level(rule: str, seen: tuple[str, ...] = ()) -> int:
        if rule not in depth:
            ups = [u for u in upstream.get(rule, ()) if u not in seen]
            depth[rule] = 1 + max((level(u, (*seen, rule)) for u in ups), default=-1)
        return depth[rule]

    return sorted(set(rules), key=lambda r: (level(r), r))


def _is_prefix(parent: str, child: str) -> bool:
    return child == parent or child.startswith(parent + "/")


def recorded_upstream(rule: str, recorded: Iterable[str], upstream: Mapping[str, Sequence[str]] | None = None,
                      aggregating: Iterable[str] | None = None, seen: tuple[str, ...] = ()) -> list[tuple[str, bool]]:
    """The nearest upstream rules of ``rule`` with a record: a direct upstream rule without any is looked
    through to its own upstream rules. Each with whether an aggregating rule was looked through (its jobs
    are then all parents, as for an aggregating ``rule``)."""
    upstream = workflow_upstream() if upstream is None else upstream
    recorded, aggregating = set(recorded), frozenset(aggregating_rules() if aggregating is None else aggregating)
    out: list[tuple[str, bool]] = []
    for up in upstream.get(rule, ()):
        if up in seen:
            continue
        if up in recorded:
            out.append((up, False))
        else:
            out += [(r, through or up in aggregating)
                    for r, through in recorded_upstream(up, recorded, upstream, aggregating, (*seen, rule))]
    return out


def critical_path(jobs: Sequence[BenchmarkJob], upstream: Mapping[str, Sequence[str]] | None = None,
                  aggregating: Iterable[str] | None = None) -> list[BenchmarkJob]:
    """The chain of jobs, upstream first, with the largest sum of wall seconds: each job's parents are the jobs
    of its upstream rules whose wildcards path is a prefix of its own (every job of them for an aggregating
    rule). Jobs without a record are absent, so the chain runs through the jobs that have one (an upstream
    rule without records is looked through, :func:`recorded_upstream`)."""
    upstream = workflow_upstream() if upstream is None else upstream
    aggregating = frozenset(aggregating_rules() if aggregating is None else aggregating)
    by_rule: dict[str, list[BenchmarkJob]] = {}
    for job in jobs:
        by_rule.setdefault(job.rule, []).append(job)
    finish: dict[BenchmarkJob, float] = {}
    best_parent: dict[BenchmarkJob, BenchmarkJob | None] = {}
    for rule in rule_order(by_rule, upstream):
        sources = recorded_upstream(rule, by_rule, upstream, aggregating)
        for job in sorted(by_rule[rule], key=lambda j: j.job):
            parents = [p for u, through in sources for p in by_rule[u]
                       if rule in aggregating or through or _is_prefix(p.job, job.job)]
            parent = max(parents, key=lambda p: (finish[p], p.rule, p.job), default=None)
            best_parent[job] = parent
            finish[job] = job.wall_s + (finish[parent] if parent is not None else 0.0)
    if not finish:
        return []
    last: BenchmarkJob | None = max(finish, key=lambda j: (finish[j], j.rule, j.job))
    chain = []
    while last is not None:
        chain.append(last)
        last = best_parent[last]
    return chain[::-1]


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def rule_rows(jobs: Sequence[BenchmarkJob], path: Sequence[BenchmarkJob] = ()) -> list[dict[str, Any]]:
    """One row per rule (upstream first) and a last row :data:`ALL_JOBS`; columns :data:`BY_RULE_COLUMNS`."""
    on_path = set(path)

    def row(name: str, group: Sequence[BenchmarkJob]) -> dict[str, Any]:
        walls = [j.wall_s for j in group]
        cpus = [j.cpu_s for j in group if j.cpu_s is not None]
        rss = [j.max_rss_mb for j in group if j.max_rss_mb is not None]
        crit = [j for j in group if j in on_path]
        return {"rule": name, "jobs": len(group), "wall_s_total": _round(sum(walls)),
                "wall_s_mean": _round(sum(walls) / len(walls)), "wall_s_max": _round(max(walls)),
                "cpu_s_total": _round(_sum(cpus)), "cpu_s_mean": _round(sum(cpus) / len(cpus) if cpus else None),
                "max_rss_mb": _round(max(rss) if rss else None, 1), "critical_path_jobs": len(crit),
                "critical_path_s": _round(sum(j.wall_s for j in crit))}

    rows = [row(rule, [j for j in jobs if j.rule == rule]) for rule in rule_order({j.rule for j in jobs})]
    if jobs:
        rows.append(row(ALL_JOBS, jobs))
    return rows


def path_rows(path: Sequence[BenchmarkJob]) -> list[dict[str, Any]]:
    """The critical path, one row per job: columns :data:`PATH_COLUMNS` (start/finish in seconds along the chain)."""
    rows, t = [], 0.0
    for step, job in enumerate(path, start=1):
        rows.append({"step": step, "rule": job.rule, "job": job.job, "wall_s": _round(job.wall_s),
                     "cpu_s": _round(job.cpu_s), "max_rss_mb": _round(job.max_rss_mb, 1), "start_s": _round(t),
                     "finish_s": _round(t + job.wall_s)})
        t += job.wall_s
    return rows


def summary_rows(jobs: Sequence[BenchmarkJob], path: Sequence[BenchmarkJob], missing: Sequence[str] = ()
                 ) -> list[dict[str, Any]]:
    """The critical path against the total job time and the span of the records: columns :data:`SUMMARY_COLUMNS`."""
    total = sum(j.wall_s for j in jobs)
    crit = sum(j.wall_s for j in path)
    starts = [j.start for j in jobs if j.start is not None]
    ends = [j.end for j in jobs if j.end is not None]
    span = max(ends) - min(starts) if starts and ends else None
    rows = [
        {"quantity": "critical path", "seconds": _round(crit),
         "note": f"{len(path)} jobs: " + " -> ".join(j.rule for j in path) if path else "no benchmark records"},
        {"quantity": "sum of job wall times", "seconds": _round(total), "note": f"{len(jobs)} jobs"},
        {"quantity": "sum of job CPU times", "seconds": _round(_sum(j.cpu_s for j in jobs)),
         "note": "sampled by Snakemake: a lower bound"},
        {"quantity": "span of the records", "seconds": _round(span),
         "note": "first job start to last job end (file times); covers several invocations when results were reused"},
    ]
    if span:
        rows.append({"quantity": "mean jobs running", "seconds": None,
                     "note": f"{total / span:.2f} (sum of job wall times / span)"})
        rows.append({"quantity": "critical path / span", "seconds": None, "note": f"{crit / span:.2f}"})
    if missing:
        rows.append({"quantity": "jobs without a record", "seconds": None,
                     "note": f"{len(missing)}: " + ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")})
    return rows


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: str | os.PathLike) -> Path:
    """Rows as CSV (None -> empty cell), written atomically."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue())
    return path


def write_benchmark_tables(root: str | os.PathLike, jobs: Mapping[str, Iterable[str]], out_dir: str | os.PathLike,
                           current: tuple[str, str] | None = None) -> dict[str, Any]:
    """``benchmarks_by_rule.csv``, ``critical_path.csv`` and ``benchmark_summary.csv`` in ``out_dir`` from the
    benchmark files under ``root`` of ``jobs`` (rule -> wildcards paths) and, with ``current`` = (rule, job),
    this process's own record (:func:`current_process_record`); returns the files and the critical path."""
    out_dir = Path(out_dir)
    records, missing = read_benchmarks(root, jobs)
    if current is not None:
        own = current_process_record(*current)
        records += [own] if own is not None else []
    path = critical_path(records)
    files = {"benchmarks_by_rule": write_csv(rule_rows(records, path), BY_RULE_COLUMNS, out_dir / "benchmarks_by_rule.csv"),
             "critical_path": write_csv(path_rows(path), PATH_COLUMNS, out_dir / "critical_path.csv"),
             "benchmark_summary": write_csv(summary_rows(records, path, missing), SUMMARY_COLUMNS,
                                            out_dir / "benchmark_summary.csv")}
    return {"files": files, "jobs": len(records), "missing": len(missing),
            "critical_path_s": round(sum(j.wall_s for j in path), 3),
            "critical_path": [f"{j.rule}:{j.job}" for j in path]}
