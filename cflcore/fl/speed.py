"""A federated round's floors (docs/gpu.md, "Speed against the roofline floor").

* The FLOP floor (benchmarks/device_speed.py): the FLOPs a round must do divided by the rate of an n x n IEEE fp32
  GEMM on the same device. A round's FLOPs: the forward + backward FLOPs of one sample (``torch.utils.flop_counter``)
  times the samples it trains, plus the forward FLOPs of the samples it evaluates (each client's test set and the
  orchestrator set once). ratio = seconds / floor (1 = the round runs at GEMM speed).
* The roofline floor (``cfl doctor``'s speed check; :func:`round_floor`, pure arithmetic over :class:`LayerCosts` and
  :class:`DeviceRates`): the convolutions at a measured TF32 convolution rate, the Linear layers at the IEEE GEMM rate
  or their per-client weights' bytes at the copy bandwidth, whichever is longer, the optimiser's bytes and the
  evaluation. Each rate is measured with its precision pinned (:func:`pinned_tf32`), whatever the global flags say.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _counted_passes(model: str, shape: tuple[int, int, int], n_classes: int,
                    batch: int) -> tuple[torch.nn.Module, FlopCounterMode, FlopCounterMode]:
    """A registered model built for ``shape`` and ``n_classes``, and the FLOP counters of its training pass (forward,
    cross-entropy, backward) and of its forward pass (no grad) on one random CPU batch of ``batch``: what
    :func:`sample_flops` and :func:`layer_costs` read."""
    from ..models import build_model

    net = build_model(model, shape[0], shape[1:], n_classes)
    x, y = torch.randn(batch, *shape), torch.randint(0, n_classes, (batch,))
    with FlopCounterMode(display=False) as train:
        F.cross_entropy(net(x), y).backward()
    with torch.no_grad(), FlopCounterMode(display=False) as fwd:
        net(x)
    return net, train, fwd


def sample_flops(model: str, shape: tuple[int, int, int], n_classes: int, batch: int) -> tuple[float, float]:
    """(forward + backward, forward) FLOPs of one sample of a registered model (a batch of ``batch`` on the CPU)."""
    _, train, fwd = _counted_passes(model, shape, n_classes, batch)
    return train.get_total_flops() / batch, fwd.get_total_flops() / batch


def gemm_flops(device: torch.device, repeats: int = 7, n: int = 4096) -> float:
    """FLOP/s of an n x n IEEE fp32 GEMM (torch.mm with TF32 pinned off, :func:`pinned_tf32`, whatever the global flags)
    on ``device``: the best of ``repeats`` (each timing covers 10 products on CUDA, synchronised; n = 2048 and one
    product on a CPU)."""
    n = n if device.type == "cuda" else 2048
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    with pinned_tf32(matmul=False, cudnn=False):
        return _best_rate(device, 2.0 * n ** 3, lambda: a @ b, 10 if device.type == "cuda" else 1, repeats)


def round_flops(train_flops: float, forward_flops: float, trained_samples: int, epochs: int,
                evaluated_samples: int) -> float:
    """A round's FLOPs: every trained sample's forward and backward for ``epochs`` epochs, every evaluated one's
    forward once."""
    return train_flops * trained_samples * epochs + forward_flops * evaluated_samples


# ----- the roofline floor (docs/gpu.md, "Speed against the roofline floor") ------------------------------------------
DTYPE_BYTES = 4  # fp32 parameters, gradients and optimiser buffers

WEIGHT_PASS_BYTES = 3 * DTYPE_BYTES
"""Bytes a parameter moves a local step in the forward and backward passes when every client has its own weights (the
vmap trainer: no weight is shared across a chunk's clients, so none stays in cache from one client to the next): the
forward reads w (4), the backward reads w again for the input gradient (4) and writes the weight gradient g (4)."""

OPTIMIZER_STEP_BYTES = {"sgd": 3 * DTYPE_BYTES, "sgd_momentum": 5 * DTYPE_BYTES, "adam": 7 * DTYPE_BYTES}
"""Bytes a parameter moves in one fused optimiser step (cflcore.fl.optim.optimizer_step), the least any implementation
moves: SGD reads w and g and writes w (12); momentum also reads and writes its buffer m (20); Adam reads w, g, m, v and
writes w, m, v (28). With :data:`WEIGHT_PASS_BYTES`, plain SGD with per-client weights moves 12 + 12 = 24 bytes a
parameter a local step (the issue's figure for FC1: 245 GB a round of ocfl-cnn at N = 15)."""


@dataclass(frozen=True)
class LayerCosts:
    """Per-sample FLOPs of a model split by the kind of product, and its parameter counts (:func:`layer_costs`)."""

    conv_train: float  # forward + backward FLOPs of the convolutions, one sample
    conv_forward: float
    fc_train: float  # forward + backward FLOPs of the matrix products (Linear layers), one sample
    fc_forward: float
    n_params: int
    fc_params: int  # the Linear layers' parameters (weights and biases)


@dataclass(frozen=True)
class DeviceRates:
    """Measured rates of a device (:func:`device_rates`), each at a pinned precision."""

    conv_flops: float  # FLOP/s of a convolution with TF32 allowed (cuDNN's default; IEEE fp32 on a CPU)
    fc_flops: float  # FLOP/s of an IEEE fp32 GEMM (TF32 off)
    copy_bytes: float  # B/s of a device-to-device copy, bytes read plus bytes written


@dataclass(frozen=True)
class Floor:
    """A round's roofline floor in seconds and its parts (they run one after the other, so they add)."""

    conv: float  # the convolutions' FLOPs (training and evaluation) at the conv rate
    fc: float  # the training's matrix products: their FLOPs at the fc rate or their weight bytes at the copy rate
    optimizer: float  # the optimiser steps' bytes at the copy rate
    evaluation: float  # the evaluation's matrix products at the fc rate
    fc_bound: str  # "flops" or "bytes": what bounds the fc part

    @property
    def seconds(self) -> float:
        return self.conv + self.fc + self.optimizer + self.evaluation

    def parts(self) -> dict[str, float]:
        """Each part in seconds, and the total."""
        return {"conv": self.conv, "fc": self.fc, "optimizer": self.optimizer, "evaluation": self.evaluation,
                "total": self.seconds}

    def line(self) -> str:
        """The floor and its parts in ms, one line."""
        return (f"floor {self.seconds * 1e3:.1f} ms = conv {self.conv * 1e3:.1f} + fc {self.fc * 1e3:.1f} "
                f"({self.fc_bound}-bound) + optimiser {self.optimizer * 1e3:.1f} + evaluation {self.evaluation * 1e3:.1f}")


def optimizer_bytes(kind: str, momentum: float = 0.0) -> int:
    """:data:`OPTIMIZER_STEP_BYTES` of a client optimiser (cflcore.fl.optim.ClientOptimizer's ``kind``, ``momentum``)."""
    if kind == "adam":
        return OPTIMIZER_STEP_BYTES["adam"]
    return OPTIMIZER_STEP_BYTES["sgd_momentum" if momentum else "sgd"]


def round_floor(costs: LayerCosts, rates: DeviceRates, *, n_clients: int, n_train: int, batch_size: int, epochs: int,
                evaluated_samples: int, optimizer_step_bytes: int = OPTIMIZER_STEP_BYTES["sgd"]) -> Floor:
    """The roofline floor of one round of ``n_clients`` clients of ``n_train`` samples each (pure arithmetic):

    * conv: every trained sample's convolution FLOPs for ``epochs`` epochs plus every evaluated sample's forward ones,
      at ``rates.conv_flops``;
    * fc: the training's matrix-product FLOPs at ``rates.fc_flops``, or, where longer, their weights' bytes at
      ``rates.copy_bytes``: :data:`WEIGHT_PASS_BYTES` per Linear parameter a client a local step;
    * optimizer: ``optimizer_step_bytes`` (:func:`optimizer_bytes`) per parameter a client a local step at the copy rate;
    * evaluation: every evaluated sample's forward matrix products at ``rates.fc_flops`` (a cluster model's weights are
      shared by its whole evaluation batch: FLOP-bound).
    A local step is one mini-batch: ``epochs × ceil(n_train / batch_size)`` a client."""
    steps = n_clients * epochs * -(-n_train // batch_size)
    trained = n_clients * n_train * epochs
    conv = (costs.conv_train * trained + costs.conv_forward * evaluated_samples) / rates.conv_flops
    fc_compute = costs.fc_train * trained / rates.fc_flops
    fc_memory = costs.fc_params * WEIGHT_PASS_BYTES * steps / rates.copy_bytes
    optimizer = costs.n_params * optimizer_step_bytes * steps / rates.copy_bytes
    evaluation = costs.fc_forward * evaluated_samples / rates.fc_flops
    return Floor(conv=conv, fc=max(fc_compute, fc_memory), optimizer=optimizer, evaluation=evaluation,
                 fc_bound="bytes" if fc_memory > fc_compute else "flops")


def _is_conv(op: Any) -> bool:
    return "convolution" in str(op)


def layer_costs(model: str, shape: tuple[int, int, int], n_classes: int, batch: int) -> LayerCosts:
    """:class:`LayerCosts` of a registered model (``torch.utils.flop_counter`` on a CPU batch of ``batch``): the
    convolutions' FLOPs (``aten.convolution`` and its backward) apart from every other counted product (the Linear
    layers' ``mm`` / ``addmm``)."""
    net, train, fwd = _counted_passes(model, shape, n_classes, batch)

    def split(counter: FlopCounterMode) -> tuple[float, float]:
        ops = counter.get_flop_counts().get("Global", {})
        conv = sum(v for op, v in ops.items() if _is_conv(op))
        return conv / batch, (sum(ops.values()) - conv) / batch

    (conv_train, fc_train), (conv_fwd, fc_fwd) = split(train), split(fwd)
    linear = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    return LayerCosts(conv_train=conv_train, conv_forward=conv_fwd, fc_train=fc_train, fc_forward=fc_fwd,
                      n_params=sum(p.numel() for p in net.parameters()),
                      fc_params=sum(p.numel() for m in linear for p in m.parameters()))


@contextlib.contextmanager
def pinned_tf32(matmul: bool, cudnn: bool) -> Iterator[None]:
    """``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32`` set for a measurement and
    restored after it, whatever they were (a rate must not follow the global flags)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _best_rate(device: torch.device, work: float, call: Callable[[], Any], calls: int, repeats: int) -> float:
    """``work`` per call / the best of ``repeats`` timings of ``calls`` calls (synchronised), after one warm-up."""
    def run() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        sync(device)
        return time.perf_counter() - t0

    run()
    return work * calls / min(run() for _ in range(repeats))


def conv_flops(device: torch.device, repeats: int = 7) -> float:
    """FLOP/s of a 3x3 convolution (fp32 tensors, TF32 allowed in cuDNN: its default, what a run's convolutions use) on
    ``device``: 128 -> 128 channels on a batch of 128 at 32 x 32 on CUDA, 32 -> 32 on 8 at 16 x 16 on a CPU."""
    n, c, hw = (128, 128, 32) if device.type == "cuda" else (8, 32, 16)
    x = torch.randn(n, c, hw, hw, device=device)
    w = torch.randn(c, c, 3, 3, device=device)
    work = 2.0 * n * c * c * 9 * hw * hw
    with pinned_tf32(matmul=False, cudnn=True), torch.no_grad():
        return _best_rate(device, work, lambda: F.conv2d(x, w, padding=1), 10 if device.type == "cuda" else 3, repeats)


def copy_bytes(device: torch.device, repeats: int = 7) -> float:
    """B/s of a device-to-device copy (bytes read plus bytes written) of 256 MiB on CUDA, 32 MiB on a CPU."""
    numel = (2 ** 26) if device.type == "cuda" else (2 ** 23)
    src, dst = torch.randn(numel, device=device), torch.empty(numel, device=device)
    return _best_rate(device, 2.0 * numel * DTYPE_BYTES, lambda: dst.copy_(src), 10 if device.type == "cuda" else 1,
                      repeats)


def device_rates(device: torch.device, repeats: int = 7, threads: int = 1) -> DeviceRates:
    """The three rates of :func:`round_floor`, measured on ``device`` at their pinned precisions; on a CPU with
    ``threads`` torch threads (a run's ``engine.threads``, default 1; the caller's count is restored after): on a
    shared 2-core CPU, two threads made the first convolutions 80 ms each instead of 0.2 ms."""
    saved = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(threads)
    try:
        return DeviceRates(conv_flops=conv_flops(device, repeats), fc_flops=gemm_flops(device, repeats),
                           copy_bytes=copy_bytes(device, repeats))
    finally:
        torch.set_num_threads(saved)
