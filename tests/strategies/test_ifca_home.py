"""IFCA's home check (config/home-offline.yaml): its departures table is well-formed, the engine's local training on
that config is the authors' (jichan3751/ifca, mnist/train_cluster_mnist.py lines 315-327 and 479-487: tau full-batch
steps of plain SGD), and the config is the recipe the claim (cflcore.report.papers.home) and the table name."""
import copy
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from cflcore.config import load_config
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer
from cflcore.fl.trainers import LoopTrainer, derive_seed
from cflcore.models import build_model
from cflcore.report.papers import home
from cflcore.strategies.code_departures import check_departures
from cflcore.strategies.ifca_departures import DEPARTURES
from engine_runs import cpu_train_spec

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")


def test_the_departures_table_is_well_formed():
    check_departures(DEPARTURES, "ifca")
    assert {"rounds", "machines", "images per machine"} <= {d.parameter for d in DEPARTURES}


@pytest.mark.parametrize("mutate,match", [
    (lambda d: replace(d, why=" "), r"ifca\[0\] \('dataset'\)\.why"),
    (lambda d: replace(d, source="mnist/config.json"), r"\.source: 'mnist/config.json'"),
    (lambda d: replace(d, ours=d.authors), r"\.ours: .* equals the authors' value"),
])
def test_a_malformed_row_is_refused_naming_row_and_field(mutate, match):
    with pytest.raises(ValueError, match=match):
        check_departures((mutate(DEPARTURES[0]), *DEPARTURES[1:]), "ifca")


def test_a_parameter_listed_twice_is_refused():
    with pytest.raises(ValueError, match="listed twice"):
        check_departures((*DEPARTURES, DEPARTURES[0]), "ifca")


def _authors_local_update(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float, tau: int):
    """train_cluster_mnist.py lines 318-327 and 479-487: a copy of the cluster model, tau steps on the machine's whole
    data, CrossEntropyLoss on the network's log_softmax output (line 533), ``param.data -= lr * param.grad``."""
    model = copy.deepcopy(model)
    criterion = torch.nn.CrossEntropyLoss()
    for _ in range(tau):
        loss = criterion(F.log_softmax(model(x), dim=1), y)
        model.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.data -= lr * p.grad
    return model


@pytest.mark.parametrize("batch,same", [(146, True), (100, True), (64, False)])
def test_full_batch_local_epochs_are_the_authors_tau_steps(batch, same):
    """batch_size at or above a client's training set and local_epochs = tau give exactly tau full-batch SGD steps
    (momentum 0, no weight decay): the authors' update up to summation order (each epoch permutes the rows). A batch
    below the client's size takes more, smaller steps, and the check tells."""
    fed = synthetic_federated(n_clients=1, n_train=100, shape=(1, 28, 28), n_classes=10)
    client = fed.clients[0]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = build_model("mlp", 1, 28, 10)
    layout = ModelLayout.of(model)
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", lr=0.1), batch_size=batch, local_epochs=10)
    ours, losses = LoopTrainer(copy.deepcopy(model), layout, spec, CPU).train_client(
        layout.flatten(model), client, derive_seed(0, 0))
    theirs = layout.flatten(_authors_local_update(model, client.x_train, client.y_train, 0.1, 10))
    assert (len(losses) == 10) is same
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-5) is same


def test_the_home_config_is_the_recipe_the_claim_and_the_table_name():
    cfg = load_config(REPO / "config/config.yaml", REPO / "config/home-offline.yaml")
    ds, split = cfg["datasets"]["mnist5k"], cfg["splits"][home.IFCA_SPLIT]
    assert cfg["study"]["algorithms"] == [home.IFCA_VARIANT] and cfg["study"]["splits"] == [home.IFCA_SPLIT]
    assert len(cfg["study"]["seeds"]) >= 6 and "home" in cfg["report"]["paper_checks"]
    # mnist/config.json: h1 200, tau 10, lr 0.1; train_cluster_mnist.py: plain SGD (479-487), LR_DECAY False (23)
    assert (ds["model"], ds["model_kwargs"], ds["optimizer"], ds["lr"], ds["local_epochs"]) == ("mlp", {"hidden": 200},
                                                                                              "sgd", 0.1, 10)
    assert ds["momentum"] == 0 and ds["weight_decay"] == 0 and cfg["engine"]["participation"] == 1.0
    assert ds["batch_size"] >= split["samples_per_client"]  # one batch per epoch: the draws bound the training set
    assert split["generator"] == "rotation" and split["angles"] == [0, 90, 180, 270]  # p 4, rot90 k = p_i (line 471)
    assert cfg["algorithms"][home.IFCA_VARIANT] == {"method": "ifca", "k": "oracle", "empty_models": "keep"}
    rounds = next(d for d in DEPARTURES if d.parameter == "rounds")
    assert rounds.ours == str(ds["rounds"]) and rounds.authors == "num_epochs 300"
