"""Seconds per federated round: the engine against the published style and against the strongest plain
PyTorch loop a user would write, side by side in one process, with an equivalence check and ablations.

Workload: tinyvgg (hidden 10) on MNIST-shaped 1x28x28 data (cflcore.data.synthetic), N = 15
clients with 300 train / 130 test samples each, 2,000 orchestrator samples, batch 32, 3 local epochs, SGD
lr 0.01, BNC (= FedAvg), evaluation every round. One timed call = one whole round.

Variants
  reference   the published CFL code's style: per client ``copy.deepcopy`` of the global model, a DataLoader
              over a TensorDataset, torch.optim.SGD, NCHW tensors, the delta from ``state_dict``, and every
              client evaluated on its test set and on the whole orchestrator set.
  plain       the strongest loop a user would write: one reused channels_last model, pre-stacked tensors
              indexed by a permutation, torch.optim.SGD (foreach), and each distinct model evaluated once.
  engine      cflcore's loop trainer (fp32, eager): the same, with the fused foreach step of cflcore.fl.optim,
              one engine round (strategy, server step, divergence, evaluation, history rows).
  engine+compile / engine-bf16 / engine-bf16+compile: ``engine.compile`` and ``engine.precision: bf16``.

The reference and plain loops draw every client's batches from the engine's generators (seeded by
(seed, round, client, epoch)), so all fp32 variants compute the same round: the script asserts it (final
global parameters within rtol 1e-3 / atol 1e-5 of the reference after one round: NCHW and channels_last
convolutions sum in different orders; orchestrator predictions agreeing on >= 99.5 % of samples).
bf16 is checked for accuracy instead: one model trained on real MNIST-5k (4,000 images, 3 epochs, the default
study's Adam lr 0.003) in fp32 and in bf16; the check is one-sided (bf16 may be better) and bf16 fails when its
accuracy on the 1,000 held-out images is below fp32's by more than the one-sided 99 % binomial bound of the
difference of two proportions, z·sqrt(2p(1-p)/n) (2.0 points at p = 0.96, n = 1,000; accuracy_tolerance). It
used to be two-sided at 0.5 points (5 images), and failed on an AMD EPYC when bf16 scored 0.50 points *better*.
On a CPU without native bf16 units (no amx_bf16 / avx512_bf16 in /proc/cpuinfo) bf16 is emulated: the run
prints the bf16 training time against fp32 as a slowdown (8x on an AVX2 AMD EPYC) and exits 0.

Where a round's time goes (torch.profiler, eager engine, N = 15, one thread; `--profile` prints it):
the convolutions' backward and forward (oneDNN) take about 70-75 % of the local training, and the element-wise
work around them (max-pool, ReLU and its backward, index copies) most of the rest; Python dispatch is a
few per cent. Pooling before the second ReLU of each block (exact: ReLU is monotone) removes 3/4 of
that ReLU's work; ``engine.compile`` fuses the element-wise work with inductor. The ablation table switches
each of the engine's optimisations off in turn.

Kernel floor (printed every run): the summed self time of the convolution / linear kernels of one profiled
round of the engine's training is a floor for any change that only removes the other work. One run
(2026-11-23, AMD EPYC, 1 thread, sgemm peak 90.4 GFLOP/s, machine shared, `--repeats 3 --profile`):
forward kernels 0.54 s (56 GFLOP/s), backward 1.03 s (58 GFLOP/s), together 1.57 s = 57 GFLOP/s = 63 % of
sgemm and 72 % of the profiled training; reference training 3.78 s, so the ceiling with these kernels is
3.78 / 1.57 = 2.4x (the engine: 1.5x in that run). A quieter `--quick` run (N = 4) measured 73 GFLOP/s (73 % of
sgemm) and a 2.6x ceiling. On an Intel Xeon with AMX (2026-11-23, quiet, `--repeats 5 --profile`, sgemm peak
161.9 GFLOP/s) the same kernels run at 54 GFLOP/s (34 % of sgemm: 10-channel convolutions are thin matrix
products), 74 % of the profiled training; ceiling 3.97 / 1.66 = 2.40x, engine 1.64x, bf16 2.23x. A >= 3x exact-fp32 engine therefore needs faster convolution kernels,
not less overhead. Each conv layer alone, forward + backward per batch of 32 (median of 5, same run):

    layer                 oneDNN channels_last   oneDNN NCHW   im2col+sgemm NCHW   im2col+sgemm ch.-last
    conv1 1->10 28x28       576 us (engine)        397 us          754 us               868 us
    conv2 10->10 28x28     2406 us (engine)       3694 us         6653 us              7000 us
    conv3/4 10->10 14x14    656 us (engine)        902 us         1700 us              1892 us
    per round (422 steps)  1.81 s                 2.49 s          4.56 s               4.92 s    per-layer best 1.74 s

The engine's choice is the fastest for conv2-4 (94 % of the FLOPs). conv1 (1 input channel: its input and
weight keep NCHW strides even after ``channels_last``, so its forward already runs oneDNN's NCHW kernel) is
faster alone with an NCHW incoming gradient, but in the network that does not carry over: returning the
gradient to conv1 in NCHW (bit-identical) measured 0.95x (median; 0.99x min), and a true channels_last
conv1 (bit-identical) 0.98x. The best per-layer choice would save 0.07 s of 1.8 s (4 %) at most.

Evaluation runs in batches of 64 on CPU (cflcore.fl.evaluation.default_eval_batch; it was 1024): the
activations stay in L2, predictions and per-sample losses are bit-identical (tests/fl/test_trainers.py), and
Evaluator.predict on one round's sets (15 x 130 client + 2,000 orchestrator samples) took 226 ms instead of
336 ms (1.49x, median of 15 side by side; batch 32: 1.49x, 128: 1.32x, 256: 1.28x, 2048/4096: 0.68x).
The ablation row "- eval batch 64 (1024)" puts the old batch back.

Recording: each round's live record (cflcore.fl.progress: its ARI, one line appended to progress.jsonl,
and TensorBoard's scalars where the extra is installed), timed against the same rounds without it, side by side;
``--recording-only`` runs just that table (the target: <= 2 % of a round).

    OMP_NUM_THREADS=1 python benchmarks/round_speed.py [--quick] [--repeats 5] [--threads 1] [--clients 15 30]
    OMP_NUM_THREADS=1 python benchmarks/round_speed.py --recording-only [--quick] [--repeats 5]

With ``--device cpu|cuda|cuda:N`` it runs benchmarks/device_speed.py instead: on that device, the reference
loop, the plain loop, the engine's loop and vmap trainers for tinyvgg and ocfl-cnn at N = 15, 30, 100, each against
the round's FLOP floor from a GEMM timed there. Without ``--device`` the CPU benchmark above runs, unchanged.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import logging
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from cflcore.filenames import PROGRESS  # noqa: E402
from cflcore.fl import engine as engine_mod, run as run_mod  # noqa: E402
from harness import build_engine  # noqa: E402
from cflcore.data.synthetic import synthetic_federated  # noqa: E402
from cflcore.fl.streams import ClientStreams, train_seed  # noqa: E402
from cflcore.fl.trainers import LoopTrainer  # noqa: E402
from cflcore.models import build_model  # noqa: E402

LR, BATCH, EPOCHS, EVAL_BATCH = 0.01, 32, 3, 1024
CPU_STREAMS = ClientStreams(torch.device("cpu"))  # the engine's streams on a CPU (this script's device)
log = logging.getLogger("bench")


def settings(precision: str = "fp32", compile_: bool = False, channels_last: bool = True, threads: int = 1) -> dict:
    return {"training": {"model": "tinyvgg", "model_kwargs": {"hidden": 10}, "optimizer": "sgd", "lr": LR,
                         "batch_size": BATCH, "local_epochs": EPOCHS, "rounds": 10 ** 6},
            "engine": {"trainer": "loop", "precision": precision, "eval_every": 1, "checkpoint_every": 10 ** 6,
                       "channels_last": channels_last, "compile": compile_, "threads": threads},
            "algorithm": {"method": "bnc"}, "device": "cpu"}


def round_epoch_order(seed: int, rnd: int, client: int, epoch: int, n: int,
                      streams: ClientStreams | None = None) -> torch.Tensor:
    """The engine's batch order for (seed, round, client, epoch) from ``streams`` (cflcore.fl.streams; a round of
    this script takes its engine's, ``engine.trainer.streams``)."""
    return (streams or CPU_STREAMS).order(train_seed(seed, rnd, client), epoch, n)[1]


# ---------------------------------------------------------------------------------------------
# The two hand-written rounds: published style and the strongest plain loop
# ---------------------------------------------------------------------------------------------
class HandRound:
    """One FedAvg round written by hand; ``style`` is "reference" or "plain". Keeps the global model and
    the round counter; ``parts`` holds the last round's training / server / evaluation seconds."""

    def __init__(self, style: str, start: torch.nn.Module, fed, seed: int, streams: ClientStreams | None = None):
        self.style, self.fed, self.seed, self.rnd = style, fed, seed, 0
        self.streams = streams or CPU_STREAMS  # the engine's (cflcore.fl.streams)
        self.model = copy.deepcopy(start)
        self.plain = style == "plain"
        if self.plain:
            self.model = self.model.to(memory_format=torch.channels_last)
            self.local = copy.deepcopy(self.model)
            self.data = [(c.x_train.contiguous(memory_format=torch.channels_last), c.y_train) for c in fed.clients]
        self.parts: dict[str, float] = {}
        self.predictions: torch.Tensor | None = None

    def train_client(self, i: int, client) -> dict[str, torch.Tensor]:
        if self.plain:
            local = self.local
            local.load_state_dict(self.model.state_dict())
            x, y = self.data[i]
        else:
            local = copy.deepcopy(self.model)
        opt = torch.optim.SGD(local.parameters(), lr=LR)
        local.train()
        for epoch in range(EPOCHS):
            perm = round_epoch_order(self.seed, self.rnd, i, epoch, client.n_train, self.streams)
            if self.plain:
                batches: Any = ((x[idx], y[idx]) for idx in perm.split(BATCH))
            else:
                batches = DataLoader(TensorDataset(client.x_train, client.y_train), batch_sampler=list(perm.split(BATCH)))
            for xb, yb in batches:
                opt.zero_grad()
                F.cross_entropy(local(xb), yb).backward()
                opt.step()
        return {k: v.clone() for k, v in local.state_dict().items()}

    def __call__(self) -> None:
        t0 = time.perf_counter()
        global_sd = {k: v.clone() for k, v in self.model.state_dict().items()}
        deltas = []
        for i, client in enumerate(self.fed.clients):
            sd = self.train_client(i, client)
            deltas.append({k: sd[k] - global_sd[k] for k in sd})
        t1 = time.perf_counter()
        self.model.load_state_dict({k: global_sd[k] + torch.stack([d[k] for d in deltas]).mean(0) for k in global_sd})
        t2 = time.perf_counter()
        self.model.eval()
        with torch.no_grad():
            sets = [(c.x_test, c.y_test) for c in self.fed.clients]
            # published: every client evaluates on the orchestrator set; plain: each distinct model once (BNC: one)
            sets += [(self.fed.x_orch, self.fed.y_orch)] * (1 if self.plain else len(self.fed.clients))
            for x, y in sets:
                if self.plain:
                    x = x.contiguous(memory_format=torch.channels_last)
                preds = [self.model(x[lo:lo + EVAL_BATCH]).argmax(1) for lo in range(0, len(y), EVAL_BATCH)]
        self.predictions = torch.cat(preds)
        self.parts = {"training": t1 - t0, "server": t2 - t1, "evaluation": time.perf_counter() - t2}
        self.rnd += 1


# ---------------------------------------------------------------------------------------------
# The engine, instrumented, and its ablations
# ---------------------------------------------------------------------------------------------
class DataLoaderTrainer(LoopTrainer):
    """Ablation "stacked data off": the same batches, fetched sample by sample through a DataLoader."""

    def epoch_batches(self, client, seed: int, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        _, perm = self.epoch_order(seed, epoch, client.n_train)
        for xb, yb in DataLoader(TensorDataset(client.x_train, client.y_train), batch_sampler=list(perm.split(BATCH))):
            if self.spec.channels_last:
                xb = xb.contiguous(memory_format=torch.channels_last)
            yield xb, yb


class TorchOptimTrainer(LoopTrainer):
    """Ablation "fused optimiser off": torch.optim.SGD (single-tensor path) and zero_grad/backward."""

    keeps_optimizer_state = False  # a fresh torch.optim.SGD per client and round
    stops_early = False  # its _train_client takes no steps (engine.stragglers)

    def _train_client(self, start, client, seed):  # the engine's per-client step (losses left on the device)
        self.model_layout.load(self.model, start)
        opt = torch.optim.SGD(self.params, lr=LR, foreach=False)
        losses = []
        for epoch in range(self.spec.local_epochs):
            for xb, yb in self.epoch_batches(client, seed, epoch):
                opt.zero_grad()
                loss = F.cross_entropy(self.forward(xb), yb)
                loss.backward()
                opt.step()
                losses.append(loss.detach())
        return self.model_layout.flatten(self.model), torch.stack(losses)


@contextlib.contextmanager
def no_evaluation_dedupe() -> Iterator[None]:
    """Ablation "evaluation dedupe off": every client's model counts as distinct, so the orchestrator set is
    evaluated once per client (as the published code does) instead of once per distinct model."""
    original, counter = engine_mod.spec_key, itertools.count()
    engine_mod.spec_key = lambda spec: f"{original(spec)}#{next(counter)}"
    try:
        yield
    finally:
        engine_mod.spec_key = original


def relu_after_pool_off(trainer: LoopTrainer) -> None:
    """Ablation "pool before ReLU off": tinyvgg's published order conv -> ReLU -> max-pool (same numbers)."""
    for block in (trainer.model.block1, trainer.model.block2):
        block[3], block[4] = block[4], block[3]


class EngineRound:
    """One engine round; records training, evaluation and the rest (server step + bookkeeping) seconds."""

    def __init__(self, fed, seed: int, threads: int, trainer_cls: type[LoopTrainer] | None = None,
                 context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
                 patch: Callable[[LoopTrainer], None] | None = None, evaluator_batch: int | None = None,
                 monitors: list | None = None, **kw: Any):
        self.engine, self.state = build_engine(fed, settings(threads=threads, **kw), seed, log)
        self.monitors, self.truth = monitors, np.asarray(fed.true_clusters)
        for m in monitors or []:
            m.start(0, 10 ** 6)
        if evaluator_batch is not None:
            self.engine.evaluator.batch_size = evaluator_batch
        if trainer_cls is not None:
            old = self.engine.trainer
            self.engine.trainer = trainer_cls(old.model, old.model_layout, old.spec, old.device)
        if patch is not None:
            patch(self.engine.trainer)
        harness.check_threads(threads)
        self.context, self.parts = context, {}

    def __call__(self) -> None:
        spent = {"training": 0.0, "evaluation": 0.0}
        trainer, engine = self.engine.trainer, self.engine

        def timed(name: str, fn: Callable) -> Callable:
            def wrapper(*a, **k):
                t = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    spent[name] += time.perf_counter() - t
            return wrapper

        trainer.train, engine.evaluate_round = timed("training", trainer.train), timed("evaluation", engine.evaluate_round)
        t0 = time.perf_counter()
        try:
            with self.context():
                engine.run_round(self.state, self.state.next_round, 10 ** 6)
        finally:
            del trainer.train, engine.evaluate_round
        total = time.perf_counter() - t0
        self.parts = {**spent, "server": total - spent["training"] - spent["evaluation"]}
        if self.monitors is not None:  # what cflcore.fl.run.train_run does after each round
            t = time.perf_counter()
            record = run_mod.round_record(self.state.server_rows[-1], 10 ** 6, self.state.labels, self.truth)
            for m in self.monitors:
                m.round(record)
            self.parts["recording"] = time.perf_counter() - t

    def global_vector(self) -> torch.Tensor:
        return self.state.models[0]


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------
def training_flops(fed) -> float:
    """FLOPs of one round's local training (forward + backward), counted by torch.utils.flop_counter."""
    model = build_model("tinyvgg", 1, (28, 28), 10)
    x, y = fed.clients[0].x_train[:BATCH], fed.clients[0].y_train[:BATCH]
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    return counter.get_total_flops() / BATCH * sum(c.n_train for c in fed.clients) * EPOCHS


def sgemm_gflops(repeats: int = 7, n: int = 2048) -> float:
    """Single-process sgemm (n x n, torch.mm at the current thread count): the best of ``repeats``."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(harness.time_call(lambda: a @ b)[0] for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def check_equivalence(fed, seed: int, threads: int) -> None:
    """One round from the same start: reference, plain and the fp32 engine (eager and compiled) agree."""
    eng = EngineRound(fed, seed, threads)
    start = build_model("tinyvgg", 1, (28, 28), 10)
    eng.engine.model_layout.load(start, eng.global_vector())
    ref, plain = HandRound("reference", start, fed, seed), HandRound("plain", start, fed, seed)
    ref()
    plain()
    eng()
    ref_vec = eng.engine.model_layout.flatten(ref.model)
    diffs = {"plain": harness.assert_close("plain", eng.engine.model_layout.flatten(plain.model), ref_vec, 1e-3, 1e-5, "global parameters"),
             "engine": harness.assert_close("engine", eng.global_vector(), ref_vec, 1e-3, 1e-5, "global parameters")}
    compiled = EngineRound(fed, seed, threads, compile_=True)
    compiled()
    diffs["engine+compile"] = harness.assert_close("engine+compile", compiled.global_vector(), ref_vec, 1e-3, 1e-5,
                                                   "global parameters")
    eval_model = build_model("tinyvgg", 1, (28, 28), 10).eval()
    for name, vec in (("engine", eng.global_vector()), ("engine+compile", compiled.global_vector())):
        eng.engine.model_layout.load(eval_model, vec)
        with torch.no_grad():
            agree = float((eval_model(fed.x_orch).argmax(1) == ref.predictions).double().mean())
        if agree < 0.995:
            raise harness.EquivalenceError(f"{name}: orchestrator predictions agree with the reference on only {agree:.2%}")
    print("equivalence after one round (max |difference| of the global parameters vs the reference; tolerance "
          "rtol 1e-3, atol 1e-5; orchestrator predictions agree >= 99.5 %): "
          + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()))


def accuracy_tolerance(p: float, n: int, confidence: float = 0.99) -> float:
    """How far below fp32's test accuracy ``p`` bf16's may fall on ``n`` test images before it counts as worse:
    the one-sided ``confidence`` normal (Wald) bound of the difference of two binomial proportions with the same
    p, z · sqrt(2 p (1 − p) / n) (scipy.stats.norm). 1,000 images at p = 0.96: 2.0 points; a 0.5-point gate would
    be 5 images, well inside the noise."""
    from scipy.stats import norm

    return float(norm.ppf(confidence) * math.sqrt(2.0 * p * (1.0 - p) / n))


def bf16_gate(acc_fp32: float, acc_bf16: float, n_test: int) -> tuple[float, float]:
    """(gap, tolerance) in accuracy points; gap > 0 means bf16 is worse. One-sided: bf16 fails only when
    gap > tolerance (:func:`accuracy_tolerance` at fp32's accuracy)."""
    return 100 * (acc_fp32 - acc_bf16), 100 * accuracy_tolerance(acc_fp32, n_test)


def check_bf16_accuracy(threads: int, quick: bool, n_train: int | None = None, epochs: int = 3,
                        lr: float = 0.003, seed: int = 0) -> dict[str, float]:
    """bf16 against fp32 on real MNIST-5k: one model, the same batches; one-sided: bf16 fails only when its test
    accuracy is below fp32's by more than :func:`accuracy_tolerance` (it may be better)."""
    from cflcore.data.federated import ClientData
    from cflcore.data.loaders import LoaderSettings
    from cflcore.data.loaders.offline import load_mnist5k
    from cflcore.fl.evaluation import Evaluator
    from cflcore.fl.flat_params import ModelLayout
    from cflcore.fl.spec import train_spec
    from cflcore.settings import EngineSettings, TrainingSettings

    raw = load_mnist5k(LoaderSettings.from_dict({"loader": "mnist5k"}))
    images = torch.from_numpy(raw.images).float() / 255.0
    labels = torch.from_numpy(raw.labels)
    train, test = torch.from_numpy(raw.part == "train"), torch.from_numpy(raw.part != "train")
    n = n_train or (800 if quick else int(train.sum()))
    x, y = images[train][:n], labels[train][:n]
    client = ClientData(x, y, x[:0], y[:0], np.arange(n), np.arange(0))
    x_test, y_test = images[test], labels[test]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        template = build_model("tinyvgg", 1, (28, 28), 10)
    layout = ModelLayout.of(template)
    acc = {}
    for precision in ("fp32", "bf16"):
        recipe = TrainingSettings.of({"model": "tinyvgg", "optimizer": "adam", "lr": lr, "batch_size": BATCH,
                                      "local_epochs": epochs, "rounds": 1})
        spec = train_spec(recipe, EngineSettings.of({"precision": precision, "channels_last": True}), torch.device("cpu"))
        out = LoopTrainer(copy.deepcopy(template), layout, spec, torch.device("cpu")).train(
            layout.flatten(template)[None], [client], [1])
        ev = Evaluator(copy.deepcopy(template), layout, torch.device("cpu"), torch.float32, bf16=precision == "bf16")
        acc[precision] = ev.scores(out.params[0], x_test, y_test, 10).acc
    n_test = int(len(y_test))
    gap, tol = bf16_gate(acc["fp32"], acc["bf16"], n_test)
    print(f"bf16 accuracy check (real MNIST-5k, {n} training images, {epochs} epochs, Adam lr {lr:g}; the default "
          f"study's is 0.003): test accuracy on {n_test} images fp32 {acc['fp32']:.4f}, bf16 {acc['bf16']:.4f}: bf16 "
          f"{'below' if gap > 0 else 'at or above'} fp32 by {abs(gap):.2f} points (one-sided: allowed up to {tol:.2f} "
          f"points below, the 99 % binomial bound for {n_test} images)")
    if gap > tol:
        raise harness.EquivalenceError(f"bf16: test accuracy {gap:.2f} points below fp32's > {tol:.2f} (99 % binomial bound, "
                                       f"{n_test} test images)")
    return {"fp32": acc["fp32"], "bf16": acc["bf16"], "gap_points": gap, "tolerance_points": tol}


def report_bf16_speed(parts: dict[str, dict[str, list[float]]]) -> None:
    """bf16 against the fp32 engine's local training, printed as a speed-up or plainly as a slowdown, with the
    CPU's bf16 units (cflcore.fl.trainers.bf16_warning) named when it lacks them."""
    from cflcore.fl.trainers import bf16_warning

    fp32 = statistics.median(parts["engine"]["training"][1:])
    bf16 = statistics.median(parts["engine-bf16"]["training"][1:])
    ratio = fp32 / bf16
    verdict = f"{ratio:.2f}x as fast as fp32" if ratio >= 1 else f"a SLOWDOWN: {1 / ratio:.1f}x slower than fp32"
    warning = bf16_warning(torch.device("cpu"))
    print(f"  engine-bf16 local training {bf16:.2f} s vs engine fp32 {fp32:.2f} s: {verdict}"
          + (f" ({warning})" if warning else " (this CPU has native bf16 units)"))


# (1) kernel floor: profiled kernel time of the engine's training and the per-layer algorithm table
FORWARD_KERNELS = ("aten::mkldnn_convolution", "aten::_slow_conv2d_forward", "aten::thnn_conv2d", "aten::addmm")
BACKWARD_KERNELS = ("aten::convolution_backward", "aten::mkldnn_convolution_backward", "aten::_slow_conv2d_backward",
                    "aten::mm")
CONV_ALGORITHMS = ("oneDNN channels_last", "oneDNN NCHW", "im2col+sgemm NCHW", "im2col+sgemm channels_last")


def training_flops_split(fed) -> tuple[float, float]:
    """(forward, backward) FLOPs of one round's convolution / linear kernels (torch.utils.flop_counter)."""
    model = build_model("tinyvgg", 1, (28, 28), 10)
    x, y = fed.clients[0].x_train[:BATCH], fed.clients[0].y_train[:BATCH]
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    per_op = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    scale = sum(c.n_train for c in fed.clients) * EPOCHS / BATCH
    bwd = sum(v for k, v in per_op.items() if "backward" in k or k.endswith(".mm") or k == "aten.mm")
    return (sum(per_op.values()) - bwd) * scale, bwd * scale


def kernel_ceiling(fed, seed: int, threads: int, peak: float, reference_training: float, engine_training: float,
                   show: bool) -> dict[str, float]:
    """Profile one eager engine round's local training (torch.profiler, same process as the timings): the summed
    self time of the convolution / linear kernels (oneDNN or BLAS; they do all the counted FLOPs), forward
    and backward apart, and their own GFLOP/s. Local training cannot take less than that kernel time with
    these kernels, so reference training time / kernel time is the ceiling of any change that only removes
    the other work (element-wise ops, dispatch, data movement)."""
    from torch.profiler import ProfilerActivity, profile

    eng = EngineRound(fed, seed, threads)
    eng()
    trainer = eng.engine.trainer
    starts = torch.stack([eng.global_vector()] * fed.n_clients)
    seeds = [train_seed(seed, 99, c) for c in range(fed.n_clients)]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.train(starts, fed.clients, seeds)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    fwd = sum(e.self_cpu_time_total for e in events if e.key in FORWARD_KERNELS) / 1e6
    bwd = sum(e.self_cpu_time_total for e in events if e.key in BACKWARD_KERNELS) / 1e6
    f_fwd, f_bwd = training_flops_split(fed)
    kern = fwd + bwd
    rate = lambda fl, s: fl / s / 1e9  # noqa: E731
    print(f"  kernel floor (torch.profiler, one round of the eager engine's local training, profiled total {total:.2f} s):"
          f"\n    forward  conv/linear kernels {fwd:6.3f} s  {rate(f_fwd, fwd):5.1f} GFLOP/s = {100 * rate(f_fwd, fwd) / peak:3.0f} % of sgemm"
          f"\n    backward conv/linear kernels {bwd:6.3f} s  {rate(f_bwd, bwd):5.1f} GFLOP/s = {100 * rate(f_bwd, bwd) / peak:3.0f} % of sgemm"
          f"\n    together                     {kern:6.3f} s  {rate(f_fwd + f_bwd, kern):5.1f} GFLOP/s = "
          f"{100 * rate(f_fwd + f_bwd, kern) / peak:3.0f} % of sgemm; {100 * kern / total:.0f} % of the profiled training, "
          f"everything else {100 * (1 - kern / total):.0f} %"
          f"\n    ceiling with these kernels: reference training time / kernel time = {reference_training:.2f} / {kern:.2f} = "
          f"{reference_training / kern:.2f}x (the engine now: {reference_training / engine_training:.2f}x)")
    if show:
        print(events.table(sort_by="self_cpu_time_total", row_limit=15))
    return {"forward": fwd, "backward": bwd, "ceiling": reference_training / kern}


def conv_layers(hidden: int = 10, side: int = 28) -> list[tuple[str, int, int, int, bool, int]]:
    """tinyvgg's convolutions: (name, c_in, c_out, side, input needs a gradient, how many in the net)."""
    return [(f"conv1 1->{hidden} {side}x{side}", 1, hidden, side, False, 1),
            (f"conv2 {hidden}->{hidden} {side}x{side}", hidden, hidden, side, True, 1),
            (f"conv3/4 {hidden}->{hidden} {side // 2}x{side // 2}", hidden, hidden, side // 2, True, 2)]


def conv_step(c_in: int, c_out: int, side: int, input_grad: bool, algorithm: str, batch: int = BATCH) -> Callable[[], Any]:
    """One forward + backward (torch.autograd.grad, as the trainer) of one conv3x3 layer shape, by one algorithm."""
    gen = torch.Generator().manual_seed(0)
    x, gy = torch.randn(batch, c_in, side, side, generator=gen), torch.randn(batch, c_out, side, side, generator=gen)
    w, b = torch.randn(c_out, c_in, 3, 3, generator=gen), torch.randn(c_out, generator=gen)
    if algorithm.endswith("channels_last"):
        x, gy, w = (t.contiguous(memory_format=torch.channels_last) for t in (x, gy, w))
    x.requires_grad_(input_grad)
    w.requires_grad_()
    b.requires_grad_()
    inputs = [x, w, b] if input_grad else [w, b]
    onednn = algorithm.startswith("oneDNN")

    def step() -> Any:
        with torch.backends.mkldnn.flags(enabled=onednn):
            return torch.autograd.grad(F.conv2d(x, w, b, padding=1), inputs, gy)
    return step


def layer_algorithms(repeats: int, calls: int = 20) -> dict[tuple[str, str], harness.Result]:
    """Each conv layer's forward + backward alone, per CPU algorithm, side by side (rotated order): seconds
    per step (batch 32). The engine uses oneDNN channels_last for every layer."""
    import warnings

    warnings.filterwarnings("ignore", message="TF32 acceleration")
    out: dict[tuple[str, str], harness.Result] = {}
    for name, c_in, c_out, side, grad, _ in conv_layers():
        steps = {a: conv_step(c_in, c_out, side, grad, a) for a in CONV_ALGORITHMS}

        def many(fn: Callable[[], Any]) -> Callable[[], None]:
            def call() -> None:
                for _ in range(calls):
                    fn()
            return call
        res = harness.time_side_by_side({a: many(s) for a, s in steps.items()}, repeats, keep_output=False, collect=False)
        for a, r in res.items():
            out[name, a] = harness.Result(a, [s / calls for s in r.seconds])
    return out


def print_layer_table(res: dict[tuple[str, str], harness.Result], steps_per_round: float) -> None:
    layers = conv_layers()
    print(f"  conv layers alone, forward + backward per step (batch {BATCH}), min / median of the timed passes; "
          f"GFLOP/s from the median; 'per round' = median x {steps_per_round:.0f} steps x layers of that shape")
    width = max(len(a) for a in CONV_ALGORITHMS) + 2
    print(f"    {'layer':<22}{'algorithm':<{width}}{'min':>9}{'median':>9}{'GFLOP/s':>9}{'per round':>11}")
    totals = {a: 0.0 for a in CONV_ALGORITHMS}
    best_total = 0.0
    for name, c_in, c_out, side, grad, count in layers:
        flops = 2 * BATCH * c_out * c_in * 9 * side * side * (3 if grad else 2)
        meds = {a: res[name, a].median for a in CONV_ALGORITHMS}
        best = min(meds, key=meds.get)
        best_total += meds[best] * steps_per_round * count
        for a in CONV_ALGORITHMS:
            r = res[name, a]
            totals[a] += r.median * steps_per_round * count
            tag = "  <- engine" if a == CONV_ALGORITHMS[0] else ""
            tag += "  (fastest)" if a == best else ""
            print(f"    {name:<22}{a:<{width}}{1e6 * r.min:7.0f}us{1e6 * r.median:7.0f}us"
                  f"{flops / r.median / 1e9:9.1f}{r.median * steps_per_round * count:10.2f}s{tag}")
    print("    per round, all conv layers: " + ", ".join(f"{a} {s:.2f} s" for a, s in totals.items())
          + f"; fastest per layer {best_total:.2f} s")


def recording_overhead(fed, seed: int, threads: int, repeats: int, rec: harness.Recorder) -> None:
    """The live per-round record (progress.jsonl, always on) and TensorBoard's event file (config
    ``monitor.tensorboard``, where the extra is installed): the same rounds with and without them, side by side,
    and the recording's own time (round_record with its ARI, the line appended, the scalars written) per round."""
    import tempfile

    from cflcore.extras import tensorboard_available
    from cflcore.fl.progress import ProgressRecord, TensorBoardMonitor

    with tempfile.TemporaryDirectory() as tmp:
        monitors = [ProgressRecord(tmp)] + ([TensorBoardMonitor(Path(tmp) / "tb")] if tensorboard_available() else [])
        rounds = {"engine": EngineRound(fed, seed, threads), "engine + recording": EngineRound(fed, seed, threads,
                                                                                              monitors=monitors)}
        own: list[float] = []

        def call(name: str) -> Callable[[], None]:
            def run() -> None:
                rounds[name]()
                if "recording" in rounds[name].parts:
                    own.append(rounds[name].parts["recording"])
            return run

        res = harness.time_side_by_side({k: call(k) for k in rounds}, repeats, keep_output=False)
        for m in monitors:
            m.close()
    what = PROGRESS + (" + TensorBoard" if len(monitors) > 1 else " (tensorboard not installed)")
    rec.table(f"N={fed.n_clients}: recording ({what}), full round seconds; ratio = without / with",
              res, baseline="engine", case=f"N={fed.n_clients} recording")
    timed = own[1:] or own  # [0] belongs to the warm-up round
    share = statistics.median(timed) / res["engine"].median
    print(f"  recording alone: median {1e3 * statistics.median(timed):.2f} ms per round (max {1e3 * max(timed):.2f} ms)"
          f" = {100 * share:.2f} % of the engine's median round; rounds with / without recording: "
          f"{res['engine + recording'].median / res['engine'].median:.3f}x (medians, {repeats} side by side)")


# ---------------------------------------------------------------------------------------------
def main() -> None:
    if any(a == "--device" or a.startswith("--device=") for a in sys.argv[1:]):
        import device_speed

        return device_speed.main(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_common_args(ap, default_repeats=5, quick_repeats=1)
    ap.add_argument("--clients", type=int, nargs="*", default=None, help="N values (default 15; quick 4)")
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile variants")
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's table of one engine round")
    ap.add_argument("--recording-only", action="store_true",
                    help="only the live record's cost (progress.jsonl and TensorBoard) against the same rounds without")
    args = ap.parse_args()
    rec = harness.setup(args, "round_speed")
    logging.basicConfig(level=logging.WARNING)
    sizes = args.clients or ([4] if args.quick else [15])
    n_train, n_test, n_orch = (64, 32, 256) if args.quick else (300, 130, 2000)
    if args.recording_only:
        for n in sizes:
            fed = synthetic_federated(n_clients=n, n_train=n_train, n_test=n_test, n_orch=n_orch, shape=(1, 28, 28),
                                      n_classes=10, seed=args.seed)
            recording_overhead(fed, args.seed, args.threads, args.repeats, rec)
        return
    peak = sgemm_gflops()
    print(f"tinyvgg (hidden 10), MNIST-shaped 1x28x28, {n_train} train / {n_test} test per client, {n_orch} orchestrator "
          f"samples, batch {BATCH}, {EPOCHS} local epochs, SGD lr {LR}, BNC; single-process sgemm peak {peak:.1f} GFLOP/s")
    check_bf16_accuracy(args.threads, args.quick)
    use_compile = not args.no_compile
    for n in sizes:
        fed = synthetic_federated(n_clients=n, n_train=n_train, n_test=n_test, n_orch=n_orch, shape=(1, 28, 28),
                                  n_classes=10, seed=args.seed)
        check_equivalence(fed, args.seed, args.threads)
        start = build_model("tinyvgg", 1, (28, 28), 10)
        rounds: dict[str, Any] = {"reference": HandRound("reference", start, fed, args.seed),
                                  "plain": HandRound("plain", start, fed, args.seed),
                                  "engine": EngineRound(fed, args.seed, args.threads)}
        if use_compile:
            rounds["engine+compile"] = EngineRound(fed, args.seed, args.threads, compile_=True)
        rounds["engine-bf16"] = EngineRound(fed, args.seed, args.threads, precision="bf16")
        if use_compile:
            rounds["engine-bf16+compile"] = EngineRound(fed, args.seed, args.threads, precision="bf16", compile_=True)
        parts: dict[str, dict[str, list[float]]] = {k: {"training": [], "server": [], "evaluation": []} for k in rounds}

        def variant(name: str, rounds: dict = rounds, parts: dict = parts) -> Callable[[], None]:
            def call() -> None:
                rounds[name]()
                for part, s in rounds[name].parts.items():
                    parts[name][part].append(s)
            return call

        full = harness.time_side_by_side({k: variant(k) for k in rounds}, args.repeats, keep_output=False)
        flops = training_flops(fed)
        for part in ("training", "server", "evaluation"):
            res = {k: harness.Result(k, parts[k][part][1:]) for k in rounds}  # [0] is the warm-up round
            notes = {k: f"{flops / r.median / 1e9:6.1f} GFLOP/s = {100 * flops / r.median / 1e9 / peak:3.0f} % of sgemm"
                     for k, r in res.items()} if part == "training" else None
            label = "server step + bookkeeping (= round - training - evaluation)" if part == "server" else part
            rec.table(f"N={n}: {label}, seconds per round", res, baseline="reference", case=f"N={n} {part}", notes=notes)
        rec.table(f"N={n}: full round, seconds", full, baseline="reference", case=f"N={n} full round")
        recording_overhead(fed, args.seed, args.threads, args.repeats, rec)
        print(f"  local-training work per round: {flops / 1e9:.2f} GFLOP (torch.utils.flop_counter)")
        report_bf16_speed(parts)
        train_median = {k: statistics.median(parts[k]["training"][1:]) for k in ("reference", "engine")}
        kernel_ceiling(fed, args.seed, args.threads, peak, train_median["reference"], train_median["engine"], args.profile)
        if args.profile:
            steps = sum(c.n_train for c in fed.clients) * EPOCHS / BATCH
            print_layer_table(layer_algorithms(max(args.repeats, 5)), steps)

        # ablations: the eager fp32 engine with each optimisation switched off in turn
        ablations: dict[str, EngineRound] = {
            "engine (all on)": EngineRound(fed, args.seed, args.threads),
            "- evaluation dedupe": EngineRound(fed, args.seed, args.threads, context=no_evaluation_dedupe),
            "- channels_last": EngineRound(fed, args.seed, args.threads, channels_last=False),
            "- stacked data": EngineRound(fed, args.seed, args.threads, trainer_cls=DataLoaderTrainer),
            "- fused optimiser": EngineRound(fed, args.seed, args.threads, trainer_cls=TorchOptimTrainer),
            "- pool before ReLU": EngineRound(fed, args.seed, args.threads, patch=relu_after_pool_off),
            "- eval batch 64 (1024)": EngineRound(fed, args.seed, args.threads, evaluator_batch=1024),
        }
        abl = harness.time_side_by_side({k: v for k, v in ablations.items()}, args.repeats, keep_output=False)
        rec.table(f"N={n}: ablation, full round seconds (each optimisation switched off in turn; ratio = "
                  f"all-on / variant, < 1 = slower without it)", abl, baseline="engine (all on)", case=f"N={n} ablation")


if __name__ == "__main__":
    main()
