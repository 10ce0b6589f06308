"""The engine's one (N × P) round buffer, turned from trained vectors into deltas and back in place.

The trainer writes the clients' trained vectors θ_i into the buffer; :func:`to_deltas_` overwrites each row
with Δ_i = θ_i − s_i (s_i the row's start vector, rebuilt from the cluster models: no start matrix is
kept), which is what the strategies read (only when one reads them: the round's Gram product is
taken from θ_i and s_i directly, cflcore.clustering.divergence.update_gram); after ``Strategy.aggregate``
:func:`restore_` writes θ_i back for the aggregation (docs/architecture.md §5 step 4). The same float32 subtraction as
before gives bit-identical deltas. s_i + Δ_i does not always round back to θ_i (when the subtraction
rounded: a weight that crossed or approached zero), so the exact θ_i of those positions is kept aside
(index, value): the restored buffer equals the trained vectors bit for bit, and FedAvg's models are
unchanged. Hand-rolled because no library offers an exact in-place round trip; one pass per direction,
column block by column block (temporaries of ``block`` elements only). Works on any device.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

BLOCK = 1 << 20  # columns per block: three float32 temporaries of 4 MB


@dataclass
class ExactFix:
    """Per row: the positions where start + delta does not round back to the trained value (int32 while P < 2^31),
    and that value: 8 bytes per such position (7 % of them with the benchmark's stub updates, 0.14 × the deltas)."""

    index: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)

    @property
    def count(self) -> int:
        return int(sum(int(i.numel()) for i in self.index))


def _bits(x: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float tensor as integers of the same width (a bitwise comparison)."""
    return x.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[x.element_size()])


def to_deltas_(buffer: torch.Tensor, start_of: Callable[[int], torch.Tensor], block: int = BLOCK) -> ExactFix:
    """Rows θ_i of ``buffer`` become Δ_i = θ_i − start_of(i), in place; returns what :func:`restore_` needs."""
    fix = ExactFix()
    for i in range(buffer.shape[0]):
        row, start = buffer[i], start_of(i)
        index, values = [], []
        for a in range(0, row.numel(), block):
            new, s = row[a:a + block], start[a:a + block]
            delta = new - s
            bad = torch.ne(_bits(s + delta), _bits(new)).nonzero().squeeze(1)  # bitwise: -0.0 and NaN kept too
            if bad.numel():
                index.append((bad + a).to(torch.int32) if row.numel() < 2 ** 31 else bad + a)  # 4 bytes, not 8
                values.append(new.index_select(0, bad))
            new.copy_(delta)
        fix.index.append(torch.cat(index) if index else torch.empty(0, dtype=torch.int32, device=buffer.device))
        fix.values.append(torch.cat(values) if values else buffer.new_empty(0))
    return fix


def restore_(buffer: torch.Tensor, start_of: Callable[[int], torch.Tensor], fix: ExactFix, block: int = BLOCK) -> None:
    """Undo :func:`to_deltas_`: rows Δ_i become θ_i again, bit for bit."""
    for i in range(buffer.shape[0]):
        row, start = buffer[i], start_of(i)
        for a in range(0, row.numel(), block):
            row[a:a + block].add_(start[a:a + block])  # s + Δ (IEEE addition commutes: the value checked above)
        if fix.index[i].numel():
            row.index_copy_(0, fix.index[i].long(), fix.values[i])
