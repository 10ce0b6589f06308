"""The benchmark scripts run in --quick mode: they exit 0 (so their equivalence assertions hold) and append
their raw timings to the CSV with the harness's columns. Plus unit tests of the harness itself."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import harness  # noqa: E402


def run_script(name: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / f"{name}.csv"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--quick", "--csv", str(out), *extra],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, f"{name} --quick failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc, out


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == harness.CSV_COLUMNS
        return list(reader)


def check_rows(rows: list[dict[str, str]], benchmark: str) -> None:
    assert rows, "no timings written"
    for r in rows:
        assert r["benchmark"] == benchmark
        assert float(r["seconds"]) >= 0
        assert r["threads"] == "1" and r["cpu"] and r["torch"]


def test_server_speed_quick(tmp_path):
    proc, out = run_script("server_speed", tmp_path)
    rows = read_rows(out)
    check_rows(rows, "server_speed")
    variants = {r["variant"] for r in rows}
    assert {"engine-f32", "engine-f64", "torch-normalise", "scipy-pdist", "published-ocfl", "sattler",
            "engine-f64 without blocking"} <= variants
    assert "all within tolerance" in proc.stdout


def test_conv_forms_quick(tmp_path):
    """conv_forms --quick (CPU, float64): every engine.conv_form trains the same vectors as grouped (1e-10) and one
    is picked."""
    proc, out = run_script("conv_forms", tmp_path)
    rows = read_rows(out)
    check_rows(rows, "conv_forms")
    assert {r["variant"] for r in rows} == {"grouped", "loop", "unfold"}
    assert "all forms within tolerance" in proc.stdout and "pick: engine.conv_form " in proc.stdout


def test_explain_speed_quick(tmp_path):
    proc, out = run_script("explain_speed", tmp_path)
    rows = read_rows(out)
    check_rows(rows, "explain_speed")
    variants = {r["variant"].split(" [")[0] for r in rows}
    assert {"engine", "rise-batch", "per-image-loop", "engine without channels_last", "engine forward_batch 2",
            "captum per image"} <= variants


def test_scaling_quick_vmap(tmp_path):
    """--trainer vmap exercises the vmap trainer's code path on CPU (checked against the loop trainer);
    --round-max-n 4 makes N=8 take the divergence-term-alone path."""
    figure = tmp_path / "scaling.png"
    proc, out = run_script("scaling", tmp_path, "--trainer", "vmap", "--round-max-n", "4", "--figure", str(figure))
    rows = read_rows(out)
    check_rows(rows, "scaling")
    assert any(r["variant"] == "vmap: local training" for r in rows)
    assert any(r["variant"] == "server step" and r["extrapolated"] == "0" for r in rows)
    assert any(r["variant"] == "divergence term (alone)" for r in rows)
    assert any(r["variant"] == "server step" and r["extrapolated"] == "1" for r in rows)
    assert "vmap trainer == loop trainer" in proc.stdout
    assert figure.stat().st_size > 0
    with (tmp_path / "scaling_data.csv").open(newline="") as fh:
        data = list(csv.DictReader(fh))
    assert [int(r["n_clients"]) for r in data] == [4, 8]
    assert all(float(r["peak_rss_mb"]) > 0 and float(r["server_s"]) > 0 for r in data)
    assert [r["server_extrapolated"] for r in data] == ["0", "1"]


# ---------------------------------------------------------------------------------------------
# harness
# ---------------------------------------------------------------------------------------------
def test_assert_close_passes_and_raises():
    assert harness.assert_close("x", np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]), atol=1e-8) < 1e-8
    with pytest.raises(harness.EquivalenceError, match=r"fast: Γ differs .* atol=1e-08.*index \(1,\)"):
        harness.assert_close("fast", [1.0, 2.1], [1.0, 2.0], atol=1e-8, what="Γ")
    with pytest.raises(harness.EquivalenceError, match="shape"):
        harness.assert_close("fast", [1.0], [1.0, 2.0])
    with pytest.raises(harness.EquivalenceError):
        harness.assert_close("nan", [float("nan")], [1.0], atol=1.0)


def test_side_by_side_rotates_order_and_records(tmp_path):
    calls: list[str] = []
    variants = {k: (lambda k=k: calls.append(k) or k) for k in "abc"}
    res = harness.time_side_by_side(variants, repeats=3)
    assert calls[:3] == ["a", "b", "c"]  # warm-up
    assert calls[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert all(len(r.seconds) == 3 and r.output == k for k, r in res.items())
    rec = harness.Recorder("unit", tmp_path / "t.csv")
    rec.record("case", res)
    rec.record("case", res)
    rows = read_rows(tmp_path / "t.csv")
    assert len(rows) == 18 and {r["variant"] for r in rows} == {"a", "b", "c"}


def test_threads_are_applied():
    import torch

    before = torch.get_num_threads()
    try:
        harness.set_threads(1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_log_log_crossing():
    xs = [10, 20, 40]
    assert harness.log_log_crossing(xs, [1, 2, 4], [0.1, 0.8, 6.4]) == pytest.approx(20 * 2 ** (np.log(2.5) / np.log(4)), rel=1e-6)
    assert harness.log_log_crossing(xs, [1, 2, 4], [0.1, 0.2, 0.4]) is None


def test_round_speed_quick(tmp_path):
    """round_speed --quick (eager variants): equivalence and bf16 accuracy checks pass, the kernel floor and
    the per-layer algorithm table (--profile) are printed, and the evaluation-batch ablation is recorded."""
    proc, out = run_script("round_speed", tmp_path, "--no-compile", "--profile")
    rows = read_rows(out)
    check_rows(rows, "round_speed")
    variants = {r["variant"] for r in rows}
    assert {"reference", "plain", "engine", "engine-bf16", "- eval batch 64 (1024)"} <= variants
    assert "ceiling with these kernels: reference training time / kernel time =" in proc.stdout
    assert "per round, all conv layers: oneDNN channels_last" in proc.stdout


def test_round_speed_recording_quick(tmp_path):
    """round_speed --recording-only: the same rounds with and without the live record, side by side, and
    the recording's own share of a round are printed and recorded."""
    proc, out = run_script("round_speed", tmp_path, "--recording-only")
    rows = read_rows(out)
    check_rows(rows, "round_speed")
    assert {r["variant"] for r in rows} == {"engine", "engine + recording"}
    assert "recording alone: median" in proc.stdout and "% of the engine's median round" in proc.stdout


# ---------------------------------------------------------------------------------------------
# bf16 without surprises: its accuracy gate fails a precision that trains worse than fp32
# ---------------------------------------------------------------------------------------------
def _loss_ascent_when(which: str):
    """A deliberately broken autocast_context: with ``precision == which`` training climbs the loss."""
    import contextlib
    from types import SimpleNamespace

    from cflcore.fl import trainers

    real = trainers.autocast_context

    @contextlib.contextmanager
    def ctx(spec, device):
        with real(spec, device):
            if spec.precision != which:
                yield
                return
            honest = trainers.F
            trainers.F = SimpleNamespace(cross_entropy=lambda *a, **k: -honest.cross_entropy(*a, **k))
            try:
                yield
            finally:
                trainers.F = honest

    return ctx


def test_bf16_accuracy_gate_is_one_sided_and_catches_a_broken_bf16_path(monkeypatch):
    """round_speed's bf16 gate: a bf16 path that computes something else (gradient ascent) fails it; bf16
    better than fp32 passes (one-sided); the tolerance is the one-sided 99 % binomial bound."""
    import round_speed

    from cflcore.fl import trainers

    assert round_speed.accuracy_tolerance(0.96, 1000) == pytest.approx(2.326 * (2 * 0.96 * 0.04 / 1000) ** 0.5, rel=1e-3)
    monkeypatch.setattr(trainers, "autocast_context", _loss_ascent_when("bf16"))
    with pytest.raises(harness.EquivalenceError, match="below fp32"):
        round_speed.check_bf16_accuracy(1, True, epochs=2, lr=0.01)
    gap, tol = round_speed.bf16_gate(0.959, 0.964, 1000)  # a measured run: bf16 0.50 points better
    assert gap == pytest.approx(-0.5) and gap <= tol  # passes: one-sided
    gap, tol = round_speed.bf16_gate(0.959, 0.939, 1000)  # 2 points worse: inside the 99 % bound (2.06)
    assert gap <= tol
    gap, tol = round_speed.bf16_gate(0.959, 0.929, 1000)  # 3 points worse: fails
    assert gap > tol


def test_bf16_warning_names_the_missing_cpu_feature():
    import torch

    from cflcore.fl.trainers import bf16_warning

    line = bf16_warning(torch.device("cpu"), {"avx2", "fma"})
    assert line is not None and "amx_bf16" in line and "avx512_bf16" in line and "\n" not in line
    assert bf16_warning(torch.device("cpu"), {"avx2", "avx512_bf16"}) is None
    assert bf16_warning(torch.device("cpu"), {"amx_bf16"}) is None
    assert bf16_warning(torch.device("cuda"), set()) is None


def test_device_speed_hand_rounds_follow_the_engines_streams():
    """benchmarks/device_speed.py's reference and plain rounds draw the engine's streams (cflcore.fl.streams): with a
    substituted stream factory in the engine they still compute the engine's round, and a round on the default
    streams does not (so on CUDA, where the engine's generators are CUDA's, the equivalence check holds)."""
    import device_speed

    from cflcore.data.synthetic import synthetic_federated
    from cflcore.fl.streams import ClientStreams, epoch_generator
    from cflcore.models import build_model

    cpu = torch.device("cpu")
    fed = synthetic_federated(n_clients=2, n_train=[40, 37], n_test=8, n_orch=16, shape=(1, 28, 28), n_classes=10,
                              seed=0)
    engine = device_speed.EngineRound(fed, "tinyvgg", "loop", 0, cpu, 1)
    engine.engine.trainer.streams = ClientStreams(cpu, lambda seed, epoch, device: epoch_generator(seed + 1, epoch, device))
    layout = engine.engine.model_layout
    start = build_model("tinyvgg", 1, (28, 28), 10)
    layout.load(start, engine.vector())
    hands = device_speed.hand_rounds(start, fed, 0, cpu, engine)
    default = device_speed.HandRound("plain", start, fed, 0, cpu, ClientStreams(cpu))
    for call in (engine, *hands.values(), default):
        call()
    assert device_speed.check_equivalence({**hands, "engine-loop": engine}, layout)
    with pytest.raises(harness.EquivalenceError):
        harness.assert_close("default", default.vector(layout), engine.vector(), 1e-3, 1e-5, "global parameters")
