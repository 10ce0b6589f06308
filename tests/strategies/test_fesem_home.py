"""FeSEM's home check (config/home-fesem-offline.yaml): its departures table is well-formed, the CNN is the authors'
(anonymousgit2020/fedsem models/femnist/cnn.py lines 17-41), and the config is the recipe the claim
(cflcore.report.papers.home) and the table name."""
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from cflcore.config import load_config
from cflcore.models import build_model
from cflcore.report.papers import home
from cflcore.strategies.code_departures import check_departures
from cflcore.strategies.fesem_departures import DEPARTURES

REPO = Path(__file__).resolve().parents[2]


def test_the_departures_table_is_well_formed():
    check_departures(DEPARTURES, "fesem")
    assert {"k-means", "random draws", "after the last round", "clients a round", "dataset", "rounds",
            "seeds"} <= {d.parameter for d in DEPARTURES}


def test_a_malformed_row_is_refused():
    with pytest.raises(ValueError, match=r"fesem\[0\] \('k-means'\)\.source"):
        check_departures((replace(DEPARTURES[0], source="models/mh_constants.py"), *DEPARTURES[1:]), "fesem")


def test_fesem_cnn_has_the_authors_layers():
    """cnn.py lines 21-37: conv 32 (5x5, same), conv 64 (5x5, same), dense 7*7*64 -> 248, dense_1 248 -> classes (62
    theirs, 10 here); dense_1's kernel is the 248 x classes matrix their clustering reads (mh_constants.py:2, 10)."""
    model = build_model("fesem-cnn", 1, 28, 10)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    assert shapes == {"conv1.weight": (32, 1, 5, 5), "conv1.bias": (32,), "conv2.weight": (64, 32, 5, 5),
                      "conv2.bias": (64,), "dense.weight": (248, 3136), "dense.bias": (248,),
                      "dense_1.weight": (10, 248), "dense_1.bias": (10,)}
    assert model(torch.zeros(3, 1, 28, 28)).shape == (3, 10)


def test_the_home_config_is_the_recipe_the_claim_and_the_table_name():
    cfg = load_config(REPO / "config/config.yaml", REPO / "config/home-fesem-offline.yaml")
    ds, split = cfg["datasets"]["mnist5k"], cfg["splits"][home.FESEM_SPLIT]
    assert cfg["study"]["algorithms"] == [home.FESEM_VARIANT, home.FEDAVG_VARIANT]
    assert cfg["study"]["splits"] == [home.FESEM_SPLIT] and cfg["study"]["clients"] == [30]
    assert len(cfg["study"]["seeds"]) >= 6 and "home" in cfg["report"]["paper_checks"]
    # baseline_constants.py:23 lr 0.0003 (GradientDescentOptimizer, model.py:53); args.py:33, 70 batch 10, 1 epoch;
    # baseline_constants.py:5 -t small: 30 rounds
    assert (ds["model"], ds["optimizer"], ds["lr"], ds["momentum"], ds["batch_size"], ds["local_epochs"], ds["rounds"]) \
        == ("fesem-cnn", "sgd", 0.0003, 0.0, 10, 1, 30)
    assert (ds["weight_decay"], ds["model_kwargs"], cfg["engine"]["aggregation"]) == (0.0, None, "unweighted")
    # args.py:29 2 clients a cluster x K 3 (args.py:86) = 6 of 30; data/femnist/README.md:12 --tf 0.9
    assert split["angles"] == [0, 90, 180] and split["participation"] == 0.2 and split["replace"] is False
    assert split["local_test_fraction"] == 0.1
    # the authors' clustering step (mlhead_trainer.py:183-193, 233-243): k-means over last-layer kernels, as the code
    assert cfg["algorithms"][home.FESEM_VARIANT] == {"method": "fesem", "k": 3, "assignment": "code-kmeans"}
    assert cfg["algorithms"][home.FEDAVG_VARIANT]["method"] == "bnc"
