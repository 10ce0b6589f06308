"""Bad input to datasets and splits: one-line CflErrors naming the field or path, and no partial output."""
from __future__ import annotations

from pathlib import Path

import pytest

from cflcore.data import SPLIT_GENERATORS, make_split, prepare_dataset
from cflcore.errors import CflError, ConfigError, DataError


def assert_fails(exc: type[CflError], match: str, dataset: Path, settings: dict, out: Path, n_clients: int = 15,
                 field: str = "splits.s") -> str:
    """The call raises ``exc`` with a one-line message containing ``match`` and writes nothing."""
    with pytest.raises(exc) as err:
        make_split(dataset, settings, n_clients, 0, out, field=field)
    msg = str(err.value)
    assert "\n" not in msg
    assert match in msg, msg
    assert not out.exists()
    return msg


def test_unknown_generator(digits, tmp_path):
    msg = assert_fails(ConfigError, "splits.s.generator: unknown split generator 'iid'", digits,
                       {"generator": "iid"}, tmp_path / "o")
    from cflcore.data.splits import SPLIT_GENERATORS

    assert "known: " + ", ".join(sorted(SPLIT_GENERATORS)) in msg
    assert_fails(ConfigError, "splits.s.generator: missing", digits, {"overlap": True}, tmp_path / "o")


def test_too_few_clients_for_the_clusters(digits, tmp_path):
    sets = [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert_fails(ConfigError, "clients: 3 is too few for splits.s (4 clusters); minimum 4", digits,
                 {"generator": "ocfl", "class_sets": sets}, tmp_path / "o", n_clients=3)
    assert_fails(ConfigError, "clients: 2 is not allowed", digits, {"generator": "ocfl"}, tmp_path / "o", n_clients=2)
    assert_fails(ConfigError, "minimum 4", digits,
                 {"generator": "dirichlet-mix", "cluster_shares": [0.25] * 4, "alphas": [1, 1, 1, 0]},
                 tmp_path / "o", n_clients=3)


def test_class_set_naming_a_missing_class(digits, tmp_path):
    msg = assert_fails(ConfigError, "splits.s.class_sets: class 12 is not in dataset digits", digits,
                       {"generator": "ocfl", "class_sets": [[0, 1], [2, 12], [3]]}, tmp_path / "o")
    assert "0..9" in msg
    assert_fails(ConfigError, "splits.s.class_sets: class 10", digits,
                 {"generator": "majority", "class_sets": [[0, 1], [10]]}, tmp_path / "o")


@pytest.mark.parametrize("settings,field", [
    ({"generator": "ocfl", "imbalanced": True, "alpha": 0}, "splits.s.alpha"),
    ({"generator": "ocfl", "imbalanced": True, "alpha": -1.5}, "splits.s.alpha"),
    ({"generator": "domains", "alpha": 0.0}, "splits.s.alpha"),
    ({"generator": "dirichlet-mix", "alphas": [1, -0.1, 0], "cluster_shares": [1, 1, 1]}, "splits.s.alphas.1"),
    ({"generator": "dirichlet-mix", "alphas": [1, 0], "cluster_shares": [1, 1, 1]}, "splits.s.alphas"),
    ({"generator": "dirichlet-mix", "cluster_shares": [0.5, 0, 0.5]}, "splits.s.cluster_shares.1"),
])
def test_bad_concentrations(digits, tmp_path, settings, field):
    assert_fails(ConfigError, field, digits, settings, tmp_path / "o")


@pytest.mark.parametrize("value", [0, -3, 1, 2, 9, 2.5, "ten"])
def test_bad_sample_count(digits, tmp_path, value):
    assert_fails(ConfigError, "splits.s.samples_per_client", digits,
                 {"generator": "ocfl", "samples_per_client": value}, tmp_path / "o")


@pytest.mark.parametrize("settings,match", [
    ({"generator": "ocfl", "overlapping": True}, "splits.s: unknown key 'overlapping' for generator ocfl"),
    ({"generator": "majority", "alpha": 1.0}, "unknown key 'alpha'"),
    ({"generator": "ocfl", "overlap": "yes"}, "splits.s.overlap: 'yes' is not of type 'boolean'"),
    ({"generator": "ocfl", "local_test_fraction": 1.0}, "splits.s.local_test_fraction"),
    ({"generator": "majority", "majority_share": 1.2}, "splits.s.majority_share"),
    ({"generator": "majority", "class_sets": [[0, 1], [1, 2]]}, "must be disjoint"),
    ({"generator": "domains", "domains": ["clean", "fog"], "cluster_shares": [1, 1]}, "splits.s.domains"),
    ({"generator": "domains", "domains": ["clean", "noise"]}, "splits.s.domains: 2 entries"),
    ({"generator": "ocfl", "class_sets": [[0, 0], [1]]}, "splits.s.class_sets"),
    ({"generator": "ocfl", "imbalanced": True, "class_sets": [[0], [1]]}, "splits.s.cluster_shares: required"),
])
def test_bad_params_named(digits, tmp_path, settings, match):
    assert_fails(ConfigError, match, digits, settings, tmp_path / "o")


def test_validate_params_is_what_config_validation_calls():
    gen = SPLIT_GENERATORS.get("ocfl")
    gen.validate_params({"generator": "ocfl", "overlap": True, "imbalanced": True, "alpha": 1.0,
                      "samples_per_client": None, "local_test_fraction": 0.3}, field="splits.x")
    with pytest.raises(ConfigError, match="splits.x.alpha"):
        gen.validate_params({"generator": "ocfl", "alpha": 0}, field="splits.x")


def test_corrupt_or_missing_dataset(tmp_path):
    bad = tmp_path / "digits.parquet"
    bad.write_bytes(b"PAR1\x00\x01garbage")
    assert_fails(DataError, "digits.parquet: corrupt Parquet file", bad, {"generator": "ocfl"}, tmp_path / "o")
    assert_fails(DataError, "file not found", tmp_path / "none.parquet", {"generator": "ocfl"}, tmp_path / "o")


def test_truncated_dataset(digits, tmp_path):
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(digits.read_bytes()[:4000])
    assert_fails(DataError, "cut.parquet", cut, {"generator": "ocfl"}, tmp_path / "o")


def test_failed_split_leaves_existing_outputs_untouched(digits, tmp_path):
    out = tmp_path / "o"
    make_split(digits, {"generator": "ocfl"}, 6, 0, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ConfigError):
        make_split(digits, {"generator": "ocfl", "alpha": -1}, 6, 1, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# ----------------------------------------------------------------------------- dataset settings
@pytest.mark.parametrize("settings,exc,match", [
    ({"loader": "emnist"}, ConfigError, "loader: unknown dataset 'emnist'"),
    ({"loader": "digits", "test_fraction": 1.5}, ConfigError, "test_fraction: 1.5 is not allowed"),
    ({"loader": "digits", "max_train": 0}, ConfigError, "max_train: 0 is not allowed"),
    ({"loader": "digits", "max_train": 5}, ConfigError, "max_train: 5 is too small"),
    ({"loader": "digits", "colour": True}, ConfigError, "unknown key 'colour'"),
    ({"loader": "pathmnist"}, DataError, "pathmnist.npz with keys train_images"),
])
def test_bad_dataset_settings(tmp_path, settings, exc, match):
    out = tmp_path / "d.parquet"
    with pytest.raises(exc) as err:
        prepare_dataset(settings["loader"], {"data_root": str(tmp_path), "download": False, **settings}, out)
    assert match in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()
