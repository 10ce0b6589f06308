"""Configs a run cannot honour are refused at validation, before any job: cross-field checks
(cflcore.config.validate._check_study), the machine's (cflcore.config.check_feasible) and the loaders' size queries
(cflcore.data.loaders.train_size) they ask instead of loading a dataset.

Every case goes through the path Snakemake takes (rules/common.smk: the merged config into
cflcore.config.validate_config_cached), and two through a real ``snakemake -n``."""
from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

import cflcore.config as cc
import cflcore.layout as lay
from cflcore.data import DATASETS
from cflcore.data.loaders import facts_queries, load_raw, source_facts, train_size
from cflcore.data.loaders.medmnist import MEDMNIST_CLASSES
from cflcore.data.loaders.offline import DIGITS_ROWS, MNIST5K_ROWS
from cflcore.errors import ConfigError
from conftest import REPO, snakemake_cmd
from test_data_loaders import write_cifar_folder, write_idx_folder, write_medmnist

CONFIG_DIR = Path(REPO) / "config"
DEFAULT = cc.read_config_file(CONFIG_DIR / "config.yaml")
TINY = cc.read_config_file(CONFIG_DIR / "tiny.yaml")


def layered(*overrides: dict, base: dict = DEFAULT) -> dict:
    """``base`` with ``overrides`` deep-merged, as ``--configfile`` merges them over config/config.yaml."""
    cfg = copy.deepcopy(base)
    for o in overrides:
        cc.deep_update(cfg, o)
    return cfg


def refused(cfg: dict, tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        cc.validate_config_cached(cfg, tmp_path / "cache")
    message = str(err.value)
    assert "\n" not in message
    return message


# Four configs a run cannot honour (more clients than the data holds, a results_dir it cannot write, no algorithm,
# cluster shares that do not sum to 1), each as a --configfile override of the default config.
INFEASIBLE_CASES = {
    "clients-beyond-the-data": ({"study": {"clients": [100000]}}, "study.clients: 100000 clients"),
    "unwritable-results-dir": ({"results_dir": "/proc/self"}, "results_dir: '/proc/self'"),
    "empty-algorithm-list": ({"study": {"algorithms": []}}, "study.algorithms: []"),
    "shares-summing-to-0.7": ({"splits": {"mix": {"generator": "dirichlet-mix", "cluster_shares": [0.3, 0.2, 0.2],
                                                  "alphas": [1000.0, 0.05, 0.0]}},
                               "study": {"splits": ["mix", "nonoverlap-balanced"]}},
                              "splits.mix.cluster_shares: [0.3, 0.2, 0.2] sums to 0.7"),
}


@pytest.mark.parametrize("name", list(INFEASIBLE_CASES))
def test_infeasible_configs_are_refused_naming_the_field(tmp_path, name):
    override, expected = INFEASIBLE_CASES[name]
    assert expected in refused(layered(override), tmp_path)


@pytest.mark.parametrize("name", ["clients-beyond-the-data", "unwritable-results-dir"])
def test_snakemake_dry_run_refuses_with_one_config_error_line(tmp_path, workflow_dir, name):
    override, expected = INFEASIBLE_CASES[name]
    (Path(workflow_dir) / "override.yaml").write_text(yaml.safe_dump(override))
    p = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", "override.yaml"), cwd=workflow_dir,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    lines = [line for line in (p.stdout + p.stderr).splitlines() if line.startswith("config error:")]
    assert len(lines) == 1 and expected in lines[0], p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert not (Path(workflow_dir) / "results").exists()


@pytest.mark.parametrize("layers", [["config.yaml"]] + [
    ["config.yaml", f.name] for f in sorted(CONFIG_DIR.glob("*.yaml")) if f.name not in ("config.yaml", "schema.yaml")])
def test_every_shipped_config_validates_layered_as_the_readme_says(tmp_path, layers):
    # as `snakemake -n` validates it (a dry run): the paper-scale studies read data this machine need not have
    cfg: dict = {}
    for name in layers:
        cc.deep_update(cfg, cc.read_config_file(CONFIG_DIR / name))
    assert cc.study_runs(cc.validate_config_cached(cfg, tmp_path / "cache", dry_run=True))


def test_tiny_validates_alone(tmp_path):
    assert cc.study_runs(cc.validate_config_cached(TINY, tmp_path / "cache"))


# ---------------------------------------------------------------------------------------------- clients vs the data
def test_clients_are_weighed_against_the_capped_train_part(tmp_path):
    # digits: 1797 images, 20 % held out -> 1437 train; max_train 300 -> 300 // 10 = at most 30 clients, each with 7
    # local train samples at most (10 draws less the 30 % local test part): a batch of at most 7
    assert cc.study_runs(cc.validate_config_cached(layered({"datasets": {"digits": {"max_train": 300, "batch_size": 7}},
                                                            "study": {"clients": [30]}}, base=TINY), tmp_path))
    msg = refused(layered({"datasets": {"digits": {"max_train": 300}}, "study": {"clients": [31]}}, base=TINY), tmp_path)
    assert msg.startswith("study.clients: 31 clients on dataset digits") and "at most 30 clients" in msg
    # a larger orchestrator share leaves fewer train samples: 1797 - ceil(0.9 * 1797) = 179 -> 17 clients
    msg = refused(layered({"datasets": {"digits": {"test_fraction": 0.9}}, "study": {"clients": [18]}}, base=TINY),
                  tmp_path)
    assert "get 9 of its 179 train samples" in msg and "at most 17 clients" in msg


def test_more_draws_per_client_than_train_samples_are_refused(tmp_path):
    # found by tests/config/test_config_fuzz.py: samples_per_client 10**9 was accepted and the split job exhausted memory
    split = {"generator": "ocfl", "samples_per_client": 1438}
    msg = refused(layered({"splits": {"nonoverlap-balanced": split}}, base=TINY), tmp_path)
    assert msg.startswith("splits.nonoverlap-balanced.samples_per_client: 1438 draws per client from the 1437 train")
    cc.validate_config_cached(layered({"splits": {"nonoverlap-balanced": {**split, "samples_per_client": 1437}}},
                                      base=TINY), tmp_path / "cache")


def test_a_split_with_its_own_clients_is_named(tmp_path):
    cfg = layered({"splits": {"nonoverlap-balanced": {"clients": [6, 500]}}}, base=TINY)
    assert refused(cfg, tmp_path).startswith("splits.nonoverlap-balanced.clients: 500 clients on dataset digits")


def test_source_facts_match_what_the_loaders_load(tmp_path):
    for loader, rows in (("mnist5k", MNIST5K_ROWS), ("digits", DIGITS_ROWS)):
        raw = load_raw(loader, {"loader": loader})
        assert len(raw.labels) == rows  # the constants are the files' rows
        facts = source_facts({"loader": loader})
        assert facts.classes == len(raw.classes) and facts.on_disk
        for tf, cap in ((0.2, None), (0.37, None), (0.2, 111)):
            s = {"loader": loader, "test_fraction": tf, "max_train": cap}
            assert train_size(s) == int(np.sum(load_raw(loader, s).part == "train"))
    rng = np.random.default_rng(0)
    write_idx_folder(tmp_path / "MNIST" / "raw", rng, n_train=23, gz=True)
    write_idx_folder(tmp_path / "FashionMNIST" / "raw", rng, n_train=17, gz=False)
    write_medmnist(tmp_path / "bloodmnist.npz", rng, 8)
    write_cifar_folder(tmp_path, rng, per_batch=4)
    for loader in ("mnist", "fmnist", "bloodmnist"):
        s = {"loader": loader, "data_root": str(tmp_path)}
        raw = load_raw(loader, s)
        assert train_size(s) == int(np.sum(raw.part == "train")), loader
        facts = source_facts(s)
        assert facts.on_disk and facts.downloadable and facts.classes == len(raw.classes), loader
    s = {"loader": "cifar10", "data_root": str(tmp_path)}
    assert train_size(s) >= int(np.sum(load_raw("cifar10", s).part == "train")) == 20  # CIFAR's: an upper bound
    assert source_facts(s).classes == len(load_raw("cifar10", s).classes) and source_facts(s).on_disk
    none = {"loader": "pathmnist", "data_root": str(tmp_path / "none")}
    assert train_size(none) is None and not source_facts(none).on_disk  # not there: size unknown, not on disk


def test_every_loader_declares_its_facts():
    # FEMNIST's size is in its JSON only (LEAF's sampling decides it): unknown until the data job reads it
    assert set(DATASETS.names()) == set(facts_queries())
    femnist = source_facts({"loader": "femnist", "data_root": "/nonexistent"})
    assert femnist.train_images is None and not femnist.downloadable and femnist.classes == 62


def test_medmnist_class_counts_are_medmnists():
    medmnist = pytest.importorskip("medmnist")
    assert MEDMNIST_CLASSES == {flag: len(medmnist.INFO[flag]["label"]) for flag in MEDMNIST_CLASSES}


def test_data_not_yet_there_is_no_reason_to_refuse_its_size(tmp_path):
    cfg = layered({"data_root": str(tmp_path / "nodata"), "download": True, "datasets": {"digits": {"loader": "cifar10"}},
                   "study": {"clients": [5000]}}, base=TINY)
    cc.validate_config_cached(cfg, tmp_path / "cache")


def test_data_neither_on_disk_nor_downloadable_is_refused_before_a_run(tmp_path, caplog):
    prepared = tmp_path / "results"  # no dataset prepared there yet
    cfg = layered({"data_root": str(tmp_path / "nodata"), "results_dir": str(prepared),
                   "datasets": {"digits": {"loader": "cifar10"}}}, base=TINY)
    msg = refused(cfg, tmp_path)
    assert msg.startswith(f"datasets.digits.loader: 'cifar10' has no files at {tmp_path / 'nodata' / 'cifar-10-batches-py'}/"
                          "{data_batch_1, ")
    assert msg.endswith("batches.meta} and download is false; allowed: download: true, or its files placed there")
    # a dry run plans as asked: told, not refused
    assert cc.study_runs(cc.validate_config_cached(cfg, tmp_path / "cache", dry_run=True))
    assert "config warning: datasets.digits.loader: 'cifar10' has no files" in caplog.text
    femnist = layered({"data_root": str(tmp_path / "nodata"), "download": True, "results_dir": str(prepared),
                       "datasets": {"digits": {"loader": "femnist"}},
                       "splits": {"nonoverlap-balanced": {"class_sets": [[0, 1], [2, 3], [4, 5]]}}}, base=TINY)
    assert refused(femnist, tmp_path).endswith("allowed: its files placed there (this loader cannot download)")
    # a dataset already prepared needs no source files
    dataset = Path(lay.dataset_file(str(prepared), "digits"))
    dataset.parent.mkdir(parents=True)
    dataset.write_bytes(b"")
    cc.validate_config_cached(cfg, tmp_path / "cache")


@pytest.mark.parametrize("override,expected", [
    ({"splits": {"nonoverlap-balanced": {"participation": float("nan")}}},
     "splits.nonoverlap-balanced.participation: nan is not allowed; allowed: a finite number"),
    ({"datasets": {"digits": {"lr": float("inf")}}}, "datasets.digits.lr: inf is not allowed"),
    ({"study": {"clients": [6, float("-inf")]}}, "study.clients.1: -inf is not allowed"),
])
def test_nan_and_infinity_are_refused(tmp_path, override, expected):
    # found by tests/config/test_config_fuzz.py: NaN passes every JSON-schema bound, and participation .nan crashed validation
    assert refused(layered(override, base=TINY), tmp_path).startswith(expected)


# ---------------------------------------------------------------------------------------------- shares
def test_shares_within_float_tolerance_are_accepted_and_others_refused(tmp_path):
    ok = {"generator": "ocfl", "imbalanced": True, "cluster_shares": [0.2, 0.47, 0.33]}  # sums to 0.9999999999999999
    cc.validate_config_cached(layered({"splits": {"nonoverlap-balanced": ok}}, base=TINY), tmp_path)
    bad = {**ok, "cluster_shares": [1, 1, 1]}
    assert "splits.nonoverlap-balanced.cluster_shares: [1, 1, 1] sums to 3" in refused(
        layered({"splits": {"nonoverlap-balanced": bad}}, base=TINY), tmp_path)
    domains = {"generator": "domains", "cluster_shares": [0.5, 0.3, 0.3]}
    assert "splits.dom.cluster_shares: [0.5, 0.3, 0.3] sums to 1.1" in refused(
        layered({"splits": {"dom": domains}, "study": {"splits": ["dom"]}}, base=TINY), tmp_path)


# ---------------------------------------------------------------------------------------------- the grid
@pytest.mark.parametrize("override,expected", [
    ({"algorithms": {"bnc": {"splits": ["overlap-balanced"]}}, "splits": {"overlap-balanced": {"generator": "ocfl"}}},
     "algorithms.bnc.splits: ['overlap-balanced'] names no split of the study"),
    ({"datasets": {"digits": {"splits": ["overlap-balanced"]}}, "splits": {"overlap-balanced": {"generator": "ocfl"}}},
     "datasets.digits.splits: ['overlap-balanced'] names no split of the study"),
    ({"whatif": {"algorithms": ["bnc", "louvain"]}, "algorithms": {"louvain": {"method": "louvain"}}},
     "whatif.algorithms[1]: 'louvain' is not a variant of the study"),
    ({"study": {"explain": {"clients": [12]}}}, "study.explain.clients[0]: 12 is not a client count of the study"),
    ({"study": {"explain": {"clients": []}}}, "study.explain.clients: [] should be non-empty"),
])
def test_study_entries_that_would_run_nowhere_are_refused(tmp_path, override, expected):
    assert expected in refused(layered(override, base=TINY), tmp_path)


def test_a_variant_restricted_to_some_of_the_studys_splits_is_accepted(tmp_path):
    # config/tiny.yaml over config/config.yaml: ocfl-hdb-late (not in tiny's study) lists two splits, and a variant of
    # the study may name a split the study leaves out beside one it runs
    cfg = layered({"algorithms": {"bnc": {"splits": ["nonoverlap-balanced", "overlap-imbalanced"]}}}, TINY)
    runs = cc.study_runs(cc.validate_config_cached(cfg, tmp_path / "cache"))
    assert ({"dataset": "digits", "split": "nonoverlap-balanced", "clients": 6, "seed": 0}, "bnc") in runs


# ---------------------------------------------------------------------------------------------- participation
@pytest.mark.parametrize("override,field", [
    ({"engine": {"participation": 0.05}}, "engine.participation: 0.05 samples no client of 6"),
    ({"splits": {"nonoverlap-balanced": {"participation": 0.08}}},
     "splits.nonoverlap-balanced.participation: 0.08 samples no client"),
    ({"algorithms": {"bnc": {"engine": {"participation": 0.01}}}}, "algorithms.bnc.engine.participation: 0.01"),
    ({"algorithms": {"bnc": {"sweep": {"engine.participation": [1.0, 0.02]}}}},
     "algorithms.bnc.sweep{engine.participation=0.02}.engine.participation: 0.02"),
])
def test_a_participation_that_samples_no_client_is_refused(tmp_path, override, field):
    msg = refused(layered(override, base=TINY), tmp_path)
    assert field in msg and "allowed: a participation above 0.08333 with 6 clients" in msg


def test_the_smallest_participation_that_samples_one_client_is_accepted(tmp_path):
    # the engine samples round(p * n) clients: round(0.09 * 6) = round(0.54) = 1
    cc.validate_config_cached(layered({"engine": {"participation": 0.09}}, base=TINY), tmp_path)


# ---------------------------------------------------------------------------------------------- results_dir
def test_results_dir_checks_create_nothing(tmp_path):
    target = tmp_path / "a" / "b" / "results"
    cc.validate_config_cached(layered({"results_dir": str(target)}, base=TINY), tmp_path / "cache")
    assert not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("x")
    msg = refused(layered({"results_dir": str(tmp_path / "file" / "results")}, base=TINY), tmp_path)
    assert msg.startswith(f"results_dir: '{tmp_path / 'file' / 'results'}' cannot be created") and "not a directory" in msg


def test_results_dir_is_checked_again_when_the_validation_is_remembered(tmp_path, monkeypatch):
    cfg = layered({"results_dir": str(tmp_path / "out")}, base=TINY)
    cc.validate_config_cached(cfg, tmp_path / "cache")
    monkeypatch.setattr("os.access", lambda *a, **k: False)
    assert "cannot be created in" in refused(cfg, tmp_path)
