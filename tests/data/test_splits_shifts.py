"""The shift generators (rotation, label-swap, feature-skew, quantity-skew) and the standard partitions (dirichlet,
shards): the manifest's groups are what the data shows, a rebuild is bit-identical, bad parameters are refused in
one line naming the field, and every split family written before them keeps its content bit for bit."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from scipy.ndimage import grey_dilation, grey_erosion

from cflcore.data import load_federated, make_split
from cflcore.errors import ConfigError
from cflcore.io import read_json, read_parquet
from conftest import raw_images

SHIFTS = {
    "rotation": {"generator": "rotation"},
    "label-swap": {"generator": "label-swap", "swaps": [[1, 7], [3, 8], [5, 6]]},
    "feature-skew": {"generator": "feature-skew"},
    "quantity-skew": {"generator": "quantity-skew", "samples_per_client": 60},
    "dirichlet": {"generator": "dirichlet", "alpha": 0.3},
    "shards": {"generator": "shards"},
}


def test_rotation_groups_are_the_rotations_the_images_show(digits, digits_table, tmp_path):
    manifest = make_split(digits, SHIFTS["rotation"], 8, 0, tmp_path)
    assert manifest["cluster_of_client"] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert manifest["angle_of_client"] == [0, 0, 90, 90, 180, 180, 270, 270]
    fed = load_federated(digits, tmp_path)
    for k, c in enumerate(fed.clients):
        k90 = manifest["angle_of_client"][k] // 90
        for x, idx in ((c.x_train, c.idx_train), (c.x_test, c.idx_test)):  # the local test set gets its rotation too
            np.testing.assert_array_equal(x.numpy(), np.rot90(raw_images(digits_table, idx), k=k90, axes=(2, 3)))
    orchestrator = np.flatnonzero(digits_table.part == "test")
    np.testing.assert_array_equal(fed.x_orch.numpy(), raw_images(digits_table, orchestrator))


def test_rotation_by_other_angles_and_felisats_half(digits, digits_table, tmp_path):
    manifest = make_split(digits, {"generator": "rotation", "angles": [180, 0], "cluster_shares": [0.5, 0.5],
                                   "alpha": 1.0}, 10, 0, tmp_path / "felisat")
    assert manifest["angle_of_client"] == [180] * 5 + [0] * 5
    weights = np.asarray(manifest["class_weights"])
    assert len({tuple(w) for w in weights}) == 10  # every client its own Dirichlet class vector
    make_split(digits, {"generator": "rotation", "angles": [0, 45]}, 4, 0, tmp_path / "45")
    fed = load_federated(digits, tmp_path / "45")
    from scipy.ndimage import rotate
    x = raw_images(digits_table, fed.clients[3].idx_train)
    expected = np.clip(rotate(x, 45, axes=(3, 2), reshape=False, order=1), 0, 1)
    np.testing.assert_allclose(fed.clients[3].x_train.numpy(), expected, atol=1e-6)


def test_label_swap_swaps_train_and_test_labels_of_its_group_only(digits, digits_table, tmp_path):
    manifest = make_split(digits, SHIFTS["label-swap"], 9, 1, tmp_path)
    assert manifest["swap_of_client"] == [[1, 7]] * 3 + [[3, 8]] * 3 + [[5, 6]] * 3
    fed = load_federated(digits, tmp_path)
    for k, c in enumerate(fed.clients):
        a, b = manifest["swap_of_client"][k]
        for y, idx in ((c.y_train, c.idx_train), (c.y_test, c.idx_test)):
            true = digits_table.labels[idx]
            expected = np.where(true == a, b, np.where(true == b, a, true))
            np.testing.assert_array_equal(y.numpy(), expected)
            assert (true == a).any() and (y.numpy() != true).any()  # the swap shows in the data
    np.testing.assert_array_equal(fed.y_orch.numpy(), digits_table.labels[digits_table.part == "test"])
    for k, c in enumerate(fed.clients):  # the manifest's histograms count the labels the client holds
        assert manifest["label_histograms_train"][k] == np.bincount(c.y_train.numpy(), minlength=10).tolist()
        assert manifest["label_histograms_test"][k] == np.bincount(c.y_test.numpy(), minlength=10).tolist()


@pytest.mark.parametrize("size", [2, 3])
def test_feature_skew_is_scipys_erosion_and_dilation(digits, digits_table, tmp_path, size):
    manifest = make_split(digits, {"generator": "feature-skew", "morphology_size": size}, 6, 2, tmp_path)
    assert manifest["cluster_domains"] == ["none", "erode", "dilate"]
    fed = load_federated(digits, tmp_path)
    ops = {0: lambda x: x, 1: lambda x: grey_erosion(x, size=(1, 1, size, size)),
           2: lambda x: grey_dilation(x, size=(1, 1, size, size))}
    for k, c in enumerate(fed.clients):
        g = manifest["cluster_of_client"][k]
        for x, idx in ((c.x_train, c.idx_train), (c.x_test, c.idx_test)):
            np.testing.assert_array_equal(x.numpy(), ops[g](raw_images(digits_table, idx)))
    thin = fed.clients[2].x_train.mean(), fed.clients[4].x_train.mean()
    assert thin[0] < thin[1]  # eroded digits are thinner than dilated ones


def test_quantity_skew_fractions_hold(digits, tmp_path):
    manifest = make_split(digits, SHIFTS["quantity-skew"], 8, 0, tmp_path)
    assert manifest["fraction_of_client"] == [0.1, 0.1, 0.2, 0.2, 0.6, 0.6, 1.0, 1.0]
    distinct = np.asarray(manifest["n_train"]) + np.asarray(manifest["n_test"])
    draws = np.asarray([max(2, round(f * 60)) for f in manifest["fraction_of_client"]])
    assert (distinct <= draws).all() and (distinct >= 0.8 * draws).all()  # duplicates dropped, most draws distinct
    per_group = [distinct[2 * g: 2 * g + 2].mean() for g in range(4)]
    assert per_group == sorted(per_group) and per_group[0] < per_group[-1] / 5
    np.testing.assert_allclose(np.asarray(manifest["class_weights"]), 0.1)  # one distribution for every group


def test_standard_partitions_have_no_groups(digits, digits_table, tmp_path):
    manifest = make_split(digits, SHIFTS["shards"], 10, 0, tmp_path / "shards")
    assert manifest["ground_truth"] is False and manifest["n_clusters"] == 1
    t = read_parquet(tmp_path / "shards" / "assignments.parquet")
    client, idx = t.column("client").to_numpy(), t.column("idx").to_numpy()
    held = idx[client >= 0]
    assert len(held) == len(set(held)) == (digits_table.part == "train").sum()  # a partition: every sample once
    classes = [len(np.unique(digits_table.labels[idx[client == k]])) for k in range(10)]
    assert max(classes) <= 4  # two label-sorted shards: at most two classes each, plus a shard's boundary
    manifest = make_split(digits, SHIFTS["dirichlet"], 10, 0, tmp_path / "dir")
    assert manifest["ground_truth"] is False and set(manifest["cluster_of_client"]) == {0}


@pytest.mark.parametrize("name", sorted(SHIFTS))
def test_rebuild_is_bit_identical(digits, tmp_path, name):
    make_split(digits, SHIFTS[name], 8, 3, tmp_path / "a")
    make_split(digits, SHIFTS[name], 8, 3, tmp_path / "b")
    for f in ("assignments.parquet", "manifest.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    a, b = load_federated(digits, tmp_path / "a"), load_federated(digits, tmp_path / "b")
    for ca, cb in zip(a.clients, b.clients):
        assert np.array_equal(ca.x_train.numpy(), cb.x_train.numpy()) and np.array_equal(ca.y_test, cb.y_test)


@pytest.mark.parametrize("settings,field", [
    ({"generator": "rotation", "angles": [0, 360]}, "split.angles.1: 360 is greater than the maximum of 359"),
    ({"generator": "rotation", "angles": [-90, 0]}, "split.angles.0: -90 is less than the minimum of 0"),
    ({"generator": "label-swap", "swaps": [[1, 10]]}, "split.swaps[0]: label 10 is not in dataset digits"),
    ({"generator": "label-swap", "swaps": [[3, 3]]}, "split.swaps[0]: [3, 3] swaps label 3 with itself"),
    ({"generator": "label-swap", "swaps": [[1, 2, 3]]}, "split.swaps.0: [1, 2, 3] is too long"),
    ({"generator": "quantity-skew", "fractions": [0.5, 1.5]}, "split.fractions.1: 1.5 is greater than the maximum of 1"),
    ({"generator": "quantity-skew", "fractions": [0.0, 1.0]}, "split.fractions.0: 0.0 is less than or equal to the minimum of 0"),
    ({"generator": "feature-skew", "features": ["none", "sharpen"]}, "split.features.1: 'sharpen' is not allowed; allowed: none, erode, dilate"),
    ({"generator": "rotation", "angles": [0, 180], "cluster_shares": [1.0]}, "split.angles: 2 entries but cluster_shares"),
    ({"generator": "shards", "shards_per_client": 0}, "split.shards_per_client: 0 is less than the minimum of 1"),
])
def test_bad_parameters_refused_in_one_line(digits, tmp_path, settings, field):
    with pytest.raises(ConfigError) as err:
        make_split(digits, settings, 6, 0, tmp_path)
    assert str(err.value).startswith(field) and "\n" not in str(err.value)
    assert not (tmp_path / "assignments.parquet").exists()


def test_config_validation_refuses_a_bad_angle(tmp_path):
    from cflcore.config import load_config
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: {splits: [rot]}\nsplits:\n  rot: {generator: rotation, angles: [0, 400]}\n")
    with pytest.raises(ConfigError, match=r"^splits\.rot\.angles"):
        load_config("config/config.yaml", "config/tiny.yaml", str(bad))


SPLITS_BEFORE = {  # content digests of every family at 7c11a35 (digits, 12 clients, seed 5)
    "nonoverlap-balanced": ({"generator": "ocfl", "overlap": False, "imbalanced": False}, "88e38923c62dae76"),
    "overlap-imbalanced": ({"generator": "ocfl", "overlap": True, "imbalanced": True}, "d6bd04ce22b5fb73"),
    "majority": ({"generator": "majority", "majority_share": 0.7}, "32e73667df340d03"),
    "dirichlet-mix": ({"generator": "dirichlet-mix", "cluster_shares": [0.4, 0.3, 0.3], "alphas": [1000, 0.05, 0]},
                      "1d9a5758e78ec4a8"),
    "domains": ({"generator": "domains", "domains": ["clean", "noise", "blur"], "noise_std": 0.3, "blur_sigma": 1.0},
                "15b7c91a476e75ef"),
}


@pytest.mark.parametrize("name", sorted(SPLITS_BEFORE))
def test_existing_splits_unchanged(digits, tmp_path, name):
    settings, digest = SPLITS_BEFORE[name]
    make_split(digits, settings, 12, 5, tmp_path)
    t = read_parquet(tmp_path / "assignments.parquet")
    h = hashlib.sha256()
    for col in ("client", "cluster", "idx"):
        h.update(np.ascontiguousarray(t.column(col).to_numpy()).tobytes())
    h.update("|".join(t.column("role").to_pylist()).encode())
    h.update((tmp_path / "manifest.json").read_bytes())
    assert h.hexdigest()[:16] == digest
    assert "ground_truth" not in read_json(tmp_path / "manifest.json")


@pytest.mark.parametrize("settings", [
    {"generator": "rotation", "angles": [0, 180], "samples_per_client": 50},
    {"generator": "label-swap", "swaps": [[1, 7], [3, 8]], "samples_per_client": 50, "alpha": 1.0},
    {"generator": "ocfl", "samples_per_client": 50},
])
def test_without_replacement_no_train_image_is_in_two_clients(digits, digits_table, tmp_path, settings):
    """``replace: false``: the clients' train and test images are disjoint, each client's class counts are its class
    vector's largest-remainder share of its draws, a rebuild is bit-identical, and ``replace: true`` (the default)
    is the split as it was: its manifest does not name the parameter."""
    out = {}
    for name, replace in (("a", False), ("b", False), ("with", True)):
        manifest = make_split(digits, {**settings, "replace": replace}, 12, 4, tmp_path / name)
        out[name] = (read_parquet(tmp_path / name / "assignments.parquet"), manifest)
    t, manifest = out["a"]
    clients, idx, roles = (t.column(k).to_numpy(zero_copy_only=False) for k in ("client", "idx", "role"))
    mine = idx[clients >= 0]
    assert len(np.unique(mine)) == len(mine)  # no image twice, across clients and roles
    assert manifest["params"]["replace"] is False and "replace" not in out["with"][1]["params"]
    assert (tmp_path / "a" / "assignments.parquet").read_bytes() == (tmp_path / "b" / "assignments.parquet").read_bytes()
    with_replacement = out["with"][0].column("idx").to_numpy()
    assert len(np.unique(with_replacement[out["with"][0].column("client").to_numpy() >= 0])) < len(with_replacement[
        out["with"][0].column("client").to_numpy() >= 0])  # the default draws with replacement: images repeat
    if settings["generator"] == "rotation":  # uniform classes: 50 draws give exactly 5 images of each digit
        counts = np.bincount(digits_table.labels[idx[clients == 0]], minlength=10)
        assert counts.tolist() == [5] * 10


def test_without_replacement_asks_no_more_than_the_data_holds(digits, tmp_path):
    from cflcore.errors import DataError

    with pytest.raises(DataError, match=r"^splits.big.replace: false: client \d+ needs \d+ images of class \d, \d+ are "
                                        r"left; allowed: fewer samples_per_client or clients, or replace: true$"):
        make_split(digits, {"generator": "rotation", "samples_per_client": 400, "replace": False}, 12, 0, tmp_path,
                   field="splits.big")


FELISAT_HALF = {"generator": "rotation", "angles": [180, 0], "cluster_shares": [0.5, 0.5], "alpha": 1.0,
                "dirichlet_over": "clients", "samples_per_client": None, "replace": False, "local_test_fraction": 0.2}
"""config/home-scl-offline.yaml's split: Sattler et al.'s split_noniid (felisat/clustered-federated-learning
data_utils.py:4-23) with clients 0-4 rotated by 180°."""


def test_dirichlet_over_clients_partitions_every_train_image(digits, digits_table, tmp_path):
    """Every train image in exactly one client; each class's images spread over the clients by one Dirichlet draw
    (client sizes differ, unlike a fixed samples_per_client); the default ``classes`` stays out of the manifest's
    params, so every rotation split written before the option keeps its streams and its files."""
    manifest = make_split(digits, FELISAT_HALF, 10, 0, tmp_path / "a")
    make_split(digits, FELISAT_HALF, 10, 0, tmp_path / "b")
    assert (tmp_path / "a" / "assignments.parquet").read_bytes() == (tmp_path / "b" / "assignments.parquet").read_bytes()
    t = read_parquet(tmp_path / "a" / "assignments.parquet")
    clients, idx = (t.column(k).to_numpy() for k in ("client", "idx"))
    mine = np.sort(idx[clients >= 0])
    np.testing.assert_array_equal(mine, np.flatnonzero(digits_table.part == "train"))  # all of them, each once
    assert manifest["angle_of_client"] == [180] * 5 + [0] * 5 and manifest["params"]["dirichlet_over"] == "clients"
    sizes = np.asarray(manifest["n_train"]) + np.asarray(manifest["n_test"])
    assert len(set(sizes.tolist())) > 1
    hist = np.asarray(manifest["label_histograms"])
    np.testing.assert_allclose(np.asarray(manifest["class_weights"]), hist / hist.sum(1, keepdims=True), atol=1e-12)
    classes = make_split(digits, {**{k: v for k, v in FELISAT_HALF.items() if k != "dirichlet_over"}, "replace": True},
                         10, 0, tmp_path / "c")
    assert "dirichlet_over" not in classes["params"]


@pytest.mark.parametrize("change", [{"alpha": None}, {"replace": True}, {"samples_per_client": 50},
                                    {"dirichlet_over": "labels"}])
def test_dirichlet_over_clients_refuses_what_it_ignores(digits, tmp_path, change):
    with pytest.raises(ConfigError, match=r"^split\.dirichlet_over: ") as err:
        make_split(digits, {**FELISAT_HALF, **change}, 10, 0, tmp_path)
    assert "\n" not in str(err.value)
