"""CFL methods, one file each, registered by name with ``@register_strategy("name")``.

The contract every method implements, and the registry, are in ``base.py``. A lookup by name imports the one module
that registers the name (listing the names imports them all), so a new method is one new file here plus one entry
under ``algorithms:`` in the config.
"""
from .base import STRATEGIES, Strategy, build_strategy, register_strategy  # noqa: F401
