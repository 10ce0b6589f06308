"""This workflow used as a Snakemake module by another workflow: a host Snakefile in another
folder imports it with `module` / `use rule * from`, passes its own config, and runs a small study; the rules'
relative paths (the schema, the scripts, the report captions, report/workflow.rst) resolve from the module's folder."""
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import copy_workflow, snakemake_cmd
from test_workflow import planned_jobs

pytestmark = pytest.mark.slow

HOST_SNAKEFILE = """\
configfile: "config/study.yaml"


module cfl:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from cfl
"""


def sm(wd: Path, *args: str) -> str:
    p = subprocess.run(snakemake_cmd(*args), cwd=wd, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    return p.stdout + p.stderr


def test_used_as_a_module_with_its_own_config(tmp_path):
    cfl = Path(copy_workflow(tmp_path / "cfl-pipeline"))
    host = tmp_path / "host"
    (host / "config").mkdir(parents=True)
    study = yaml.safe_load((cfl / "config" / "tiny.yaml").read_text())
    # the host's own study: one method, 2 rounds, no explanation, its own results folder
    study["results_dir"] = "out"
    study["study"]["algorithms"] = ["bnc"]
    study["datasets"]["digits"]["rounds"] = 2
    study["explain"]["enabled"] = False
    (host / "config" / "study.yaml").write_text(yaml.safe_dump(study))
    (host / "Snakefile").write_text(HOST_SNAKEFILE.format(snakefile=cfl / "Snakefile"))

    plan = planned_jobs(sm(host, "-n", "--quiet", "rules"))
    parts = {f"report_{p}": 1 for p in ("tables", "figures", "whatif", "late_clients", "explain")}  # report in parts
    assert plan == {"prepare_dataset": 1, "split": 1, "train": 1, "evaluate": 1, **parts, "report": 1, "all": 1}
    sm(host, "--cores", "2")
    index = json.loads((host / "out" / "report" / "index.json").read_text())
    assert (index["n_loaded"], index["n_missing"]) == (1, 0)
    history = host / "out" / "runs" / "digits" / "nonoverlap-balanced" / "n6" / "s0" / "bnc" / "history.parquet"
    assert history.exists()
    assert not (cfl / "results").exists() and not (cfl / "out").exists()  # nothing written into the module
    sm(host, "--report", "report.html")
    assert "Headline" in (host / "report.html").read_text(errors="replace")
