"""Drift over rounds (cflcore.data.drift): a grouped split's schedule moves clients between groups; the ground truth of
every round matches the data each client holds in that round, a rebuild is bit-identical, the samples are those of
the split without a schedule, and a bad schedule is refused before any job in one line naming the field."""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import numpy as np
import pytest

from cflcore.config import load_config
from cflcore.data import load_federated, make_split
from cflcore.data.drift import groups_at_round, realise_schedule, switch_spans
from cflcore.errors import ConfigError
from cflcore.evaluate.clustering import load_ground_truth
from cflcore.io import read_json
from conftest import REPO, raw_images

SCHEDULE = [{"kind": "sudden", "round": 2, "share": 0.34},
            {"kind": "recurrent", "round": 4, "until": 6, "share": 0.5, "from_group": 0, "to_group": 2},
            {"kind": "gradual", "round": 7, "window": 3, "share": 0.25}]
N_ROUNDS = 11


def test_the_truth_of_every_round_is_the_rotation_each_client_holds(digits, digits_table, tmp_path):
    manifest = make_split(digits, {"generator": "rotation", "drift": SCHEDULE}, 12, 0, tmp_path)
    angles = [0, 90, 180, 270]
    changes = manifest["drift"]["changes"]
    movers = {c for _, c, _ in changes}
    assert len(movers) >= 4 and {r for r, _, _ in changes} >= {2, 4, 6}  # the three events moved clients
    fed = load_federated(digits, tmp_path)
    seen = set()
    for rnd in range(N_ROUNDS):
        view = fed.at_round(rnd)
        truth = groups_at_round(manifest["cluster_of_client"], changes, rnd)
        np.testing.assert_array_equal(view.true_clusters, truth)
        for k, c in enumerate(view.clients):
            for x, idx in ((c.x_train, c.idx_train), (c.x_test, c.idx_test)):  # its own samples, the group's angle
                expected = np.rot90(raw_images(digits_table, idx), k=angles[truth[k]] // 90, axes=(2, 3))
                np.testing.assert_array_equal(x.numpy(), expected)
            seen.add((k, int(truth[k])))
    assert len(seen) > 12  # some clients held data of two or more groups
    assert all(c is d for c, d in zip(fed.at_round(0).clients, fed.clients))  # round 0 is the split as built
    # the switch at round 2: before it, a mover holds its home angle; from it, the new one
    at, client, group = next(c for c in changes if c[0] == 2)
    home = manifest["cluster_of_client"][client]
    assert group != home
    before, after = fed.at_round(1).clients[client], fed.at_round(2).clients[client]
    raw = raw_images(digits_table, before.idx_train)
    np.testing.assert_array_equal(before.x_train.numpy(), np.rot90(raw, k=angles[home] // 90, axes=(2, 3)))
    np.testing.assert_array_equal(after.x_train.numpy(), np.rot90(raw, k=angles[group] // 90, axes=(2, 3)))


def test_label_swap_drift_swaps_the_new_groups_labels(digits, digits_table, tmp_path):
    swaps = [[1, 7], [3, 8]]
    manifest = make_split(digits, {"generator": "label-swap", "swaps": swaps,
                                   "drift": [{"kind": "sudden", "round": 1, "share": 1.0}]}, 6, 3, tmp_path)
    fed = load_federated(digits, tmp_path)
    view = fed.at_round(1)
    assert view.true_clusters.tolist() == [1 - g for g in manifest["cluster_of_client"]]  # two groups: all switch
    for c, g in zip(view.clients, view.true_clusters):
        a, b = swaps[g]
        true = digits_table.labels[c.idx_train]
        np.testing.assert_array_equal(c.y_train.numpy(), np.where(true == a, b, np.where(true == b, a, true)))
    truth = load_ground_truth(tmp_path / "manifest.json")  # the evaluation's histograms (WAS) count what they hold
    for rnd in (0, 1):
        held = [np.bincount(c.y_train.numpy(), minlength=10) for c in fed.at_round(rnd).clients]
        np.testing.assert_array_equal(truth.histograms_at(rnd), np.asarray(held, dtype=np.float64))
        np.testing.assert_array_equal(truth.clusters_at(rnd), fed.at_round(rnd).true_clusters)


def _digest(split_dir: Path) -> str:
    return hashlib.sha256(b"".join((split_dir / f).read_bytes() for f in ("assignments.parquet", "manifest.json"))
                          ).hexdigest()


def test_a_rebuild_is_bit_identical_and_draws_the_static_splits_samples(digits, tmp_path):
    settings = {"generator": "feature-skew", "drift": SCHEDULE[:1]}
    make_split(digits, settings, 9, 4, tmp_path / "a")
    make_split(digits, copy.deepcopy(settings), 9, 4, tmp_path / "b")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    make_split(digits, {"generator": "feature-skew"}, 9, 4, tmp_path / "static")
    assert (tmp_path / "a" / "assignments.parquet").read_bytes() == \
        (tmp_path / "static" / "assignments.parquet").read_bytes()
    drifting, static = read_json(tmp_path / "a" / "manifest.json"), read_json(tmp_path / "static" / "manifest.json")
    assert "drift" not in static and drifting.pop("drift")["changes"]
    assert drifting == static  # the schedule adds its own key and changes nothing else
    make_split(digits, settings, 9, 5, tmp_path / "seed5")  # another seed moves other clients
    assert read_json(tmp_path / "seed5" / "manifest.json")["drift"] != read_json(tmp_path / "a" / "manifest.json")["drift"]


def test_realise_moves_a_share_of_the_eligible_clients():
    home = [0] * 6 + [1] * 6 + [2] * 6
    rng = np.random.default_rng(0)
    changes = realise_schedule([{"kind": "sudden", "round": 3, "share": 0.5, "from_group": 1, "to_group": 2}],
                               home, 3, rng)
    assert len(changes) == 3 and all(r == 3 and home[c] == 1 and g == 2 for r, c, g in changes)
    gradual = realise_schedule([{"kind": "gradual", "round": 2, "window": 4, "share": 1.0}], home, 3,
                               np.random.default_rng(1))
    assert sorted({r for r, _, _ in gradual}) == [2, 3, 4, 5] and len(gradual) == 18
    assert all(g != home[c] for _, c, g in gradual)
    back = realise_schedule([{"kind": "recurrent", "round": 2, "until": 5, "share": 0.2}], home, 3,
                            np.random.default_rng(2))
    assert np.array_equal(groups_at_round(home, back, 5), home) and not np.array_equal(groups_at_round(home, back, 2), home)
    assert switch_spans([{"kind": "gradual", "round": 2, "window": 4, "share": 1.0},
                         {"kind": "recurrent", "round": 7, "until": 9, "share": 0.5}]) == [(2, 5), (7, 7), (9, 9)]


BAD = [
    ({"kind": "sudden", "round": 12, "share": 0.3}, "splits.rot.drift[0].round: the event reaches round 12, beyond the run"),
    ({"kind": "gradual", "round": 8, "window": 3, "share": 0.3}, "splits.rot.drift[0].window: the event reaches round 10"),
    ({"kind": "recurrent", "round": 2, "until": 10, "share": 0.3}, "splits.rot.drift[0].until: the event reaches round 10"),
    ({"kind": "sudden", "round": 2, "share": 0}, "splits.rot.drift.0.share: 0 is less than or equal to the minimum of 0"),
    ({"kind": "sudden", "round": 2, "share": 1.2}, "splits.rot.drift.0.share: 1.2 is greater than the maximum of 1"),
    ({"kind": "sudden", "round": 2, "share": 0.5, "to_group": 2},
     "splits.rot.drift[0].to_group: group 2 is not a group of the split (2 groups); allowed: 0..1 or null"),
    ({"kind": "sudden", "round": 2, "share": 0.5, "from_group": 5}, "splits.rot.drift[0].from_group: group 5"),
    ({"kind": "sudden", "round": 0, "share": 0.5}, "splits.rot.drift.0.round: 0 is less than the minimum of 1"),
    ({"kind": "drift", "round": 2, "share": 0.5}, "allowed: sudden, gradual, recurrent"),
    ({"kind": "recurrent", "round": 2, "share": 0.5}, "splits.rot.drift[0].until: None; allowed: a recurrent"),
]


@pytest.mark.parametrize("event,message", BAD)
def test_a_bad_schedule_is_refused_before_any_job(tmp_path, event, message):
    overrides = {"study": {"splits": ["rot"], "datasets": ["digits"]}, "results_dir": str(tmp_path),
                 "datasets": {"digits": {"rounds": 10}},
                 "splits": {"rot": {"generator": "rotation", "angles": [0, 180], "drift": [event]}}}
    with pytest.raises(ConfigError) as err:
        load_config(Path(REPO) / "config" / "tiny.yaml", overrides=overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_schedule_on_a_split_whose_groups_are_sizes_is_refused(tmp_path):
    overrides = {"study": {"splits": ["qs"], "datasets": ["digits"]}, "results_dir": str(tmp_path),
                 "splits": {"qs": {"generator": "quantity-skew", "drift": [{"kind": "sudden", "round": 1, "share": 0.5}]}}}
    with pytest.raises(ConfigError, match=r"splits.qs: unknown key 'drift' for generator quantity-skew"):
        load_config(Path(REPO) / "config" / "tiny.yaml", overrides=overrides)
