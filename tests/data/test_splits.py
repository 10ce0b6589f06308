"""Split generators (docs/architecture.md §7): cluster sizes, class sets, disjointness, manifest <-> Parquet, determinism."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings as hyp_settings, strategies as st

from cflcore.data import load_federated, make_split, prepare_dataset, split_summary
from cflcore.data.splits import SPLIT_GENERATORS
from cflcore.data.splits.base import apportion
from cflcore.data.splits.label_skew import DEFAULT_CLASS_SETS
from cflcore.errors import ConfigError
from cflcore.io import read_json, read_parquet

OCFL = {
    "nonoverlap-balanced": {"generator": "ocfl", "overlap": False, "imbalanced": False},
    "nonoverlap-imbalanced": {"generator": "ocfl", "overlap": False, "imbalanced": True, "alpha": 1.0},
    "overlap-balanced": {"generator": "ocfl", "overlap": True, "imbalanced": False},
    "overlap-imbalanced": {"generator": "ocfl", "overlap": True, "imbalanced": True},
}
FAMILIES = {
    **OCFL,
    "majority": {"generator": "majority", "majority_share": 0.7},
    "dirichlet-mix": {"generator": "dirichlet-mix", "cluster_shares": [0.4, 0.3, 0.3], "alphas": [1000, 0.05, 0]},
    "domains": {"generator": "domains", "domains": ["clean", "noise", "blur"], "noise_std": 0.3, "blur_sigma": 1.0},
}


def read_split(split_dir: Path) -> tuple[dict, dict]:
    t = read_parquet(split_dir / "assignments.parquet")
    cols = {k: t.column(k).to_numpy(zero_copy_only=False) for k in ("client", "cluster", "idx")}
    cols["role"] = np.asarray(t.column("role").to_pylist())
    return cols, read_json(split_dir / "manifest.json")


def client_rows(cols: dict, k: int, role: str) -> np.ndarray:
    return cols["idx"][(cols["client"] == k) & (cols["role"] == role)]


# ----------------------------------------------------------------------------- cluster sizes
def test_apportion_reproduces_published_imbalanced_sizes():
    assert apportion(15, (0.22, 0.47, 0.31)) == [3, 7, 5]
    assert apportion(30, (0.22, 0.47, 0.31)) == [7, 14, 9]
    assert apportion(3, (0.22, 0.47, 0.31)) == [1, 1, 1]


@hyp_settings(max_examples=60, deadline=None)
@given(n=st.integers(3, 500), shares=st.lists(st.floats(0.01, 10), min_size=1, max_size=3))
def test_apportion_sums_and_every_cluster_non_empty(n, shares):
    sizes = apportion(n, shares)
    assert sum(sizes) == n and min(sizes) >= 1 and len(sizes) == len(shares)


def test_majority_groups_given_class_sets_are_declared_before_the_split(digits, tmp_path):
    """Given ``class_sets``, a majority split's groups are fixed by its parameters (majority classes round-robin over
    the groups): ``group_sizes`` declares them, one entry per group, and the split makes exactly those."""
    settings = {"generator": "majority", "class_sets": [[0, 1, 2], [3, 4], [5]]}
    generator = SPLIT_GENERATORS.get("majority")(settings)
    assert generator.group_sizes(10) == (5, 3, 2)
    assert make_split(digits, settings, 10, 0, tmp_path)["clients_per_cluster"] == [5, 3, 2]
    assert generator.group_sizes(2) == (1, 1, 0)  # three groups whatever the count (validation refuses 2 clients)
    assert SPLIT_GENERATORS.get("majority")({"generator": "majority"}).group_sizes(10) is None  # the loader's groups


@pytest.mark.parametrize("name,n,expected", [
    ("nonoverlap-balanced", 15, [5, 5, 5]), ("nonoverlap-balanced", 16, [6, 5, 5]),
    ("nonoverlap-imbalanced", 15, [3, 7, 5]), ("overlap-imbalanced", 30, [7, 14, 9]),
    ("dirichlet-mix", 10, [4, 3, 3]), ("domains", 10, [4, 3, 3]), ("majority", 10, [4, 3, 3]),
])
def test_cluster_sizes(digits, tmp_path, name, n, expected):
    manifest = make_split(digits, FAMILIES[name], n, 0, tmp_path)
    assert manifest["clients_per_cluster"] == expected
    # the sizes a method's cannot_split reads before any job are the ones the split makes (None: the data decides)
    declared = SPLIT_GENERATORS.get(FAMILIES[name]["generator"])(FAMILIES[name]).group_sizes(n)
    assert declared is None or list(declared) == expected, declared
    cols, _ = read_split(tmp_path)
    for c, size in enumerate(expected):
        assert len(np.unique(cols["client"][cols["cluster"] == c])) == size


# ----------------------------------------------------------------------------- invariants of every family
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_split_invariants(digits, digits_table, tmp_path, name):
    n_clients = 15
    manifest = make_split(digits, FAMILIES[name], n_clients, 3, tmp_path)
    cols, on_disk = read_split(tmp_path)
    assert on_disk == manifest
    labels = digits_table.labels
    test_part = np.flatnonzero(digits_table.part == "test")
    orch = cols["idx"][cols["role"] == "orchestrator"]
    np.testing.assert_array_equal(np.sort(orch), test_part)  # orchestrator = the dataset's own test part
    assert (cols["cluster"][cols["role"] == "orchestrator"] == -1).all()
    assert manifest["orchestrator_size"] == len(test_part)
    assert set(cols["role"]) == {"train", "test", "orchestrator"}
    for k in range(n_clients):
        train, test = client_rows(cols, k, "train"), client_rows(cols, k, "test")
        assert len(train) and len(test)
        assert not set(train) & set(test)  # no sample in both own parts
        assert not (set(train) | set(test)) & set(orch)  # orchestrator disjoint from client data
        assert (digits_table.part[np.concatenate([train, test])] == "train").all()
        # manifest matches the Parquet
        assert manifest["n_train"][k] == len(train) and manifest["n_test"][k] == len(test)
        assert set(cols["cluster"][cols["client"] == k]) == {manifest["cluster_of_client"][k]}
        assert manifest["label_histograms_train"][k] == np.bincount(labels[train], minlength=10).tolist()
        assert manifest["label_histograms_test"][k] == np.bincount(labels[test], minlength=10).tolist()
        assert manifest["label_histograms"][k] == np.bincount(labels[np.concatenate([train, test])], minlength=10).tolist()
        # test share of the distinct samples is the local_test_fraction (0.3), up to rounding
        assert abs(len(test) / (len(train) + len(test)) - 0.3) < 0.02
    assert manifest["clients_per_cluster"] == np.bincount(manifest["cluster_of_client"]).tolist()
    assert manifest["n_clusters"] == 3 and manifest["seed"] == 3 and manifest["n_classes"] == 10
    # rows sorted by (client, role, idx)
    order = np.lexsort((cols["idx"], [{"train": 0, "test": 1, "orchestrator": 2}[r] for r in cols["role"]], cols["client"]))
    np.testing.assert_array_equal(order, np.arange(len(order)))


@pytest.mark.parametrize("name", sorted(OCFL))
def test_ocfl_class_sets_respected_and_overlap(digits, digits_table, tmp_path, name):
    manifest = make_split(digits, OCFL[name], 15, 1, tmp_path)
    overlap = OCFL[name]["overlap"]
    assert manifest["class_sets"] == DEFAULT_CLASS_SETS[10][overlap]
    present = []
    for c, class_set in enumerate(manifest["class_sets"]):
        hist = np.asarray(manifest["label_histograms"])[np.asarray(manifest["cluster_of_client"]) == c].sum(axis=0)
        classes = set(np.flatnonzero(hist).tolist())
        assert classes <= set(class_set)
        present.append(classes)
    shared = [present[a] & present[b] for a in range(3) for b in range(a + 1, 3)]
    if overlap:
        assert all(shared)  # every pair of overlapping clusters shares a class in the actual data
    else:
        assert not any(shared)


def test_ocfl_balanced_uses_every_class_of_the_set_evenly(digits, tmp_path):
    manifest = make_split(digits, OCFL["nonoverlap-balanced"], 15, 0, tmp_path)
    hist = np.asarray(manifest["label_histograms"])
    cluster0 = hist[np.asarray(manifest["cluster_of_client"]) == 0].sum(axis=0)[:4]
    assert cluster0.min() > 0.7 * cluster0.mean()


def test_ocfl_imbalanced_clients_of_a_cluster_share_one_class_vector(digits, tmp_path):
    manifest = make_split(digits, OCFL["nonoverlap-imbalanced"], 15, 0, tmp_path)
    weights = np.asarray(manifest["class_weights"])
    for c in range(3):
        mine = weights[np.asarray(manifest["cluster_of_client"]) == c]
        assert np.allclose(mine, mine[0])
        assert np.isclose(mine[0].sum(), 1.0) and set(np.flatnonzero(mine[0])) <= set(DEFAULT_CLASS_SETS[10][False][c])
    assert not np.allclose(weights[0][:4], 0.25)  # Dirichlet, not uniform


def test_majority_class_dominates_and_defines_cluster(digits, tmp_path):
    manifest = make_split(digits, FAMILIES["majority"], 10, 0, tmp_path)
    hist = np.asarray(manifest["label_histograms"])
    majority = manifest["majority_class_of_client"]
    assert sorted(majority) == list(range(10))  # 10 clients own the 10 classes once each (002)
    for k in range(10):
        assert hist[k].argmax() == majority[k]
        assert majority[k] in manifest["class_sets"][manifest["cluster_of_client"][k]]
        assert (hist[k] > 0).sum() >= 5  # the other classes are present too (m = 0.7)


def test_majority_share_one_gives_single_class_clients(digits, tmp_path):
    manifest = make_split(digits, {"generator": "majority", "majority_share": 1.0,
                                   "class_sets": [[0, 1, 8, 9], [2, 3, 4, 5, 6, 7]]}, 10, 0, tmp_path)
    hist = np.asarray(manifest["label_histograms"])
    assert ((hist > 0).sum(axis=1) == 1).all()
    assert manifest["clients_per_cluster"] == [4, 6]


GROUPS = [[0, 3, 6, 8, 9], [1, 2, 4, 5, 7]]


def test_majority_group_spread_shares_a_communitys_classes(digits, tmp_path):
    """group_spread s: P(l_k) = m (1 - s), the group's other classes share m s, the rest (1 - m)/(C - 1) each; at
    m = 1 a client draws from its own group only, its majority class still the most frequent."""
    manifest = make_split(digits, {"generator": "majority", "majority_share": 1.0, "class_sets": GROUPS,
                                   "group_spread": 0.5, "samples_per_client": 120}, 10, 0, tmp_path)
    hist = np.asarray(manifest["label_histograms"])
    for k in range(10):
        group = GROUPS[manifest["cluster_of_client"][k]]
        assert set(np.flatnonzero(hist[k])) <= set(group)
        assert len(np.flatnonzero(hist[k])) >= 4  # the group's mates are drawn too
        assert hist[k].argmax() == manifest["majority_class_of_client"][k]
        assert 0.35 < hist[k][manifest["majority_class_of_client"][k]] / hist[k].sum() < 0.65
    assert manifest["params"]["group_spread"] == 0.5


def test_majority_group_spread_zero_is_002s_draw_bit_for_bit(digits, tmp_path):
    """group_spread 0 (the default) leaves the streams' key and the manifest as before the option existed."""
    settings = {"generator": "majority", "majority_share": 0.7, "class_sets": GROUPS}
    make_split(digits, settings, 10, 0, tmp_path / "omitted")
    make_split(digits, {**settings, "group_spread": 0.0}, 10, 0, tmp_path / "zero")
    make_split(digits, {**settings, "group_spread": 0.3}, 10, 0, tmp_path / "spread")
    for f in ("assignments.parquet", "manifest.json"):
        assert (tmp_path / "omitted" / f).read_bytes() == (tmp_path / "zero" / f).read_bytes()
        assert (tmp_path / "omitted" / f).read_bytes() != (tmp_path / "spread" / f).read_bytes()
    assert "group_spread" not in read_json(tmp_path / "omitted" / "manifest.json")["params"]


def test_majority_group_spread_out_of_range_is_refused(digits, tmp_path):
    with pytest.raises(ConfigError, match=r"split\.group_spread"):
        make_split(digits, {"generator": "majority", "group_spread": 1.5}, 10, 0, tmp_path)


def test_dirichlet_mix_heterogeneity_levels(digits, tmp_path):
    manifest = make_split(digits, FAMILIES["dirichlet-mix"], 20, 0, tmp_path)
    hist = np.asarray(manifest["label_histograms"])
    cluster = np.asarray(manifest["cluster_of_client"])
    classes_per_client = (hist > 0).sum(axis=1)
    assert (classes_per_client[cluster == 2] == 1).all()  # alpha = 0: one class per client
    assert (classes_per_client[cluster == 0] >= 9).all()  # alpha = 1000: near uniform
    assert manifest["alpha_of_client"] == [1000.0] * 8 + [0.05] * 6 + [0.0] * 6


def test_domains_recorded_and_applied_deterministically(digits, digits_table, tmp_path):
    manifest = make_split(digits, FAMILIES["domains"], 10, 0, tmp_path)
    kinds = [d["domain"] for d in manifest["domains"]]
    assert kinds == ["clean"] * 4 + ["noise"] * 3 + ["blur"] * 3
    assert all(d["noise_std"] == 0.3 for d in manifest["domains"][4:7])
    fed_a = load_federated(digits, tmp_path)
    fed_b = load_federated(digits, tmp_path)
    for k, kind in enumerate(kinds):
        a = fed_a.clients[k]
        raw = torch.from_numpy(digits_table.images[a.idx_train].astype(np.float32) / 255)
        assert torch.equal(a.x_train, fed_b.clients[k].x_train)  # deterministic
        assert a.x_train.min() >= 0 and a.x_train.max() <= 1
        if kind == "clean":
            assert torch.equal(a.x_train, raw)
        elif kind == "noise":
            assert 0.1 < (a.x_train - raw).std() < 0.4
        else:  # blur keeps the mean brightness but removes high-frequency detail
            diff = (a.x_train[..., 1:] - a.x_train[..., :-1]).abs().mean()
            assert diff < 0.8 * (raw[..., 1:] - raw[..., :-1]).abs().mean()
    assert torch.equal(fed_a.x_orch, torch.from_numpy(digits_table.images[digits_table.part == "test"].astype(np.float32) / 255))


def test_load_federated_matches_assignments(digits, digits_table, tmp_path):
    make_split(digits, OCFL["overlap-balanced"], 6, 2, tmp_path)
    cols, manifest = read_split(tmp_path)
    fed = load_federated(digits, tmp_path)
    assert fed.n_clients == 6 and fed.n_classes == 10 and fed.shape == (1, 8, 8) and fed.n_true_clusters == 3
    np.testing.assert_array_equal(fed.true_clusters, manifest["cluster_of_client"])
    for k, client in enumerate(fed.clients):
        np.testing.assert_array_equal(client.idx_train, np.sort(client_rows(cols, k, "train")))
        assert client.x_train.dtype == torch.float32 and client.y_train.dtype == torch.int64
        np.testing.assert_array_equal(client.y_test.numpy(), digits_table.labels[client.idx_test])
        assert torch.equal(client.x_test[0], torch.from_numpy(digits_table.images[client.idx_test[0]] / np.float32(255)))


# ----------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("name", ["overlap-imbalanced", "majority", "dirichlet-mix", "domains"])
def test_same_seed_bit_identical_different_seed_different(digits, tmp_path, name):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    make_split(digits, FAMILIES[name], 12, 7, a)
    make_split(digits, FAMILIES[name], 12, 7, b)
    make_split(digits, FAMILIES[name], 12, 8, c)
    assert (a / "assignments.parquet").read_bytes() == (b / "assignments.parquet").read_bytes()
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()
    assert (a / "assignments.parquet").read_bytes() != (c / "assignments.parquet").read_bytes()


def test_mnist5k_split(tmp_path):
    data = tmp_path / "mnist5k.parquet"
    prepare_dataset("mnist5k", {"loader": "mnist5k", "test_fraction": 0.2, "data_root": "data", "download": False}, data)
    manifest = make_split(data, OCFL["nonoverlap-imbalanced"], 15, 0, tmp_path / "s")
    assert manifest["clients_per_cluster"] == [3, 7, 5] and manifest["orchestrator_size"] == 1000
    assert manifest["samples_per_client"] == 4000 // 15
    distinct = np.asarray(manifest["n_train"]) + np.asarray(manifest["n_test"])
    # with-replacement draws: duplicates dropped, so fewer distinct samples than draws, but most of them
    assert (distinct < 266).all() and (distinct > 150).all()
    summary = split_summary(tmp_path / "s")
    assert summary["clients"].tolist() == [3, 7, 5]


# ----------------------------------------------------------------------------- summary
def test_split_summary_matches_manifest(digits, tmp_path):
    manifest = make_split(digits, FAMILIES["domains"], 9, 0, tmp_path)
    df = split_summary(tmp_path)
    assert df["clients"].tolist() == manifest["clients_per_cluster"]
    sizes = np.asarray(manifest["n_train"]) + np.asarray(manifest["n_test"])
    cluster = np.asarray(manifest["cluster_of_client"])
    for c in range(3):
        assert df.loc[c, "samples_min"] == sizes[cluster == c].min()
        assert df.loc[c, "samples_max"] == sizes[cluster == c].max()
        assert np.isclose(df.loc[c, "samples_mean"], sizes[cluster == c].mean())
    assert df["domain"].tolist() == ["clean", "noise", "blur"]
    assert df.attrs["orchestrator_size"] == manifest["orchestrator_size"]
