"""Client optimisers as one fused multi-tensor step (torch._foreach_*), shared by both trainers.

The arithmetic copies ``torch.optim.SGD`` / ``torch.optim.Adam`` (foreach path, L2 weight decay,
no nesterov/amsgrad/maximize) op for op, so results are the same numbers (tests/fl/test_trainers.py).
It is hand-rolled rather than calling torch.optim so that the same step runs on the stacked
(n_clients, ...) tensors of the vmap trainer, where every element is updated independently.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

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
        return OptimizerState(self.step, pick(self.momentum), pick(self.exp_avg), pick(self.exp_avg_sq), dict(self.extra))

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


# ----- the vmap trainer's stacked state: one (k, *shape) tensor per parameter, row i client i's --------------------
_PRIOR_STEPS = "prior_steps"  # OptimizerState.extra key: per chunk row, the steps its client's kept state had taken


def stack_states(opt: ClientOptimizer, params: dict[str, torch.Tensor],
                 kept: Sequence[OptimizerState] | None = None) -> OptimizerState:
    """The state of a chunk of stacked clients (``params``: name -> (k, *shape)). Fresh (``kept`` None): zero momentum
    (0 * momentum + g == g exactly: torch's clone on step 1) and zero Adam moments. ``kept``: row i continues client
    i's own state (a recipe's ``optimizer_state: kept``), a buffer it does not have yet starting at zero, and the steps
    it had taken (Adam's bias correction) recorded per row for :func:`stacked_step`."""
    names = list(params)
    rows = lambda ts, n, j: torch.stack([t[j] if t is not None else torch.zeros_like(params[n][0])  # noqa: E731
                                         for t in ts])
    take = lambda attr: [rows([getattr(s, attr) for s in kept], n, j) for j, n in enumerate(names)]  # noqa: E731
    zeros = lambda attr: [torch.zeros_like(params[n]) for n in names] if kept is None else take(attr)  # noqa: E731
    state = OptimizerState(exp_avg=None)
    if opt.kind == "sgd" and opt.momentum != 0:
        state.momentum = zeros("momentum")
    if opt.kind == "adam":
        state.exp_avg, state.exp_avg_sq = zeros("exp_avg"), zeros("exp_avg_sq")
    if kept is not None:
        state.extra[_PRIOR_STEPS] = [int(s.step) for s in kept]
    return state


def unstack_states(state: OptimizerState, kept: Sequence[OptimizerState], steps_taken: Sequence[int]) -> None:
    """Hand a chunk's stacked state back to its clients' kept states (:func:`stack_states`): client i's buffers become
    copies of row i (a view would keep the whole chunk's tensor alive for as long as any one client is not sampled
    again: up to clients-a-chunk times the memory), and its step count grows by the ``steps_taken[i]`` local steps it
    took, as the loop trainer's would."""
    for i, (own, n) in enumerate(zip(kept, steps_taken)):
        own.step = int(own.step) + int(n)
        for name in _STATE_LISTS:
            stacked = getattr(state, name)
            if stacked is not None:
                setattr(own, name, [t[i].clone() for t in stacked])


def stacked_step(opt: ClientOptimizer, params: list[torch.Tensor], grads: list[torch.Tensor], state: OptimizerState,
                 t: int, rows: Sequence[int]) -> None:
    """Local step ``t`` (0-based, this round) of the stacked clients at chunk rows ``rows`` (``state``: theirs, row j
    for ``rows[j]``): :func:`optimizer_step` with the step count each client's own loop trainer would have. Fresh states
    count from 0 this round. Kept states (:func:`stack_states`) count on from their client's steps so far; Adam's bias
    correction is one number a step, so rows of different counts step apart (each row's numbers as the loop trainer's).
    SGD's count enters no arithmetic."""
    prior = state.extra.get(_PRIOR_STEPS)
    groups: dict[int, list[int]] = {}
    for j, i in enumerate(rows):
        groups.setdefault(0 if prior is None or opt.kind == "sgd" else prior[i], []).append(j)
    if len(groups) == 1:
        state.step = next(iter(groups)) + t
        optimizer_step(opt, params, grads, state)
        return
    for base, js in groups.items():
        index = torch.tensor(js, device=params[0].device)
        sub = state.select(index)
        sub.step = base + t
        p_sub = [p.index_select(0, index) for p in params]
        optimizer_step(opt, p_sub, [g.index_select(0, index) for g in grads], sub)
        with torch.no_grad():
            for p, q in zip(params, p_sub):
                p.index_copy_(0, index, q)
        state.scatter(index, sub)
