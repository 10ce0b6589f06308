"""Shared test set-up: one thread per test process (the machine has 2 cores), headless matplotlib."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
