"""Code hashes from the real imports (issue 24 §1): each stage's ``code`` param hashes exactly the cflcore sources
its entry point imports, so an edit reruns the stages that run the edited code and no other."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cflcore import provenance
from conftest import REPO

EDIT = b"\n_PROVENANCE_TEST_EDIT = 1\n"  # a statement, so that it counts in stages.py too; imports unchanged


def hashes(root: Path, plans: dict) -> dict[str, str]:
    """code_version of every stage for the package at ``root`` with the given plans (an appended statement
    changes no import, so the plans of the unedited package hold)."""
    import hashlib

    out = {}
    for stage in provenance.STAGE_ENTRIES:
        h = hashlib.sha256()
        for path, content in _sources(root, plans[stage]):
            h.update(path.encode() + b"\0")
            h.update(hashlib.sha256(content).digest())
        out[stage] = h.hexdigest()[:16]
    return out


def _sources(root: Path, plan: dict):
    out = [(p, (root / p).read_bytes()) for p in plan["files"]]
    if plan["entry_lines"] is not None:
        lines = (root / "stages.py").read_bytes().splitlines(keepends=True)
        out.append(("stages.py", b"".join(b"".join(lines[a - 1:b]) for a, b in plan["entry_lines"])))
    return sorted(out)


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prov") / "cflcore"
    shutil.copytree(Path(REPO) / "cflcore", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_code_version_matches_the_plans(package):
    """code_version (cached, on disk) equals the hash of the plan derived from the syntax trees."""
    plans = provenance._stage_plans(package)
    assert provenance.stage_plans(package) == plans
    assert {s: provenance.code_version(s, package) for s in plans} == hashes(package, plans)
    assert provenance.stage_plans(package) == plans  # read back from __pycache__


def test_each_edit_reruns_exactly_the_stages_importing_it(package):
    plans = provenance._stage_plans(package)
    base = hashes(package, plans)
    changed_by = {}
    for f in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = str(f.relative_to(package))
        original = f.read_bytes()
        f.write_bytes(original + (EDIT if f.suffix == ".py" else b"\n"))
        try:
            # stages.py's plan holds line ranges: derive it again, as code_version does after any edit
            now = provenance._stage_plans(package) if rel == "stages.py" else plans
            changed_by[rel] = {s for s, h in hashes(package, now).items() if h != base[s]}
        finally:
            f.write_bytes(original)
        assert changed_by[rel] == {s for s, p in plans.items() if rel in p["files"] or rel == "stages.py"}, rel
    everything = set(provenance.STAGE_ENTRIES)
    # what the issue measured: stages.py and logutil.py belonged to no stage, late_clients missed metrics
    assert changed_by["stages.py"] == everything  # a module-level statement runs in every stage
    assert changed_by["logutil.py"] == everything  # every adapter runs its stage through logutil.run_job
    assert "late_clients" in changed_by["metrics/external.py"]
    # each part reruns its own stages and never an upstream one
    assert changed_by["fl/run.py"] == {"train", "explain"}  # the report reads Parquet only (its parts import no engine)
    assert changed_by["strategies/ocfl.py"] >= {"train"} and not changed_by["strategies/ocfl.py"] & {
        "data", "splits", "evaluate", "whatif", "late_clients"}
    assert changed_by["report/figures.py"] == {"report"}
    assert changed_by["reference/paper_table1_clustering.csv"] == {"report"}
    assert changed_by["data/loaders.py"] >= {"data"} and "train" not in changed_by["data/loaders.py"]
    assert changed_by["evaluate/whatif.py"] >= {"whatif"} and "evaluate" not in changed_by["evaluate/whatif.py"]
    assert changed_by["explain/insdel.py"] == {"explain", "report"}
    assert not changed_by["provenance.py"] and not changed_by["cli.py"]


def test_editing_the_train_adapter_reruns_train_only(package):
    plans = provenance._stage_plans(package)
    base = hashes(package, plans)
    path = package / "stages.py"
    original = path.read_text()
    marker = '    out_dir = Path(out_dir)\n    t0 = time.time()\n'
    assert original.count(marker) == 1
    path.write_text(original.replace(marker, marker + "    t0 = t0 + 0.0\n"))
    try:
        edited = provenance._stage_plans(package)
        changed = {s for s, h in hashes(package, edited).items() if h != base[s]}
    finally:
        path.write_text(original)
    assert changed == {"train"}  # the report's parts run report_part / report_index only (no worker process)


def test_a_new_import_joins_the_stage(package):
    """Plans follow the imports: a lazy import added to a function of evaluate/clustering.py brings its target
    (and what that imports) into every stage that imports evaluate/clustering.py."""
    path = package / "evaluate" / "clustering.py"
    original = path.read_text()
    assert "fl/trainers.py" not in provenance._stage_plans(package)["evaluate"]["files"]
    path.write_text(original + "\n\ndef _uses_trainers():\n    from ..fl import trainers\n\n    return trainers\n")
    try:
        plans = provenance._stage_plans(package)
    finally:
        path.write_text(original)
    assert {"fl/trainers.py", "fl/__init__.py"} <= set(plans["evaluate"]["files"])
    assert "fl/trainers.py" in plans["late_clients"]["files"]
    assert "fl/trainers.py" not in plans["data"]["files"]


RUNTIME = r"""
import json, sys
from pathlib import Path
from cflcore import config as cc, stages
import yaml
cfg = cc.validate_config(yaml.safe_load(open(sys.argv[2] + "/config/tiny.yaml")), plugins=False)  # imports no plug-in
root = Path(sys.argv[3]); data = root / "digits.parquet"; split = root / "split"; run = root / "run"
# the rules' params are built from the config before any job runs (a what-if replay's own clusterer imports its
# strategy there when the config was validated without plug-ins): outside the window measured
whatif = cc.whatif_settings(cfg, "digits", "ocfl-km")
before = set(m for m in sys.modules if m.startswith("cflcore"))
stage = sys.argv[1]
if stage == "data":
    stages.prepare_dataset(cc.data_settings(cfg, "digits"), data)
elif stage == "splits":
    stages.make_split(data, cc.split_settings(cfg, "nonoverlap-balanced"), 6, 0, split, name="nonoverlap-balanced")
elif stage == "train":
    stages.train(data, split, cc.run_settings(cfg, "digits", "ocfl-km"), 0, run)
elif stage == "evaluate":
    stages.evaluate(run, split / "manifest.json", root / "eval", cfg["report"])
elif stage == "whatif":
    stages.whatif(run, split / "manifest.json", root / "whatif.parquet", whatif, 0)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("cflcore") and m not in before)))
"""


def test_the_modules_a_stage_imports_at_run_time_are_in_its_hash(tmp_path):
    """The runtime oracle: every cflcore module a stage imports while it runs (beyond what loading the config
    imported) is one whose source the stage's hash covers. Runs the tiny config's first run (digits, 6 clients,
    3 rounds), each stage in a fresh process."""
    plans = provenance._stage_plans(Path(REPO) / "cflcore")
    for stage in ("data", "splits", "train", "evaluate", "whatif"):
        p = subprocess.run([sys.executable, "-c", RUNTIME, stage, REPO, str(tmp_path)], capture_output=True,
                           text=True, timeout=300, cwd=REPO)
        assert p.returncode == 0, p.stderr[-3000:]
        loaded = json.loads(p.stdout.strip().splitlines()[-1])
        files = {f.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for f in plans[stage]["files"]}
        modules = {f"cflcore.{f}" if f != "__init__" else "cflcore" for f in files}
        assert loaded, stage
        assert set(loaded) <= modules | {"cflcore.stages"}, (stage, set(loaded) - modules)
