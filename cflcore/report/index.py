"""The report's index: ``index.json`` and ``index.csv`` list every file the report wrote, with the per-rule
benchmark tables written last (rule ``report``, cflcore/report/parts.py :func:`~cflcore.report.parts.gather`).
Standard library only: the gathering job draws nothing."""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..io import atomic_path, write_json
from ..filenames import REPORT_INDEX
from . import catalogue
from .benchmarks import REPORT_JOB, write_benchmark_tables

INDEX_COLUMNS = ["kind", "path", "format", "caption", "dataset", "clients"]


def entry(kind: str, path: Path, out_dir: Path, dataset: str | None = None, clients: int | None = None) -> dict[str, Any]:
    """The index row of one file of ``kind`` (a kind of :mod:`cflcore.report.catalogue`, whose caption it takes)."""
    return {"kind": kind, "path": str(Path(path).relative_to(out_dir)), "format": Path(path).suffix.lstrip("."),
            "caption": catalogue.caption_file(kind), "dataset": dataset, "clients": clients}


def write_index(out_dir: str | Path, runs: Mapping[str, Any], entries: Sequence[Mapping[str, Any]],
                benchmarks: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The benchmark tables (when ``benchmarks`` is given: ``{"root": results/benchmarks, "jobs": {rule: [wildcards
    paths]}}``, stages.report_plan; written here, last, so that the job's own row covers its work), then
    ``index.json`` and ``index.csv`` listing every file of ``entries`` and these tables (standard library only:
    the gathering job draws nothing)."""
    out_dir = Path(out_dir)
    entries = [dict(e) for e in entries]
    if benchmarks is not None:
        tables = write_benchmark_tables(benchmarks["root"], benchmarks["jobs"], out_dir / "tables", current=REPORT_JOB)
        entries += [entry(kind, path, out_dir) for kind, path in tables["files"].items()]
    index = {**runs, "files": entries}
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=INDEX_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in e.items()} for e in entries)
    with atomic_path(out_dir / REPORT_INDEX[1]) as tmp:
        tmp.write_text(text.getvalue())
    write_json(index, out_dir / REPORT_INDEX[0])
    return index
