"""The optional extras of pyproject.toml: whether one is installed, and the one-line error naming it.

Config validation asks here before any job starts, so it needs nothing of the code that uses the extra."""
from __future__ import annotations

import importlib.util

from .errors import ConfigError

TENSORBOARD_EXTRA = "pip install -e '.[tensorboard]'"


def tensorboard_available() -> bool:
    """Whether the ``tensorboard`` extra is installed (torch.utils.tensorboard needs the tensorboard package)."""
    return importlib.util.find_spec("tensorboard") is not None


def check_tensorboard(field: str = "monitor.tensorboard") -> None:
    """One-line ConfigError when TensorBoard is switched on but its extra is not installed."""
    if not tensorboard_available():
        raise ConfigError(f"{field}: true needs the tensorboard package, which is not installed; install the extra "
                          f"with {TENSORBOARD_EXTRA} or set {field}: false")
