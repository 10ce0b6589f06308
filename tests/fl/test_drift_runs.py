"""A run on a split with a drift schedule (cflcore.data.drift): each round the engine trains and evaluates every
client on its data of that round (its own samples under its group-of-the-round's transform, or on a label-skew split
the sample of its group-of-the-round's class distribution), and a run killed after a round resumes bit-identical."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from cflcore.data import load_federated, make_split
from engine_runs import build_engine, train_run
from test_resume import _assert_same_outputs, kill_and_resume

SCHEDULE = [{"kind": "sudden", "round": 2, "share": 0.5},
            {"kind": "recurrent", "round": 3, "until": 4, "share": 0.5, "from_group": 0}]
SETTINGS = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 16, "local_epochs": 1,
                         "rounds": 5},
            "engine": {"trainer": "loop", "checkpoint_every": 2, "threads": 1}, "algorithm": {"method": "ifca", "k": 2},
            "device": "cpu"}


@pytest.fixture(scope="module")
def split(digits, tmp_path_factory):
    out = tmp_path_factory.mktemp("drift-split")
    make_split(digits, {"generator": "rotation", "angles": [0, 180], "samples_per_client": 40, "drift": SCHEDULE},
               6, 0, out)
    return out


@pytest.mark.parametrize("which", ["split", "label_skew_split"])
def test_the_engine_trains_each_round_on_that_rounds_data(digits, request, which):
    fed = load_federated(digits, request.getfixturevalue(which))
    engine, state = build_engine(fed, SETTINGS, 0, logging.getLogger("drift"))
    trained: dict[int, list] = {}
    train = engine.trainer.train

    def spy(buffer, clients, *args, **kwargs):
        trained[len(trained)] = clients
        return train(buffer, clients, *args, **kwargs)

    engine.trainer.train = spy
    for rnd in range(SETTINGS["training"]["rounds"]):
        engine.run_round(state, rnd, SETTINGS["training"]["rounds"])
        view = fed.at_round(rnd)
        assert len(trained[rnd]) == len(view.clients)  # full participation: every client, in order
        for a, b in zip(trained[rnd], view.clients):
            assert np.array_equal(a.x_train.numpy(), b.x_train.numpy()) and np.array_equal(a.y_train, b.y_train)
        np.testing.assert_array_equal(engine.fed.true_clusters, view.true_clusters)
    moved = [c for r, c, _ in fed.drift.changes if r == 2]
    assert moved and any(not np.array_equal(trained[1][c].x_train.numpy(), trained[2][c].x_train.numpy())
                         for c in moved)  # a switching client's images changed at the switch (turned, or drawn anew)


def test_kill_and_resume_with_a_drift_schedule_is_bit_identical(digits, split, tmp_path):
    def run(out):
        return lambda: train_run(load_federated(digits, split), SETTINGS, 0, out, logging.getLogger("drift"))

    run(tmp_path / "reference")()
    kill_and_resume(run(tmp_path / "resumed"), tmp_path / "resumed", 1)  # killed before the switch at round 2
    _assert_same_outputs(tmp_path / "reference", tmp_path / "resumed")


@pytest.fixture(scope="module")
def label_skew_split(digits, tmp_path_factory):
    out = tmp_path_factory.mktemp("drift-label-skew-split")
    make_split(digits, {"generator": "majority", "class_sets": [[0, 1, 2], [3, 4, 5]], "samples_per_client": 40,
                        "replace": False, "drift": SCHEDULE}, 6, 0, out)
    return out


def test_kill_and_resume_with_a_label_skew_drift_schedule_is_bit_identical(digits, label_skew_split, tmp_path):
    fed = load_federated(digits, label_skew_split)
    assert fed.drift.drawn and any(r == 2 for r, _, _ in fed.drift.changes)  # movers hold drawn samples from round 2

    def run(out):
        return lambda: train_run(load_federated(digits, label_skew_split), SETTINGS, 0, out,
                                 logging.getLogger("drift"))

    run(tmp_path / "reference")()
    kill_and_resume(run(tmp_path / "resumed"), tmp_path / "resumed", 3)  # after the switches, before the return
    _assert_same_outputs(tmp_path / "reference", tmp_path / "resumed")
