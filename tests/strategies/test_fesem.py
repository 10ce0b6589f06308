"""FeSEM (Xie et al., "Multi-center federated learning"; a baseline of 004): the E-step and seeding as pure
functions, then real MNIST-5k (nonoverlap-balanced, 15 clients in 3 true clusters): it recovers the clusters,
and a run killed mid-way resumes bit-identically, while a restart that forgets FeSEM's state does not."""
import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from cflcore.fl.run import KILL_ENV
from cflcore.strategies.fesem import FeSEM, e_step, kmeanspp_seeds, squared_distances
from test_resume import _assert_same_outputs, kill_and_resume

ROUNDS, KILL_AFTER = 4, 1


def test_e_step_picks_the_nearest_centre_smallest_id_on_ties():
    models = torch.tensor([[0.0, 0.0], [3.0, 0.0], [1.5, 0.0], [10.0, 10.0]])
    centres = torch.tensor([[0.0, 0.0], [3.0, 0.0], [9.0, 9.0]])
    d = squared_distances(models, centres)
    np.testing.assert_allclose(d, torch.cdist(models.double(), centres.double()).numpy() ** 2, atol=1e-12)
    assert e_step(d, [2, 5, 7]).tolist() == [2, 5, 2, 7]  # row 2 is equidistant from ids 2 and 5


def test_kmeanspp_seeds_are_seeded_and_spread():
    rng = np.random.default_rng(0)
    blobs = torch.tensor(np.concatenate([rng.normal(m, 0.01, size=(5, 4)) for m in (0.0, 5.0, -5.0)]))
    seeds = kmeanspp_seeds(blobs, 3, 11)
    assert np.array_equal(seeds, kmeanspp_seeds(blobs, 3, 11))
    assert sorted(int(s) // 5 for s in seeds) == [0, 1, 2]  # one seed per blob


def _settings(study):
    settings = study.settings("ifca")
    settings["algorithm"] = {"method": "fesem", "k": 3}
    settings["training"]["rounds"] = ROUNDS
    settings["engine"]["checkpoint_every"] = 1
    return settings


@pytest.fixture(scope="module")
def fesem_run(mnist_study, tmp_path_factory):
    run = tmp_path_factory.mktemp("fesem") / "run"
    assert mnist_study.train("fesem", run, _settings(mnist_study))["status"] == "ok"
    return run


@pytest.mark.kernels
def test_fesem_recovers_the_three_clusters_on_mnist(mnist_study, fesem_run):
    """The k-means++ seeds land one per true cluster and the E-step keeps every client with its own
    cluster's centre: ARI 1.0 in every round (measured; a random 3-way partition scores about 0)."""
    truth = np.asarray(json.loads(mnist_study.manifest.read_text())["cluster_of_client"])
    history = pd.read_parquet(fesem_run / "history.parquet")
    server = pd.read_parquet(fesem_run / "server.parquet")
    for rnd, group in history.groupby("round"):
        labels = group.sort_values("client")["cluster"].to_numpy()
        assert adjusted_rand_score(truth, labels) > 0.9, (rnd, labels)
    assert server["n_clusters"].tolist() == [3] * ROUNDS
    assert json.loads(server["seed_clients"].iloc[0]) and server["seed_clients"].iloc[1:].isna().all()
    final = history[history["round"] == ROUNDS - 1]
    assert final["local_acc"].mean() > 0.8  # the three centres are trained models


def test_fesem_resumes_bit_identically_and_fails_without_its_state(mnist_study, fesem_run, tmp_path, monkeypatch):
    monkeypatch.delenv(KILL_ENV, raising=False)
    run = tmp_path / "run"
    log = kill_and_resume(lambda: mnist_study.train("fesem", run, _settings(mnist_study)), run, KILL_AFTER)
    assert f"resuming from checkpoint round {KILL_AFTER}" in log, log[:3]
    _assert_same_outputs(fesem_run, run)

    # the same checkpoint, restored by a FeSEM that forgets its partition and seeding: other outputs
    forgetful = tmp_path / "forgetful"
    (forgetful / "checkpoints").mkdir(parents=True)
    name = f"round_{KILL_AFTER:05d}.pt"
    (forgetful / "checkpoints" / name).write_bytes((run / "checkpoints" / name).read_bytes())
    monkeypatch.setattr(FeSEM, "load_state_dict", lambda self, state: None)
    assert mnist_study.train("fesem", forgetful, _settings(mnist_study))["status"] == "ok"
    a, b = (pd.read_parquet(d / "history.parquet") for d in (fesem_run, forgetful))
    assert not a.equals(b)


def test_evaluation_records_test_size_weighted_balanced_accuracy(mnist_study, fesem_run, tmp_path):
    """personalisation.parquet's new ``local_bacc_weighted`` (004 App. F) on the real run: the client
    balanced accuracies of history.parquet weighted by the manifest's local test-set sizes; recomputed here
    with scikit-learn's balanced_accuracy_score semantics already pinned in tests/fl/test_trainers.py."""
    from cflcore import stages

    stages.evaluate(fesem_run, mnist_study.manifest, tmp_path, mnist_study.cfg["report"])
    table = pd.read_parquet(tmp_path / "personalisation.parquet")
    assert list(table.columns[:10]) == ["kind", "round", "pf1", "gf1", "learning_gap", "local_bacc", "orch_bacc",
                                        "local_acc", "orch_acc", "n_evaluations"]
    n_test = np.asarray(json.loads(mnist_study.manifest.read_text())["n_test"], dtype=float)
    assert n_test.std() > 0  # unequal sizes: weighting matters
    history = pd.read_parquet(fesem_run / "history.parquet")
    final = history[history["round"] == ROUNDS - 1].sort_values("client")
    expected = float((final["local_bacc"].to_numpy() * n_test).sum() / n_test.sum())
    row = table[table["kind"] == "final"].iloc[0]
    assert row["local_bacc_weighted"] == pytest.approx(expected, rel=1e-12)
    assert row["local_bacc_weighted"] != pytest.approx(row["local_bacc"], rel=1e-9)
    mean = table[table["kind"] == "mean"].iloc[0]
    rows_weights = n_test[history["client"].to_numpy()]
    assert mean["local_bacc_weighted"] == pytest.approx(
        float((history["local_bacc"].to_numpy() * rows_weights).sum() / rows_weights.sum()), rel=1e-12)
