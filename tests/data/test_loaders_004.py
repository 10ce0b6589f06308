"""004's datasets on small fixtures written in their exact on-disk formats: CIFAR-100's python pickle version
(``cifar-100-python/{train,test,meta}``, ``fine_labels``) and LEAF's FEMNIST JSON (``users``, ``num_samples``,
``user_data`` with 784-float ``x`` and ``y``), whose writers the dataset Parquet keeps in a ``writer`` column."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cflcore.data import load_dataset, make_split, prepare_dataset
from cflcore.data.loaders.leaf import FEMNIST_CLASSES
from cflcore.errors import DataError
from cflcore.io import parquet_metadata
from test_data_loaders import settings, write_cifar_folder

FINE = [f"fine_{i}" for i in range(100)]


def write_cifar100_folder(root: Path, rng: np.random.Generator, n_train: int = 7, n_test: int = 4) -> dict:
    """The real files are Python-2 pickles of dicts with byte-string keys (``filenames``, ``batch_label``,
    ``fine_labels``, ``coarse_labels``, ``data``); ``meta`` holds ``fine_label_names`` and ``coarse_label_names``."""
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    parts = {}
    for name, n in (("train", n_train), ("test", n_test)):
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        fine = [int(v) for v in rng.integers(0, 100, n)]
        fine[0] = 99  # the last class is a valid label
        parts[name] = (data, fine)
        with open(folder / name, "wb") as fh:
            pickle.dump({b"filenames": [f"{name}_{j}.png".encode() for j in range(n)], b"batch_label": name.encode(),
                         b"fine_labels": fine, b"coarse_labels": [f // 5 for f in fine], b"data": data}, fh, protocol=2)
    with open(folder / "meta", "wb") as fh:
        pickle.dump({b"fine_label_names": [c.encode() for c in FINE],
                     b"coarse_label_names": [f"coarse_{i}".encode() for i in range(20)]}, fh, protocol=2)
    return parts


def test_cifar100_reads_fine_labels_in_chw_order(tmp_path):
    parts = write_cifar100_folder(tmp_path, np.random.default_rng(3))
    out = tmp_path / "cifar100.parquet"
    prepare_dataset("cifar100", settings(tmp_path), out)
    ds = load_dataset(out)
    assert ds.images.shape == (11, 3, 32, 32) and ds.n_classes == 100 and ds.classes == FINE
    assert list(ds.part) == ["train"] * 7 + ["test"] * 4
    data, fine = parts["train"]
    np.testing.assert_array_equal(ds.images[0, 0].ravel(), data[0, :1024])  # red plane first, row-major
    np.testing.assert_array_equal(ds.images[3, 2, 1, :], data[3, 2048 + 32: 2048 + 64])
    np.testing.assert_array_equal(ds.labels[:7], fine)
    np.testing.assert_array_equal(ds.images[7:].reshape(4, -1), parts["test"][0])
    np.testing.assert_array_equal(ds.labels[7:], parts["test"][1])
    assert ds.labels.max() == 99
    assert "writer" not in pq.read_schema(out).names  # optional column: absent for datasets without writers
    assert parquet_metadata(out)["loader"] == "cifar100"


def test_cifar100_missing_corrupt_and_unsafe_files(tmp_path):
    write_cifar100_folder(tmp_path, np.random.default_rng(4))
    folder = tmp_path / "cifar-100-python"
    (folder / "meta").unlink()
    with pytest.raises(DataError) as err:
        prepare_dataset("cifar100", settings(tmp_path), tmp_path / "o.parquet")
    assert "cifar-100-python" in str(err.value) and "meta" in str(err.value) and "\n" not in str(err.value)
    with open(folder / "meta", "wb") as fh:
        pickle.dump({b"fine_label_names": [b"x"] * 100}, fh, protocol=2)
    (folder / "test").write_bytes((folder / "test").read_bytes()[:100])
    with pytest.raises(DataError, match="test: corrupt or truncated"):
        prepare_dataset("cifar100", settings(tmp_path), tmp_path / "o.parquet")
    with open(folder / "test", "wb") as fh:  # CIFAR-10's key instead of fine_labels
        pickle.dump({b"data": np.zeros((1, 3072), np.uint8), b"labels": [0]}, fh, protocol=2)
    with pytest.raises(DataError, match="fine_labels"):
        prepare_dataset("cifar100", settings(tmp_path), tmp_path / "o.parquet")
    with open(folder / "test", "wb") as fh:
        pickle.dump({b"data": np.zeros((1, 3072), np.uint8), b"fine_labels": [0], b"evil": Path("/tmp")}, fh, protocol=2)
    with pytest.raises(DataError, match="test"):
        prepare_dataset("cifar100", settings(tmp_path), tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


def test_cifar10_files_keep_their_columns(tmp_path):
    write_cifar_folder(tmp_path, np.random.default_rng(5))
    prepare_dataset("cifar10", settings(tmp_path), tmp_path / "c10.parquet")
    assert pq.read_schema(tmp_path / "c10.parquet").names == ["idx", "part", "label", "image"]


# ----------------------------------------------------------------------------- FEMNIST (LEAF)
def leaf_user(rng: np.random.Generator, n: int) -> dict:
    """One writer as LEAF stores it: x = grey/255 of a black-on-white scan (background 1.0), y in 0..61 (a
    writer of 62 or more samples writes every class)."""
    grey = np.full((n, 784), 255, dtype=np.int64)
    grey[:, rng.integers(0, 784, 50)] = rng.integers(0, 200, (n, 50))  # dark ink strokes
    y = np.arange(n) % 62 if n >= 62 else rng.integers(0, 62, n)
    return {"x": (grey / 255).tolist(), "y": [int(v) for v in y]}


SMALL = {"train": [{"f0000_14": 3, "f0001_41": 2}, {"f0002_07": 4}], "test": [{"f0000_14": 1, "f0001_41": 1, "f0002_07": 2}]}


def write_leaf_femnist(root: Path, rng: np.random.Generator, layout: dict = SMALL) -> dict:
    """LEAF's ``data/femnist/data/{train,test}/*.json`` after ``preprocess.sh -t sample``: every writer appears
    in both parts; the train part is spread over two files (LEAF writes at most 100 writers per file)."""
    written = {}
    for part, files in layout.items():
        folder = root / "femnist" / "data" / part
        folder.mkdir(parents=True)
        for k, users in enumerate(files):
            data = {u: leaf_user(rng, n) for u, n in users.items()}
            obj = {"users": list(users), "num_samples": list(users.values()), "user_data": data}
            (folder / f"all_data_{k}_niid_0_keep_0_{part}_9.json").write_text(json.dumps(obj))
            written.setdefault(part, []).extend((u, data[u]) for u in users)
    return written


def test_femnist_reads_leaf_json_inverts_to_mnist_convention_and_keeps_writers(tmp_path):
    written = write_leaf_femnist(tmp_path, np.random.default_rng(6))
    out = tmp_path / "femnist.parquet"
    prepare_dataset("femnist", settings(tmp_path), out)
    ds = load_dataset(out)
    assert ds.images.shape == (13, 1, 28, 28) and ds.n_classes == 62
    assert ds.classes[:2] == ["0", "1"] and ds.classes[10] == "A" and ds.classes[36] == "a" and ds.classes[61] == "z"
    assert list(ds.part) == ["train"] * 9 + ["test"] * 4
    rows = [(part, u, i) for part in ("train", "test") for u, d in written[part] for i in range(len(d["y"]))]
    table = pq.read_table(out)
    assert table.column_names == ["idx", "part", "label", "image", "writer"]
    assert table.column("writer").to_pylist() == [u for _, u, _ in rows]
    lookup = {(part, u): d for part in written for u, d in written[part]}
    for row, (part, user, i) in enumerate(rows):
        d = lookup[(part, user)]
        grey = np.rint(np.asarray(d["x"][i]) * 255).astype(np.int64)
        np.testing.assert_array_equal(ds.images[row, 0].ravel(), 255 - grey)  # background 0, ink bright
        assert ds.labels[row] == d["y"][i]
    assert (ds.images == 0).mean() > 0.5  # mostly background, now black
    assert parquet_metadata(out)["n_classes"] == len(FEMNIST_CLASSES) == 62


def test_femnist_split_by_dirichlet_as_004_app_f(tmp_path):
    """004 App. F partitions FEMNIST with a Dirichlet over clients: the ``dirichlet-mix`` generator with one
    group runs on the loader's output."""
    write_leaf_femnist(tmp_path, np.random.default_rng(7), {"train": [{"f0003_11": 124}], "test": [{"f0003_11": 12}]})
    out = tmp_path / "femnist.parquet"
    prepare_dataset("femnist", settings(tmp_path), out)
    manifest = make_split(out, {"generator": "dirichlet-mix", "alphas": [0.01], "cluster_shares": [1.0],
                                "samples_per_client": 10}, 3, 0, tmp_path / "split")
    assert manifest["n_clients"] == 3 and len(manifest["label_histograms"]) == 3


@pytest.mark.parametrize("breakage,match", [
    (lambda obj: obj["user_data"]["f0000_14"]["x"][0].pop(), "784 floats"),
    (lambda obj: obj.__setitem__("num_samples", [9, 2]), "num_samples"),
    (lambda obj: obj.pop("user_data"), "not a LEAF file"),
    (lambda obj: obj["user_data"]["f0001_41"]["x"][0].__setitem__(0, 1.5), r"outside \[0, 1\]"),
    (lambda obj: obj["user_data"]["f0001_41"]["y"].__setitem__(0, 62), "labels outside 0..61"),
])
def test_femnist_bad_files_are_one_line_data_errors(tmp_path, breakage, match):
    write_leaf_femnist(tmp_path, np.random.default_rng(8))
    path = tmp_path / "femnist" / "data" / "train" / "all_data_0_niid_0_keep_0_train_9.json"
    obj = json.loads(path.read_text())
    breakage(obj)
    path.write_text(json.dumps(obj))
    with pytest.raises(DataError, match=match) as err:
        prepare_dataset("femnist", settings(tmp_path), tmp_path / "o.parquet")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "o.parquet").exists()


def test_femnist_missing_folder_and_truncated_json(tmp_path):
    with pytest.raises(DataError, match=r"femnist/data\}?/?\{?train,test\}/\*\.json"):
        prepare_dataset("femnist", settings(tmp_path), tmp_path / "o.parquet")
    write_leaf_femnist(tmp_path, np.random.default_rng(9))
    path = tmp_path / "femnist" / "data" / "test" / "all_data_0_niid_0_keep_0_test_9.json"
    path.write_text(path.read_text()[:100])
    with pytest.raises(DataError, match="all_data_0_niid_0_keep_0_test_9.json: corrupt or truncated LEAF JSON"):
        prepare_dataset("femnist", settings(tmp_path), tmp_path / "o.parquet")
