"""The re-clustering lag (cflcore.metrics.drift) on hand-made partition sequences, clustering.parquet's per-round
truth and ``switch`` rows for a split with a drift schedule (cflcore.evaluate.clustering), and the late-clients table
read against the last round's groups."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cflcore.evaluate.clustering import (CLUSTERING_COLUMNS, DRIFT_COLUMNS, GroundTruth, RoundPartition,
                                         clustering_frame)
from cflcore.evaluate.late_clients import LateSchedule, client_rows
from cflcore.metrics.drift import partition_lag, reclustering_lag

HOME = [0, 0, 0, 1, 1, 1]
MOVED = [0, 0, 1, 1, 1, 1]  # client 2 switches to group 1 at round 3


def truths(switch: int, rounds: int) -> list[list[int]]:
    return [HOME if r < switch else MOVED for r in range(rounds)]


def test_a_per_round_method_that_follows_at_once_has_lag_zero():
    parts = truths(3, 6)  # the partition is the truth of every round
    assert partition_lag(parts, truths(3, 6), 3, 3) == 0


def test_a_method_that_needs_two_rounds_has_lag_two():
    parts = [HOME, HOME, HOME, HOME, HOME, MOVED, MOVED]  # rounds 3, 4 still the old partition
    assert partition_lag(parts, truths(3, 7), 3, 3) == 2


def test_a_one_shot_partition_never_recovers():
    parts = [HOME] * 6  # frozen after its clustering round
    assert partition_lag(parts, truths(3, 6), 3, 3) is None


def test_recovery_after_the_next_switch_does_not_count():
    parts = [HOME] * 5 + [MOVED]
    assert partition_lag(parts, truths(3, 6), 3, 3, stop=5) is None
    assert partition_lag(parts, truths(3, 6), 3, 3) == 2


def test_a_gradual_switch_is_timed_from_its_last_round():
    aris = [1.0, 1.0, 0.4, 0.3, 0.5, 1.0, 1.0]  # switch over rounds 2..4, recovered at 5
    assert reclustering_lag(aris, 2, 4) == 1
    assert reclustering_lag([0.6, 0.6, 0.2, 0.59, 0.6], 2, 2) == 2  # reaching the pre-switch value, not 1
    assert reclustering_lag([0.6, 0.6, 0.2, 0.59], 2, 2, tolerance=0.02) == 1
    assert reclustering_lag([None, 1.0, float("nan"), 1.0], 2, 2) == 1  # undefined rounds are no recovery
    assert reclustering_lag([float("nan"), 0.3], 1, 1) is None  # no pre-switch ARI
    with pytest.raises(ValueError):
        reclustering_lag([1.0, 1.0], 0, 0)


def _frame(labels_by_round, changes, schedule):
    truth = GroundTruth(np.asarray(HOME), np.ones((6, 3)), changes=changes, schedule=schedule)
    partitions = [RoundPartition(r, np.asarray(p), np.arange(6)) for r, p in enumerate(labels_by_round)]
    return clustering_frame(partitions, truth, {}, None)


def test_clustering_reads_each_rounds_truth_and_records_the_lag():
    schedule = ({"kind": "recurrent", "round": 3, "share": 0.2, "until": 5},)
    changes = ((3, 2, 1), (5, 2, 0))
    follows = _frame([HOME, HOME, HOME, MOVED, MOVED, HOME, HOME], changes, schedule)
    rounds = follows[follows["kind"] == "round"]
    assert rounds["ari"].tolist() == pytest.approx([1.0] * 7)  # scored against each round's truth
    switches = follows[follows["kind"] == "switch"].reset_index(drop=True)
    assert switches["round"].tolist() == [3, 5] and switches["switch_last_round"].tolist() == [3, 5]
    assert switches["reclustering_lag"].tolist() == [0, 0] and switches["pre_switch_ari"].tolist() == [1.0, 1.0]
    assert list(follows.columns) == [*CLUSTERING_COLUMNS, *DRIFT_COLUMNS]
    frozen = _frame([HOME] * 7, changes, schedule)
    switches = frozen[frozen["kind"] == "switch"].reset_index(drop=True)
    assert frozen[frozen["kind"] == "round"]["ari"].tolist()[3] < 1.0
    assert switches["reclustering_lag"].isna().tolist() == [True, False]  # never within the excursion; back at once
    assert switches["reclustering_lag"].tolist()[1] == 0


def test_a_static_split_has_no_drift_columns():
    frame = _frame([HOME] * 3, (), ())
    assert list(frame.columns) == CLUSTERING_COLUMNS and "switch" not in frame["kind"].tolist()


def test_late_clients_are_read_against_the_last_rounds_groups():
    """cflcore.evaluate.late_clients: a late client that drifted before the end is judged by its group at the end."""
    truth = GroundTruth(np.asarray(HOME), np.ones((6, 3)), changes=((2, 5, 0),),
                        schedule=({"kind": "sudden", "round": 2, "share": 0.2},))
    final = [0, 0, 0, 1, 1, 0]  # client 5 (late, joined at round 2) attached to group 0's cluster, its group since 2
    history = pd.DataFrame([{"round": r, "client": c, "cluster": final[c] if r == 3 else HOME[c], "local_f1": 0.5,
                             "orch_f1": 0.4} for r in range(4) for c in range(6)])
    rows = client_rows(history, truth, LateSchedule(np.asarray([5]), {5: 2}, {5: 0}))
    assert rows[5]["true_cluster"] == 0 and rows[5]["attached_to_true"] is True
