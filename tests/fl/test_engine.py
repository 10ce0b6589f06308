"""The federated engine: determinism, FedAvg exactness, sampling, evaluation, errors, outputs."""
import logging

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

from cflcore.errors import CflError, ConfigError, TrainingDiverged
from cflcore.fl.artifacts import load_run_models
from cflcore.fl.run import _STREAM_INIT, _STREAM_TRAIN, _init_model, sample_clients, same_partition, temperature
from cflcore.fl.server import ServerOptimizer, aggregate_cluster
from cflcore.strategies.base import ClusterAssignment, Strategy, StrategyResult
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.trainers import derive_seed
from engine_runs import build_engine, train_run

LOG = logging.getLogger("test")
OUTPUTS = ("history.parquet", "server.parquet", "gram.parquet", "models.pt")


def settings(rounds=3, model="tinyvgg", model_kwargs=None, **engine):
    return {"training": {"model": model, "model_kwargs": model_kwargs or {}, "optimizer": "sgd", "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0,
                         "batch_size": 8, "local_epochs": 1, "rounds": rounds},
            "engine": {"trainer": "loop", "checkpoint_every": 100, **engine}, "algorithm": {"method": "bnc"}, "device": "cpu"}


class TwoClusters(Strategy):
    """Test strategy: clients split by parity after round 0; reports diagnostics and a divergence matrix."""

    def aggregate(self, updates):
        labels = np.arange(self.ctx.n_clients) % 2 if updates.round >= 0 else np.zeros(self.ctx.n_clients)
        self.assignment = ClusterAssignment(labels)
        n = len(updates.clients)
        return StrategyResult(self.assignment, diagnostics={"k": 2, "scores": [1.5, 2.5], "temperature": 0.25},
                              divergence=np.ones((n, n)), inherit={1: 0})


class MixStart(Strategy):
    """Test strategy: everyone starts from a 50/50 mix of two cluster models."""

    def initial_models(self, init, make_init):
        return {0: init, 1: make_init(1)}

    def configure(self, rnd, clients, evaluate, models):
        self.seen_losses = evaluate(models, list(clients))
        return {int(c): {0: 0.5, 1: 0.5} for c in clients}

    def aggregate(self, updates):
        self.assignment = ClusterAssignment(np.arange(self.ctx.n_clients) % 2)
        return StrategyResult(self.assignment)

    def personalised(self, models):
        return {i: {0: 0.25, 1: 0.75} for i in range(self.ctx.n_clients)}


def test_same_config_gives_identical_history(tmp_path):
    fed = synthetic_federated(n_clients=5, n_train=[30, 24, 30, 18, 30])
    train_run(fed, settings(), 0, tmp_path / "a", LOG)
    train_run(fed, settings(), 0, tmp_path / "b", LOG)
    assert (tmp_path / "a" / "history.parquet").read_bytes() == (tmp_path / "b" / "history.parquet").read_bytes()
    train_run(fed, settings(), 1, tmp_path / "c", LOG)
    assert not pq.read_table(tmp_path / "a" / "history.parquet").equals(pq.read_table(tmp_path / "c" / "history.parquet"))


def test_output_files_and_columns(tmp_path):
    fed = synthetic_federated(n_clients=4, n_train=24)
    train_run(fed, settings(rounds=3, eval_every=2), 0, tmp_path, LOG)
    h = pq.read_table(tmp_path / "history.parquet")
    assert [str(t) for t in h.schema.types[:4]] == ["int32", "int32", "int64", "bool"]
    h = h.to_pandas()
    assert len(h) == 3 * 4 and h["sampled"].all() and h["train_loss"].notna().all()
    assert h.loc[h["round"] == 1, "local_f1"].isna().all()      # not an eval round
    assert h.loc[h["round"] == 2, "orch_acc"].notna().all()     # last round always evaluated
    s = pd.read_parquet(tmp_path / "server.parquet")
    assert list(s.columns[:7]) == ["round", "n_clusters", "clustered_now", "temperature", "mean_train_loss", "mean_local_f1", "seconds"]
    assert s["temperature"].between(0, 1).all()
    g = pd.read_parquet(tmp_path / "gram.parquet")
    assert len(g) == 3 * 16
    r0 = g[g["round"] == 0].pivot(index="i", columns="j", values="value").to_numpy()
    assert np.allclose(r0, r0.T) and (np.linalg.eigvalsh(r0) > -1e-9).all()
    run = load_run_models(tmp_path / "models.pt")
    assert run.model_name == "tinyvgg" and run.round == 2 and list(run.labels) == [0, 0, 0, 0]
    assert not run.models[0].training
    assert run.models[0](fed.x_orch[:3]).shape == (3, fed.n_classes)
    blob = torch.load(tmp_path / "models.pt", weights_only=True)
    assert blob["format"] == "cflcore.models/1" and blob["model_kwargs"]["n_classes"] == fed.n_classes


def test_fedavg_one_client_equals_plain_local_training(tmp_path):
    fed = synthetic_federated(n_clients=1, n_train=[29])
    seed, rounds = 4, 2
    train_run(fed, settings(rounds=rounds), seed, tmp_path, LOG)
    kwargs = {"in_channels": 1, "image_size": [8, 8], "n_classes": fed.n_classes}
    ref = _init_model("tinyvgg", kwargs, derive_seed(seed, _STREAM_INIT, 0))
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    client = fed.clients[0]
    for rnd in range(rounds):
        gen = torch.Generator().manual_seed(derive_seed(derive_seed(seed, _STREAM_TRAIN, rnd, 0), 0))
        perm = torch.randperm(client.n_train, generator=gen)
        for lo in range(0, client.n_train, 8):
            idx = perm[lo:lo + 8]
            opt.zero_grad()
            F.cross_entropy(ref(client.x_train[idx]), client.y_train[idx]).backward()
            opt.step()
    got = load_run_models(tmp_path / "models.pt").models[0].state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(got[k], v), k


def test_participation_sampling_is_seeded(tmp_path):
    a = [sample_clients(7, r, 20, 0.3) for r in range(5)]
    assert all(len(s) == 6 and np.all(np.diff(s) > 0) for s in a)
    assert all(np.array_equal(x, sample_clients(7, r, 20, 0.3)) for r, x in enumerate(a))
    assert not all(np.array_equal(x, sample_clients(8, r, 20, 0.3)) for r, x in enumerate(a))
    assert not np.array_equal(a[0], a[1])
    fed = synthetic_federated(n_clients=6, n_train=16)
    train_run(fed, settings(rounds=2, participation=0.5), 7, tmp_path, LOG)
    h = pd.read_parquet(tmp_path / "history.parquet")
    for r in range(2):
        assert list(np.flatnonzero(h[h["round"] == r]["sampled"])) == list(sample_clients(7, r, 6, 0.5))
    assert h.loc[~h["sampled"], "train_loss"].isna().all()


def test_orchestrator_evaluated_once_per_distinct_model():
    fed = synthetic_federated(n_clients=6, n_train=16)
    engine, state = build_engine(fed, settings(rounds=2), 0, LOG)
    engine.run_round(state, 0, 2)
    assert engine.evaluator.n_orchestrator_calls == 1  # one global model, six clients
    two = TwoClusters()
    two.setup(engine.strategy.ctx)
    engine.strategy = two
    engine.run_round(state, 1, 2)
    assert engine.evaluator.n_orchestrator_calls == 1 + 2
    assert sorted(state.models) == [0, 1]
    last = [r for r in state.history if r["round"] == 1]
    assert [r["cluster"] for r in last] == [0, 1, 0, 1, 0, 1]
    assert {r["model_key"] for r in last} == {"c0", "c1"}
    assert state.server_rows[-1]["clustered_now"] and state.server_rows[-1]["diagnostics"]["scores"] == "[1.5,2.5]"


class EmptiesOne(Strategy):
    """Test strategy: three models; every client chooses model 0, so models 1 and 2 have no members; ``keep``
    names the ones the engine must keep all the same."""

    def __init__(self, keep=(), **params):
        super().__init__(**params)
        self.keep = tuple(keep)

    def initial_models(self, init, make_init):
        return {0: init, 1: make_init(1), 2: make_init(2)}

    def configure(self, rnd, clients, evaluate, models):
        self.offered = sorted(models)
        return {int(c): 0 for c in clients}

    def aggregate(self, updates):
        self.assignment = ClusterAssignment(np.zeros(self.ctx.n_clients, dtype=np.int64))
        return StrategyResult(self.assignment, keep_models=self.keep)


@pytest.mark.parametrize("keep", [(), (1, 2, 7)])
def test_a_model_without_members_is_dropped_unless_the_strategy_keeps_it(keep):
    """StrategyResult.keep_models: a kept empty model stays unchanged and is offered again next round (IFCA's
    k models); an id the state does not hold (7) is ignored; without it, an empty model is dropped."""
    fed = synthetic_federated(n_clients=4, n_train=16)
    engine, state = build_engine(fed, settings(rounds=2), 0, LOG)
    strategy = EmptiesOne(keep)
    strategy.setup(engine.strategy.ctx)
    engine.strategy = strategy
    state.models = strategy.initial_models(state.models[0], lambda i: state.models[0] * 0 + i)
    state.extra = {c: state.extra[0] for c in state.models}
    before = {c: m.clone() for c, m in state.models.items()}
    engine.run_round(state, 0, 2)
    engine.run_round(state, 1, 2)
    assert sorted(state.models) == [0, *[c for c in keep if c in before]]
    assert strategy.offered == sorted(state.models)
    for c in keep:
        if c in before:
            assert torch.equal(state.models[c], before[c])
    assert not torch.equal(state.models[0], before[0])
    assert {r["n_clusters"] for r in state.server_rows} == {1}  # kept models are not clusters: no client is in them


def test_mixed_start_specs_and_evaluate(tmp_path, monkeypatch):
    fed = synthetic_federated(n_clients=4, n_train=16)
    engine, state = build_engine(fed, settings(rounds=1), 0, LOG)
    mix = MixStart()
    mix.setup(engine.strategy.ctx)
    engine.strategy = mix
    state.models = mix.initial_models(state.models[0], lambda i: state.models[0] * 0 + i)
    state.extra = {c: state.extra[0] for c in state.models}
    full = engine.full_vector(state, {0: 0.5, 1: 0.5}, 0)
    assert torch.allclose(full, 0.5 * state.models[0] + 0.5)
    engine.run_round(state, 0, 1)
    assert mix.seen_losses.shape == (4, 2) and np.isfinite(mix.seen_losses).all()
    assert {r["model_key"] for r in state.history} == {'mix:{"0":0.25,"1":0.75}'}
    assert engine.evaluator.n_orchestrator_calls == 1


def test_evaluate_matches_direct_loss():
    fed = synthetic_federated(n_clients=3, n_train=[12, 20, 16])
    engine, state = build_engine(fed, settings(rounds=1), 0, LOG)
    evaluate = engine.make_evaluate(state)
    out = evaluate({0: state.models[0], 5: state.models[0] * 0.5}, [2, 0])
    model = engine.evaluator.model
    engine.model_layout.load(model, state.models[0])
    with torch.no_grad():
        direct = F.cross_entropy(model(fed.clients[2].x_train), fed.clients[2].y_train).item()
    assert out.shape == (2, 2) and out[0, 0] == pytest.approx(direct, rel=1e-6)
    assert out[0, 1] != pytest.approx(out[0, 0])


def test_nan_loss_raises_and_writes_nothing(tmp_path):
    fed = synthetic_federated(n_clients=3, n_train=16)
    fed.clients[1].x_train[0] = float("nan")
    with pytest.raises(TrainingDiverged, match="round 0: client 1"):
        train_run(fed, settings(), 0, tmp_path, LOG)
    assert not any((tmp_path / f).exists() for f in OUTPUTS)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cuda_without_gpu_is_a_clear_error(tmp_path):
    s = settings()
    s["device"] = "cuda"
    with pytest.raises(CflError, match="device: 'cuda'.*no CUDA GPU"):
        train_run(synthetic_federated(n_clients=3), s, 0, tmp_path, LOG)


def test_incompatible_model_fails_before_training(tmp_path):
    with pytest.raises(ConfigError, match="lenet5"):
        train_run(synthetic_federated(n_clients=3, shape=(1, 8, 8)), settings(model="lenet5"), 0, tmp_path, LOG)
    assert not any((tmp_path / f).exists() for f in OUTPUTS)


def test_temperature_definition_7():
    assert temperature(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))[0] == pytest.approx(0.5)  # orthogonal
    assert temperature(torch.tensor([[1.0, 0.0], [-2.0, 0.0]]))[0] == pytest.approx(1.0)  # opposite: maximal
    assert temperature(torch.tensor([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]))[0] == pytest.approx(0.0, abs=1e-12)
    assert temperature(torch.ones(1, 3))[0] is None


def test_server_optimizers():
    starts = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    news = torch.tensor([[2.0, 0.0], [4.0, 1.0]])
    model, _ = aggregate_cluster(ServerOptimizer(), starts, news, None, {})
    assert torch.equal(model, news.mean(0))
    model, _ = aggregate_cluster(ServerOptimizer(), starts, news, torch.tensor([3.0, 1.0]), {})
    assert torch.allclose(model, torch.tensor([2.5, 0.25]))
    model, _ = aggregate_cluster(ServerOptimizer("sgd", 0.5), starts, news, None, {})
    assert torch.allclose(model, torch.tensor([2.0, 0.75]))
    adam = ServerOptimizer("adam", 0.1, (0.9, 0.99), 1e-3)
    model, st = aggregate_cluster(adam, starts, news, None, {})
    d = torch.tensor([2.0, -0.5])
    m, v = 0.1 * d, 0.99 * 1e-6 + 0.01 * d ** 2
    assert torch.allclose(model, 1 + 0.1 * m / (v.sqrt() + 1e-3)) and torch.allclose(st["v"], v)
    yogi = ServerOptimizer("yogi", 0.1, (0.9, 0.99), 1e-3)
    _, st = aggregate_cluster(yogi, starts, news, None, {})
    assert torch.allclose(st["v"], 1e-6 + 0.01 * d ** 2)  # v < d^2: sign -1 adds


def test_same_partition():
    assert same_partition(np.array([0, 0, 1]), np.array([5, 5, 2]))
    assert not same_partition(np.array([0, 0, 1]), np.array([0, 1, 1]))


def test_fedbn_keeps_batchnorm_local():
    fed = synthetic_federated(n_clients=3, n_train=[20, 14, 10])
    s = settings(rounds=1, model="resnet34", model_kwargs={"width": 4}, bn_stats="local")
    engine, state = build_engine(fed, s, 0, LOG)
    layout = engine.model_layout
    assert len(engine.part.local) == sum(e.numel for e in layout.entries if e.is_bn) > 0
    assert len(engine.part.shared) + len(engine.part.local) == layout.n_full
    engine.run_round(state, 0, 1)
    local = [state.client_local[i] for i in range(3)]
    assert not torch.equal(local[0], local[1]) and not torch.equal(local[1], local[2])


@pytest.mark.parametrize("aggregation", ["unweighted", "weighted"])
def test_bn_buffers_out_of_delta_are_still_averaged(aggregation):
    """BN buffers kept out of the deltas (``bn_buffers_in_delta: false``) become, after a round, the mean of the
    sampled clients' post-training buffers (weighted by n_train with ``aggregation: weighted``), computed here by
    hand from what the trainer returned."""
    fed = synthetic_federated(n_clients=3, n_train=[20, 14, 10])
    engine, state = build_engine(fed, settings(rounds=1, model="resnet34", model_kwargs={"width": 4}, bn_buffers_in_delta=False,
                                               aggregation=aggregation), 0, LOG)
    buffers = sum(e.numel for e in engine.model_layout.buffers)
    assert len(engine.part.extra) == buffers and len(engine.part.shared) == engine.model_layout.n_trainable
    trained = []
    real_train = engine.trainer.train
    engine.trainer.train = lambda *args: trained.append(real_train(*args)) or trained[-1]
    before = state.extra[0].clone()
    engine.run_round(state, 0, 1)
    client_buffers = trained[0].params[:, engine.part.extra].to(state.extra[0].dtype)  # rows: clients 0, 1, 2
    assert client_buffers.shape == (3, buffers)
    assert not torch.allclose(client_buffers[0], client_buffers[1])  # the clients' buffers differ
    n = torch.tensor([20.0, 14.0, 10.0], dtype=client_buffers.dtype)
    w = n / n.sum() if aggregation == "weighted" else torch.full((3,), 1 / 3, dtype=client_buffers.dtype)
    expected = (w[:, None] * client_buffers).sum(dim=0)
    torch.testing.assert_close(state.extra[0], expected, rtol=1e-6, atol=1e-6)
    assert not torch.allclose(state.extra[0], before) and not torch.allclose(state.extra[0], client_buffers[0])


def test_engine_loop_and_vmap_give_same_models_in_float64(tmp_path):
    fed = synthetic_federated(n_clients=4, n_train=[24, 17, 30, 20])
    for trainer in ("loop", "vmap"):
        train_run(fed, settings(rounds=2, trainer=trainer, precision="fp64"), 0, tmp_path / trainer, LOG)
    a, b = (load_run_models(tmp_path / t / "models.pt") for t in ("loop", "vmap"))
    for k, v in a.models[0].state_dict().items():
        assert v.dtype == torch.float64
        assert (v - b.models[0].state_dict()[k]).abs().max() <= 1e-10, k
    ha, hb = (pd.read_parquet(tmp_path / t / "history.parquet") for t in ("loop", "vmap"))
    np.testing.assert_allclose(ha["train_loss"], hb["train_loss"], rtol=0, atol=1e-10)
