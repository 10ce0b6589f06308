"""Load a study config: read YAML files, resolve ``extends:``, merge them as Snakemake does (cflcore.config, step 1).

Nothing here checks what a field means; :mod:`cflcore.config.validate` does, on the merged dict this module gives.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from ..defaults import SCHEMA_PATH
from ..errors import ConfigError


def load_schema() -> dict[str, Any]:
    """The config schema, a fresh copy (validation fills defaults from it and may change it)."""
    return yaml.safe_load(SCHEMA_PATH.read_text())


BASE_CONFIG = "config/config.yaml"
"""The config every study is read over (the Snakefile's ``configfile:``; the CLI's default), relative to the
working directory, the repository's root."""
EXTENDS_KEY = "extends"
STUDY_OWN_REPORT_KEY = "claim_notes"  # report.<this> is never inherited through extends: (read_config_file)


def read_config_file(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """One YAML config file, with its ``extends: <file>`` resolved: the extended file (a path relative to this
    one, itself possibly extending another) first, this file's keys deep-merged over it. This is how an
    offline study stays the same study as its paper-scale config (config/louvain-002-offline.yaml extends
    config/louvain-002.yaml and overrides only the data and the budget).

    Everything is inherited except ``report.claim_notes``: a note explains why a claim does or does not hold on
    the runs of the study that wrote it, so the extended file's notes would describe runs this study never made
    (config/fedgwc-004-domains.yaml extends the offline study, whose notes explain its 30-client runs)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file holds a mapping of keys; got {type(data).__name__}")
    base = data.pop(EXTENDS_KEY, None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"{path}: {EXTENDS_KEY}: {base!r} is not allowed; allowed: the path of another config file")
    target = (path.parent / base).resolve()
    if target in _seen or target == path.resolve():
        raise ConfigError(f"{path}: {EXTENDS_KEY}: {base!r} extends itself through {' -> '.join(map(str, _seen))}")
    inherited = read_config_file(target, (*_seen, path.resolve()))
    if isinstance(inherited.get("report"), dict):
        inherited["report"].pop(STUDY_OWN_REPORT_KEY, None)
    return deep_update(inherited, data)


def _extends_another(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False  # Snakemake reports it
    return isinstance(data, dict) and EXTENDS_KEY in data


def snakemake_config(config: Mapping[str, Any], snakefile_files: Sequence[str | Path],
                     cli_files: Sequence[str | Path], cli_overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The config Snakemake would have merged (the Snakefile's ``configfile:``, then ``--configfile`` files in
    order, then ``--config`` key=value overrides), with every file's ``extends:`` resolved first. Returns
    ``config`` itself when no file extends another (Snakemake's own merge is then exact)."""
    files = [Path(f) for f in [*snakefile_files, *cli_files]]
    if not any(_extends_another(f) for f in files):
        return dict(config)
    merged: dict[str, Any] = {}
    for f in files:
        deep_update(merged, read_config_file(f))
    return deep_update(merged, dict(cli_overrides or {}))


def deep_update(base: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict update, the way Snakemake merges config files."""
    for k, v in new.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base

