"""Seconds per federated round: the engine versus a reference that trains the way the published CFL code does.

The reference (below, ``reference_round``): per client deep-copy the global model, a DataLoader with
shuffle, torch.optim.SGD steps, the delta from ``state_dict``, and every client evaluated on the whole
orchestrator set. The engine: one reused module, pre-stacked tensors and seeded index permutations, a
fused foreach SGD step, and each *distinct* model evaluated once on the orchestrator set.

Workload: tinyvgg on MNIST-shaped data, N = 15 and 30 clients with 300 train / 130 test samples each,
2,000 orchestrator samples, batch 32, 3 local epochs, SGD lr 0.01, evaluation every round (BNC = FedAvg).
Each configuration is timed side by side in one process, in alternating order, median of ``--repeats``.

    OMP_NUM_THREADS=1 python benchmarks/round_speed.py [--quick] [--repeats 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import copy
import logging
import statistics
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from cflcore.fl.run import build_engine
from cflcore.fl.synthetic import synthetic_federated
from cflcore.models import build_model


def settings(precision: str, rounds: int = 1000) -> dict:
    return {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.01, "batch_size": 32, "local_epochs": 3,
                         "rounds": rounds},
            "engine": {"trainer": "loop", "precision": precision, "eval_every": 1, "checkpoint_every": 10 ** 6,
                       "channels_last": True},
            "algorithm": {"method": "bnc"}, "device": "cpu"}


# ---------------------------------------------------------------------------------------------
# Reference: how the published CFL code trains one round
# ---------------------------------------------------------------------------------------------
def reference_round(global_model: torch.nn.Module, fed, gen: torch.Generator) -> float:
    global_sd = {k: v.clone() for k, v in global_model.state_dict().items()}
    deltas = []
    train_seconds = 0.0
    for client in fed.clients:
        t0 = time.perf_counter()
        local = copy.deepcopy(global_model)
        opt = torch.optim.SGD(local.parameters(), lr=0.01)
        loader = DataLoader(TensorDataset(client.x_train, client.y_train), batch_size=32, shuffle=True, generator=gen)
        local.train()
        for _ in range(3):
            for xb, yb in loader:
                opt.zero_grad()
                F.cross_entropy(local(xb), yb).backward()
                opt.step()
        sd = local.state_dict()
        deltas.append({k: sd[k] - global_sd[k] for k in sd})
        train_seconds += time.perf_counter() - t0
    new_sd = {k: global_sd[k] + torch.stack([d[k] for d in deltas]).mean(0) for k in global_sd}
    global_model.load_state_dict(new_sd)
    global_model.eval()
    with torch.no_grad():
        for client in fed.clients:  # every client's (here: the global) model on its test set and the whole orchestrator set
            for x, y in ((client.x_test, client.y_test), (fed.x_orch, fed.y_orch)):
                for lo in range(0, len(y), 128):
                    logits = global_model(x[lo:lo + 128])
                    F.cross_entropy(logits, y[lo:lo + 128])
                    logits.argmax(1)
    return train_seconds


def training_flops(fed) -> float:
    """FLOPs of one round's local training (forward + backward), counted with torch.utils.flop_counter."""
    model = build_model("tinyvgg", 1, (28, 28), 10)
    x, y = fed.clients[0].x_train[:32], fed.clients[0].y_train[:32]
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(x), y).backward()
    per_sample = counter.get_total_flops() / 32
    return per_sample * sum(c.n_train for c in fed.clients) * 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small workload (N = 6, 100 train samples) for a smoke run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clients", type=int, nargs="*", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    log = logging.getLogger("bench")
    sizes = args.clients or ([6] if args.quick else [15, 30])
    n_train, n_test, n_orch = (100, 40, 500) if args.quick else (300, 130, 2000)
    print(f"tinyvgg, MNIST-shaped 1x28x28, {n_train} train / {n_test} test per client, {n_orch} orchestrator samples, "
          f"batch 32, 3 local epochs, threads {args.threads}, median of {args.repeats}")
    for n in sizes:
        fed = synthetic_federated(n_clients=n, n_train=n_train, n_test=n_test, n_orch=n_orch, shape=(1, 28, 28), n_classes=10)
        engines = {p: build_engine(fed, settings(p), 0, log) for p in ("fp32", "bf16")}
        ref_model = build_model("tinyvgg", 1, (28, 28), 10)
        gen = torch.Generator().manual_seed(0)
        flops = training_flops(fed)
        times: dict[str, list[float]] = {"reference": [], "fp32": [], "bf16": []}
        train_times: dict[str, list[float]] = {k: [] for k in times}
        order = ["reference", "fp32", "bf16"]
        for rep in range(args.repeats + 1):  # the first pass is a warm-up
            for name in order[rep % 3:] + order[:rep % 3]:
                t0 = time.perf_counter()
                if name == "reference":
                    train_s = reference_round(ref_model, fed, gen)
                else:
                    engine, state = engines[name]
                    trainer = engine.trainer
                    original = trainer.train
                    spent = [0.0]

                    def timed(*a, _orig=original, _spent=spent):
                        t = time.perf_counter()
                        out = _orig(*a)
                        _spent[0] += time.perf_counter() - t
                        return out

                    trainer.train = timed
                    engine.run_round(state, state.next_round, 10 ** 6)
                    trainer.train = original
                    train_s = spent[0]
                if rep > 0:
                    times[name].append(time.perf_counter() - t0)
                    train_times[name].append(train_s)
        med = {k: statistics.median(v) for k, v in times.items()}
        med_train = {k: statistics.median(v) for k, v in train_times.items()}
        print(f"N={n}: seconds per round (full round / local training) and speed-up over the reference")
        for k in order:
            print(f"  {k:9s} {med[k]:8.3f} s  / {med_train[k]:8.3f} s   x{med['reference'] / med[k]:5.2f} full"
                  f"   x{med_train['reference'] / med_train[k]:5.2f} training   {flops / med_train[k] / 1e9:6.2f} GFLOP/s")
        print(f"  local-training work per round: {flops / 1e9:.2f} GFLOP (torch.utils.flop_counter)")


if __name__ == "__main__":
    main()
