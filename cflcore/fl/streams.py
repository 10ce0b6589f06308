"""The one source of every client's random streams (docs/architecture.md §5 step 2): the batch order of each local
epoch and the dropout masks drawn after it. The engine's trainers and every benchmark's hand-written rounds
(benchmarks/device_speed.py, benchmarks/round_speed.py) take them from a :class:`ClientStreams`, so a benchmark's
reference and plain rounds compute the engine's round on whatever device it runs: on CUDA the generators are CUDA
generators, whose numbers differ from a CPU generator's from the same seed.

A client's seed comes from (root seed, round, client) (:func:`train_seed`); its epoch's generator from (client seed,
epoch) (:func:`epoch_generator`): the numbers do not depend on execution order, vectorisation or resumption.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

STREAM_TRAIN = 0x7A
"""The stream id of local training in :func:`train_seed` (the engine's other streams are in cflcore.fl.engine and cflcore.fl.run)."""


def derive_seed(*stream: int) -> int:
    """A 63-bit seed from integers (numpy SeedSequence hashing): independent streams per (seed, round, ...)."""
    state = np.random.SeedSequence([int(s) for s in stream]).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


def train_seed(seed: int, rnd: int, client: int) -> int:
    """The seed of one client's local training in one round of a run seeded ``seed``."""
    return derive_seed(seed, STREAM_TRAIN, rnd, client)


def epoch_generator(client_seed: int, epoch: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of one client's epoch on the training device, seeded from (client seed, epoch): it draws the
    epoch's permutation and dropout masks where they are used, so a round sends nothing from the host. On a CPU it
    is the CPU generator of earlier versions (the same bytes); a CUDA generator draws other numbers, from the same
    seeds, the same on every card of one model."""
    return torch.Generator(device=device).manual_seed(derive_seed(client_seed, epoch))


def epoch_order(client_seed: int, epoch: int, n: int,
                device: torch.device | str = "cpu") -> tuple[torch.Generator, torch.Tensor]:
    """A client's batch order in one epoch: the epoch's generator and its permutation of the n training
    rows, both on ``device`` (:meth:`ClientStreams.order` with the default factory)."""
    gen = epoch_generator(client_seed, epoch, device)
    return gen, torch.randperm(n, generator=gen, device=gen.device)


def uniform_source(gen: torch.Generator):
    """Dropout mask source: uniform [0, 1) numbers from ``gen``, drawn on the generator's device (the training
    device, :func:`epoch_generator`) in fp32 or fp64."""

    def draw(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        wide = torch.float64 if dtype == torch.float64 else torch.float32
        return torch.rand(tuple(shape), generator=gen, dtype=wide, device=gen.device).to(device=device, dtype=dtype)

    return draw


GeneratorFactory = Callable[[int, int, torch.device], torch.Generator]
"""(client seed, epoch, device) -> the epoch's generator: :func:`epoch_generator`, or a substitute (tests)."""


@dataclass(frozen=True)
class ClientStreams:
    """The random streams of a job's local training on ``device``: every trainer holds one (``Trainer.streams``) and
    a benchmark's hand-written round takes the engine's, so both draw the same numbers."""

    device: torch.device
    factory: GeneratorFactory = epoch_generator

    def generator(self, client_seed: int, epoch: int) -> torch.Generator:
        return self.factory(client_seed, epoch, self.device)

    def order(self, client_seed: int, epoch: int, n: int) -> tuple[torch.Generator, torch.Tensor]:
        """The epoch's generator (it draws the dropout masks next) and its permutation of n rows, on the device."""
        gen = self.generator(client_seed, epoch)
        return gen, torch.randperm(n, generator=gen, device=gen.device)

    def masks(self, gen: torch.Generator):
        """The dropout mask source of an epoch (:func:`uniform_source`)."""
        return uniform_source(gen)
