"""One run layout: cflcore.layout formats and parses run ids and builds every output path; the
paths are the ones the workflow always used."""
import ast
from pathlib import Path

import pytest

from cflcore import filenames, layout
from cflcore.errors import CflError
from conftest import REPO

SWEPT = ("mnist5k", "ocfl@overlap=true,alpha=0.5", 15, 3, "louvain@resolution=0.5,k=1.5")


def test_run_ids_round_trip_with_sweep_names():
    run = layout.run_id(*SWEPT)
    assert run == "mnist5k/ocfl@overlap=true,alpha=0.5/n15/s3/louvain@resolution=0.5,k=1.5"
    ref = layout.parse_run_id(run)
    assert (ref.dataset, ref.split, ref.clients, ref.seed, ref.algorithm) == SWEPT
    assert ref.run == run and ref.scenario == "mnist5k/ocfl@overlap=true,alpha=0.5/n15/s3"
    assert layout.parse_scenario_id(ref.scenario).algorithm is None
    for bad in ("mnist5k/nb/n15/s3", "mnist5k/nb/15/s3/bnc", "mnist5k/nb/n15/s3/bnc/x", "mnist5k/nb/nX/s3/bnc"):
        with pytest.raises(CflError, match="is not a run id; allowed: {dataset}/{split}/n{clients}/s{seed}/{algorithm}"):
            layout.parse_run_id(bad)


def test_paths_are_the_workflows():
    r, run, scen = "results", "d/s/n6/s0/a", "d/s/n6/s0"
    assert layout.dataset_file(r, "d") == "results/data/d.parquet"
    assert layout.split_file(r, scen, "manifest.json") == "results/splits/d/s/n6/s0/manifest.json"
    assert layout.run_outputs(r, run) == {n.split(".")[0]: f"results/runs/d/s/n6/s0/a/{n}" for n in filenames.RUN_OUTPUTS}
    assert set(layout.run_outputs(r, run)) == {"history", "server", "gram", "divergence", "traffic", "models", "status"}
    assert layout.eval_file(r, run, filenames.WHATIF) == "results/eval/d/s/n6/s0/a/whatif.parquet"
    assert layout.explain_file(r, run, "insdel.parquet") == "results/explain/d/s/n6/s0/a/insdel.parquet"
    assert layout.log_file(r, "train", run) == "results/logs/train/d/s/n6/s0/a.log"
    assert layout.benchmark_file(r, "split", scen) == "results/benchmarks/split/d/s/n6/s0.tsv"
    assert layout.report_dir(r) == "results/report"
    # the path functions take Snakemake's wildcard patterns as they take ids
    assert layout.run_file(r, layout.RUN_PATTERN, "models.pt") == \
        "results/runs/{dataset}/{split}/n{clients}/s{seed}/{algorithm}/models.pt"
    assert sorted(Path("/x/runs").glob(layout.run_status_glob())) == []  # a glob with one * per id segment
    assert layout.run_status_glob() == "*/*/*/*/*/status.json"
    assert layout.progress_file(r, run) == "results/runs/d/s/n6/s0/a/progress.jsonl"
    assert layout.failures_file(r, run) == "results/runs/d/s/n6/s0/a/failures.jsonl"
    assert layout.checkpoints_dir(r, run) == "results/runs/d/s/n6/s0/a/checkpoints"
    assert layout.tensorboard_dir(r, run) == "results/tensorboard/d/s/n6/s0/a"
    assert layout.input_file(r, scen, "centralised_update_norms/epoch") == "results/splits/d/s/n6/s0/scl_proxy-epoch.parquet"


def test_file_names_have_one_home():
    """cflcore.filenames holds names only (it imports nothing, so a stage importing it widens no code hash); no other
    module of the package, rule or adapter spells a name it holds."""
    repo = Path(REPO)
    tree = ast.parse((repo / "cflcore" / "filenames.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
    names = {v for k, v in vars(filenames).items() if k.isupper() and isinstance(v, str)}
    assert len(names) == len([k for k, v in vars(filenames).items() if k.isupper() and isinstance(v, str)])
    sources = [*(repo / "cflcore").rglob("*.py"), *(repo / "rules").glob("*.smk"), *(repo / "workflow_scripts").glob("*.py")]
    spelled = {}
    for path in sources:
        if path.name == "filenames.py" or "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())) if path.suffix == ".py" else ():
            if isinstance(node, ast.Constant) and node.value in names:
                spelled.setdefault(node.value, []).append(str(path.relative_to(repo)))
        if path.suffix == ".smk":
            for name in names:
                if f'"{name}"' in path.read_text():
                    spelled.setdefault(name, []).append(str(path.relative_to(repo)))
    assert not spelled, spelled


def test_every_catalogued_kind_has_a_caption_and_every_caption_a_kind():
    from cflcore.report import catalogue

    captions = Path(REPO) / "report" / "captions"
    named = {o.caption for o in catalogue.OUTPUTS.values()}
    for name in named:
        assert (captions / f"{name}.rst").is_file(), name
    assert {p.stem for p in captions.glob("*.rst")} == named  # no caption of a kind that no longer exists


def test_no_run_path_is_built_outside_the_layout():
    """No module of cflcore but the layout spells a results sub-folder into a path or parses a run id by hand."""
    offenders = []
    for path in sorted((Path(REPO) / "cflcore").rglob("*.py")):
        if path.name == "layout.py" and path.parent.name == "cflcore":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if any(f"/{d}/" in text or text.startswith(f"{d}/") for d in ("runs", "eval", "explain", "splits")) \
                        or "/n{" in ast.unparse(node):
                    offenders.append(f"{path.name}:{node.lineno}")
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
                    and node.right.value in ("runs", "eval", "explain", "splits")):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
