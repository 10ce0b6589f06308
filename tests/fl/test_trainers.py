"""Client trainers: loop == vmap (float64), loop == plain torch.optim, metrics == scikit-learn."""
import dataclasses
import os
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score

from cflcore.errors import ConfigError
from cflcore.fl.evaluation import confusion, scores_from_confusion
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.trainers import LoopTrainer, VmapTrainer, derive_seed, resolve_trainer
from cflcore.models import build_model
from engine_runs import cpu_train_spec

CPU = torch.device("cpu")


def _seeded_model(name, shape, n_classes, kw):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        return build_model(name, shape[0], shape[1:], n_classes, **kw)


def _train_both(name, kw, sizes, opt, batch=8, epochs=2, precision="fp64", budget=2048, shape=(1, 8, 8)):
    fed = synthetic_federated(n_clients=len(sizes), n_train=sizes, shape=shape)
    make = lambda: _seeded_model(name, shape, fed.n_classes, kw)  # noqa: E731
    layout = ModelLayout.of(make())
    start = layout.flatten(make()).double()
    starts = torch.stack([start + 0.01 * i for i in range(len(sizes))])  # different start per client
    spec = cpu_train_spec(optimizer=opt, batch_size=batch, local_epochs=epochs, precision=precision, memory_budget_mb=budget)
    seeds = [derive_seed(1, i) for i in range(len(sizes))]
    a = LoopTrainer(make(), layout, spec, CPU).train(starts, fed.clients, seeds)
    b = VmapTrainer(make(), layout, spec, CPU).train(starts, fed.clients, seeds)
    return starts, a, b


SGD = ClientOptimizer("sgd", 0.05, momentum=0.9, weight_decay=1e-3)
ADAM = ClientOptimizer("adam", 1e-3, weight_decay=1e-2)


@pytest.mark.parametrize("name,kw,sizes,opt,shape", [
    ("tinyvgg", {}, [32, 32, 32], SGD, (1, 8, 8)),                 # equal sizes
    ("tinyvgg", {}, [40, 33, 17, 50], ADAM, (1, 8, 8)),            # unequal sizes, short last batches
    ("resnet34", {"width": 4}, [16, 16, 16], ClientOptimizer("sgd", 0.01), (1, 16, 16)),  # BatchNorm, equal
    ("resnet34", {"width": 4}, [20, 13, 28], ClientOptimizer("sgd", 0.01), (1, 16, 16)),  # BatchNorm, unequal
    ("ocfl-cnn", {}, [20, 13], ClientOptimizer("sgd", 0.01), (1, 8, 8)),                 # active dropout masks
    ("mobilenetv1", {"width_mult": 0.125, "dropout": 0.2}, [16, 13], ClientOptimizer("sgd", 0.01), (1, 32, 32)),  # depthwise, BN, dropout
])
def test_loop_and_vmap_agree_in_float64(name, kw, sizes, opt, shape):
    starts, a, b = _train_both(name, kw, sizes, opt, shape=shape)
    assert (a.params - starts).abs().max() > 1e-4  # training moved the parameters
    assert (a.params - b.params).abs().max().item() <= 1e-10
    for la, lb, n in zip(a.step_losses, b.step_losses, sizes):
        assert len(la) == 2 * -(-n // 8)
        np.testing.assert_allclose(la, lb, rtol=0, atol=1e-10)


def test_vmap_memory_chunks_give_same_numbers():
    _, a, b = _train_both("tinyvgg", {}, [24, 17, 30], SGD, budget=64)
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), 6))
    trainer = VmapTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1, precision="fp64", memory_budget_mb=64), CPU)
    trainer._activation_numel = 10 ** 7  # pretend big activations: forces one client per chunk
    assert trainer.chunk_size() == 1
    assert torch.allclose(a.params, b.params, rtol=0, atol=1e-10)


@pytest.mark.parametrize("opt", [ClientOptimizer("sgd", 0.05, momentum=0.9, weight_decay=1e-3), ClientOptimizer("adam", 1e-3, weight_decay=1e-2)])
def test_loop_equals_plain_torch_optim(opt):
    """The fused foreach step gives bit-identical fp32 numbers to torch.optim.SGD / torch.optim.Adam."""
    fed = synthetic_federated(n_clients=1, n_train=[37])
    client = fed.clients[0]
    torch.manual_seed(0)
    ref = build_model("tinyvgg", 1, (8, 8), fed.n_classes)
    layout = ModelLayout.of(ref)
    start = layout.flatten(ref).clone()
    trainer = LoopTrainer(build_model("tinyvgg", 1, (8, 8), fed.n_classes), layout, cpu_train_spec(optimizer=opt, batch_size=8, local_epochs=2), CPU)
    got = trainer.train(start[None], [client], [123])
    if opt.kind == "sgd":
        torch_opt = torch.optim.SGD(ref.parameters(), lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay)
    else:
        torch_opt = torch.optim.Adam(ref.parameters(), lr=opt.lr, betas=opt.betas, eps=opt.eps, weight_decay=opt.weight_decay)
    losses = []
    for epoch in range(2):
        perm = torch.randperm(client.n_train, generator=trainer.epoch_generator(123, epoch))
        for lo in range(0, client.n_train, 8):
            idx = perm[lo:lo + 8]
            torch_opt.zero_grad()
            loss = F.cross_entropy(ref(client.x_train[idx]), client.y_train[idx])
            loss.backward()
            torch_opt.step()
            losses.append(loss.item())
    assert torch.equal(got.params[0], layout.flatten(ref))
    np.testing.assert_array_equal(got.step_losses[0], np.array(losses))


def test_results_do_not_depend_on_client_order():
    fed = synthetic_federated(n_clients=3, n_train=[20, 28, 12])
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), 6))
    start = layout.flatten(build_model("tinyvgg", 1, (8, 8), 6))
    trainer = LoopTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1), CPU)
    fwd = trainer.train(start.repeat(3, 1), fed.clients, [5, 6, 7])
    rev = trainer.train(start.repeat(3, 1), fed.clients[::-1], [7, 6, 5])
    assert torch.equal(fwd.params, rev.params.flip(0))


def test_bf16_autocast_trains():
    fed = synthetic_federated(n_clients=2, n_train=24)
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), 6))
    start = layout.flatten(build_model("tinyvgg", 1, (8, 8), 6))
    out32 = LoopTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1), CPU).train(start.repeat(2, 1), fed.clients, [1, 2])
    out16 = LoopTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1, precision="bf16"), CPU).train(start.repeat(2, 1), fed.clients, [1, 2])
    assert out16.params.dtype == torch.float32
    assert all(np.isfinite(l).all() for l in out16.step_losses)
    assert not torch.equal(out16.params, out32.params)
    assert torch.allclose(out16.params, out32.params, atol=5e-2)


def test_compiled_loop_trainer_matches_eager_and_is_deterministic():
    """engine.compile: torch.compile's fused kernels round differently in the last bits, nothing more; and two
    compiled runs (a fresh run and a resumed one each compile anew) give the same numbers bit for bit."""
    fed = synthetic_federated(n_clients=2, n_train=[20, 12])  # 12 = 8 + a short batch of 4: two compiled shapes
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), 6))
    start = layout.flatten(build_model("tinyvgg", 1, (8, 8), 6)).repeat(2, 1)
    run = lambda compile_: LoopTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout,  # noqa: E731
                                       cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=2, channels_last=True, compile=compile_), CPU).train(start, fed.clients, [3, 4])
    eager, compiled, again = run(False), run(True), run(True)
    assert torch.equal(compiled.params, again.params)
    assert torch.allclose(compiled.params, eager.params, rtol=1e-4, atol=1e-5)
    assert all(np.allclose(a, b, rtol=1e-4) for a, b in zip(compiled.step_losses, eager.step_losses))


def test_resolve_trainer_auto():
    assert resolve_trainer("auto", CPU) is LoopTrainer
    assert resolve_trainer("auto", torch.device("cuda")) is VmapTrainer


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=40))
def test_metrics_match_sklearn(pairs):
    y_true = np.array([p[0] for p in pairs])
    y_pred = np.array([p[1] for p in pairs])
    s = scores_from_confusion(confusion(y_true, y_pred, 6), 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert s.acc == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
        assert s.f1 == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0), abs=1e-12)
        assert s.bacc == pytest.approx(balanced_accuracy_score(y_true, y_pred), abs=1e-12)


def _wide_kernels() -> bool:
    """ATen's and oneDNN's kernels are AVX2 or wider: not held to ATen's default (or on a CPU without AVX2) and
    not held to oneDNN's SSE4.1 (``ONEDNN_MAX_CPU_ISA``)."""
    held = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper().startswith("SSE")
    return torch.backends.cpu.get_cpu_capability() != "DEFAULT" and not held


@pytest.mark.parametrize("name,kw,shape", [("tinyvgg", {}, (1, 28, 28)), ("resnet34", {"width": 4}, (1, 16, 16)),
                                           ("ocfl-cnn", {}, (1, 8, 8))])
@pytest.mark.kernels
@pytest.mark.parametrize("channels_last,bf16", [(True, False), (False, False), (True, True)])
def test_evaluation_does_not_depend_on_eval_batch(name, kw, shape, channels_last, bf16):
    """The CPU default evaluation batch (64, for cache locality) gives bit-identical predictions and per-sample
    losses to the former 1024 and to one whole-set batch in fp32. In bf16 the predictions are identical and the
    losses agree to rtol 1e-5: on a CPU with AMX, oneDNN's bf16 matrix product accumulates in an order that
    depends on the batch size (measured: 1.2e-6 relative on ocfl-cnn's linear layers, Intel Xeon with AMX;
    bit-identical on an AVX-512 CPU without AMX). fp32 is bit-identical with AVX2 or wider kernels; held to ATen's
    default or oneDNN's SSE4.1 kernels, tinyvgg's NCHW convolutions round differently per batch size (measured on
    an AMX Xeon: at most 1.06e-7 relative, about two float32 ulps; every other model still bit-identical), so
    there the losses agree to rtol 5e-7."""
    from cflcore.fl.evaluation import CPU_EVAL_BATCH, Evaluator, default_eval_batch

    assert default_eval_batch(CPU) == CPU_EVAL_BATCH == 64 and default_eval_batch(torch.device("cuda")) == 1024
    model = _seeded_model(name, shape, 10, kw)
    layout = ModelLayout.of(model)
    vector = layout.flatten(model)
    gen = torch.Generator().manual_seed(3)
    x, y = torch.rand(1100, *shape, generator=gen), torch.randint(0, 10, (1100,), generator=gen)
    outs = [Evaluator(_seeded_model(name, shape, 10, kw), layout, CPU, torch.float32, batch_size=b, bf16=bf16,
                      channels_last=channels_last).predict(vector, x, y) for b in (None, 1024, 1100)]
    assert Evaluator(_seeded_model(name, shape, 10, kw), layout, CPU, torch.float32).batch_size == 64
    for pred, loss in outs[1:]:
        assert torch.equal(pred, outs[0][0])
        if bf16:
            torch.testing.assert_close(loss, outs[0][1], rtol=1e-5, atol=0.0)
        elif not _wide_kernels():
            torch.testing.assert_close(loss, outs[0][1], rtol=5e-7, atol=0.0)
        else:
            assert torch.equal(loss, outs[0][1])


def test_vmap_chunks_count_the_round_buffer_and_are_even():
    """The chunk size comes from the model, the clients and the budget: the round's (N × P) buffer is taken off the
    budget first, and N is cut into near-equal chunks (15 at 13 a chunk -> 8 + 7)."""
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), 6))
    trainer = VmapTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1, precision="fp64", memory_budget_mb=64), CPU)
    trainer._activation_numel = 0
    per_client = layout.n_full * 8 * 6
    budget = 64 * 2 ** 20
    assert trainer.chunk_size(1) == (budget - layout.n_full * 8) // per_client
    n = 2 * budget // per_client  # a buffer that leaves room for fewer clients than n
    room = (budget - n * layout.n_full * 8) // per_client
    chunks = -(-n // room)
    assert trainer.chunk_size(n) == -(-n // chunks) and trainer.chunk_size(n) * chunks - n < chunks


def _vmap_modes(name, shape, sizes, precision, opt=SGD, batch=8, epochs=2):
    """(starts, split result, pad result, calls of each, loop result) of one chunk of clients of unequal sizes."""
    fed = synthetic_federated(n_clients=len(sizes), n_train=sizes, shape=shape)
    make = lambda: _seeded_model(name, shape, fed.n_classes, {})  # noqa: E731
    layout = ModelLayout.of(make())
    dtype = torch.float64 if precision == "fp64" else torch.float32
    start = layout.flatten(make()).to(dtype)
    starts = torch.stack([start + 0.01 * i for i in range(len(sizes))])
    seeds = [derive_seed(1, i) for i in range(len(sizes))]
    out = {}
    for mode in ("split", "pad"):
        trainer = VmapTrainer(make(), layout, cpu_train_spec(optimizer=opt, batch_size=batch, local_epochs=epochs, precision=precision, ragged_batches=mode), CPU)
        out[mode] = (trainer.train(starts, fed.clients, seeds), trainer.calls)
    loop = LoopTrainer(make(), layout, cpu_train_spec(optimizer=opt, batch_size=batch, local_epochs=epochs, precision=precision), CPU).train(starts, fed.clients, seeds)
    return starts, out, loop


@pytest.mark.parametrize("name,shape,opt", [("tinyvgg", (1, 8, 8), SGD),
                                            ("ocfl-cnn", (1, 8, 8), ClientOptimizer("sgd", 0.001))])  # dropout masks
def test_padded_ragged_batches_agree_with_split(name, shape, opt):
    """``ragged_batches: pad`` trains clients whose last batches differ in size in one call per step, with the split's
    numbers: in fp64 within the 1e-10 the vmap and loop trainers agree to (above), and the step losses too; in fp32
    within 64 float32 rounding units of the largest parameter, per local step (each step may round differently)."""
    sizes = [21, 18, 23, 17]  # batch 8: last batches of 5, 2, 7, 1; 3 steps an epoch each
    starts, out, loop = _vmap_modes(name, shape, sizes, "fp64", opt)
    (split, split_calls), (pad, pad_calls) = out["split"], out["pad"]
    assert (split.params - starts).abs().max() > 1e-4  # training moved the parameters
    assert (pad.params - split.params).abs().max().item() <= 1e-10
    assert (pad.params - loop.params).abs().max().item() <= 1e-10
    for a, b in zip(pad.step_losses, split.step_losses):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    assert (split_calls, pad_calls) == (2 * (2 + 4), 2 * 3)  # 2 epochs: 2 full steps + 4 sizes, against 3 steps
    starts, out, _ = _vmap_modes(name, shape, sizes, "fp32", opt)
    steps = 2 * 3
    tol = 64 * torch.finfo(torch.float32).eps * out["split"][0].params.abs().max().item() * steps
    assert (out["pad"][0].params - out["split"][0].params).abs().max().item() <= tol


def test_batchnorm_models_always_split():
    layout = ModelLayout.of(build_model("resnet34", 1, (16, 16), 4, width=4))
    trainer = VmapTrainer(build_model("resnet34", 1, (16, 16), 4, width=4), layout,
                          cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1, precision="fp64", ragged_batches="pad"), CPU)
    assert trainer.pad is False  # padded rows would enter the batch statistics
    with pytest.raises(ConfigError, match="engine.ragged_batches"):
        dataclasses.replace(cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1), ragged_batches="auto")


COMPILED_ULPS = 8
"""The compiled vmap step against eager: every parameter within 8 float32 rounding units of the largest parameter
(measured: under 1 on tinyvgg, 3 clients, one epoch, SGD with momentum, ragged_batches pad)."""


@pytest.mark.slow  # torch.compile from an empty cache: 126 s on a loaded 2-core CPU (60 s of CPU time); 25 s cached
def test_compiled_vmap_step_matches_eager_within_a_stated_number_of_ulps():
    fed = synthetic_federated(n_clients=3, n_train=[12, 9, 16])  # unequal: padded steps and a shrinking active set
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), 6))
    starts = layout.flatten(build_model("tinyvgg", 1, (8, 8), 6)).expand(3, -1).clone()
    opt = ClientOptimizer("sgd", 0.1, momentum=0.9)

    def run(compile_: bool):
        spec = cpu_train_spec(optimizer=opt, batch_size=4, local_epochs=1, precision="fp32", memory_budget_mb=4096, compile=compile_, ragged_batches="pad")
        return VmapTrainer(build_model("tinyvgg", 1, (8, 8), 6), layout, spec, CPU).train(starts, fed.clients, [1, 2, 3])

    eager, compiled = run(False), run(True)
    bound = COMPILED_ULPS * torch.finfo(torch.float32).eps * eager.params.abs().max()
    assert (compiled.params - eager.params).abs().max() <= bound
    assert not torch.equal(compiled.params, starts)  # it trained
    assert all(np.allclose(a, b, rtol=1e-5) for a, b in zip(compiled.step_losses, eager.step_losses))
