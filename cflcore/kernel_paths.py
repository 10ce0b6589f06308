"""The CPU kernel paths a study can train its runs again on, to see whether a verdict survives a change of the CPU's
kernels (issue 67, item 4; docs/design-notes.md, "A verdict's stability under the CPU's kernels"): each a name and
the environment that holds PyTorch to it, the pairs the portability tests use (.ci/run, the ``kernels`` marker).
``ATEN_CPU_CAPABILITY`` picks ATen's vector kernels, ``ONEDNN_MAX_CPU_ISA`` caps oneDNN's (convolutions); both are
read when torch first dispatches, so a job sets them before it imports torch (:func:`hold_kernels`). A study lists
the paths in ``report.kernel_paths``; its own runs, on the machine's native kernels, are the reference."""
from __future__ import annotations

import os
import sys
from typing import Mapping

from .errors import CflError

KERNEL_PATHS: Mapping[str, Mapping[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
"""name -> the environment variables that hold the kernels to it (``default``: ATen's generic path, oneDNN at SSE4.1)."""

NATIVE = "native"
"""The name of the study's own runs, on the kernels the machine picks."""

NAME_PATTERN = "|".join(KERNEL_PATHS)
"""The ``kernels`` wildcard's constraint (rules/train.smk)."""


def kernel_environment(name: str) -> dict[str, str]:
    """The environment of kernel path ``name`` (:data:`KERNEL_PATHS`)."""
    if name not in KERNEL_PATHS:
        raise CflError(f"kernel path {name!r}; allowed: {', '.join(KERNEL_PATHS)}")
    return dict(KERNEL_PATHS[name])


def hold_kernels(name: str) -> None:
    """Set kernel path ``name``'s environment in this process; torch must not be imported yet (it reads them once)."""
    if "torch" in sys.modules:
        raise CflError(f"kernel path {name!r}: torch was imported before its environment was set")
    os.environ.update(kernel_environment(name))
