"""004's aggregation baselines as engine options, for every method: FedProx (``engine.proximal_mu``, the
client's proximal term) and FedAvgM (``engine.server_momentum``, server SGD with momentum), and FedGWC over
them (004 Table 9: FedGWC "orthogonal to FL aggregation")."""
import copy
import logging

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

from cflcore.errors import ConfigError
from cflcore.fl import run as run_module
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer
from cflcore.settings import TrainingSettings
from cflcore.fl.run import KILL_ENV
from engine_runs import copy_checkpoints_through, cpu_train_spec, train_run
from cflcore.fl.server import ServerOptimizer, aggregate_cluster
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.trainers import LoopTrainer, VmapTrainer, derive_seed
from cflcore.models import build_model
from test_resume import _assert_same_outputs, kill_and_resume

CPU = torch.device("cpu")
LOG = logging.getLogger("test")
FED_KW = {"n_clients": 6, "n_train": [24, 16, 24, 20, 24, 16]}


def settings(rounds=4, method=None, **engine):
    return {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0,
                         "batch_size": 8, "local_epochs": 1, "rounds": rounds},
            "engine": {"trainer": "loop", "checkpoint_every": 1, "participation": 0.8, **engine},
            "algorithm": method or {"method": "bnc"}, "device": "cpu"}


def _run(tmp_path, name, s, fed_kw=FED_KW):
    out = tmp_path / name
    train_run(synthetic_federated(**fed_kw), s, 3, out, LOG)
    return out


def _same_history(a, b) -> bool:
    return pq.read_table(a / "history.parquet").equals(pq.read_table(b / "history.parquet"))


def _models(run_dir):
    """cluster id -> the cluster model's tensors flattened into one vector."""
    models = torch.load(run_dir / "models.pt", weights_only=True)["cluster_models"]
    return {c: torch.cat([t.reshape(-1).double() for t in sd.values()]) for c, sd in models.items()}


# ---------------------------------------------------------------------------------------------
# FedAvgM: the server step
# ---------------------------------------------------------------------------------------------
def test_fedavgm_server_step_follows_hsu_et_al():
    """v <- beta v + Delta, x <- x + lr v (v = Delta at a cluster's first step); momentum 0 is FedAvg's exact mean."""
    opt = ServerOptimizer("sgd", 0.5, momentum=0.9)
    starts = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    news1 = torch.tensor([[2.0, 0.0], [4.0, 1.0]], dtype=torch.float64)
    x1, s1 = aggregate_cluster(opt, starts, news1, None, {})
    d1 = torch.tensor([2.0, -0.5], dtype=torch.float64)
    assert torch.equal(s1["v"], d1) and torch.allclose(x1, 1 + 0.5 * d1)
    starts2 = x1.expand(2, 2)
    news2 = starts2 + torch.tensor([[1.0, 1.0], [-1.0, 3.0]], dtype=torch.float64)
    x2, s2 = aggregate_cluster(opt, starts2, news2, None, s1)
    v2 = 0.9 * d1 + torch.tensor([0.0, 2.0], dtype=torch.float64)
    assert torch.allclose(s2["v"], v2) and torch.allclose(x2, x1 + 0.5 * v2)
    x0, s0 = aggregate_cluster(ServerOptimizer("sgd", 1.0, momentum=0.0), starts, news1, None, {})
    assert torch.equal(x0, news1.mean(0)) and s0 == {}


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="engine.server_momentum"):
        ServerOptimizer("adam", momentum=0.9)
    with pytest.raises(ConfigError, match="engine.server_momentum"):
        ServerOptimizer("sgd", momentum=1.0)
    with pytest.raises(ConfigError, match="engine.proximal_mu"):
        cpu_train_spec(optimizer=ClientOptimizer("sgd", 0.01), batch_size=8, local_epochs=1, proximal_mu=-0.1)
    from cflcore import config as cc
    from conftest import REPO
    with pytest.raises(ConfigError, match=r"engine.server_optimizer: 'adam' is not allowed; allowed: sgd"):
        cc.load_config(f"{REPO}/config/config.yaml", overrides={"engine": {"server_momentum": 0.9, "server_optimizer": "adam"}})
    with pytest.raises(ConfigError, match="engine.proximal_mu"):
        cc.load_config(f"{REPO}/config/config.yaml", overrides={"engine": {"proximal_mu": -1}})


# ---------------------------------------------------------------------------------------------
# Whole runs: zero settings are FedAvg bit for bit; non-zero ones change the run
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fedavg(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("fedavg"), "run", settings())


def test_zero_mu_and_zero_momentum_are_fedavg_bit_for_bit(tmp_path, fedavg):
    for name, extra in (("prox0", {"proximal_mu": 0.0}), ("avgm0", {"server_momentum": 0.0})):
        _assert_same_outputs(fedavg, _run(tmp_path, name, settings(**extra)))


@pytest.mark.parametrize("extra", [{"proximal_mu": 0.5}, {"server_momentum": 0.9}])
def test_nonzero_options_change_the_run(tmp_path, fedavg, extra):
    other = _run(tmp_path, "run", settings(**extra))
    assert not _same_history(fedavg, other)
    assert not torch.equal(_models(fedavg)[0], _models(other)[0])


def test_fedavgm_resumes_bit_identically_and_needs_its_momentum(tmp_path, monkeypatch):
    """Killed after round 1 (momentum buffers in play) and restarted: the outputs of the uninterrupted run.
    A restart whose checkpoint lost the per-cluster server state gives other outputs (the test can fail)."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    s = settings(server_momentum=0.9)
    reference = _run(tmp_path, "ref", s)
    fed = synthetic_federated(**FED_KW)
    run = tmp_path / "run"
    train = lambda: train_run(fed, copy.deepcopy(s), 3, run, logging.getLogger("cflcore.fl"))  # noqa: E731
    log = kill_and_resume(train, run, 1)
    assert "resuming from checkpoint round 1" in log
    _assert_same_outputs(reference, run)

    forgetful = tmp_path / "forgetful"
    copy_checkpoints_through(run, forgetful, 1)
    original = run_module.state_from_checkpoint

    def lose_server_state(ck, device, dtype):
        state = original(ck, device, dtype)
        assert state.server_state and all("v" in s for s in state.server_state.values())
        state.server_state = {}
        return state

    monkeypatch.setattr(run_module, "state_from_checkpoint", lose_server_state)
    train_run(fed, copy.deepcopy(s), 3, forgetful, LOG)
    assert not _same_history(reference, forgetful)


# ---------------------------------------------------------------------------------------------
# FedProx: the client objective
# ---------------------------------------------------------------------------------------------
def _trainers(mu, sizes=(24, 17, 30), dtype="fp64"):
    fed = synthetic_federated(n_clients=len(sizes), n_train=list(sizes))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = build_model("tinyvgg", 1, (8, 8), fed.n_classes)
    layout = ModelLayout.of(model)
    start = layout.flatten(model).double()
    starts = torch.stack([start + 0.01 * i for i in range(len(sizes))])
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", 0.1, momentum=0.5, weight_decay=1e-3), batch_size=8, local_epochs=3, precision=dtype, proximal_mu=mu)
    seeds = [derive_seed(4, i) for i in range(len(sizes))]
    make = lambda: copy.deepcopy(model)  # noqa: E731
    return fed, layout, starts, spec, seeds, make


def test_fedprox_gradient_is_the_proximal_objectives():
    """The loop trainer's step with mu equals torch.optim.SGD on F(w) + mu/2 ||w - w_start||^2 (autograd)."""
    mu = 0.7
    fed, layout, starts, spec, seeds, make = _trainers(mu, sizes=(19,))
    got = LoopTrainer(make(), layout, spec, CPU).train(starts, fed.clients, seeds)
    model = make().double()
    layout.load(model, starts[0])
    params = [p for _, p in model.named_parameters()]
    anchors = [p.detach().clone() for p in params]
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.5, weight_decay=1e-3)
    client = fed.clients[0]
    x, y = client.x_train.double(), client.y_train
    for epoch in range(3):
        gen = torch.Generator().manual_seed(derive_seed(seeds[0], epoch))
        perm = torch.randperm(len(y), generator=gen)
        for lo in range(0, len(y), 8):
            idx = perm[lo:lo + 8]
            opt.zero_grad()
            prox = sum(((p - a) ** 2).sum() for p, a in zip(params, anchors))
            (F.cross_entropy(model(x[idx]), y[idx]) + mu / 2 * prox).backward()
            opt.step()
    assert torch.allclose(got.params[0], layout.flatten(model), rtol=0, atol=1e-12)


@pytest.mark.kernels
def test_fedprox_loop_equals_vmap_and_pulls_the_update_norm_down():
    """loop == vmap (float64) with the proximal term, and every client's update is shorter than without it."""
    norms = {}
    for mu in (0.0, 1.0):
        fed, layout, starts, spec, seeds, make = _trainers(mu)
        a = LoopTrainer(make(), layout, spec, CPU).train(starts, fed.clients, seeds)
        b = VmapTrainer(make(), layout, spec, CPU).train(starts, fed.clients, seeds)
        assert (a.params - b.params).abs().max().item() <= 1e-10
        for la, lb in zip(a.step_losses, b.step_losses):
            np.testing.assert_allclose(la, lb, rtol=0, atol=1e-10)
        norms[mu] = (a.params - starts).norm(dim=1)
    assert (norms[1.0] < 0.9 * norms[0.0]).all(), norms


# ---------------------------------------------------------------------------------------------
# FedGWC over FedAvgM / FedProx (004 Table 9)
# ---------------------------------------------------------------------------------------------
def test_fedgwc_composes_with_fedavgm_and_fedprox(tmp_path):
    """FedGWC runs with each option set; the options change its models and the loss traces its rewards
    are computed from, while its interaction-matrix machinery runs as usual (MSE traced every round)."""
    fed_kw = {"n_clients": 9, "n_train": 24}
    gwc = {"method": "fedgwc", "participation": 0.8, "epsilon": 0.1}
    runs = {name: _run(tmp_path, name, settings(rounds=3, method=gwc, participation=1.0, **extra), fed_kw)
            for name, extra in (("fedavg", {}), ("fedavgm", {"server_momentum": 0.9}), ("fedprox", {"proximal_mu": 0.5}))}
    import pandas as pd
    base = pd.read_parquet(runs["fedavg"] / "history.parquet")
    for name in ("fedavgm", "fedprox"):
        server = pd.read_parquet(runs[name] / "server.parquet")
        assert server["min_mse"].notna().all() and (server["min_mse"] < 1.0).all()
        other = pd.read_parquet(runs[name] / "history.parquet")
        assert not np.array_equal(base["local_loss"].to_numpy(), other["local_loss"].to_numpy()), name
        assert _models(runs["fedavg"]).keys() != _models(runs[name]).keys() or not all(
            torch.equal(v, _models(runs[name])[c]) for c, v in _models(runs["fedavg"]).items()), name
    # FedAvgM changes the server step only: round 0's client training (and losses) are FedAvg's
    first = lambda df: df[df["round"] == 0]["train_loss"].to_numpy()  # noqa: E731
    avgm = pd.read_parquet(runs["fedavgm"] / "history.parquet")
    np.testing.assert_array_equal(first(base), first(avgm))
    prox = pd.read_parquet(runs["fedprox"] / "history.parquet")
    assert not np.array_equal(first(base), first(prox))


# ---------------------------------------------------------------------------------------------
# FairAvg (Michieli & Ozay 2021) = aggregation unweighted; 004's FedAvg = aggregation weighted
# ---------------------------------------------------------------------------------------------
def test_fairavg_is_the_uniform_mean_and_fedavg_the_sample_weighted_one(tmp_path):
    """One round of two clients with 8 and 40 training samples, trained here with the engine's own seeds:
    ``aggregation: unweighted`` (FairAvg) gives (w1 + w2) / 2, ``weighted`` (McMahan's FedAvg, 004's) gives
    (8 w1 + 40 w2) / 48."""
    from cflcore.fl.run import _STREAM_INIT, _STREAM_TRAIN, _init_model

    fed_kw, seed = {"n_clients": 2, "n_train": [8, 40]}, 3
    fed = synthetic_federated(**fed_kw)
    kwargs = {"in_channels": 1, "image_size": [8, 8], "n_classes": fed.n_classes}
    init = _init_model("tinyvgg", kwargs, derive_seed(seed, _STREAM_INIT, 0))
    layout = ModelLayout.of(init)
    start = layout.flatten(init)
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", 0.05), batch_size=8, local_epochs=1)
    trained = LoopTrainer(copy.deepcopy(init), layout, spec, CPU).train(
        torch.stack([start, start]), fed.clients, [derive_seed(seed, _STREAM_TRAIN, 0, c) for c in (0, 1)]).params
    expected = {"unweighted": trained.mean(0), "weighted": (8 * trained[0] + 40 * trained[1]) / 48}
    got = {}
    for aggregation in expected:
        s = settings(rounds=1, aggregation=aggregation, participation=1.0)
        train_run(synthetic_federated(**fed_kw), s, seed, tmp_path / aggregation, LOG)
        sd = torch.load(tmp_path / aggregation / "models.pt", weights_only=True)["cluster_models"][0]
        template = copy.deepcopy(init)
        template.load_state_dict(sd)
        got[aggregation] = layout.flatten(template)
        assert torch.allclose(got[aggregation], expected[aggregation], rtol=0, atol=1e-6), aggregation
    assert (got["unweighted"] - got["weighted"]).abs().max() > 1e-4


@pytest.mark.kernels
def test_fedprox_on_mnist_keeps_every_client_closer_to_its_start(mnist_study):
    """Real MNIST-5k (NB, 15 clients, the default study's local Adam, 3 epochs) from one shared start: the
    proximal term shortens every client's update (Li et al. 2020: local models stay near the global one),
    the more the larger mu, while the clients still learn (their mean training loss drops within the round)."""
    from cflcore.data import load_federated
    from cflcore.fl.run import _STREAM_INIT, _STREAM_TRAIN, _init_model

    fed = load_federated(mnist_study.data, mnist_study.split, CPU)
    training = mnist_study.settings("bnc")["training"]
    kwargs = {"in_channels": 1, "image_size": [28, 28], "n_classes": fed.n_classes, **training["model_kwargs"]}
    init = _init_model(training["model"], kwargs, derive_seed(0, _STREAM_INIT, 0))
    layout = ModelLayout.of(init)
    starts = layout.flatten(init).expand(fed.n_clients, -1)
    seeds = [derive_seed(0, _STREAM_TRAIN, 0, c) for c in range(fed.n_clients)]
    norms, losses = {}, {}
    for mu in (0.0, 0.1, 1.0):
        spec = cpu_train_spec(optimizer=ClientOptimizer.from_training(TrainingSettings.of(training)),
                              batch_size=training["batch_size"], local_epochs=training["local_epochs"], proximal_mu=mu)
        out = LoopTrainer(copy.deepcopy(init), layout, spec, CPU).train(starts, fed.clients, seeds)
        norms[mu] = (out.params - starts).norm(dim=1)
        losses[mu] = np.array([(ls[:3].mean(), ls[-3:].mean()) for ls in out.step_losses])
    assert (norms[0.1] < norms[0.0]).all() and (norms[1.0] < norms[0.1]).all(), norms
    assert norms[1.0].mean() < 0.8 * norms[0.0].mean()
    for mu in losses:
        assert (losses[mu][:, 1] < losses[mu][:, 0]).mean() > 0.8, (mu, losses[mu])  # still learning


def test_fedavg_of_a_subset_read_in_place_is_bit_identical_to_the_mean_of_a_copy():
    """cflcore.fl.server.rows_mean: the members' rows reduced column block by column block, without a
    (members × P) copy, give the same bits as weighted_mean of index_select's copy, weighted or not."""
    import torch

    from cflcore.fl.server import rows_mean, weighted_mean

    gen = torch.Generator().manual_seed(0)
    for n in (2, 5, 15):
        x = torch.randn(n, 20_000, generator=gen)
        for rows in ([0], list(range(0, n, 2)), list(range(1, n))):
            for w in (None, torch.rand(len(rows), generator=gen) * 100):
                ref = weighted_mean(x.index_select(0, torch.tensor(rows)), w)
                assert torch.equal(rows_mean(x, rows, w, block=4096), ref)
        assert torch.equal(rows_mean(x, None, None), weighted_mean(x, None))
