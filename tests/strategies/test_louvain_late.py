"""Louvain CFL's Late attribution (002 §V-B2, after Espinoza-Castellon et al. 2022): AVG up to round
``late_round``, whose Louvain communities are then frozen; afterwards each client trains from and is
evaluated with its own community's model.

First on planted updates (no engine): the partition follows Louvain before ``late_round`` and ignores it
after, and the frozen flag survives a checkpoint. Then on real MNIST-5k (the default study's first
scenario, tests/conftest.py ``MnistStudy``, ``late_round`` 4 of 10 rounds): the outcome 002 describes, and a
kill-and-resume test killed right after the freezing round, the round after which only the frozen flag
tells the next round to start clients from their community models instead of the global one.
"""
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from cflcore import stages
from cflcore.config import validate_config
from cflcore.errors import ConfigError
from cflcore.fl.run import KILL_ENV
from test_resume import _assert_same_outputs, kill_and_resume
from test_strategies import TRUTH, config_with, louvain_round, make, save_load

LATE = {"method": "louvain", "attribution": "late", "late_round": 2, "late_start": "own"}  # communities train their own
SWAPPED = np.arange(15) % 3  # another planted partition of the same 15 clients


def test_late_is_avg_then_freezes_the_communities_of_late_round():
    strategy = make(LATE)
    for rnd in range(2):  # before late_round: Louvain every round, everyone starts from W_t (AVG)
        labels = strategy.aggregate(louvain_round(rnd, labels=TRUTH if rnd == 0 else SWAPPED)).assignment.labels
        assert adjusted_rand_score(TRUTH if rnd == 0 else SWAPPED, labels) == 1.0
        models = {c: torch.zeros(300) for c in np.unique(labels)}
        specs = strategy.configure(rnd + 1, np.arange(15), None, models)
        assert all(specs[q] == {c: pytest.approx(1 / 3) for c in models} for q in range(15))
        assert not strategy.frozen
    res = strategy.aggregate(louvain_round(2, labels=TRUTH))  # late_round: the last clustering
    frozen = res.assignment.labels
    assert adjusted_rand_score(TRUTH, frozen) == 1.0 and res.diagnostics["frozen"] is True
    models = {c: torch.zeros(300) for c in np.unique(frozen)}
    assert strategy.configure(3, np.arange(15), None, models) == {q: int(frozen[q]) for q in range(15)}
    assert strategy.global_model(models) == {c: pytest.approx(1 / 3) for c in models}
    restored = save_load(strategy, LATE)
    for rnd in (3, 4):  # after it: another planted partition changes nothing, the graph is still recorded
        for s in (strategy, restored):
            res = s.aggregate(louvain_round(rnd, labels=SWAPPED))
            assert np.array_equal(res.assignment.labels, frozen) and res.inherit == {}
            assert res.divergence.shape == (15, 15) and res.diagnostics["frozen"] is True
            assert s.personalised(models) == {q: int(frozen[q]) for q in range(15)}
    forgotten = save_load(strategy, LATE)
    forgotten.frozen = False  # what a load_state_dict that drops the flag would give
    assert not np.array_equal(forgotten.aggregate(louvain_round(5, labels=SWAPPED)).assignment.labels, frozen)


def test_late_from_the_global_model_trains_from_wt_and_is_evaluated_with_its_community():
    """late_start global (the default, 002 §V-B2's "unique global model"): after late_round every client trains
    from W_t, while the frozen communities still give each client its community's model for evaluation."""
    strategy = make({**LATE, "late_start": "global"})
    for rnd in range(3):
        strategy.aggregate(louvain_round(rnd, labels=TRUTH))
    frozen = strategy.assignment.labels
    assert strategy.frozen
    models = {c: torch.zeros(300) for c in np.unique(frozen)}
    assert all(spec == {c: pytest.approx(1 / 3) for c in models}
               for spec in strategy.configure(3, np.arange(15), None, models).values())
    assert strategy.personalised(models) == {q: int(frozen[q]) for q in range(15)}
    assert make({"method": "louvain", "attribution": "late"}).params["late_start"] == "global"


def test_clients_unseen_when_late_freezes_stay_newcomers_on_the_global_model():
    """Partial participation: a client first sampled after late_round joins no community (the partition is
    frozen) and trains from W_t, like any newcomer (002 Alg. 2, l. 4)."""
    strategy = make({**LATE, "late_round": 0})
    sampled = np.array([0, 1, 2, 5, 6, 7, 10, 11, 12])
    frozen = strategy.aggregate(louvain_round(0, clients=sampled)).assignment.labels
    unseen = np.setdiff1d(np.arange(15), sampled)
    assert strategy.frozen and np.all(frozen[unseen] == 0)
    models = {c: torch.zeros(300) for c in np.unique(frozen)}
    communities = sorted(set(frozen[sampled].tolist()))
    specs = strategy.configure(1, np.arange(15), None, models)
    assert all(specs[int(q)] == {c: pytest.approx(1 / 3) for c in communities} for q in unseen)
    assert all(specs[int(q)] == frozen[q] for q in sampled)
    assert np.array_equal(strategy.aggregate(louvain_round(1)).assignment.labels, frozen)


def test_late_config_is_validated():
    cfg = validate_config(config_with({"method": "louvain", "attribution": "late"}))
    assert cfg["algorithms"]["algo"]["late_round"] == 9  # 002's round 10, 1-based
    with pytest.raises(ConfigError) as err:
        validate_config(config_with({"method": "louvain", "attribution": "late", "late_round": -1}))
    assert str(err.value).startswith("algorithms.algo.late_round")


# ----- real MNIST-5k ---------------------------------------------------------------------------------
LATE_ROUND = 4


def late_settings(study) -> dict:
    settings = study.settings("louvain")
    settings["algorithm"].update(attribution="late", late_round=LATE_ROUND, late_start="own")
    return settings


@pytest.fixture(scope="module")
def late_run(mnist_study):
    """The uninterrupted Late run on the default study's first scenario, trained and evaluated once."""
    run, out = mnist_study.root / "runs" / "louvain-late", mnist_study.root / "eval" / "louvain-late"
    if not (out / "clustering.parquet").exists():
        assert mnist_study.train("louvain", run, late_settings(mnist_study))["status"] == "ok"
        stages.evaluate(run, mnist_study.manifest, out, mnist_study.cfg["report"])
    return run, out


@pytest.mark.slow
@pytest.mark.kernels
def test_late_on_mnist_clusters_once_and_keeps_its_communities(late_run):
    run, out = late_run
    history = pd.read_parquet(run / "history.parquet")
    cluster, key = (history.pivot(index="round", columns="client", values=v) for v in ("cluster", "model_key"))
    frozen = cluster.loc[LATE_ROUND].to_numpy()
    assert (cluster.loc[LATE_ROUND:] == frozen).all().all()  # never re-clustered after late_round
    # one change of attribution, at late_round: every client used the one global model W_t before, its own
    # community's model from then on
    before = key.loc[:LATE_ROUND - 1]
    assert len(pd.unique(before.to_numpy().ravel())) == 1 and before.iloc[0, 0].startswith("mix:")
    assert (key.loc[LATE_ROUND:] == [f"c{c}" for c in frozen]).all().all()
    server = pd.read_parquet(run / "server.parquet").set_index("round")
    assert server["frozen"].tolist() == [r >= LATE_ROUND for r in range(10)]
    scores = pd.read_parquet(out / "clustering.parquet")
    per_round = scores[scores["kind"] == "round"].set_index("round")
    assert per_round.loc[LATE_ROUND:, "ari"].tolist() == pytest.approx([1.0] * (10 - LATE_ROUND))  # the 3 class sets
    # the communities' models beat the global model on their clients' data (002 Fig. 6), and AVG's phase
    # trained less well than the personalised one
    f1 = history.groupby("round")[["local_f1", "global_f1"]].mean()
    assert f1.loc[9, "local_f1"] >= 0.85 and f1.loc[9, "local_f1"] - f1.loc[9, "global_f1"] >= 0.3, f1
    assert f1.loc[9, "local_f1"] > f1.loc[LATE_ROUND - 1, "local_f1"] + 0.3, f1


@pytest.mark.slow
def test_late_resumes_bit_identically_after_freezing(mnist_study, late_run, tmp_path, monkeypatch):
    """Killed after late_round and restarted with checkpoints every round: the outputs are the uninterrupted
    run's. A ``load_state_dict`` that forgot ``frozen`` would re-cluster and restart everyone from W_t in the
    next round (checked by hand: this test then fails on history.parquet)."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    reference, _ = late_run
    settings = late_settings(mnist_study)
    settings["engine"]["checkpoint_every"] = 1
    run = tmp_path / "run"
    log = kill_and_resume(lambda: mnist_study.train("louvain", run, settings), run, LATE_ROUND)
    assert f"resuming from checkpoint round {LATE_ROUND}" in log, log[:3]
    _assert_same_outputs(reference, run)
