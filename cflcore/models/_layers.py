"""Layers shared by the networks: a dropout whose masks come from an explicit generator, and a global average pool
with a deterministic CUDA backward."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

MaskSource = Callable[[torch.Size, torch.dtype, torch.device], torch.Tensor]


class GeneratorDropout(nn.Module):
    """Inverted dropout (same maths as ``nn.Dropout``) whose keep-masks never come from the global RNG.

    The trainer sets ``mask_source`` (a function shape -> uniform [0, 1) tensor drawn from the client's
    ``torch.Generator``) for the loop trainer, or ``mask`` (a pre-drawn uniform tensor) inside
    ``torch.func.vmap``, so both trainers can draw identical masks. With neither set in training mode
    it falls back to a fixed-seed private generator (never the global RNG).
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout p must be in [0, 1), got {p}")
        self.p = float(p)
        self.mask_source: MaskSource | None = None
        self.mask: torch.Tensor | None = None
        self._fallback: torch.Generator | None = None

    def uniform(self, shape: torch.Size, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        if self.mask_source is not None:
            return self.mask_source(shape, dtype, device)
        if self._fallback is None:
            self._fallback = torch.Generator().manual_seed(0)
        return torch.rand(shape, generator=self._fallback, dtype=dtype).to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        u = self.mask if self.mask is not None else self.uniform(x.shape, x.dtype, x.device)
        return x * (u >= self.p).to(x.dtype) / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class GlobalAvgPool(nn.Module):
    """``nn.AdaptiveAvgPool2d(1)``, except on CUDA: there the mean over the spatial dimensions, whose backward is
    deterministic. ``adaptive_avg_pool2d``'s CUDA backward has no deterministic kernel (it raises under
    ``torch.use_deterministic_algorithms(True)``, which ``engine.deterministic`` sets on CUDA). On a CPU the adaptive
    pool runs as before, so CPU results keep their bytes; no parameters, so state dicts are unchanged."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return global_avg_pool(x)


def global_avg_pool(x: torch.Tensor) -> torch.Tensor:
    """:class:`GlobalAvgPool` as a function (for a network whose forward pools without a module)."""
    if x.is_cuda:
        return x.mean(dim=(-2, -1), keepdim=True)
    return nn.functional.adaptive_avg_pool2d(x, 1)


def dropout_modules(model: nn.Module) -> list[GeneratorDropout]:
    """The model's GeneratorDropout modules in registration (= forward, for our sequential nets) order."""
    return [m for m in model.modules() if isinstance(m, GeneratorDropout)]
