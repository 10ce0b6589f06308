"""A federation from a file (cflcore/federation/): the table's rows are checked before any job, each bad row refused
in one line naming it; the dataset keeps the table's rows and clients; the natural split is the table's partition,
its groups the ground truth, and a client count other than the table's is refused."""
from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from cflcore.config import validate_config
from cflcore.data.loaders import DATASETS
from cflcore.data.splits import SPLIT_GENERATORS
from cflcore.data.splits.build import build_split, split_context
from cflcore.errors import ConfigError
from cflcore.federation import FEDERATION_KEY

from conftest import REPO

MODULES = ("cflcore.federation.table", "cflcore.federation.natural")


@pytest.fixture(autouse=True)
def fed(monkeypatch):
    """The federation's modules, imported for one test only: a job imports them only where a study selects them
    (cflcore.external.BUNDLED), so the registries' other tests see the built-in plug-ins alone."""
    DATASETS.names(), SPLIT_GENERATORS.names()  # the built-in ones first: the copies below keep them
    monkeypatch.setattr(DATASETS, "_items", dict(DATASETS._items))
    monkeypatch.setattr(SPLIT_GENERATORS, "_items", dict(SPLIT_GENERATORS._items))
    table, natural = (importlib.import_module(m) for m in MODULES)
    yield table, natural
    for m in MODULES:
        sys.modules.pop(m, None)


def check_rows(*args, **kwargs):
    return sys.modules[MODULES[0]].check_rows(*args, **kwargs)


def prepare_dataset(*args, **kwargs):
    return sys.modules[MODULES[0]].prepare_dataset(*args, **kwargs)


def natural_split(*args):
    return sys.modules[MODULES[1]].NaturalSplit(*args)

CLASSES = ["a", "b", "c"]
SHAPE = [1, 2, 2]


def rows(n_clients: int = 4, per_client: int = 4, tests: int = 6) -> dict[str, list]:
    """Client c in group c // 2, its samples of class c % 3; ``tests`` orchestrator rows with no client."""
    out: dict[str, list] = {"client": [], "group": [], "split": [], "pixels": [], "label": []}
    for c in range(n_clients):
        for i in range(per_client):
            out["client"].append(f"c{c}")
            out["group"].append(f"g{c // 2}")
            out["split"].append("train")
            out["pixels"].append([c * 10 + i] * 4)
            out["label"].append(c % 3)
    for i in range(tests):
        for key, value in (("client", None), ("group", None), ("split", "test"), ("pixels", [i] * 4), ("label", i % 3)):
            out[key].append(value)
    return out


def write(tmp_path: Path, columns: dict[str, list], name: str = "fed.parquet") -> Path:
    path = tmp_path / name
    pq.write_table(pa.table({k: (pa.array(v, pa.string()) if k in ("client", "group") and all(
        x is None or isinstance(x, str) for x in v) else v) for k, v in columns.items()}), path)
    return path


def federation(path: Path) -> dict:
    return {"table": str(path), "classes": CLASSES, "image_size": SHAPE}


def refused(tmp_path: Path, columns: dict[str, list], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        check_rows(federation(write(tmp_path, columns)), "splits.natural", 0.3)
    assert "\n" not in str(err.value)


def test_a_good_table_passes_and_its_clients_are_its_training_rows_ids(tmp_path):
    checked = check_rows(federation(write(tmp_path, rows())), "splits.natural", 0.3)
    assert sorted({c for c in checked["client"] if c is not None}) == ["c0", "c1", "c2", "c3"]


def test_a_client_id_of_another_type_is_refused(tmp_path):
    bad = rows()
    bad["client"] = [float(i) if c is not None else None for i, c in enumerate(bad["client"])]
    refused(tmp_path, bad, r"^splits\.natural\.table: row 0: column 'client' is of type double; allowed: integer or "
                           r"string ids$")


def test_a_label_outside_the_declared_classes_is_refused_naming_the_row(tmp_path):
    bad = rows()
    bad["label"][5] = 3
    refused(tmp_path, bad, r"^splits\.natural\.table: row 5: label 3 is not a declared class; allowed: 0\.\.2 or a name")


def test_a_missing_image_is_refused_naming_the_row(tmp_path):
    good = rows()
    images = []
    for i, pixels in enumerate(good.pop("pixels")):
        np.save(tmp_path / f"s{i}.npy", np.asarray(pixels, dtype=np.uint8).reshape(SHAPE))
        images.append(f"s{i}.npy")
    good["image"] = images
    check_rows(federation(write(tmp_path, good)), "splits.natural", 0.3)
    (tmp_path / "s7.npy").unlink()
    refused(tmp_path, good, r"^splits\.natural\.table: row 7: image 's7\.npy' is missing")


def test_a_client_with_no_training_sample_is_refused_naming_its_first_row(tmp_path):
    bad = rows()
    for row in range(4, 8):  # client c1's rows: all test
        bad["split"][row] = "test"
    bad["client"][4] = "c1"  # its first row keeps its id, so that it is a client of the table
    bad["split"][4] = "train"
    refused(tmp_path, bad, r"^splits\.natural\.table: row 4: client 'c1' has 1 training samples; allowed: at least 2")


def test_a_client_in_two_groups_and_a_bad_split_value_are_refused(tmp_path):
    bad = rows()
    bad["group"][3] = "g9"
    refused(tmp_path, bad, r"^splits\.natural\.table: row 3: client 'c0' in group 'g9', but in 'g0' at row 0")
    bad = rows()
    bad["split"][2] = "validation"
    refused(tmp_path, bad, r"^splits\.natural\.table: row 2: split 'validation'; allowed: train, test$")


def test_the_natural_split_is_the_tables_partition_with_its_groups(tmp_path):
    path = write(tmp_path, rows())
    data = tmp_path / "fed-dataset.parquet"
    prepare_dataset({"loader": "table", "test_fraction": 0.3, FEDERATION_KEY: federation(path)}, data)
    ctx = split_context(data)
    assert len(ctx.train_idx) == 16 and len(ctx.test_idx) == 6
    params = {"generator": "natural", **federation(path), "local_test_fraction": 0.25}
    table, manifest = build_split(ctx, params, 4, 0, field="splits.natural")
    assert manifest["cluster_of_client"] == [0, 0, 1, 1] and manifest["client_id_of_client"] == ["c0", "c1", "c2", "c3"]
    assert manifest["n_train"] == [3, 3, 3, 3] and manifest["n_test"] == [1, 1, 1, 1] and "ground_truth" not in manifest
    held = table.to_pydict()
    for client in range(4):  # every client holds exactly its own training rows
        assert sorted(i for c, r, i in zip(held["client"], held["role"], held["idx"]) if c == client and r != "orchestrator") \
            == list(range(client * 4, client * 4 + 4))
    assert natural_split(params, "splits.natural").group_sizes(4) == (2, 2)
    with pytest.raises(ConfigError, match=r"^splits\.natural: the table has 4 clients, not 6; allowed: clients: \[4\]"):
        natural_split(params, "splits.natural").group_sizes(6)
    no_groups = rows()
    no_groups.pop("group")
    params["table"] = str(write(tmp_path, no_groups, "plain.parquet"))
    prepare_dataset({"loader": "table", "test_fraction": 0.3, FEDERATION_KEY: federation(Path(params["table"]))}, data)
    _, manifest = build_split(split_context(data), params, 4, 0, field="splits.natural")
    assert manifest["ground_truth"] is False and manifest["cluster_of_client"] == [0, 0, 0, 0]


def test_a_bad_row_stops_validation_in_one_line(tmp_path):
    tiny = yaml.safe_load((Path(REPO) / "config" / "tiny.yaml").read_text())
    bad = rows()
    bad["label"] = [CLASSES[v] for v in bad["label"]]  # labels may be the classes' names
    bad["label"][9] = "z"
    cfg = copy.deepcopy(tiny)
    cfg["results_dir"] = str(tmp_path / "results")
    cfg["study"].update(datasets=["sites"], splits=["natural"], clients=[4], algorithms=["bnc"])
    cfg["datasets"]["sites"] = {**cfg["datasets"]["digits"], "loader": "table"}
    cfg["splits"]["natural"] = {"generator": "natural", **federation(write(tmp_path, bad))}
    cfg["explain"]["grid_clients"] = [0, 1, 2]
    with pytest.raises(ConfigError, match=r"^splits\.natural\.table: row 9: label 'z' is not a declared class"):
        validate_config(cfg)
