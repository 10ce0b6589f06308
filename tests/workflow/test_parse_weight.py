"""Parse-time weight: a Snakemake dry run imports no torch, and no cflcore module imports pandas.

Snakemake parses the Snakefile at every start, dry runs included, and again in every job, so whatever the parse
imports is paid each time. Each dry run here runs in a subprocess under ``python -X importtime`` with
``builtins.__import__`` wrapped: an import statement of pandas or torch in a cflcore module is recorded, even when
the module was already imported (the SLURM executor plug-in, where installed, imports pandas itself before the
Snakefile is read: that import is the plug-in's and is allowed). The first dry run in a fresh folder
validates the config from scratch (the plug-in checks, pass 3 of cflcore.config); the second reads the validated
config back (cflcore.config.validate_config_cached), as every later start and every job does.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "pandas")

# Runs `snakemake -n` in this process with every import statement of a HEAVY module in a cflcore module recorded;
# prints the records as one JSON line after the marker.
DRY_RUN = r"""
import builtins, json, sys
HEAVY, MARK = {heavy!r}, {mark!r}
seen, real_import = [], builtins.__import__

def watching_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {{}}).get("__name__") or ""
    if level == 0 and name.split(".")[0] in HEAVY and (importer == "cflcore" or importer.startswith("cflcore.")):
        seen.append([name, importer])
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = watching_import
from snakemake.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
else:
    code = 0
print(MARK + json.dumps({{"code": code, "seen": sorted(map(list, set(map(tuple, seen))))}}))
"""
MARK = "@@parse-weight@@"


def dry_run(configfile: Path, workdir: Path) -> dict:
    """One ``snakemake -n`` of the repository's Snakefile on ``configfile`` in ``workdir``: its exit code, the
    HEAVY imports made by cflcore modules (``seen``: [module, importer]) and the top-level modules importtime saw
    imported (``imported``)."""
    script = DRY_RUN.format(heavy=HEAVY, mark=MARK)
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", script, "-n", "--quiet", "--snakefile",
                          str(REPO / "Snakefile"), "--configfile", str(configfile), "--directory", str(workdir)],
                         capture_output=True, text=True, cwd=workdir, timeout=300,
                         env={"PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
                              "HOME": str(workdir)})
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(MARK)]
    assert lines, out.stderr[-3000:]
    result = json.loads(lines[-1][len(MARK):])
    assert result["code"] in (0, None), out.stderr[-3000:]
    result["imported"] = {ln.rsplit("|", 1)[1].strip() for ln in out.stderr.splitlines()
                          if ln.startswith("import time:") and "|" in ln}
    return result


@pytest.fixture(scope="module", params=["tiny.yaml", "config.yaml"])
def dry_runs(request, tmp_path_factory):
    """The first (uncached) and the second (cached validation) dry run of one config, in a fresh folder."""
    workdir = tmp_path_factory.mktemp("parse")
    configfile = REPO / "config" / request.param
    return dry_run(configfile, workdir), dry_run(configfile, workdir)


@pytest.mark.slow
def test_no_cflcore_module_imports_pandas_at_parse(dry_runs):
    for run in dry_runs:
        assert not [seen for seen in run["seen"] if seen[0].split(".")[0] == "pandas"], run["seen"]


@pytest.mark.slow
def test_a_started_study_parses_without_torch(dry_runs):
    _, cached = dry_runs
    assert cached["seen"] == [] and "torch" not in cached["imported"], cached["seen"]


@pytest.mark.slow
def test_a_first_dry_run_imports_no_torch(dry_runs):
    """The first validation imports the strategy plug-ins; they import torch where it runs, not at module level."""
    first, _ = dry_runs
    assert "torch" not in first["imported"] and first["seen"] == []
