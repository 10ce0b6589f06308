"""Source hashes per stage, passed as a Snakemake param so that editing the code a stage runs
reruns exactly that stage's jobs (and their dependents), and editing anything else does not."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

PKG = Path(__file__).resolve().parent

# Which parts of cflcore each stage executes. Shared helpers (io, config, errors, registry) count
# for every stage.
STAGE_SOURCES: dict[str, tuple[str, ...]] = {
    "data": ("data/__init__.py", "data/loaders.py", "data/loaders", "data/store.py"),
    "splits": ("data/splits.py", "data/splits", "data/store.py"),
    "train": ("fl", "models", "strategies", "clustering", "data/store.py", "data/federated.py"),
    "evaluate": ("metrics", "evaluate/__init__.py", "evaluate/clustering.py"),
    "whatif": ("metrics", "clustering", "evaluate/__init__.py", "evaluate/clustering.py", "evaluate/whatif.py"),
    "late_clients": ("evaluate/__init__.py", "evaluate/clustering.py", "evaluate/late_clients.py"),
    "explain": ("explain", "models", "fl/artifacts.py", "data/store.py", "data/federated.py"),
    "report": ("report", "metrics", "reference"),
}
COMMON = ("io.py", "config.py", "errors.py", "registry.py", "schemas")


@lru_cache(maxsize=None)
def code_version(stage: str) -> str:
    """A short SHA-256 over the source files (sorted by path) that ``stage`` runs."""
    h = hashlib.sha256()
    for rel in (*COMMON, *STAGE_SOURCES[stage]):
        root = PKG / rel
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for f in files:
            if f.is_file() and f.suffix in (".py", ".yaml", ".csv", ".md") and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(PKG)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:16]
