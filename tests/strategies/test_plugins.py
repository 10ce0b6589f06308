"""One plug-in contract: defaults written once (in the schemas), the optional hooks on the base
classes, and a new method as one file."""
import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cflcore.clustering.clusterers import CLUSTERERS, Clusterer
from cflcore.config import load_schema
from cflcore.data.splits import SPLIT_GENERATORS, SplitGenerator
from cflcore.errors import ConfigError
from cflcore.strategies.base import STRATEGIES, Strategy
from cflcore.plugin import Plugin, Population
from conftest import REPO


def _schema_defaults() -> dict[str, list]:
    """key -> every default the config schema and the plug-ins' params_schemas give it."""
    found: dict[str, list] = {}

    def walk(schema):
        if isinstance(schema, dict):
            for key, sub in (schema.get("properties") or {}).items():
                if isinstance(sub, dict) and "default" in sub:
                    found.setdefault(key, []).append(sub["default"])
            for value in schema.values():
                walk(value)
        elif isinstance(schema, list):
            for value in schema:
                walk(value)

    walk(load_schema())
    for registry in (STRATEGIES, CLUSTERERS, SPLIT_GENERATORS):
        for name in registry.names():
            walk({"properties": dict(registry.get(name).params_schema)})
    return found


def _same(a, b) -> bool:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, numbers) and isinstance(b, numbers):
        return a == b
    return type(a) is type(b) and a == b


def restated_defaults(root: Path, defaults: dict[str, list]) -> list[str]:
    """``x.get("key", value)`` / ``x.setdefault("key", value)`` calls whose literal ``value`` is a schema default
    of ``key``: a default written a second time, which drifts when the schema's changes."""
    hits = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("get", "setdefault") and len(node.args) == 2
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value in defaults):
                continue
            try:
                value = ast.literal_eval(node.args[1])
            except ValueError:
                continue
            if any(_same(value, d) for d in defaults[node.args[0].value]):
                hits.append(f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(node)}")
    return hits


def test_no_schema_default_is_restated_in_code(tmp_path):
    defaults = _schema_defaults()
    assert 1.0 in defaults["participation"] and 0.35 in defaults["eps1"]  # the walk reaches both kinds
    assert restated_defaults(Path(REPO) / "cflcore", defaults) == []
    # the check can fail: the forms in which defaults were once restated (eng.get / params.get with a literal)
    bad = tmp_path / "cflcore" / "bad.py"
    bad.parent.mkdir()
    bad.write_text('def f(eng, params):\n    return eng.get("participation", 1.0), params.get("eps1", 0.35)\n')
    assert len(restated_defaults(bad.parent, defaults)) == 2


def test_the_hooks_are_declared_on_the_base_classes():
    for base in (Strategy, Clusterer, SplitGenerator):
        assert issubclass(base, Plugin)
        for hook in ("check_params", "check_population", "with_defaults", "validate_params"):
            assert callable(getattr(base, hook)), (base, hook)
    assert Strategy.replay_clusterer({}) is None
    # each kind fills its schema's defaults and refuses an unknown key, with the same contract
    assert STRATEGIES.get("bcl")().params["distance_threshold"] == 0.2
    assert CLUSTERERS.get("kmeans")({"clusterer": "kmeans"}).params == {"k": "oracle", "n_init": 10}
    assert SPLIT_GENERATORS.get("ocfl")({"generator": "ocfl"}).params["alpha"] == 1.0
    with pytest.raises(ConfigError, match=r"unknown key 'radius' for method bcl; allowed: distance_input"):
        STRATEGIES.get("bcl")(radius=1)
    with pytest.raises(ConfigError, match=r"splits.s: unknown key 'radius' for generator ocfl"):
        SPLIT_GENERATORS.get("ocfl").validate_params({"generator": "ocfl", "radius": 1}, "splits.s")
    with pytest.raises(ConfigError, match=r"algorithms.x.radius|Additional properties"):
        STRATEGIES.get("bcl").validate_params({"radius": 1}, "algorithms.x")


def test_cannot_split_reads_the_methods_own_parameters_and_the_setting():
    """The structural reasons (cflcore.plugin.Plugin.cannot_split), each against the setting that lets it act."""
    fedgwc, ocfl = STRATEGIES.get("fedgwc"), STRATEGIES.get("ocfl")
    groups_of_2 = Population(12, (2,) * 6)
    code = {"epsilon": 1.0e-3}  # the authors'-code defaults: K_n = min(round(ρK), |C|), resplit guard, n_range code
    assert "K_n = 12" in fedgwc.cannot_split({**code, "participation": 1.0}, groups_of_2)
    assert fedgwc.cannot_split({**code, "participation": 0.1}, groups_of_2) is None  # K_n = 2: candidates 2..4
    assert fedgwc.cannot_split({**code, "participation": 1.0, "resplit_guard": False}, groups_of_2).startswith(
        "FedGWC's candidate range is empty")  # no guard, but n < min(12/12 + 1, 5) leaves no n
    assert fedgwc.cannot_split({**code, "participation": 1.0, "resplit_guard": False, "n_range": "n_max"},
                               groups_of_2) is None
    assert "min_cluster_size 3" in ocfl.cannot_split({"clusterer": "hdbscan"}, groups_of_2)
    assert ocfl.cannot_split({"clusterer": "hdbscan"}, Population(12, (3,) * 4)) is None  # 3 = ceil(0.2 × 12)
    assert ocfl.cannot_split({"clusterer": "hdbscan", "min_cluster_fraction": 0.1}, groups_of_2) is None
    assert ocfl.cannot_split({"clusterer": "hdbscan"}, Population(12)) is None  # sizes unknown: no claim
    assert ocfl.cannot_split({"clusterer": "kmeans"}, groups_of_2) is None
    assert ocfl.cannot_split({"clusterer": "hdbscan", "late_clients": 0.2}, groups_of_2) is None  # founders' groups unknown
    assert STRATEGIES.get("bnc").cannot_split({}, groups_of_2) is None  # the base: it can act


def test_each_method_replays_its_own_clustering_in_its_own_file():
    """The replay hooks replaced config.own_clusterer's branches; their values are the ones it gave."""
    bcl = STRATEGIES.get("bcl")
    assert bcl.replay_clusterer(bcl.with_defaults({}))["clusterer_params"]["distance_threshold"] == 0.2
    assert bcl.replay_clusterer(bcl.with_defaults({"distance_input": "similarity"})) is None
    louvain = STRATEGIES.get("louvain")
    assert louvain.replay_clusterer(louvain.with_defaults({"resolution": 2})) == {
        "clusterer": "louvain", "similarity": "normalised", "exponent": 3.0, "resolution": 2.0}
    ocfl = STRATEGIES.get("ocfl")
    assert ocfl.replay_clusterer(ocfl.with_defaults({"clusterer": "kmeans", "features": "deltas"})) is None
    assert ocfl.replay_clusterer(ocfl.with_defaults({"clusterer": "kmeans"}))["clusterer"] == "kmeans"
    assert STRATEGIES.get("ifca").replay_clusterer({}) is None


TOY = '''"""A toy method (tests/strategies/test_plugins.py): FedAvg until round ``round``, then K-Means on Γ into ``k`` clusters."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..clustering.clusterers import ClusteringInput, build_clusterer, run_clusterer
from ..errors import ConfigError
from .base import ClusterAssignment, RoundUpdates, Strategy, StrategyResult, register_strategy
from ._common import divergence_numpy


@register_strategy("toykm")
class ToyKMeans(Strategy):
    params_schema = {"round": {"type": "integer", "minimum": 0, "default": 1},
                     "k": {"type": "integer", "minimum": 1, "default": 2}}

    @classmethod
    def check_params(cls, params: Mapping[str, Any], field: str) -> None:
        if params["k"] > 5:
            raise ConfigError(f"{field}.k: {params['k']} is too many for a toy; allowed: 1 to 5")

    @classmethod
    def replay_clusterer(cls, params: Mapping[str, Any]) -> dict[str, Any] | None:
        return {"clusterer": "kmeans", "k": int(params["k"])}

    def aggregate(self, updates: RoundUpdates) -> StrategyResult:
        if updates.round != self.params["round"]:
            return StrategyResult(self.assignment)
        gamma = divergence_numpy(updates.deltas)
        clusterer = build_clusterer(self.replay_clusterer(self.params))
        labels = self.assignment.labels.copy()
        labels[np.asarray(updates.clients)] = run_clusterer(clusterer, ClusteringInput(gamma, seed=self.ctx.seed))
        self.assignment = ClusterAssignment(labels)
        return StrategyResult(self.assignment, {"n_found": self.assignment.n_clusters}, divergence=gamma)
'''

STUDY = r"""
import json, sys
from pathlib import Path
import yaml
from cflcore import config as cc, stages
from cflcore.errors import ConfigError
import pandas as pd

repo, root = sys.argv[1], Path(sys.argv[2])
raw = yaml.safe_load(open(repo + "/config/tiny.yaml"))
raw["algorithms"] = {"toy": {"method": "toykm", "k": 3}}
raw["study"]["algorithms"] = ["toy"]
raw["results_dir"] = str(root)
try:
    cc.validate_config({**raw, "algorithms": {"toy": {"method": "toykm", "k": 9}}})
    refused = None
except ConfigError as e:
    refused = str(e)
cfg = cc.validate_config(raw)
data, split, run = root / "digits.parquet", root / "split", root / "run"
stages.prepare_dataset(cc.data_settings(cfg, "digits"), data)
stages.make_split(data, cc.split_settings(cfg, "nonoverlap-balanced"), 6, 0, split, name="nonoverlap-balanced")
status = stages.train(data, split, cc.run_settings(cfg, "digits", "toy"), 0, run)
stages.evaluate(run, split / "manifest.json", root / "eval", cfg["report"])
whatif = cc.whatif_settings(cfg, "digits", "toy")
stages.whatif(run, split / "manifest.json", root / "whatif.parquet", whatif, 0)
history = pd.read_parquet(run / "history.parquet")
replay = pd.read_parquet(root / "whatif.parquet")
own = replay[replay["clusterer"] == "run:kmeans"]
print(json.dumps({"refused": refused, "variant": cfg["algorithms"]["toy"], "status": status["status"],
                  "n_clusters": int(history[history["round"] == history["round"].max()]["cluster"].nunique()),
                  "clustering_rows": len(pd.read_parquet(root / "eval" / "clustering.parquet")),
                  "own": [e["name"] for e in whatif["clusterers"] if e["name"].startswith("run:")],
                  "own_rows": len(own), "own_n_clusters": sorted(set(own["n_clusters"].tolist()))}))
"""


@pytest.mark.slow
def test_a_new_method_is_one_file(tmp_path):
    """A toy method added as ONE new file to a copy of cflcore runs through validation (its schema, its
    defaults, its own check), training, evaluation and the what-if replay of its own clustering (its hook)."""
    root = tmp_path / "repo"
    shutil.copytree(Path(REPO) / "cflcore", root / "cflcore", ignore=shutil.ignore_patterns("__pycache__"))
    before = {p.relative_to(root): p.read_bytes() for p in (root / "cflcore").rglob("*") if p.is_file()}
    (root / "cflcore" / "strategies" / "toykm.py").write_text(TOY)
    p = subprocess.run([sys.executable, "-c", STUDY, REPO, str(tmp_path / "results")], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin",
                                                       "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    after = {p.relative_to(root): p.read_bytes() for p in (root / "cflcore").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert set(after) - set(before) == {Path("cflcore/strategies/toykm.py")}
    assert all(after[k] == v for k, v in before.items())  # no other file touched
    assert out["refused"].startswith("algorithms.toy.k: 9 is too many")  # its own check_params
    assert out["variant"] == {"method": "toykm", "k": 3, "round": 1}  # its schema's default filled
    assert out["status"] == "ok" and out["n_clusters"] == 3 and out["clustering_rows"] > 0
    assert out["own"] == ["run:kmeans"] and out["own_rows"] > 0 and 3 in out["own_n_clusters"]
