"""Drift over rounds on label-skew splits (cflcore.data.drift): a group is a class distribution, so a client that
moves into group g holds a sample of g's class distribution drawn at split time (manifest ``drift.samples``). The
ground truth of every round matches the data each client holds; the sizes are the client's; ``replace: false``
shares no image between clients; a static split keeps its bytes; a bad schedule or too few images is refused in one
line naming the field."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from cflcore.config import load_config
from cflcore.data import load_federated, make_split
from cflcore.data.drift import groups_at_round
from cflcore.errors import ConfigError, DataError
from cflcore.evaluate.clustering import load_ground_truth
from cflcore.io import read_json, read_parquet
from conftest import REPO

SCHEDULE = [{"kind": "sudden", "round": 2, "share": 0.34},
            {"kind": "recurrent", "round": 4, "until": 6, "share": 0.5, "from_group": 0, "to_group": 2},
            {"kind": "gradual", "round": 7, "window": 3, "share": 0.25}]
N_ROUNDS = 11
OCFL_SETS = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]  # 000's non-overlapping sets for 10 classes (digits)


def own_samples(split_dir: Path, client: int) -> tuple[np.ndarray, np.ndarray]:
    t = read_parquet(split_dir / "assignments.parquet").to_pandas()
    mine = t[t.client == client]
    return np.sort(mine[mine.role == "train"].idx.to_numpy()), np.sort(mine[mine.role == "test"].idx.to_numpy())


@pytest.mark.parametrize("replace", [True, False])
def test_the_truth_of_every_round_is_the_class_set_each_client_holds(digits, digits_table, tmp_path, replace):
    """ocfl groups are class sets: at every round each client's train and test labels lie in its group-of-the-round's
    set, its samples are its own at home and the drawn ones elsewhere, its sizes never change, and the evaluation's
    histograms count what it holds."""
    settings = {"generator": "ocfl", "samples_per_client": 50, "replace": replace, "drift": SCHEDULE}
    manifest = make_split(digits, settings, 9, 0, tmp_path)
    home, changes = manifest["cluster_of_client"], manifest["drift"]["changes"]
    drawn = {(s["client"], s["group"]): s for s in manifest["drift"]["samples"]}
    assert {r for r, _, _ in changes} >= {2, 4, 6, 7} and len(drawn) >= 4  # every event moved clients
    assert "group_transforms" not in manifest["drift"]
    fed = load_federated(digits, tmp_path)
    truth = load_ground_truth(tmp_path / "manifest.json")
    seen = set()
    for rnd in range(N_ROUNDS):
        view = fed.at_round(rnd)
        groups = groups_at_round(home, changes, rnd)
        np.testing.assert_array_equal(view.true_clusters, groups)
        np.testing.assert_array_equal(truth.clusters_at(rnd), groups)
        for k, c in enumerate(view.clients):
            g = int(groups[k])
            assert set(c.y_train.tolist()) | set(c.y_test.tolist()) <= set(OCFL_SETS[g])  # g's classes only
            np.testing.assert_array_equal(c.y_train.numpy(), digits_table.labels[c.idx_train])
            assert (c.n_train, c.n_test) == (manifest["n_train"][k], manifest["n_test"][k])
            want = own_samples(tmp_path, k) if g == home[k] else (drawn[(k, g)]["train_idx"], drawn[(k, g)]["test_idx"])
            np.testing.assert_array_equal(c.idx_train, want[0])
            np.testing.assert_array_equal(c.idx_test, want[1])
            seen.add((k, g))
        held = [np.bincount(c.y_train.numpy(), minlength=10) for c in view.clients]
        np.testing.assert_array_equal(truth.histograms_at(rnd), np.asarray(held, dtype=np.float64))
    assert seen == {(k, home[k]) for k in range(9)} | set(drawn)  # every draw is held in some round
    recurrent = [c for r, c, g in changes if r == 6 and g == home[c]]  # back to its own samples at `until`
    assert recurrent and all(fed.at_round(6).clients[c] is fed.clients[c] for c in recurrent)


def test_a_majority_client_follows_its_new_groups_majority_and_back(digits, digits_table, tmp_path):
    """majority: a client's most frequent label is a class of its group-of-the-round, the drawn one the majority class
    the manifest records for it; a recurrent event brings every client back to its own samples."""
    sets = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    manifest = make_split(digits, {"generator": "majority", "class_sets": sets, "majority_share": 0.8,
                                   "samples_per_client": 60,
                                   "drift": [{"kind": "recurrent", "round": 1, "until": 3, "share": 1.0}]}, 9, 2,
                          tmp_path)
    home = manifest["cluster_of_client"]
    drawn = {(s["client"], s["group"]): s for s in manifest["drift"]["samples"]}
    fed = load_federated(digits, tmp_path)
    for rnd, moved in ((0, False), (1, True), (2, True), (3, False)):
        view = fed.at_round(rnd)
        for k, c in enumerate(view.clients):
            g = int(view.true_clusters[k])
            assert (g != home[k]) == moved
            top = int(np.argmax(np.bincount(np.concatenate([c.y_train.numpy(), c.y_test.numpy()]), minlength=10)))
            majority = drawn[(k, g)]["majority_class"] if moved else manifest["majority_class_of_client"][k]
            assert top == majority and top in sets[g]


def test_a_dirichlet_mix_client_takes_its_new_groups_concentration(digits, tmp_path):
    """dirichlet-mix with α 0 (one class) beside α 1000 (near uniform): a client that moves holds one class in the
    α-0 group and many in the other, whatever it held before."""
    manifest = make_split(digits, {"generator": "dirichlet-mix", "cluster_shares": [0.5, 0.5], "alphas": [1000, 0],
                                   "samples_per_client": 60,
                                   "drift": [{"kind": "sudden", "round": 1, "share": 1.0}]}, 8, 1, tmp_path)
    fed = load_federated(digits, tmp_path)
    for rnd in (0, 1):
        view = fed.at_round(rnd)
        for c, g in zip(view.clients, view.true_clusters):
            n_classes = len(set(c.y_train.tolist()) | set(c.y_test.tolist()))
            assert (n_classes == 1) if g == 1 else (n_classes >= 8)
    assert all(s["alpha"] == [1000, 0][s["group"]] for s in manifest["drift"]["samples"])


def test_replace_false_shares_no_image_between_clients(digits, tmp_path):
    make_split(digits, {"generator": "ocfl", "samples_per_client": 60, "replace": False, "drift": SCHEDULE}, 9, 3,
               tmp_path)
    manifest = read_json(tmp_path / "manifest.json")
    t = read_parquet(tmp_path / "assignments.parquet").to_pandas()
    own = t[t.client >= 0].idx.to_numpy()
    new = np.concatenate([np.r_[s["train_idx"], s["test_idx"]] for s in manifest["drift"]["samples"]])
    every = np.concatenate([own, new])
    assert len(new) > 0 and len(np.unique(every)) == len(every)  # no image in two samples, moved or not
    fed = load_federated(digits, tmp_path)
    for rnd in range(N_ROUNDS):
        held = np.concatenate([np.r_[c.idx_train, c.idx_test] for c in fed.at_round(rnd).clients])
        assert len(np.unique(held)) == len(held) == 9 * 60


def test_replace_true_draws_other_clients_images_with_the_clients_sizes(digits, tmp_path):
    manifest = make_split(digits, {"generator": "ocfl", "samples_per_client": 120, "drift": SCHEDULE[:1]}, 9, 3,
                          tmp_path)
    t = read_parquet(tmp_path / "assignments.parquet").to_pandas()
    own = set(t[t.client >= 0].idx)
    for s in manifest["drift"]["samples"]:
        k = s["client"]
        assert (len(s["train_idx"]), len(s["test_idx"])) == (manifest["n_train"][k], manifest["n_test"][k])
        assert len(set(s["train_idx"]) | set(s["test_idx"])) == manifest["n_train"][k] + manifest["n_test"][k]
    assert any(set(s["train_idx"]) & own for s in manifest["drift"]["samples"])  # the pools are the whole classes


def _content_digest(split_dir: Path) -> str:
    t = read_parquet(split_dir / "assignments.parquet")
    h = hashlib.sha256()
    for col in ("client", "cluster", "idx"):
        h.update(np.ascontiguousarray(t.column(col).to_numpy()).tobytes())
    h.update("|".join(t.column("role").to_pylist()).encode())
    h.update((split_dir / "manifest.json").read_bytes())
    return h.hexdigest()[:16]


STATIC_BEFORE = {  # content digests at e72320a, before label-skew drift (digits, seed 3)
    "majority-spread-disjoint": ({"generator": "majority", "class_sets": [[1, 2], [3, 4], [5, 6], [7, 8]],
                                  "majority_share": 0.68, "group_spread": 0.47, "samples_per_client": 40,
                                  "replace": False}, 16, "9a7c211cb5f67432"),
    "ocfl-disjoint": ({"generator": "ocfl", "replace": False, "samples_per_client": 60}, 9, "f93c14160be2b12e"),
}


@pytest.mark.parametrize("name", sorted(STATIC_BEFORE))
def test_a_static_split_keeps_its_bytes_and_a_schedule_only_adds_its_key(digits, tmp_path, name):
    settings, n, digest = STATIC_BEFORE[name]
    make_split(digits, settings, n, 3, tmp_path / "static")
    assert _content_digest(tmp_path / "static") == digest
    make_split(digits, {**settings, "drift": [{"kind": "sudden", "round": 1, "share": 0.25}]}, n, 3, tmp_path / "d")
    assert (tmp_path / "d" / "assignments.parquet").read_bytes() == \
        (tmp_path / "static" / "assignments.parquet").read_bytes()
    drifting, static = read_json(tmp_path / "d" / "manifest.json"), read_json(tmp_path / "static" / "manifest.json")
    assert drifting.pop("drift")["samples"] and drifting == static


def test_too_few_images_left_is_refused_in_one_line(digits, tmp_path):
    with pytest.raises(DataError) as err:  # group 1's classes (4, 5, 6) cannot give every mover 120 more images
        make_split(digits, {"generator": "ocfl", "samples_per_client": 120, "replace": False,
                            "drift": [{"kind": "sudden", "round": 1, "share": 1.0, "to_group": 1}]}, 9, 0, tmp_path)
    assert str(err.value).startswith("split.drift: client ") and "are left" in str(err.value)
    assert "\n" not in str(err.value) and not (tmp_path / "assignments.parquet").exists()


def _load(tmp_path, split: dict, rounds: int = 10) -> dict:
    overrides = {"study": {"splits": ["ls"], "datasets": ["digits"]}, "results_dir": str(tmp_path),
                 "datasets": {"digits": {"rounds": rounds}}, "splits": {"ls": split}}
    return load_config(Path(REPO) / "config" / "tiny.yaml", overrides=overrides)


BAD = [
    ({"generator": "ocfl", "drift": [{"kind": "sudden", "round": 10, "share": 0.5}]},
     "splits.ls.drift[0].round: the event reaches round 10, beyond the run"),
    ({"generator": "ocfl", "drift": [{"kind": "sudden", "round": 2, "share": 0.5, "to_group": 3}]},
     "splits.ls.drift[0].to_group: group 3 is not a group of the split (3 groups); allowed: 0..2 or null"),
    ({"generator": "majority", "drift": [{"kind": "sudden", "round": 2, "share": 0.5, "from_group": 3}]},
     "splits.ls.drift[0].from_group: group 3 is not a group of the split (3 groups)"),  # digits' default groups
    ({"generator": "majority", "class_sets": [[0, 1], [2, 3]],
      "drift": [{"kind": "sudden", "round": 2, "share": 0.5, "to_group": 2}]},
     "splits.ls.drift[0].to_group: group 2 is not a group of the split (2 groups)"),
    ({"generator": "dirichlet-mix", "cluster_shares": [0.5, 0.5], "alphas": [1, 0],
      "drift": [{"kind": "recurrent", "round": 3, "until": 2, "share": 0.5}]}, "splits.ls.drift[0].until: 2"),
    ({"generator": "dirichlet-mix", "drift": [{"kind": "sudden", "round": 2, "share": 1.5}]},
     "splits.ls.drift.0.share: 1.5 is greater than the maximum of 1"),
    ({"generator": "ocfl", "samples_per_client": 140, "replace": False,
      "drift": [{"kind": "sudden", "round": 2, "share": 1.0}]},
     "splits.ls.drift: with replace: false, 6 clients × 140 draws and at least 6 moving clients × 140 new draws need "
     "1680 distinct images"),
]


@pytest.mark.parametrize("split,message", BAD)
def test_a_bad_schedule_is_refused_before_any_job(tmp_path, split, message):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, split)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_schedule_that_fits_is_accepted(tmp_path):
    cfg = _load(tmp_path, {"generator": "ocfl", "samples_per_client": 100, "replace": False,
                           "drift": [{"kind": "sudden", "round": 2, "share": 0.5}]})
    assert cfg["splits"]["ls"]["drift"][0]["share"] == 0.5
