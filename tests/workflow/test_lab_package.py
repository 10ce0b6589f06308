"""The worked example of docs/extending.md, run as a lab would: the example package (examples/lab_cfl: one strategy,
one split generator, one paper check, declared as entry points) is built into a wheel, installed into a folder of its
own, put on the path of a Snakemake run, and a tiny study uses all of it. Its method's runs appear in the report
beside FedAvg's and its claim is checked; a dry run of the started study imports neither torch nor the package;
editing the package's strategy plans that method's jobs again and nothing else; a name another distribution also
registers, and a variant its own schema refuses, stop the plan in one line."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO, copy_workflow, snakemake_cmd
from test_external_plugins import write_distribution
from test_rerun import planned

pytestmark = pytest.mark.slow

EXAMPLE = Path(REPO) / "examples" / "lab_cfl"
STUDY = yaml.safe_load((EXAMPLE / "study.yaml").read_text())
TINY = {**STUDY, "results_dir": "results",
        "datasets": {name: {**entry, "rounds": 2} for name, entry in STUDY["datasets"].items()}}
IMPORTS = ("import json, sys\nfrom snakemake.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
           "    code = e.code\nelse:\n    code = 0\nprint('@@' + json.dumps({'code': code, 'torch': 'torch' in sys.modules, "
           "'lab': sorted(m for m in sys.modules if m.startswith('lab_cfl'))}))\n")


def env_with(*paths: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", ""), REPO])}


def run(wd: Path, env: dict[str, str], cfg: dict, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    path = wd / "config" / "lab.yaml"
    path.write_text(yaml.safe_dump(cfg))
    p = subprocess.run(snakemake_cmd("--cores", "2", *args, "--configfile", str(path)), cwd=wd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert (p.returncode == 0) == ok, p.stdout[-3000:] + p.stderr[-5000:]
    return p


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The example built (a copy: setuptools writes into the source tree), installed into its own folder, and its
    study run once."""
    tmp = tmp_path_factory.mktemp("lab")
    src, wheels, target = tmp / "src", tmp / "wheels", tmp / "site"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(wheels), str(src)], capture_output=True, text=True, timeout=300, cwd=tmp)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("lab_cfl-0.1.0-*.whl")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                              str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    wd = Path(copy_workflow(tmp / "wf"))
    env = env_with(target)
    table = wd / STUDY["splits"]["natural"]["table"]
    table.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([sys.executable, str(EXAMPLE / "make_federation.py"), str(table)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert made.returncode == 0, made.stderr[-3000:]
    run(wd, env, TINY)
    return wd, env, target


def test_the_lab_method_split_and_claim_run_from_the_installed_wheel(lab):
    wd, _, target = lab
    tables = wd / "results" / "report" / "tables"
    headline = pd.read_csv(tables / "headline.csv")
    assert sorted(zip(headline["split"], headline["algorithm"])) == [
        ("lab-blocks", "bnc"), ("lab-blocks", "lab-kmeans"), ("natural", "bnc"), ("natural", "lab-kmeans")]
    claims = pd.read_csv(tables / "paper_claims.csv")
    assert claims[["claim_id", "paper"]].values.tolist() == [["lab-finds-blocks", "lab"]]
    assert claims["holds"].iloc[0] in ("holds", "contradicted")  # decided on the runs, either way
    splits = wd / "results" / "splits"
    manifest = json.loads(next((splits / "digits").rglob("manifest.json")).read_text())
    assert manifest["generator"] == "lab-blocks" and manifest["n_clusters"] == 4
    # the federation table: its 12 clients in its 4 groups are the split's, and the scores are read against them
    natural = json.loads(next((splits / "sites").rglob("manifest.json")).read_text())
    assert natural["generator"] == "natural" and natural["clients_per_cluster"] == [3, 3, 3, 3]
    assert natural["client_id_of_client"][:4] == ["site-00", "site-01", "site-02", "site-10"]
    assert natural["cluster_of_client"] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3] and natural["orchestrator_size"] == 200
    scores = pd.read_parquet(next((wd / "results" / "eval" / "sites").rglob("bnc/clustering.parquet")))
    assert scores["ari"].dropna().eq(0.0).all()  # one cluster against four groups
    log = next((wd / "results" / "logs").rglob("*lab-kmeans*")).read_text()
    assert f"plug-in method 'lab-kmeans' from lab-cfl 0.1.0 (lab_cfl.strategy), {target}" in log


def test_a_dry_run_of_the_started_study_imports_neither_torch_nor_the_package(lab):
    wd, env, _ = lab
    (wd / "config" / "lab.yaml").write_text(yaml.safe_dump(TINY))
    p = subprocess.run([sys.executable, "-c", IMPORTS, "-n", "--configfile", str(wd / "config" / "lab.yaml")], cwd=wd,
                       env=env, capture_output=True, text=True, timeout=300)
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
    assert json.loads(line[2:]) == {"code": 0, "torch": False, "lab": []}, p.stdout[-3000:] + p.stderr[-3000:]
    assert "Nothing to be done" in p.stdout + p.stderr


def test_editing_the_lab_strategy_replans_its_runs_only(lab):
    wd, env, target = lab
    strategy = target / "lab_cfl" / "strategy.py"
    before = strategy.read_text()
    try:
        strategy.write_text(before.replace("n_init=10", "n_init=5"))
        jobs = planned((p := run(wd, env, TINY, "-n")).stdout + p.stderr)
    finally:
        strategy.write_text(before)
    trained = [w for rule, w in jobs if rule in ("train", "train_evaluate")]
    assert trained and {w["algorithm"] for w in trained} == {"lab-kmeans"}, jobs
    assert not [rule for rule, _ in jobs if rule in ("prepare_dataset", "split")], jobs
    assert planned((p := run(wd, env, TINY, "-n")).stdout + p.stderr) == []  # restored: nothing to do


def test_a_name_registered_twice_and_a_refused_parameter_stop_the_plan_in_one_line(lab, tmp_path):
    wd, env, target = lab
    other = write_distribution(tmp_path / "other", "other-lab", "other_lab",
                               {"cflcore.strategies": {"lab-kmeans": "other_lab.strategy"}},
                               {"strategy": (target / "lab_cfl" / "strategy.py").read_text()})
    p = run(wd, env_with(target, other), TINY, "-n", ok=False)
    (line,) = [ln for ln in (p.stdout + p.stderr).splitlines() if "registered by two distributions" in ln]
    assert "lab-cfl 0.1.0 (lab_cfl.strategy)" in line and "other-lab 0.1.0 (other_lab.strategy)" in line
    bad = {**TINY, "algorithms": {**TINY["algorithms"], "lab-kmeans": {"method": "lab-kmeans", "k": 0}}}
    p = run(wd, env, bad, "-n", ok=False)
    assert "config error: algorithms.lab-kmeans.k: 0 is less than the minimum of 1" in p.stdout + p.stderr
