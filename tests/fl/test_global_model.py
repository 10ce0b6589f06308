"""The strategy's global model scored by the engine (history.parquet ``global_*``, 002 Fig. 6), and the
silhouette in the space the method clusters in (clustering.parquet ``silhouette_method``)."""
import logging

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import f1_score

from cflcore.evaluate.clustering import GroundTruth, RoundPartition, clustering_frame, gram_by_round, round_scores
from cflcore.fl.artifacts import load_run_models
from cflcore.fl.artifacts import GLOBAL_COLUMNS
from engine_runs import train_run
from cflcore.data.synthetic import synthetic_federated
from cflcore.metrics.personalisation import personalisation_scores

LOG = logging.getLogger("test")
FED_KW = {"n_clients": 6, "n_train": 24}


def settings(algorithm, rounds=2):
    return {"training": {"model": "tinyvgg", "model_kwargs": {"hidden": 4}, "optimizer": "sgd", "lr": 0.05,
                         "momentum": 0.0, "batch_size": 8, "local_epochs": 1, "rounds": rounds},
            "engine": {"trainer": "loop", "checkpoint_every": 100}, "algorithm": algorithm, "device": "cpu"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("global")
    out = {}
    for name, algorithm in {"bnc": {"method": "bnc"}, "louvain": {"method": "louvain", "attribution": "1nn"},
                            "bcl": {"method": "bcl", "round": 0, "distance_threshold": 0.5}}.items():
        train_run(synthetic_federated(**FED_KW), settings(algorithm), 1, root / name, LOG)
        out[name] = root / name
    return out


def test_fedavg_global_model_is_its_one_model(runs):
    history = pd.read_parquet(runs["bnc"] / "history.parquet")
    for ours, theirs in (("global_loss", "local_loss"), ("global_acc", "local_acc"), ("global_f1", "local_f1"),
                         ("global_bacc", "local_bacc"), ("global_orch_acc", "orch_acc"), ("global_orch_f1", "orch_f1")):
        assert history[ours].notna().all() and (history[ours] == history[theirs]).all(), ours


def test_methods_without_a_global_model_record_nulls(runs):
    history = pd.read_parquet(runs["bcl"] / "history.parquet")
    assert set(GLOBAL_COLUMNS) <= set(history.columns)
    assert history[list(GLOBAL_COLUMNS)].isna().all().all()
    assert history["local_f1"].notna().all()  # the personalised scores are there
    assert np.isnan(personalisation_scores(history).global_f1)


def test_louvain_global_model_is_the_mean_of_its_community_models(runs):
    """W_t = (1/|P|) Σ_i W^{C_i} (002 Alg. 1, l. 7), rebuilt from models.pt and scored here by hand."""
    history = pd.read_parquet(runs["louvain"] / "history.parquet")
    last = history[history["round"] == 1].set_index("client")
    saved = load_run_models(runs["louvain"] / "models.pt")
    communities = sorted(int(c) for c in np.unique(saved.labels) if c != 0)
    assert len(communities) >= 2  # otherwise W_t would be the one community model and prove little
    net = saved.models[communities[0]]
    states = [saved.models[c].state_dict() for c in communities]
    mean = {k: sum(s[k] for s in states) / len(states) if v.is_floating_point() else v for k, v in states[0].items()}
    net.load_state_dict(mean)
    fed = synthetic_federated(**FED_KW)
    with torch.no_grad():
        for i, client in enumerate(fed.clients):
            pred = net(client.x_test).argmax(dim=1).numpy()
            y = client.y_test.numpy()
            assert last.loc[i, "global_acc"] == pytest.approx(float(np.mean(pred == y)), abs=1e-12)
            assert last.loc[i, "global_f1"] == pytest.approx(f1_score(y, pred, average="macro"), abs=1e-12)
        orch_pred = net(fed.x_orch).argmax(dim=1).numpy()
    assert last["global_orch_acc"].tolist() == pytest.approx([float(np.mean(orch_pred == fed.y_orch.numpy()))] * 6, abs=1e-12)
    # the clients' own (1NN) community models are not W_t
    assert last["model_key"].str.match(r"c\d+$").all() and not np.allclose(last["global_loss"], last["local_loss"])
    scores = personalisation_scores(history)
    assert scores.global_f1 == pytest.approx(history["global_f1"].mean())


# ----- silhouette in the method's space ---------------------------------------------------------------
def planted_distances(labels, intra=0.1, inter=1.0):
    same = labels[:, None] == labels[None, :]
    d = np.where(same, intra, inter)
    np.fill_diagonal(d, 0.0)
    return d


def test_silhouette_method_is_the_silhouette_of_the_recorded_distances():
    """Two tight blocks (intra 0.1, inter 1.0): every client's a = 0.1, b = 1.0, s = 1 − a/b = 0.9; the
    wrong partition scores negative. The update vectors (Gram) say otherwise, and keep their own column."""
    truth = np.array([0, 0, 0, 1, 1, 1])
    gt = GroundTruth(truth, np.ones((6, 3)))
    distances = planted_distances(truth)
    gram = np.eye(6)  # orthogonal unit updates: every pair equally far, silhouette 0 for any partition
    right = round_scores(RoundPartition(0, truth + 1, np.arange(6)), gt, gram, distances)
    assert right["silhouette_method"] == pytest.approx(0.9, abs=1e-12)
    assert right["silhouette"] == pytest.approx(0.0, abs=1e-12)
    wrong = round_scores(RoundPartition(0, np.array([0, 1, 0, 1, 0, 1]), np.arange(6)), gt, gram, distances)
    assert wrong["silhouette_method"] < 0
    assert round_scores(RoundPartition(0, np.zeros(6, np.int64), np.arange(6)), gt, gram, distances)["silhouette_method"] is None
    assert round_scores(RoundPartition(0, truth, np.arange(6)), gt, gram)["silhouette_method"] is None


def test_silhouette_method_uses_the_sampled_clients_global_ids():
    """divergence.parquet rows name global client ids; with client 2 not sampled the 5 × 5 matrix of the
    others is scored with their labels. Rounds without a matrix (BCL after clustering) give null."""
    truth = np.array([0, 0, 0, 1, 1, 1])
    sampled = np.array([0, 1, 3, 4, 5])
    sub = planted_distances(truth[sampled], intra=0.2, inter=0.8)
    rows = [{"round": 0, "i": int(i), "j": int(j), "value": float(sub[a, b])}
            for a, i in enumerate(sampled) for b, j in enumerate(sampled)]
    divergences = gram_by_round(pd.DataFrame(rows))
    parts = [RoundPartition(0, truth + 1, sampled), RoundPartition(1, truth + 1, np.arange(6))]
    frame = clustering_frame(parts, GroundTruth(truth, np.ones((6, 3))), {}, None, divergences)
    per_round = frame[frame["kind"] == "round"].set_index("round")
    # client 0: a = mean(0.2) = 0.2, b = 0.8 -> 0.75; client 3..5 likewise; client 1 likewise
    assert per_round.loc[0, "silhouette_method"] == pytest.approx(0.75, abs=1e-12)
    assert pd.isna(per_round.loc[1, "silhouette_method"])
    assert frame.set_index("kind").loc["mean", "silhouette_method"] == pytest.approx(0.75, abs=1e-12)
    assert list(frame.columns)[-2:] == ["silhouette_method", "silhouette_authors"]  # appended: older columns keep their place


def test_evaluate_run_reads_the_runs_divergence(runs, tmp_path):
    """End to end on the Louvain run: silhouette_method is computed from its divergence.parquet (trusted
    distance), and BNC, which records none, gets nulls."""
    from cflcore.evaluate import evaluate_run
    from cflcore.io import write_json
    from cflcore.metrics import silhouette_from_distances

    fed = synthetic_federated(**FED_KW)
    manifest = tmp_path / "manifest.json"
    hist = np.zeros((6, fed.n_classes), dtype=np.int64)
    for i, c in enumerate(fed.clients):
        hist[i] = np.bincount(c.y_train.numpy(), minlength=fed.n_classes)
    write_json({"cluster_of_client": fed.true_clusters.tolist(), "label_histograms": hist.tolist()}, manifest)
    for name in ("louvain", "bnc"):
        evaluate_run(runs[name], manifest, tmp_path / name)
    scores = pd.read_parquet(tmp_path / "louvain" / "clustering.parquet").query("kind == 'round'").set_index("round")
    div = gram_by_round(pd.read_parquet(runs["louvain"] / "divergence.parquet"))
    labels = pd.read_parquet(runs["louvain"] / "history.parquet").query("round == 1").sort_values("client")["cluster"]
    expected = silhouette_from_distances(div[1][1], labels.to_numpy())
    assert expected is not None and scores.loc[1, "silhouette_method"] == pytest.approx(expected, abs=1e-12)
    assert pd.read_parquet(tmp_path / "bnc" / "clustering.parquet")["silhouette_method"].isna().all()
    personal = pd.read_parquet(tmp_path / "bnc" / "personalisation.parquet").set_index("kind")
    assert personal.loc["mean", "global_f1"] == pytest.approx(personal.loc["mean", "pf1"])
