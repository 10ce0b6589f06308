"""The engine's round buffer: trained vectors -> deltas -> trained vectors in place, bit for bit (issue 22),
and RoundUpdates' shared Gram product."""
import numpy as np
import torch

from cflcore.clustering.divergence import gram_matrix
from cflcore.fl.deltas import restore_, to_deltas_
from cflcore.strategies.base import ClusterAssignment, RoundUpdates


def test_round_trip_is_exact_where_start_plus_delta_does_not_round_back():
    gen = torch.Generator().manual_seed(0)
    starts = [torch.randn(5000, generator=gen) * 1e-2, torch.randn(5000, generator=gen)]
    news = torch.randn(3, 5000, generator=gen) * 1e-3  # weights that shrank towards zero: s + (n - s) often != n
    news[0, :3] = torch.tensor([float("nan"), float("inf"), -0.0])
    buffer = news.clone()
    fix = to_deltas_(buffer, lambda i: starts[i % 2], block=777)  # blocks not dividing P
    expected = torch.stack([news[i] - starts[i % 2] for i in range(3)])
    assert torch.equal(buffer[1:], expected[1:]) and torch.equal(buffer[0, 3:], expected[0, 3:])
    naive = torch.stack([starts[i % 2] + expected[i] for i in range(3)])
    assert fix.count > 0 and not torch.equal(naive[1:], news[1:])  # the naive sum would NOT give the trained values
    restore_(buffer, lambda i: starts[i % 2], fix, block=777)
    assert buffer.view(torch.int32).equal(news.view(torch.int32))  # bit for bit, NaN, inf and -0.0 included


def test_round_updates_compute_each_gram_product_once():
    deltas = torch.randn(4, 300, generator=torch.Generator().manual_seed(1))
    up = RoundUpdates(0, np.arange(4), deltas, None, [np.ones(1)] * 4, np.ones(4), lambda m, c: np.zeros(0),
                      ClusterAssignment.single(4))
    g32, g64 = up.gram("float32"), up.gram("float64")
    assert up.gram("float32") is g32 and up.gram("float64") is g64
    assert torch.equal(g32, gram_matrix(deltas, "float32")) and torch.equal(g64, gram_matrix(deltas, "float64"))
    gamma = up.divergence("float32")
    gamma[0, 1] = 99.0  # a fresh array each time: the cached Gram matrix is untouched
    assert up.divergence("float32")[0, 1] != 99.0


def test_engine_keeps_start_vectors_only_for_strategies_that_need_them_and_reuses_its_buffer():
    import logging

    from engine_runs import build_engine
    from cflcore.fl.synthetic import synthetic_federated

    fed = synthetic_federated(n_clients=4, n_train=16, n_test=8, n_orch=16)
    for method, kept in (("bnc", False), ("louvain", True)):
        settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                                 "rounds": 2}, "engine": {"eval_every": 10}, "algorithm": {"method": method}, "device": "cpu"}
        engine, state = build_engine(fed, settings, 0, logging.getLogger("test"))
        seen = []
        real = engine.strategy.aggregate
        engine.strategy.aggregate = lambda up, seen=seen, real=real: seen.append((up.start is not None, up.deltas.data_ptr())) or real(up)
        engine.run_round(state, 0, 2)
        buffer = engine.buffer
        engine.run_round(state, 1, 2)
        assert [s for s, _ in seen] == [kept, kept]
        assert engine.buffer is buffer and seen[0][1] == seen[1][1] == buffer.data_ptr()  # one buffer, both rounds


def test_float64_gram_with_a_reused_block_equals_the_per_block_upcast(monkeypatch):
    from cflcore.clustering import divergence

    monkeypatch.setattr(divergence, "_CHUNK", 1000)
    x = torch.randn(5, 3500, generator=torch.Generator().manual_seed(2)) * 1e-3
    expected = torch.zeros(5, 5, dtype=torch.float64)
    for start in range(0, 3500, 1000):  # the old code: a fresh up-cast copy per block
        block = x[:, start:start + 1000].to(torch.float64)
        expected += block @ block.T
    assert torch.equal(divergence.gram_matrix(x, "float64"), 0.5 * (expected + expected.T))
