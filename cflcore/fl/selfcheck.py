"""The workloads of ``cfl doctor`` (cflcore/doctor.py), in the engine's package so that the doctor runs from an installed wheel
without the repository's tests/ or benchmarks/ (docs/gpu.md, "Checking a GPU box"). Each returns what the doctor
prints and judges; none of them reads a config.

* :func:`determinism`: one small training run in child processes (fresh interpreters, as train jobs are), twice with
  ``engine.deterministic: true`` and twice with ``false`` (the control), each run's outputs digested;
* :func:`round_traffic`: uploads and syncs in one round (cflcore.fl.host_traffic) per method, at two client counts;
* :func:`round_speed`: seconds an engine round (vmap trainer) against its roofline floor (cflcore.fl.speed);
* :func:`chunk_plans`: the chunk plan (cflcore.fl.chunk_plan) of the shipped GPU configs' models at N = 15, 30, 100.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import filenames as fn

log = logging.getLogger("cflcore.doctor.rounds")
log.setLevel(logging.WARNING)  # the engine's round lines stay off the doctor's one screen

TRAFFIC_METHODS = {"bnc": {"method": "bnc"}, "ocfl": {"method": "ocfl", "clusterer": "kmeans", "k": 3},
                   "scl": {"method": "scl"}, "ifca": {"method": "ifca", "k": 3}, "louvain": {"method": "louvain"}}
"""The methods whose rounds the traffic check counts: each round's syncs must not grow with N."""
GPU_PLAN_MODELS = (("ocfl-cnn", (1, 28, 28), 10, 32, 3), ("resnet34", (3, 32, 32), 10, 64, 3))
"""(model, image shape, classes, batch, local epochs) of the shipped GPU configs (config/paper-mnist5k.yaml,
config/paper.yaml): the models ``cfl doctor`` prints a chunk plan for."""
PLAN_SAMPLES = 267
"""Training samples a client in the printed plans (000's draw per client at N = 15 on MNIST)."""


def _fed_kwargs(gpu: bool, n: int) -> dict[str, Any]:
    """Unequal client sizes (paper-mnist5k's 162-176 on a GPU; small ones on a CPU), MNIST-shaped on a GPU."""
    if gpu:
        return {"n_clients": n, "n_train": [162 + i % 15 for i in range(n)], "shape": (1, 28, 28)}
    return {"n_clients": n, "n_train": [13 + (3 * i) % 11 for i in range(n)], "shape": (1, 8, 8)}


# ----- determinism -----------------------------------------------------------------------------------------------
_CHILD = """
import json, logging, sys
import torch
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.run import train_run
from cflcore.strategies import build_strategy
settings = json.loads(sys.argv[3])
train_run(synthetic_federated(**json.loads(sys.argv[2])), settings, 3, sys.argv[1], logging.getLogger("doctor"),
          strategy=build_strategy(settings["algorithm"]))
print(json.dumps({"deterministic_algorithms": torch.are_deterministic_algorithms_enabled()}))
"""


def determinism_settings(device: torch.device, deterministic: bool) -> tuple[dict, dict]:
    """(settings, federation kwargs): 000's CNN with dropout, 15 clients of unequal sizes, the vmap trainer, 3 rounds
    on a GPU (where nondeterminism shows); tinyvgg at 4 clients, 2 rounds on a CPU."""
    gpu = device.type == "cuda"
    settings = {"training": {"model": "ocfl-cnn" if gpu else "tinyvgg", "optimizer": "sgd", "lr": 0.01,
                             "batch_size": 16, "local_epochs": 1, "rounds": 3 if gpu else 2},
                "engine": {"trainer": "vmap", "checkpoint_every": 100, "deterministic": deterministic},
                "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": 2}, "device": str(device)}
    fed = ({"n_clients": 15, "n_train": [40 + 3 * i for i in range(15)], "shape": [1, 28, 28]} if gpu else
           {"n_clients": 4, "n_train": [12, 9, 16, 11], "shape": [1, 8, 8]})
    return settings, fed


def run_digest(run_dir: Path) -> str:
    """A digest of a run's outputs: history, gram and divergence bit for bit, server but its wall-clock ``seconds``,
    and every tensor of models.pt."""
    import pandas as pd

    h = hashlib.sha256()
    for name in ("history", "gram", "divergence", "server"):
        path = run_dir / f"{name}.parquet"
        if path.exists():
            frame = pd.read_parquet(path)
            frame = frame.drop(columns=["seconds"]) if name == "server" else frame
            h.update(name.encode() + frame.to_json(orient="split", double_precision=15).encode())
    models = torch.load(run_dir / fn.MODELS, weights_only=True)

    def walk(obj: Any) -> None:
        if isinstance(obj, torch.Tensor):
            h.update(obj.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                h.update(str(k).encode())
                walk(obj[k])
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)
        else:
            h.update(repr(obj).encode())

    walk(models)
    return h.hexdigest()


def _child_run(out: Path, device: torch.device, deterministic: bool, timeout: int) -> tuple[str, bool]:
    settings, fed = determinism_settings(device, deterministic)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)  # the engine sets it itself
    done = subprocess.run([sys.executable, "-c", _CHILD, str(out), json.dumps(fed), json.dumps(settings)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"child run exited {done.returncode}: {done.stderr.strip()[-400:]}")
    flags = json.loads(done.stdout.strip().splitlines()[-1])
    return run_digest(out), bool(flags["deterministic_algorithms"])


@dataclass
class Determinism:
    same: bool  # two processes, engine.deterministic true: the same digest
    flags: bool  # the deterministic flags were on in those children (True on CUDA, False on a CPU: nothing to set)
    control_differs: bool  # the control pair (deterministic false) gave different digests
    seconds: float


def determinism(device: torch.device, timeout: int = 240) -> Determinism:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cfl-doctor-") as tmp:
        runs = {(det, i): _child_run(Path(tmp) / f"{det}-{i}", device, det, timeout)
                for det in (True, False) for i in (0, 1)}
    return Determinism(runs[True, 0][0] == runs[True, 1][0], runs[True, 0][1] and runs[True, 1][1],
                       runs[False, 0][0] != runs[False, 1][0], time.perf_counter() - t0)


# ----- uploads and syncs ----------------------------------------------------------------------------------------
def traffic_settings(device: torch.device, method: dict) -> dict:
    gpu = device.type == "cuda"
    return {"training": {"model": "ocfl-cnn" if gpu else "tinyvgg", "optimizer": "sgd", "lr": 0.01,
                         "batch_size": 32 if gpu else 8, "local_epochs": 1, "rounds": 3},
            "engine": {"trainer": "vmap", "checkpoint_every": 100}, "algorithm": dict(method), "device": str(device)}


@dataclass
class Traffic:
    uploads: int
    syncs: int
    cuda_syncs: int | None
    upload_ops: list[str]
    sync_ops: list[str]


def round_traffic(device: torch.device, method: dict, n: int) -> Traffic:
    """Uploads and syncs in round 1 of ``method`` at ``n`` clients (round 0 warms up: probe, caches)."""
    from ..data.synthetic import synthetic_federated
    from .host_traffic import HostTraffic
    from .run import build_engine
    from ..strategies import build_strategy

    settings = traffic_settings(device, method)
    fed = synthetic_federated(**_fed_kwargs(device.type == "cuda", n))
    engine, state = build_engine(fed, settings, 0, log, strategy=build_strategy(settings["algorithm"]),
                                 device=str(device))
    engine.run_round(state, 0, 3)
    with HostTraffic() as t:
        engine.run_round(state, 1, 3)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return Traffic(t.uploads, t.syncs, t.cuda_syncs, sorted(set(t.upload_ops)), sorted(set(t.sync_ops)))


# ----- speed against the roofline floor -------------------------------------------------------------------------
SPEED_BATCH, SPEED_EPOCHS, SPEED_TRAIN, SPEED_TEST, SPEED_ORCH = 32, 3, 267, 32, 256
"""benchmarks/device_speed.py's workload: 000 Table 3's MNIST training, 267 samples a client, batch 32, 3 epochs."""
SPEED_TIMED_ROUNDS = 3
"""Rounds timed after the warm-up round; the check reads their median. One timed round was not enough: on an H100 the
same ocfl-cnn round at N = 15 took 0.41-0.43 s as the process's first timed round and 0.26-0.38 s in rounds 1-4 of
another process (docs/gpu.md)."""


@dataclass
class Speed:
    model: str
    n_clients: int
    seconds: float  # the median of the timed rounds
    floor: float  # seconds (roofline: cflcore.fl.speed.round_floor)
    plan: dict | None
    rounds: list[float] = field(default_factory=list)  # each timed round's seconds
    parts: Any = None  # the floor's parts (cflcore.fl.speed.Floor)

    @property
    def ratio(self) -> float:
        return self.seconds / self.floor


def round_speed(device: torch.device, model: str, n: int, rates: Any, n_train: int = SPEED_TRAIN,
                shape: tuple[int, int, int] = (1, 28, 28), batch: int = SPEED_BATCH) -> Speed:
    """Seconds of a BNC round (vmap trainer, evaluation every round, ``gpu_jobs: 1``: the GPU's only job) of
    ``model`` at ``n`` clients of ``n_train`` samples of ``shape`` in batches of ``batch``, the median of
    :data:`SPEED_TIMED_ROUNDS` rounds after a warm-up round, against its roofline floor at the device's ``rates``
    (cflcore.fl.speed.DeviceRates, round_floor)."""
    from ..data.synthetic import synthetic_federated
    from .run import build_engine
    from .speed import layer_costs, optimizer_bytes, round_floor, sync
    from ..strategies import build_strategy

    classes = 10
    settings = {"training": {"model": model, "optimizer": "sgd", "lr": 0.01, "batch_size": batch,
                             "local_epochs": SPEED_EPOCHS, "rounds": 10},
                "engine": {"trainer": "vmap", "eval_every": 1, "checkpoint_every": 100, "gpu_jobs": 1},
                "algorithm": {"method": "bnc"}, "device": str(device)}
    fed = synthetic_federated(n_clients=n, n_train=n_train, n_test=SPEED_TEST, n_orch=SPEED_ORCH, shape=shape,
                              n_classes=classes, seed=0)
    engine, state = build_engine(fed, settings, 0, log, strategy=build_strategy(settings["algorithm"]),
                                 device=str(device))
    engine.run_round(state, 0, 10)
    sync(device)
    seconds = []
    for r in range(1, 1 + SPEED_TIMED_ROUNDS):
        t0 = time.perf_counter()
        engine.run_round(state, r, 10)
        sync(device)
        seconds.append(time.perf_counter() - t0)
    floor = round_floor(layer_costs(model, shape, classes, 2), rates, n_clients=n, n_train=n_train,
                        batch_size=batch, epochs=SPEED_EPOCHS, evaluated_samples=n * SPEED_TEST + SPEED_ORCH,
                        optimizer_step_bytes=optimizer_bytes("sgd"))
    plan = getattr(engine.trainer, "last_plan", None)
    return Speed(model, n, statistics.median(seconds), floor.seconds, plan.as_dict() if plan is not None else None,
                 rounds=seconds, parts=floor)


# ----- chunk plans ------------------------------------------------------------------------------------------------
def chunk_plans(gpu_jobs: int = 4, clients: tuple[int, ...] | None = None) -> list[tuple[str, Any]]:
    """(model, ChunkPlan) of each of :data:`GPU_PLAN_MODELS` at N = 15, 30, 100 under ``memory_budget_mb: auto`` on
    CUDA at ``gpu_jobs`` jobs a GPU (pure arithmetic: runs on any machine)."""
    from .chunk_plan import PLAN_CLIENTS, model_cost, plan_chunks

    out = []
    for model, shape, classes, batch, epochs in GPU_PLAN_MODELS:
        cost = model_cost(model, shape, classes, batch)
        steps = epochs * -(-PLAN_SAMPLES // batch)
        out += [(model, plan_chunks(cost, n, steps, 0, gpu_jobs)) for n in clients or PLAN_CLIENTS]
    return out
