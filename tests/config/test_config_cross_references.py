"""A config that names what the study does not have, or asks what its data cannot give, is refused before any job
(cflcore/config_checks.py), with one line naming the field, the value and what is allowed.

:data:`CROSS_FIELD_CASES` lists each class of cross-field case, as an override of config/tiny.yaml (digits: 10
classes, 1,437 train images, 6 clients) and the refusal's start; :data:`ACCEPTED` the same fields at the edge of
what is allowed. tests/config/test_config_fuzz.py generates cases of every class (``CROSS_FIELD_CLASSES``); two of
them, the issue's examples, go through a real ``snakemake -n``."""
from __future__ import annotations

import ast
import copy
import re
import subprocess
from pathlib import Path

import pytest
import yaml

import cflcore.config as cc
from cflcore.errors import ConfigError
from cflcore.paper_sources import CLAIM_DECORATOR, PAPER_FOLDER, declared_claims
from conftest import REPO, snakemake_cmd

CONFIG_DIR = Path(REPO) / "config"
TINY = cc.read_config_file(CONFIG_DIR / "tiny.yaml")
DEFAULT = cc.read_config_file(CONFIG_DIR / "config.yaml")


def layered(override: dict, base: dict = TINY) -> dict:
    return cc.deep_update(copy.deepcopy(base), copy.deepcopy(override))


def refusal(cfg: dict, tmp_path: Path) -> str:
    cfg = {**cfg, "results_dir": str(tmp_path / "results")}  # no dataset prepared there (it would need no files)
    with pytest.raises(ConfigError) as err:
        cc.validate_config_cached(cfg, tmp_path / "cache")
    assert "\n" not in str(err.value)
    return str(err.value)


ROTATION_4 = {"generator": "rotation", "angles": [0, 90, 180, 270]}
NODATA = "/nonexistent/cfl-data"

CROSS_FIELD_CASES: dict[str, tuple[dict, str]] = {
    # names that point at nothing
    "claim-id-no-paper-defines": (
        {"report": {"paper_checks": ["002"], "claims_not_carried": {"002-superclas": "typo"}}},
        "report.claims_not_carried: '002-superclas' is not a claim of the study's paper checks (no paper check "
        "defines it; report.paper_checks: ['002']); allowed: 002-ari-mk, "),
    "claim-of-a-paper-not-checked": (
        {"report": {"claims_not_carried": {"002-superclass": "MNIST has none"}}},
        "report.claims_not_carried: '002-superclass' is not a claim of the study's paper checks (a claim of 002, "
        "whose check the study does not run; report.paper_checks: []); allowed: none until report.paper_checks names"),
    "claim-note-id-no-paper-defines": (
        {"report": {"paper_checks": ["004"], "claim_notes": {"004-domain": "typo"}}},
        "report.claim_notes: '004-domain' is not a claim of the study's paper checks"),
    "seed-stages-of-no-claim": (
        {"report": {"paper_checks": ["home"], "seed_stages": {"home-ifca-rotation": [2, 4]}}},
        "report.seed_stages: 'home-ifca-rotation' is not a claim of the study's paper checks (no paper check defines "
        "it; report.paper_checks: ['home']); allowed: home-ifca-rotations, "),
    "seed-stages-beyond-the-seeds": (
        {"report": {"paper_checks": ["home"], "seed_stages": {"home-ifca-rotations": [2, 6]}},
         "study": {"seeds": [0, 1, 2, 3]}},
        "report.seed_stages.home-ifca-rotations: [2, 6] with 4 study seeds; allowed: [n1, 4] with 2 <= n1 < 4 (the "
        "first n1 of study.seeds, then all of them)"),
    "seed-stages-not-growing": (
        {"report": {"paper_checks": ["home"], "seed_stages": {"home-ifca-rotations": [4, 4]}},
         "study": {"seeds": [0, 1, 2, 3]}},
        "report.seed_stages.home-ifca-rotations: [4, 4] with 4 study seeds; allowed: [n1, 4] with 2 <= n1 < 4"),
    "seed-stages-three-looks": (
        {"report": {"paper_checks": ["home"], "seed_stages": {"home-ifca-rotations": [2, 3, 4]}},
         "study": {"seeds": [0, 1, 2, 3]}},
        "report.seed_stages.home-ifca-rotations: [2, 3, 4] with 4 study seeds; allowed: [n1, 4] with 2 <= n1 < 4"),
    "seed-stages-first-look-of-one-seed": (
        {"report": {"paper_checks": ["home"], "seed_stages": {"home-ifca-rotations": [1, 4]}},
         "study": {"seeds": [0, 1, 2, 3]}},
        "report.seed_stages.home-ifca-rotations: [1, 4] with 4 study seeds; allowed: [n1, 4] with 2 <= n1 < 4"),
    "paper-check-no-module-declares": (
        {"report": {"paper_checks": ["003"]}},
        "report.paper_checks[0]: unknown paper '003'; known: 000, 002, 004, dynamics, heterogeneity, home"),
    "cross-paper-home-no-paper-declares": (
        {"report": {"cross_paper": {"settings": {"nonoverlap-balanced": {"home": "003"}}}}},
        "report.cross_paper.settings.nonoverlap-balanced.home: unknown home '003'; allowed: 000, 002, 004, ifca, "
        "leahcimali, scl"),
    "role-of-a-paper-not-checked": (
        {"report": {"roles": {"heterogeneity": {"fedavg": "bnc"}}}},
        "report.roles: 'heterogeneity' is not a paper the study checks; allowed: none until report.paper_checks names one"),
    "role-the-paper-does-not-declare": (
        {"report": {"paper_checks": ["heterogeneity"], "roles": {"heterogeneity": {"fedavgm": "bnc"}}}},
        "report.roles.heterogeneity: unknown role 'fedavgm'; allowed: fedavg, ifca, label_swap, quantity_skew, "
        "rotated_half, rotation_groups, scl"),
    "role-names-no-run-of-its-kind": (
        {"report": {"paper_checks": ["heterogeneity"], "roles": {"heterogeneity": {"rotation_groups": "bnc"}}}},
        "report.roles.heterogeneity.rotation_groups: 'bnc' is not a split of the study; allowed: nonoverlap-balanced"),
    "cross-paper-setting-not-a-split": (
        {"report": {"cross_paper": {"settings": {"rotation": {"home": "000"}}}}},
        "report.cross_paper.settings: 'rotation' is not a split of the study, so its column would be empty; "
        "allowed: nonoverlap-balanced (study.splits)"),
    "grid-client-in-no-run": (
        {"explain": {"enabled": True, "grid_clients": [1, 3, 6]}},
        "explain.grid_clients[2]: client 6 is in no explained run (their client counts: 6), so the grid draws nothing "
        "for it; allowed: client indices 0..5"),
    # requests the data cannot fill
    "groups-without-a-client": (
        {"splits": {"rot": ROTATION_4}, "study": {"splits": ["rot"], "clients": [3]}},
        "study.clients: 3 clients are too few for the 4 groups of splits.rot.angles, so a group would have no client; "
        "allowed: at least 4 clients"),
    "groups-without-a-client-of-the-splits-own-count": (
        {"splits": {"mix": {"generator": "dirichlet-mix", "cluster_shares": [0.25] * 4, "alphas": [1.0] * 4,
                            "clients": [6, 3]}}, "study": {"splits": ["mix"]}},
        "splits.mix.clients: 3 clients are too few for the 4 groups of splits.mix.alphas"),
    "label-outside-the-classes": (
        {"splits": {"swap": {"generator": "label-swap", "swaps": [[1, 7], [3, 10]]}}, "study": {"splits": ["swap"]}},
        "splits.swap.swaps[1]: class 10 is not a class of loader digits (10 classes); allowed: class indices 0..9"),
    "class-set-outside-the-classes": (
        {"splits": {"nonoverlap-balanced": {"class_sets": [[0, 1], [2, 3], [4, 12]]}}},
        "splits.nonoverlap-balanced.class_sets[2]: class 12 is not a class of loader digits (10 classes)"),
    "no-default-class-sets-for-the-classes": (
        {"download": True, "data_root": NODATA, "datasets": {"digits": {"loader": "cifar100"}}},
        "splits.nonoverlap-balanced.class_sets: null has no default class sets for loader cifar100 (100 classes)"),
    "no-default-class-grouping-for-the-classes": (
        {"download": True, "data_root": NODATA, "datasets": {"digits": {"loader": "cifar100"}},
         "splits": {"maj": {"generator": "majority"}}, "study": {"splits": ["maj"]}},
        "splits.maj.class_sets: null has no default class grouping for loader cifar100 (100 classes)"),
    "share-beyond-the-train-part": (
        {"splits": {"nonoverlap-balanced": {"samples_per_client": 1438}}},
        "splits.nonoverlap-balanced.samples_per_client: 1438 draws per client from the 1437 train samples"),
    "disjoint-draws-beyond-the-train-part": (
        {"splits": {"nonoverlap-balanced": {"samples_per_client": 240, "replace": False}}},
        "splits.nonoverlap-balanced.replace: false: 6 clients × 240 draws need 1440 distinct images, dataset digits has "
        "1437 train samples; allowed: at most 239 samples_per_client with 6 clients, or replace: true"),
    "clients-beyond-the-data": (
        {"study": {"clients": [144]}}, "study.clients: 144 clients on dataset digits (split nonoverlap-balanced) get 9"),
    "data-neither-on-disk-nor-downloadable": (
        {"data_root": NODATA, "datasets": {"digits": {"loader": "mnist"}}},
        f"datasets.digits.loader: 'mnist' has no files at {NODATA}/MNIST/raw/{{train-images-idx3-ubyte.gz, "
        "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz} and download is false; "
        "allowed: download: true, or its files placed there"),
    "data-a-loader-cannot-download": (
        {"download": True, "data_root": NODATA, "datasets": {"digits": {"loader": "femnist"}},
         "splits": {"nonoverlap-balanced": {"class_sets": [[0, 1], [2, 3], [4, 5]]}}},
        f"datasets.digits.loader: 'femnist' has no files at {NODATA}/femnist/data/{{train,test}}/*.json and download "
        "is true; allowed: its files placed there (this loader cannot download)"),
}

ACCEPTED: dict[str, dict] = {
    "role-names-no-run-of-its-kind": {"report": {"paper_checks": ["heterogeneity"], "roles": {"heterogeneity": {
        "rotation_groups": "nonoverlap-balanced", "fedavg": "bnc"}}}},
    "claim-id-no-paper-defines": {"report": {"paper_checks": ["002"], "claims_not_carried": {"002-superclass": "x"},
                                             "claim_notes": {"002-ari-mk": "y"}}},
    "cross-paper-setting-not-a-split": {"report": {"cross_paper": {"settings": {"nonoverlap-balanced": {"home": "000"}}}}},
    "seed-stages-beyond-the-seeds": {"report": {"paper_checks": ["home"], "seed_stages": {"home-ifca-rotations": [2, 4]}},
                                     "study": {"seeds": [0, 1, 2, 3]}},
    "groups-without-a-client": {"splits": {"rot": ROTATION_4}, "study": {"splits": ["rot"], "clients": [4]},
                                "explain": {"grid_clients": [1, 3]}},  # tiny's [1, 3, 5]: client 5 is in no run
    "grid-client-in-no-run": {"explain": {"enabled": True, "grid_clients": [1, 3, 5]}},
    "label-outside-the-classes": {"splits": {"swap": {"generator": "label-swap", "swaps": [[1, 7], [3, 9]]}},
                                  "study": {"splits": ["swap"]}},
    "class-set-outside-the-classes": {"splits": {"nonoverlap-balanced": {"class_sets": [[0, 1], [2, 3], [4, 9]]}}},
    "disjoint-draws-beyond-the-train-part": {"splits": {"nonoverlap-balanced": {"samples_per_client": 239,
                                                                                "replace": False}}},
    "data-neither-on-disk-nor-downloadable": {"data_root": NODATA, "download": True, "datasets": {"digits": {"loader": "mnist"}}},
}


def test_the_cases_cover_each_cross_field_class():
    """The classes of cross-field case the checks refuse, and the fuzzer generates, one by one."""
    from test_config_fuzz import CROSS_FIELD_CLASSES

    assert set(CROSS_FIELD_CLASSES) <= set(CROSS_FIELD_CASES)
    assert sorted(CROSS_FIELD_CLASSES) == sorted([
        "claim-id-no-paper-defines", "claim-of-a-paper-not-checked", "cross-paper-setting-not-a-split",
        "grid-client-in-no-run",
        "groups-without-a-client", "label-outside-the-classes", "share-beyond-the-train-part",
        "clients-beyond-the-data", "disjoint-draws-beyond-the-train-part", "data-neither-on-disk-nor-downloadable"])


@pytest.mark.parametrize("name", list(CROSS_FIELD_CASES))
def test_each_cross_field_case_is_refused_in_one_line(tmp_path, name):
    override, expected = CROSS_FIELD_CASES[name]
    assert refusal(layered(override), tmp_path).startswith(expected)


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_the_same_fields_within_what_is_allowed_are_accepted(tmp_path, name):
    assert cc.study_runs(cc.validate_config_cached(layered(ACCEPTED[name]), tmp_path / "cache"))


def test_a_swept_split_is_named_by_its_sweep(tmp_path):
    cfg = layered({"splits": {"rot": {**ROTATION_4, "sweep": {"alpha": [0.5, 1.0]}}},
                   "study": {"splits": ["rot"], "clients": [3]}})
    assert "groups of splits.rot.sweep{alpha=0.5}.angles" in refusal(cfg, tmp_path)


def test_declared_claim_ids_are_the_ids_the_claims_write():
    """``@claim(paper, claim_id)`` is read from source (cflcore.paper_sources.declared_claims); every claim-id literal in a
    claim function's body is its declared id, and the registered functions carry the same ids."""
    from cflcore.report.papers.base import CLAIMS, PAPERS

    PAPERS.names()  # imports every paper module: their claims register
    assert {p: [fn.claim_id for fn in fns] for p, fns in CLAIMS.items()} == {p: list(i) for p, i in declared_claims().items()}
    pattern = re.compile(r"^(?:\d{3}|het|home|dyn)-[a-z0-9-]+$")
    for path in PAPER_FOLDER.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            ids = [d.args[1].value for d in getattr(node, "decorator_list", []) if isinstance(d, ast.Call)
                   and getattr(d.func, "id", "") == CLAIM_DECORATOR]
            if ids:
                literals = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                            and pattern.match(n.value)}
                assert literals == set(ids), (path.name, node.name, literals, ids)


# ---------------------------------------------------------------------------------------------- snakemake -n
ISSUE_EXAMPLES = {  # over config/config.yaml, as a user's --configfile
    "claim-id-no-paper-defines": ({"report": {"claims_not_carried": {"002-superclas": "typo"}}},
                                  "report.claims_not_carried: '002-superclas' is not a claim of the study's paper checks"),
    "rotation-4-angles-3-clients": ({"splits": {"rot": ROTATION_4},
                                     "study": {"splits": ["nonoverlap-balanced", "rot"], "clients": [3]}},
                                    "study.clients: 3 clients are too few for the 4 groups of splits.rot.angles"),
}


@pytest.mark.parametrize("name", list(ISSUE_EXAMPLES))
def test_snakemake_dry_run_refuses_the_issue_examples_in_one_line(workflow_dir, name):
    override, expected = ISSUE_EXAMPLES[name]
    (Path(workflow_dir) / "override.yaml").write_text(yaml.safe_dump(override))
    p = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", "override.yaml"), cwd=workflow_dir,
                       capture_output=True, text=True, timeout=180)
    out = p.stdout + p.stderr
    lines = [line for line in out.splitlines() if line.startswith("config error:")]
    assert p.returncode != 0 and len(lines) == 1 and expected in lines[0], out
    assert "Traceback" not in out


def test_missing_data_is_refused_by_a_run_and_told_by_a_dry_run(workflow_dir):
    """rules/common.smk tells validation whether Snakemake plans only (``-n``: Snakemake's output settings, set at
    parse time): a run whose dataset is neither on disk nor downloadable is refused before any job, a dry run plans
    with one warning line per dataset."""
    override = {"data_root": NODATA, "datasets": {"mnist5k": {"loader": "mnist"}}}
    (Path(workflow_dir) / "override.yaml").write_text(yaml.safe_dump(override))
    expected = "datasets.mnist5k.loader: 'mnist' has no files at"
    dry = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", "override.yaml"), cwd=workflow_dir,
                         capture_output=True, text=True, timeout=180)
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out
    assert [line for line in out.splitlines() if line.startswith("config warning:") and expected in line], out
    run = subprocess.run(snakemake_cmd("--cores", "1", "--until", "prepare_dataset", "--configfile", "override.yaml"),
                         cwd=workflow_dir, capture_output=True, text=True, timeout=180)
    out = run.stdout + run.stderr
    lines = [line for line in out.splitlines() if line.startswith("config error:")]
    assert run.returncode != 0 and len(lines) == 1 and expected in lines[0], out
    assert "Traceback" not in out and not (Path(workflow_dir) / "results").exists()


def test_a_batch_above_a_clients_local_share_is_told_not_refused(tmp_path, caplog):
    """IFCA's authors' recipe trains full-batch: a batch above a client's local train samples runs as asked (every step
    takes its whole train part), so validation says so once per setting, not per seed, and accepts it."""
    import logging

    cfg = layered({"splits": {"nonoverlap-balanced": {"samples_per_client": 45}}, "study": {"seeds": [0, 1, 2]}})
    with caplog.at_level(logging.WARNING, logger="cflcore.config_checks"):
        cc.validate_config_cached({**cfg, "results_dir": str(tmp_path / "results")}, tmp_path / "cache")
    told = [r.getMessage() for r in caplog.records if "batch_size" in r.getMessage()]
    assert told == ["config warning: datasets.digits.batch_size: 32 is more than the 31 local train samples a client "
                    "holds at most on split nonoverlap-balanced with 6 clients (45 draws, less the local test part): "
                    "every local step takes the client's whole train part (full-batch, as IFCA's authors' recipe "
                    "does)"], told
