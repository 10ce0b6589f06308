"""pFedMe and Per-FedAvg as engine options (``engine.personalisation``, cflcore/fl/personal.py; 004 Table 9):
the update rules against hand computations on a linear model, the engine's scoring of personalised models,
bit-identical resumption after a kill, and FedGWC over each."""
import copy
import logging

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import cflcore.config as cc
from cflcore.data.federated import ClientData
from cflcore.errors import ConfigError
from cflcore.fl import run as run_module
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer
from cflcore.fl.personal import (Personalisation, PersonalTrainer, hvp_finite_difference, perfedavg_hf_direction,
                                 pfedme_envelope_grad, pfedme_inner_step)
from cflcore.fl.run import KILL_ENV
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.trainers import epoch_order
from cflcore.settings import EngineSettings, block_values
from engine_runs import copy_checkpoints_through, cpu_train_spec, train_run
from test_resume import _assert_same_outputs, kill_and_resume

REPO = __file__.rsplit("/tests/", 1)[0]
CPU = torch.device("cpu")
LOG = logging.getLogger("test")
FED_KW = {"n_clients": 6, "n_train": [24, 16, 24, 20, 24, 16]}
T = lambda *v: [torch.tensor(x, dtype=torch.float64) for x in v]  # noqa: E731


def personalisation(**kw) -> Personalisation:
    return from_engine({"personalisation": kw})


def from_engine(engine) -> Personalisation:
    """As the engine builds it (cflcore.fl.run.build_engine): from the typed engine block, the schema's defaults
    under what a partial block leaves out."""
    return Personalisation(**block_values(EngineSettings.of(engine).personalisation))


# ---------------------------------------------------------------------------------------------
# The update rules, by hand
# ---------------------------------------------------------------------------------------------
def test_pfedme_steps_by_hand():
    """θ − lr (g + λ(θ − w) + l2 θ) with θ 1, g 0.5, w 2, λ 15, lr 0.1, l2 0.001: 1 − 0.1 (0.5 − 15 + 0.001) = 2.4499;
    the envelope gradient λ(w − θ) = 15 (2 − 2.4499) = −6.7485 (pFedMe §3)."""
    theta = pfedme_inner_step(T(1.0), T(0.5), T(2.0), 15.0, 0.1, 0.001)
    assert theta[0].item() == pytest.approx(2.4499, abs=1e-12)
    assert pfedme_inner_step(T(1.0), T(0.5), T(2.0), 15.0, 0.1, 0.0)[0].item() == pytest.approx(2.45, abs=1e-12)
    assert pfedme_envelope_grad(T(2.0), theta, 15.0)[0].item() == pytest.approx(-6.7485, abs=1e-12)


def test_hessian_free_direction_by_hand():
    """On f(w) = ½ a w² the finite difference is exact: ∇²f u = a u; (I − α a) g with a 3, u = g = 2, α 0.1: 1.4."""
    a, w, u, delta = 3.0, 0.7, 2.0, 1e-3
    hvp = hvp_finite_difference(T(a * (w + delta * u)), T(a * (w - delta * u)), delta)
    assert hvp[0].item() == pytest.approx(a * u, abs=1e-9)
    assert perfedavg_hf_direction(T(u), hvp, 0.1)[0].item() == pytest.approx(1.4, abs=1e-9)


def test_settings_are_validated_with_the_field_and_the_allowed_values():
    with pytest.raises(ConfigError, match=r"engine.personalisation.kind: 'pfedavg' is not allowed; allowed: none, pfedme, perfedavg"):
        personalisation(kind="pfedavg")
    with pytest.raises(ConfigError, match="engine.personalisation.update"):
        personalisation(kind="perfedavg", update="so")
    with pytest.raises(ConfigError, match="engine.personalisation.kind"):
        cc.load_config(f"{REPO}/config/config.yaml", overrides={"engine": {"personalisation": {"kind": "ditto"}}})
    with pytest.raises(ConfigError, match="engine.personalisation.lam"):
        cc.load_config(f"{REPO}/config/config.yaml", overrides={"engine": {"personalisation": {"kind": "pfedme", "lam": 0}}})
    with pytest.raises(ConfigError, match="engine.trainer: 'vmap' is not allowed; allowed: loop, auto"):
        cc.load_config(f"{REPO}/config/config.yaml", overrides={"engine": {"trainer": "vmap", "personalisation": {"kind": "pfedme"}}})
    with pytest.raises(ConfigError, match="engine.proximal_mu"):
        cc.load_config(f"{REPO}/config/config.yaml", overrides={"engine": {"proximal_mu": 0.1, "personalisation": {"kind": "perfedavg"}}})


# ---------------------------------------------------------------------------------------------
# The client updates against a numpy computation on a linear softmax model
# ---------------------------------------------------------------------------------------------
N, B, D, C, SEED = 6, 4, 3, 2, 11


def _client() -> ClientData:
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(N, 1, 1, D)))
    y = torch.from_numpy(rng.integers(0, C, N).astype(np.int64))
    return ClientData(x, y, x[:2], y[:2], np.arange(N), np.arange(2))


def _trainer(kind: str, lr: float = 0.1, **kw) -> tuple[PersonalTrainer, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(D, C)).double()
    layout = ModelLayout.of(model)
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", lr), batch_size=B, local_epochs=1, precision="fp64")
    return PersonalTrainer(model, layout, spec, CPU, personalisation(kind=kind, **kw)), layout.flatten(model)


def _grad(vec: np.ndarray, idx: np.ndarray, client: ClientData) -> np.ndarray:
    """∇ of the mean cross-entropy of logits x Wᵀ + b at vec = (W row-major, b): ((P − Y)ᵀ X, Σ (P − Y)) / |batch|."""
    W, b = vec[:C * D].reshape(C, D), vec[C * D:]
    X, y = client.x_train.reshape(N, D).numpy()[idx], client.y_train.numpy()[idx]
    Z = X @ W.T + b
    P = np.exp(Z - Z.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    G = (P - np.eye(C)[y]) / len(idx)
    return np.concatenate([(G.T @ X).ravel(), G.sum(0)])


def _batches(n_epochs: int) -> list[np.ndarray]:
    """The client's batch stream: each epoch's seeded permutation cut into batches of B (trainers.epoch_order)."""
    out = []
    for e in range(n_epochs):
        perm = epoch_order(SEED, e, N)[1].numpy()
        out += [perm[lo:lo + B] for lo in range(0, N, B)]
    return out


@pytest.mark.parametrize("personal_model", ["local", "theta"])
def test_pfedme_client_matches_the_hand_computation(personal_model):
    """τ = 2 local rounds (6 samples, batch 4), K = 3 inner steps each; θ carries over between rounds."""
    lam, plr, l2, eta, K = 15.0, 0.02, 0.001, 0.1, 3
    trainer, start = _trainer("pfedme", eta, lam=lam, personal_lr=plr, inner_l2=l2, inner_steps=K, personal_model=personal_model)
    client = _client()
    local, personal, losses = trainer.train_pfedme(start, client, SEED)
    w = start.numpy().copy()
    theta = w.copy()
    for idx in _batches(1):
        for _ in range(K):
            theta = theta - plr * (_grad(theta, idx, client) + lam * (theta - w) + l2 * theta)
        w = w - eta * lam * (w - theta)
    np.testing.assert_allclose(local.numpy(), w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(personal.numpy(), theta if personal_model == "theta" else w, rtol=0, atol=1e-12)
    assert len(losses) == 2 and not np.allclose(theta, w)


@pytest.mark.parametrize("update", ["fo", "hf"])
def test_perfedavg_client_matches_the_hand_computation(update):
    """τ = 2 meta steps, each on 2 (FO) or 3 (HF) fresh batches of the stream, which runs on into later epochs."""
    alpha, beta, delta = 0.1, 0.05, 1e-3
    trainer, start = _trainer("perfedavg", alpha, beta=beta, update=update, hf_delta=delta)
    client = _client()
    new, losses = trainer.train_perfedavg(start, client, SEED)
    w, stream = start.numpy().copy(), iter(_batches(3))
    for _ in range(2):
        d1, d2 = next(stream), next(stream)
        g = _grad(w - alpha * _grad(w, d1, client), d2, client)
        if update == "hf":
            d3 = next(stream)
            g = g - alpha * (_grad(w + delta * g, d3, client) - _grad(w - delta * g, d3, client)) / (2 * delta)
        w = w - beta * g
    np.testing.assert_allclose(new.numpy(), w, rtol=0, atol=1e-12)
    assert len(losses) == 2


def test_perfedavg_hf_is_close_to_the_exact_hessian_vector_product():
    """One HF meta step with a small δ is w − β (I − α∇²f(w; D''))∇f(w̃; D') within O(δ²), against torch's exact
    Hessian-vector product (D, D' the first epoch's two batches, D'' the second epoch's first)."""
    alpha, beta = 0.1, 0.05
    trainer, start = _trainer("perfedavg", alpha, beta=beta, update="hf", hf_delta=1e-4)
    trainer.steps_per_round = lambda client: 1
    client = _client()
    got, _ = trainer.train_perfedavg(start, client, SEED)
    d1, d2, d3 = _batches(2)[:3]
    X = client.x_train.reshape(N, D)
    w = start.numpy().copy()

    def loss(v):
        W, bias = v[:C * D].reshape(C, D), v[C * D:]
        return nn.functional.cross_entropy(X[torch.as_tensor(d3)] @ W.T + bias, client.y_train[torch.as_tensor(d3)])

    g = _grad(w - alpha * _grad(w, d1, client), d2, client)
    _, hv = torch.autograd.functional.hvp(loss, torch.from_numpy(w), torch.from_numpy(g))
    np.testing.assert_allclose(got.numpy(), w - beta * (g - alpha * hv.numpy()), rtol=0, atol=1e-9)


def test_perfedavg_adaptation_is_one_sgd_step_on_a_training_batch():
    trainer, start = _trainer("perfedavg", 0.1)
    client = _client()
    adapted = trainer.adapt(start, client, SEED)
    w = start.numpy()
    np.testing.assert_allclose(adapted.numpy(), w - 0.1 * _grad(w, _batches(1)[0], client), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# The engine: personalised scores, resumption, FedGWC over each
# ---------------------------------------------------------------------------------------------
def settings(rounds=4, method=None, **personal):
    return {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0,
                         "batch_size": 8, "local_epochs": 1, "rounds": rounds},
            "engine": {"trainer": "loop", "checkpoint_every": 1, "participation": 0.5, "personalisation": personal},
            "algorithm": method or {"method": "bnc"}, "device": "cpu"}


def _run(tmp_path, name, s, fed_kw=FED_KW):
    out = tmp_path / name
    train_run(synthetic_federated(**fed_kw), s, 3, out, LOG)
    return out


def _history(run_dir) -> pd.DataFrame:
    return pd.read_parquet(run_dir / "history.parquet")


def test_pfedme_scores_each_clients_personal_model(tmp_path):
    """FedAvg's local_* are its global model's scores; pFedMe's are each trained client's personal model, and a
    client that never trained keeps the global model's scores until it does."""
    base = _history(_run(tmp_path, "none", settings(kind="none")))
    assert np.array_equal(base["local_loss"].to_numpy(), base["global_loss"].to_numpy())
    h = _history(_run(tmp_path, "pfedme", settings(kind="pfedme", personal_lr=0.02)))
    trained = set()
    for rnd, rows in h.groupby("round"):
        trained |= set(rows.loc[rows["sampled"], "client"])
        has = rows["client"].isin(trained).to_numpy()
        assert (rows["local_loss"].to_numpy()[has] != rows["global_loss"].to_numpy()[has]).all(), rnd
        assert (rows["local_loss"].to_numpy()[~has] == rows["global_loss"].to_numpy()[~has]).all(), rnd


def test_perfedavg_scores_after_one_adaptation_step(tmp_path):
    """Every client's local_* is its model after one adaptation step on its training data: never the global
    model's numbers, and better than them for most clients."""
    out = _run(tmp_path, "perfedavg", settings(rounds=2, kind="perfedavg", beta=0.05))
    h = _history(out)
    assert (h["local_loss"] != h["global_loss"]).all()
    assert (h["local_loss"] < h["global_loss"]).mean() > 0.5  # a step on the client's own data helps it


@pytest.mark.parametrize("personal", [{"kind": "pfedme", "personal_lr": 0.02}, {"kind": "perfedavg", "update": "hf", "beta": 0.05}])
def test_kill_and_resume_is_bit_identical(tmp_path, monkeypatch, personal):
    """Killed after round 1 and restarted: the uninterrupted run's outputs bit for bit. For pFedMe a restart whose
    checkpoint lost the personal models gives other outputs (so the test can fail)."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    s = settings(**personal)
    reference = _run(tmp_path, "ref", s)
    fed = synthetic_federated(**FED_KW)
    run = tmp_path / "run"
    train = lambda: train_run(fed, copy.deepcopy(s), 3, run, logging.getLogger("cflcore.fl"))  # noqa: E731
    log = kill_and_resume(train, run, 1)
    assert "resuming from checkpoint round 1" in log
    _assert_same_outputs(reference, run)
    if personal["kind"] != "pfedme":
        return
    forgetful = tmp_path / "forgetful"
    copy_checkpoints_through(run, forgetful, 1)
    original = run_module.state_from_checkpoint

    def lose_personal_models(ck, device, dtype):
        state = original(ck, device, dtype)
        assert state.personal
        state.personal = {}
        return state

    monkeypatch.setattr(run_module, "state_from_checkpoint", lose_personal_models)
    train_run(fed, copy.deepcopy(s), 3, forgetful, LOG)
    assert not _history(reference).equals(_history(forgetful))


@pytest.mark.parametrize("personal", [{"kind": "pfedme", "personal_lr": 0.02}, {"kind": "perfedavg", "beta": 0.05}])
def test_fedgwc_over_each(tmp_path, personal):
    """FedGWC (004) runs over pFedMe and Per-FedAvg: its reward machinery is traced, and the personalised client
    update changes the loss traces it clusters from."""
    fed_kw = {"n_clients": 9, "n_train": 24}
    gwc = {"method": "fedgwc", "participation": 0.8, "epsilon": 0.1}
    s = settings(rounds=3, method=gwc, **personal)
    s["engine"]["participation"] = 1.0
    base = _history(_run(tmp_path, "gwc", settings(rounds=3, method=gwc, kind="none"), fed_kw))
    out = _run(tmp_path, personal["kind"], s, fed_kw)
    server = pd.read_parquet(out / "server.parquet")
    assert server["min_mse"].notna().all()
    h = _history(out)
    assert not np.array_equal(base["train_loss"].dropna().to_numpy(), h["train_loss"].dropna().to_numpy())
    assert (h["local_loss"] != h["orch_loss"]).any()


def test_004_study_plans_table_9s_personalised_rows():
    """config/fedgwc-004.yaml runs pFedMe and Per-FedAvg without clusters and under FedGWC on Table 9's Dirichlet
    federations (3 datasets × 3 seeds each), and each run's engine settings select the personalisation."""
    cfg = cc.load_config(f"{REPO}/config/config.yaml", f"{REPO}/config/fedgwc-004.yaml")
    runs = cc.study_runs(cfg)
    for name, method, kind in (("pfedme", "bnc", "pfedme"), ("fedgwc-pfedme", "fedgwc", "pfedme"),
                               ("perfedavg", "bnc", "perfedavg"), ("fedgwc-perfedavg", "fedgwc", "perfedavg")):
        mine = [s for s, a in runs if a == name]
        assert len(mine) == 9 and {s["split"] for s in mine} == {"dirichlet-0p5", "dirichlet-0p01", "dirichlet-0p05"}
        s = cc.run_settings(cfg, mine[0]["dataset"], name, mine[0]["split"])
        assert s["algorithm"]["method"] == method and from_engine(s["engine"]).kind == kind
    assert from_engine(cc.run_settings(cfg, "cifar100", "fedgwc-fedprox", "dirichlet-0p5")["engine"]).kind == "none"


def test_pfedme_all_clients_trains_every_client_but_aggregates_the_sampled(tmp_path):
    """``all_clients`` (pFedMe Alg. 1 l. 4, the authors' server): every client has a personal model from round 0,
    while the aggregated models (and so the global_* columns) are those of the sampled-only run."""
    some = _history(_run(tmp_path, "some", settings(rounds=2, kind="pfedme", personal_lr=0.02)))
    every = _history(_run(tmp_path, "all", settings(rounds=2, kind="pfedme", personal_lr=0.02, all_clients=True)))
    assert np.array_equal(some["global_loss"].to_numpy(), every["global_loss"].to_numpy())
    assert (every["local_loss"] != every["global_loss"]).all()
    unsampled = ~some["sampled"].to_numpy() & (some["round"] == 0).to_numpy()
    assert unsampled.any() and (some["local_loss"].to_numpy()[unsampled] == some["global_loss"].to_numpy()[unsampled]).all()


def test_perfedavg_local_scores_are_the_final_model_after_one_adaptation_step(tmp_path):
    """The engine's local_* after the last round are exactly: the aggregated model (models.pt), one α step on the
    client's first mini-batch of the (seed, round, client) stream, scored on the client's test set."""
    from cflcore.fl.run import _STREAM_ADAPT
    from cflcore.fl.trainers import derive_seed
    from engine_runs import build_engine

    s = settings(rounds=2, kind="perfedavg", beta=0.05)
    out = _run(tmp_path, "p", s)
    engine, _ = build_engine(synthetic_federated(**FED_KW), s, 3, LOG)
    engine.template.load_state_dict(torch.load(out / "models.pt", weights_only=True)["cluster_models"][0])
    final = engine.model_layout.flatten(engine.template)
    last = _history(out).query("round == 1").set_index("client")
    for i, client in enumerate(engine.fed.clients):
        adapted = engine.trainer.adapt(final, client, derive_seed(3, _STREAM_ADAPT, 1, i))
        assert not torch.equal(adapted, final)
        ours = engine.evaluator.scores(adapted, client.x_test, client.y_test, engine.fed.n_classes)
        assert ours.loss == last.loc[i, "local_loss"] and ours.acc == last.loc[i, "local_acc"]
        assert engine.evaluator.scores(final, client.x_test, client.y_test, engine.fed.n_classes).loss == last.loc[i, "global_loss"]
