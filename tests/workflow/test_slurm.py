"""The workflow on a real single-node SLURM cluster: one submission per run, each asking for a GPU, outputs equal
to a local run's, and a timed-out train job resumed from its checkpoint.

A session fixture brings SLURM up with ``.ci/slurm-up.sh`` (munge, MariaDB, slurmdbd, slurmctld,
slurmd, two fake GPUs through GRES) and always tears it down with ``.ci/slurm-down.sh``. Where SLURM
cannot be brought up (not root, no apt, exit code 3) every SLURM test is SKIPPED with the script's
one-line reason, never passed; under ``CI=true`` they FAIL with that reason instead (SLURM comes up on the
CI machine type, ../shared/reference/slurm.md, so a skip there hides a broken bring-up or profile), and
``.ci/run`` also fails on any skipped SLURM test, listing the reasons.

Checked:
* the tiny study submitted with ``profiles/slurm`` runs as SLURM jobs that ``sacct`` lists, ``train``
  and ``explain`` jobs hold a GPU (``gres/gpu`` in ReqTRES/AllocTRES), and every Parquet file under
  ``results/`` is bit-identical to the one of a local ``snakemake --cores 2`` run (server.parquet:
  equal once its wall-clock ``seconds`` column is dropped; models.pt: equal tensors);
* a ``train`` job killed at its SLURM time limit (cut to 1 minute with ``scontrol`` once it has
  written a checkpoint) ends in TIMEOUT, is resubmitted by Snakemake, its log says "resuming from
  checkpoint", and its outputs equal an uninterrupted local run;
* ``.ci/slurm-up.sh`` is idempotent, and both profiles are accepted by Snakemake (dry run).

The CI node has 2 CPUs, so the tests use ``profiles/slurm`` with ``cpus_per_task: 1`` and 5-second
status checks (profiles/slurm-ci, written into the copied workflow); everything else is the shipped
profile. Runs: ``OMP_NUM_THREADS=1 python -m pytest -m slurm tests/workflow/test_slurm.py`` (648 s measured on the
shared 2-core machine at load average 3-4; the tiny study alone takes ~10 min on SLURM there).
"""
from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator, Mapping, NoReturn, Sequence

import pyarrow.parquet as pq
import pytest
import torch
import yaml

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SLURM_UP = REPO / ".ci" / "slurm-up.sh"
SLURM_DOWN = REPO / ".ci" / "slurm-down.sh"
UNAVAILABLE_EXIT_CODE = 3  # slurm-up.sh: SLURM cannot be brought up on this machine
WORKFLOW_ITEMS = ("Snakefile", "rules", "workflow_scripts", "config", "profiles", "report")
REQUIRED_WORKFLOW_ITEMS = ("Snakefile", "rules", "workflow_scripts", "config")
TINY_CONFIG = "config/tiny.yaml"
CI_PROFILE = "profiles/slurm-ci"
GPU_RULES = frozenset({"train", "explain"})
# Wall-clock columns: the only values allowed to differ between two runs of the same study
# (server.parquet "seconds", docs/architecture.md §3). Everything else must be identical.
WALL_CLOCK_COLUMNS = frozenset({"seconds"})
# per snakemake call; the tiny study took 11 min on SLURM with the 2 shared cores at load 4-8
SNAKEMAKE_TIMEOUT_S = 900
# Training work (seconds, from the tiny run's per-round time) of the time-limit test's train job:
# well above the at most ~90 s between its first checkpoint and SLURM killing it at a 1-minute
# limit, so the first attempt always times out with work left for the second.
TIMEOUT_TEST_WORK_S = 150.0
RESUME_MESSAGE = "resuming from checkpoint"


# ---------------------------------------------------------------------------------------------
# state


@dataclass(frozen=True)
class SlurmCluster:
    env: dict[str, str]
    state_dir: Path
    bringup_seconds: float


@dataclass(frozen=True)
class SacctJob:
    job_id: int
    name: str
    state: str
    req_tres: str
    alloc_tres: str
    comment: str


@dataclass(frozen=True)
class WorkflowRun:
    workdir: Path
    returncode: int
    output: str
    seconds: float

    @property
    def results(self) -> Path:
        return self.workdir / "results"


@dataclass(frozen=True)
class TimeLimitRuns:
    """The time-limit study: one long train job on SLURM (cut) and the same run locally."""
    slurm: WorkflowRun
    local: WorkflowRun
    run: str
    rounds: int
    cut_job: int


@dataclass(frozen=True)
class Studies:
    tiny_slurm: WorkflowRun
    tiny_local: WorkflowRun
    time_limit: TimeLimitRuns
    started: str  # sacct -S value taken before the first submission


# ---------------------------------------------------------------------------------------------
# helpers


def run_script(script: Path, env: Mapping[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script)], env=dict(env), capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL)


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def tail(text: str, n: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def copy_workflow(dest: Path) -> Path:
    """Copy the workflow (symlinks resolved, e.g. config/schema.yaml) into ``dest``."""
    missing = [n for n in REQUIRED_WORKFLOW_ITEMS if not (REPO / n).exists()]
    if missing:
        pytest.fail(f"workflow incomplete in {REPO}: missing {', '.join(missing)}")
    dest.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_ITEMS:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "slurm-ci"))
        elif src.exists():
            shutil.copy2(src, dest / name)
    return dest


def ci_profile(base: Mapping[str, Any], retries: int | None = None) -> dict[str, Any]:
    """``profiles/slurm`` for the 2-CPU CI node: 1 CPU per job, 5-second status checks."""
    profile = yaml.safe_load(yaml.safe_dump(dict(base)))
    for resources in profile["set-resources"].values():
        resources["cpus_per_task"] = 1
    profile["default-resources"]["cpus_per_task"] = 1
    profile["seconds-between-status-checks"] = 5
    profile["latency-wait"] = 10
    if retries is not None:
        profile["retries"] = retries
    return profile


def write_ci_profile(workdir: Path, **overrides: Any) -> str:
    base = yaml.safe_load((workdir / "profiles" / "slurm" / "config.yaml").read_text())
    folder = workdir / CI_PROFILE
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(ci_profile(base, **overrides), sort_keys=False))
    return CI_PROFILE


def snakemake_command(args: Sequence[str], timeout_s: int) -> list[str]:
    """SIGINT on timeout: it makes snakemake cancel its SLURM jobs (SIGTERM would leave them)."""
    return ["timeout", "-s", "INT", "--kill-after=60", str(timeout_s), sys.executable, "-m", "snakemake", *args]


def start_snakemake(workdir: Path, args: Sequence[str], timeout_s: int = SNAKEMAKE_TIMEOUT_S
                    ) -> tuple[subprocess.Popen, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("CFL_TEST_KILL_AFTER_ROUND", None)
    log = open(workdir / "snakemake.out", "w")
    proc = subprocess.Popen(snakemake_command(args, timeout_s), cwd=workdir, env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    return proc, time.monotonic()


def interrupt_all(procs: Sequence[subprocess.Popen]) -> None:
    """SIGINT every still-running snakemake (``timeout`` passes it on): it cancels its SLURM jobs."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()


def finish_snakemake(workdir: Path, proc: subprocess.Popen, t0: float) -> WorkflowRun:
    returncode = proc.wait(timeout=SNAKEMAKE_TIMEOUT_S + 120)
    return WorkflowRun(workdir, returncode, (workdir / "snakemake.out").read_text(), time.monotonic() - t0)


def require_success(run: WorkflowRun, what: str) -> None:
    if run.returncode != 0:
        pytest.fail(f"{what} failed (exit {run.returncode}) in {run.workdir}:\n{tail(run.output)}")


def sacct_now() -> str:
    return datetime.now().strftime("%Y-%m-%dT%H:%M:%S")


def sacct_jobs(since: str) -> dict[int, SacctJob]:
    """Allocations (no steps) since ``since``, by job id."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-a", "-S", since,
         "-o", "JobID,JobName,State,ReqTRES,AllocTRES,Comment"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    jobs = {}
    for line in out.splitlines():
        fields = line.split("|", 5)
        if len(fields) == 6 and fields[0].isdigit():
            jobs[int(fields[0])] = SacctJob(int(fields[0]), fields[1], fields[2].split()[0], fields[3],
                                            fields[4], fields[5])
    return jobs


def submitted_jobs(workdir: Path) -> dict[int, str]:
    """SLURM job id -> rule, or ``group_<name>`` for a group job, from the executor's per-job logs
    (.snakemake/slurm_logs/rule_<rule>/<wildcards>/<jobid>.log, .snakemake/slurm_logs/group_<name>/<jobid>.log; a
    group job's name is its group id and its rules, e.g. group_run_evaluate_explain_train)."""
    jobs = {}
    root = workdir / ".snakemake" / "slurm_logs"
    for log in [*root.glob("rule_*/**/*.log"), *root.glob("group_*/**/*.log")]:
        kind = log.relative_to(root).parts[0]
        if log.stem.isdigit():
            jobs[int(log.stem)] = kind[len("rule_"):] if kind.startswith("rule_") else kind
    return jobs


def runs_train(kind: str) -> bool:
    """A submitted job (rule or group, as submitted_jobs names it) that runs rule train."""
    return kind == "train" or (kind.startswith("group_") and "_train" in kind)


def output_files(results: Path) -> dict[str, Path]:
    """Parquet files and models.pt under ``results/`` by relative path (checkpoints excluded)."""
    files = {}
    for path in results.rglob("*"):
        rel = path.relative_to(results)
        if path.is_file() and "checkpoints" not in rel.parts and (path.suffix == ".parquet" or path.name == "models.pt"):
            files[str(rel)] = path
    return files


def parquet_difference(a: Path, b: Path) -> str | None:
    """None when the files are byte-identical, or when they hold a wall-clock column and are equal
    (values, types, schema metadata) once the WALL_CLOCK_COLUMNS are dropped; else one line."""
    if a.read_bytes() == b.read_bytes():
        return None
    ta, tb = pq.read_table(a), pq.read_table(b)
    if ta.column_names != tb.column_names:
        return f"columns {ta.column_names} != {tb.column_names}"
    keep = [c for c in ta.column_names if c not in WALL_CLOCK_COLUMNS]
    if len(keep) == len(ta.column_names):
        bad = [c for c in keep if not ta.column(c).equals(tb.column(c))]
        return f"not bit-identical (columns differing: {bad or 'none; metadata or encoding'})"
    ta, tb = ta.select(keep), tb.select(keep)
    if not ta.equals(tb, check_metadata=True):
        bad = [c for c in keep if not ta.column(c).equals(tb.column(c))]
        return f"columns differ: {bad or 'schema metadata'}"
    return None


def leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every non-container value in nested dicts / lists."""
    if isinstance(obj, Mapping):
        for k in sorted(obj, key=str):
            yield from leaves(obj[k], f"{prefix}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{prefix}/{i}")
    else:
        yield prefix, obj


def same_leaf(a: Any, b: Any) -> bool:
    if torch.is_tensor(a) or torch.is_tensor(b):
        return (torch.is_tensor(a) and torch.is_tensor(b) and a.dtype == b.dtype
                and a.shape == b.shape and torch.equal(a, b))
    return a == b


def models_difference(a: Path, b: Path) -> str | None:
    """Compare two models.pt files leaf by leaf: tensors exactly, wall-clock keys skipped."""
    if a.read_bytes() == b.read_bytes():
        return None
    la = dict(leaves(torch.load(a, weights_only=True, map_location="cpu")))
    lb = dict(leaves(torch.load(b, weights_only=True, map_location="cpu")))
    if la.keys() != lb.keys():
        return f"keys differ: {sorted(la.keys() ^ lb.keys())[:5]}"
    for key, value in la.items():
        if key.rsplit("/", 1)[-1] not in WALL_CLOCK_COLUMNS and not same_leaf(value, lb[key]):
            return f"{key} differs"
    return None


def output_differences(results_a: Path, results_b: Path) -> list[str]:
    files_a, files_b = output_files(results_a), output_files(results_b)
    if not files_a:
        return [f"no Parquet files or models.pt under {results_a}"]
    problems = [f"only in one run: {p}" for p in sorted(files_a.keys() ^ files_b.keys())]
    for rel in sorted(files_a.keys() & files_b.keys()):
        compare = models_difference if rel.endswith("models.pt") else parquet_difference
        why = compare(files_a[rel], files_b[rel])
        if why:
            problems.append(f"{rel}: {why}")
    return problems


def logs_of_rule(workdir: Path, rule: str) -> str:
    """Text of the rule's own logs (results/logs/<rule>/...) and of its SLURM job logs."""
    paths = list((workdir / "results" / "logs" / rule).rglob("*.log"))
    paths += list((workdir / ".snakemake" / "slurm_logs" / f"rule_{rule}").rglob("*.log"))
    paths += [p for p in (workdir / ".snakemake" / "slurm_logs").glob("group_*/**/*.log") if f"_{rule}" in str(p)]
    return "\n".join(p.read_text(errors="replace") for p in sorted(paths))


def load_yaml(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def run_ids(config: Mapping[str, Any]) -> list[str]:
    from cflcore.config import scenarios
    from cflcore.layout import scenario_id

    algorithms = config["study"].get("algorithms") or list(config["algorithms"])
    return [f"{scenario_id(**s)}/{a}" for s in scenarios(config) for a in algorithms]


def seconds_per_round(results: Path, run: str, rounds: int) -> float:
    """Fastest round of ``run`` in seconds (server.parquet), else its benchmark / rounds: the
    smaller the estimate, the more rounds the time-limit study gets (it must outlast the limit)."""
    server = results / "runs" / run / "server.parquet"
    if server.exists():
        table = pq.read_table(server)
        if "seconds" in table.column_names and table.num_rows:
            values = sorted(v for v in table.column("seconds").to_pylist() if v is not None)
            if values:
                return float(values[0])
    bench = results / "benchmarks" / "train" / f"{run}.tsv"
    header, row = bench.read_text().splitlines()[:2]
    return float(dict(zip(header.split("\t"), row.split("\t")))["s"]) / rounds


# ---------------------------------------------------------------------------------------------
# fixtures


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def unavailable(reason: str) -> NoReturn:
    """SLURM cannot be brought up here: skip with ``reason``, except under ``CI=true``, where that is a failure
    (SLURM comes up on the CI machine type, so a skip would let CI pass with every real-SLURM test unrun)."""
    if under_ci():
        pytest.fail(f"CI=true but SLURM could not be brought up, so the real-SLURM tests cannot run "
                    f"(they must on the CI machine type): {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def workspace() -> Iterator[Path]:
    """Own folder for workflow copies and SLURM state. Not pytest's tmp_path: concurrent pytest
    sessions of the same user prune each other's old basetemp folders while jobs still run."""
    folder = Path(tempfile.mkdtemp(prefix="cfl-slurm-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def new_dir(workspace: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=workspace))


@pytest.fixture(scope="session")
def slurm_cluster(workspace: Path, request: pytest.FixtureRequest) -> SlurmCluster:
    """SLURM brought up for this session and ALWAYS torn down (daemons this session started)."""
    state_dir = new_dir(workspace, "state")
    env = {**os.environ, "CFL_SLURM_STATE": str(state_dir)}

    def teardown() -> None:
        down = run_script(SLURM_DOWN, env, timeout_s=180)
        if down.returncode != 0:
            raise RuntimeError(f"slurm-down.sh failed ({down.returncode}): {tail(down.stdout + down.stderr)}")

    request.addfinalizer(teardown)  # registered first: a half-started cluster is stopped too
    t0 = time.monotonic()
    up = run_script(SLURM_UP, env, timeout_s=900)  # may include apt-get install
    seconds = time.monotonic() - t0
    if up.returncode == UNAVAILABLE_EXIT_CODE:
        unavailable(last_line(up.stdout) or "slurm-up.sh: SLURM unavailable")
    if up.returncode != 0:
        pytest.fail(f"slurm-up.sh failed ({up.returncode}):\n{tail(up.stdout + up.stderr)}")
    print(f"\nSLURM bring-up: {seconds:.1f} s; {last_line(up.stdout)}")
    return SlurmCluster(env=env, state_dir=state_dir, bringup_seconds=seconds)


def time_limit_config(tiny: Mapping[str, Any], local_results: Path) -> tuple[dict[str, Any], str, str]:
    """The tiny study cut to one OCFL run (strategy state is checkpointed too) with enough rounds
    for TIMEOUT_TEST_WORK_S seconds of training at the tiny run's fastest measured round."""
    dataset = tiny["study"]["datasets"][0]
    algorithms = tiny["study"].get("algorithms") or list(tiny["algorithms"])
    algorithm = next((a for a in algorithms if tiny["algorithms"][a]["method"] == "ocfl"), algorithms[0])
    tiny_run = next(r for r in run_ids(tiny) if r.startswith(f"{dataset}/") and r.endswith(f"/{algorithm}"))
    per_round = seconds_per_round(local_results, tiny_run, tiny["datasets"][dataset]["rounds"])
    rounds = max(10, math.ceil(TIMEOUT_TEST_WORK_S / max(per_round, 1e-3)))
    config = yaml.safe_load(yaml.safe_dump(dict(tiny)))
    config["study"].update(datasets=[dataset], algorithms=[algorithm])
    config["datasets"][dataset]["rounds"] = rounds
    config.setdefault("engine", {})["checkpoint_every"] = max(1, rounds // 40)
    run = next(r for r in run_ids(config) if r.endswith(f"/{algorithm}"))
    return config, run, dataset


def cut_time_limit_after_first_checkpoint(workdir: Path, run: str, proc: subprocess.Popen,
                                          timeout_s: float) -> int:
    """Once the run's first checkpoint exists, set its train job's SLURM time limit to 1 minute
    (``scontrol update``), so SLURM kills it with TIMEOUT however long the job took to start."""
    checkpoints = workdir / "results" / "runs" / run / "checkpoints"
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        train_jobs = [job for job, kind in submitted_jobs(workdir).items() if runs_train(kind)]
        if train_jobs and any(checkpoints.glob("*.pt")):
            job = max(train_jobs)
            subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=1"], check=True,
                           capture_output=True, text=True, timeout=30)
            return job
        time.sleep(1)
    out = tail((workdir / "snakemake.out").read_text())
    pytest.fail(f"no checkpoint of {run} while its train job ran (snakemake exit {proc.poll()}):\n{out}")


@pytest.fixture(scope="module")
def studies(slurm_cluster: SlurmCluster, workspace: Path) -> Studies:
    """Four snakemake runs, overlapped to save wall time on the 2-CPU node:
    1. the tiny study on SLURM (profiles/slurm) and locally (--cores 2), side by side;
    2. once the local one is done (it calibrates the round time): the time-limit study, on SLURM
       with retries: 1 and locally, its dataset and split copied from the local tiny run."""
    tiny_slurm_dir = copy_workflow(new_dir(workspace, "tiny-slurm"))
    tiny_local_dir = copy_workflow(new_dir(workspace, "tiny-local"))
    started = sacct_now()
    procs: list[subprocess.Popen] = []
    try:
        tiny_slurm = start_snakemake(tiny_slurm_dir, ["--profile", write_ci_profile(tiny_slurm_dir),
                                                      "--configfile", TINY_CONFIG])
        tiny_local = start_snakemake(tiny_local_dir, ["--cores", "2", "--configfile", TINY_CONFIG])
        procs += [tiny_slurm[0], tiny_local[0]]
        tiny_local_run = finish_snakemake(tiny_local_dir, *tiny_local)
        require_success(tiny_local_run, "snakemake --cores 2 (tiny)")

        config, run, dataset = time_limit_config(load_yaml(tiny_local_dir / TINY_CONFIG), tiny_local_run.results)
        scenario = run.rsplit("/", 1)[0]
        target = f"results/runs/{run}/history.parquet"
        dirs = {}
        for kind in ("slurm", "local"):
            workdir = copy_workflow(new_dir(workspace, f"time-limit-{kind}"))
            (workdir / "config" / "long.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            for part in (f"data/{dataset}.parquet", f"splits/{scenario}"):  # copies keep their mtimes
                src, dst = tiny_local_run.results / part, workdir / "results" / part
                dst.parent.mkdir(parents=True, exist_ok=True)
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
            dirs[kind] = workdir
        # the target goes first: --configfile takes several values
        long_slurm = start_snakemake(dirs["slurm"], [target, "--profile", write_ci_profile(dirs["slurm"], retries=1),
                                                     "--configfile", "config/long.yaml"])
        long_local = start_snakemake(dirs["local"], [target, "--cores", "2", "--configfile", "config/long.yaml"])
        procs += [long_slurm[0], long_local[0]]
        cut_job = cut_time_limit_after_first_checkpoint(dirs["slurm"], run, long_slurm[0], SNAKEMAKE_TIMEOUT_S)
        time_limit = TimeLimitRuns(finish_snakemake(dirs["slurm"], *long_slurm),
                                   finish_snakemake(dirs["local"], *long_local),
                                   run, config["datasets"][dataset]["rounds"], cut_job)
        result = Studies(finish_snakemake(tiny_slurm_dir, *tiny_slurm), tiny_local_run, time_limit, started)
    finally:
        interrupt_all(procs)  # no-op when all finished; after a failure, stops the others
    print(f"\ntiny study: SLURM {result.tiny_slurm.seconds:.0f} s, local {result.tiny_local.seconds:.0f} s; "
          f"time-limit study ({time_limit.rounds} rounds): SLURM {time_limit.slurm.seconds:.0f} s, "
          f"local {time_limit.local.seconds:.0f} s")
    return result


# ---------------------------------------------------------------------------------------------
# tests


@pytest.mark.slurm
def test_bringup_is_idempotent(slurm_cluster: SlurmCluster) -> None:
    pids_file = slurm_cluster.state_dir / "pids"
    before = pids_file.read_text() if pids_file.exists() else ""
    again = run_script(SLURM_UP, slurm_cluster.env, timeout_s=120)
    assert again.returncode == 0, tail(again.stdout + again.stderr)
    assert "started" not in again.stdout, again.stdout
    assert (pids_file.read_text() if pids_file.exists() else "") == before
    assert subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True).stdout.split()[0] in ("idle", "mix", "alloc")


@pytest.mark.slurm
def test_one_submission_per_run_and_runs_ask_for_a_gpu(studies: Studies) -> None:
    require_success(studies.tiny_slurm, "snakemake --profile profiles/slurm (tiny)")
    submitted = submitted_jobs(studies.tiny_slurm.workdir)
    assert submitted, "no SLURM job logs under .snakemake/slurm_logs"
    accounted = sacct_jobs(studies.started)
    missing = sorted(set(submitted) - set(accounted))
    assert not missing, f"jobs not in sacct: {missing}"
    config = load_yaml(studies.tiny_slurm.workdir / TINY_CONFIG)
    # one submission per run: its train, evaluate and explain jobs in one group job (group "run"); split is local
    groups = sorted(kind for kind in submitted.values() if kind.startswith("group_"))
    assert len(groups) == len(run_ids(config)), (sorted(submitted.items()), run_ids(config))
    assert all(runs_train(g) and "_evaluate" in g and "_explain" in g for g in groups), groups
    # the report's parts (rules/report.smk) and the gathering `report` are one submission each
    report_rules = ["report", "report_explain", "report_figures", "report_late_clients", "report_tables", "report_whatif"]
    assert sorted(k for k in submitted.values() if not k.startswith("group_")) == ["prepare_dataset", *report_rules]
    for job_id, kind in submitted.items():
        job = accounted[job_id]
        assert job.state == "COMPLETED", (kind, job)
        assert job.name.startswith("cfl_"), job
        assert job.comment.startswith(f"rule_{kind.removeprefix('group_')}"), job  # group: rule_run_evaluate_...
        has_gpu = "gres/gpu=1" in job.req_tres and "gres/gpu=1" in job.alloc_tres
        assert has_gpu == (kind in GPU_RULES or kind.startswith("group_")), (kind, job)


@pytest.mark.slurm
def test_slurm_outputs_equal_local_run(studies: Studies) -> None:
    require_success(studies.tiny_slurm, "snakemake --profile profiles/slurm (tiny)")
    files = output_files(studies.tiny_slurm.results)
    assert any(p.endswith("history.parquet") for p in files), sorted(files)
    problems = output_differences(studies.tiny_slurm.results, studies.tiny_local.results)
    assert not problems, "\n".join(problems)


@pytest.mark.slurm
def test_timed_out_train_job_resumes_from_checkpoint(studies: Studies) -> None:
    """A long train job hits its SLURM time limit (cut to 1 minute once it has written a
    checkpoint) and ends in TIMEOUT; Snakemake resubmits it (retries: 1); the new job resumes from
    the newest checkpoint (docs/architecture.md §5 step 5) and its outputs equal an uninterrupted local run."""
    runs = studies.time_limit
    require_success(runs.local, "uninterrupted local run")
    require_success(runs.slurm, "SLURM run whose train job hit its time limit")
    accounted = sacct_jobs(studies.started)
    train_jobs = sorted(j for j, kind in submitted_jobs(runs.slurm.workdir).items() if runs_train(kind))
    states = [accounted[j].state for j in train_jobs]
    assert train_jobs[0] == runs.cut_job, (train_jobs, runs.cut_job)
    assert states != ["COMPLETED"], (
        f"train finished before SLURM killed it ({runs.rounds} rounds): raise TIMEOUT_TEST_WORK_S")
    assert states == ["TIMEOUT", "COMPLETED"], states
    assert RESUME_MESSAGE in logs_of_rule(runs.slurm.workdir, "train").lower()
    problems = output_differences(runs.slurm.results / "runs", runs.local.results / "runs")
    assert not problems, "\n".join(problems)


def test_unavailable_slurm_skips_locally_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the session fixture does when slurm-up.sh exits 3 (no real SLURM needed to check it)."""
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="slurm-up: unavailable: not root"):
        unavailable("slurm-up: unavailable: not root")
    for value in ("true", "TRUE", "1"):
        monkeypatch.setenv("CI", value)
        with pytest.raises(pytest.fail.Exception, match="CI=true but SLURM could not be brought up.*not root"):
            unavailable("slurm-up: unavailable: not root")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        unavailable("slurm-up: unavailable: not root")


def test_profiles_are_accepted_by_snakemake(tmp_path: Path) -> None:
    """Dry runs with both shipped profiles: an unknown key or a bad value makes snakemake refuse."""
    workdir = copy_workflow(tmp_path / "wf")
    for profile, expect in (("profiles/slurm", "gpu=1"), ("profiles/gpu-workstation", "gpu_slots=1")):
        out = subprocess.run(snakemake_command(["--profile", profile, "--configfile", TINY_CONFIG, "-n"], 120),
                             cwd=workdir, capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        text = out.stdout + out.stderr
        assert out.returncode == 0, f"{profile}:\n{tail(text)}"
        train_blocks = re.findall(r"rule train:.*?(?:\n\n|\Z)", text, flags=re.S)
        assert train_blocks and all(expect in block for block in train_blocks), f"{profile}:\n{tail(text)}"
