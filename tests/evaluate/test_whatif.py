"""What-if clustering, the evaluation package and config name checks, one temperature for engine and evaluation.

* the replay of a run's own clusterer reproduces the run's labels at its clustering round, on real runs of
  the engine (synthetic federated data, tinyvgg);
* the heatmap and the delay table are written;
* config errors name the field and the allowed values; import paths are allow-listed;
* importing cflcore.report / cflcore.config and validating names imports neither torch nor the engine;
* the static plug-in name tables equal the registries;
* the engine's recorded temperature equals the strategy's and the evaluation's, with a zero delta;
* the what-if speed-ups (scores memoised per distinct label vector, scikit-learn's checks skipped where
  they cannot matter) leave the frame unchanged;
* the workflow's evaluate job writes what the two stages write when called separately; runs outside
  ``whatif.algorithms`` (or with ``whatif.enabled: false``) get rule train_evaluate, whose job trains the run
  and writes the scores stages.evaluate writes from its files;
* (slow) changing the what-if clusterer list reruns only the evaluate jobs and the report.
"""
from __future__ import annotations

import copy
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

import cflcore.config as cc
from cflcore.errors import ConfigError
from cflcore.evaluate.clustering import GroundTruth
from cflcore.evaluate.whatif import RoundMatrix, WhatifClusterer, divergence_from_gram, replay, whatif_frame, whatif_run
from cflcore.io import parquet_metadata, read_parquet, write_json
from cflcore.metrics import adjusted_rand

from conftest import REPO, copy_workflow, snakemake_cmd

LOG = logging.getLogger("test_whatif")
N_CLIENTS = 9


def base_config(**whatif) -> dict:
    cfg = yaml.safe_load((Path(REPO) / "config" / "tiny.yaml").read_text())
    if whatif:
        cfg["whatif"] = whatif
    return cfg


# ----- config ----------------------------------------------------------------------------------------
def test_default_whatif_list_has_every_clusterer_family_and_ends_with_the_runs_own():
    cfg = cc.load_config(Path(REPO) / "config" / "config.yaml")
    settings = cc.whatif_settings(cfg, "mnist5k", "ocfl-hdb")
    names = [e["name"] for e in settings["clusterers"]]
    assert len(names) >= 8 and names[-1] == "run:hdbscan"
    kinds = {(e["params"]["clusterer"], e["params"].get("backend"), e["params"].get("estimator")) for e in settings["clusterers"]}
    assert {("kmeans", None, None), ("affinity", None, None), ("meanshift", None, None), ("hdbscan", "hdbscan", None),
            ("hdbscan", "sklearn", None), ("sklearn", None, "AgglomerativeClustering"),
            ("sklearn", None, "SpectralClustering")} <= kinds
    # the run's own clusterer: OCFL's, BCL's dendrogram cut; none for FedAvg
    assert cc.whatif_settings(cfg, "mnist5k", "bcl")["clusterers"][-1]["name"] == "run:agglomerative"
    assert not any(e["own"] for e in cc.whatif_settings(cfg, "mnist5k", "bnc")["clusterers"])


@pytest.mark.parametrize("plugins", [False, True])
def test_unknown_whatif_clusterer_names_field_and_allowed_values(plugins):
    cfg = base_config(clusterers=[{"name": "a", "clusterer": "kmeans"}, {"name": "b", "clusterer": "kmeanz"}])
    with pytest.raises(ConfigError) as e:
        cc.validate_config(cfg, plugins=plugins)
    msg = str(e.value)
    assert msg.startswith("whatif.clusterers[1].clusterer: unknown clusterer 'kmeanz'; allowed: ")
    assert "affinity, hdbscan, kmeans" in msg and "sklearn.cluster.<Class>" in msg


@pytest.mark.parametrize("name, expected", [
    ("os.system", "whatif.clusterers[0].clusterer: unknown clusterer 'os.system'"),
    ("sklearn.cluster.NotAClusterer", "whatif.clusterers[0].clusterer: 'NotAClusterer' is not allowed; allowed: AffinityPropagation"),
    ("sklearn.base.clone", "whatif.clusterers[0].clusterer: unknown clusterer 'sklearn.base.clone'"),
    ("hdbscan.robust_single_linkage", "whatif.clusterers[0].clusterer: 'hdbscan.robust_single_linkage' is not allowed"),
])
def test_import_paths_are_allow_listed(name, expected):
    with pytest.raises(ConfigError, match="^" + expected.replace(".", r"\.").replace("[", r"\[").replace("(", r"\(")):
        cc.validate_config(base_config(clusterers=[{"name": "x", "clusterer": name}]))


def test_whatif_parameters_checked_against_the_clusterer_schema():
    bad = base_config(clusterers=[{"name": "x", "clusterer": "kmeans", "bandwidth": 2}])
    with pytest.raises(ConfigError, match=r"^whatif\.clusterers\[0\]: Additional properties .*allowed: clusterer, features, k, n_init$"):
        cc.validate_config(bad)
    bad = base_config(clusterers=[{"name": "x", "clusterer": "sklearn.cluster.OPTICS", "clusterer_params": {"n_clusters": 2}}])
    with pytest.raises(ConfigError, match=r"^whatif\.clusterers\[0\]\.clusterer_params\.n_clusters: not a parameter of OPTICS; allowed: "):
        cc.validate_config(bad)
    bad = base_config(clusterers=[{"name": "x", "clusterer": "affinity", "select_k": "silhouette"}])
    with pytest.raises(ConfigError, match=r"^whatif\.clusterers\[0\]\.select_k: .*allowed with: kmeans"):
        cc.validate_config(bad)
    bad = base_config(clusterers=[{"name": "x", "clusterer": "kmeans", "features": "deltas"}])
    with pytest.raises(ConfigError, match=r"^whatif\.clusterers\[0\]\.features: 'deltas' is not allowed; allowed: divergence_rows, None"):
        cc.validate_config(bad)
    dup = base_config(clusterers=[{"name": "x", "clusterer": "kmeans"}, {"name": "x", "clusterer": "affinity"}])
    with pytest.raises(ConfigError, match=r"^whatif\.clusterers\[1\]\.name: 'x' is used twice"):
        cc.validate_config(dup)


def test_unknown_method_and_variant_clusterer_fail_without_plugins():
    cfg = base_config()
    cfg["algorithms"]["ocfl-km"]["clusterer"] = "kmean"
    with pytest.raises(ConfigError, match=r"^algorithms\.ocfl-km\.clusterer: unknown clusterer 'kmean'; known: affinity, "):
        cc.validate_config(cfg, plugins=False)
    cfg = base_config()
    cfg["algorithms"]["bnc"]["method"] = "fedavg"
    with pytest.raises(ConfigError, match=r"^algorithms\.bnc\.method: unknown method 'fedavg'; known: bcl, bnc, "):
        cc.validate_config(cfg, plugins=False)


def test_whatif_params_leave_out_enabled_and_algorithms():
    cfg = cc.load_config(Path(REPO) / "config" / "tiny.yaml")
    other = copy.deepcopy(cfg)
    other["whatif"]["algorithms"] = ["ocfl-km"]
    assert cc.whatif_settings(cfg, "digits", "ocfl-km") == cc.whatif_settings(other, "digits", "ocfl-km")
    assert cc.whatif_runs(other) == ["digits/nonoverlap-balanced/n6/s0/ocfl-km"]
    other["whatif"]["enabled"] = False
    assert cc.whatif_runs(other) == []


# ----- the house: import direction and name tables -----------------------------------------------------
def test_report_and_config_validation_import_neither_torch_nor_the_engine():
    code = f"""
import sys, yaml
import cflcore.report, cflcore.report.runs, cflcore.report.build, cflcore.config as cc
cfg = cc.validate_config(yaml.safe_load(open({str(Path(REPO) / 'config' / 'config.yaml')!r})), plugins=False)
cflcore.report.run_specs(cfg["results_dir"], cc.study_run_ids(cfg))
bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith(('cflcore.fl', 'cflcore.strategies', 'cflcore.models')))
print(bad)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_clustering_and_evaluate_import_no_engine():
    code = """
import sys
import cflcore.clustering.clusterers as c, cflcore.evaluate.whatif, cflcore.evaluate.clustering
c.CLUSTERERS.names()
print(sorted(m for m in sys.modules if m.startswith(('cflcore.fl', 'cflcore.strategies'))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_declared_names_equal_the_registries():
    from cflcore.clustering.clusterers import CLUSTERERS
    from cflcore.data import DATASETS
    from cflcore.data.splits import SPLIT_GENERATORS
    from cflcore.strategies.base import STRATEGIES
    from cflcore.models import MODELS
    from cflcore.registry import declared_names

    for registry in (STRATEGIES, CLUSTERERS, MODELS, DATASETS, SPLIT_GENERATORS):
        assert list(declared_names(registry.kind)) == registry.names(), registry.kind


def test_a_new_plugin_file_is_declared_without_an_import(tmp_path):
    """Adding a method stays one new file: its decorator, read from source, is its declaration."""
    from cflcore.registry import registered_in_source

    plugin = tmp_path / "mymethod.py"
    plugin.write_text('import torch\n@register_strategy("my-method")\nclass Mine:\n    pass\n'
                      '@MODELS.register("not-a-method")\ndef build():\n    pass\n')
    assert registered_in_source(plugin, "register_strategy") == ["my-method"]
    assert registered_in_source(plugin, "MODELS.register") == ["not-a-method"]


# ----- replay on real engine runs ---------------------------------------------------------------------
VARIANTS = {
    "ocfl-km": {"method": "ocfl", "clusterer": "kmeans", "k": "oracle"},
    "ocfl-hdb": {"method": "ocfl", "clusterer": "hdbscan"},
    "ocfl-aff": {"method": "ocfl", "clusterer": "affinity"},
    "ocfl-ms": {"method": "ocfl", "clusterer": "meanshift"},
    "bcl": {"method": "bcl", "round": 1, "distance_threshold": 0.4},
}


def train_settings(variant: dict, rounds: int = 5) -> dict:
    return {"training": {"model": "tinyvgg", "model_kwargs": {}, "optimizer": "sgd", "lr": 0.05, "momentum": 0.0,
                         "weight_decay": 0.0, "batch_size": 8, "local_epochs": 1, "rounds": rounds},
            "engine": {"trainer": "loop", "checkpoint_every": 100}, "algorithm": variant, "device": "cpu"}


def write_manifest(fed, path: Path) -> None:
    write_json({"cluster_of_client": [int(c) for c in fed.true_clusters],
                "label_histograms": np.zeros((fed.n_clients, fed.n_classes), dtype=int).tolist()}, path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from engine_runs import train_run
    from cflcore.data.synthetic import synthetic_federated

    root = tmp_path_factory.mktemp("whatif_runs")
    fed = synthetic_federated(n_clients=N_CLIENTS, n_train=24, n_clusters=3, seed=1)
    write_manifest(fed, root / "manifest.json")
    for name, variant in VARIANTS.items():
        train_run(fed, train_settings(variant), 3, root / name, LOG)
        write_json({"status": "ok"}, root / name / "status.json")
    return root


def whatif_settings_for(variant: dict, matrix: str = "auto") -> dict:
    cfg = cc.load_config(Path(REPO) / "config" / "tiny.yaml", overrides={"algorithms": {"x": variant}})
    cfg["whatif"]["matrix"] = matrix
    return cc.whatif_settings(cfg, "digits", "x")


def test_the_whatif_stage_runs_without_torch(runs, tmp_path):
    """The what-if replay needs the recorded matrices and nothing else; no torch, no model."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(whatif_settings_for(VARIANTS["ocfl-hdb"], "gram")))
    code = f"""
import json, sys
from cflcore.evaluate.whatif import whatif_run
frame = whatif_run({str(runs / 'ocfl-hdb')!r}, {str(runs / 'manifest.json')!r}, {str(tmp_path / 'w.parquet')!r},
                   json.load(open({str(settings)!r})), 3)
print(len(frame), 'torch' in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows, torch_loaded = out.stdout.split()
    assert int(rows) > 0 and torch_loaded == "False"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_replay_of_the_runs_own_clusterer_matches_the_run(runs, name):
    out = runs / "eval" / name / "whatif.parquet"
    frame = whatif_run(runs / name, runs / "manifest.json", out, whatif_settings_for(VARIANTS[name]), 3)
    meta = parquet_metadata(out)
    clustered = meta["run_clustering_round"]
    assert clustered is not None, "the run never clustered: the consistency check would be vacuous"
    own = frame[frame["own"].astype(bool)]
    assert len(own) == 5 and own["error"].isna().all()
    at = own[own["round"] == clustered].iloc[0]
    assert at["source"] == "divergence"  # the matrix the run clustered on
    assert at["ari_vs_run"] == 1.0
    # and against the history's `cluster` column directly
    history = read_parquet(runs / name / "history.parquet").to_pandas()
    recorded = history[history["round"] == clustered].sort_values("client")["cluster"].to_numpy()
    entry = WhatifClusterer.from_settings(whatif_settings_for(VARIANTS[name])["clusterers"][-1])
    div = read_parquet(runs / name / "divergence.parquet").to_pandas()
    div = div[div["round"] == clustered]
    gamma = np.zeros((N_CLIENTS, N_CLIENTS))
    gamma[div["i"], div["j"]] = div["value"]
    assert adjusted_rand(recorded, replay(entry, gamma, 3, 3)) == 1.0
    # every configured clusterer on every round: 8 + own rows per round, scores in range
    assert set(frame["round"]) == set(range(5)) and len(frame) == 5 * 9
    ok = frame[frame["error"].isna()]
    assert len(ok) >= 0.9 * len(frame)
    assert ok["ari"].between(-1, 1).all() and (ok["seconds"] >= 0).all()


@pytest.mark.parametrize("name", ["ocfl-km", "ocfl-hdb", "ocfl-aff", "bcl"])
def test_replay_from_the_float64_gram_matrix(runs, name):
    """Γ from gram.parquet (float64) is not bit-equal to the run's float32 Γ; on these well separated
    rounds the labels agree anyway. (A tie-sensitive clusterer may differ: that is why `auto` prefers the
    recorded divergence.)"""
    out = runs / "eval_gram" / name / "whatif.parquet"
    frame = whatif_run(runs / name, runs / "manifest.json", out, whatif_settings_for(VARIANTS[name], "gram"), 3)
    clustered = parquet_metadata(out)["run_clustering_round"]
    own = frame[frame["own"].astype(bool) & (frame["round"] == clustered)].iloc[0]
    assert own["source"] == "gram"
    assert own["ari_vs_run"] == 1.0


def test_divergence_from_gram_matches_the_runs_gamma(runs):
    gram = read_parquet(runs / "ocfl-km" / "gram.parquet").to_pandas()
    div = read_parquet(runs / "ocfl-km" / "divergence.parquet").to_pandas()
    rnd = int(div["round"].min())
    g = gram[gram["round"] == rnd].pivot(index="i", columns="j", values="value").to_numpy()
    d = div[div["round"] == rnd].pivot(index="i", columns="j", values="value").to_numpy()
    assert np.abs(divergence_from_gram(g) - d).max() < 1e-5  # float32 (run) vs float64 (recorded Gram)


def test_heatmap_and_delay_table_written(runs, tmp_path):
    from cflcore.report.build import earliest_separable_round, write_whatif_figures
    from cflcore.report.runs import LoadedRun, RunSpec

    loaded = []
    for name in ("ocfl-km", "ocfl-hdb"):
        out = tmp_path / "eval" / name / "whatif.parquet"
        frame = whatif_run(runs / name, runs / "manifest.json", out, whatif_settings_for(VARIANTS[name]), 3)
        spec = RunSpec("synthetic", "nb", N_CLIENTS, 3, name, eval_dir=out.parent, run_dir=runs / name,
                       manifest=runs / "manifest.json")
        loaded.append(LoadedRun(spec, pd.DataFrame(), pd.DataFrame(), None, {}, frame, parquet_metadata(out)))
    entries = write_whatif_figures(loaded, tmp_path / "report")
    png = tmp_path / "report" / "figures" / "whatif_heatmap" / f"synthetic_nb_n{N_CLIENTS}_s3.png"
    assert png.stat().st_size > 5000
    delay = pd.read_csv(tmp_path / "report" / "figures" / "whatif_heatmap" / "whatif_delay.csv")
    assert set(delay["algorithm"]) == {"ocfl-km", "ocfl-hdb"} and len(delay) == 18
    first = earliest_separable_round(loaded[0].whatif)
    row = delay[(delay["algorithm"] == "ocfl-km") & (delay["clusterer"] == "km-oracle")].iloc[0]
    expected = first["km-oracle"]
    assert (pd.isna(row["earliest_separable_round"]) and expected is None) or row["earliest_separable_round"] == expected + 1
    assert {e["kind"] for e in entries} == {"whatif_heatmap"}


def test_select_k_by_silhouette_finds_the_planted_k():
    from synthetic_clusters import planted_deltas, planted_labels

    sizes = (3, 7, 5)
    deltas = planted_deltas(sizes, 500, seed=0, dtype=torch.float64)
    gamma = divergence_from_gram((deltas @ deltas.T).numpy())
    entry = WhatifClusterer("km", {"clusterer": "kmeans"}, select_k="silhouette", k_max=8)
    labels = replay(entry, gamma, 0, None)
    assert adjusted_rand(planted_labels(sizes), labels) == 1.0
    spectral = WhatifClusterer("sp", {"clusterer": "sklearn", "estimator": "SpectralClustering",
                                      "clusterer_params": {"affinity": "precomputed", "n_clusters": "oracle"}})
    assert adjusted_rand(planted_labels(sizes), replay(spectral, gamma, 0, 3)) == 1.0


# ----- one temperature ---------------------------------------------------------------------------------
def test_engine_temperature_equals_strategy_and_evaluation_with_a_zero_delta(tmp_path, monkeypatch):
    """Client 0's update is forced to zero every round. The engine's recorded temperature (server.parquet),
    OCFL's own (diagnostic temperature_p, float64 Γ) and the evaluation's (from gram.parquet) agree; two
    zero deltas count as identical and a zero against a non-zero delta as orthogonal (divergence.py)."""
    from cflcore.clustering.divergence import cosine_divergence_from_gram, temperature
    from cflcore.fl import trainers
    from cflcore.fl.run import temperature as engine_temperature
    from engine_runs import train_run
    from cflcore.data.synthetic import synthetic_federated

    original = trainers.LoopTrainer.train

    def zero_first(self, starts, clients, seeds, out=None):
        first = starts[0].clone()  # the engine trains its round buffer in place: starts may be out
        result = original(self, starts, clients, seeds, out)
        result.params[0] = first.to(result.params.dtype)
        return result

    monkeypatch.setattr(trainers.LoopTrainer, "train", zero_first)
    fed = synthetic_federated(n_clients=6, n_train=16)
    variant = {"method": "ocfl", "clusterer": "kmeans", "k": "oracle", "precision": "float64", "min_round": 99}
    train_run(fed, train_settings(variant, rounds=3), 0, tmp_path, LOG)
    server = read_parquet(tmp_path / "server.parquet").to_pandas()
    gram = read_parquet(tmp_path / "gram.parquet").to_pandas()
    for _, row in server.iterrows():
        g = gram[gram["round"] == row["round"]].pivot(index="i", columns="j", values="value").to_numpy()
        assert g[0, 0] == 0.0  # the zero delta
        from_gram = temperature(cosine_divergence_from_gram(g))
        assert row["temperature"] == pytest.approx(row["temperature_p"], rel=1e-12, abs=1e-15)
        assert row["temperature"] == pytest.approx(from_gram, rel=1e-12, abs=1e-15)
    # two zero deltas: distance 0 (identical), not 1 as the engine's old implementation had it
    t, _ = engine_temperature(torch.zeros(2, 4))
    assert t == 0.0
    t, _ = engine_temperature(torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]))
    assert t == pytest.approx(temperature(np.array([[0, 0, 1], [0, 0, 1], [1, 1, 0.0]])))


# ----- the speed-ups leave the output unchanged --------------------------------------------------------
def without_seconds(path: Path):
    """The Parquet table without ``seconds`` (wall time, different on every run), schema metadata kept."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return table.remove_column(table.schema.get_field_index("seconds")) if "seconds" in table.column_names else table


def test_fast_scoring_leaves_the_frame_unchanged(monkeypatch):
    """Planted rounds (one with Γ ≡ 0, one on a subset of the clients), the default clusterer list, an
    OPTICS entry with a parameter value scikit-learn refuses and a K-Means asking for deltas the replay
    does not have: the frame with the memo and the skipped checks equals the one scored afresh with every check,
    error rows and their messages included, while the external scores are computed far fewer times."""
    import cflcore.evaluate.whatif as wi
    from synthetic_clusters import planted_deltas, planted_labels

    sizes = (3, 7, 5)
    truth = GroundTruth(planted_labels(sizes), np.zeros((15, 2)))
    matrices, run_labels = [], {}
    for rnd in range(4):
        deltas = planted_deltas(sizes, 300, seed=rnd, noise=0.3 + 0.3 * rnd, dtype=torch.float64)
        clients = np.arange(15) if rnd != 2 else np.arange(0, 15, 2)
        gamma = divergence_from_gram((deltas[clients] @ deltas[clients].T).numpy())
        matrices.append(RoundMatrix(rnd, clients, gamma, "gram"))
        run_labels[rnd] = np.zeros(15, dtype=np.int64) if rnd < 2 else planted_labels(sizes)
    matrices.append(RoundMatrix(4, np.arange(15), np.zeros((15, 15)), "divergence"))
    run_labels[4] = planted_labels(sizes)
    cfg = cc.load_config(Path(REPO) / "config" / "config.yaml")
    entries = [WhatifClusterer.from_settings(e) for e in cc.whatif_settings(cfg, "mnist5k", "bcl")["clusterers"]]
    entries += [WhatifClusterer("optics-bad", {"clusterer": "sklearn", "estimator": "OPTICS",
                                               "clusterer_params": {"metric": "precomputed", "min_samples": -3}}),
                WhatifClusterer("km-deltas", {"clusterer": "kmeans", "features": "deltas"})]
    calls = []
    original = wi.external_scores
    monkeypatch.setattr(wi, "external_scores", lambda t, p: calls.append(1) or original(t, p))
    fast = whatif_frame(entries, matrices, truth, run_labels, 0)
    n_fast = len(calls)
    plain = whatif_frame(entries, matrices, truth, run_labels, 0, fast=False)
    pd.testing.assert_frame_equal(fast.drop(columns="seconds"), plain.drop(columns="seconds"), check_exact=True)
    assert fast["seconds"].notna().all()
    errors = plain.dropna(subset=["error"])
    assert set(errors["clusterer"]) == {"optics-bad", "km-deltas"} and len(errors) == 2 * 4  # Γ ≡ 0: one cluster
    assert errors["error"].str.startswith("InvalidParameterError: The 'min_samples' parameter of OPTICS").sum() == 4
    assert len(plain) == 5 * len(entries) and plain["error"].isna().sum() >= 5 * (len(entries) - 2)
    assert len(calls) - n_fast == plain["error"].isna().sum() and n_fast < (len(calls) - n_fast) / 3


@pytest.mark.parametrize("name", ["ocfl-km", "bcl"])
def test_fast_whatif_run_equals_the_plain_one(runs, tmp_path, name):
    settings = whatif_settings_for(VARIANTS[name])
    whatif_run(runs / name, runs / "manifest.json", tmp_path / "fast.parquet", settings, 3)
    whatif_run(runs / name, runs / "manifest.json", tmp_path / "plain.parquet", settings, 3, fast=False)
    fast, plain = without_seconds(tmp_path / "fast.parquet"), without_seconds(tmp_path / "plain.parquet")
    assert fast.num_rows == 45 and fast.equals(plain, check_metadata=True)
    assert fast.schema.metadata == plain.schema.metadata


# ----- the workflow's evaluate job: both stages in one process -------------------------------------------
JOB_SCRIPT = """
import json, runpy, sys, types

class Io(dict):  # what the script reads of Snakemake's object: attributes, keys(), log[0]
    __getattr__ = dict.__getitem__

job = json.loads(sys.argv[1])
sm = types.SimpleNamespace(input=Io(job["input"]), output=Io(job["output"]), params=Io(job["params"]), log=[job["log"]])
runpy.run_path(sys.argv[2], init_globals={"snakemake": sm})
"""


def test_the_evaluate_job_writes_what_the_two_stages_write(runs, tmp_path):
    """workflow_scripts/evaluate.py with rule evaluate's inputs, outputs and params against stages.evaluate and
    stages.whatif called separately: the same tables and metadata."""
    from cflcore import stages
    from cflcore.io import canonical_json

    run, manifest = runs / "ocfl-km", tmp_path / "manifest.json"
    truth = json.loads((runs / "manifest.json").read_text())["cluster_of_client"]
    write_json({"cluster_of_client": truth, "label_histograms": (np.eye(3)[truth] * 10 + 1).astype(int).tolist()},
               manifest)  # the evaluation needs samples per client
    cfg = cc.load_config(Path(REPO) / "config" / "tiny.yaml", overrides={"algorithms": {"x": VARIANTS["ocfl-km"]}})
    settings, whatif = cfg["report"], cc.whatif_settings(cfg, "digits", "x")
    job = tmp_path / "job"
    outputs = {"clustering": str(job / "clustering.parquet"), "personalisation": str(job / "personalisation.parquet"),
               "whatif": str(job / "whatif.parquet")}
    params = {"settings": canonical_json(settings), "code": "x", "whatif": canonical_json(whatif), "seed": 3,
              "whatif_code": "y"}
    inputs = {k: str(run / f"{k}.parquet") for k in ("history", "server", "gram", "divergence")}
    inputs.update(status=str(run / "status.json"), manifest=str(manifest))
    script = tmp_path / "job.py"
    script.write_text(JOB_SCRIPT)
    job_spec = json.dumps({"input": inputs, "output": outputs, "params": params, "log": str(tmp_path / "job.log")})
    out = subprocess.run([sys.executable, str(script), job_spec, str(Path(REPO) / "workflow_scripts" / "evaluate.py")],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    separate = tmp_path / "separate"
    stages.evaluate(run, manifest, separate, settings)
    stages.whatif(run, manifest, separate / "whatif.parquet", whatif, 3)
    expected = ["clustering.parquet", "personalisation.parquet", "whatif.parquet"]
    assert sorted(p.name for p in job.iterdir()) == sorted(expected)
    for name in expected:
        assert without_seconds(job / name).equals(without_seconds(separate / name), check_metadata=True), name
    assert "whatif:" in (tmp_path / "job.log").read_text()


def test_runs_without_a_replay_get_train_evaluate(tmp_path):
    """`whatif.algorithms` / `whatif.enabled` choose which runs are trained by rule train and scored and replayed by
    rule evaluate, and which are trained and scored by one rule train_evaluate job: one job per run and stage
    either way, no whatif.parquet for the latter."""
    wd = Path(copy_workflow(tmp_path / "wf"))

    def plan(whatif: dict) -> list[str]:
        cfg = yaml.safe_load((wd / "config" / "tiny.yaml").read_text())
        cfg["whatif"] = {**(cfg.get("whatif") or {}), **whatif}
        (wd / "config" / "run.yaml").write_text(yaml.safe_dump(cfg))
        p = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", "config/run.yaml"), cwd=wd,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return sorted(r for r in planned_rules(p.stdout + p.stderr) if r.startswith(("evaluate", "train")))

    assert plan({}) == ["evaluate"] * 3 + ["train"] * 3
    assert plan({"algorithms": ["ocfl-km"]}) == ["evaluate", "train", "train_evaluate", "train_evaluate"]
    assert plan({"enabled": False}) == ["train_evaluate"] * 3


@pytest.mark.slow
def test_the_train_evaluate_job_writes_the_scores_of_its_run(tmp_path):
    """Rule train_evaluate's job (workflow_scripts/train.py) trains the run and writes the scores that
    stages.evaluate writes from the run's files: the same tables and metadata, run folder and seconds aside."""
    from cflcore import stages

    wd = Path(copy_workflow(tmp_path / "wf"))
    cfg = yaml.safe_load((wd / "config" / "tiny.yaml").read_text())
    cfg["whatif"] = {**(cfg.get("whatif") or {}), "enabled": False}
    (wd / "config" / "run.yaml").write_text(yaml.safe_dump(cfg))
    run = "digits/nonoverlap-balanced/n6/s0/bnc"
    target = f"results/eval/{run}/clustering.parquet"
    p = subprocess.run(snakemake_cmd(target, "--cores", "1", "--configfile", "config/run.yaml"), cwd=wd,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "rule train_evaluate:" in p.stdout + p.stderr and "rule evaluate:" not in p.stdout + p.stderr
    separate = tmp_path / "separate"
    stages.evaluate(wd / "results/runs" / run, wd / "results/splits/digits/nonoverlap-balanced/n6/s0/manifest.json",
                    separate, cc.load_config(wd / "config" / "run.yaml")["report"])
    for name in ("clustering.parquet", "personalisation.parquet"):
        job, alone = without_seconds(wd / "results/eval" / run / name), without_seconds(separate / name)
        assert job.equals(alone), name
        assert job.schema.metadata.keys() == alone.schema.metadata.keys()
    assert not (wd / "results/eval" / run / "whatif.parquet").exists()


# ----- rerun: only evaluate and report -----------------------------------------------------------------
JOB_LINE = ("rule ", "localrule ")


def planned_rules(stdout: str) -> list[str]:
    rules = []
    for line in stdout.splitlines():
        line = line.strip()
        for prefix in JOB_LINE:
            if line.startswith(prefix) and line.endswith(":"):
                rules.append(line[len(prefix):-1])
    return [r for r in rules if r != "all"]


@pytest.mark.slow
def test_changing_the_whatif_list_reruns_only_evaluate_and_report(tmp_path):
    wd = Path(copy_workflow(tmp_path / "wf"))
    cfg = yaml.safe_load((wd / "config" / "tiny.yaml").read_text())
    cfg["study"]["algorithms"] = ["bnc", "ocfl-km"]
    cfg["datasets"]["digits"]["rounds"] = 2
    cfg["explain"]["enabled"] = False
    (wd / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))

    def sm(config: dict, *args: str) -> str:
        (wd / "config" / "run.yaml").write_text(yaml.safe_dump(config))
        p = subprocess.run(snakemake_cmd("--cores", "1", *args, "--configfile", "config/run.yaml"), cwd=wd,
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return p.stdout + p.stderr

    sm(cfg)
    assert planned_rules(sm(cfg, "-n")) == []
    whatif_files = sorted((wd / "results" / "eval").rglob("whatif.parquet"))
    assert len(whatif_files) == 2
    changed = copy.deepcopy(cfg)
    changed["whatif"] = {"clusterers": [{"name": "km3", "clusterer": "kmeans", "k": 3},
                                        {"name": "optics", "clusterer": "sklearn.cluster.OPTICS",
                                         "clusterer_params": {"metric": "precomputed", "min_samples": 2}}]}
    # the what-if replay is part of each run's evaluate job (one process for both stages)
    # and the report's parts reading the eval files (tables, figures, what-if heatmaps), not report_explain (off)
    assert sorted(planned_rules(sm(changed, "-n"))) == ["evaluate", "evaluate", "report", "report_figures",
                                                        "report_tables", "report_whatif"]
    # the run's own clusterer is part of the params: an OCFL parameter change reruns its train and evaluate
    changed_algo = copy.deepcopy(cfg)
    changed_algo["algorithms"]["ocfl-km"]["k"] = 2
    assert sorted(planned_rules(sm(changed_algo, "-n"))) == ["evaluate", "report", "report_figures", "report_tables",
                                                             "report_whatif", "train"]
