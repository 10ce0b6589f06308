"""Atomic writes (temp file + rename), checked reads and canonical hashing.

Nothing here leaves a half-written file behind: every writer writes ``<name>.tmp-<pid>`` in the
target directory, fsyncs it and renames it over the target.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import DataError


_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def canonical_json(obj: Any) -> str:
    """Sorted-key, compact JSON: equal values give equal strings (used for params and hashes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def stable_hash(obj: Any, n: int = 16) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:n]


def write_json(obj: Any, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: corrupt JSON ({e.__class__.__name__}); delete it and rerun") from None


def write_parquet(table: pa.Table | Any, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
    """Write a pyarrow Table or pandas DataFrame atomically and deterministically (no pandas index, fixed writer)."""
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    if metadata:
        meta = dict(table.schema.metadata or {})
        meta.pop(b"pandas", None)
        meta.update({k.encode(): canonical_json(v).encode() for k, v in metadata.items()})
        table = table.replace_schema_metadata(meta)
    else:
        meta = dict(table.schema.metadata or {})
        meta.pop(b"pandas", None)
        table = table.replace_schema_metadata(meta or None)
    with atomic_path(path) as tmp:
        try:
            pq.write_table(table, tmp, compression="zstd", write_statistics=True, created_by="cfl-pipeline")
        except TypeError:  # pyarrow >= 26 dropped the ``created_by`` keyword
            pq.write_table(table, tmp, compression="zstd", write_statistics=True)


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pa.Table:
    """Read a Parquet file; a missing or corrupt file is a one-line DataError naming the path."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        # ParquetFile, not pq.read_table: read_table goes through pyarrow.dataset, whose first use imports
        # it and pandas (~0.45 s in every job that reads a Parquet file); for one file the table is the same.
        with pq.ParquetFile(path) as f:
            return f.read(columns=columns)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: corrupt Parquet file ({str(e).splitlines()[0][:120]}); delete it and rerun") from None


def numeric_column(table: pa.Table, name: str):
    """Column ``name`` (a fixed-width numeric type without nulls) as a numpy array, read from the Arrow buffers.

    pyarrow's own ``to_numpy`` goes through its pandas conversion layer, whose first use imports pandas
    (~0.3 s): the train job, which needs no pandas otherwise, paid it for three integer columns. This is the
    same zero-copy view ``Array.to_numpy()`` returns, copied into one array."""
    import numpy as np

    column = table.column(name)
    dtype = np.dtype(column.type.to_pandas_dtype())
    if column.null_count or not pa.types.is_primitive(column.type) or pa.types.is_boolean(column.type):
        raise DataError(f"column {name!r}: expected a numeric column without nulls, got {column.type}")
    parts = [np.frombuffer(chunk.buffers()[1], dtype=dtype)[chunk.offset:chunk.offset + len(chunk)]
             for chunk in column.chunks]
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def parquet_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON-decoded key/value metadata written by :func:`write_parquet`."""
    path = Path(path)
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(f"{path}: corrupt Parquet file ({str(e).splitlines()[0][:120]}); delete it and rerun") from None
    out = {}
    for k, v in (schema.metadata or {}).items():
        try:
            out[k.decode()] = json.loads(v)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
    return out


def torch_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save`` atomically and byte-reproducibly: saving through a file object (not a path)
    keeps the temporary file's random name out of the zip archive's record names."""
    import torch

    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        torch.save(obj, fh)
