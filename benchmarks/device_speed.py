"""Seconds per federated round on one device (CPU or CUDA GPU), against the round's FLOP floor on that device:
the published-style reference loop, the plain PyTorch loop, the engine's loop trainer and its vmap trainer, side by
side in one process, for tinyvgg and 000's CNN (ocfl-cnn) at N = 15, 30 and 100 clients.

    python benchmarks/round_speed.py --device cuda [--quick] [--models ocfl-cnn] [--clients 15 30 100]
    python benchmarks/device_speed.py --device cpu --quick        # the same, run directly

Workload: 000 Table 3's MNIST training on MNIST-shaped 1x28x28 synthetic data (cflcore.data.synthetic): 267 training
samples a client (000's draw per client at N = 15), 32 test samples a client, 256 orchestrator
samples, batch 32, 3 local epochs, SGD lr 0.01, BNC (= FedAvg), evaluation every round. ``--quick``: tinyvgg at
N = 4 and ocfl-cnn at N = 2 with 64 samples a client (a smoke run of a minute on a 2-core CPU).
``--sizes unequal``: paper-mnist5k's 162-175 samples a client instead (scaled by 64/267 under ``--quick``), whose
epochs end in batches of different sizes; the vmap trainer then runs both ways, ``engine.ragged_batches`` split
(one vmapped call per batch size) and pad (one call a step), and each prints its vmapped calls a round.

Variants (one timed call = one whole round: local training, server step, evaluation)
  reference    the published CFL code's style: per client ``copy.deepcopy`` of the global model, a DataLoader over
               the client's CPU tensors with every batch copied to the device, torch.optim.SGD, NCHW, the delta from
               ``state_dict``; every client's model evaluated on its test set and on the orchestrator set.
  plain        the strongest loop a user would write: one reused model, the data pre-stacked on the device and
               indexed by a permutation, torch.optim.SGD (foreach), channels_last on a CPU only, the one global
               model evaluated once on the orchestrator set.
  engine-loop  cflcore's engine round (cflcore.fl.run) with ``engine.trainer: loop``.
  engine-vmap  the same with ``engine.trainer: vmap`` (``auto``'s choice on CUDA).
The engine runs at its defaults for the device: fp32, ``channels_last: auto``, ``memory_budget_mb: auto`` with
``gpu_jobs: 1`` (the GPU's only job; cflcore.fl.chunk_plan),
``deterministic: true`` (on CUDA this mode costs time: about 30 % for tinyvgg with vmap, measured once on an
H100; this script does not switch it off).

All four draw every client's batches and dropout masks from the engine's streams (``engine.trainer.streams``, seeded
by (seed, round, client, epoch): cflcore.fl.streams), on the engine's device, so they compute the same round; the script asserts it after one
round from the same start, as benchmarks/round_speed.py does on the CPU (global parameters within rtol 1e-3 /
atol 1e-5 of the reference; on CUDA cuDNN's convolutions may run in TF32, printed, which this tolerance may not
absorb: unmeasured).

Printed per (model, N): min / median / max seconds a round and the speed-up over the reference; peak memory of one
round (CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``; CPU: the process's resident set
size, sampled every 2 ms from /proc/self/statm during the round, so the peak of the whole process, not of the round's
own allocations); and the round's FLOP floor: the forward + backward FLOPs of one sample (torch.utils.flop_counter)
times the samples a round trains, plus the forward FLOPs of the samples it evaluates (each client's test set and the
orchestrator set once), divided by the FLOP rate of an n x n IEEE fp32 GEMM timed on that device (TF32 pinned off
for the timing, whatever the global flag: cflcore.fl.speed.gemm_flops). ratio = seconds / floor (1 = the round runs at
GEMM speed). ``cfl doctor``'s speed check reads the roofline floor instead (convolutions at a TF32 rate, memory
traffic counted: docs/gpu.md, "Speed against the roofline floor"), with a 2x target.
"""
from __future__ import annotations

import argparse
import copy
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from cflcore.fl import speed  # noqa: E402
from cflcore.fl.device import prepare_device  # noqa: E402
from cflcore.data.synthetic import synthetic_federated  # noqa: E402
from cflcore.fl.streams import ClientStreams, train_seed  # noqa: E402
from cflcore.models import build_model  # noqa: E402
from cflcore.models._layers import dropout_modules  # noqa: E402

LR, BATCH, EPOCHS, N_TRAIN, N_TEST, N_ORCH, SHAPE, CLASSES = 0.01, 32, 3, 267, 32, 256, (1, 28, 28), 10
MODELS = ("tinyvgg", "ocfl-cnn")
VARIANTS = ("reference", "plain", "engine-loop", "engine-vmap")
GPU_JOBS = 1  # engine.gpu_jobs: this script is the GPU's only job, so memory_budget_mb auto plans with the whole share
log = logging.getLogger("bench")


sync = speed.sync


def engine_settings(model: str, trainer: str, device: torch.device, threads: int, ragged: str = "auto") -> dict:
    return {"training": {"model": model, "optimizer": "sgd", "lr": LR, "batch_size": BATCH, "local_epochs": EPOCHS,
                         "rounds": 10 ** 6},
            "engine": {"trainer": trainer, "eval_every": 1, "checkpoint_every": 10 ** 6, "threads": threads,
                       "ragged_batches": ragged, "gpu_jobs": GPU_JOBS},
            "algorithm": {"method": "bnc"}, "device": str(device)}


class HandRound:
    """One FedAvg round written by hand, ``style`` "reference" or "plain" (module doc), on ``device``."""

    def __init__(self, style: str, start: torch.nn.Module, fed, seed: int, device: torch.device,
                 streams: ClientStreams):
        self.style, self.fed, self.seed, self.device, self.rnd = style, fed, seed, device, 0
        self.streams = streams  # the engine's (engine.trainer.streams): its batch orders and masks, on its device
        self.plain = style == "plain"
        self.channels_last = self.plain and device.type == "cpu"
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        self.model = copy.deepcopy(start).to(device).to(memory_format=fmt)
        if self.plain:
            self.local = copy.deepcopy(self.model)
            self.data = [(c.x_train.to(device).contiguous(memory_format=fmt), c.y_train.to(device)) for c in fed.clients]
            self.tests = [(c.x_test.to(device).contiguous(memory_format=fmt), c.y_test.to(device)) for c in fed.clients]
            self.orch = fed.x_orch.to(device).contiguous(memory_format=fmt)

    def train_client(self, i: int, client) -> dict[str, torch.Tensor]:
        local = self.local if self.plain else copy.deepcopy(self.model)
        if self.plain:
            local.load_state_dict(self.model.state_dict())
        opt = torch.optim.SGD(local.parameters(), lr=LR)
        local.train()
        for epoch in range(EPOCHS):
            gen, perm = self.streams.order(train_seed(self.seed, self.rnd, i), epoch, client.n_train)
            for m in dropout_modules(local):  # the engine's masks: drawn from the epoch's generator after its order
                m.mask_source = self.streams.masks(gen)
            if self.plain:
                x, y = self.data[i]
                batches: Any = ((x[idx], y[idx]) for idx in perm.split(BATCH))
            else:  # published style: a DataLoader over the CPU tensors, so its sampler's indices live on the host
                batches = DataLoader(TensorDataset(client.x_train, client.y_train),
                                     batch_sampler=[b.tolist() for b in perm.cpu().split(BATCH)])
            for xb, yb in batches:
                xb, yb = xb.to(self.device), yb.to(self.device)
                opt.zero_grad()
                F.cross_entropy(local(xb), yb).backward()
                opt.step()
        return {k: v.clone() for k, v in local.state_dict().items()}

    def __call__(self) -> None:
        global_sd = {k: v.clone() for k, v in self.model.state_dict().items()}
        deltas = []
        for i, client in enumerate(self.fed.clients):
            sd = self.train_client(i, client)
            deltas.append({k: sd[k] - global_sd[k] for k in sd})
        self.model.load_state_dict({k: global_sd[k] + torch.stack([d[k] for d in deltas]).mean(0) for k in global_sd})
        self.model.eval()
        with torch.no_grad():
            if self.plain:
                sets = [*self.tests, (self.orch, None)]
            else:  # published: every client's model evaluates its test set and the orchestrator set
                sets = [(c.x_test.to(self.device), None) for c in self.fed.clients]
                sets += [(self.fed.x_orch.to(self.device), None)] * len(self.fed.clients)
            for x, _ in sets:
                preds = [self.model(x[lo:lo + 1024]).argmax(1) for lo in range(0, len(x), 1024)]
            torch.cat(preds).cpu()
        sync(self.device)
        self.rnd += 1

    def vector(self, layout) -> torch.Tensor:
        return layout.flatten(self.model).cpu()


def hand_rounds(start: torch.nn.Module, fed, seed: int, device: torch.device, engine: "EngineRound") -> dict:
    """The reference and plain rounds, drawing their batch orders and dropout masks from ``engine``'s streams
    (``engine.trainer.streams``, cflcore.fl.streams): on CUDA the engine's CUDA generators."""
    streams = engine.engine.trainer.streams
    return {style: HandRound(style, start, fed, seed, device, streams) for style in ("reference", "plain")}


class EngineRound:
    def __init__(self, fed, model: str, trainer: str, seed: int, device: torch.device, threads: int,
                 ragged: str = "auto"):
        self.engine, self.state = harness.build_engine(fed, engine_settings(model, trainer, device, threads, ragged),
                                                       seed, log)
        self.device = device

    def calls_per_round(self) -> float | None:
        """The vmap trainer's vmapped calls per round so far (None for the loop trainer)."""
        calls = getattr(self.engine.trainer, "calls", None)
        return None if calls is None or not self.state.next_round else calls / self.state.next_round

    def __call__(self) -> None:
        self.engine.run_round(self.state, self.state.next_round, 10 ** 6)
        sync(self.device)

    def vector(self) -> torch.Tensor:
        return self.state.models[0].cpu()


def sample_flops(model: str) -> tuple[float, float]:
    """(forward + backward, forward) FLOPs of one sample (cflcore.fl.speed, a batch of BATCH on the CPU)."""
    return speed.sample_flops(model, SHAPE, CLASSES, BATCH)


def gemm_flops(device: torch.device, repeats: int = 7, n: int = 4096) -> float:
    """FLOP/s of an n x n IEEE fp32 GEMM on ``device`` (cflcore.fl.speed.gemm_flops)."""
    return speed.gemm_flops(device, repeats, n)


class RssSampler:
    """The process's peak resident set size while active, sampled every 2 ms from /proc/self/statm."""

    def __init__(self) -> None:
        import os

        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = 0
        self._stop = threading.Event()

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.002)

    def __enter__(self) -> "RssSampler":
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


def peak_memory(call: Callable[[], None], device: torch.device) -> float:
    """Peak bytes of one more round (module doc: allocated on CUDA, process RSS on a CPU)."""
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        call()
        return float(torch.cuda.max_memory_allocated(device))
    with RssSampler() as rss:
        call()
    return float(rss.peak)


def check_equivalence(rounds: dict[str, Any], layout) -> str:
    """After one round from the same start, every variant's global parameters against the reference's."""
    ref = rounds["reference"].vector(layout)
    diffs = {"plain": harness.assert_close("plain", rounds["plain"].vector(layout), ref, 1e-3, 1e-5, "global parameters")}
    for name in [k for k in rounds if k.startswith("engine-")]:
        diffs[name] = harness.assert_close(name, rounds[name].vector(), ref, 1e-3, 1e-5, "global parameters")
    return ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())


def client_sizes(kind: str, n: int, n_train: int) -> list[int]:
    """Training samples per client: ``equal`` = n_train each; ``unequal`` = spread evenly over paper-mnist5k's 162-175
    (scaled to n_train / 267 of it), so that the clients' last batches differ in size."""
    if kind == "equal":
        return [n_train] * n
    lo, hi = round(162 * n_train / N_TRAIN), round(175 * n_train / N_TRAIN)
    return [lo + ((hi - lo) * i) // max(1, n - 1) for i in range(n)]


def run_case(model: str, n: int, n_train: int, device: torch.device, repeats: int, seed: int, threads: int,
             peak: float, rec: harness.Recorder, sizes: str = "equal") -> dict[str, float]:
    counts = client_sizes(sizes, n, n_train)
    fed = synthetic_federated(n_clients=n, n_train=counts, n_test=N_TEST, n_orch=N_ORCH, shape=SHAPE,
                              n_classes=CLASSES, seed=seed)
    rounds: dict[str, Any] = {"engine-loop": EngineRound(fed, model, "loop", seed, device, threads)}
    if sizes == "equal":
        rounds["engine-vmap"] = EngineRound(fed, model, "vmap", seed, device, threads)
    else:  # both ways of training unequal batches side by side (engine.ragged_batches)
        rounds["engine-vmap-split"] = EngineRound(fed, model, "vmap", seed, device, threads, "split")
        rounds["engine-vmap-pad"] = EngineRound(fed, model, "vmap", seed, device, threads, "pad")
    engines = list(rounds)
    layout = rounds["engine-loop"].engine.model_layout
    start = build_model(model, SHAPE[0], SHAPE[1:], CLASSES)
    layout.load(start, rounds["engine-loop"].vector())  # the engine's round-0 global model
    rounds = {**hand_rounds(start, fed, seed, device, rounds["engine-loop"]), **rounds}
    variants = ["reference", "plain", *engines]
    for name in variants:  # round 0 of each: the equivalence check, and the warm-up (CUDA context, vmap trace)
        rounds[name]()
    print(f"{model}, N = {n}: equivalence after one round (max |difference| of the global parameters vs the "
          f"reference; rtol 1e-3, atol 1e-5): {check_equivalence(rounds, layout)}")
    res = harness.time_side_by_side({k: rounds[k] for k in variants}, repeats, warmup=False, keep_output=False)
    memory = {k: peak_memory(rounds[k], device) for k in variants}
    train_f, fwd_f = sample_flops(model)
    flops = speed.round_flops(train_f, fwd_f, sum(counts), EPOCHS, n * N_TEST + N_ORCH)
    floor = flops / peak
    what = "peak allocated" if device.type == "cuda" else "peak process RSS"
    calls = {k: rounds[k].calls_per_round() for k in engines}
    notes = {k: f"{what} {memory[k] / 2 ** 30:6.2f} GiB   floor {floor * 1e3:8.1f} ms   ratio to floor "
                f"{r.median / floor:7.1f}x" + (f"   vmapped calls a round {calls[k]:.0f}" if calls.get(k) else "")
             for k, r in res.items()}
    n_train = f"{min(counts)}-{max(counts)}" if sizes != "equal" else n_train
    rec.table(f"{model}, N = {n}, {n_train} samples a client, on {device}: seconds a round (round FLOPs "
              f"{flops / 1e12:.3f} TFLOP; floor = FLOPs / GEMM rate)", res, baseline="reference",
              case=f"{device.type} {model} N={n}", notes=notes)
    return {k: r.median for k, r in res.items()}


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return (f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"TF32 matmul {torch.backends.cuda.matmul.allow_tf32}, TF32 cuDNN {torch.backends.cudnn.allow_tf32}, "
                f"cuDNN deterministic {torch.backends.cudnn.deterministic}")
    return f"CPU {harness.cpu_model()!r}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_common_args(ap, default_repeats=3, quick_repeats=1)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (cflcore's device names)")
    ap.add_argument("--models", nargs="*", choices=MODELS, default=list(MODELS))
    ap.add_argument("--clients", type=int, nargs="*", default=None,
                    help="N values (default 15 30 100; quick: 4 for tinyvgg, 2 for ocfl-cnn)")
    ap.add_argument("--sizes", nargs="*", choices=("equal", "unequal"), default=["equal"],
                    help="client sizes: equal (267 a client) and/or unequal (paper-mnist5k's 162-175, whose last "
                         "batches differ: engine-vmap then runs as engine.ragged_batches split and pad, side by side)")
    args = ap.parse_args(argv)
    rec = harness.setup(args, "device_speed")
    logging.basicConfig(level=logging.WARNING)
    device = prepare_device(args.device, True)  # engine.deterministic's flags, as a train job sets them
    peak = gemm_flops(device)
    print(f"device {device}: {describe(device)}; fp32 GEMM {peak / 1e12:.3f} TFLOP/s (the floor's rate)")
    n_train = 64 if args.quick else N_TRAIN
    for model in args.models:
        sizes = args.clients or ([4 if model == "tinyvgg" else 2] if args.quick else [15, 30, 100])
        for n in sizes:
            for kind in args.sizes:
                run_case(model, n, n_train, device, args.repeats, args.seed, args.threads, peak, rec, kind)


if __name__ == "__main__":
    main()
