"""The reference bands (issue 68): ``local`` (no aggregation) and FedAvg, declared references in their records
(cflcore.strategies.run_records), shown apart from the ranked methods by the cross table."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pandas as pd
import pytest

from cflcore.data.synthetic import synthetic_federated
from cflcore.strategies.run_records import records
from engine_runs import train_run


def _history(tmp_path, method: str, swap_last: bool, name: str) -> pd.DataFrame:
    fed = synthetic_federated(n_clients=4, n_train=16, n_test=8, n_orch=16, n_clusters=2)
    if swap_last:  # the last client's data replaced by the second's
        fed = dataclasses.replace(fed, clients=[*fed.clients[:3], fed.clients[1]])
    settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                             "rounds": 3}, "engine": {"eval_every": 1, "trainer": "loop"},
                "algorithm": {"method": method}, "device": "cpu"}
    train_run(fed, settings, 0, tmp_path / name, logging.getLogger("test"))
    return pd.read_parquet(tmp_path / name / "history.parquet")


@pytest.mark.parametrize("method,isolated", [("local", True), ("bnc", False)])
def test_local_training_sees_only_its_own_data(tmp_path, method, isolated):
    """Changing client 3's data leaves client 0's losses bit for bit under ``local`` (no aggregation), and moves them
    under FedAvg (``bnc``), which averages client 3 in; ``local`` keeps one cluster per client."""
    before = _history(tmp_path, method, False, f"{method}-a")
    after = _history(tmp_path, method, True, f"{method}-b")
    zero = lambda h: h[h["client"] == 0]["local_loss"].to_numpy()  # noqa: E731
    assert np.array_equal(zero(before), zero(after)) is isolated
    if method == "local":
        assert (before.groupby("round")["cluster"].nunique() == 4).all()


def test_local_scores_its_models_on_the_orchestrator_set_at_the_last_round_only(tmp_path):
    """``local`` declares orchestrator_last_round_only: its clients' own test sets are scored every round, the shared
    set only in the last (its orch_* columns null before); FedAvg (``bnc``) scores both every round."""
    for method, every_round in (("local", False), ("bnc", True)):
        history = _history(tmp_path, method, False, f"{method}-orch")
        by_round = history.groupby("round")
        assert by_round["local_acc"].count().gt(0).all()
        orch = by_round["orch_acc"].count()
        assert orch.iloc[-1] == 4 and bool(orch.iloc[:-1].gt(0).all()) == every_round
        assert bool(orch.iloc[:-1].eq(0).all()) != every_round


def test_fedavg_and_local_are_references_and_the_clustering_methods_are_not():
    assert records("bnc").reference and records("local").reference
    assert all(records(m).reference is None for m in ("scl", "ocfl", "ifca", "fedgwc", "fesem", "louvain", "bcl"))


@pytest.mark.parametrize("n_groups", [2, 3])
def test_the_oracle_trains_the_true_groups_from_round_0_so_its_ari_is_1(tmp_path, n_groups):
    """Every round's partition is the split's true groups (ARI 1.00 by construction), one model per group; the
    ground truth reaches the oracle only (it declares reads_true_groups; no shipped method does)."""
    from sklearn.metrics import adjusted_rand_score

    from cflcore.strategies import STRATEGIES

    fed = synthetic_federated(n_clients=6, n_train=16, n_test=8, n_orch=16, n_clusters=n_groups)
    settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                             "rounds": 2}, "engine": {"eval_every": 1}, "algorithm": {"method": "oracle"}, "device": "cpu"}
    train_run(fed, settings, 0, tmp_path / "oracle", logging.getLogger("test"))
    history = pd.read_parquet(tmp_path / "oracle" / "history.parquet")
    for _, rows in history.groupby("round"):
        rows = rows.sort_values("client")
        assert adjusted_rand_score(fed.true_clusters, rows["cluster"]) == 1.0
        assert rows["cluster"].nunique() == n_groups
    assert records("oracle").reference
    assert [m for m in STRATEGIES.names() if STRATEGIES.get(m).reads_true_groups] == ["oracle"]
