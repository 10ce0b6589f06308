"""``prepare_dataset``: run a loader by name, cap its train part, and write the dataset Parquet
(``results/data/{dataset}.parquet``, docs/architecture.md §3)."""
from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from ...errors import DataError
from ...io import write_parquet
from .base import DATASETS, LoaderSettings, RawDataset, cap_train


def dataset_table(raw: RawDataset) -> pa.Table:
    """The docs/architecture.md §3 table: ``idx`` int64 0..N-1, ``part`` string, ``label`` int16, ``image`` binary (uint8 C×H×W),
    and ``writer`` string only for datasets that know each sample's writer (FEMNIST); the others' files are
    unchanged."""
    n = len(raw.labels)
    item_bytes = int(np.prod(raw.images.shape[1:]))
    flat = np.ascontiguousarray(raw.images).reshape(-1)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * item_bytes, type=pa.int32())
    images = pa.BinaryArray.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(flat)])
    columns = {
        "idx": pa.array(np.arange(n, dtype=np.int64)),
        "part": pa.array(raw.part.astype(str).tolist(), type=pa.string()),
        "label": pa.array(raw.labels.astype(np.int16)),
        "image": images,
    }
    if raw.writer is not None:
        columns["writer"] = pa.array(raw.writer.astype(str).tolist(), type=pa.string())
    return pa.table(columns)


def dataset_metadata(raw: RawDataset, loader: str) -> dict[str, Any]:
    return {
        "shape": [int(s) for s in raw.images.shape[1:]],
        "classes": list(raw.classes),
        "n_classes": len(raw.classes),
        "source": raw.source,
        "n_train": int(np.sum(raw.part == "train")),
        "n_test": int(np.sum(raw.part == "test")),
        "loader": loader,
    }


def load_raw(loader: str, settings: Mapping[str, Any]) -> RawDataset:
    """Run the named loader (and the optional ``max_train`` cap)."""
    parsed = LoaderSettings.from_dict({**settings, "loader": loader})
    load = DATASETS.get(loader, field="loader")
    return cap_train(load(parsed), parsed.max_train)


def prepare_dataset(loader: str, settings: Mapping[str, Any], out_path: str | os.PathLike) -> None:
    """Load ``loader`` with ``settings`` (``cflcore.config.data_settings``) and write the dataset Parquet atomically."""
    raw = load_raw(loader, settings)
    if not np.any(raw.part == "train") or not np.any(raw.part == "test"):
        raise DataError(f"{loader}: the dataset needs both a train and a test part")
    write_parquet(dataset_table(raw), out_path, metadata=dataset_metadata(raw, loader))
