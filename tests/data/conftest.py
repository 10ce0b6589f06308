"""Fixtures of the data tests: scikit-learn's digits as the project's dataset Parquet, built once per module."""
from __future__ import annotations

from pathlib import Path

import pytest

from cflcore.data import prepare_dataset


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "digits.parquet"
    prepare_dataset("digits", {"loader": "digits", "test_fraction": 0.2, "data_root": "data", "download": False}, path)
    return path
