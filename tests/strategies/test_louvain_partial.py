"""Louvain CFL under partial participation as 002 defines it (eq. 1) and its authors' graph builder runs it:
every client keeps its latest model, the graph is recomputed over all seen clients from those models, and a
community model is the mean of *all* its members' latest models (``partial_participation: latest``, the
default). ``co-sampled`` (edges between clients sampled together, community model = mean of the sampled
members) is the earlier reading, kept as an option; the engine test below fails with it.

Also: the latest models are checkpointed (a kill-and-resume run is bit-identical), the raw similarity of
002 Fig. 2 gives the same partition as the normalised one, and the new options are validated.
"""
import logging

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from cflcore.clustering.graph import normalised_similarity, raw_similarity
from cflcore.config import validate_config
from cflcore.errors import ConfigError
from cflcore.fl import run as engine_run
from cflcore.fl.run import KILL_ENV
from cflcore.data.synthetic import synthetic_federated
from cflcore.strategies import build_strategy
from test_resume import _assert_same_outputs, kill_and_resume
from test_strategies import TRUTH, config_with, louvain_round, make, round_updates, save_load

SETTINGS = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "momentum": 0.5, "batch_size": 8,
                         "local_epochs": 1, "rounds": 4},
            "engine": {"trainer": "loop", "checkpoint_every": 1, "participation": 0.5},
            "device": "cpu"}
FED_KW = {"n_clients": 6, "n_train": [24, 16, 24, 20, 24, 16]}


def run_engine(mode: str, rounds: int = 4):
    """The real engine on the synthetic federation at 50 % participation; the clients' models as each round's
    aggregate() saw them are recorded, so the test knows every client's latest model."""
    strategy = build_strategy({"method": "louvain", "attribution": "1nn", "partial_participation": mode})
    latest: dict[int, torch.Tensor] = {}
    sampled_per_round: list[np.ndarray] = []
    aggregate = strategy.aggregate

    def spy(updates):
        for row, q in enumerate(updates.clients):
            latest[int(q)] = updates.params[row].detach().clone()
        sampled_per_round.append(np.asarray(updates.clients).copy())
        return aggregate(updates)

    strategy.aggregate = spy  # type: ignore[method-assign]
    fed = synthetic_federated(**FED_KW)
    eng, state = engine_run.build_engine(fed, {**SETTINGS, "algorithm": {"method": "louvain"}}, 7,
                                         logging.getLogger("test"), strategy=strategy)
    for rnd in range(rounds):
        eng.run_round(state, rnd, rounds)
    return state, latest, sampled_per_round[-1]


def averages_all_members_latest(mode: str) -> bool:
    """Whether every community model after the last round is eq. 1 over all its members' latest models."""
    state, latest, last_sampled = run_engine(mode)
    labels = state.labels
    checked = False
    ok = True
    for c in np.unique(labels):
        members = [int(q) for q in np.flatnonzero(labels == c) if int(q) in latest]
        if not members:
            continue
        checked |= not set(members) <= set(last_sampled.tolist())
        eq1 = torch.stack([latest[q] for q in members]).mean(dim=0)
        ok &= bool(torch.allclose(state.models[int(c)], eq1, rtol=0, atol=1e-6))
    assert checked, "no community had a member left out of the last round: the run cannot tell the modes apart"
    return ok


def test_community_model_averages_all_members_latest_models():
    """002 eq. 1 and the authors' get_nodes_model_average: W^{C_i} = (1/|C_i|) Σ_{k∈C_i} w^k over all members."""
    assert averages_all_members_latest("latest")


def test_the_co_sampled_option_fails_the_eq1_check():
    """The earlier reading averages only the members sampled that round: the check above must fail on it."""
    assert not averages_all_members_latest("co-sampled")


def test_latest_graph_recomputes_every_seen_pair_and_survives_a_checkpoint():
    variant = {"method": "louvain", "attribution": "1nn"}
    strategy = make(variant)
    first = louvain_round(0)
    strategy.aggregate(first)  # everyone seen once
    sampled = np.array([0, 1, 2, 5, 6, 7, 10, 11, 12])
    before = strategy.distance.copy()
    moved = 1.05 * first.deltas[torch.as_tensor(sampled)]  # the same communities, the sampled clients moved
    res = strategy.aggregate(round_updates(1, moved, clients=sampled, start=torch.ones(len(sampled), 300), n_clients=15))
    assert adjusted_rand_score(TRUTH, res.assignment.labels) == 1.0
    others = np.setdiff1d(np.arange(15), sampled)
    # latest: pairs between a sampled and a non-sampled client are measured again (the sampled one moved)
    assert not np.allclose(strategy.distance[np.ix_(sampled, others)], before[np.ix_(sampled, others)])
    assert set(res.models) == set(strategy.communities)  # every community has a member left out this round
    assert "latest" in strategy.state_dict() and tuple(strategy.state_dict()["latest"].shape) == (15, 300)
    restored = save_load(strategy, variant)
    assert torch.equal(restored.latest, strategy.latest)
    nxt = louvain_round(2, clients=np.array([3, 4, 8, 9, 13, 14]))
    a, b = strategy.aggregate(nxt), restored.aggregate(nxt)
    assert np.array_equal(a.assignment.labels, b.assignment.labels)
    assert all(torch.equal(a.models[c], b.models[c]) for c in a.models)
    co = make({**variant, "partial_participation": "co-sampled"})
    co.aggregate(louvain_round(0))
    assert co.aggregate(louvain_round(1, clients=sampled)).models == {} and "latest" not in co.state_dict()


def test_latest_models_resume_bit_identical(tmp_path, monkeypatch):
    """Killed after round 1 at 50 % participation: the resumed run's outputs equal the uninterrupted run's bit
    for bit, which needs the latest models of the clients not sampled in round 2 (checkpointed state)."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    settings = {**SETTINGS, "algorithm": {"method": "louvain", "attribution": "1nn"}}
    fed = synthetic_federated(**FED_KW)

    def train(out):
        return lambda: engine_run.train_run(fed, settings, 3, out, logging.getLogger("cflcore.fl"),
                                            strategy=build_strategy(settings["algorithm"]))

    reference = tmp_path / "ref"
    train(reference)()
    run = tmp_path / "run"
    log = kill_and_resume(train(run), run, 1)
    assert "resuming from checkpoint round 1" in log
    _assert_same_outputs(reference, run)


def test_raw_similarity_is_the_normalised_one_scaled_and_gives_the_same_partition():
    d = np.abs(np.random.default_rng(0).normal(size=(8, 8)))
    d = d + d.T
    raw, norm = raw_similarity(d, 3.0), normalised_similarity(d, 3.0)
    off = ~np.eye(8, dtype=bool)
    scale = (d[off].max() - d[off].min()) ** 3
    assert np.allclose(raw[off], norm[off] * scale)
    labels = {}
    for similarity in ("normalised", "raw"):
        strategy = make({"method": "louvain", "similarity": similarity})
        labels[similarity] = strategy.aggregate(louvain_round(0)).assignment.labels
    assert adjusted_rand_score(labels["normalised"], labels["raw"]) == 1.0


@pytest.mark.parametrize("key,value", [("partial_participation", "sampled"), ("similarity", "log")])
def test_new_options_are_validated(key, value):
    cfg = validate_config(config_with({"method": "louvain"}))
    assert cfg["algorithms"]["algo"]["partial_participation"] == "latest"
    assert cfg["algorithms"]["algo"]["similarity"] == "normalised"
    with pytest.raises(ConfigError) as err:
        validate_config(config_with({"method": "louvain", key: value}))
    assert str(err.value).startswith(f"algorithms.algo.{key}")
