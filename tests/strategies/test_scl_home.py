"""SCL's home check (config/home-scl-offline.yaml): its departures table is well-formed, the engine's kept client
optimiser with its lr decay is the authors' (felisat/clustered-federated-learning fl_devices.py lines 88 and 106-109:
one torch.optim.SGD per client, made once, its lr times 0.99 before every round's training), and the config is the
recipe the claim (cflcore.report.papers.home) and the table name."""
import copy
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from cflcore.config import load_config
from cflcore.data.synthetic import synthetic_federated
from cflcore.errors import ConfigError
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer, OptimizerState, round_lr
from cflcore.fl.trainers import LoopTrainer, derive_seed
from cflcore.models import build_model
from cflcore.report.papers import home
from cflcore.strategies.code_departures import check_departures
from cflcore.strategies.scl_departures import DEPARTURES
from engine_runs import cpu_train_spec, train_run

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")


def test_the_departures_table_is_well_formed():
    check_departures(DEPARTURES, "scl")
    assert {"dataset", "training images", "model outputs", "seeds"} <= {d.parameter for d in DEPARTURES}


def test_a_malformed_row_is_refused():
    with pytest.raises(ValueError, match=r"scl\[0\] \('dataset'\)\.source"):
        check_departures((replace(DEPARTURES[0], source="clustered_federated_learning.ipynb"), *DEPARTURES[1:]), "scl")


def _authors_rounds(model, x, y, starts, lr=0.1, momentum=0.9, decay=0.99):
    """fl_devices.py lines 86-111: one SGD made once (line 88); every round the weights are set to the round's start
    (synchronize / reset), the lr is multiplied by ``decay`` (line 108), and one epoch of full-batch steps is taken
    (train_op, lines 9-24). Returns the trained weights of each round."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    layout, out = ModelLayout.of(model), []
    for start in starts:
        layout.load(model, start)
        opt.param_groups[0]["lr"] *= decay
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        out.append(layout.flatten(model))
    return out


@pytest.mark.parametrize("kept,same", [(True, True), (False, False)])
def test_kept_state_and_lr_decay_are_the_authors_client(kept, same):
    """Three rounds of one client from given starts, full batch: with the state kept (and the lr of round r at
    0.1 * 0.99^(r+1)) ours is the authors' Client up to summation order; a fresh state every round is not (the
    momentum of the earlier rounds is missing from rounds 1 and 2)."""
    fed = synthetic_federated(n_clients=1, n_train=40, shape=(1, 28, 28), n_classes=10)
    client = fed.clients[0]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = build_model("sattler-convnet", 1, 28, 10)
    layout = ModelLayout.of(model)
    w0 = layout.flatten(model)
    starts = [w0, w0 + 0.01 * torch.randn(w0.shape, generator=torch.Generator().manual_seed(1)), w0.flip(0) * 0.5]
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", lr=0.1, momentum=0.9), batch_size=64, local_epochs=1)
    trainer = LoopTrainer(copy.deepcopy(model), layout, spec, CPU)
    state = OptimizerState()
    ours = []
    for rnd, start in enumerate(starts):
        trainer.set_lr(round_lr(0.1, 0.99, rnd))
        result = trainer.train(start[None].clone(), [client], [derive_seed(0, rnd)],
                               optimizer_states=[state] if kept else None)
        ours.append(result.params[0].clone())
    theirs = _authors_rounds(model, client.x_train, client.y_train, starts)
    assert torch.allclose(ours[0], theirs[0], rtol=0, atol=1e-6)  # round 0: no earlier momentum either way
    assert all(torch.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(ours[1:], theirs[1:])) is same


def test_kept_state_on_the_personalisation_trainer_is_refused_in_one_line(tmp_path):
    """Settings built by hand past the config check (cflcore.config.run_checks.check_kept_optimizer_state): pFedMe's
    trainer starts every inner problem afresh, so the run refuses kept states; the vmap trainer keeps them."""
    settings = {"training": {"model": "sattler-convnet", "optimizer": "sgd", "lr": 0.1, "momentum": 0.9,
                             "batch_size": 8, "local_epochs": 1, "rounds": 1, "optimizer_state": "kept"},
                "engine": {"personalisation": {"kind": "pfedme"}}, "algorithm": {"method": "bnc"}, "device": "cpu"}
    fed = synthetic_federated(n_clients=3, n_train=16, shape=(1, 28, 28), n_classes=10)
    with pytest.raises(ConfigError, match=r"^datasets\.\*\.optimizer_state: kept needs a trainer that keeps") as err:
        train_run(fed, settings, 0, tmp_path)
    assert "\n" not in str(err.value) and "PersonalTrainer" in str(err.value)


def test_sattler_convnet_has_the_authors_layers():
    """models.py lines 8-11: conv1 (1 -> 6, 5x5), conv2 (6 -> 16, 5x5), fc1 256 -> classes (62 theirs, 10 here)."""
    model = build_model("sattler-convnet", 1, 28, 10)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    assert shapes == {"conv1.weight": (6, 1, 5, 5), "conv1.bias": (6,), "conv2.weight": (16, 6, 5, 5),
                      "conv2.bias": (16,), "fc1.weight": (10, 256), "fc1.bias": (10,)}
    assert model(torch.zeros(3, 1, 28, 28)).shape == (3, 10)


def test_the_home_config_is_the_recipe_the_claim_and_the_table_name():
    cfg = load_config(REPO / "config/config.yaml", REPO / "config/home-scl-offline.yaml")
    ds, split = cfg["datasets"]["mnist5k"], cfg["splits"][home.SCL_SPLIT]
    assert cfg["study"]["algorithms"] == [home.SCL_VARIANT] and cfg["study"]["splits"] == [home.SCL_SPLIT]
    assert len(cfg["study"]["seeds"]) >= 6 and "home" in cfg["report"]["paper_checks"] and cfg["study"]["clients"] == [10]
    # nb line 130: SGD lr 0.1 momentum 0.9, made once (fl_devices.py:88); fl_devices.py:86 batch 128, :108 lr x 0.99
    assert (ds["model"], ds["optimizer"], ds["lr"], ds["momentum"], ds["batch_size"], ds["local_epochs"], ds["rounds"]) \
        == ("sattler-convnet", "sgd", 0.1, 0.9, 128, 1, 80)
    assert (ds["optimizer_state"], ds["lr_decay"], ds["weight_decay"], ds["model_kwargs"]) == ("kept", 0.99, 0.0, None)
    assert cfg["engine"]["aggregation"] == "unweighted" and cfg["engine"]["trainer"] == "loop"
    assert split["angles"] == [180, 0] and split["cluster_shares"] == [0.5, 0.5] and split["alpha"] == 1.0
    assert (split["dirichlet_over"], split["replace"], split["local_test_fraction"]) == ("clients", False, 0.2)
    scl = cfg["algorithms"][home.SCL_VARIANT]  # nb lines 221-222 and 250: EPS_1 0.4, EPS_2 1.6, c_round > 20
    assert {k: scl[k] for k in ("method", "eps1", "eps2", "cooldown", "epsilon", "max_clusters")} == {
        "method": "scl", "eps1": 0.4, "eps2": 1.6, "cooldown": 20, "epsilon": "explicit", "max_clusters": None}
