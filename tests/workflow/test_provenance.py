"""Code hashes from the real imports, as fine as the change: each job's ``code`` param
hashes exactly the cflcore code it runs (a train job: the engine, its own method and model), as syntax trees without
comments or docstrings, so an edit reruns the jobs that run the edited code and no other."""
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from cflcore import config as cc
from cflcore import pipeline, provenance
from cflcore.registry import declared_modules
from conftest import REPO

EDIT = "\n_PROVENANCE_TEST_EDIT = 1\n"  # a statement, so that it counts in stages.py too; imports unchanged


def fresh(root: Path) -> None:
    """Forget what this process remembered of the package (an edit in a test is a new package to the hashes)."""
    provenance.package_graph.cache_clear()
    provenance._code_version.cache_clear()


@contextmanager
def edited(path: Path, edit: Callable[[str], str]) -> Iterator[None]:
    """``path`` rewritten by ``edit`` inside the ``with`` block; restored, and the hashes' memory cleared, after it."""
    original = path.read_text()
    path.write_text(edit(original))
    try:
        yield
    finally:
        path.write_text(original)
        fresh(path)


def stage_hashes(graph: dict) -> dict[str, str]:
    """Every stage's hash without a plug-in selection (each registry brings all its plug-ins)."""
    return {stage: provenance.version_in(graph, stage) for stage in pipeline.stage_entries()}


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("prov") / "cflcore"
    shutil.copytree(Path(REPO) / "cflcore", root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module")
def default_config() -> dict:
    """The default study's config, validated without importing a plug-in."""
    return cc.validate_config(yaml.safe_load((Path(REPO) / "config" / "config.yaml").read_text()), plugins=False)


def train_hashes(root: Path, cfg: dict) -> dict[str, str]:
    """The train hash of every variant of ``cfg``'s study (on its first dataset), as the rule computes it."""
    fresh(root)
    dataset = cfg["study"]["datasets"][0]
    return {a: provenance.code_version("train", cc.run_plugins(cfg, dataset, a), root=root)
            for a in cfg["study"]["algorithms"]}


def changed_variants(root: Path, cfg: dict, rel: str, text: str) -> set[str]:
    """The variants whose train hash changes when ``text`` is appended to ``root/rel`` (restored afterwards)."""
    base = train_hashes(root, cfg)
    with edited(root / rel, lambda original: original + text):
        now = train_hashes(root, cfg)
    return {a for a in base if now[a] != base[a]}


def method_of(cfg: dict, variant: str) -> str:
    return cfg["algorithms"][variant]["method"]


def test_code_version_matches_the_graph(package):
    """code_version (cached, on disk) equals the hash of the graph derived from the syntax trees."""
    fresh(package)
    graph = provenance._package_graph(package)
    assert provenance.package_graph(package) == graph
    selection = {"method": "ocfl", "model": "tinyvgg"}
    assert provenance.code_version("train", selection, package) == provenance.version_in(graph, "train", selection)
    assert {s: provenance.code_version(s, root=package) for s in pipeline.stage_entries()} == stage_hashes(graph)
    fresh(package)
    assert provenance.package_graph(package) == graph  # read back from __pycache__


def test_each_edit_reruns_exactly_the_stages_importing_it(package):
    """A real change (an appended statement) to any file changes the stage hashes (no plug-in selected) of exactly
    the stages whose sources hold the file. Imports are unchanged, so the edited file's digest is all that moves."""
    graph = provenance._package_graph(package)
    base = stage_hashes(graph)
    by_path = {node["path"]: m for m, node in graph["modules"].items()}
    changed_by = {}
    for f in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = str(f.relative_to(package))
        original = f.read_bytes()
        f.write_bytes(original + (EDIT.encode() if f.suffix == ".py" else b"\nedited: 1\n"))
        try:
            if rel == "stages.py":  # its entries' digests are per stage: derive the graph again
                now = provenance._package_graph(package)
            else:
                now = json.loads(json.dumps(graph))
                if rel in by_path:
                    now["modules"][by_path[rel]]["digest"] = provenance._digest(
                        provenance.normalised_dump([provenance.ast.parse(f.read_text())]))
                for files in now["data"].values():
                    for entry in files:
                        if entry[0] == rel:
                            entry[1] = provenance.data_digest(f)
            changed_by[rel] = {s for s, h in stage_hashes(now).items() if h != base[s]}
        finally:
            f.write_bytes(original)
        holders = {s for s in base if rel in [p.split("#")[0] for p, _ in provenance.sources_in(graph, s, {})]}
        assert changed_by[rel] == holders, rel
    everything = set(pipeline.stage_entries())
    assert changed_by["stages.py"] == everything  # a module-level statement runs in every stage
    assert changed_by["logutil.py"] == everything  # every adapter runs its stage through logutil.run_job
    assert "evaluate_late_clients" in changed_by["metrics/external.py"]
    assert changed_by["fl/run.py"] == {"train"}  # explain loads models.pt (fl/artifacts.py), never the engine
    assert changed_by["strategies/ocfl.py"] >= {"train"} and not changed_by["strategies/ocfl.py"] & {
        "prepare_dataset", "split", "evaluate", "whatif", "evaluate_late_clients", "explain"}
    # tune (issue 68's calibration: one job reading the tuning runs' summaries, cflcore/report/sweeps.py, whose module
    # draws the sweep figures too) reads what the report reads
    assert changed_by["report/figures.py"] == {"report", "tune"}
    assert changed_by["layout.py"] == {"report", "tune"}  # the run layout is the rules' and the readers', not a stage's
    assert changed_by["reference/paper_table1_clustering.csv"] == {"report"}
    for loader_module in ("data/loaders/base.py", "data/loaders/idx.py"):  # the contract and one source family
        assert changed_by[loader_module] >= {"prepare_dataset"} and "train" not in changed_by[loader_module]
    assert changed_by["evaluate/whatif.py"] >= {"whatif"} and "evaluate" not in changed_by["evaluate/whatif.py"]
    assert changed_by["explain/insdel.py"] == {"explain"}  # the report reads explain/tables.py, never torch code
    assert changed_by["explain/tables.py"] == {"explain", "report"}
    assert not changed_by["provenance.py"] and not changed_by["cli.py"]
    # a strategy input's builder (SCL's proxy) is its own stage's only: no train job's hash holds it, so an edit
    # reruns the proxy jobs and, through their files, the train jobs of the variants that declare it
    assert changed_by["fl/centralised.py"] == {"centralised_update_norms"}
    assert "centralised_update_norms" not in changed_by["strategies/scl.py"]


def test_editing_the_train_adapter_reruns_train_only(package):
    base = stage_hashes(provenance._package_graph(package))
    path = package / "stages.py"
    marker = '    out_dir = Path(out_dir)\n    t0 = time.time()\n'
    assert path.read_text().count(marker) == 1
    with edited(path, lambda original: original.replace(marker, marker + "    t0 = t0 + 0.0\n")):
        changed = {s for s, h in stage_hashes(provenance._package_graph(package)).items() if h != base[s]}
    assert changed == {"train"}  # the report's parts run report_part / report_index only (no worker process)


def test_a_new_import_joins_the_stage(package):
    """The graph follows the imports: a lazy import added to a function of evaluate/clustering.py brings its target
    (and what that imports) into every stage that imports evaluate/clustering.py."""
    path = package / "evaluate" / "clustering.py"
    assert "fl/trainers.py" not in provenance.stage_modules("evaluate", root=package)
    uses_trainers = "\n\ndef _uses_trainers():\n    from ..fl import trainers\n\n    return trainers\n"
    with edited(path, lambda original: original + uses_trainers):
        graph = provenance._package_graph(package)
    files = {s: [p for p, _ in provenance.sources_in(graph, s, {})] for s in ("evaluate", "evaluate_late_clients", "prepare_dataset")}
    assert {"fl/trainers.py", "fl/__init__.py"} <= set(files["evaluate"])
    assert "fl/trainers.py" in files["evaluate_late_clients"]
    assert "fl/trainers.py" not in files["prepare_dataset"]


# ---- as fine as the change: an edit reruns only the jobs that run the edited code -------------------------------
def test_a_strategy_edit_changes_the_train_hash_of_its_own_runs_only(package, default_config):
    """For every method of the default study, a real change to its strategy module changes the train hash of the
    variants of that method and of no other."""
    methods = sorted({method_of(default_config, a) for a in default_config["study"]["algorithms"]})
    assert len(methods) >= 7
    modules = declared_modules("method")
    for method in methods:
        rel = modules[method].removeprefix("cflcore.").replace(".", "/") + ".py"
        changed = changed_variants(package, default_config, rel, EDIT)
        assert changed == {a for a in default_config["study"]["algorithms"] if method_of(default_config, a) == method}, rel


SHARED_HELPERS = {
    # file -> the methods whose module imports it, directly or through another helper (read from their imports)
    "strategies/_common.py": {"scl", "bcl", "ocfl", "louvain", "fedgwc", "ifca"},  # BNC imports no helper
    "strategies/_late.py": {"ocfl"},
    "clustering/clusterers.py": {"ocfl"},
    "clustering/graph.py": {"ocfl", "louvain"},  # clusterers.py imports graph.py
    "clustering/partition.py": {"ocfl", "louvain", "bcl", "oracle"},
}


@pytest.mark.parametrize("helper", sorted(SHARED_HELPERS))
def test_a_shared_helper_edit_changes_the_train_hash_of_the_methods_importing_it(package, default_config, helper):
    changed = changed_variants(package, default_config, helper, EDIT)
    assert changed == {a for a in default_config["study"]["algorithms"]
                       if method_of(default_config, a) in SHARED_HELPERS[helper]}


def test_the_helpers_table_follows_the_imports():
    """SHARED_HELPERS above, checked against the strategy modules' own import lines (direct imports only)."""
    modules = declared_modules("method")
    source = {m: Path(REPO, *mod.split(".")).with_suffix(".py").read_text() for m, mod in modules.items()}
    for helper, methods in SHARED_HELPERS.items():
        name = Path(helper).stem
        direct = {m for m, text in source.items() if re.search(rf"^from \.[\w.]*\b{name} import", text, re.M)}
        assert direct and direct - {"fesem"} <= methods, (helper, direct)


def test_a_comment_or_a_docstring_changes_no_hash(package, default_config):
    base = train_hashes(package, default_config)
    base_stages = {s: provenance.code_version(s, root=package) for s in pipeline.stage_entries()}
    path = package / "strategies" / "ifca.py"
    with edited(path, lambda original: original.replace('"""', '"""A docstring edit. ', 1) + "\n# probe\n"):
        assert train_hashes(package, default_config) == base
        assert {s: provenance.code_version(s, root=package) for s in pipeline.stage_entries()} == base_stages


def test_no_module_digest_moves_with_a_comment():
    """The normalised tree of every module ignores an appended comment and blank lines."""
    for f in sorted((Path(REPO) / "cflcore").rglob("*.py")):
        text = f.read_text()
        a = provenance.normalised_dump([provenance.ast.parse(text)])
        assert provenance.normalised_dump([provenance.ast.parse(text + "\n\n# a comment\n")]) == a, f


def test_a_new_report_figure_kind_changes_no_train_hash(package, default_config):
    """Adding a figure kind to the report's catalogue reruns the report only (its hash moves), never a train job."""
    base = train_hashes(package, default_config)
    report = provenance.code_version("report", root=package)
    path = package / "report" / "catalogue.py"
    marker = "OUTPUTS: dict[str, ReportOutput] = {o.kind: o for o in (\n"
    assert path.read_text().count(marker) == 1
    probe = '    _figures("probe_kind", "figures", "run_figures", "A new figure kind", _CLIENTS),\n'
    with edited(path, lambda original: original.replace(marker, marker + probe)):
        assert train_hashes(package, default_config) == base
        assert provenance.code_version("report", root=package) != report


def test_explain_hash_covers_its_model_only(package):
    base = {m: provenance.code_version("explain", {"model": m}, package) for m in ("tinyvgg", "lenet5")}
    path = package / "models" / "lenet.py"
    with edited(path, lambda original: original + EDIT):
        fresh(package)
        assert provenance.code_version("explain", {"model": "tinyvgg"}, package) == base["tinyvgg"]
        assert provenance.code_version("explain", {"model": "lenet5"}, package) != base["lenet5"]


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
if stage == "prepare_dataset":
    stages.prepare_dataset(cc.data_settings(cfg, "digits"), data)
elif stage == "split":
    stages.make_split(data, cc.split_settings(cfg, "nonoverlap-balanced"), 6, 0, split, name="nonoverlap-balanced")
elif stage == "train":
    stages.train(data, split, cc.run_settings(cfg, "digits", "ocfl-km"), 0, run)
elif stage == "evaluate":
    stages.evaluate(run, split / "manifest.json", root / "eval", cfg["report"])
elif stage == "whatif":
    stages.whatif(run, split / "manifest.json", root / "whatif.parquet", whatif, 0)
elif stage == "explain":
    stages.explain(data, split, run, cc.explain_settings(cfg, "digits", "ocfl-km"), 0, root / "explain", device="cpu")
print(json.dumps(sorted(m for m in sys.modules if m.startswith("cflcore") and m not in before)))
"""


def test_the_modules_a_stage_imports_at_run_time_are_in_its_hash(tmp_path):
    """The runtime oracle: every cflcore module a job imports while it runs (beyond what loading the config imported)
    is one whose source the job's hash covers, for the plug-ins it selects (train: its method and model; explain: its
    model). Runs the tiny config's ocfl-km run (digits, 6 clients, 3 rounds), each stage in a fresh process."""
    cfg = cc.validate_config(yaml.safe_load((Path(REPO) / "config" / "tiny.yaml").read_text()), plugins=False)
    selections = {"train": cc.run_plugins(cfg, "digits", "ocfl-km"), "explain": cc.explain_plugins(cfg, "digits", "ocfl-km")}
    fresh(Path(REPO) / "cflcore")
    for stage in ("prepare_dataset", "split", "train", "evaluate", "whatif", "explain"):
        p = subprocess.run([sys.executable, "-c", RUNTIME, stage, REPO, str(tmp_path)], capture_output=True,
                           text=True, timeout=300, cwd=REPO)
        assert p.returncode == 0, p.stderr[-3000:]
        loaded = json.loads(p.stdout.strip().splitlines()[-1])
        modules = provenance.job_modules(stage, selections.get(stage))
        # validation asks the loaders for their train sizes (cflcore.data.loaders.train_size) and the split
        # generators for their minimum, so the data and split stages' own modules are imported before the window
        # opens: for them, the hash must cover the modules they ran (checked below)
        assert loaded or stage in ("prepare_dataset", "split"), stage
        assert set(loaded) <= set(modules), (stage, set(loaded) - set(modules))
    assert "cflcore.data.loaders" in provenance.job_modules("prepare_dataset")
    assert "cflcore.data.splits" in provenance.job_modules("split")
    assert "cflcore.strategies.bnc" not in provenance.job_modules("train", selections["train"])
