"""Counting host traffic (docs/gpu.md, "No host traffic inside a round"): uploads (host to device) and syncs (the host
waits for the device: a copy to the host, ``.item()``, an op whose output size depends on the data), every one of
which stalls the GPU's queue.

:class:`HostTraffic` is a context manager over two of torch's modes, active together:

* a ``TorchFunctionMode`` that sees ``torch.tensor`` / ``torch.as_tensor`` / ``torch.asarray`` with a ``device``
  other than the CPU: they build a host tensor and copy it below the dispatcher, where no dispatch mode sees them
  (cluster members, a shrinking active set, row lists); each is one upload;
* a ``TorchDispatchMode`` that sees every ATen op (inside ``torch.func.vmap`` too) and counts (a) uploads: explicit
  copies from a CPU tensor to another device (``_to_copy``, ``copy_``) and ops whose result is on another device but
  which read a CPU tensor of at least one dimension (an index or a mask: an implicit transfer); (b) syncs: copies
  from a device to the CPU, ``_local_scalar_dense`` (``.item()``, ``bool()``, ``int()``) of a device tensor, and the
  ops of :data:`DATA_DEPENDENT` on a device tensor (``nonzero``, boolean indexing, ``unique`` ...).

On CUDA it also turns on ``torch.cuda.set_sync_debug_mode("warn")`` and counts CUDA's own warnings
(:attr:`HostTraffic.cuda_syncs`), which see syncs inside kernels' launch code that no op names.
:func:`profiled_host_copies` counts the profiler's ``Memcpy HtoD`` events.

What a CPU can count: on a CPU device nothing is an upload or a sync (host and device are one), so a CPU round
counts 0 of each; the counting logic itself is tested on the ``meta`` device and on a fake CUDA device
(``torch._subclasses.FakeTensorMode``, which needs no GPU: tests/fl/test_host_traffic.py). CUDA's sync debug mode
and the profiler's events need a GPU. Written here because neither torch nor a library counts transfers by op.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils._python_dispatch import TorchDispatchMode

_COPIES = {"aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"}
DATA_DEPENDENT = {"aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2", "aten::unique_dim",
                  "aten::unique_consecutive", "aten::is_nonzero", "aten::equal", "aten::repeat_interleave",
                  "aten::_local_scalar_dense"}
"""Ops on a device tensor whose result the host must wait for (a size or a value)."""
_FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray}


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


class _Dispatch(TorchDispatchMode):
    def __init__(self, owner: "HostTraffic") -> None:
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.owner._quiet:
            return out
        name = func._schema.name
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        _on_host = self.owner.on_host
        if name in _COPIES:
            src = inputs[1] if name == "aten::copy_" and len(inputs) > 1 else inputs[0] if inputs else None
            dst = outputs[0] if outputs else None
            if src is not None and dst is not None and _on_host(src) != _on_host(dst):
                self.owner._count("upload" if _on_host(src) else "sync", name)
            return out
        if any(not _on_host(t) for t in inputs) and (name in DATA_DEPENDENT or (
                name == "aten::index" and any(t.dtype == torch.bool and not _on_host(t) for t in inputs[1:]))):
            self.owner._count("sync", name)
        elif any(not _on_host(t) for t in outputs) and any(_on_host(t) and t.dim() > 0 for t in inputs):
            self.owner._count("upload", name)
        return out


class _Functions(TorchFunctionMode):
    def __init__(self, owner: "HostTraffic") -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _FACTORIES or self.owner._quiet:
            return func(*args, **kwargs)
        device = kwargs.get("device")
        data = args[0] if args else kwargs.get("data", kwargs.get("obj"))
        moved = (device is not None and torch.device(device).type != "cpu"
                 and not (isinstance(data, torch.Tensor) and not self.owner.on_host(data)))
        if not moved:
            return func(*args, **kwargs)
        self.owner._count("upload", f"torch.{func.__name__}")
        self.owner._quiet = True  # the copy below it is this upload
        try:
            return func(*args, **kwargs)
        finally:
            self.owner._quiet = False


class HostTraffic:
    """``with HostTraffic() as t: ...`` -> ``t.uploads`` / ``t.syncs`` and their op names in order
    (``t.upload_ops``, ``t.sync_ops``); on CUDA ``t.cuda_syncs``, the syncs CUDA's sync debug mode warned about.

    ``cpu_is_device=True`` counts, on a CPU, the syncs a CPU can see: the ops of :data:`DATA_DEPENDENT` (and boolean
    indexing) as if CPU tensors lived on a device; copies to the host and ``.tolist()`` / ``.numpy()`` are invisible
    there (a CPU makes no copy), and nothing is an upload."""

    def __init__(self, cpu_is_device: bool = False) -> None:
        self.cpu_is_device = cpu_is_device
        self.uploads = self.syncs = 0
        self.upload_ops: list[str] = []
        self.sync_ops: list[str] = []
        self.cuda_syncs: int | None = None
        self._quiet = False
        self._modes = (_Functions(self), _Dispatch(self))

    def on_host(self, t: torch.Tensor) -> bool:
        return t.device.type == "cpu" and not self.cpu_is_device

    def _count(self, kind: str, name: str) -> None:
        if kind == "upload":
            self.uploads += 1
            self.upload_ops.append(name)
        else:
            self.syncs += 1
            self.sync_ops.append(name)

    def __enter__(self) -> "HostTraffic":
        self._cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        if self._cuda:
            self._debug_mode = torch.cuda.get_sync_debug_mode()
            self._warnings = warnings.catch_warnings(record=True)
            self._caught = self._warnings.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        if self._cuda:
            torch.cuda.set_sync_debug_mode(self._debug_mode)
            self._warnings.__exit__(*exc)
            self.cuda_syncs = sum(1 for w in self._caught if "synchroniz" in str(w.message).lower())

    # the names of the upload-only counter this replaces
    @property
    def count(self) -> int:
        return self.uploads

    @property
    def ops(self) -> list[str]:
        return self.upload_ops


HostToDeviceCounter = HostTraffic


def profiled_host_copies(fn: Callable[[], Any]) -> int:
    """CUDA's ``Memcpy HtoD`` events (torch.profiler) while ``fn`` runs; needs a CUDA device."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if "Memcpy HtoD" in e.name)
