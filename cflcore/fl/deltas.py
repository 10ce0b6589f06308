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


def _unround(new: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """Where start + (new − start) does not round back to ``new``, bitwise (-0.0 and NaN kept too)."""
    return torch.ne(_bits(start + (new - start)), _bits(new))


def to_deltas_(buffer: torch.Tensor, start_of: Callable[[int], torch.Tensor], block: int = BLOCK) -> ExactFix:
    """Rows θ_i of ``buffer`` become Δ_i = θ_i − start_of(i), in place; returns what :func:`restore_` needs.

    Two passes, so that the host waits for the device once a round, not once a block (25 × N times for ocfl-cnn):
    the first counts each (row, column block)'s positions that do not round back, on the device, and fetches every
    count in one copy; the second takes those positions with ``torch.nonzero_static`` of the known size (no sync:
    the same positions, in the same order, as ``nonzero``), keeps their values and writes the deltas."""
    fix = ExactFix()
    cols = buffer.shape[1]
    counts = [torch.stack([_unround(buffer[i, a:a + block], start_of(i)[a:a + block]).sum()
                           for a in range(0, cols, block)]) for i in range(buffer.shape[0])]
    sizes = torch.stack(counts).tolist() if counts else []  # the round's one device-to-host copy
    for i in range(buffer.shape[0]):
        row, start = buffer[i], start_of(i)
        index, values = [], []
        for j, a in enumerate(range(0, cols, block)):
            new, s = row[a:a + block], start[a:a + block]
            if sizes[i][j]:
                bad = torch.nonzero_static(_unround(new, s), size=int(sizes[i][j])).squeeze(1)
                index.append((bad + a).to(torch.int32) if cols < 2 ** 31 else bad + a)  # 4 bytes, not 8
                values.append(new.index_select(0, bad))
            new.sub_(s)  # the same float subtraction as new - s
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
