"""Counting host-to-device transfers (docs/gpu.md, "No host traffic inside a round"): a round should send nothing
from the host once the data is on the device; every transfer waits for the GPU.

:class:`HostToDeviceCounter` is a ``TorchDispatchMode`` that sees every ATen op while active and counts (a) explicit
copies from a CPU tensor to another device (``_to_copy``, ``copy_``) and (b) ops whose result is on another device but
which read a CPU tensor of at least one dimension (an index or a mask: an implicit transfer). It works on any device,
a CPU included (where there is nothing to count) and the ``meta`` device (which its own test uses), and sees inside
``torch.func.vmap``. :func:`profiled_host_copies` counts CUDA's own record of the same thing, the profiler's
``Memcpy HtoD`` events, on a GPU. Written here because neither torch nor a library counts transfers by op.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten
from torch.utils._python_dispatch import TorchDispatchMode

_COPIES = {"aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"}


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


class HostToDeviceCounter(TorchDispatchMode):
    """``with HostToDeviceCounter() as c: ...`` -> ``c.count`` transfers, ``c.ops`` their op names in order."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._schema.name
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        on_device = [t for t in outputs if t.device.type != "cpu"]
        if on_device:
            if name in _COPIES:
                src = inputs[1] if name == "aten::copy_" and len(inputs) > 1 else inputs[0] if inputs else None
                moved = src is not None and src.device.type == "cpu"
            else:
                moved = any(t.device.type == "cpu" and t.dim() > 0 for t in inputs)
            if moved:
                self.count += 1
                self.ops.append(name)
        return out


def profiled_host_copies(fn: Callable[[], Any]) -> int:
    """CUDA's ``Memcpy HtoD`` events (torch.profiler) while ``fn`` runs; needs a CUDA device."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if "Memcpy HtoD" in e.name)
