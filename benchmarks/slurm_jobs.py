"""SLURM submissions and wall time of one study (one submission per run).

Runs ``snakemake --profile <profile> --configfile <config>`` in a fresh copy of a workflow folder on a SLURM cluster
that is already up (``.ci/slurm-up.sh``), with ``profiles/slurm`` cut for the CI's 2-CPU node the way
tests/workflow/test_slurm.py does it (1 CPU per job, 5-second status checks, latency-wait 10), then counts the SLURM jobs
the executor submitted (one log per job under ``.snakemake/slurm_logs``) and prints one line of results.

    python benchmarks/slurm_jobs.py --workflow . --config config/tiny.yaml
    python benchmarks/slurm_jobs.py --workflow /tmp/cfl-5d5cc75 --pythonpath /tmp/cfl-5d5cc75   # another commit
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PARTS = ("Snakefile", "rules", "workflow_scripts", "config", "report", "profiles")


def ci_profile(base: dict) -> dict:
    """profiles/slurm for the 2-CPU CI node (as tests/workflow/test_slurm.py: 1 CPU per job, 5-second status checks)."""
    profile = yaml.safe_load(yaml.safe_dump(base))
    for resources in profile["set-resources"].values():
        resources["cpus_per_task"] = 1
    profile["default-resources"]["cpus_per_task"] = 1
    profile["seconds-between-status-checks"] = 5
    profile["latency-wait"] = 10
    return profile


def submissions(workdir: Path) -> dict[str, int]:
    """SLURM jobs per rule or group, from the executor's logs (<slurm_logs>/{rule,group}_<name>/**/<jobid>.log)."""
    counts: dict[str, int] = {}
    root = workdir / ".snakemake" / "slurm_logs"
    for log in root.glob("*/**/*.log"):
        if log.stem.isdigit():
            kind = log.relative_to(root).parts[0]
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workflow", default=".", help="the workflow folder to copy (default: this one)")
    ap.add_argument("--pythonpath", default=None, help="PYTHONPATH for snakemake and its jobs (another commit's cflcore)")
    ap.add_argument("--config", default="config/tiny.yaml")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds; SIGINT then (snakemake cancels its jobs)")
    a = ap.parse_args(argv)
    src = Path(a.workflow).resolve()
    work = Path(tempfile.mkdtemp(prefix="cfl-slurm-jobs-"))
    for part in PARTS:
        if (src / part).is_dir():
            shutil.copytree(src / part, work / part, symlinks=False)
        elif (src / part).exists():
            shutil.copy2(src / part, work / part)
    base = yaml.safe_load((work / "profiles" / "slurm" / "config.yaml").read_text())
    (work / "profiles" / "slurm-ci").mkdir(parents=True, exist_ok=True)
    (work / "profiles" / "slurm-ci" / "config.yaml").write_text(yaml.safe_dump(ci_profile(base), sort_keys=False))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if a.pythonpath:
        env["PYTHONPATH"] = str(Path(a.pythonpath).resolve())
    cmd = ["timeout", "-s", "INT", "--kill-after=60", str(a.timeout), sys.executable, "-m", "snakemake",
           "--profile", "profiles/slurm-ci", "--configfile", a.config]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    (work / "snakemake.out").write_text(p.stdout + p.stderr)
    jobs = submissions(work)
    print(f"workflow={src} exit={p.returncode} wall_s={seconds:.0f} submitted={sum(jobs.values())} "
          f"by_kind={jobs} folder={work}")
    return p.returncode


if __name__ == "__main__":
    raise SystemExit(main())
