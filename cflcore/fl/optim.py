"""Client optimisers as one fused multi-tensor step (torch._foreach_*), shared by both trainers.

The arithmetic copies ``torch.optim.SGD`` / ``torch.optim.Adam`` (foreach path, L2 weight decay,
no nesterov/amsgrad/maximize) op for op, so results are the same numbers (tests/fl/test_trainers.py).
It is hand-rolled rather than calling torch.optim so that the same step runs on the stacked
(n_clients, ...) tensors of the vmap trainer, where every element is updated independently.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ConfigError


@dataclass(frozen=True)
class ClientOptimizer:
    """Local optimiser settings (000 Appendix A.1 Table 3)."""

    kind: str  # datasets.*.optimizer
    lr: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.kind not in ("sgd", "adam"):
            raise ConfigError(f"datasets.*.optimizer: {self.kind!r} is not allowed; allowed: sgd, adam")

    @classmethod
    def from_training(cls, training: Any) -> "ClientOptimizer":
        """From a dataset's typed training recipe (cflcore.settings.TrainingSettings)."""
        return cls(kind=training.optimizer, lr=float(training.lr), momentum=float(training.momentum or 0.0),
                   weight_decay=float(training.weight_decay or 0.0),
                   betas=tuple(float(b) for b in training.betas),  # type: ignore[arg-type]
                   eps=float(training.eps))


@dataclass
class OptimizerState:
    """Per-tensor state of one optimiser run; ``step`` counts steps taken (Adam bias correction)."""

    step: int = 0
    momentum: list[torch.Tensor] | None = None
    exp_avg: list[torch.Tensor] | None = None
    exp_avg_sq: list[torch.Tensor] | None = None
    extra: dict = field(default_factory=dict)

    def select(self, rows: torch.Tensor) -> "OptimizerState":
        """The state of a subset of stacked clients (vmap trainer's shrinking active set)."""
        pick = lambda ts: None if ts is None else [t.index_select(0, rows) for t in ts]  # noqa: E731
        return OptimizerState(self.step, pick(self.momentum), pick(self.exp_avg), pick(self.exp_avg_sq))

    def scatter(self, rows: torch.Tensor, sub: "OptimizerState") -> None:
        for name in ("momentum", "exp_avg", "exp_avg_sq"):
            mine, theirs = getattr(self, name), getattr(sub, name)
            if theirs is None:
                continue
            if mine is None:
                raise RuntimeError("optimizer state initialised on a subset only")
            for a, b in zip(mine, theirs):
                a.index_copy_(0, rows, b)


def round_lr(lr: float, lr_decay: float, rnd: int) -> float:
    """The clients' learning rate in 0-based round ``rnd``: ``lr * lr_decay^(rnd + 1)`` (a recipe's ``lr_decay``;
    Sattler et al.'s demo multiplies it by 0.99 before each round's training, felisat/clustered-federated-learning
    fl_devices.py:108); ``lr`` itself, the same float, at ``lr_decay`` 1."""
    return lr if lr_decay == 1.0 else lr * lr_decay ** (rnd + 1)


_STATE_LISTS = ("momentum", "exp_avg", "exp_avg_sq")


def state_to_plain(state: OptimizerState) -> dict[str, Any]:
    """A client's kept optimiser state as plain tensors and lists on the CPU (a checkpoint's, weights_only)."""
    return {"step": int(state.step),
            **{name: [t.detach().cpu().clone() for t in ts] for name in _STATE_LISTS if (ts := getattr(state, name)) is not None}}


def state_from_plain(plain: dict[str, Any], device: torch.device, dtype: torch.dtype) -> OptimizerState:
    """:func:`state_to_plain` read back onto ``device`` in ``dtype``."""
    lists = {name: [t.to(device=device, dtype=dtype) for t in plain[name]] for name in _STATE_LISTS if name in plain}
    return OptimizerState(step=int(plain["step"]), **lists)


@torch.no_grad()
def optimizer_step(opt: ClientOptimizer, params: list[torch.Tensor], grads: list[torch.Tensor],
                   state: OptimizerState) -> None:
    """One in-place step on ``params``: torch.optim.SGD (momentum, dampening 0) or torch.optim.Adam."""
    state.step += 1
    if opt.weight_decay != 0:
        grads = torch._foreach_add(grads, params, alpha=opt.weight_decay)
    if opt.kind == "sgd":
        if opt.momentum != 0:
            if state.momentum is None:
                state.momentum = [g.detach().clone() for g in grads]
            else:
                torch._foreach_mul_(state.momentum, opt.momentum)
                torch._foreach_add_(state.momentum, grads, alpha=1.0)
            grads = state.momentum
        torch._foreach_add_(params, grads, alpha=-opt.lr)
        return
    beta1, beta2 = opt.betas
    if state.exp_avg is None:
        state.exp_avg = [torch.zeros_like(p) for p in params]
        state.exp_avg_sq = [torch.zeros_like(p) for p in params]
    torch._foreach_lerp_(state.exp_avg, grads, 1 - beta1)
    torch._foreach_mul_(state.exp_avg_sq, beta2)
    torch._foreach_addcmul_(state.exp_avg_sq, grads, grads, 1 - beta2)
    step = float(state.step)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    step_size = (opt.lr / bias_correction1) * -1
    denom = torch._foreach_sqrt(state.exp_avg_sq)
    torch._foreach_div_(denom, bias_correction2_sqrt)
    torch._foreach_add_(denom, opt.eps)
    torch._foreach_addcdiv_(params, state.exp_avg, denom, step_size)
