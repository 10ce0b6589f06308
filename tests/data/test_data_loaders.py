"""Dataset loaders on small fixtures written in the exact on-disk formats, and the dataset Parquet contract."""
from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cflcore.data import DATASETS, load_dataset, prepare_dataset
from cflcore.data.loaders import load_raw
from cflcore.data.loaders.cifar import CIFAR_TRAIN_BATCHES
from cflcore.data.loaders.idx import IDX_FILES
from cflcore.errors import ConfigError, DataError
from cflcore.io import parquet_metadata


def settings(root: Path, **kw) -> dict:
    return {"loader": kw.pop("loader", "x"), "test_fraction": 0.2, "max_train": None, "data_root": str(root),
            "download": False, **kw}


# ----------------------------------------------------------------------------- fixture writers
def idx_bytes(array: np.ndarray) -> bytes:
    """IDX unsigned-byte format: 0x00 0x00 0x08 ndim, big-endian uint32 dims, then the data."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_idx_folder(raw_dir: Path, rng: np.random.Generator, n_train: int = 20, n_test: int = 10,
                     gz: bool = True) -> dict[str, np.ndarray]:
    raw_dir.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": np.arange(n_train, dtype=np.uint8) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test, dtype=np.uint8) * 3) % 10,
    }
    for name, arr in arrays.items():
        if gz:
            with gzip.open(raw_dir / f"{name}.gz", "wb") as fh:
                fh.write(idx_bytes(arr))
        else:
            (raw_dir / name).write_bytes(idx_bytes(arr))
    return arrays


def write_cifar_folder(root: Path, rng: np.random.Generator, per_batch: int = 4, n_test: int = 3) -> dict:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = {}
    for i, name in enumerate(CIFAR_TRAIN_BATCHES + ["test_batch"]):
        n = n_test if name == "test_batch" else per_batch
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, n)]
        batches[name] = (data, labels)
        # the real batches are Python-2 pickles of a dict with byte-string keys
        with open(folder / name, "wb") as fh:
            pickle.dump({b"batch_label": name.encode(), b"labels": labels, b"data": data,
                         b"filenames": [f"{i}_{j}.png".encode() for j in range(n)]}, fh, protocol=2)
    with open(folder / "batches.meta", "wb") as fh:
        pickle.dump({b"label_names": [c.encode() for c in ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                                         "frog", "horse", "ship", "truck"]],
                     b"num_cases_per_batch": per_batch, b"num_vis": 3072}, fh, protocol=2)
    return batches


def write_medmnist(path: Path, rng: np.random.Generator, n_classes: int, rgb: bool = True) -> dict:
    shape = (28, 28, 3) if rgb else (28, 28)
    arrays = {}
    for part, n in (("train", 12), ("val", 5), ("test", 7)):
        arrays[f"{part}_images"] = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
        arrays[f"{part}_labels"] = (np.arange(n) % n_classes).astype(np.uint8).reshape(n, 1)
    np.savez_compressed(path, **arrays)
    return arrays


# ----------------------------------------------------------------------------- registry
def test_registry_names_all_loaders():
    assert set(DATASETS.names()) == {"mnist5k", "digits", "mnist", "fmnist", "cifar10", "cifar100", "femnist", "pathmnist",
                                     "bloodmnist"}
    with pytest.raises(ConfigError, match="unknown dataset 'nope'"):
        DATASETS.get("nope", field="datasets.x.loader")


# ----------------------------------------------------------------------------- IDX
@pytest.mark.parametrize("loader,folder", [("mnist", "MNIST"), ("fmnist", "FashionMNIST")])
@pytest.mark.parametrize("gz", [True, False])
def test_idx_loader_reads_fixture(tmp_path, loader, folder, gz):
    arrays = write_idx_folder(tmp_path / folder / "raw", np.random.default_rng(1), gz=gz)
    out = tmp_path / "out" / f"{loader}.parquet"
    prepare_dataset(loader, settings(tmp_path), out)
    ds = load_dataset(out)
    assert ds.images.shape == (30, 1, 28, 28)
    assert list(ds.part) == ["train"] * 20 + ["test"] * 10
    np.testing.assert_array_equal(ds.images[:20, 0], arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(ds.images[20:, 0], arrays["t10k-images-idx3-ubyte"])
    np.testing.assert_array_equal(ds.labels[:20], arrays["train-labels-idx1-ubyte"])
    np.testing.assert_array_equal(ds.labels[20:], arrays["t10k-labels-idx1-ubyte"])
    np.testing.assert_array_equal(ds.idx, np.arange(30))
    meta = parquet_metadata(out)
    assert meta["shape"] == [1, 28, 28] and meta["n_classes"] == 10 and meta["loader"] == loader
    assert (meta["n_train"], meta["n_test"]) == (20, 10)
    assert meta["classes"][0] == ("0" if loader == "mnist" else "T-shirt/top")


def test_idx_missing_files_one_line_error_naming_path_and_files(tmp_path):
    with pytest.raises(DataError) as err:
        prepare_dataset("mnist", settings(tmp_path), tmp_path / "out.parquet")
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "MNIST" / "raw") in msg
    assert all(f in msg for f in IDX_FILES) and "download: true" in msg
    assert not (tmp_path / "out.parquet").exists()


def test_idx_truncated_gzip_is_data_error_naming_path(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    write_idx_folder(raw, np.random.default_rng(2))
    target = raw / "train-images-idx3-ubyte.gz"
    target.write_bytes(target.read_bytes()[:200])
    with pytest.raises(DataError, match="train-images-idx3-ubyte.gz: corrupt or truncated"):
        prepare_dataset("mnist", settings(tmp_path), tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


def test_idx_short_payload_is_data_error(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    arrays = write_idx_folder(raw, np.random.default_rng(3), gz=False)
    (raw / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(arrays["t10k-labels-idx1-ubyte"])[:-3])
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte: truncated or corrupt IDX"):
        prepare_dataset("fmnist", settings(tmp_path), tmp_path / "out.parquet")


def test_idx_bad_magic_is_data_error(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    write_idx_folder(raw, np.random.default_rng(4), gz=False)
    (raw / "train-labels-idx1-ubyte").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(DataError, match="bad magic"):
        prepare_dataset("mnist", settings(tmp_path), tmp_path / "out.parquet")


# ----------------------------------------------------------------------------- CIFAR-10
def test_cifar10_reads_pickle_batches_in_chw_order(tmp_path):
    batches = write_cifar_folder(tmp_path, np.random.default_rng(5))
    out = tmp_path / "cifar10.parquet"
    prepare_dataset("cifar10", settings(tmp_path), out)
    ds = load_dataset(out)
    assert ds.images.shape == (23, 3, 32, 32) and ds.shape == (3, 32, 32)
    assert (ds.part == "train").sum() == 20 and (ds.part == "test").sum() == 3
    first_data, first_labels = batches["data_batch_1"]
    # row layout of a CIFAR batch: 1024 red, 1024 green, 1024 blue values, each row-major 32x32
    np.testing.assert_array_equal(ds.images[0, 0].ravel(), first_data[0, :1024])
    np.testing.assert_array_equal(ds.images[0, 2, 1, :], first_data[0, 2048 + 32: 2048 + 64])
    np.testing.assert_array_equal(ds.labels[:4], first_labels)
    test_data, test_labels = batches["test_batch"]
    np.testing.assert_array_equal(ds.images[20:].reshape(3, -1), test_data)
    np.testing.assert_array_equal(ds.labels[20:], test_labels)
    assert ds.classes[1] == "automobile" and ds.n_classes == 10


def test_cifar10_missing_files_error(tmp_path):
    write_cifar_folder(tmp_path, np.random.default_rng(6))
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DataError) as err:
        prepare_dataset("cifar10", settings(tmp_path), tmp_path / "o.parquet")
    assert "cifar-10-batches-py" in str(err.value) and "data_batch_3" in str(err.value)
    assert "\n" not in str(err.value)


def test_cifar10_truncated_batch_is_data_error(tmp_path):
    write_cifar_folder(tmp_path, np.random.default_rng(7))
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match="test_batch: corrupt or truncated"):
        prepare_dataset("cifar10", settings(tmp_path), tmp_path / "o.parquet")


class _Evil:
    def __reduce__(self):
        return (Path.touch, (Path("/tmp/cfl_pickle_was_executed"),))


def test_cifar10_pickle_cannot_run_code(tmp_path):
    write_cifar_folder(tmp_path, np.random.default_rng(8))
    marker = Path("/tmp/cfl_pickle_was_executed")
    marker.unlink(missing_ok=True)
    with open(tmp_path / "cifar-10-batches-py" / "data_batch_2", "wb") as fh:
        pickle.dump({b"data": _Evil(), b"labels": [0]}, fh, protocol=2)
    with pytest.raises(DataError, match="data_batch_2"):
        prepare_dataset("cifar10", settings(tmp_path), tmp_path / "o.parquet")
    assert not marker.exists()


# ----------------------------------------------------------------------------- MedMNIST
@pytest.mark.parametrize("flag,n_classes", [("pathmnist", 9), ("bloodmnist", 8)])
def test_medmnist_reads_npz_train_and_test(tmp_path, flag, n_classes):
    arrays = write_medmnist(tmp_path / f"{flag}.npz", np.random.default_rng(9), n_classes)
    out = tmp_path / "out.parquet"
    prepare_dataset(flag, settings(tmp_path), out)
    ds = load_dataset(out)
    assert ds.images.shape == (19, 3, 28, 28)  # train (12) + test (7); val is not used
    np.testing.assert_array_equal(ds.images[:12], arrays["train_images"].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(ds.images[12:], arrays["test_images"].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(ds.labels, np.concatenate([arrays["train_labels"][:, 0], arrays["test_labels"][:, 0]]))
    assert ds.n_classes == n_classes and len(ds.classes) == n_classes
    assert parquet_metadata(out)["n_test"] == 7


def test_medmnist_missing_and_corrupt(tmp_path):
    with pytest.raises(DataError) as err:
        prepare_dataset("bloodmnist", settings(tmp_path), tmp_path / "o.parquet")
    assert str(tmp_path / "bloodmnist.npz") in str(err.value) and "train_images" in str(err.value)
    (tmp_path / "bloodmnist.npz").write_bytes(b"not a zip file at all")
    with pytest.raises(DataError, match="bloodmnist.npz: corrupt or truncated"):
        prepare_dataset("bloodmnist", settings(tmp_path), tmp_path / "o.parquet")
    np.savez(tmp_path / "bloodmnist.npz", train_images=np.zeros((2, 28, 28, 3), np.uint8))
    with pytest.raises(DataError, match="lacks keys"):
        prepare_dataset("bloodmnist", settings(tmp_path), tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


# ----------------------------------------------------------------------------- embedded datasets
def test_mnist5k_file_contract_and_cache_determinism(tmp_path):
    out_a, out_b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    prepare_dataset("mnist5k", settings(tmp_path), out_a)
    prepare_dataset("mnist5k", settings(tmp_path), out_b)
    assert out_a.read_bytes() == out_b.read_bytes()  # independent of any study seed
    schema = pq.read_schema(out_a)
    assert [(f.name, str(f.type)) for f in schema] == [("idx", "int64"), ("part", "string"), ("label", "int16"),
                                                       ("image", "binary")]
    ds = load_dataset(out_a)
    assert ds.images.shape == (5000, 1, 28, 28) and ds.images.dtype == np.uint8
    assert (ds.part == "test").sum() == 1000
    np.testing.assert_array_equal(np.bincount(ds.labels[ds.part == "test"]), np.full(10, 100))  # stratified
    assert ds.images.max() == 255 and ds.meta["n_train"] == 4000 and ds.meta["loader"] == "mnist5k"


def test_digits_rescaled_and_capped(tmp_path):
    out = tmp_path / "digits.parquet"
    prepare_dataset("digits", settings(tmp_path, max_train=500, test_fraction=0.25), out)
    ds = load_dataset(out)
    assert ds.shape == (1, 8, 8) and ds.images.max() == 255 and ds.images.min() == 0
    assert ds.meta["n_train"] == 500 and ds.meta["n_test"] == 450  # 25 % of 1797, rounded up by sklearn
    counts = np.bincount(ds.labels[ds.part == "train"], minlength=10)
    assert counts.min() >= 45 and counts.max() <= 55  # stratified cap


def test_digits_pixels_match_sklearn(tmp_path):
    from sklearn.datasets import load_digits

    raw = load_raw("digits", settings(tmp_path))
    np.testing.assert_array_equal(raw.images[:, 0], np.rint(load_digits().images * 255 / 16).astype(np.uint8))


# ----------------------------------------------------------------------------- store
def test_load_dataset_missing_and_corrupt(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_dataset(tmp_path / "none.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DataError, match="bad.parquet: corrupt Parquet"):
        load_dataset(bad)
    good = tmp_path / "good.parquet"
    prepare_dataset("digits", settings(tmp_path), good)
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(DataError, match="truncated.parquet"):
        load_dataset(truncated)


def test_load_dataset_rejects_wrong_shape_metadata(tmp_path):
    import pyarrow as pa

    from cflcore.io import write_parquet

    table = pa.table({"idx": pa.array([0, 1], pa.int64()), "part": ["train", "test"],
                      "label": pa.array([0, 1], pa.int16()), "image": pa.array([b"\x00" * 4, b"\x00" * 4], pa.binary())})
    meta = {"shape": [1, 3, 3], "classes": ["a", "b"], "n_classes": 2, "n_train": 1, "n_test": 1}
    write_parquet(table, tmp_path / "x.parquet", metadata=meta)
    with pytest.raises(DataError, match="image sizes differ"):
        load_dataset(tmp_path / "x.parquet")
    write_parquet(table, tmp_path / "y.parquet")
    with pytest.raises(DataError, match="not a dataset file"):
        load_dataset(tmp_path / "y.parquet")
