"""The engine's round buffer: trained vectors -> deltas -> trained vectors in place, bit for bit,
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


def test_round_updates_share_one_gram_product_whatever_precision_is_asked():
    deltas = torch.randn(4, 300, generator=torch.Generator().manual_seed(1))
    up = RoundUpdates(0, np.arange(4), deltas, None, [np.ones(1)] * 4, np.ones(4), lambda m, c: np.zeros(0),
                      ClusterAssignment.single(4))
    g = up.gram()
    assert up.gram("float32") is g and up.gram("float64") is g and g.dtype == torch.float64
    assert torch.equal(g, gram_matrix(deltas, "float64"))
    gamma = up.divergence("float32")
    gamma[0, 1] = 99.0  # a fresh array each time: the cached Gram matrix is untouched
    assert up.divergence()[0, 1] != 99.0


def test_lazy_deltas_are_made_once_on_first_read_and_give_the_same_gram_as_eager_ones():
    """The engine's usual case: the Gram product in one pass over trained rows and cluster models, the deltas
    made (in place) only when a strategy reads them, and the Gram product the same bits either way."""
    from cflcore.clustering.divergence import update_gram

    gen = torch.Generator().manual_seed(3)
    models = [torch.randn(5000, generator=gen), torch.randn(5000, generator=gen)]
    group = [0, 1, 1, 0, 0]
    news = torch.stack([models[g] + 1e-3 * torch.randn(5000, generator=gen) for g in group])
    buffer = news.clone()
    lazy = update_gram(buffer, models, group)
    assert torch.equal(buffer, news)  # the pass does not touch the trained vectors
    made = []
    up = RoundUpdates(0, np.arange(5), None, None, [np.ones(1)] * 5, np.ones(5), lambda m, c: np.zeros(0),
                      ClusterAssignment.single(5), shared_gram=lazy,
                      materialise=lambda: made.append(1) or to_deltas_(buffer, lambda i: models[group[i]]) and buffer)
    assert not up.materialised and not made and up.gram() is lazy
    eager = torch.stack([news[i] - models[g] for i, g in enumerate(group)])
    assert torch.equal(up.deltas, eager) and torch.equal(up.deltas, eager) and made == [1] and up.materialised
    assert torch.equal(lazy, update_gram(eager))  # the same bits as the product of the materialised deltas


def test_engine_keeps_start_vectors_only_for_strategies_that_need_them_and_reuses_its_buffer():
    import logging

    from engine_runs import build_engine
    from cflcore.data.synthetic import synthetic_federated

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

    monkeypatch.setattr(divergence, "BLOCK_BYTES", 5 * 1000 * 8)  # blocks of 1000 columns (the floor is 1024)
    monkeypatch.setattr(divergence, "block_columns", lambda n, p, device_type="cpu": 1000)
    x = torch.randn(5, 3500, generator=torch.Generator().manual_seed(2)) * 1e-3
    expected = torch.zeros(5, 5, dtype=torch.float64)
    for start in range(0, 3500, 1000):  # a fresh up-cast copy per block
        block = x[:, start:start + 1000].to(torch.float64)
        # the same fused accumulate as update_gram: on some BLAS builds (MKL on AMX/AVX-512 Xeons) addmm_'s
        # in-gemm accumulation rounds differently from a separate product and add, so only this is exact
        expected.addmm_(block, block.T)
    assert torch.equal(divergence.gram_matrix(x, "float64"), 0.5 * (expected + expected.T))


def _to_deltas_per_block(buffer, start_of, block):
    """The former to_deltas_: one nonzero() a (row, column block), each a device-to-host sync on a GPU."""
    from cflcore.fl.deltas import ExactFix, _bits

    fix = ExactFix()
    for i in range(buffer.shape[0]):
        row, start = buffer[i], start_of(i)
        index, values = [], []
        for a in range(0, row.numel(), block):
            new, s = row[a:a + block], start[a:a + block]
            delta = new - s
            bad = torch.ne(_bits(s + delta), _bits(new)).nonzero().squeeze(1)
            if bad.numel():
                index.append((bad + a).to(torch.int32))
                values.append(new.index_select(0, bad))
            new.copy_(delta)
        fix.index.append(torch.cat(index) if index else torch.empty(0, dtype=torch.int32))
        fix.values.append(torch.cat(values) if values else buffer.new_empty(0))
    return fix


def test_deltas_take_no_nonzero_a_block_and_keep_the_former_bits():
    """SCL's rounds made one nonzero() (a sync on a GPU) per row and column block; now the counts come back in one
    copy and the positions from nonzero_static: the same deltas, positions and values, bit for bit."""
    from cflcore.fl.host_traffic import HostTraffic

    gen = torch.Generator().manual_seed(5)
    starts = [torch.randn(5000, generator=gen) * 1e-2, torch.randn(5000, generator=gen)]
    news = torch.randn(6, 5000, generator=gen) * 1e-3
    news[2, :3] = torch.tensor([float("nan"), float("-inf"), -0.0])
    old, new = news.clone(), news.clone()
    before = _to_deltas_per_block(old, lambda i: starts[i % 2], 777)
    with HostTraffic(cpu_is_device=True) as traffic:
        fix = to_deltas_(new, lambda i: starts[i % 2], block=777)
    assert traffic.syncs == 0 and "aten::nonzero" not in traffic.sync_ops
    with HostTraffic(cpu_is_device=True) as former:
        _to_deltas_per_block(news.clone(), lambda i: starts[i % 2], 777)
    assert former.sync_ops.count("aten::nonzero") == 6 * 7  # rows x blocks: what the counter sees of the former way
    assert new.view(torch.int32).equal(old.view(torch.int32)) and fix.count == before.count > 0
    for a, b in zip(fix.index + fix.values, before.index + before.values):
        assert a.dtype == b.dtype and a.view(torch.uint8).equal(b.view(torch.uint8))
