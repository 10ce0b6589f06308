"""Federations that move (cflcore/fl/participation.py, issue 69): availability modes, stragglers, what history.parquet
records of them, the bytes each method declares a round (traffic.parquet), and a run with them on killed and resumed
bit for bit. The default (uniform, no stragglers) keeps the files of earlier versions: tests/fl/test_resume.py and
the studies' byte checks cover that path; here the schema of its history is pinned."""
from __future__ import annotations

import json
import logging
import signal

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.artifacts import HISTORY_SCHEMA
from cflcore.fl.participation import (ClientAvailability, local_steps, sample_available, sample_clients,
                                      stationary_share, straggler_steps)
from cflcore.fl.run import label_share
from cflcore.fl.trainers import LoopTrainer, VmapTrainer
from cflcore.settings import AvailabilitySettings, StragglerSettings
from engine_runs import build_engine, train_run
from test_resume import _assert_same_outputs, _run

BASE = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "momentum": 0.5, "batch_size": 8,
                     "local_epochs": 1, "rounds": 5},
        "engine": {"trainer": "loop", "checkpoint_every": 2, "participation": 0.8}, "algorithm": {"method": "bnc"},
        "device": "cpu"}
FED_KW = {"n_clients": 6, "n_train": [24, 16, 24, 20, 24, 16]}
MOVING = {"availability": {"mode": "markov", "p_on": 0.5, "p_off": 0.4}, "stragglers": {"share": 0.5, "min_steps": 1}}


def settings(**engine) -> dict:
    out = json.loads(json.dumps(BASE))
    out["engine"].update(engine)
    return out


# ---------------------------------------------------------------------------------------------- availability
def test_markov_long_run_presence_is_its_stationary_share():
    """200 chains over 400 rounds: the share of (round, client) present is p_on / (p_on + p_off) = 0.4 within 5
    standard errors (the chain's lag-1 correlation 1 - p_on - p_off = 0.5 triples the variance of the mean), and the
    chain's transitions happen at its rates. A share of p_off / (p_on + p_off) = 0.6 would fail it."""
    p_on, p_off, n, rounds = 0.2, 0.3, 200, 400
    model = ClientAvailability(AvailabilitySettings.of({"mode": "markov", "p_on": p_on, "p_off": p_off}), 11,
                               np.zeros(n, dtype=np.int64))
    present = np.stack([model.present(r) for r in range(rounds)])
    share = stationary_share(p_on, p_off)
    se = np.sqrt(share * (1 - share) * 3 / present.size)
    assert abs(present.mean() - share) < 5 * se, (present.mean(), share)
    was_on, now_on = present[:-1], present[1:]
    assert abs((~now_on[was_on]).mean() - p_off) < 0.02 and abs(now_on[~was_on].mean() - p_on) < 0.02


def test_availability_depends_on_seed_round_and_client_only():
    """A fresh model asked for round 37 first (a resumed run) gives what one stepped through every round gives."""
    cfg = AvailabilitySettings.of({"mode": "markov", "p_on": 0.3, "p_off": 0.6})
    stepped = ClientAvailability(cfg, 5, np.zeros(12, dtype=np.int64))
    seq = [stepped.present(r) for r in range(40)]
    fresh = ClientAvailability(cfg, 5, np.zeros(12, dtype=np.int64))
    assert np.array_equal(fresh.present(37), seq[37]) and np.array_equal(fresh.present(3), seq[3])
    other = ClientAvailability(cfg, 6, np.zeros(12, dtype=np.int64))
    assert not all(np.array_equal(other.present(r), seq[r]) for r in range(40))


def test_a_quiet_group_shows_up_in_no_round_of_its_window_and_rates_hold_outside():
    groups = np.arange(300) % 3
    cfg = AvailabilitySettings.of({"mode": "group", "group_rates": [1.0, 0.5, 1.0],
                                   "quiet": [{"group": 0, "rounds": [2, 4]}]})
    model = ClientAvailability(cfg, 1, groups)
    for r in range(8):
        on = model.present(r)
        assert on[groups == 0].all() != (2 <= r <= 4) and not (2 <= r <= 4 and on[groups == 0].any())
        assert on[groups == 2].all()
        assert abs(on[groups == 1].mean() - 0.5) < 0.15


def test_label_correlated_availability_follows_the_classes_held():
    """Synthetic clusters own classes {j : j % 3 == k}: clients of cluster 0 hold only classes 0 and 3, so with
    beta 0.8 they show up with probability 0.2, the others always."""
    fed = synthetic_federated(n_clients=60, n_train=12)
    shares = label_share(fed, [0, 3])
    assert np.array_equal(shares, (np.arange(60) % 3 == 0).astype(float))
    model = ClientAvailability(AvailabilitySettings.of({"mode": "label", "classes": [0, 3], "beta": 0.8}), 2,
                               np.arange(60) % 3, shares)
    present = np.stack([model.present(r) for r in range(100)])
    assert present[:, np.arange(60) % 3 != 0].all()
    assert abs(present[:, np.arange(60) % 3 == 0].mean() - 0.2) < 0.04


def test_a_round_that_draws_nobody_takes_the_client_nearest_to_showing_up():
    model = ClientAvailability(AvailabilitySettings.of({"mode": "group", "group_rates": [0.01]}), 0, np.zeros(3, np.int64))
    counts = [int(model.present(r).sum()) for r in range(50)]
    assert min(counts) == 1


def test_the_sample_among_everyone_available_is_the_uniform_sample():
    for r in range(10):
        assert np.array_equal(sample_available(4, r, np.ones(20, bool), 0.3), sample_clients(4, r, 20, 0.3))
    present = np.zeros(20, bool)
    present[[1, 5, 7]] = True
    assert sample_available(4, 0, present, 0.5).tolist() == [1, 5, 7]  # fewer available than the 10 asked for


# ---------------------------------------------------------------------------------------------- stragglers
def test_stragglers_make_between_the_minimum_and_one_step_less_than_all():
    cfg = StragglerSettings.of({"share": 0.4, "min_steps": 2})
    sampled = np.arange(500)
    full = [local_steps(n, 8, 2) for n in np.random.default_rng(0).integers(9, 80, 500)]
    steps = np.asarray(straggler_steps(cfg, 3, 7, 500, sampled, full))
    full = np.asarray(full)
    cut = steps < full
    assert abs(cut.mean() - 0.4) < 0.07 and (steps[cut] >= 2).all() and (steps[cut] <= full[cut] - 1).all()
    assert straggler_steps(StragglerSettings.of({}), 3, 7, 500, sampled, full) is None
    one = straggler_steps(StragglerSettings.of({"share": 1.0, "min_steps": 3}), 3, 7, 3, np.arange(3), [2, 3, 4])
    assert one[:2] == [2, 3] and one[2] == 3  # no more than the minimum: all of them


@pytest.mark.parametrize("trainer", [LoopTrainer, VmapTrainer])
def test_a_straggler_makes_the_first_steps_it_would_have_made(trainer):
    """Both trainers: a client cut to s steps has the first s step losses of its full training (the same batches and
    dropout masks), and the loop and vmap trainers agree in float64."""
    fed = synthetic_federated(**FED_KW)
    eng, state = build_engine(fed, settings(trainer="loop", precision="fp64"), 3, logging.getLogger("t"))
    tr = trainer(eng.trainer.model, eng.model_layout, eng.trainer.spec, eng.device)
    starts = state.models[0].expand(3, -1).clone()
    clients = [fed.clients[i] for i in (0, 1, 3)]
    full = tr.train(starts, clients, [11, 12, 13])
    cut = tr.train(starts, clients, [11, 12, 13], steps=[1, 2, 3])
    assert [len(x) for x in cut.step_losses] == [1, 2, 3]
    # the loop trainer computes each client alone: the same bits; vmap batches a step's active clients, and a client
    # that stops early leaves the others in a smaller batch, which may round differently in the last bits
    exact = trainer is LoopTrainer
    for a, b in zip(full.step_losses, cut.step_losses):
        assert np.array_equal(a[:len(b)], b) if exact else np.allclose(a[:len(b)], b, rtol=0, atol=1e-12)
    assert torch.allclose(cut.params[2], full.params[2], rtol=0, atol=0 if exact else 1e-12)  # client 3: all 3 steps
    assert not torch.allclose(cut.params[0], full.params[0], rtol=0, atol=1e-6)
    ref = LoopTrainer(eng.trainer.model, eng.model_layout, eng.trainer.spec, eng.device).train(
        starts, clients, [11, 12, 13], steps=[1, 2, 3])
    assert torch.allclose(ref.params, cut.params, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------- what is recorded
def test_history_records_presence_and_steps_only_when_the_options_are_on(tmp_path):
    fed = synthetic_federated(**FED_KW)
    train_run(fed, settings(), 3, tmp_path / "plain")
    assert pq.read_schema(tmp_path / "plain" / "history.parquet").remove_metadata().equals(HISTORY_SCHEMA)
    train_run(fed, settings(**MOVING), 3, tmp_path / "moving")
    h = pd.read_parquet(tmp_path / "moving" / "history.parquet")
    assert list(h.columns) == [*HISTORY_SCHEMA.names, "present", "steps"]
    assert (h["present"] | ~h["sampled"]).all() and not h["present"].all()  # only the present train; some were not
    trained = h[h["sampled"]]
    full = np.asarray([local_steps(fed.clients[c].n_train, 8, 1) for c in trained["client"]])
    assert (trained["steps"] <= full).all() and (trained["steps"] < full).any() and (trained["steps"] >= 1).all()
    assert h.loc[~h["sampled"], "steps"].isna().all()


def test_ifca_with_k_models_sends_k_times_fedavgs_downlink(tmp_path):
    """Per round, IFCA with k = 3 sends every sampled client all 3 models; FedAvg (bnc) one: 3 × its bytes down, with
    the same sample. FedAvg's bytes are the sampled clients × the model's parameters × 4 (float32) both ways."""
    fed = synthetic_federated(**FED_KW)
    train_run(fed, settings(), 3, tmp_path / "bnc")
    ifca = settings()
    ifca["algorithm"] = {"method": "ifca", "k": 3}
    train_run(fed, ifca, 3, tmp_path / "ifca")
    bnc, k3 = (pd.read_parquet(tmp_path / d / "traffic.parquet") for d in ("bnc", "ifca"))
    n_params = sum(v.numel() for v in torch.load(tmp_path / "bnc" / "models.pt", weights_only=True)["cluster_models"][0].values()
                   if v.is_floating_point())
    sampled = pd.read_parquet(tmp_path / "bnc" / "history.parquet").groupby("round")["sampled"].sum().to_numpy()
    assert bnc["bytes_down"].tolist() == (sampled * n_params * 4).tolist() == bnc["bytes_up"].tolist()
    assert (k3["bytes_down"] == 3 * bnc["bytes_down"]).all()
    assert (k3["bytes_up"] == bnc["bytes_up"] + sampled * 4).all()  # + each client's choice (an int32)


# ---------------------------------------------------------------------------------------------- resume
@pytest.mark.parametrize("trainer", ["loop", "vmap"])
def test_kill_and_resume_with_availability_and_stragglers_is_bit_identical(tmp_path, trainer):
    run = settings(trainer=trainer, **MOVING)
    train_run(synthetic_federated(**FED_KW), run, 3, tmp_path / "ref")
    killed = _run(tmp_path / "cut", 2, run, FED_KW)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    done = _run(tmp_path / "cut", None, run, FED_KW)
    assert done.returncode == 0 and "resuming from checkpoint round 1" in done.stdout, done.stderr[-2000:]
    _assert_same_outputs(tmp_path / "ref", tmp_path / "cut")
    for name in ("history.parquet", "traffic.parquet"):
        assert (tmp_path / "ref" / name).read_bytes() == (tmp_path / "cut" / name).read_bytes(), name


def test_fedgwc_sends_its_step_losses_up_beside_its_model():
    """FedGWC's server computes its rewards from every client's step losses (004 eq. 1): 4 bytes a step up, the
    default one model each way otherwise; a method that declares nothing sends one model each way."""
    from cflcore.strategies.base import ClusterAssignment, RoundUpdates, build_strategy

    updates = RoundUpdates(0, np.array([0, 2, 5]), None, None, [np.zeros(3), np.zeros(1), np.zeros(2)],
                           np.array([24, 24, 16]), None, ClusterAssignment.single(6))
    fedgwc, bnc = build_strategy({"method": "fedgwc"}), build_strategy({"method": "bnc"})
    assert fedgwc.traffic(updates, 1000, 1).down == bnc.traffic(updates, 1000, 1).down == 3000
    assert fedgwc.traffic(updates, 1000, 1).up == 3000 + 6 * 4 and bnc.traffic(updates, 1000, 1).up == 3000


def test_local_training_sends_nothing():
    """The lower band aggregates nothing, so its clients exchange no model (issue 69: its bytes are 0, not FedAvg's)."""
    from cflcore.strategies.base import ClusterAssignment, RoundUpdates, build_strategy

    updates = RoundUpdates(0, np.array([0, 2, 5]), None, None, [np.zeros(3)] * 3, np.array([24, 24, 16]), None,
                           ClusterAssignment.single(6))
    local, bnc = build_strategy({"method": "local"}), build_strategy({"method": "bnc"})
    assert (local.traffic(updates, 1000, 6).down, local.traffic(updates, 1000, 6).up) == (0, 0)
    assert bnc.traffic(updates, 1000, 1).down == 3000


def test_a_checkpoint_written_before_traffic_parquet_is_not_resumed(tmp_path, caplog):
    """A run's checkpoints outlive it, and a static run's settings hash did not change with this feature: a checkpoint
    of an earlier version (server rows without their bytes) would resume into a traffic.parquet with holes, so the run
    starts afresh, to the same bytes."""
    fed = synthetic_federated(**FED_KW)
    train_run(fed, settings(), 3, tmp_path / "ref")
    train_run(fed, settings(), 3, tmp_path / "old")
    for path in (tmp_path / "old" / "checkpoints").glob("round_*.pt"):
        ck = torch.load(path, weights_only=True)
        ck["server_rows"] = [{k: v for k, v in r.items() if k != "traffic"} for r in ck["server_rows"]]
        torch.save(ck, path)
    for name in ("history.parquet", "server.parquet", "traffic.parquet", "models.pt"):
        (tmp_path / "old" / name).unlink()
    with caplog.at_level(logging.INFO):
        train_run(fed, settings(), 3, tmp_path / "old", logging.getLogger("old"))
    assert "predates traffic.parquet: starting from round 0" in caplog.text and "resuming" not in caplog.text
    _assert_same_outputs(tmp_path / "ref", tmp_path / "old")
    assert (tmp_path / "ref" / "traffic.parquet").read_bytes() == (tmp_path / "old" / "traffic.parquet").read_bytes()
