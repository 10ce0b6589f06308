"""A wheel that works: the built wheel holds every file the code loads, so an installed (not
editable) package validates the default config."""
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow


def test_a_built_wheel_validates_the_default_config(tmp_path):
    # built from a copy: setuptools writes build/ and *.egg-info/ into the source tree
    src, out = tmp_path / "src", tmp_path / "dist"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(Path(REPO) / name, src / name)
    shutil.copytree(Path(REPO) / "cflcore", src / "cflcore", ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(out), str(src)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("cfl_pipeline-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = Path(REPO) / "cflcore"
    data = {str(f.relative_to(Path(REPO))) for f in package.rglob("*")
            if f.is_file() and f.suffix not in (".py", ".pyc") and "__pycache__" not in f.parts}
    assert "cflcore/schemas/config.schema.yaml" in data and data <= names, sorted(data - names)

    # a fresh venv with the wheel alone (no source tree on the path); the dependencies come from the test's
    # own environment through a .pth line (which runs no .pth file there, so no editable install either)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # --ignore-installed: the test's environment may hold an editable install of the same distribution
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                              "--ignore-installed", "--no-warn-script-location", "--prefix", str(venv), str(wheel)],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    where = subprocess.run([str(py), "-c", "import cflcore; print(cflcore.__file__)"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=120)
    assert where.stdout.strip() == str(site / "cflcore" / "__init__.py"), where.stdout + where.stderr
    # the installed console script, run by the venv's interpreter (pip wrote the installing interpreter's shebang)
    p = subprocess.run([str(py), str(venv / "bin" / "cfl"), "--config", str(Path(REPO) / "config" / "config.yaml"), "validate"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "mnist5k" in p.stdout, p.stdout[-2000:]
