"""Rerun only what changed: a config edit plans exactly the jobs it affects.

One small study (2 datasets x 2 splits x 1 client count x 2 algorithms) runs once; then dry runs with
a changed config must plan exactly the affected jobs. Which jobs Snakemake plans is read from the
dry run's per-job blocks (rule + wildcards)."""
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import copy_workflow, snakemake_cmd

pytestmark = pytest.mark.slow

BASE = {
    "results_dir": "results",
    "device": "cpu",
    "study": {"datasets": ["digits", "digitsb"], "splits": ["nb", "ob"], "clients": [6], "seeds": [0],
              "algorithms": ["bnc", "ocfl-km"]},
    "datasets": {
        "digits": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 32, "local_epochs": 1,
                   "rounds": 2, "explain_samples": 6},
        "digitsb": {"loader": "digits", "model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 32,
                    "local_epochs": 1, "rounds": 2, "explain_samples": 6},
    },
    "splits": {"nb": {"generator": "ocfl", "overlap": False, "imbalanced": False},
               "ob": {"generator": "ocfl", "overlap": True, "imbalanced": False}},
    "algorithms": {"bnc": {"method": "bnc"}, "ocfl-km": {"method": "ocfl", "clusterer": "kmeans", "k": "oracle"},
                   "ocfl-aff": {"method": "ocfl", "clusterer": "affinity"}},
    "engine": {"checkpoint_every": 1},
    "explain": {"step": 16, "grid_clients": [0, 1, 2]},
    # every run also writes TensorBoard event files: undeclared, like progress.jsonl
    "monitor": {"tensorboard": True},
}

JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")


def planned(stdout: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job in a dry run's output."""
    jobs, rule = [], None
    for line in stdout.splitlines():
        m = JOB.match(line.strip())
        if m:
            rule = m.group(1)
            jobs.append((rule, {}))
        elif rule and line.strip().startswith("wildcards:"):
            pairs = line.strip()[len("wildcards:"):].split(",")
            jobs[-1][1].update(dict(p.strip().split("=", 1) for p in pairs if "=" in p))
    return [(r, w) for r, w in jobs if r != "all"]


def sm(wd: Path, cfg: dict, *args: str) -> subprocess.CompletedProcess:
    path = wd / "config" / "rerun.yaml"
    path.write_text(yaml.safe_dump(cfg))
    p = subprocess.run(snakemake_cmd("--cores", "2", *args, "--configfile", str(path)), cwd=wd,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    return p


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    wd = Path(copy_workflow(tmp_path_factory.mktemp("rerun")))
    # the default config's study is replaced wholesale so only this grid is planned
    (wd / "config" / "config.yaml").write_text(yaml.safe_dump(BASE))
    sm(wd, BASE)
    return wd


def dry(wd: Path, cfg: dict) -> list[tuple[str, dict[str, str]]]:
    p = sm(wd, cfg, "-n")
    return planned(p.stdout + p.stderr)


def changed(**edits):
    import copy

    cfg = copy.deepcopy(BASE)
    for path, value in edits.items():
        node = cfg
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return cfg


def test_no_change_plans_nothing(study):
    assert dry(study, BASE) == []


def test_progress_records_and_event_files_plan_nothing(study):
    """A finished study with every run's progress record and TensorBoard event files (undeclared files)
    plans nothing; switching TensorBoard off (or on) retrains nothing either: it is no job's param."""
    from cflcore import layout
    from cflcore.config import study_runs, validate_config
    from cflcore.fl.progress import read_progress

    runs = [layout.run_id(**s, algorithm=a) for s, a in study_runs(validate_config(BASE))]
    assert len(runs) == 8
    for run in runs:
        rounds = read_progress(study / layout.progress_file("results", run))["rounds"]
        assert [r["round"] for r in rounds] == [0, 1], run
        assert list((study / layout.tensorboard_dir("results", run)).glob("events.out.tfevents.*")), run
    assert dry(study, BASE) == []
    assert dry(study, changed(monitor__tensorboard=False)) == []


def test_changed_algorithm_parameter_reruns_only_that_algorithm(study):
    cfg = {**BASE, "algorithms": {**BASE["algorithms"], "ocfl-km": {"method": "ocfl", "clusterer": "kmeans", "k": 2}}}
    jobs = dry(study, cfg)
    rules = sorted({r for r, _ in jobs})
    # evaluate replays the run's own clusterer too; the report's parts reading these runs' files rerun (rules/report.smk),
    # report_late_clients (no late-joining runs here) does not
    assert rules == ["evaluate", "explain", "report", "report_explain", "report_figures", "report_tables",
                     "report_whatif", "train"]
    assert {w["algorithm"] for r, w in jobs if not r.startswith("report")} == {"ocfl-km"}
    assert sum(r == "train" for r, _ in jobs) == 4  # 2 datasets x 2 splits


def test_added_algorithm_plans_only_its_jobs(study):
    cfg = changed(study__algorithms=["bnc", "ocfl-km", "ocfl-aff"])
    jobs = dry(study, cfg)
    assert {w["algorithm"] for r, w in jobs if not r.startswith("report")} == {"ocfl-aff"}
    assert sum(r == "train" for r, _ in jobs) == 4
    assert sum(r == "report" for r, _ in jobs) == 1


def test_changed_split_parameter_reruns_only_its_scenarios(study):
    cfg = changed(splits__ob={"generator": "ocfl", "overlap": True, "imbalanced": False, "local_test_fraction": 0.4})
    jobs = dry(study, cfg)
    assert {w["split"] for r, w in jobs if not r.startswith("report")} == {"ob"}
    assert sum(r == "split" for r, _ in jobs) == 2 and sum(r == "train" for r, _ in jobs) == 4
    assert not any(r == "prepare_dataset" for r, _ in jobs)


def test_changed_dataset_training_setting_reruns_only_that_dataset(study):
    cfg = changed(datasets__digitsb__lr=0.02)
    jobs = dry(study, cfg)
    assert {w["dataset"] for r, w in jobs if not r.startswith("report")} == {"digitsb"}
    assert sum(r == "train" for r, _ in jobs) == 4
    assert not any(r in ("prepare_dataset", "split") for r, _ in jobs)
