"""A federated round's FLOP floor (docs/gpu.md, "Speed against the FLOP floor"): the FLOPs a round must do, divided by
the rate of an n x n GEMM on the same device. ``cfl doctor`` and benchmarks/device_speed.py both measure against it.

A round's FLOPs: the forward + backward FLOPs of one sample (``torch.utils.flop_counter``) times the samples it
trains, plus the forward FLOPs of the samples it evaluates (each client's test set and the orchestrator set once).
ratio = seconds / floor (1 = the round runs at GEMM speed).
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sample_flops(model: str, shape: tuple[int, int, int], n_classes: int, batch: int) -> tuple[float, float]:
    """(forward + backward, forward) FLOPs of one sample of a registered model (a batch of ``batch`` on the CPU)."""
    from ..models import build_model

    net = build_model(model, shape[0], shape[1:], n_classes)
    x, y = torch.randn(batch, *shape), torch.randint(0, n_classes, (batch,))
    with FlopCounterMode(display=False) as train:
        F.cross_entropy(net(x), y).backward()
    with torch.no_grad(), FlopCounterMode(display=False) as fwd:
        net(x)
    return train.get_total_flops() / batch, fwd.get_total_flops() / batch


def gemm_flops(device: torch.device, repeats: int = 7, n: int = 4096) -> float:
    """FLOP/s of an n x n fp32 GEMM (torch.mm, torch's current matmul settings) on ``device``: the best of ``repeats``
    (each timing covers 10 products on CUDA, synchronised; n = 2048 and one product on a CPU)."""
    n = n if device.type == "cuda" else 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    calls = 10 if device.type == "cuda" else 1

    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            a @ b
        sync(device)
        return time.perf_counter() - t0

    run()
    return 2 * n ** 3 * calls / min(run() for _ in range(repeats))


def round_flops(train_flops: float, forward_flops: float, trained_samples: int, epochs: int,
                evaluated_samples: int) -> float:
    """A round's FLOPs: every trained sample's forward and backward for ``epochs`` epochs, every evaluated one's
    forward once."""
    return train_flops * trained_samples * epochs + forward_flops * evaluated_samples
