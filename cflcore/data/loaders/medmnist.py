"""PathMNIST and BloodMNIST, MedMNIST v2 at 28×28 (docs/architecture.md §3): ``{data_root}/pathmnist.npz`` resp.
``bloodmnist.npz`` with keys ``train_images``, ``train_labels``, ``val_images``, ``val_labels``, ``test_images``,
``test_labels``. Our ``train`` part is MedMNIST's ``train`` split only; ``val`` is not used (no stage selects
models on it, and 000 does not say it was merged); ``test`` is the orchestrator set.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from ...errors import DataError
from .base import DATASETS, LoaderSettings, RawDataset, SourceFacts, concat_parts, declares_facts


MEDMNIST_KEYS = ["train_images", "train_labels", "val_images", "val_labels", "test_images", "test_labels"]


def _medmnist_download(flag: str, root: Path) -> None:
    import medmnist

    cls = getattr(medmnist, medmnist.INFO[flag]["python_class"])
    try:
        root.mkdir(parents=True, exist_ok=True)
        cls(split="train", root=str(root), download=True, size=28)
    except Exception as e:  # noqa: BLE001 - network / integrity failures of any kind become one DataError
        raise DataError(f"{flag}: download into {root} failed ({e.__class__.__name__})") from None


def read_medmnist_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in MEDMNIST_KEYS if k not in npz.files]
            if missing:
                raise DataError(f"{path}: MedMNIST file lacks keys {', '.join(missing)}")
            return {k: np.asarray(npz[k]) for k in MEDMNIST_KEYS}
    except DataError:
        raise
    except (OSError, EOFError, ValueError, zlib.error, KeyError) as e:
        raise DataError(f"{path}: corrupt or truncated MedMNIST .npz ({e.__class__.__name__})") from None
    except Exception as e:  # noqa: BLE001 - zipfile.BadZipFile and friends
        raise DataError(f"{path}: corrupt or truncated MedMNIST .npz ({e.__class__.__name__})") from None


def _medmnist_part(images: np.ndarray, labels: np.ndarray, path: Path, key: str) -> tuple[np.ndarray, np.ndarray]:
    """MedMNIST stores (n, H, W) for grey and (n, H, W, 3) for colour images; labels (n, 1). Returns (n, C, H, W)."""
    if images.ndim == 3:
        images = images[:, None, :, :]
    elif images.ndim == 4 and images.shape[-1] in (1, 3):
        images = images.transpose(0, 3, 1, 2)
    else:
        raise DataError(f"{path}: {key}_images has shape {images.shape}; expected (n, H, W) or (n, H, W, 3)")
    labels = labels.reshape(len(labels), -1)
    if images.dtype != np.uint8 or labels.shape[1] != 1 or len(labels) != len(images):
        raise DataError(f"{path}: {key}_labels {labels.shape} / {key}_images {images.dtype} "
                        "do not form a single-label uint8 dataset")
    return np.ascontiguousarray(images), labels[:, 0].astype(np.int64)


def load_medmnist(settings: LoaderSettings, flag: str) -> RawDataset:
    import medmnist

    path = settings.data_root / f"{flag}.npz"
    if not path.exists() and settings.download:
        _medmnist_download(flag, settings.data_root)
    if not path.exists():
        raise DataError(f"{flag}: expected {path} with keys {', '.join(MEDMNIST_KEYS)} "
                        "(set download: true or place the file there)")
    arrays = read_medmnist_npz(path)
    info = medmnist.INFO[flag]
    classes = [info["label"][str(i)] for i in range(len(info["label"]))]
    train = _medmnist_part(arrays["train_images"], arrays["train_labels"], path, "train")
    test = _medmnist_part(arrays["test_images"], arrays["test_labels"], path, "test")
    return concat_parts(train, test, classes, f"MedMNIST v2 {flag} 28x28 ({path})")


@DATASETS.register("pathmnist")
def load_pathmnist(settings: LoaderSettings) -> RawDataset:
    """PathMNIST (9 classes, RGB 28×28); train part = MedMNIST train split, test part = test split."""
    return load_medmnist(settings, "pathmnist")


@DATASETS.register("bloodmnist")
def load_bloodmnist(settings: LoaderSettings) -> RawDataset:
    """BloodMNIST (8 classes, RGB 28×28); train part = MedMNIST train split, test part = test split."""
    return load_medmnist(settings, "bloodmnist")


MEDMNIST_CLASSES = {"pathmnist": 9, "bloodmnist": 8}
"""Class counts of the MedMNIST flags (``medmnist.INFO[flag]["label"]``; a test compares them): validation never
imports medmnist."""


@declares_facts(*MEDMNIST_CLASSES)
def _medmnist_facts(settings: LoaderSettings) -> SourceFacts:
    """The train count: the first dimension of ``train_labels`` from its .npy header inside the .npz (no array is
    read)."""
    import zipfile

    path = settings.data_root / f"{settings.loader}.npz"
    n = None
    try:
        with zipfile.ZipFile(path) as zf, zf.open("train_labels.npy") as fh:
            version = np.lib.format.read_magic(fh)
            shape = (np.lib.format.read_array_header_1_0(fh) if version == (1, 0)
                     else np.lib.format.read_array_header_2_0(fh))[0]
        n = int(shape[0]) if shape else None
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        pass
    return SourceFacts(MEDMNIST_CLASSES[settings.loader], n, path.exists(), True, str(path))
