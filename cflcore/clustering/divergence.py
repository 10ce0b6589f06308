"""Divergence matrix and clustering temperature of OCFL (000 Def. 5–7, eq. 7–10; Algorithm 1, l. 16–19).

The divergence matrix is computed from ONE Gram matrix product on the device: with ``G = Δ Δᵀ`` and
``d = sqrt(diag G)``, the row-normalised product ``Δn Δnᵀ`` equals ``G / (d dᵀ)``. Normalising through the
Gram matrix gives the same numbers as normalising the rows first but never copies the (n × P) deltas
(25M-parameter models: 3 GB per copy at n = 30).

Degenerate updates (documented behaviour, never NaN): a zero delta has no direction. Two zero deltas
are treated as identical (distance 0); a zero and a non-zero delta as orthogonal (distance 1). All-zero
deltas therefore give Γ = 0 and T = 0, and every clusterer returns one cluster. "Zero" means a squared
norm (Gram diagonal) at or below ``finfo(dtype).tiny``, i.e. a norm ≤ sqrt(tiny).

Only :func:`gram_matrix` touches the deltas (torch, on their device); everything after it works on the
n × n Gram matrix in numpy, so the what-if replay computes Γ from a recorded Gram matrix without torch.
This module is the ONE implementation of Γ and T: the engine's recorded ``server.parquet`` temperature
(cflcore.fl.run.temperature, on the float64 Gram matrix it also records), the strategies (OCFL's
trigger, SCL, BCL) and the evaluation's what-if replay (cflcore.evaluate.whatif, Γ from the recorded
Gram matrix) all call :func:`cosine_divergence_from_gram` / :func:`temperature`, so the zero-delta
convention above holds everywhere (issue 11: the engine used to treat two zero deltas as orthogonal).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    import torch

Precision = Literal["float32", "float64"]
_CHUNK = 1 << 21  # columns per block when up-casting to float64 (bounds the extra memory to n·2M·8 bytes)


def gram_matrix(deltas: "torch.Tensor", precision: Precision = "float32") -> "torch.Tensor":
    """``Δ Δᵀ`` (n × n) on the deltas' device, in the requested precision. float32 inputs at float32 use one
    matmul and no copy; float64 is accumulated over column blocks so the up-cast copy stays small. The one
    step that touches the (n × P) deltas, hence the only torch function here."""
    import torch

    dtype = {"float32": torch.float32, "float64": torch.float64}[precision]
    if deltas.dim() != 2:
        raise ValueError(f"deltas must be 2-D (clients × params), got shape {tuple(deltas.shape)}")
    if deltas.dtype == dtype:
        gram = deltas @ deltas.T
        return 0.5 * (gram + gram.T)  # BLAS gemm need not be bit-symmetric; HDBSCAN checks symmetry
    n, p = deltas.shape
    gram = torch.zeros(n, n, dtype=dtype, device=deltas.device)
    full = torch.empty(n, min(_CHUNK, p), dtype=dtype, device=deltas.device)  # reused: no fresh pages per block
    for start in range(0, p, _CHUNK):
        width = min(_CHUNK, p - start)
        block = full if width == full.shape[1] else torch.empty(n, width, dtype=dtype, device=deltas.device)
        block.copy_(deltas[:, start:start + width])  # the same contiguous up-cast block as .to(dtype), 3x faster
        gram += block @ block.T
    return 0.5 * (gram + gram.T)


def _host(gram: "np.ndarray | torch.Tensor") -> np.ndarray:
    """An n × n Gram matrix as a writable numpy array in its own dtype (a torch tensor is moved to the CPU:
    n × n values only, whatever the model size)."""
    if not isinstance(gram, np.ndarray):
        gram = gram.detach().cpu().numpy()
    return np.array(gram, copy=True)  # parquet buffers are read-only


def cosine_similarity_from_gram(gram: "np.ndarray | torch.Tensor") -> np.ndarray:
    """Cosine similarity ``C_s`` (000 eq. 6) from a Gram matrix, with the zero-delta convention above,
    computed in the Gram matrix's dtype."""
    g = _host(gram)
    norms = np.sqrt(np.clip(np.diagonal(g), 0.0, None))
    zero = norms <= np.finfo(g.dtype).tiny ** 0.5
    safe = np.where(zero, np.ones_like(norms), norms)
    sim = g / (safe[:, None] * safe[None, :])  # a·b is commutative: keeps exact symmetry
    sim = np.where(zero[:, None] | zero[None, :], np.zeros_like(sim), sim)
    sim = np.where(zero[:, None] & zero[None, :], np.ones_like(sim), sim)
    return np.clip(sim, -1.0, 1.0)


def cosine_divergence_from_gram(gram: "np.ndarray | torch.Tensor") -> np.ndarray:
    """Γ = 1 − C_s from a Gram matrix, clamped to [0, 2] with a zero diagonal (000 Def. 6, eq. 8), in the
    Gram matrix's dtype (a torch Gram matrix from the engine, or one read back from gram.parquet)."""
    gamma = np.clip(1.0 - cosine_similarity_from_gram(gram), 0.0, 2.0)
    np.fill_diagonal(gamma, 0.0)
    return gamma


def cosine_divergence_matrix(deltas: "torch.Tensor", precision: Precision = "float32") -> np.ndarray:
    """Γ = 1 − Δn Δnᵀ, clamped to [0, 2] with a zero diagonal (000 Def. 6, eq. 8; Algorithm 1, l. 16)."""
    return cosine_divergence_from_gram(gram_matrix(deltas, precision))


def max_divergence_constant(n: int, p: float = 2.0) -> float:
    """λ = (n (n−1) 2^p)^{1/p}: the largest possible ‖Γ‖_p of an n × n divergence matrix (000 §3.2;
    Algorithm 1, l. 17)."""
    return float((n * (n - 1) * 2.0 ** p) ** (1.0 / p))


def temperature(divergence: "np.ndarray | torch.Tensor", p: float = 2.0) -> float:
    """Clustering temperature T = ‖vec Γ‖_p / λ (000 Def. 7, eq. 9–10; Algorithm 1, l. 18–19).

    Fewer than two clients: nothing can diverge, T = 0 (λ would be 0)."""
    gamma = _host(divergence).astype(np.float64, copy=False).reshape(-1)
    n = int(round(math.sqrt(gamma.size)))
    if n < 2:
        return 0.0
    norm = float(np.linalg.norm(gamma, ord=p)) if p != 2 else float(np.sqrt(np.dot(gamma, gamma)))
    value = norm / max_divergence_constant(n, p)
    return 0.0 if not math.isfinite(value) else float(value)
