"""The round's one Gram product is within the tolerance its module docstring states
(cflcore.clustering.divergence.cosine_tolerance: 2·P·2⁻⁵³ plus a few rounding units on every cosine entry)
of a float64 reference, on random and on real (engine) deltas. A product at lower precision (float32,
bf16, float16) does not meet it, and the last test checks that the bound tells them apart."""
import logging

import numpy as np
import pytest
import torch

from cflcore.clustering.divergence import cosine_similarity_from_gram, cosine_tolerance, update_gram


def reference_cosines(deltas: torch.Tensor) -> np.ndarray:
    """Cosine similarities from one float64 product of the widened deltas (itself within cosine_tolerance)."""
    x = deltas.to(torch.float64)
    return cosine_similarity_from_gram(x @ x.T)


def planted(n: int, p: int, seed: int) -> torch.Tensor:
    """float32 deltas in three directions plus noise, with norms spread over four orders of magnitude."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(3, p, generator=gen)
    rows = torch.stack([centres[i % 3] + 0.7 * torch.randn(p, generator=gen) for i in range(n)])
    return (rows * torch.logspace(-4, 0, n)[:, None]).to(torch.float32)


def worst_cosine_error(gram: torch.Tensor, deltas: torch.Tensor) -> float:
    return float(np.abs(cosine_similarity_from_gram(gram) - reference_cosines(deltas)).max())


@pytest.mark.parametrize("n,p", [(8, 1 << 20), (15, 300_007)])
def test_random_deltas_within_the_stated_tolerance(n, p):
    deltas = planted(n, p, seed=n)
    start = torch.randn(p, generator=torch.Generator().manual_seed(99))
    news = start + deltas  # the engine's case: trained rows and their start, deltas made in the pass
    exact = news - start  # the float32 deltas the strategies read
    # both the product and the reference are within cosine_tolerance(p) of the exact cosines
    assert worst_cosine_error(update_gram(news, [start], [0] * n), exact) <= 2 * cosine_tolerance(p)
    assert worst_cosine_error(update_gram(exact), exact) <= 2 * cosine_tolerance(p)


def test_real_deltas_within_the_stated_tolerance():
    """The deltas and the Gram product of two rounds of a real (tiny) federation, as the strategy sees them."""
    from engine_runs import build_engine
    from cflcore.data.synthetic import synthetic_federated

    fed = synthetic_federated(n_clients=6, n_train=32, n_test=8, n_orch=16)
    settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                             "rounds": 2}, "engine": {"eval_every": 10}, "algorithm": {"method": "bnc"}, "device": "cpu"}
    engine, state = build_engine(fed, settings, 0, logging.getLogger("test"))
    seen = []
    real = engine.strategy.aggregate
    engine.strategy.aggregate = lambda up: seen.append((up.gram(), up.deltas.clone())) or real(up)
    for rnd in range(2):
        engine.run_round(state, rnd, 2)
    assert len(seen) == 2
    for gram, deltas in seen:
        assert float(deltas.abs().max()) > 0
        assert worst_cosine_error(gram, deltas) <= 2 * cosine_tolerance(deltas.shape[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_lower_precision_product_breaks_the_bound(dtype):
    """The bound is tight enough to matter: the same product computed in a lower precision exceeds it."""
    deltas = planted(8, 1 << 20, seed=8)
    x = (deltas / deltas.norm(dim=1, keepdim=True)).to(dtype)  # unit rows: float16 must not overflow
    low = (x @ x.T).to(torch.float64)
    assert worst_cosine_error(low, x.to(torch.float32)) > 2 * cosine_tolerance(deltas.shape[1])
