"""Server optimisers (FedOpt, Reddi et al. 2021 "Adaptive Federated Optimization", Algorithm 2) and the
per-cluster aggregation rule shared by every strategy (docs/architecture.md §5 step 4; 000 Algorithm 1, l. 26–28)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..errors import ConfigError

ServerState = dict[str, torch.Tensor]


@dataclass(frozen=True)
class ServerOptimizer:
    """``sgd`` (lr 1.0 = FedAvg, the paper's baseline), ``adam`` (FedAdam) or ``yogi`` (FedYogi).
    ``eps`` is Reddi's adaptivity tau; the second moment starts at tau**2 as in the paper.
    ``momentum`` (sgd only) is FedAvgM's server momentum beta (Hsu et al. 2019, "Measuring the effects of
    non-identical data distribution", Alg. FedAvgM; 004's FedAvgM baseline): v <- beta v + Delta,
    x <- x + lr v, with v = 0 before a cluster's first step; 0 = FedAvg/FedOpt-SGD."""

    kind: str = "sgd"
    lr: float = 1.0
    betas: tuple[float, float] = (0.9, 0.99)
    eps: float = 1e-3
    momentum: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("sgd", "adam", "yogi"):
            raise ConfigError(f"engine.server_optimizer: {self.kind!r} is not allowed; allowed: sgd, adam, yogi")
        if not 0 <= self.momentum < 1:  # also rejects NaN
            raise ConfigError(f"engine.server_momentum: {self.momentum!r} is not allowed; allowed: a number in [0, 1)")
        if self.momentum and self.kind != "sgd":
            raise ConfigError(f"engine.server_momentum: {self.momentum!r} needs engine.server_optimizer sgd "
                              f"(got {self.kind!r}); adam/yogi have their own first moment (server_betas)")

    @property
    def is_fedavg(self) -> bool:
        return self.kind == "sgd" and self.lr == 1.0 and self.momentum == 0

    def step(self, ref: torch.Tensor, pseudo_grad: torch.Tensor, state: ServerState) -> tuple[torch.Tensor, ServerState]:
        """x_{t+1} from x_t = ``ref`` and the pseudo-gradient Delta_t (mean client update; Reddi Alg. 2 l. 9–13).
        Pure: returns the new model and new state."""
        if self.kind == "sgd":
            if self.momentum == 0:
                return ref + self.lr * pseudo_grad, {}
            v = self.momentum * state["v"] + pseudo_grad if "v" in state else pseudo_grad.clone()
            return ref + self.lr * v, {"v": v}
        b1, b2 = self.betas
        m = state.get("m", torch.zeros_like(ref))
        v = state.get("v", torch.full_like(ref, self.eps ** 2))
        m = b1 * m + (1 - b1) * pseudo_grad
        sq = pseudo_grad * pseudo_grad
        if self.kind == "adam":
            v = b2 * v + (1 - b2) * sq
        else:  # yogi
            v = v - (1 - b2) * sq * torch.sign(v - sq)
        return ref + self.lr * m / (v.sqrt() + self.eps), {"m": m, "v": v}


def weighted_mean(rows: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    if weights is None:
        return rows.mean(dim=0)
    w = (weights / weights.sum()).to(rows.dtype)
    return (w[:, None] * rows).sum(dim=0)


MEAN_BLOCK = 1 << 16  # columns per block of rows_mean on a CPU: a (members × 64k) float32 temporary
GPU_MEAN_BLOCK = 1 << 22  # on a GPU: 4M columns, a few blocks a round instead of hundreds of kernel launches


def rows_mean(matrix: torch.Tensor, rows: Sequence[int] | None, weights: torch.Tensor | None,
              block: int | None = None) -> torch.Tensor:
    """FedAvg of some rows of ``matrix`` (000 Algorithm 1, l. 26–28): :func:`weighted_mean` of ``matrix[rows]``
    (all rows: ``None``), read in place: all rows in one reduction, a subset column block by column block, so no
    (members × P) copy is made. The same bits as ``weighted_mean(matrix.index_select(0, rows), weights)``: each
    column is reduced over the same rows in the same order (tests/fl/test_aggregators.py). ``block``: columns per
    block, by default :data:`MEAN_BLOCK` on a CPU and :data:`GPU_MEAN_BLOCK` elsewhere."""
    if block is None:
        block = MEAN_BLOCK if matrix.device.type == "cpu" else GPU_MEAN_BLOCK
    if rows is None:
        return weighted_mean(matrix, weights)
    index = torch.as_tensor(list(rows), dtype=torch.long, device=matrix.device)
    out = torch.empty(matrix.shape[1], dtype=matrix.dtype, device=matrix.device)
    for a in range(0, matrix.shape[1], block):
        out[a:a + block] = weighted_mean(matrix[:, a:a + block].index_select(0, index), weights)
    return out


def aggregate_cluster(server: ServerOptimizer, starts: torch.Tensor, news: torch.Tensor,
                      weights: torch.Tensor | None, state: ServerState) -> tuple[torch.Tensor, ServerState]:
    """One cluster's new model from its sampled members' start and new vectors.

    ref = (weighted) mean of the members' start vectors; pseudo-gradient = (weighted) mean of
    (theta_i_new - ref); new model = server_opt(ref, pseudo-gradient). Server SGD with lr 1.0 is
    computed directly as the (weighted) mean of the new vectors: the same value without the rounding
    of ref + (mean - ref), so FedAvg of one client is exactly that client's model.
    """
    if server.is_fedavg:
        return weighted_mean(news, weights), {}
    ref = weighted_mean(starts, weights)
    return server.step(ref, weighted_mean(news - ref, weights), state)
