"""Table-driven bad-input suite: bad config input fails before any job, in one line that names the field.

Each case runs the `cfl` command line in-process on a config derived from config/tiny.yaml and
asserts: a non-zero exit, exactly one error line naming the field or path, and no partial output."""
import copy
from pathlib import Path

import pytest
import yaml

from cflcore.cli import main
from conftest import REPO

TINY = yaml.safe_load((Path(REPO) / "config" / "tiny.yaml").read_text())


def edited(**edits):
    cfg = copy.deepcopy(TINY)
    for path, value in edits.items():
        node, keys = cfg, path.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return cfg


def run_cli(tmp_path, cfg, *argv, capsys=None):
    cfg = copy.deepcopy(cfg)
    cfg["results_dir"] = str(tmp_path / "results")
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    rc = main(["--config", str(path), *argv])
    return rc


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


CONFIG_CASES = [
    ("clients not an integer", edited(study__clients=["six"]), "study.clients.0"),
    ("too few clients", edited(study__clients=[2]), "study.clients.0"),
    ("negative learning rate", edited(datasets__digits__lr=-0.1), "datasets.digits.lr"),
    ("zero batch size", edited(datasets__digits__batch_size=0), "datasets.digits.batch_size"),
    ("unknown dataset", edited(study__datasets=["nosuch"]), "study.datasets[0]"),
    ("unknown loader", edited(datasets__digits__loader="imagenet"), "datasets.digits.loader"),
    ("unknown model", edited(datasets__digits__model="vgg99"), "datasets.digits.model"),
    ("unknown split", edited(study__splits=["nosuch"]), "study.splits[0]"),
    ("unknown split generator", edited(splits__nonoverlap_balanced=None, **{"splits__nonoverlap-balanced": {"generator": "weird"}}), "splits.nonoverlap-balanced.generator"),
    ("alpha zero", edited(**{"splits__nonoverlap-balanced": {"generator": "ocfl", "overlap": False, "imbalanced": True, "alpha": 0}}), "splits.nonoverlap-balanced.alpha"),
    ("zero samples per client", edited(**{"splits__nonoverlap-balanced": {"generator": "ocfl", "overlap": False, "imbalanced": False, "samples_per_client": 0}}), "samples_per_client"),
    ("more K-Means clusters than clients", edited(**{"algorithms__ocfl-km": {"method": "ocfl", "clusterer": "kmeans", "k": 99}}), "algorithms.ocfl-km.k: 99 is not allowed with 6 clients"),
    ("more IFCA models than clients", edited(algorithms__bnc={"method": "ifca", "k": 7}), "algorithms.bnc.k: 7 is not allowed with 6 clients"),
    ("two samples per client", edited(**{"splits__nonoverlap-balanced": {"generator": "ocfl", "overlap": False, "imbalanced": False, "samples_per_client": 2}}), "splits.nonoverlap-balanced.samples_per_client"),
    ("unknown method", edited(algorithms__bnc={"method": "magic"}), "algorithms.bnc.method"),
    ("unknown clusterer", edited(**{"algorithms__ocfl-km": {"method": "ocfl", "clusterer": "dbscan2"}}), "algorithms.ocfl-km.clusterer"),
    ("clusterer outside the allow-list", edited(**{"algorithms__ocfl-km": {"method": "ocfl", "clusterer": "sklearn", "estimator": "os.system"}}), "algorithms.ocfl-km"),
    ("unknown method parameter", edited(**{"algorithms__ocfl-km": {"method": "ocfl", "clusterer": "kmeans", "kk": 3}}), "algorithms.ocfl-km"),
    ("eps2 below eps1", edited(algorithms__bnc={"method": "scl", "eps1": 1.0, "eps2": 0.5}), "algorithms.bnc"),
    ("negative distance threshold", edited(algorithms__bnc={"method": "bcl", "distance_threshold": -0.1}), "algorithms.bnc.distance_threshold"),
    ("moving-average window below 1", edited(**{"algorithms__ocfl-km": {"method": "ocfl", "clusterer": "kmeans", "window": 0}}), "algorithms.ocfl-km.window"),
    ("participation above 1", edited(engine__participation=1.5), "engine.participation"),
    ("unknown device", edited(device="tpu"), "device"),
    ("unknown top-level key", edited(colour="blue"), "colour"),
    ("dataset name with a slash", edited(study__datasets=["../digits"]), "study.datasets.0"),
    ("attribution outside the allow-list", edited(explain__attribution="lime"), "explain.attribution"),
    ("unknown server optimiser", edited(engine__server_optimizer="lamb"), "engine.server_optimizer"),
]


@pytest.mark.parametrize("label,cfg,field", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_config_errors_name_the_field(tmp_path, capsys, label, cfg, field):
    cfg = copy.deepcopy(cfg)
    for section in ("splits",):  # drop helper keys of `edited` that used python-safe names
        cfg[section] = {k: v for k, v in cfg[section].items() if v is not None}
    rc = run_cli(tmp_path, cfg, "validate")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert len(err) == 1, err
    assert field in err[0], err[0]
    assert files_under(tmp_path / "results") == []


def test_missing_data_root_names_the_expected_path(tmp_path, capsys):
    cfg = edited(study__datasets=["mnist"], datasets__mnist=dict(TINY["datasets"]["digits"]),
                 data_root=str(tmp_path / "nodata"))
    rc = run_cli(tmp_path, cfg, "data", "--dataset", "mnist")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1
    assert str(tmp_path / "nodata") in err[0] and "train-images-idx3-ubyte" in err[0]
    assert files_under(tmp_path / "results") == []


def test_corrupt_dataset_parquet_is_named(tmp_path, capsys):
    bad = tmp_path / "results" / "data" / "digits.parquet"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"PAR1 this is not parquet")
    rc = run_cli(tmp_path, TINY, "split", "--dataset", "digits", "--split", "nonoverlap-balanced", "--clients", "6")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1
    assert "digits.parquet" in err[0] and "corrupt" in err[0]
    assert not (tmp_path / "results" / "splits").exists()


def test_class_set_beyond_the_dataset(tmp_path, capsys):
    # refused before any job: the loader declares its class count (cflcore.data.loaders.SourceFacts)
    cfg = edited(**{"splits__nonoverlap-balanced": {"generator": "ocfl", "overlap": False, "imbalanced": False,
                                                   "class_sets": [[0, 1], [2, 3], [4, 12]]}})
    for argv in (["data", "--dataset", "digits"],
                 ["split", "--dataset", "digits", "--split", "nonoverlap-balanced", "--clients", "6"]):
        rc = run_cli(tmp_path, cfg, *argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert rc != 0 and len(err) == 1 and "splits.nonoverlap-balanced.class_sets[2]: class 12" in err[0], err
    assert files_under(tmp_path / "results") == []


def test_diverging_loss_is_a_one_line_error_with_no_run_files(tmp_path, capsys):
    cfg = edited(datasets__digits__lr=1.0e12, datasets__digits__rounds=2)
    for argv in (["data", "--dataset", "digits"],
                 ["split", "--dataset", "digits", "--split", "nonoverlap-balanced", "--clients", "6"]):
        assert run_cli(tmp_path, cfg, *argv) == 0
    capsys.readouterr()
    rc = run_cli(tmp_path, cfg, "train", "--dataset", "digits", "--split", "nonoverlap-balanced", "--clients", "6",
                 "--algorithm", "bnc")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and ("nan" in err[0].lower() or "inf" in err[0].lower()), err
    run_dir = tmp_path / "results" / "runs" / "digits" / "nonoverlap-balanced" / "n6" / "s0" / "bnc"
    assert not any(p.suffix in (".parquet", ".pt") and p.parent == run_dir for p in files_under(run_dir))
