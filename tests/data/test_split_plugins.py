"""A new split generator is one file: its parameters, defaults and checks beside itself, read by validation, the split
job and the config reference (docs/architecture.md §7, §12)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

TOY = '''"""A toy split generator (tests/data/test_split_plugins.py): group g holds the classes c with c mod ``groups`` = g."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...errors import ConfigError
from .base import (SPLIT_GENERATORS, ClientPlan, SplitContext, SplitGenerator, SplitPlan, clusters_of, equal_sizes,
                   uniform_weights)


@SPLIT_GENERATORS.register("toy-modulo")
class ToyModulo(SplitGenerator):
    """A toy: group g holds the classes c with c mod ``groups`` = g, uniformly."""

    params_schema = {"groups": {"type": "integer", "minimum": 2, "default": 2, "description": "how many groups"}}
    group_key = "groups"

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        if params["groups"] > 5:
            raise ConfigError(f"{field}.groups: {params['groups']} is too many for a toy; allowed: 2 to 5")

    def group_sizes(self, n_clients: int) -> tuple[int, ...]:
        return tuple(equal_sizes(n_clients, int(self.params["groups"])))

    def generate(self, ctx: SplitContext, n_clients: int, cluster_rng: np.random.Generator,
                 client_rngs: list[np.random.Generator]) -> SplitPlan:
        k = int(self.params["groups"])
        sets = [[c for c in range(ctx.n_classes) if c % k == g] for g in range(k)]
        clients = [ClientPlan(cluster=c, class_weights=uniform_weights(sets[c], ctx.n_classes))
                   for c in clusters_of(self.group_sizes(n_clients))]
        return SplitPlan(k, sets, clients)
'''

STUDY = r"""
import json, sys
from pathlib import Path
import yaml
from cflcore import config as cc, stages
from cflcore.config_reference import render
from cflcore.errors import ConfigError

repo, root = sys.argv[1], Path(sys.argv[2])
raw = yaml.safe_load(open(repo + "/config/tiny.yaml"))
raw["splits"] = {"toy": {"generator": "toy-modulo", "groups": 3}}
raw["study"]["splits"] = ["toy"]
raw["results_dir"] = str(root)
refused = {}
for key, value in (("groups", 9), ("groups", 1), ("sides", 2)):
    try:
        cc.validate_config({**raw, "splits": {"toy": {"generator": "toy-modulo", key: value}}})
    except ConfigError as e:
        refused[f"{key}={value}"] = str(e)
cfg = cc.validate_config(raw)
data, split = root / "digits.parquet", root / "split"
stages.prepare_dataset(cc.data_settings(cfg, "digits"), data)
manifest = stages.make_split(data, cc.split_settings(cfg, "toy"), 7, 0, split, name="toy")
print(json.dumps({"refused": refused, "split": cfg["splits"]["toy"], "generator": manifest["generator"],
                  "params": manifest["params"], "class_sets": manifest["class_sets"],
                  "clients_per_cluster": manifest["clients_per_cluster"],
                  "reference": [line for line in render().splitlines() if "toy" in line or "`groups`" in line]}))
"""


@pytest.mark.slow
def test_a_new_split_generator_is_one_file(tmp_path):
    """A toy generator added as ONE new module to a copy of cflcore: validation reads its name from its source and
    checks an entry against its schema and its own check, the split job builds a split with it (its defaults filled),
    and the config reference prints it; no other file of the package changes."""
    root = tmp_path / "repo"
    shutil.copytree(Path(REPO) / "cflcore", root / "cflcore", ignore=shutil.ignore_patterns("__pycache__"))
    before = {p.relative_to(root): p.read_bytes() for p in (root / "cflcore").rglob("*") if p.is_file()}
    (root / "cflcore" / "data" / "splits" / "toy.py").write_text(TOY)
    p = subprocess.run([sys.executable, "-c", STUDY, REPO, str(tmp_path / "results")], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin",
                                                       "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    after = {p.relative_to(root): p.read_bytes() for p in (root / "cflcore").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert set(after) - set(before) == {Path("cflcore/data/splits/toy.py")}
    assert all(after[k] == v for k, v in before.items())  # no other file touched
    assert out["refused"]["groups=9"].startswith("splits.toy.groups: 9 is too many for a toy")  # its check_params
    assert out["refused"]["groups=1"].startswith("splits.toy.groups: 1 is less than the minimum of 2")  # its schema
    assert out["refused"]["sides=2"].startswith("splits.toy: unknown key 'sides' for generator toy-modulo")
    assert out["split"] == {"generator": "toy-modulo", "groups": 3}  # validation leaves the entry as written
    assert out["generator"] == "toy-modulo" and out["params"]["groups"] == 3
    assert out["params"]["local_test_fraction"] == 0.3  # the common parameters' defaults filled
    assert out["class_sets"] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert out["clients_per_cluster"] == [3, 2, 2]
    assert "### `toy-modulo`" in out["reference"]
    assert any(line.startswith("- `groups` (integer, ≥ 2; default `2`): how many groups") for line in out["reference"])
