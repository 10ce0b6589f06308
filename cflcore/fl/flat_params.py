"""Flat-vector views of a network's state (the engine's unit of exchange, cflcore/strategies/base.py).

A *full* vector holds every trainable parameter, then every floating-point buffer (BatchNorm running
mean/var), in ``named_parameters`` / ``named_buffers`` order. Integer buffers (``num_batches_tracked``)
are not exchanged: with a fixed BN momentum they never affect the numbers. The engine cuts the full
vector into three disjoint index sets (see :func:`ModelLayout.partition`):

* ``shared``  – what strategies see and the server aggregates (the strategy-facing "model");
* ``extra``   – float BN buffers left out of the deltas (``bn_buffers_in_delta: false``): still
  averaged over a cluster's members every round, but invisible to clustering and the server optimiser;
* ``local``   – FedBN (``bn_stats: local``; Li et al. 2021): *all* BatchNorm tensors (affine weight/bias
  and running statistics) stay with each client across rounds and are never aggregated.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Entry:
    name: str
    shape: tuple[int, ...]
    offset: int
    numel: int
    is_param: bool
    is_bn: bool


@dataclass(frozen=True)
class Partition:
    """Index tensors (into the full vector) of the shared / extra / local parts."""

    shared: torch.Tensor
    extra: torch.Tensor
    local: torch.Tensor


@dataclass(frozen=True)
class ModelLayout:
    entries: tuple[Entry, ...]
    n_full: int

    @classmethod
    def of(cls, model: nn.Module) -> "ModelLayout":
        bn_prefixes = {name for name, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)}
        entries, off = [], 0

        def is_bn(name: str) -> bool:
            return name.rpartition(".")[0] in bn_prefixes

        for name, p in model.named_parameters():
            entries.append(Entry(name, tuple(p.shape), off, p.numel(), True, is_bn(name)))
            off += p.numel()
        for name, b in model.named_buffers():
            if b is not None and b.is_floating_point():
                entries.append(Entry(name, tuple(b.shape), off, b.numel(), False, is_bn(name)))
                off += b.numel()
        return cls(tuple(entries), off)

    @property
    def params(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.is_param)

    @property
    def buffers(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if not e.is_param)

    @property
    def n_trainable(self) -> int:
        return sum(e.numel for e in self.params)

    @property
    def has_bn(self) -> bool:
        return any(e.is_bn for e in self.entries)

    def partition(self, bn_buffers_in_delta: bool, bn_local: bool) -> Partition:
        shared, extra, local = [], [], []
        for e in self.entries:
            rng = list(range(e.offset, e.offset + e.numel))
            if bn_local and e.is_bn:
                local += rng
            elif e.is_param or bn_buffers_in_delta:
                shared += rng
            else:
                extra += rng
        as_t = lambda xs: torch.tensor(xs, dtype=torch.long)  # noqa: E731
        return Partition(as_t(shared), as_t(extra), as_t(local))

    def layer_sizes(self, bn_buffers_in_delta: bool, bn_local: bool) -> tuple[int, ...]:
        """Sizes of the shared vector's per-layer blocks (consecutive entries of one module form a
        layer): what Louvain CFL's per-layer trusted distance needs (002 eq. 2)."""
        sizes: list[int] = []
        last = None
        for e in self.entries:
            if (bn_local and e.is_bn) or not (e.is_param or bn_buffers_in_delta):
                continue
            prefix = e.name.rpartition(".")[0]
            if prefix == last:
                sizes[-1] += e.numel
            else:
                sizes.append(e.numel)
                last = prefix
        return tuple(sizes)

    def array_sizes(self, bn_buffers_in_delta: bool, bn_local: bool) -> tuple[int, ...]:
        """Sizes of the shared vector's per-array blocks (one per parameter or shared buffer tensor, a module's
        weight and bias apart): 002's authors' eq. 2 takes one factor per weight array (``layer_sizes`` merges a
        module's arrays into one layer)."""
        return tuple(e.numel for e in self.entries
                     if not (bn_local and e.is_bn) and (e.is_param or bn_buffers_in_delta))

    # ----- module <-> vector ----------------------------------------------------------------------
    def tensors(self, model: nn.Module) -> list[torch.Tensor]:
        """The module's parameter and float-buffer tensors, in layout order."""
        params = dict(model.named_parameters())
        buffers = dict(model.named_buffers())
        return [params[e.name] if e.is_param else buffers[e.name] for e in self.entries]

    def flatten(self, model: nn.Module) -> torch.Tensor:
        return torch.cat([t.detach().reshape(-1) for t in self.tensors(model)])

    @torch.no_grad()
    def load(self, model: nn.Module, vector: torch.Tensor) -> None:
        """Copy ``vector`` into the module (copies: the module never aliases the vector, see docs/architecture.md §6)."""
        for e, t in zip(self.entries, self.tensors(model)):
            t.copy_(vector[e.offset:e.offset + e.numel].view(e.shape))

    def split_rows(self, matrix: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Views (n, *shape) of a (n, n_full) matrix: (params, float buffers) dicts for functional_call."""
        n = matrix.shape[0]
        params, buffers = {}, {}
        for e in self.entries:
            view = matrix[:, e.offset:e.offset + e.numel].view(n, *e.shape)
            (params if e.is_param else buffers)[e.name] = view
        return params, buffers

    def state_dict(self, model_template: nn.Module, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        """A full ``state_dict`` (integer buffers from the template) holding ``vector``'s values, on CPU."""
        sd = {k: v.detach().clone().cpu() for k, v in model_template.state_dict().items()}
        for e in self.entries:
            sd[e.name] = vector[e.offset:e.offset + e.numel].detach().reshape(e.shape).clone().cpu()
        return sd
