"""Divergence matrix and clustering temperature of OCFL (000 Def. 5–7, eq. 7–10; Algorithm 1, l. 16–19).

The divergence matrix is computed from ONE Gram matrix product on the device: with ``G = Δ Δᵀ`` and
``d = sqrt(diag G)``, the row-normalised product ``Δn Δnᵀ`` equals ``G / (d dᵀ)``. Normalising through the
Gram matrix gives the same numbers as normalising the rows first but never copies the (n × P) deltas
(25M-parameter models: 3 GB per copy at n = 30).

Degenerate updates (documented behaviour, never NaN): a zero delta has no direction. Two zero deltas
are treated as identical (distance 0); a zero and a non-zero delta as orthogonal (distance 1). All-zero
deltas therefore give Γ = 0 and T = 0, and every clusterer returns one cluster. "Zero" means a squared
norm (Gram diagonal) at or below ``finfo(dtype).tiny``, i.e. a norm ≤ sqrt(tiny).

Only :func:`update_gram` / :func:`gram_matrix` touch the deltas (torch, on their device); everything after
them works on the n × n Gram matrix in numpy, so the what-if replay computes Γ from a recorded Gram matrix
without torch. This module is the ONE implementation of Γ and T: the engine computes ONE Gram product per
round (:func:`update_gram`), records it in gram.parquet, takes the temperature of server.parquet
from it and hands it to the strategy (``RoundUpdates.gram`` / ``divergence``: OCFL's trigger and clusterer
input, SCL, BCL); the what-if replay reads the recorded one. All call :func:`cosine_divergence_from_gram` /
:func:`temperature`, so the zero-delta convention above holds everywhere.

Precision and tolerance. The product is float64-accumulated: each column block of the float32
deltas is widened to float64 (exact) and multiplied with float64 BLAS. Products of two float32 numbers are
exact in float64, so every entry G_ij = Σ_k Δ_ik Δ_jk carries only summation error, whatever the order the
BLAS and the blocks add in: |Ĝ_ij − G_ij| ≤ γ_P Σ_k |Δ_ik Δ_jk| ≤ γ_P ‖Δ_i‖ ‖Δ_j‖ with γ_P = P·2⁻⁵³/(1 − P·2⁻⁵³)
(Higham, Accuracy and Stability, eq. 3.5). So each cosine entry G_ij / √(G_ii G_jj) (000 eq. 6) is within
TOLERANCE_PER_PARAM·P (2·P·2⁻⁵³ plus a few rounding units of the division and the square root) of its exact
value: 5.7e-9 at P = 25.4M (000's CNN), below 1e-8 for P ≤ 4.5·10⁷, and Γ = 1 − C_s (000 eq. 8) the same.
tests/fl/test_gram_tolerance.py asserts :func:`cosine_tolerance` against a float64 reference on random and on
real (engine) deltas; a float32 product (errors ~1e-7 and more) fails it. The deltas themselves are the
float32 differences θ_i − s_i, exactly what the strategies read.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch

Precision = Literal["float32", "float64"]
BLOCK_BYTES = 1 << 21  # one float64 column block of the deltas: n × w × 8 bytes (cache-sized, reused every block)
GPU_BLOCK_BYTES = 1 << 28
"""The block on a GPU: 256 MB, so that a round at N = 15 and P = 25.4M takes 12 blocks, not 1,454 (each block costs
kernel launches; a GPU has no cache to fit). The tolerance of the module docstring holds for any block width."""
UNIT_ROUNDOFF = 2.0 ** -53  # float64


def cosine_tolerance(p: int) -> float:
    """The bound of the module docstring on |cosine entry − exact| for the float64-accumulated Gram of float32
    deltas with ``p`` columns: 2·γ_P plus 8 rounding units (the division, the square root, the clip)."""
    gamma = p * UNIT_ROUNDOFF / (1.0 - p * UNIT_ROUNDOFF)
    return 2.0 * gamma + 8.0 * UNIT_ROUNDOFF


def block_columns(n: int, p: int, device_type: str = "cpu") -> int:
    """Columns per block of :func:`update_gram`: a float64 (n × w) block of ``BLOCK_BYTES`` on a CPU (cache-sized;
    the bytes of earlier versions), :data:`GPU_BLOCK_BYTES` on a GPU (at least 1024 columns)."""
    size = BLOCK_BYTES if device_type == "cpu" else GPU_BLOCK_BYTES
    return max(1, min(p, max(1024, size // (8 * max(n, 1)))))


def _row_runs(group: "Sequence[int]") -> list[tuple[int, int, int]]:
    """Maximal runs of consecutive rows with the same start: (first row, end row, start index)."""
    runs: list[tuple[int, int, int]] = []
    for row, g in enumerate(group):
        if runs and runs[-1][2] == int(g) and runs[-1][1] == row:
            runs[-1] = (runs[-1][0], row + 1, int(g))
        else:
            runs.append((row, row + 1, int(g)))
    return runs


def update_gram(rows: "torch.Tensor", starts: "Sequence[torch.Tensor] | None" = None,
                group: "Sequence[int] | None" = None) -> "torch.Tensor":
    """The round's one Gram product ΔΔᵀ (n × n, float64; the numerator of 000 eq. 6) of the deltas
    Δ_i = rows_i − starts[group[i]] (float32 subtraction, bit-identical to the deltas the strategies read), or of
    ``rows`` themselves when ``starts`` is None. One pass over ``rows`` in column blocks: each block's deltas are
    written widened to float64 into one reused (n × w) block and multiplied there (float64 BLAS), so ``rows`` is
    never modified, no N × P delta or float64 copy exists, and the error bound of the module docstring holds."""
    import torch

    if rows.dim() != 2:
        raise ValueError(f"deltas must be 2-D (clients × params), got shape {tuple(rows.shape)}")
    n, p = rows.shape
    if starts is not None and (group is None or len(group) != n):
        raise ValueError("update_gram: starts needs group, one start index per row")
    runs = _row_runs(group) if starts is not None else []  # type: ignore[arg-type]
    gram = torch.zeros(n, n, dtype=torch.float64, device=rows.device)
    width = block_columns(n, p, rows.device.type)
    full = torch.empty(n, width, dtype=torch.float64, device=rows.device)
    for a in range(0, p, width):
        w = min(width, p - a)
        block = full if w == width else torch.empty(n, w, dtype=torch.float64, device=rows.device)
        if starts is None:
            block.copy_(rows[:, a:a + w])  # widening: exact
        else:
            for lo, hi, g in runs:  # float32 θ − s, written widened (torch computes in the inputs' dtype)
                torch.sub(rows[lo:hi, a:a + w], starts[g][a:a + w], out=block[lo:hi])
        gram.addmm_(block, block.T)
    return 0.5 * (gram + gram.T)  # BLAS gemm need not be bit-symmetric; HDBSCAN checks symmetry


def gram_matrix(deltas: "torch.Tensor", precision: Precision = "float32") -> "torch.Tensor":
    """``Δ Δᵀ`` (n × n) on the deltas' device. ``float64`` (the engine's): :func:`update_gram`,
    float64-accumulated within the module docstring's bound. ``float32`` (the default): one float32 matmul in the deltas'
    dtype, for callers that want it (no tolerance is stated for it)."""
    import torch

    if deltas.dim() != 2:
        raise ValueError(f"deltas must be 2-D (clients × params), got shape {tuple(deltas.shape)}")
    if precision == "float64":
        return update_gram(deltas)
    if precision != "float32":
        raise ValueError(f"precision must be float32 or float64, got {precision!r}")
    x = deltas if deltas.dtype == torch.float32 else deltas.to(torch.float32)
    gram = x @ x.T
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
