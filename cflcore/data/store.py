"""Read the dataset Parquet (docs/architecture.md §3) and build the in-memory federated scenario of one split.

``load_dataset`` checks the file against the contract; ``load_federated`` joins ``assignments.parquet`` and
``manifest.json`` of a split with the dataset and applies each client's transforms the manifest records (its visual
domain, its label swaps: cflcore.data.transforms), deterministically.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import filenames as fn
from ..errors import DataError
from ..io import numeric_column, parquet_metadata, read_json, read_parquet
from .drift import manifest_changes
from .federated import ClientData, Drift, FederatedData, with_transform

if TYPE_CHECKING:  # torch is imported where tensors are built: the split job reads labels only
    import torch

DATASET_COLUMNS = {"idx": pa.int64(), "part": pa.string(), "label": pa.int16(), "image": pa.binary()}
ASSIGNMENT_COLUMNS = {"client": pa.int32(), "cluster": pa.int32(), "role": pa.string(), "idx": pa.int64()}
REQUIRED_META = ("shape", "classes", "n_classes", "n_train", "n_test")


@dataclass
class DatasetTable:
    """The whole dataset in memory: ``images`` uint8 (N, C, H, W), ``labels`` int64, ``part`` str, ``idx`` int64."""

    images: np.ndarray
    labels: np.ndarray
    part: np.ndarray
    idx: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.meta["shape"])  # type: ignore[return-value]

    @property
    def n_classes(self) -> int:
        return int(self.meta["n_classes"])

    @property
    def classes(self) -> list[str]:
        return list(self.meta["classes"])

    def rows_of(self, idx: np.ndarray) -> np.ndarray:
        """Row positions of the given ``idx`` values (``idx`` is 0..N-1 in row order by contract)."""
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= len(self.idx)):
            raise DataError(f"idx {int(idx.min())}..{int(idx.max())} outside the dataset's 0..{len(self.idx) - 1}")
        return idx


def _check_columns(table: pa.Table, expected: Mapping[str, pa.DataType], path: Path) -> None:
    for name, dtype in expected.items():
        if name not in table.column_names:
            raise DataError(f"{path}: missing column {name!r}; expected columns {', '.join(expected)}")
        if table.schema.field(name).type != dtype:
            raise DataError(f"{path}: column {name!r} has type {table.schema.field(name).type}, expected {dtype}")


def read_dataset_meta(path: str | os.PathLike) -> dict[str, Any]:
    """The schema metadata of a dataset Parquet (shape, classes, n_classes, source, n_train, n_test, loader)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    meta = parquet_metadata(path)
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise DataError(f"{path}: not a dataset file (metadata lacks {', '.join(missing)})")
    return meta


def _labels_and_part(table: pa.Table, meta: Mapping[str, Any], path: Path) -> tuple[np.ndarray, np.ndarray]:
    idx = numeric_column(table, "idx")
    if not np.array_equal(idx, np.arange(len(idx))):
        raise DataError(f"{path}: column 'idx' must be 0..N-1 in row order")
    labels = numeric_column(table, "label").astype(np.int64)
    if len(labels) and (labels.min() < 0 or labels.max() >= int(meta["n_classes"])):
        raise DataError(f"{path}: labels outside 0..{int(meta['n_classes']) - 1}")
    part = np.asarray(table.column("part").to_pylist(), dtype=object)
    bad_parts = sorted(set(part) - {"train", "test"})
    if bad_parts:
        raise DataError(f"{path}: column 'part' holds {bad_parts[0]!r}; allowed: train, test")
    return labels, part


def read_dataset_labels(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """``label`` int64 and ``part`` of every row (rows in ``idx`` order) and the metadata, without the images."""
    path = Path(path)
    meta = read_dataset_meta(path)
    table = read_parquet(path, columns=["idx", "part", "label"])
    _check_columns(table, {k: v for k, v in DATASET_COLUMNS.items() if k != "image"}, path)
    labels, part = _labels_and_part(table, meta, path)
    return labels, part, meta


def load_dataset(path: str | os.PathLike) -> DatasetTable:
    """Read and check a dataset Parquet; missing or corrupt files raise a one-line DataError naming ``path``."""
    path = Path(path)
    meta = read_dataset_meta(path)
    table = read_parquet(path)
    _check_columns(table, DATASET_COLUMNS, path)
    labels, part = _labels_and_part(table, meta, path)
    shape = tuple(int(s) for s in meta["shape"])
    item_bytes = int(np.prod(shape))
    image_col = table.column("image")
    if image_col.null_count:
        raise DataError(f"{path}: {image_col.null_count} null images")
    lengths = pc.binary_length(image_col)
    if len(image_col) and (pc.min(lengths).as_py() != item_bytes or pc.max(lengths).as_py() != item_bytes):
        raise DataError(f"{path}: image sizes differ from shape {list(shape)} ({item_bytes} bytes)")
    images = np.frombuffer(b"".join(image_col.to_pylist()), dtype=np.uint8).reshape((-1, *shape))
    idx = numeric_column(table, "idx").astype(np.int64)
    return DatasetTable(images=images.copy(), labels=labels, part=part, idx=idx, meta=dict(meta))


# ---------------------------------------------------------------------------------------------
# Federated view
# ---------------------------------------------------------------------------------------------
def to_float_images(images: np.ndarray) -> torch.Tensor:
    """uint8 (n, C, H, W) -> float32 in [0, 1]."""
    import torch

    return torch.from_numpy(images.astype(np.float32) / np.float32(255.0))


def read_assignments(split_dir: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Columns of ``assignments.parquet`` as numpy arrays, and ``manifest.json``."""
    split_dir = Path(split_dir)
    path = split_dir / fn.ASSIGNMENTS
    table = read_parquet(path)
    _check_columns(table, ASSIGNMENT_COLUMNS, path)
    cols = {name: numeric_column(table, name) for name in ("client", "cluster", "idx")}
    cols["role"] = np.asarray(table.column("role").to_pylist(), dtype=object)
    manifest = read_json(split_dir / fn.MANIFEST)
    if not isinstance(manifest, dict) or "cluster_of_client" not in manifest:
        raise DataError(f"{split_dir / fn.MANIFEST}: not a split manifest (no cluster_of_client)")
    return cols, manifest


def load_federated(dataset_path: str | os.PathLike, split_dir: str | os.PathLike,
                   device: str | torch.device = "cpu") -> FederatedData:
    """Every client's train/test tensors (float32 in [0, 1]) and the orchestrator set of one scenario.

    A client's visual domain (``manifest["domains"]``) applies to its train and test images (noise drawn from
    ``torch.Generator().manual_seed(noise_seed)``, train first), its label swaps (``manifest["label_swaps"]``) to its
    train and test labels; the orchestrator set stays clean, with its true labels. A split with a drift schedule
    (manifest ``drift``) keeps the untransformed samples of the clients it moves and the samples drawn for them
    (``drift.samples``): :meth:`FederatedData.at_round`."""
    import torch

    data = load_dataset(dataset_path)
    cols, manifest = read_assignments(split_dir)
    cluster_of_client = np.asarray(manifest["cluster_of_client"], dtype=np.int64)
    domains = manifest.get("domains")
    swaps = manifest.get("label_swaps")
    changes = manifest_changes(manifest)
    drawn_pairs = {(int(s["client"]), int(s["group"])) for s in (manifest.get("drift") or {}).get("samples", ())}
    movers = {int(client) for _, client, group in changes  # whose own samples a group transforms
              if int(group) != int(cluster_of_client[int(client)]) and (int(client), int(group)) not in drawn_pairs}
    clients: list[ClientData] = []
    raw_of_movers: dict[int, ClientData] = {}

    def samples_of(idx_train: np.ndarray, idx_test: np.ndarray) -> ClientData:
        return ClientData(x_train=to_float_images(data.images[data.rows_of(idx_train)]),
                          y_train=torch.from_numpy(data.labels[idx_train]),
                          x_test=to_float_images(data.images[data.rows_of(idx_test)]),
                          y_test=torch.from_numpy(data.labels[idx_test]), idx_train=idx_train, idx_test=idx_test)

    for client in range(len(cluster_of_client)):
        mine = cols["client"] == client
        raw = samples_of(np.sort(cols["idx"][mine & (cols["role"] == "train")]).astype(np.int64),
                         np.sort(cols["idx"][mine & (cols["role"] == "test")]).astype(np.int64))
        if client in movers:
            raw_of_movers[client] = raw
        clients.append(with_transform(raw, domains[client] if domains is not None else None,
                                      swaps[client] if swaps is not None else None))
    drift = None
    if changes:  # a transform split's groups carry their transforms; a class-distribution split's, its draws
        spec = manifest["drift"]
        drawn = {(int(s["client"]), int(s["group"])): samples_of(np.asarray(s["train_idx"], dtype=np.int64),
                                                                 np.asarray(s["test_idx"], dtype=np.int64))
                 for s in spec.get("samples", ())}
        drift = Drift(cluster_of_client, changes,
                      list(spec.get("group_transforms") or [{} for _ in range(int(manifest["n_clusters"]))]),
                      raw_of_movers, built={(k, int(cluster_of_client[k])): c for k, c in enumerate(clients)},
                      drawn=drawn)
    idx_orch = np.sort(cols["idx"][cols["role"] == "orchestrator"]).astype(np.int64)
    fed = FederatedData(
        clients=clients,
        x_orch=to_float_images(data.images[data.rows_of(idx_orch)]),
        y_orch=torch.from_numpy(data.labels[idx_orch]),
        true_clusters=cluster_of_client,
        n_classes=data.n_classes,
        shape=data.shape,
        manifest=manifest,
        drift=drift,
    )
    return fed if str(device) == "cpu" else fed.to(device)
