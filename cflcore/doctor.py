"""``cfl doctor``: a self-check of a machine for training (docs/gpu.md, "Checking a GPU box"), run on a new box before
anything else. It runs from an installed wheel (its workloads are cflcore/fl/selfcheck.py; it needs no checkout),
prints one screen, one check after another, and exits 1 when any fails, naming which:

* ``env``         the device, its model, the NVIDIA driver, CUDA, cuDNN and torch (cflcore.fl.device.device_report);
* ``determinism`` one small run in two processes with ``engine.deterministic: true``: the same bytes, and the flags
                  set in the children on CUDA; the control pair with ``false`` is printed (it should differ on a GPU;
                  where it does not, a note, not a failure: a CPU's kernels are deterministic anyway);
* ``traffic``     uploads and syncs in one round of BNC, OCFL, SCL, IFCA and Louvain at two client counts
                  (cflcore.fl.host_traffic; CUDA's sync debug mode beside it on a GPU): fails where a round uploads
                  more than :data:`MAX_UPLOADS_PER_ROUND` or its syncs grow with N;
* ``speed``       ocfl-cnn rounds (vmap, BNC) at N = 15, 30 and 100 against their roofline floor (cflcore.fl.speed:
                  convolutions at a measured TF32 rate, Linear layers at the IEEE GEMM rate or their weights' bytes at
                  the copy bandwidth, the optimiser's bytes, the evaluation; each part printed): fails on CUDA above
                  :data:`SPEED_TARGET` x the floor; on a CPU a small tinyvgg round, printed only;
* ``plan``        the chunk plan (cflcore.fl.chunk_plan) of the shipped GPU configs' models at N = 15, 30, 100 on the
                  40 GiB reference card at ``engine.gpu_jobs`` 4: fails where a plan collapses to one client a chunk.

``--gpu`` requires a CUDA GPU: without one it says so and exits 1. ``--device cpu`` runs the same checks on the CPU
with small workloads, so the checker itself is tested on machines without a GPU (tests/workflow/test_doctor.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

CHECKS = ("env", "determinism", "traffic", "speed", "plan")
MAX_UPLOADS_PER_ROUND = 10
SPEED_TARGET = 2.0
"""On CUDA, an ocfl-cnn round's seconds at most this many times its roofline floor (cflcore.fl.speed.round_floor, which
counts the memory traffic of FC1's per-client weights and of the optimiser step the FLOP floor left out)."""


def add_parser(sub) -> argparse.ArgumentParser:
    """``cfl doctor``'s arguments, on the ``cfl`` command's subparsers."""
    p = sub.add_parser("doctor", help="check this machine: GPU, driver, CUDA, torch; bytes; uploads and syncs; speed; "
                                      "the chunk plan")
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


def check_determinism(device, report: Report) -> None:
    from .fl.selfcheck import determinism

    d = determinism(device)
    gpu = device.type == "cuda"
    control = ("differs, as it should" if d.control_differs else
               "note: the same bytes too" + ("" if gpu else " (a CPU's kernels are deterministic anyway)"))
    ok = d.same and (d.flags or not gpu)
    report.result("determinism", ok, f"two processes with engine.deterministic true: "
                                     f"{'the same bytes' if d.same else 'DIFFERENT bytes'}"
                                     f"{'' if d.flags or not gpu else ' (the deterministic flags were OFF)'}; "
                                     f"control with false: {control}; {d.seconds:.0f} s")


def check_traffic(device, report: Report) -> None:
    from .fl.selfcheck import TRAFFIC_METHODS, round_traffic

    sizes = (15, 30) if device.type == "cuda" else (4, 8)
    bad = []
    for name, method in TRAFFIC_METHODS.items():
        small, large = (round_traffic(device, method, n) for n in sizes)
        cuda = ("" if small.cuda_syncs is None else f", CUDA's sync warnings {small.cuda_syncs} / {large.cuda_syncs}")
        grows = large.syncs > small.syncs or (small.cuda_syncs is not None and large.cuda_syncs > small.cuda_syncs)
        over = max(small.uploads, large.uploads) > MAX_UPLOADS_PER_ROUND
        if grows or over:
            bad.append(name)
        report.line(f"       [{'FAIL' if grows or over else 'ok'}] {name}: uploads {small.uploads} / {large.uploads}, "
                    f"syncs {small.syncs} / {large.syncs}{cuda} a round at N = {sizes[0]} / {sizes[1]}; "
                    f"ops {sorted(set(small.upload_ops + large.upload_ops + small.sync_ops + large.sync_ops))}")
    cpu = "" if device.type == "cuda" else " (a CPU uploads and syncs nothing: docs/gpu.md says what it can count)"
    report.result("traffic", not bad, (f"syncs grow with N or uploads above {MAX_UPLOADS_PER_ROUND} in {bad}" if bad
                                       else f"uploads <= {MAX_UPLOADS_PER_ROUND} and syncs constant in N a round") + cpu)


def check_speed(device, report: Report) -> None:
    from .fl.selfcheck import round_speed
    from .fl.speed import device_rates

    rates = device_rates(device)
    gpu = device.type == "cuda"
    cases = [("ocfl-cnn", n, 267) for n in (15, 30, 100)] if gpu else [("tinyvgg", 2, 32)]
    slow = []
    for model, n, n_train in cases:
        s = round_speed(device, model, n, rates, n_train)
        plan = s.plan or {}
        report.line(f"       {model}, N = {n}: {s.seconds:.2f} s a round (median of "
                    f"{', '.join(f'{t:.2f}' for t in s.rounds)}), ratio {s.ratio:.1f}x the {s.parts.line()}; "
                    f"{plan.get('chunks')} chunk(s) of <= {min(plan.get('clients_per_chunk') or n, n)}, "
                    f"{plan.get('calls_per_round')} vmapped calls planned")
        if gpu and s.ratio > SPEED_TARGET:
            slow.append(f"N = {n} at {s.ratio:.1f}x")
    report.result("speed", not slow, f"conv (TF32 allowed) {rates.conv_flops / 1e12:.2f} TFLOP/s, fp32 GEMM (TF32 off) "
                                     f"{rates.fc_flops / 1e12:.2f} TFLOP/s, copy {rates.copy_bytes / 1e9:.0f} GB/s; " + (
        f"above {SPEED_TARGET:g}x the roofline floor: {', '.join(slow)}" if slow else
        f"within {SPEED_TARGET:g}x the roofline floor" if gpu else "printed only on a CPU"))


def check_plan(device, report: Report) -> None:
    from .fl.selfcheck import chunk_plans

    collapsed = []
    for model, plan in chunk_plans():
        report.line(f"       {model}: {plan.line(short=True)}")
        if plan.clients_per_chunk == 1 and plan.n_clients > 1:
            collapsed.append(f"{model} N = {plan.n_clients}")
    report.result("plan", not collapsed, "the shipped GPU configs' models on the 40 GiB reference card, gpu_jobs 4: " + (
        f"one client a chunk in {collapsed}" if collapsed else "no plan of one client a chunk"))


CHECK_FUNCTIONS: dict[str, Callable] = {"env": check_env, "determinism": check_determinism, "traffic": check_traffic,
                                        "speed": check_speed, "plan": check_plan}


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
    t0 = time.perf_counter()
    report.line(f"cfl doctor on {device}: checks {', '.join(args.checks)}")
    for check in args.checks:
        try:
            CHECK_FUNCTIONS[check](device, report)
        except Exception as e:  # noqa: BLE001 - a check that crashes is a failed check; the others still run
            report.result(check, False, f"{type(e).__name__}: {e}")
    report.line(json.dumps({"failed": report.failed, "seconds": round(time.perf_counter() - t0)}))
    return 1 if report.failed else 0
