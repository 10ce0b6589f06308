"""Scaling with the number of clients N: seconds per round of training, and the server step's seconds and
peak memory for the paper's 25M-parameter CNN. Writes docs/figures/scaling.png.

Training (the round_speed workload): tinyvgg on MNIST-shaped synthetic data (cflcore.data.synthetic), 300
train / 130 test samples per client, 2,000 orchestrator samples, batch 32, 3 local epochs, SGD lr 0.01,
evaluation every round, BNC (FedAvg), the ``loop`` trainer; N = 15, 30, 60, 120. Each N is a fresh engine
(cflcore.fl.run.build_engine) whose rounds are timed whole and with ``trainer.train`` timed inside; one
warm-up round (at the smallest N) runs first. ``--trainer vmap`` times the vmap trainer instead: on a CPU
that only exercises its code path (the vmap trainer is the CUDA default, and this machine has no GPU), and
its first round is checked against the loop trainer's (same seed; float32, atol 1e-4 on the parameters).

Server step (ocfl-cnn, 000's MNIST network, 25.4M parameters): everything the engine does in a round except
local training: writing the N start vectors into the round buffer, the round's ONE Gram product
(cflcore.clustering.divergence.update_gram, float64-accumulated, taken in one pass over the trained rows and the
cluster model; the deltas themselves are never made because OCFL before clustering reads only Γ), OCFL's Γ and
temperature from it (``min_round`` keeps OCFL from clustering so Γ is computed every round), gram.parquet and
the temperature of server.parquet from the same product, FedAvg aggregation and the records. It is measured by
running ``Engine.run_round`` with the trainer replaced by a stub that adds a fixed direction per client in place
(its own time is subtracted), on tiny client data (no evaluation in the timed rounds), one warm-up round first,
each N in a fresh subprocess whose peak resident memory (getrusage ru_maxrss) is the memory figure. Inside the
same rounds the parts are timed by wrapping them: the Gram product (run.update_gram), the strategy
(Strategy.aggregate), the aggregation (Engine.aggregate); the rest is the start rows and the bookkeeping. The
floor is measured in the same subprocess right after the rounds: one read pass over the N × P
trained rows (torch.sum) plus the Gram product's 2·N²·P flops at the sgemm rate measured there and then
(2048² torch.mm); the script prints server step / floor, each part beside its floor, and peak RSS against the
deltas' N × P × 4 bytes. Before the timed children, the step is checked against the reference computation on
fresh tensors (FedAvg model bit-identical; Gram cosines, OCFL's Γ and T within the tolerance stated in
cflcore/clustering/divergence.py of one float64 product of the widened deltas; EquivalenceError otherwise).

Where the time and the memory went (profiled at 5d5cc75 with /usr/bin/time -v and torch.profiler,
N = 15 and 30, AMD EPYC, 1 thread): the round allocated five fresh N × P float32 matrices (the stacked
starts, the trainer's output, the deltas, and FedAvg's index_select copies of the trained and start
vectors): peak 8.5 GiB at N = 15 (1.42 GiB of deltas) and 15.6 GiB at N = 30, i.e. ~485 MB·N + 1.5 GB; the
kernel zeroing their fresh pages every round made 2 min 40 s of system time against 1 min 24 s of user time;
and the Gram product ran twice (OCFL's float32 Γ, the engine's float64 Gram). Now (cflcore/fl/deltas.py,
cflcore/fl/run.py): one N × P buffer allocated once and reused by every round; the trainer writes into it;
it becomes the deltas in place and, after the strategy, the trained vectors again bit for bit (the few
positions where start + delta does not round back are kept aside exactly); FedAvg reads it in place when a
cluster holds every row; start vectors are kept only for strategies with ``needs_start_vectors`` (Louvain);
each Gram product runs once per round and precision on RoundUpdates and is shared by the engine and the
strategy. What remains is the two Gram products: OCFL's default ``precision: float32`` and the engine's
recorded float64 Gram are different products, and both must stay as they were for the outputs to stay
bit-identical; a strategy at ``precision: float64`` shares the engine's single product. MKL runs this thin
(N × P)·(P × N) shape far below its square-sgemm rate, which is what keeps the step above its floor.
torch.profiler of one lean round (N = 15, ocfl-cnn at 16x16 = 8.5M parameters, stub trainer, machine shared
by ~9 busy processes): self CPU 29.4 s = aten::copy_ 50 % (mostly the float64 Gram's up-cast blocks, each a
fresh N × 2^21 float64 allocation; plus writing the start rows and the deltas), aten::mm 24 % (the two Gram
products), nonzero / ne / add / sub 20 % (the exact round trip). The up-cast now reuses one block
(cflcore.clustering.divergence.gram_matrix: 3x faster on 15 × 8.5M here, bit-identical).
Since then (byte-identity with earlier commits given up for a stated tolerance): ONE Gram product
a round, float64-accumulated (its tolerance in cflcore/clustering/divergence.py), taken in one pass over the
trained rows and the cluster models, so the buffer stays the trained vectors and the in-place round trip (and
its exact fix-ups) runs only for a strategy that reads the deltas (cflcore.strategies.base.RoundUpdates); FedAvg
of a subset of rows reads them in place block by block (cflcore.fl.server.rows_mean).

Memory: one N × P float32 buffer plus the Gram product's float64 column block (BLOCK_BYTES), the exact
fix-ups when the deltas are made, and the model copies (see the printed "peak RSS = fixed + x × the deltas").
An N whose predicted peak exceeds ``--max-mem-gb`` (default 85 % of MemAvailable) is not run as a round:
  * its divergence term is timed alone on an N × P matrix (one copy) when that fits and N ≤ --alone-max-n
    (default 60), else extrapolated;
  * its server step = the rest (linear fit in N of the measured rounds) + its divergence term, and its peak
    memory a linear fit; both are marked EXTRAPOLATED (figure: hollow markers; CSVs: extrapolated = 1).
The divergence term is a·N + b·N² (the Gram product is 2·N²·P flops, the float64 widening and the reads
N·P). At P = 25M the N·P part dominates up to N ~ 200, so b cannot be read off N ≤ 60. It is measured by
an "N² probe": the same call at N = 60, 120, 240 on P' = 2^20 columns (where N² dominates), fitted, and
b scaled by P/P' (both parts are proportional to P at fixed N); a comes from the full-P measurements.

Also measured: one client's local training of ocfl-cnn itself (same workload), times N, so the crossing
can be stated for one model as well as for the tinyvgg training curve this benchmark was built for (which sets a
25M-parameter server step against 10k-parameter training).

Crossing: the N where server-step (and divergence-term) seconds exceed training seconds per round,
interpolated in log-log between the points, else solved on the fits (a·N + b·N² = c·N + d) and marked
EXTRAPOLATED; and where the N² part alone (b·N²) overtakes training (c·N): N = c / b.

Default run: about 3-4 minutes on a quiet 2-core machine (training at N = 120 alone is ~40 s).

Usage: OMP_NUM_THREADS=1 python benchmarks/scaling.py [--quick] [--sizes 15 30 60 120] [--trainer loop|vmap]
       [--repeats 1] [--threads 1] [--csv PATH] [--figure PATH] [--max-mem-gb G] [--round-max-n N] [--alone-max-n N]
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import Result, assert_close  # noqa: E402

from harness import build_engine  # noqa: E402
from cflcore.data.synthetic import synthetic_federated  # noqa: E402
from cflcore.fl.trainers import TrainResult  # noqa: E402

LOG = logging.getLogger("bench.scaling")
FIGURE = harness.ROOT / "docs" / "figures" / "scaling.png"
SUMMARY_COLUMNS = ("run_id", "n_clients", "trainer", "train_model", "train_s", "round_s", "server_model", "n_params",
                   "server_s", "divergence_s", "server_extrapolated", "divergence_extrapolated", "peak_rss_mb", "rss_before_mb", "cnn_train_s",
                   "floor_s", "deltas_mb", "train_from", "cpu", "torch", "threads")
TIME_TARGET, MEMORY_TARGET = 3.0, 1.5  # targets: server step <= 3x its floor; peak <= fixed + 1.5x the deltas


def train_settings(model: str, trainer: str, threads: int, algorithm: dict[str, Any], eval_every: int = 1) -> dict:
    return {"training": {"model": model, "optimizer": "sgd", "lr": 0.01, "batch_size": 32, "local_epochs": 3,
                         "rounds": 10 ** 6},
            "engine": {"trainer": trainer, "precision": "fp32", "eval_every": eval_every, "checkpoint_every": 10 ** 6,
                       "channels_last": True, "threads": threads},
            "algorithm": algorithm, "device": "cpu"}


# ---------------------------------------------------------------------------------------------
# Training curve (in this process)
# ---------------------------------------------------------------------------------------------
def timed_round(engine, state) -> tuple[float, float]:
    """(whole round, trainer.train) seconds of the engine's next round."""
    trainer = engine.trainer
    original = trainer.train
    spent = [0.0]

    def train(*a):
        t = time.perf_counter()
        out = original(*a)
        spent[0] += time.perf_counter() - t
        return out

    trainer.train = train
    try:
        t0 = time.perf_counter()
        engine.run_round(state, state.next_round, 10 ** 6)
        return time.perf_counter() - t0, spent[0]
    finally:
        trainer.train = original


def workload(n: int, quick: bool, seed: int):
    n_train, n_test, n_orch = (60, 20, 200) if quick else (300, 130, 2000)
    return synthetic_federated(n_clients=n, n_train=n_train, n_test=n_test, n_orch=n_orch, shape=(1, 28, 28),
                               n_classes=10, seed=seed)


def check_vmap_against_loop(n: int, quick: bool, seed: int, threads: int) -> float:
    """One round of the vmap trainer against the loop trainer from the same seed: the cluster model after
    round 0 (float32, atol 1e-4: the trainers batch the convolutions differently)."""
    fed = workload(n, quick, seed)
    models = []
    for trainer in ("loop", "vmap"):
        engine, state = build_engine(fed, train_settings("tinyvgg", trainer, threads, {"method": "bnc"}), seed, LOG)
        engine.run_round(state, 0, 10 ** 6)
        models.append(state.models[0].clone())
    return assert_close("vmap trainer", models[1], models[0], atol=1e-4, what="model after round 0 (vs the loop trainer)")


def training_curve(rec: harness.Recorder, sizes: Sequence[int], trainer: str, repeats: int, quick: bool, seed: int,
                   threads: int) -> dict[int, tuple[Result, Result]]:
    out: dict[int, tuple[Result, Result]] = {}
    warm_engine, warm_state = build_engine(workload(sizes[0], quick, seed), train_settings("tinyvgg", trainer, threads,
                                                                                          {"method": "bnc"}), seed, LOG)
    harness.check_threads(threads)
    timed_round(warm_engine, warm_state)  # warm-up round (code paths, allocator, thread pool); not recorded
    del warm_engine, warm_state
    for n in sizes:
        engine, state = build_engine(workload(n, quick, seed), train_settings("tinyvgg", trainer, threads,
                                                                            {"method": "bnc"}), seed, LOG)
        harness.check_threads(threads)
        whole, train = Result(f"{trainer}: round"), Result(f"{trainer}: local training")
        for _ in range(repeats):
            r, t = timed_round(engine, state)
            whole.seconds.append(r)
            train.seconds.append(t)
        rec.record(f"tinyvgg N={n}", [whole, train])
        out[n] = (whole, train)
        print(f"  N={n:>4}: round {whole.median:7.2f} s, local training {train.median:7.2f} s "
              f"(min/max {train.min:.2f}/{train.max:.2f}), server + evaluation {whole.median - train.median:6.2f} s",
              flush=True)
        del engine, state
    return out


# ---------------------------------------------------------------------------------------------
# Server step (one subprocess per N)
# ---------------------------------------------------------------------------------------------
@dataclass
class StubTrainer:
    """Stands in for local training: start + a fixed direction of the client's cluster (clients in three
    clusters), scaled per client. Allocates its output like the real trainers do."""

    directions: torch.Tensor  # (3, P)
    spent: float = 0.0

    def train(self, starts, clients, client_seeds, out=None) -> TrainResult:
        t = time.perf_counter()
        if out is None:
            out = starts.clone()
        elif out is not starts:
            out.copy_(starts)
        for i in range(out.shape[0]):
            out[i].add_(self.directions[i % 3], alpha=1e-3 * (1 + 0.01 * i))
        self.spent += time.perf_counter() - t
        return TrainResult(out, [np.ones(1) for _ in range(out.shape[0])])


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_child(n: int, image: int, repeats: int, seed: int, threads: int) -> dict[str, Any]:
    """Runs in a fresh process: build an ocfl-cnn engine for n clients, one warm-up round, ``repeats`` timed rounds."""
    fed = synthetic_federated(n_clients=n, n_train=8, n_test=4, n_orch=16, shape=(1, image, image), n_classes=10, seed=seed)
    algorithm = {"method": "ocfl", "min_round": 10 ** 6}  # Γ and T every round, never clusters
    engine, state = build_engine(fed, train_settings("ocfl-cnn", "loop", threads, algorithm, eval_every=10 ** 6), seed, LOG)
    harness.check_threads(threads)
    p = engine.model_layout.n_full
    gen = torch.Generator().manual_seed(seed)
    stub = StubTrainer(torch.randn(3, p, generator=gen))
    engine.trainer = stub
    # the parts of the real round: the one Gram product (engine.update_gram, the divergence term), the
    # strategy (OCFL's Γ and T from that product), the aggregation (FedAvg) and the rest (start rows, bookkeeping)
    import cflcore.fl.engine as engine_module

    parts = {"gram": 0.0, "strategy": 0.0, "aggregation": 0.0}
    fixes: list[int] = []

    def timed(part: str, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                parts[part] += time.perf_counter() - t
        return wrapper

    engine_module.update_gram = timed("gram", engine_module.update_gram)  # type: ignore[assignment]
    engine.strategy.aggregate = timed("strategy", engine.strategy.aggregate)  # type: ignore[method-assign]
    engine.aggregate = timed("aggregation", engine.aggregate)  # type: ignore[method-assign]
    to_deltas = engine_module.to_deltas_

    def counting(*a, **k):
        fix = to_deltas(*a, **k)
        fixes.append(fix.count)
        return fix

    engine_module.to_deltas_ = counting  # type: ignore[assignment]
    before = rss_mb()
    engine.run_round(state, 0, 10 ** 6)  # warm-up round (evaluates: round 0 always does)
    seconds, div_seconds, part_seconds = [], [], []
    for _ in range(repeats):
        stub.spent = 0.0
        parts.update(dict.fromkeys(parts, 0.0))
        t0 = time.perf_counter()
        engine.run_round(state, state.next_round, 10 ** 6)
        seconds.append(time.perf_counter() - t0 - stub.spent)
        div_seconds.append(parts["gram"])
        part_seconds.append(dict(parts))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    temps = [r["temperature"] for r in state.server_rows]
    floor = measure_floor(engine.buffer[:n], repeats)  # side by side, same process, after the rounds
    return {"n": n, "n_params": p, "server_s": seconds, "divergence_s": div_seconds, "peak_rss_mb": peak,
            "rss_before_mb": before, "temperatures": temps, "exact_fixes": sum(fixes), "deltas_made": len(fixes),
            "parts": part_seconds[int(np.argsort(seconds)[len(seconds) // 2])], **floor}


def sgemm_gflops(repeats: int = 5, n: int = 2048) -> float:
    """Single-process sgemm rate (n x n torch.mm at the current thread count): the best of ``repeats``."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(harness.time_call(lambda: a @ b)[0] for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def measure_floor(deltas: torch.Tensor, repeats: int) -> dict[str, float]:
    """The server step's floor: one read pass over the (N × P) deltas (torch.sum, best of
    ``repeats`` + 2) plus the N² Gram product's 2·N²·P flops at the sgemm rate measured here and now."""
    n, p = deltas.shape
    read = min(harness.time_call(lambda: deltas.sum())[0] for _ in range(repeats + 2))
    rate = sgemm_gflops()
    gram = 2 * n * n * p / rate / 1e9
    return {"floor_s": read + gram, "read_s": read, "gram_floor_s": gram, "sgemm_gflops": rate}


def check_lean_equivalence(n: int, image: int, seed: int, threads: int) -> dict[str, Any]:
    """The fast server step computes what the reference does: two rounds of the ocfl-cnn engine
    with the stub trainer against the reference formulas on fresh tensors: deltas = trained − starts, one float64
    product of the widened deltas (Gram, temperature, OCFL's Γ) and FedAvg = mean of the trained vectors. FedAvg
    must be bit-identical; the Gram's cosines, Γ and T within cflcore.clustering.divergence.cosine_tolerance(P) of
    the reference (both sides are within it of the exact values, hence twice it). EquivalenceError otherwise."""
    from cflcore.clustering.divergence import cosine_divergence_from_gram, cosine_similarity_from_gram, cosine_tolerance
    from cflcore.clustering.divergence import temperature as divergence_temperature

    fed = synthetic_federated(n_clients=n, n_train=8, n_test=4, n_orch=16, shape=(1, image, image), n_classes=10, seed=seed)
    engine, state = build_engine(fed, train_settings("ocfl-cnn", "loop", threads, {"method": "ocfl", "min_round": 10 ** 6},
                                                     eval_every=10 ** 6), seed, LOG)
    gen = torch.Generator().manual_seed(seed)
    stub = StubTrainer(torch.randn(3, engine.model_layout.n_full, generator=gen) * 20)  # moves many weights across zero
    engine.trainer = stub
    tol = 2 * cosine_tolerance(engine.model_layout.n_full)
    checked = {"rounds": 0, "fixes": 0, "worst": 0.0, "tol": tol}
    for rnd in range(2):
        starts = torch.stack([state.models[0]] * n)
        news = stub.train(starts, fed.clients, list(range(n))).params
        deltas = news - starts
        fedavg = news.mean(dim=0)
        wide = deltas.to(torch.float64)
        gram_ref = (wide @ wide.T).numpy()
        checked["fixes"] += int(torch.ne(starts + deltas, news).sum())
        engine.run_round(state, rnd, 10 ** 6)
        got = np.asarray(state.gram_rows[-n * n:], dtype=np.float64)[:, 3].reshape(n, n)
        div = np.asarray(state.divergence_rows[-n * n:], dtype=np.float64)[:, 3].reshape(n, n)
        errors = {"cosines of the Gram (gram.parquet)": np.abs(cosine_similarity_from_gram(got) - cosine_similarity_from_gram(gram_ref)).max(),
                  "OCFL's Γ (divergence.parquet)": np.abs(div - cosine_divergence_from_gram(gram_ref)).max(),
                  "temperature (server.parquet)": abs(state.server_rows[-1]["temperature"]
                                                      - divergence_temperature(cosine_divergence_from_gram(gram_ref)))}
        for what, err in errors.items():
            if not err <= tol:
                raise harness.EquivalenceError(f"server step, round {rnd}: {what} differs from the float64 reference by "
                                               f"{err:.3g} > {tol:.3g}")
            checked["worst"] = max(checked["worst"], float(err))
        if not torch.equal(state.models[0], fedavg):
            raise harness.EquivalenceError(f"server step, round {rnd}: the FedAvg model differs from the mean of the trained vectors")
        checked["rounds"] += 1
    return checked


def ocfl_cnn_params(image: int) -> int:
    from cflcore.models import build_model

    with torch.device("meta"):
        return sum(p.numel() for p in build_model("ocfl-cnn", 1, (image, image), 10).state_dict().values())


def divergence_child(n: int, image: int, repeats: int, seed: int, threads: int) -> dict[str, Any]:
    """Runs in a fresh process: the round's divergence term alone, on an (n, P) float32 matrix of updates (the
    same two calls the round makes: OCFL's divergence_numpy and the engine's temperature), for N whose whole
    round does not fit in memory (the round holds about five n × P copies, this one plus a float64 block)."""
    import cflcore.fl.run as run_module

    p = ocfl_cnn_params(image)
    gen = torch.Generator().manual_seed(seed)
    deltas = torch.randn(n, p, generator=gen).mul_(0.5 / p ** 0.5)
    for c in range(3):
        deltas[c::3].add_(torch.randn(p, generator=gen), alpha=p ** -0.5)

    def term(x: torch.Tensor) -> float:  # the round's one Gram product, Γ and T from it
        return run_module.temperature(x)[0]

    term(deltas[:, : 1 << 20].contiguous())  # warm-up on a slice
    seconds, temps = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        temps.append(term(deltas))
        seconds.append(time.perf_counter() - t0)
    return {"n": n, "n_params": p, "divergence_s": seconds, "temperatures": temps,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def gram_probe(ns: Sequence[int], p_small: int, repeats: int, seed: int) -> dict[str, Any]:
    """The divergence term's two calls on (n, p_small) updates for growing n: at a small P the n² part (the Gram
    products' 2·n²·P flops each) can be resolved at n far beyond what fits at P = 25M; cost ∝ P at fixed n."""
    import cflcore.fl.run as run_module

    gen = torch.Generator().manual_seed(seed)
    full = torch.randn(max(ns), p_small, generator=gen)

    def term(x: torch.Tensor) -> None:  # the round's one Gram product, Γ and T from it
        run_module.temperature(x)

    term(full[: ns[0]])  # warm-up
    out: dict[str, list[float]] = {}
    for n in ns:
        x = full[:n].contiguous()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            term(x)
            times.append(time.perf_counter() - t0)
        out[str(n)] = times
    return {"p_small": p_small, "seconds": out}


def cnn_train_child(image: int, quick: bool, seed: int, threads: int) -> dict[str, Any]:
    """One client's local training of ocfl-cnn on the round_speed workload (seconds of trainer.train)."""
    fed = workload(1, quick, seed) if image == 28 else synthetic_federated(
        n_clients=1, n_train=60, n_test=4, n_orch=16, shape=(1, image, image), n_classes=10, seed=seed)
    engine, state = build_engine(fed, train_settings("ocfl-cnn", "loop", threads, {"method": "bnc"}, eval_every=10 ** 6), seed, LOG)
    harness.check_threads(threads)
    starts = torch.stack([state.models[0]])
    clients = [fed.clients[0]]
    engine.trainer.train(starts, clients, [seed])  # warm-up
    t0 = time.perf_counter()
    engine.trainer.train(starts, clients, [seed + 1])
    return {"cnn_train_s": time.perf_counter() - t0, "n_params": engine.model_layout.n_full}


def run_child(args: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def mem_available_gb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2 ** 20
    return float("inf")


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) by least squares (one point: through the origin)."""
    if len(xs) == 1:
        return ys[0] / xs[0], 0.0
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(slope), float(intercept)


def server_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(a, b) ≥ 0 of a·N + b·N² by non-negative least squares (one point: all of it N²)."""
    from scipy.optimize import nnls

    x = np.asarray(xs, float)
    if len(x) == 1:
        return 0.0, ys[0] / x[0] ** 2
    coef, _ = nnls(np.stack([x, x * x], axis=1), np.asarray(ys, float))
    return float(coef[0]), float(coef[1])


def check_temperatures(n: int, temps: Sequence[Any]) -> None:
    if not temps or not all(t is not None and math.isfinite(t) and 0.0 <= t <= 1.0 for t in temps):
        raise RuntimeError(f"N={n}: the temperatures are not finite values in [0, 1]: {temps}")


def predict_peak_mb(server: dict[int, dict[str, Any]], meas: Sequence[int], n: int) -> float:
    """Peak RSS at ``n`` from the measured points: a linear fit (one point: its RSS before the first round
    plus the round's increment scaled by n)."""
    if len(meas) > 1:
        slope, icpt = linear_fit(meas, [server[m]["peak_rss_mb"] for m in meas])
        return slope * n + icpt
    m = server[meas[0]]
    return m["rss_before_mb"] + (m["peak_rss_mb"] - m["rss_before_mb"]) * n / meas[0]


def crossing(what: str, against: str, sizes: Sequence[int], train_s: Sequence[float], serv_s: Sequence[float],
             server: dict[int, dict[str, Any]], fits: tuple[float, float, float, float], measured: str = "round") -> str:
    """Where ``serv_s`` rises above ``train_s``: interpolated in log-log between the points, else solved on
    the fits a·N + b·N² = c·N + d (marked EXTRAPOLATED)."""
    x = harness.log_log_crossing(sizes, train_s, serv_s)
    if x is not None and serv_s[0] >= train_s[0]:
        return f"{what} exceeds {against} already at the smallest N={sizes[0]}"
    if x is not None:
        bracket = [max((n for n in sizes if n <= x), default=sizes[0]), min((n for n in sizes if n >= x), default=sizes[-1])]
        extrap = any(not server[n][measured] for n in bracket)
        return f"{what} overtakes {against} at N ≈ {x:.0f}" + (" (server side EXTRAPOLATED)" if extrap else "")
    root = solve_crossing(*fits)
    return (f"{what} stays below {against} up to N={sizes[-1]}; "
            + (f"crossing at N ≈ {root:,.0f} (EXTRAPOLATED from the fits)" if root else "no crossing on the fits"))


def solve_crossing(a: float, b: float, c: float, d: float) -> float | None:
    """Smallest N > 0 with a·N + b·N² = c·N + d (server quadratic vs training linear)."""
    if b <= 0:
        return None
    disc = (a - c) ** 2 + 4 * b * d
    if disc < 0:
        return None
    root = (-(a - c) + math.sqrt(disc)) / (2 * b)
    return root if root > 0 else None


# ---------------------------------------------------------------------------------------------
# Figure
# ---------------------------------------------------------------------------------------------
def plot(path: Path, sizes: Sequence[int], server_sizes: Sequence[int], trainer: str, train: dict[int, tuple[Result, Result]],
         server: dict[int, dict[str, Any]], cnn_train_s: float | None, crossing_text: str, n_params: int,
         server_model: str) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, am) = plt.subplots(1, 2, figsize=(12, 5.4), gridspec_kw={"width_ratios": [1.5, 1]})
    xs = list(sizes)
    label = "loop trainer" if trainer == "loop" else "vmap trainer on CPU (code path only)"
    ax.plot(xs, [train[n][1].median for n in xs], "o-", color="C0", label=f"tinyvgg local training ({label})")
    ax.plot(xs, [train[n][0].median for n in xs], "s--", color="C0", alpha=0.5, label="tinyvgg whole round (+ eval, server)")
    ss = list(server_sizes)
    meas = [n for n in ss if server[n]["round"]]
    extr = [n for n in ss if not server[n]["round"]]
    dmeas = [n for n in ss if server[n]["div_measured"]]
    dextr = [n for n in ss if not server[n]["div_measured"]]
    ax.plot(ss, [server[n]["server_s"] for n in ss], "-", color="C3", alpha=0.6)
    ax.plot(meas, [server[n]["server_s"] for n in meas], "o", color="C3",
            label=f"{server_model} server step ({n_params / 1e6:.1f}M params), measured")
    if extr:
        ax.plot(extr, [server[n]["server_s"] for n in extr], "o", mfc="none", color="C3",
                label="server step EXTRAPOLATED (round does not fit in memory):\n"
                      "linear fit of the rest + the divergence term")
    ax.plot(ss, [server[n]["div_s"] for n in ss], "-", color="C4", alpha=0.6)
    ax.plot(dmeas, [server[n]["div_s"] for n in dmeas], "^", color="C4",
            label="of which the divergence term (the Gram product → Γ, T: a·N + b·N²), measured")
    if dextr:
        ax.plot(dextr, [server[n]["div_s"] for n in dextr], "^", mfc="none", color="C4",
                label="divergence term EXTRAPOLATED (a·N + b·N² fit)")
    if cnn_train_s is not None:
        ax.plot(xs, [cnn_train_s * n for n in xs], ":", color="C2",
                label=f"{server_model} local training (1 client measured × N)")
    if trainer == "loop":
        ax.plot([], [], " ", label="vmap trainer (CUDA default): not measurable here, no GPU;\n"
                                   "its code path runs on CPU with --trainer vmap")
    ax.set_yscale("log")
    ticks = sorted(set(xs) | set(ss))
    for axis in (ax, am):
        axis.set_xscale("log")
        axis.set_xticks(ticks)
        axis.set_xticklabels([str(n) for n in ticks])
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("clients N")
    ax.set_ylabel("seconds per round")
    ax.set_title("seconds per round vs N (1 CPU thread)")
    ax.legend(fontsize=7, loc="upper left")
    fig.text(0.01, 0.01, crossing_text, ha="left", va="bottom", fontsize=7.5)
    am.plot(ss, [server[n]["peak_rss_mb"] / 1024 for n in ss], "-", color="C3", alpha=0.6)
    am.plot(meas, [server[n]["peak_rss_mb"] / 1024 for n in meas], "o", color="C3", label="peak RSS, measured")
    if extr:
        am.plot(extr, [server[n]["peak_rss_mb"] / 1024 for n in extr], "o", mfc="none", color="C3",
                label="EXTRAPOLATED (linear fit)")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    am.axhline(total, color="grey", ls="--", lw=1, label=f"this machine's RAM ({total:.0f} GiB)")
    am.set_xlabel("clients N")
    am.set_ylabel("GiB")
    am.set_title(f"server step peak memory ({server_model}, float32)")
    am.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Scaling with N on {harness.cpu_model()}, torch {torch.__version__}", fontsize=9)
    fig.tight_layout(rect=(0, 0.025 + 0.028 * (crossing_text.count("\n") + 1), 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_common_args(ap, default_repeats=1, quick_repeats=1)
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="N values (default 15 30 60 120; quick 4 8)")
    ap.add_argument("--trainer", choices=["loop", "vmap"], default="loop")
    ap.add_argument("--figure", type=Path, default=None,
                    help=f"figure path (default {FIGURE.relative_to(harness.ROOT)}; quick: results/benchmarks/scaling_quick.png)")
    ap.add_argument("--max-mem-gb", type=float, default=None, help="memory a server-step child may use (default 85%% of MemAvailable)")
    ap.add_argument("--image", type=int, default=None, help="ocfl-cnn input size for the server step (default 28 = 25.4M params; quick 8)")
    ap.add_argument("--server-extra-sizes", type=int, nargs="*", default=None,
                    help="extra small N measured for the server step only, to support the fits (default none)")
    ap.add_argument("--no-cnn-training", action="store_true", help="skip timing one ocfl-cnn client's local training")
    ap.add_argument("--reuse-training", type=Path, default=None,
                    help="take the tinyvgg training curve (train_s, round_s per N) from an earlier summary CSV instead of "
                         "timing it (for a busy machine; the CSV's run id is kept in the train_from column)")
    ap.add_argument("--round-max-n", type=int, default=10 ** 9,
                    help="time whole server rounds only up to this N (beyond: the divergence term alone, else extrapolated)")
    ap.add_argument("--alone-max-n", type=int, default=None,
                    help="time the divergence term alone (full P) only up to this N (default 60; quick no limit)")
    ap.add_argument("--no-divergence-probe", action="store_true",
                    help="for N whose round does not fit, do not time the divergence term alone (extrapolate it)")
    ap.add_argument("--_server-child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--_divergence-child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--probe-params", type=int, default=None,
                    help="P of the N² probe (default 2^20; quick 2^16): the divergence term at N = 60, 120, 240 (quick 16, 32, 64)")
    args = ap.parse_args()
    image = args.image or (8 if args.quick else 28)
    probe_p = args.probe_params or (1 << 16 if args.quick else 1 << 20)
    if args.alone_max_n is None:
        args.alone_max_n = 10 ** 9 if args.quick else 60
    if args._server_child is not None or args._divergence_child is not None:  # subprocess modes: one JSON line
        harness.set_threads(args.threads)
        harness.seed_everything(args.seed)
        if args._server_child is not None:
            out = server_child(args._server_child, image, args.repeats or 1, args.seed, args.threads)
        else:
            out = divergence_child(args._divergence_child, image, args.repeats or 1, args.seed, args.threads)
        print(json.dumps(out))
        return
    rec = harness.setup(args, "scaling")
    sizes = sorted(args.sizes or ([4, 8] if args.quick else [15, 30, 60, 120]))
    extra = args.server_extra_sizes or []
    server_sizes = sorted(set(sizes) | set(extra))
    common = ["--threads", str(args.threads), "--seed", str(args.seed), "--image", str(image)] + (["--quick"] if args.quick else [])

    if args.trainer == "vmap":
        diff = check_vmap_against_loop(sizes[0], args.quick, args.seed, args.threads)
        print(f"vmap trainer == loop trainer after one round at N={sizes[0]} (max |diff| {diff:.1e}, atol 1e-4)")
    print(f"\ntraining: tinyvgg, {args.trainer} trainer, {'60/20' if args.quick else '300/130'} samples per client, batch 32, "
          f"3 local epochs, BNC, evaluation every round; {args.repeats} timed round(s) per N after one warm-up round")
    train_from = ""
    if args.reuse_training:
        with args.reuse_training.open(newline="") as fh:
            old = {int(r["n_clients"]): r for r in csv.DictReader(fh) if r["train_s"]}
        train = {n: (Result(f"{args.trainer}: round", [float(old[n]["round_s"])]),
                     Result(f"{args.trainer}: local training", [float(old[n]["train_s"])])) for n in sizes}
        train_from = next(iter(old.values()))["run_id"]
        print(f"  training curve NOT re-timed: taken from {args.reuse_training} (run {train_from}, cpu "
              f"{next(iter(old.values()))['cpu']}, torch {next(iter(old.values()))['torch']})")
    else:
        train = training_curve(rec, sizes, args.trainer, args.repeats, args.quick, args.seed, args.threads)

    cnn_train_s = None
    if not args.no_cnn_training:
        ct = cnn_train_child(image, args.quick, args.seed, args.threads)  # in this process: only its time matters
        cnn_train_s = ct["cnn_train_s"]
        rec.record(f"ocfl-cnn({image}x{image}) 1 client local training", [Result("loop: local training", [cnn_train_s])])
        print(f"\nocfl-cnn ({ct['n_params'] / 1e6:.1f}M params) local training of one client: {cnn_train_s:.2f} s")

    budget = args.max_mem_gb or 0.85 * mem_available_gb()
    p_cnn = ocfl_cnn_params(image)
    eq = check_lean_equivalence(max(4, min(sizes)), 8 if not args.quick else 8, args.seed, args.threads)
    print(f"\nserver step == the reference (ocfl-cnn 8x8, stub trainer, {eq['rounds']} rounds): FedAvg model bit-identical; "
          f"Gram cosines, OCFL's Γ and T within {eq['worst']:.2g} of one float64 product of the widened deltas "
          f"(tolerance {eq['tol']:.2g}); {eq['fixes']} trained values would need the exact fix-up if the deltas were made")
    print(f"\nserver step: ocfl-cnn {image}x{image} ({p_cnn / 1e6:.1f}M params), OCFL (Γ + T every round) from the round's one "
          f"Gram product + FedAvg; stub trainer; one subprocess per N; memory budget {budget:.1f} GiB")
    server: dict[int, dict[str, Any]] = {}
    for n in server_sizes:
        rounds = [m for m in server if server[m]["round"]]
        # a priori: five n × P float32 copies on top of ~1.6 GB (torch, model copies); then from the measurements
        # a priori: one n × P float32 buffer (plus a little) on top of ~1.6 GB (torch, model copies)
        predicted = (predict_peak_mb(server, rounds, n) if rounds else 1.25 * n * p_cnn * 4 / 2 ** 20 + 1600) / 1024
        base_gb = min((server[m]["rss_before_mb"] for m in rounds), default=1600) / 1024
        if predicted <= budget and n <= args.round_max_n:
            out = run_child(["--_server-child", str(n), "--repeats", str(args.repeats), *common])
            res, dres = Result("server step", out["server_s"]), Result("divergence term", out["divergence_s"])
            rec.record(f"ocfl-cnn({image}x{image}) server step N={n}", [res, dres])
            check_temperatures(n, out["temperatures"])
            deltas_mb = n * p_cnn * 4 / 2 ** 20
            server[n] = {"round": True, "div_measured": True, "server_s": res.median, "div_s": dres.median,
                         "peak_rss_mb": out["peak_rss_mb"], "rss_before_mb": out["rss_before_mb"], "floor_s": out["floor_s"]}
            ratio = res.median / out["floor_s"]
            mem_x = (out["peak_rss_mb"] - out["rss_before_mb"]) / deltas_mb
            models_mb = 2 * p_cnn * 4 / 2 ** 20  # cluster models made in the round: configure's copy and FedAvg's new one
            mem_ex = (out["peak_rss_mb"] - out["rss_before_mb"] - models_mb) / deltas_mb
            parts = out["parts"]
            rest = res.median - sum(parts.values())
            fixes = (f"{out['exact_fixes']:,} exact fix-ups" if out["deltas_made"] else
                     "deltas never made (no exact fix-ups)")
            print(f"  N={n:>4}: server step {res.median:7.2f} s (min/max {res.min:.2f}/{res.max:.2f}), peak RSS "
                  f"{out['peak_rss_mb'] / 1024:5.2f} GiB (before the first round {out['rss_before_mb'] / 1024:.2f} GiB); {fixes}\n"
                  f"          floor {out['floor_s']:.2f} s = read pass {out['read_s']:.2f} s + Gram at sgemm rate "
                  f"{out['gram_floor_s']:.2f} s ({out['sgemm_gflops']:.0f} GFLOP/s): server step = {ratio:.1f}x the floor "
                  f"(target <= {TIME_TARGET:g}x: {'met' if ratio <= TIME_TARGET else 'NOT met'})\n"
                  f"          parts: Gram product {parts['gram']:.2f} s (its floor, read + Gram at sgemm rate: {out['floor_s']:.2f} s, "
                  f"{parts['gram'] / out['floor_s']:.1f}x); aggregation {parts['aggregation']:.2f} s (floor: one read pass "
                  f"{out['read_s']:.2f} s, {parts['aggregation'] / out['read_s']:.1f}x); strategy {parts['strategy']:.3f} s; "
                  f"start rows + bookkeeping {rest:.2f} s (floor: one write pass ~ the read pass {out['read_s']:.2f} s)\n"
                  f"          peak RSS = fixed {out['rss_before_mb'] / 1024:.2f} GiB + {mem_x:.2f} x the deltas "
                  f"({deltas_mb / 1024:.2f} GiB = N x P x 4 B); without the round's two cluster-model copies "
                  f"({models_mb / 1024:.2f} GiB) {mem_ex:.2f} x (target <= {MEMORY_TARGET:g}x: "
                  f"{'met' if mem_ex <= MEMORY_TARGET else 'NOT met'})", flush=True)
            continue
        server[n] = {"round": False, "div_measured": False}
        msg = (f"  N={n:>4}: the round's predicted peak {predicted:.1f} GiB > budget {budget:.1f} GiB: not run" if predicted > budget
               else f"  N={n:>4}: > --round-max-n {args.round_max_n}: round not run")
        probe_gb = (n * p_cnn * 4 + n * min(p_cnn, 1 << 21) * 8) / 2 ** 30 + base_gb
        if not args.no_divergence_probe and probe_gb <= budget and n <= args.alone_max_n:
            out = run_child(["--_divergence-child", str(n), "--repeats", str(args.repeats), *common])
            dres = Result("divergence term (alone)", out["divergence_s"])
            rec.record(f"ocfl-cnn({image}x{image}) server step N={n}", [dres])
            check_temperatures(n, out["temperatures"])
            server[n].update(div_measured=True, div_s=dres.median)
            msg += (f"; its divergence term alone: {dres.median:.2f} s (min/max {dres.min:.2f}/{dres.max:.2f}; "
                    f"peak RSS {out['peak_rss_mb'] / 1024:.1f} GiB)")
        print(msg, flush=True)
    rounds = [n for n in server_sizes if server[n]["round"]]
    divs = [n for n in server_sizes if server[n]["div_measured"]]
    if not rounds:
        raise SystemExit("no server-step round fits in memory; lower --sizes or raise --max-mem-gb")
    # the rest of the server step (N·P copies) is linear in N; the divergence term a·N + b·N²
    ra, rb = linear_fit(rounds, [server[n]["server_s"] - server[n]["div_s"] for n in rounds])
    # the N² coefficient from the probe at small P (scaled by P), the linear one from the full-P points
    m = sizes[-1] if args.quick else max(2, sizes[-1] // 4)
    probe_ns = [2 * m, 4 * m, 8 * m]  # default 60, 120, 240 clients
    pr = gram_probe(probe_ns, probe_p, args.repeats, args.seed)  # in this process: small, only its time matters
    probe = {int(k): Result("divergence term (probe)", v) for k, v in pr["seconds"].items()}
    for k, r in probe.items():
        rec.record(f"divergence term probe P={probe_p} N={k}", [r])
    pa, pb = server_fit(list(probe), [r.median for r in probe.values()])
    b2 = pb * p_cnn / probe_p
    a2 = max(0.0, float(np.median([(server[n]["div_s"] - b2 * n * n) / n for n in divs])))
    print(f"  N² probe at P={probe_p:,}: " + ", ".join(f"N={k} {r.median:.2f} s" for k, r in probe.items())
          + f" -> {pa:.3g}·N + {pb:.3g}·N² ({2 * probe_p / pb / 1e9 if pb > 0 else float('nan'):.0f} GFLOP/s on the "
          f"round's Gram product); scaled to P={p_cnn:,}: b = {b2:.3g} s/N²")
    ms, mi = linear_fit(rounds, [server[n]["peak_rss_mb"] for n in rounds])
    for n in server_sizes:
        sv = server[n]
        if not sv["div_measured"]:
            sv["div_s"] = a2 * n + b2 * n * n
        if not sv["round"]:
            sv.update(server_s=ra * n + rb + sv["div_s"], peak_rss_mb=predict_peak_mb(server, rounds, n),
                      rss_before_mb=float("nan"))
            rec.record(f"ocfl-cnn({image}x{image}) server step N={n}",
                       [Result("server step", [sv["server_s"]], extrapolated=True)]
                       + ([] if sv["div_measured"] else [Result("divergence term", [sv["div_s"]], extrapolated=True)]))
    a, b = ra + a2, b2  # the whole server step's fit, for crossings beyond the largest N
    n_params = p_cnn

    # ---- table and crossing ------------------------------------------------------------------
    train_s = [train[n][1].median for n in sizes]
    serv_s = [server[n]["server_s"] for n in sizes]
    div_s = [server[n]["div_s"] for n in sizes]
    print(f"\n  {'N':>5} {'train s/round':>14} {'round s':>9} {'server s':>10} {'divergence s':>13} {'peak MB':>9}"
          + ("  ocfl-cnn train s (1 client x N)" if cnn_train_s else ""))
    for n in server_sizes:
        t = f"{train[n][1].median:14.2f} {train[n][0].median:9.2f}" if n in train else f"{'-':>14} {'-':>9}"
        extra = f"  {cnn_train_s * n:16.1f}" if cnn_train_s else ""
        flag = ("" if server[n]["round"] else "  server step EXTRAPOLATED" + (
            " (divergence term measured alone)" if server[n]["div_measured"] else ", divergence term EXTRAPOLATED"))
        print(f"  {n:>5} {t} {server[n]['server_s']:10.2f} {server[n]['div_s']:13.2f} {server[n]['peak_rss_mb']:9.0f}{extra}{flag}")
    if len(rounds) == 1:
        m = server[rounds[0]]
        mem = f"{m['rss_before_mb']:.0f} + {(m['peak_rss_mb'] - m['rss_before_mb']) / rounds[0]:.0f}·N MB"
    else:
        mem = f"{ms:.0f}·N + {mi:.0f} MB"
    print(f"  fits: rest of the server step {ra:.3g}·N + {rb:.3g} s (rounds at N = {rounds}); divergence term "
          f"{a2:.3g}·N + {b2:.3g}·N² s (N = {divs}); peak memory {mem}")
    n_big = 120
    big_mb = server[n_big]["peak_rss_mb"] if n_big in server and server[n_big]["round"] else predict_peak_mb(server, rounds, n_big)
    big_how = "measured" if n_big in server and server[n_big]["round"] else f"EXTRAPOLATED from the fit at N = {rounds}"
    print(f"  N = {n_big} at P = {p_cnn:,}: peak RSS {big_mb / 1024:.1f} GiB = {big_mb * 2 ** 20 / 1e9:.1f} GB ({big_how}); "
          f"deltas alone {n_big * p_cnn * 4 / 1e9:.1f} GB; {'fits' if big_mb * 2 ** 20 <= 24e9 else 'does NOT fit'} in 24 GB")
    c, d = linear_fit(sizes, train_s)
    texts = [crossing("server step", "tinyvgg training", sizes, train_s, serv_s, server, (a, b, c, d)),
             crossing("divergence term", "tinyvgg training", sizes, train_s, div_s, server, (a2, b2, c, d), "div_measured")]
    if cnn_train_s:
        cs = [cnn_train_s * n for n in sizes]
        texts += [crossing("server step", "ocfl-cnn training", sizes, cs, serv_s, server, (a, b, cnn_train_s, 0.0)),
                  crossing("divergence term", "ocfl-cnn training", sizes, cs, div_s, server, (a2, b2, cnn_train_s, 0.0),
                           "div_measured")]
    if b2 > 0:
        texts.append(f"the divergence term's N² part alone ({b2:.2g}·N² s) overtakes tinyvgg training (~{c:.2g}·N s) at N ≈ {c / b2:,.0f}"
                     + (f" and ocfl-cnn training ({cnn_train_s:.2g}·N s) at N ≈ {cnn_train_s / b2:,.0f}" if cnn_train_s else "")
                     + " (from the N² probe)")
    if train_from:
        texts.append(f"training curve NOT re-timed: from run {train_from} ({args.reuse_training.name}); "
                     "the server step was measured in this run")
    for t in texts:
        print("  " + t)

    # ---- outputs -------------------------------------------------------------------------------
    figure = args.figure or (harness.ROOT / "results" / "benchmarks" / "scaling_quick.png" if args.quick else FIGURE)
    plot(figure, sizes, server_sizes, args.trainer, train, server, cnn_train_s, "\n".join(texts), n_params or 0, "ocfl-cnn")
    summary = figure.with_name(figure.stem + "_data.csv")
    with summary.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=SUMMARY_COLUMNS)
        w.writeheader()
        for n in server_sizes:
            tr = train.get(n)
            w.writerow({"run_id": rec.run_id, "n_clients": n, "trainer": args.trainer, "train_model": "tinyvgg",
                        "train_s": f"{tr[1].median:.4g}" if tr else "", "round_s": f"{tr[0].median:.4g}" if tr else "",
                        "server_model": f"ocfl-cnn {image}x{image}", "n_params": n_params,
                        "server_s": f"{server[n]['server_s']:.4g}", "divergence_s": f"{server[n]['div_s']:.4g}",
                        "server_extrapolated": int(not server[n]["round"]),
                        "divergence_extrapolated": int(not server[n]["div_measured"]),
                        "peak_rss_mb": f"{server[n]['peak_rss_mb']:.0f}", "rss_before_mb": f"{server[n]['rss_before_mb']:.0f}",
                        "cnn_train_s": f"{cnn_train_s * n:.4g}" if cnn_train_s else "",
                        "floor_s": f"{server[n]['floor_s']:.4g}" if "floor_s" in server[n] else "",
                        "deltas_mb": f"{n * n_params * 4 / 2 ** 20:.0f}", "train_from": train_from, "cpu": harness.cpu_model(),
                        "torch": torch.__version__, "threads": torch.get_num_threads()})
    print(f"\nfigure: {figure}\nsummary: {summary}")


if __name__ == "__main__":
    main()
