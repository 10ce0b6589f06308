"""A federation from a file (docs/extending.md, "Your own federation"): the dataset kind ``table``, which reads a Parquet
(``.parquet``) or CSV (``.csv``) table with one row per sample:

* ``client``: the client holding it, an integer or a string id (any other type is refused); a client is an id of a
  training row (a test row's client may be empty, and is not a client);
* ``group`` (optional): the client's ground-truth group, an integer or a string, one per client; where present, every
  clustering score of the study is read against these groups (the ``natural`` split's manifest);
* ``split`` (optional): ``train`` or ``test``; ``test`` rows are the orchestrator's test set. Without the column a
  stratified ``test_fraction`` of the rows is held out for it, as for ``mnist5k`` (cflcore.data.loaders.base);
* the sample: ``pixels``, its C×H×W values 0..255 as a list of integers, or ``image``, the path of a ``.npy`` or
  ``.png`` file (relative to the table's folder) holding an array of the declared size;
* ``label``: a class index, or a class's name.

The table, its classes (a list of names) and its image size ([C, H, W]) are declared by the ``natural`` split entry
that partitions it (cflcore/federation/natural.py; cflcore.config.plan.data_settings gives them to this dataset's
job). :func:`check_rows` refuses, before any job, a client id of another type, a missing image, a label outside the
declared classes and a client without two training samples (its local train/test split needs two), naming the row.
The dataset Parquet keeps the table's row order (``idx`` is the row number) and each row's client in ``writer``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..data.loaders.base import DATASETS, LoaderSettings, RawDataset, stratified_holdout
from ..errors import ConfigError, DataError
from . import FEDERATION_KEY
ID_TYPES = ("integer", "string")
MIN_TRAIN_ROWS = 2
"""A client's fewest training rows: its local train/test split (cflcore.data.splits.build.local_split) needs two."""


def read_table(path: str | os.PathLike, field: str) -> Any:
    """The table as a pyarrow Table (Parquet or CSV, by the file's suffix); ConfigError naming ``field`` if unreadable."""
    import pyarrow as pa

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{field}: {str(path)!r} is not a file; allowed: a .parquet or .csv federation table")
    try:
        if path.suffix == ".csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(path)
        import pyarrow.parquet as pq

        return pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise ConfigError(f"{field}: {path} cannot be read as a table ({e.__class__.__name__}: {str(e)[:120]})") from None


def _kind(arrow_type: Any) -> str:
    import pyarrow.types as pt

    if pt.is_integer(arrow_type):
        return "integer"
    if pt.is_string(arrow_type) or pt.is_large_string(arrow_type):
        return "string"
    return str(arrow_type)


def _ids(table: Any, column: str, field: str, part: np.ndarray) -> list[str | None]:
    """The column's values as strings (None on a test row left empty); ConfigError naming the first row if its type
    is not an id's, or a training row's value is empty."""
    kind = _kind(table.schema.field(column).type)
    if kind not in ID_TYPES:
        raise ConfigError(f"{field}: row 0: column {column!r} is of type {kind}; allowed: {' or '.join(ID_TYPES)} ids")
    values = table.column(column).to_pylist()
    for row, v in enumerate(values):
        if v is None and part[row] == "train":
            raise ConfigError(f"{field}: row {row}: {column} is empty; allowed: an id (empty on test rows only)")
    return [None if v is None else str(v) for v in values]


def _labels(table: Any, classes: list[str], field: str) -> np.ndarray:
    values = table.column("label").to_pylist()
    out = np.empty(len(values), dtype=np.int64)
    for row, v in enumerate(values):
        if isinstance(v, str) and v in classes:
            out[row] = classes.index(v)
        elif isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(classes):
            out[row] = v
        else:
            raise ConfigError(f"{field}: row {row}: label {v!r} is not a declared class; allowed: 0..{len(classes) - 1} "
                              f"or a name of classes ({', '.join(classes)})")
    return out


def _image_file(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    if path.suffix == ".npy":
        array = np.load(path, allow_pickle=False)
    else:
        import matplotlib.image as mpimg  # PNG, through Pillow

        array = mpimg.imread(path)
        array = np.rint(array * 255) if array.dtype.kind == "f" else array
        array = array[None] if array.ndim == 2 else np.moveaxis(array, -1, 0)
    return np.asarray(array).reshape(shape) if np.asarray(array).size == int(np.prod(shape)) else np.asarray(array)


def _images(table: Any, base: Path, shape: tuple[int, ...], field: str, load: bool) -> np.ndarray | None:
    """The samples as uint8 (N, C, H, W) (``load``), or only checked: a missing image file, or an array of another
    size or outside 0..255, is a ConfigError naming the row."""
    n = table.num_rows
    size = int(np.prod(shape))
    out = np.empty((n, *shape), dtype=np.uint8) if load else None
    if "pixels" in table.column_names:
        for row, v in enumerate(table.column("pixels").to_pylist()):
            array = np.asarray(v if v is not None else [], dtype=np.float64)
            if array.size != size or (size and (array.min() < 0 or array.max() > 255)):
                raise ConfigError(f"{field}: row {row}: pixels hold {array.size} values; allowed: {size} values 0..255 "
                                  f"(the declared image_size {list(shape)})")
            if out is not None:
                out[row] = array.reshape(shape).astype(np.uint8)
        return out
    if "image" not in table.column_names:
        raise ConfigError(f"{field}: the table has neither a pixels nor an image column; allowed: one of them")
    for row, v in enumerate(table.column("image").to_pylist()):
        path = base / str(v) if v is not None else base
        if v is None or not path.is_file():
            raise ConfigError(f"{field}: row {row}: image {v!r} is missing (looked for {path}); allowed: a .npy or "
                              ".png file beside the table")
        if out is not None:
            array = _image_file(path, shape)
            if array.shape != shape or array.min() < 0 or array.max() > 255:
                raise DataError(f"{field}: row {row}: image {v!r} is {array.shape}; allowed: {list(shape)}, values 0..255")
            out[row] = array.astype(np.uint8)
    return out


def _parts(table: Any, labels: np.ndarray, test_fraction: float, field: str) -> np.ndarray:
    if "split" not in table.column_names:
        return stratified_holdout(labels, test_fraction, field)
    parts = table.column("split").to_pylist()
    for row, v in enumerate(parts):
        if v not in ("train", "test"):
            raise ConfigError(f"{field}: row {row}: split {v!r}; allowed: train, test")
    return np.asarray(parts, dtype=object)


def check_rows(federation: Mapping[str, Any], field: str, test_fraction: float, load: bool = False) -> dict[str, Any]:
    """Read and check the table ``federation`` declares (``table``, ``classes``, ``image_size``); returns its columns
    (``client``, ``group`` or None, ``labels``, ``part``, and ``images`` when ``load``). Refuses each bad row of the
    module docstring in one line naming it."""
    path = Path(str(federation["table"]))
    table = read_table(path, f"{field}.table")
    classes = [str(c) for c in federation["classes"]]
    shape = tuple(int(s) for s in federation["image_size"])
    for column in ("client", "label"):
        if column not in table.column_names:
            raise ConfigError(f"{field}.table: {path} has no {column!r} column; allowed: columns client, label, pixels "
                              "or image, and optionally group and split")
    labels = _labels(table, classes, f"{field}.table")
    part = _parts(table, labels, test_fraction, f"{field}.table")
    clients = _ids(table, "client", f"{field}.table", part)
    groups = _ids(table, "group", f"{field}.table", part) if "group" in table.column_names else None
    images = _images(table, path.parent, shape, f"{field}.table", load)
    first_row: dict[str, int] = {}
    train_rows: dict[str, int] = {}
    for row, (c, p) in enumerate(zip(clients, part)):
        if c is None:
            continue
        first_row.setdefault(c, row)
        train_rows[c] = train_rows.get(c, 0) + (p == "train")
        if groups is not None and p == "train" and groups[row] != groups[first_row[c]]:
            raise ConfigError(f"{field}.table: row {row}: client {c!r} in group {groups[row]!r}, but in "
                              f"{groups[first_row[c]]!r} at row {first_row[c]}; allowed: one group per client")
    for c, n in train_rows.items():
        if n < MIN_TRAIN_ROWS:
            raise ConfigError(f"{field}.table: row {first_row[c]}: client {c!r} has {n} training samples; allowed: at "
                              f"least {MIN_TRAIN_ROWS} (rows with split train)")
    if not np.any(part == "test"):
        raise ConfigError(f"{field}.table: no row has split test; allowed: some test rows (the orchestrator's set)")
    return {"client": clients, "group": groups, "labels": labels, "part": part, "images": images, "classes": classes}


def check_settings(settings: Mapping[str, Any], field: str) -> None:
    """Validation of a table dataset (cflcore.external.check_dataset): the rows of the table its natural split
    declares, before any job."""
    federation = settings.get(FEDERATION_KEY)
    if not federation:
        raise ConfigError(f"{field}.loader: table, but no split the dataset runs on declares a table; allowed: a split "
                          "entry with generator natural and its table, classes and image_size")
    check_rows(federation, field, float(settings["test_fraction"]))


@DATASETS.register("table")
def load_table(settings: LoaderSettings) -> RawDataset:
    """A table dataset is prepared by :func:`prepare_dataset`, with the federation its natural split declares."""
    raise ConfigError(f"loader table: no federation declared; allowed: a split entry with generator natural and its "
                      f"table, classes and image_size ({settings.loader})")


def prepare_dataset(settings: Mapping[str, Any], out_path: str | os.PathLike) -> None:
    """The dataset Parquet of a federation table (``settings``: cflcore.config.plan.data_settings, with the natural
    split's declaration under :data:`FEDERATION_KEY`), written atomically, rows in the table's order."""
    from ..data.loaders.prepare import dataset_metadata, dataset_table
    from ..io import write_parquet

    federation = settings.get(FEDERATION_KEY)
    if not federation:
        load_table(LoaderSettings.from_dict({k: v for k, v in settings.items() if k != FEDERATION_KEY}))
    rows = check_rows(federation, FEDERATION_KEY, float(settings["test_fraction"]), load=True)
    raw = RawDataset(rows["images"], rows["labels"], rows["part"], rows["classes"],
                     f"federation table {federation['table']}",
                     writer=np.asarray(["" if c is None else c for c in rows["client"]], dtype=object))
    write_parquet(dataset_table(raw), out_path, metadata=dataset_metadata(raw, str(settings["loader"])))
