"""Fault tolerance under Snakemake (a killed train job resumes bit-identical, a recorded failure survives every
parse and is retried from its checkpoint) and the paper grid's plan."""
import copy
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import copy_workflow, snakemake_cmd

pytestmark = pytest.mark.slow

RUN = "digits/nonoverlap-balanced/n6/s0/ocfl-km"


def sm(wd, *args, env=None, check=True):
    p = subprocess.run(snakemake_cmd(*args), cwd=wd, capture_output=True, text=True, timeout=900,
                       env={**os.environ, **(env or {})})
    if check:
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    return p


def no_temporary_files(root: Path) -> bool:
    return not [p for p in root.rglob("*") if p.is_file() and p.name.endswith(".tmp")]


@pytest.mark.parametrize("whatif", [True, False], ids=["train", "train_evaluate"])
def test_sigkilled_train_job_resumes_and_matches_uninterrupted(tmp_path, whatif):
    """Rule train's job, and rule train_evaluate's (a run without a what-if replay: trained and scored in one job)."""
    cfg = {"datasets": {"digits": {"rounds": 5}}, "engine": {"checkpoint_every": 2}, "whatif": {"enabled": whatif}}
    target = f"results/runs/{RUN}/history.parquet"
    dirs = {}
    for name in ("killed", "clean"):
        wd = Path(copy_workflow(tmp_path / name))
        (wd / "config" / "faults.yaml").write_text(yaml.safe_dump(cfg))
        dirs[name] = wd
    args = (target, "--cores", "1", "--configfile", "config/tiny.yaml", "config/faults.yaml")
    sm(dirs["clean"], *args)
    # the train job SIGKILLs itself after round 2 (checkpoint at round 1 -> resumes mid-interval)
    p = sm(dirs["killed"], *args, env={"CFL_TEST_KILL_AFTER_ROUND": "2"}, check=False)
    assert p.returncode != 0
    run_dir = dirs["killed"] / "results" / "runs" / RUN
    assert not (run_dir / "history.parquet").exists()
    assert list((run_dir / "checkpoints").glob("*.pt"))
    assert no_temporary_files(dirs["killed"] / "results")
    sm(dirs["killed"], *args)
    log = (dirs["killed"] / "results" / "logs" / "train" / f"{RUN}.log").read_text()
    assert "resuming from checkpoint round" in log
    assert (dirs["killed"] / "results" / "benchmarks" / ("train" if whatif else "train_evaluate") / f"{RUN}.tsv").exists()
    for name in ("history.parquet", "gram.parquet", "divergence.parquet", "models.pt"):
        a = (run_dir / name).read_bytes()
        b = (dirs["clean"] / "results" / "runs" / RUN / name).read_bytes()
        assert a == b, name
    sa = pd.read_parquet(run_dir / "server.parquet").drop(columns="seconds")
    sb = pd.read_parquet(dirs["clean"] / "results" / "runs" / RUN / "server.parquet").drop(columns="seconds")
    pd.testing.assert_frame_equal(sa, sb)


def test_keep_going_with_a_failing_run_still_reports_it_missing(tmp_path):
    wd = Path(copy_workflow(tmp_path / "wf"))
    tiny = yaml.safe_load((wd / "config" / "tiny.yaml").read_text())
    bad = copy.deepcopy(tiny["datasets"]["digits"])
    bad.update({"loader": "digits", "lr": 1.0e12})
    cfg = {"study": {"datasets": ["digits", "digitsnan"], "algorithms": ["bnc"]},
           "datasets": {"digitsnan": bad}, "explain": {"enabled": False}}
    (wd / "config" / "fail.yaml").write_text(yaml.safe_dump(cfg))
    sm(wd, "--cores", "2", "--keep-going", "--configfile", "config/tiny.yaml", "config/fail.yaml")
    index = json.loads((wd / "results/report/index.json").read_text())
    assert index["n_missing"] == 1 and index["n_loaded"] == 1
    missing = pd.read_csv(wd / "results/report/missing_runs.csv")
    assert missing["run"].tolist() == ["digitsnan/nonoverlap-balanced/n6/s0/bnc"]
    assert "nan" in missing["reason"][0].lower()
    status = json.loads((wd / "results/runs/digitsnan/nonoverlap-balanced/n6/s0/bnc/status.json").read_text())
    assert status["status"] == "failed"
    assert "missing" in (wd / "results/report/tables/table_personalisation.md").read_text()
    assert no_temporary_files(wd / "results")
    # the next invocation retries the failed run (and only it, plus the report): its `attempt` param changed
    p = sm(wd, "-n", "--cores", "2", "--configfile", "config/tiny.yaml", "config/fail.yaml")
    out = p.stdout + p.stderr
    assert "digitsnan" in out and "wildcards: dataset=digits," not in out


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: relative path -> (sha256 of its bytes, mtime in ns)."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_no_parse_changes_results_and_a_failed_run_is_retried_from_its_checkpoint(tmp_path):
    """A recorded failure stays on disk through every parse (dry run, --lint, --summary,
    --report); the next real invocation retries that run only, resuming from its checkpoint."""
    wd = Path(copy_workflow(tmp_path / "wf"))
    cfg = {"study": {"algorithms": ["bnc", "ocfl-km"]}, "explain": {"enabled": False},
           "datasets": {"digits": {"rounds": 3}}, "engine": {"checkpoint_every": 1}}
    (wd / "config" / "retry.yaml").write_text(yaml.safe_dump(cfg))
    configs = ("--configfile", "config/tiny.yaml", "config/retry.yaml")
    failed = "results/runs/digits/nonoverlap-balanced/n6/s0/bnc"
    sm(wd, "--cores", "2", *configs)
    # bnc again from round 0 (its checkpoints removed), failing after round 1 once its round-1 checkpoint is written:
    # the failure is recorded, the job succeeds, and the report lists the run as missing
    shutil.rmtree(wd / failed / "checkpoints")
    sm(wd, "--cores", "2", "--forcerun", f"{failed}/status.json", *configs, env={"CFL_TEST_FAIL_AFTER_ROUND": "1"})
    assert json.loads((wd / failed / "status.json").read_text())["status"] == "failed"
    assert (wd / failed / "failures.jsonl").read_text().count("\n") == 1
    assert json.loads((wd / "results/report/index.json").read_text())["n_missing"] == 1

    before = tree_state(wd / "results")
    assert f"{failed[len('results/'):]}/history.parquet" in before
    p = sm(wd, "-n", "--cores", "2", "--quiet", "rules", *configs)
    from test_workflow import planned_jobs

    assert planned_jobs(p.stdout + p.stderr).get("train") == 1  # bnc only; ocfl-km stays done
    sm(wd, "--lint", *configs, check=False)  # exits 1 on its findings (.ci/lint-check); here it must only not write
    sm(wd, "--summary", *configs)
    sm(wd, "--report", str(tmp_path / "report.html"), *configs)
    assert tree_state(wd / "results") == before

    sm(wd, "--cores", "2", *configs)
    log = (wd / "results/logs/train/digits/nonoverlap-balanced/n6/s0/bnc.log").read_text()
    assert "resuming from checkpoint round 1" in log
    assert json.loads((wd / failed / "status.json").read_text())["status"] == "ok"
    assert json.loads((wd / "results/report/index.json").read_text())["n_missing"] == 0
    # a successful retry adds no failure line, so the next invocation has nothing to do
    p = sm(wd, "-n", "--cores", "2", *configs)
    assert "Nothing to be done" in p.stdout + p.stderr


def test_paper_grid_plans_400_runs(tmp_path):
    """000's grid (5 datasets x 4 splits x {15, 30} clients x 7 methods = 280 runs) plus the published code's
    three variants (120 runs)."""
    from test_workflow import planned_jobs

    wd = copy_workflow(tmp_path / "wf")
    p = sm(wd, "-n", "--cores", "2", "--quiet", "rules", "--configfile", "config/paper.yaml")
    jobs = planned_jobs(p.stdout + p.stderr)
    assert {k: v for k, v in jobs.items() if k != "all"} == {
        "prepare_dataset": 5, "split": 40, "train": 400, "evaluate": 400, "explain": 200, "report": 1,
        **{f"report_{part}": 1 for part in ("tables", "figures", "whatif", "late_clients", "explain")}}
