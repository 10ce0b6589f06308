"""The engine's state: everything that changes from round to round and is checkpointed (cflcore/fl/checkpoint.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

    from .optim import OptimizerState


@dataclass
class EngineState:
    """Everything that changes from round to round (and is checkpointed)."""

    next_round: int
    models: dict[int, torch.Tensor]  # cluster -> shared vector (what strategies see)
    extra: dict[int, torch.Tensor]  # cluster -> BN buffers kept out of the deltas (may be empty)
    server_state: dict[int, dict[str, torch.Tensor]]
    client_local: dict[int, torch.Tensor]  # FedBN: client -> its own BN tensors (empty otherwise)
    labels: np.ndarray
    history: list[dict[str, Any]] = field(default_factory=list)
    server_rows: list[dict[str, Any]] = field(default_factory=list)
    divergence_rows: list[list[float]] = field(default_factory=list)  # [round, i, j, value]
    gram_rows: list[list[float]] = field(default_factory=list)
    personal: dict[int, torch.Tensor] = field(default_factory=dict)  # pFedMe: client -> its personal full vector
    client_optimizer: dict[int, OptimizerState] = field(default_factory=dict)  # optimizer_state kept: client -> its own
