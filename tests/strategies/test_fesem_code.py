"""FeSEM's authors' assignment step (``assignment: code-kmeans`` and ``code-kmeans-aligned``, cflcore/strategies/fesem.py):
the clustering checked against a line-by-line numpy transcription of the authors' ``KmeanModel`` and
``Mlhead_Clus_Server`` (anonymousgit2020/fedsem at b8ad277), the strategy's round on hand-made updates (heads = means
over the partition trained in, every head kept), and a real MNIST-5k run killed mid-way that resumes bit-identically."""
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from cflcore.errors import CflError
from cflcore.fl.run import KILL_ENV
from cflcore.strategies.base import ClusterAssignment, RoundUpdates, StrategyContext
from cflcore.strategies.fesem import FeSEM, code_partition, kernel_block
from test_resume import _assert_same_outputs, kill_and_resume

ROUNDS, KILL_AFTER = 4, 2


def _authors_clustering(points: np.ndarray, order: list[int], k: int, shuffled: list[int]) -> np.ndarray:
    """models/kmean_model.py lines 17-48 and mlhead_clus_server.py lines 153-160 and 201-225, in numpy: the features in
    ``order``; centroids = the first k rows; 5 iterations of (membership against the centroids, centroids = means);
    the 5th membership returned; then the order is shuffled and membership x goes to the x-th client of the new order."""
    x = points[order]
    centroids = x[:k].copy()
    for _ in range(5):
        y = np.argmin(((x[:, None, :] - centroids[None, :, :]) ** 2).sum(2), axis=1)
        centroids = np.stack([x[y == c].mean(0) for c in range(k)])  # no cluster empties in these data
    labels = np.empty(len(order), dtype=np.int64)
    for pos, client in enumerate(shuffled):
        labels[client] = y[pos]
    return labels


@pytest.mark.parametrize("seed", range(8))
def test_code_partition_matches_a_transcription_of_the_authors_code(seed):
    """Unstructured points (uniform in a square), on which Lloyd is still moving after 5 iterations: the count of
    updates before the labels is pinned (3 or 5 fail here)."""
    rng = np.random.default_rng(100 + seed)
    points = rng.uniform(0.0, 1.0, (40, 2))
    order, shuffled = rng.permutation(len(points)), rng.permutation(len(points))
    ours = code_partition(points, order, shuffled, 3, aligned=False)
    assert ours.tolist() == _authors_clustering(points, list(order), 3, list(shuffled)).tolist()
    aligned = code_partition(points, order, shuffled, 3, aligned=True)
    assert aligned.tolist() == _authors_clustering(points, list(order), 3, list(order)).tolist()


def test_the_codes_membership_is_a_random_partition_and_the_aligned_one_finds_the_groups():
    """Tight groups: k-means finds them, and the code's labels, read against the reshuffled order, do not."""
    rng = np.random.default_rng(0)
    truth = np.repeat(np.arange(3), 10)
    points = np.eye(3)[truth] * 10.0 + rng.normal(0.0, 0.1, (30, 3))
    aligned, code = [], []
    for _ in range(50):
        order, shuffled = rng.permutation(30), rng.permutation(30)
        if len(set(truth[order[:3]])) < 3:  # k-means from the first 3 points needs one in each group to be exact
            continue
        aligned.append(adjusted_rand_score(truth, code_partition(points, order, shuffled, 3, aligned=True)))
        code.append(adjusted_rand_score(truth, code_partition(points, order, shuffled, 3, aligned=False)))
    assert len(aligned) >= 5 and min(aligned) == 1.0
    assert np.mean(code) < 0.1  # a random partition scores about 0


def test_the_kernel_is_the_last_weight_array_of_fesem_cnn():
    from cflcore.models.fesem_cnn import FesemCNN

    model = FesemCNN(1, (28, 28), 10)
    sizes = tuple(p.numel() for p in model.parameters())
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert torch.equal(flat[kernel_block(sizes)], model.dense_1.weight.detach().flatten())
    with pytest.raises(CflError, match="fesem.assignment"):
        kernel_block((10, 7))  # 10 values are no kernel of a 7-value bias
    with pytest.raises(CflError, match="fesem.assignment"):
        kernel_block(None)


def _strategy(assignment: str) -> FeSEM:
    strategy = FeSEM(k=3, assignment=assignment)
    strategy.setup(StrategyContext(n_clients=12, n_params=8, seed=3, device=torch.device("cpu"),
                                   array_sizes=(2, 4, 2)))
    return strategy


def test_a_round_averages_over_the_partition_trained_in_and_keeps_every_head():
    strategy = _strategy("code-kmeans")
    before = strategy.assignment.labels.copy()
    assert sorted(strategy.initial_models(torch.zeros(8), None)) == [0, 1, 2]
    models = {c: torch.full((8,), float(c)) for c in range(3)}
    strategy.configure(0, np.arange(12), None, models)
    clients = np.array([1, 4, 7, 10])
    deltas = torch.arange(32, dtype=torch.float32).reshape(4, 8) / 10
    result = strategy.aggregate(RoundUpdates(round=0, clients=clients, deltas=deltas, start=None, step_losses=[],
                                             n_samples=np.ones(4), evaluate=None,
                                             previous=ClusterAssignment(before)))
    assert result.aggregate_as == {int(c): int(before[c]) for c in clients}
    assert result.keep_models == (0, 1, 2)
    trained = torch.stack([models[int(before[c])] for c in clients]) + deltas
    np.testing.assert_array_equal(strategy.points[clients], trained[:, 2:6].double().numpy())  # the kernel block
    untouched = np.setdiff1d(np.arange(12), clients)
    assert np.all(np.abs(strategy.points[untouched]) <= 0.149)  # still the random points
    assert result.diagnostics["reassigned"] == int(np.sum(before != result.assignment.labels))


def test_the_state_restores_the_points_and_the_order():
    a, b = _strategy("code-kmeans-aligned"), _strategy("code-kmeans-aligned")
    a.points[0] += 1.0
    a.order = a.order[::-1].copy()
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.order, b.order)
    assert set(_strategy("e-step").state_dict()) == {"labels", "seeded"}  # the E-step's checkpoints as before


def _settings(study, assignment: str):
    settings = study.settings("ifca")
    settings["algorithm"] = {"method": "fesem", "k": 3, "assignment": assignment}
    settings["training"]["rounds"] = ROUNDS
    settings["engine"]["checkpoint_every"] = 1
    return settings


def test_the_codes_step_resumes_bit_identically_and_fails_without_its_state(mnist_study, tmp_path, monkeypatch):
    monkeypatch.delenv(KILL_ENV, raising=False)
    settings = _settings(mnist_study, "code-kmeans")
    whole = tmp_path / "whole"
    assert mnist_study.train("fesem", whole, settings)["status"] == "ok"
    server = pd.read_parquet(whole / "server.parquet")
    assert server["reassigned"].iloc[1:].gt(0).any()  # the code's partition moves from round to round

    run = tmp_path / "run"
    log = kill_and_resume(lambda: mnist_study.train("fesem", run, settings), run, KILL_AFTER)
    assert f"resuming from checkpoint round {KILL_AFTER}" in log, log[:3]
    _assert_same_outputs(whole, run)

    forgetful = tmp_path / "forgetful"  # the same checkpoint, restored by a FeSEM that forgets its points and order
    (forgetful / "checkpoints").mkdir(parents=True)
    name = f"round_{KILL_AFTER:05d}.pt"
    (forgetful / "checkpoints" / name).write_bytes((run / "checkpoints" / name).read_bytes())
    original = FeSEM.load_state_dict

    def forget(self, state):
        original(self, {k: v for k, v in state.items() if k in ("labels", "seeded")} | {
            "points": np.zeros_like(self.points), "order": np.arange(len(self.order))})

    monkeypatch.setattr(FeSEM, "load_state_dict", forget)
    assert mnist_study.train("fesem", forgetful, settings)["status"] == "ok"
    a, b = (pd.read_parquet(d / "history.parquet") for d in (whole, forgetful))
    assert not a.equals(b)
