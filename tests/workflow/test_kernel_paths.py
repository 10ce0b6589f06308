"""report.kernel_paths through Snakemake (issue 67, item 4; rules/train.smk rule train_kernels): unset, a study's plan
is today's; set, every run is trained and scored again per path, in <results_dir>/kernels/<path>/, with the kernels
held in the job (its status records the capability torch ran at), and the paper check prints each claim's stability
beside its verdict."""
import json
from pathlib import Path

import pandas as pd
import pytest

from test_workflow import planned_jobs, run_sm

KERNEL_STUDY = """extends: tiny.yaml
study: {algorithms: [ocfl-km]}
whatif: {enabled: false}
explain: {enabled: false}
report:
  paper_checks: [home]
  roles: {home: {scl_home: ocfl-km, rotated_half: nonoverlap-balanced}}
"""


def study(workflow_dir, paths=None) -> str:
    """tiny.yaml with one method, no what-if or explain; SCL's home claim read on OCFL's runs (its roles)."""
    text = KERNEL_STUDY + (f"  kernel_paths: {json.dumps(paths)}\n" if paths else "")
    name = f"kernels-{'-'.join(paths or ['off'])}.yaml"
    (Path(workflow_dir) / "config" / name).write_text(text)
    return f"config/{name}"


def test_unset_plans_no_kernel_job_and_set_adds_one_per_run_and_path(workflow_dir):
    off = planned_jobs((p := run_sm(workflow_dir, "-n", "--cores", "1", "--quiet", "rules", "--configfile",
                                    study(workflow_dir))).stdout + p.stderr)
    on = planned_jobs((p := run_sm(workflow_dir, "-n", "--cores", "1", "--quiet", "rules", "--configfile",
                                   study(workflow_dir, ["avx2", "default"]))).stdout + p.stderr)
    assert "train_kernels" not in off and off["train_evaluate"] == 1
    assert on == {**off, "train_kernels": 2}


@pytest.mark.slow
def test_one_kernel_path_end_to_end(workflow_dir):
    """tiny, one method, one seed, 3 rounds: the study's run and the same run on the generic kernels (about 1 min)."""
    wd = Path(workflow_dir)
    run_sm(workflow_dir, "--cores", "1", "--configfile", study(workflow_dir, ["default"]), timeout=300)
    run = "digits/nonoverlap-balanced/n6/s0/ocfl-km"
    native = json.loads((wd / "results/runs" / run / "status.json").read_text())
    held = json.loads((wd / "results/kernels/default/runs" / run / "status.json").read_text())
    assert held["status"] == "ok" and held["hardware"]["cpu_capability"] == "DEFAULT"
    assert native["hardware"]["cpu_capability"] == held["hardware"]["cpu_capability"] or native["hardware"][
        "cpu_capability"] != "DEFAULT"  # the study's own run is not held
    assert (wd / "results/kernels/default/eval" / run / "clustering.parquet").is_file()
    assert not (wd / "results/kernels/default/splits").exists()  # the splits are the study's own
    claims = pd.read_csv(wd / "results/report/tables/paper_claims.csv").set_index("claim_id")
    row = claims.loc["home-scl-rotated-half"]
    assert row["holds"] in ("inconclusive", "holds", "contradicted")
    assert row["kernels"].startswith(("same under default", "flips under default ("))
    assert "Kernels" in (wd / "results/report/front_page.rst").read_text()
