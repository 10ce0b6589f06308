"""Shared test set-up: one thread per test process (the machine has 2 cores), headless matplotlib."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The suite runs on two xdist workers, a test file to one worker (pyproject.toml: `-n 2 --dist loadfile`), so a
# module-scoped fixture (a trained study, a SLURM cluster) is built once. The session-scoped `mnist_study` below is
# built once per worker that uses it.


def pytest_configure(config) -> None:
    """Where SLURM's commands are installed but no controller answers, the SLURM executor plugin (a test extra)
    runs `scontrol show config` at every Snakemake start and waits 9-10 s for it (measured here: 9.0 s). In a run
    without the real-SLURM tests (`-m "not slurm"`, the default), a `scontrol` that fails at once comes first on
    PATH, so the plugin sees no SLURM straight away; the SLURM tests (`-m slurm`) use the real one."""
    if "not slurm" not in (config.option.markexpr or "") or os.environ.get("CFL_TEST_NO_SCONTROL_SHIM"):
        return
    if os.environ.get("CFL_TEST_SCONTROL_SHIM"):  # an xdist worker: the controller's shim is on its PATH already
        return
    import shutil
    import tempfile
    from pathlib import Path

    shim = Path(tempfile.mkdtemp(prefix="cfl-no-slurm-"))
    (shim / "scontrol").write_text("#!/bin/sh\necho 'no SLURM in this test run' >&2\nexit 1\n")
    (shim / "scontrol").chmod(0o755)
    os.environ["CFL_TEST_SCONTROL_SHIM"] = str(shim)
    os.environ["PATH"] = f"{shim}{os.pathsep}{os.environ.get('PATH', '')}"
    config.add_cleanup(lambda: shutil.rmtree(shim, ignore_errors=True))


REQUIRE_GPU_ENV = "CFL_REQUIRE_GPU"
"""``CFL_REQUIRE_GPU=1`` (.ci/run sets it where ``nvidia-smi -L`` lists a GPU): a test marked ``gpu`` that skips fails
instead, unless its reason starts with ``control:`` (a control run that happened to agree on this card,
tests/fl/test_gpu.py), so a GPU host whose CUDA is broken cannot pass by skipping."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and os.environ.get(REQUIRE_GPU_ENV) == "1" and item.get_closest_marker("gpu")):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if reason.removeprefix("Skipped: ").startswith("control:"):
        return
    report.outcome = "failed"
    report.longrepr = f"{REQUIRE_GPU_ENV}=1: a GPU test was skipped ({reason})"


@pytest.fixture(scope="session")
def repo_root() -> str:
    return REPO


WORKFLOW_PARTS = ("Snakefile", "rules", "workflow_scripts", "config", "report", "profiles")


def copy_workflow(dest) -> str:
    """Copy the workflow files (not results) into ``dest`` so a test can run Snakemake there."""
    import shutil
    from pathlib import Path

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for part in WORKFLOW_PARTS:
        src = Path(REPO) / part
        if src.is_dir():
            shutil.copytree(src, dest / part, symlinks=True, dirs_exist_ok=True)
        elif src.exists():
            shutil.copy2(src, dest / part)
    # config/schema.yaml is a symlink into the package: make it absolute for the copy
    link = dest / "config" / "schema.yaml"
    if link.is_symlink():
        link.unlink()
        link.symlink_to(Path(REPO) / "cflcore" / "schemas" / "config.schema.yaml")
    return str(dest)


def snakemake_cmd(*args: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "snakemake", *args]


@pytest.fixture
def workflow_dir(tmp_path):
    return copy_workflow(tmp_path / "wf")


# ---------------------------------------------------------------------------------------------
# Real MNIST-5k, trained once per session (tests/workflow/test_end_to_end.py and tests/fl/test_resume.py share it)
# ---------------------------------------------------------------------------------------------
class MnistStudy:
    """The default study's first scenario: real MNIST-5k, nonoverlap-balanced, 15 clients, seed 0, with
    config/config.yaml's settings (120 samples per client, 10 rounds, local Adam, every method's default
    parameters). ``run(algorithm)`` trains and evaluates through ``cflcore.stages`` (the functions the
    Snakemake rules call, workflow_scripts/train.py and evaluate.py) at most once per session, so the
    science tests and the kill-and-resume tests share one uninterrupted run per method."""

    DATASET, SPLIT, CLIENTS, SEED = "mnist5k", "nonoverlap-balanced", 15, 0

    def __init__(self, root) -> None:
        from pathlib import Path

        from cflcore import config as cc
        from cflcore import stages

        self.root = Path(root)
        self.cfg = cc.load_config(Path(REPO) / "config" / "config.yaml", overrides={"results_dir": str(self.root)})
        self.data = self.root / "data" / f"{self.DATASET}.parquet"
        stages.prepare_dataset(cc.data_settings(self.cfg, self.DATASET), self.data)
        self.split = self.root / "splits" / self.DATASET / self.SPLIT / f"n{self.CLIENTS}" / f"s{self.SEED}"
        stages.make_split(self.data, cc.split_settings(self.cfg, self.SPLIT), self.CLIENTS, self.SEED, self.split,
                          name=self.SPLIT)

    @property
    def manifest(self):
        return self.split / "manifest.json"

    def settings(self, algorithm: str) -> dict:
        """The run settings the Snakemake rule passes to ``stages.train`` (a fresh copy)."""
        from cflcore import config as cc

        return cc.run_settings(self.cfg, self.DATASET, algorithm)

    def train(self, algorithm: str, out_dir, settings: dict | None = None) -> dict:
        from cflcore import stages

        settings = self.settings(algorithm) if settings is None else settings
        return stages.train(self.data, self.split, settings, self.SEED, out_dir)

    def run(self, algorithm: str):
        """The uninterrupted run's directory (history/server/gram/divergence.parquet, models.pt), trained and
        evaluated (``eval_dir``) on first use."""
        from cflcore import stages

        run, out = self.root / "runs" / algorithm, self.eval_dir(algorithm)
        if not (out / "clustering.parquet").exists():
            assert self.train(algorithm, run)["status"] == "ok"
            stages.evaluate(run, self.manifest, out, self.cfg["report"])
        return run

    def eval_dir(self, algorithm: str):
        return self.root / "eval" / algorithm

    def table(self, algorithm: str, name: str):
        """An evaluation table (``clustering``, ``personalisation``) or a run file (``server``, ``history``)."""
        import pandas as pd

        run = self.run(algorithm)
        folder = run if name in ("server", "history", "gram", "divergence") else self.eval_dir(algorithm)
        return pd.read_parquet(folder / f"{name}.parquet")


@pytest.fixture(scope="session")
def mnist_study(tmp_path_factory) -> MnistStudy:
    return MnistStudy(tmp_path_factory.mktemp("mnist5k-nb"))


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """scikit-learn's digits as the project's dataset Parquet, built once per test module (the data tests)."""
    from cflcore.data import prepare_dataset

    path = tmp_path_factory.mktemp("data") / "digits.parquet"
    prepare_dataset("digits", {"loader": "digits", "test_fraction": 0.2, "data_root": "data", "download": False}, path)
    return path


@pytest.fixture(scope="module")
def digits_table(digits):
    """:func:`digits` loaded (cflcore.data.load_dataset): its images, labels and parts, once per test module."""
    from cflcore.data import load_dataset

    return load_dataset(digits)


def raw_images(table, idx):
    """Rows ``idx`` of a dataset table's images as float32 in [0, 1], before any shift a split applies."""
    import numpy as np

    return table.images[idx].astype(np.float32) / np.float32(255.0)
