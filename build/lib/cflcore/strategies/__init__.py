"""CFL methods, one file each, registered by name with ``@register_strategy("name")``.

Every module in this package is imported on first registry lookup, so a new method is one new file
here plus one entry under ``algorithms:`` in the config.
"""
from ..fl.strategy import STRATEGIES, Strategy, build_strategy, register_strategy  # noqa: F401
