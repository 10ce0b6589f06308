"""End to end on the real MNIST-5k (issue "Every CFL method ... as a strategy plug-in", last test):
nonoverlap-balanced, 15 clients, the default config's training settings. OCFL-HDB and OCFL-KM reach ARI
1.0 at their clustering round; BNC stays one cluster; and the models LEARN: OCFL's final PF1 is far above
FedAvg's (000 §4.3: 0.955 against 0.302 on MNIST-15 NB), so a regression in the training settings fails."""
from pathlib import Path

import pandas as pd
import pytest

from cflcore import config as cc
from cflcore import stages
from conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    cfg = cc.load_config(Path(REPO) / "config" / "config.yaml", overrides={"results_dir": str(root)})
    data = root / "data" / "mnist5k.parquet"
    stages.prepare_dataset(cc.data_settings(cfg, "mnist5k"), data)
    split = root / "splits" / "mnist5k" / "nonoverlap-balanced" / "n15" / "s0"
    stages.make_split(data, cc.split_settings(cfg, "nonoverlap-balanced"), 15, 0, split, name="nonoverlap-balanced")
    return cfg, root, data, split


def run_and_score(scenario, algorithm: str, table: str = "clustering") -> pd.DataFrame:
    """Train and evaluate ``algorithm`` once per module (later calls read the files)."""
    cfg, root, data, split = scenario
    run, out = root / "runs" / algorithm, root / "eval" / algorithm
    if not (out / "clustering.parquet").exists():
        assert stages.train(data, split, cc.run_settings(cfg, "mnist5k", algorithm), 0, run)["status"] == "ok"
        stages.evaluate(run, split / "manifest.json", out, cfg["report"])
    return pd.read_parquet(out / f"{table}.parquet")


@pytest.mark.parametrize("algorithm", ["ocfl-hdb", "ocfl-km"])
def test_ocfl_recovers_the_true_clusters_at_its_clustering_round(scenario, algorithm):
    scores = run_and_score(scenario, algorithm)
    rounds = scores[scores["kind"] == "round"].set_index("round")
    clustered = rounds[rounds["n_clusters"] > 1]
    assert len(clustered), "the temperature trigger never fired"
    first = clustered.index.min()
    assert rounds.loc[first, "ari"] == pytest.approx(1.0)
    assert rounds.loc[first, "n_clusters"] == 3
    assert (rounds.loc[:first - 1, "n_clusters"] == 1).all()  # one-shot: nothing before the trigger
    assert clustered["ari"].tolist() == pytest.approx([1.0] * len(clustered))  # ... and the partition stays


def test_bnc_stays_one_cluster(scenario):
    scores = run_and_score(scenario, "bnc")
    assert (scores.loc[scores["kind"] == "round", "n_clusters"] == 1).all()


def test_ocfl_models_learn_far_beyond_fedavg(scenario):
    """Final-round PF1 on real MNIST-5k NB: OCFL's cluster models are accurate, FedAvg's one model cannot be
    (three disjoint class sets), and the gap is wide. Guards the training settings, not only the clustering."""
    final = {a: run_and_score(scenario, a, "personalisation").set_index("kind").loc["final", "pf1"]
             for a in ("ocfl-hdb", "bnc")}
    assert final["ocfl-hdb"] >= 0.85, final
    assert final["ocfl-hdb"] - final["bnc"] >= 0.4, final
