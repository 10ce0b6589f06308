"""The report job on two cores: half of its figures drawn by a second Python process.

The report is the study's last job and runs alone, so on a 2-core machine one core idled while it drew
its figures one after the other (about 40 s of the default study's wall time). With ``workers >= 2``
:func:`cflcore.stages.report_runs` starts :class:`ReportWorker`, a fresh interpreter
(``python -m cflcore.report.parallel <request.json>``, not a fork: the report process holds pyarrow and
torch thread pools) that draws the what-if heatmaps and the insertion/deletion box plots and CD diagrams
(:func:`cflcore.stages.report_worker`) while the report process draws the rest; the report process then
adds the worker's index entries. Every figure is the same file either way: only who draws it changes.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import CflError
from ..io import write_json

log = logging.getLogger("cflcore")


MIN_RUNS = 10
"""Fewer runs than this and the report draws everything itself: the second interpreter's start (imports,
loading the runs: about 3 s of CPU) costs more than its share of a small report's figures (tiny.yaml: 3 runs)."""


def usable_workers(requested: int) -> int:
    """``requested`` processes, at most the CPUs this process may run on (a SLURM job's allocation)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(int(requested), cpus))


class ReportWorker:
    """A second process drawing part of the report (see the module docstring); :meth:`entries` waits for it."""

    def __init__(self, plan: Mapping[str, Any], out_dir: str | Path):
        self.dir = Path(tempfile.mkdtemp(prefix="cfl-report-worker-"))
        self.result = self.dir / "result.json"
        request = self.dir / "request.json"
        write_json({"plan": dict(plan), "out_dir": str(out_dir), "result": str(self.result)}, request)
        self.output = open(self.dir / "output.log", "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "cflcore.report.parallel", str(request)],
                                     stdin=subprocess.DEVNULL, stdout=self.output, stderr=subprocess.STDOUT)
        log.info("report: what-if and insertion/deletion figures in a second process (pid %d)", self.proc.pid)

    def entries(self) -> list[dict[str, Any]]:
        """Wait for the worker; its index entries, or a CflError with its last output lines."""
        code = self.proc.wait()
        self.output.seek(0)
        output = self.output.read().strip()
        if output:
            log.info("report worker:\n%s", output)
        try:
            result = json.loads(self.result.read_text())
        except (OSError, json.JSONDecodeError):
            result = {}
        if code != 0 or "entries" not in result:
            reason = result.get("error") or (output.splitlines()[-1] if output else f"exit status {code}")
            raise CflError(f"report worker failed: {reason}")
        return list(result["entries"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.output.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    from .. import stages
    from ..logutil import setup_logging

    request = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    setup_logging(None)
    try:
        entries = stages.report_worker(request["plan"], request["out_dir"])
    except Exception as e:  # noqa: BLE001 - reported to the report process, which fails the job
        write_json({"error": f"{type(e).__name__}: {e}"}, request["result"])
        raise
    write_json({"entries": entries}, request["result"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
