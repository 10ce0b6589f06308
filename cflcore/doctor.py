"""``cfl doctor``: a self-check of a machine for training (docs/gpu.md, "Checking a GPU box"), run on a new box before
anything else. It prints, one check after another, and exits non-zero when any fails:

* ``env``       the device, its model, the NVIDIA driver, CUDA, cuDNN and torch (cflcore.fl.device.device_report);
* ``tests``     the GPU tests (tests/fl/test_gpu.py, tests/fl/test_host_traffic.py; under ``CFL_REQUIRE_GPU=1`` on a
                GPU, so a skip fails), each by name: among them the same run in two processes and a run killed and
                resumed, compared byte for byte, and the control without determinism (a ``control:`` skip is
                printed, not a failure);
* ``benchmark`` benchmarks/device_speed.py at N = 15 (ocfl-cnn) against its FLOP floor: its table, as printed;
* ``copies``    host-to-device transfers in one training round of ocfl-cnn at 15 clients of unequal sizes (the vmap
                trainer), counted by cflcore.fl.host_traffic (and CUDA's ``Memcpy HtoD`` events on a GPU): a
                failure above :data:`MAX_COPIES_PER_ROUND`; round 0's and round 1's seconds beside it.

``--gpu`` requires a CUDA GPU: without one it says so and exits 1. ``--device cpu`` runs the same checks on the CPU
with small workloads (tinyvgg; the GPU tests' code paths through ``CFL_GPU_TEST_DEVICE=cpu``; the benchmark's
``--quick``), so the checker itself is tested on machines without a GPU (tests/workflow/test_doctor.py). The tests
and the benchmark need a checkout of the repository (tests/, benchmarks/ beside cflcore/); they run as child
processes, so their imports stay out of this one.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

CHECKS = ("env", "tests", "benchmark", "copies")
MAX_COPIES_PER_ROUND = 10
REPO = Path(__file__).resolve().parent.parent
GPU_TESTS = ("tests/fl/test_gpu.py", "tests/fl/test_host_traffic.py")


def add_parser(sub) -> argparse.ArgumentParser:
    """``cfl doctor``'s arguments, on the ``cfl`` command's subparsers."""
    p = sub.add_parser("doctor", help="check this machine: GPU, driver, CUDA, torch; GPU tests; bytes; speed; copies")
    p.add_argument("--gpu", action="store_true", help="require a CUDA GPU (exit 1 without one) and check it")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda with --gpu, else auto)")
    p.add_argument("--checks", nargs="*", choices=CHECKS, default=list(CHECKS), help="which checks (default: all)")
    return p


class Report:
    """The printed lines and whether any check failed."""

    def __init__(self, out=None) -> None:
        self.out = out or sys.stdout
        self.failed: list[str] = []

    def line(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def result(self, check: str, ok: bool, text: str) -> None:
        self.line(f"[{'ok' if ok else 'FAIL'}] {check}: {text}")
        if not ok:
            self.failed.append(check)


def check_env(device, report: Report) -> None:
    import torch

    from .fl.device import device_report

    info = device_report(device)
    report.result("env", True, ", ".join(f"{k} {v}" for k, v in info.items()))
    if device.type == "cuda":
        for i in range(torch.cuda.device_count()):
            report.line(f"       visible GPU {i}: {torch.cuda.get_device_name(i)}")


def _junit_cases(path: Path) -> list[tuple[str, str, str]]:
    """(test name, outcome, message) of a pytest JUnit report."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                outcome = "skipped" if kind == "skipped" else "failed"
                message = (node.get("message") or node.text or "").strip().splitlines()[0][:300] if (
                    node.get("message") or node.text) else ""
                break
        cases.append((case.get("name", "?"), outcome, message))
    return cases


def check_tests(device, report: Report, timeout: int = 3000) -> None:
    if not all((REPO / t).is_file() for t in GPU_TESTS):
        report.result("tests", False, f"{', '.join(GPU_TESTS)} not found beside {REPO / 'cflcore'} (needs a checkout)")
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if device.type == "cuda":
        env["CFL_REQUIRE_GPU"] = "1"
        env["CFL_GPU_TEST_DEVICE"] = str(device)
    else:
        env["CFL_GPU_TEST_DEVICE"] = "cpu"
    with tempfile.TemporaryDirectory(prefix="cfl-doctor-") as tmp:
        junit = Path(tmp) / "junit.xml"
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "-rs",
                               f"--junitxml={junit}", *GPU_TESTS], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=timeout)
        cases = _junit_cases(junit) if junit.exists() else []
    for name, outcome, message in cases:
        control = outcome == "skipped" and message.removeprefix("Skipped: ").startswith("control:")
        tag = "ok" if outcome == "passed" else "note" if control else "skip" if outcome == "skipped" else "FAIL"
        report.line(f"       [{tag}] {name}{': ' + message if message else ''}")
    n_bad = sum(1 for _, o, _ in cases if o == "failed")
    ok = done.returncode == 0 and bool(cases) and n_bad == 0
    tail = "" if ok else f"; pytest exit {done.returncode}: {(done.stdout + done.stderr).strip().splitlines()[-1:]}"
    report.result("tests", ok, f"{len(cases)} tests on {device} ({n_bad} failed) in "
                               f"{time.perf_counter() - t0:.0f} s{tail}")


def check_benchmark(device, report: Report, timeout: int = 3000) -> None:
    script = REPO / "benchmarks" / "device_speed.py"
    if not script.is_file():
        report.result("benchmark", False, f"{script} not found (needs a checkout)")
        return
    args = ["--models", "ocfl-cnn", "--clients", "15"] if device.type == "cuda" else ["--quick", "--models", "tinyvgg"]
    done = subprocess.run([sys.executable, str(script), "--device", str(device), *args], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=timeout)
    for text in done.stdout.strip().splitlines():
        report.line(f"       {text}")
    report.result("benchmark", done.returncode == 0,
                  "device_speed.py " + " ".join(args) + ("" if done.returncode == 0 else
                                                         f" exited {done.returncode}: {done.stderr.strip()[-500:]}"))


def copies_workload(device) -> tuple[dict, dict]:
    """(settings, synthetic federation kwargs) of the copies check: ocfl-cnn at 15 clients of unequal sizes on a GPU
    (paper-mnist5k's 162-176 samples a client), tinyvgg at 6 on a CPU."""
    gpu = device.type == "cuda"
    settings = {"training": {"model": "ocfl-cnn" if gpu else "tinyvgg", "optimizer": "sgd", "lr": 0.01,
                             "batch_size": 32 if gpu else 8, "local_epochs": 2 if gpu else 1, "rounds": 3},
                "engine": {"trainer": "vmap"}, "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": 3},
                "device": "cuda" if gpu else "cpu"}
    fed = ({"n_clients": 15, "n_train": [162 + i for i in range(15)], "shape": (1, 28, 28)} if gpu else
           {"n_clients": 6, "n_train": [20, 17, 24, 13, 20, 22], "shape": (1, 8, 8)})
    return settings, fed


def check_copies(device, report: Report) -> None:
    import logging

    import torch

    from .data.synthetic import synthetic_federated
    from .fl.host_traffic import HostToDeviceCounter, profiled_host_copies
    from .fl.run import build_engine
    from .strategies import build_strategy

    settings, fed_kw = copies_workload(device)
    fed = synthetic_federated(**fed_kw)
    log = logging.getLogger("cflcore.doctor")
    t0 = time.perf_counter()
    engine, state = build_engine(fed, settings, 0, log, strategy=build_strategy(settings["algorithm"]),
                                 device=str(device))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine.run_round(state, 0, 3)
    sync()
    round0 = time.perf_counter() - t0
    t0 = time.perf_counter()
    with HostToDeviceCounter() as counter:
        engine.run_round(state, 1, 3)
        sync()
    round1 = time.perf_counter() - t0
    text = (f"{counter.count} host-to-device transfers in round 1 ({settings['training']['model']}, "
            f"{fed_kw['n_clients']} clients, vmap; ops {sorted(set(counter.ops))}); engine set-up {setup:.2f} s, "
            f"round 0 {round0:.2f} s, round 1 {round1:.2f} s")
    ok = counter.count <= MAX_COPIES_PER_ROUND
    if device.type == "cuda":
        profiled = profiled_host_copies(lambda: engine.run_round(state, 2, 3))
        text += f"; CUDA Memcpy HtoD events in round 2: {profiled}"
        ok = ok and profiled <= MAX_COPIES_PER_ROUND
    report.result("copies", ok, text + f" (limit {MAX_COPIES_PER_ROUND})")


CHECK_FUNCTIONS: dict[str, Callable] = {"env": check_env, "tests": check_tests, "benchmark": check_benchmark,
                                        "copies": check_copies}


def run_doctor(args: argparse.Namespace, out=None) -> int:
    """The checks ``args.checks`` on ``args.device``; 0 when all pass, 1 otherwise (and for --gpu without a GPU)."""
    import torch

    from .fl.device import device_report, prepare_device

    report = Report(out)
    if args.gpu and not torch.cuda.is_available():
        info = device_report(torch.device("cpu"))
        report.result("gpu", False, f"no CUDA GPU: torch.cuda.is_available() is False (torch {info['torch']}, "
                                    f"built for CUDA {info['cuda']}, NVIDIA driver {info['driver'] or 'not found'}); "
                                    f"`cfl doctor --device cpu` checks this machine's CPU")
        return 1
    name = args.device or ("cuda" if args.gpu else "auto")
    if args.gpu and not name.startswith("cuda"):
        report.result("gpu", False, f"--gpu with --device {name}: use cuda or cuda:N")
        return 1
    device = prepare_device(name, True)
    report.line(f"cfl doctor on {device}: checks {', '.join(args.checks)}")
    for check in args.checks:
        try:
            CHECK_FUNCTIONS[check](device, report)
        except Exception as e:  # noqa: BLE001 - a check that crashes is a failed check; the others still run
            report.result(check, False, f"{type(e).__name__}: {e}")
    report.line(json.dumps({"failed": report.failed}))
    return 1 if report.failed else 0
