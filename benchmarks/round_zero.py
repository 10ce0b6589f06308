"""Where a train job's first seconds go: the device's start-up, the engine's set-up, round 0 against round 1.

    python benchmarks/round_zero.py --device cpu [--model tinyvgg] [--clients 15] [--trainer auto]
    python benchmarks/round_zero.py --device cuda --model ocfl-cnn

Phases, each timed on its own (synchronised on CUDA), in the order a train job meets them:
  device       cflcore.fl.device.prepare_device, then (CUDA) the context: torch.cuda.init and a first allocation;
  first conv   one forward + backward of the model on one batch (CUDA: cuDNN / cuBLAS handles and kernel loading);
  build        cflcore.fl.run.build_engine (model initialisations, the federation to the device);
  round 0      the first round, under cProfile (its largest cumulative entries are printed);
  round 1      the second, the same way; round 0 - round 1 is what only the first round pays.
Workload: the default study's on MNIST-shaped synthetic data (cflcore.data.synthetic): 15 clients of 267 samples,
batch 32, 1 local epoch as config/config.yaml's MNIST-5k, OCFL with k-means, evaluation every round.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import logging
import pstats
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from cflcore.data.synthetic import synthetic_federated  # noqa: E402
from cflcore.fl.device import device_report, prepare_device  # noqa: E402
from cflcore.models import build_model  # noqa: E402


def timed(device: torch.device, fn) -> tuple[float, object]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, out


def profiled(device: torch.device, fn, top: int) -> tuple[float, str]:
    prof = cProfile.Profile()
    seconds, _ = timed(device, lambda: prof.runcall(fn))
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top)
    lines = [line for line in text.getvalue().splitlines() if line.strip() and ("{" in line or "/" in line)]
    return seconds, "\n".join("      " + line.strip()[:150] for line in lines[:top])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default="tinyvgg")
    ap.add_argument("--clients", type=int, default=15)
    ap.add_argument("--samples", type=int, default=267)
    ap.add_argument("--trainer", default="auto")
    ap.add_argument("--top", type=int, default=12, help="cProfile entries printed per round")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    seconds, device = timed(torch.device("cpu"), lambda: prepare_device(args.device, True))
    if device.type == "cuda":
        ctx, _ = timed(device, lambda: (torch.cuda.init(), torch.empty(1, device=device)))
        seconds += ctx
    print(f"{device_report(device)}; CPU {harness.cpu_model()!r}, {torch.get_num_threads()} thread(s)")
    print(f"device        {seconds:8.3f} s")
    net = build_model(args.model, 1, (28, 28), 10).to(device)
    x, y = torch.randn(32, 1, 28, 28, device=device), torch.randint(0, 10, (32,), device=device)
    conv, _ = timed(device, lambda: F.cross_entropy(net(x), y).backward())
    again, _ = timed(device, lambda: F.cross_entropy(net(x), y).backward())
    print(f"first conv    {conv:8.3f} s   (the same again: {again:.3f} s)")
    fed = synthetic_federated(n_clients=args.clients, n_train=args.samples, shape=(1, 28, 28))
    settings = {"training": {"model": args.model, "optimizer": "sgd", "lr": 0.01, "batch_size": 32, "local_epochs": 1,
                             "rounds": 3},
                "engine": {"trainer": args.trainer, "eval_every": 1, "checkpoint_every": 10 ** 6},
                "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": "oracle"}, "device": str(device)}
    build, (engine, state) = timed(device, lambda: harness.build_engine(fed, settings, 0, logging.getLogger("bench")))
    print(f"build         {build:8.3f} s   (trainer {type(engine.trainer).__name__})")
    for rnd in (0, 1):
        seconds, table = profiled(device, lambda r=rnd: engine.run_round(state, r, 3), args.top)
        print(f"round {rnd}       {seconds:8.3f} s   largest cumulative entries (cProfile):\n{table}")


if __name__ == "__main__":
    main()
