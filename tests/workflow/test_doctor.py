"""``cfl doctor`` (cflcore/doctor.py, cflcore/fl/selfcheck.py) on a CPU: its checks run from the package alone and
print, a failing or crashing check makes it exit 1 naming it, ``--gpu`` without a GPU says so and exits 1, the plan
check fails on a plan of one client a chunk, and a run's digest (the determinism check) sees a changed byte."""
from __future__ import annotations

import logging

import pytest
import torch

from cflcore import doctor
from cflcore.fl import selfcheck as doctor_checks
from cflcore.cli import main
from cflcore.fl.chunk_plan import ChunkPlan


def test_doctor_on_a_cpu_passes_and_prints_one_screen(capsys):
    assert main(["doctor", "--device", "cpu", "--checks", "env", "traffic", "speed", "plan"]) == 0
    out = capsys.readouterr().out
    assert "[ok] env: device cpu" in out and "torch " + torch.__version__ in out
    assert "[ok] traffic: uploads <= 10 and syncs constant in N" in out
    for method in doctor_checks.TRAFFIC_METHODS:
        assert f"[ok] {method}: uploads 0 / 0, syncs 0 / 0 a round at N = 4 / 8" in out
    assert "tinyvgg, N = 2:" in out and "[ok] speed:" in out
    assert "ocfl-cnn: N = 100: 13 chunk(s) of <= 8" in out and "[ok] plan:" in out
    assert "INFO" not in out and "round 1:" not in out  # the engine's round lines stay off the screen
    assert len(out.splitlines()) < 25


def test_a_failing_check_makes_the_doctor_fail_and_names_it(capsys, monkeypatch):
    def broken(device, report):
        raise RuntimeError("CUDA error: no kernel image is available")

    monkeypatch.setitem(doctor.CHECK_FUNCTIONS, "env", broken)
    collapsed = ChunkPlan(100, 1, 100, 2700, 9691.0, 10348.0, 7680, 4, "1 client(s) a chunk")
    monkeypatch.setattr(doctor_checks, "chunk_plans", lambda: [("ocfl-cnn", collapsed)])
    assert main(["doctor", "--device", "cpu", "--checks", "env", "plan"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] env: RuntimeError: CUDA error" in out and "[FAIL] plan:" in out and "ocfl-cnn N = 100" in out
    assert '"failed": ["env", "plan"]' in out


def test_traffic_growing_with_n_fails(capsys, monkeypatch):
    grows = lambda device, method, n: doctor_checks.Traffic(1, n, None, [], ["aten::nonzero"])  # noqa: E731
    monkeypatch.setattr(doctor_checks, "round_traffic", grows)
    assert main(["doctor", "--device", "cpu", "--checks", "traffic"]) == 1
    assert "[FAIL] traffic: syncs grow with N" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_doctor_gpu_without_a_gpu_says_so(capsys):
    assert main(["doctor", "--gpu"]) == 1
    assert "[FAIL] gpu: no CUDA GPU: torch.cuda.is_available() is False" in capsys.readouterr().out


def test_the_run_digest_sees_every_output_but_the_seconds(tmp_path):
    import pandas as pd

    from cflcore.data.synthetic import synthetic_federated
    from cflcore.fl.run import train_run
    from cflcore.strategies import build_strategy

    settings, fed = doctor_checks.determinism_settings(torch.device("cpu"), True)
    train_run(synthetic_federated(**fed), settings, 3, tmp_path, logging.getLogger("t"),
              strategy=build_strategy(settings["algorithm"]))
    before = doctor_checks.run_digest(tmp_path)
    server = pd.read_parquet(tmp_path / "server.parquet")
    server.assign(seconds=server["seconds"] + 1).to_parquet(tmp_path / "server.parquet")
    assert doctor_checks.run_digest(tmp_path) == before  # wall-clock seconds are no output
    models = torch.load(tmp_path / "models.pt", weights_only=True)
    weights = next(iter(models["cluster_models"].values()))
    key = next(k for k, v in weights.items() if v.is_floating_point())
    weights[key] = weights[key].clone()
    weights[key].view(-1)[0] = torch.nextafter(weights[key].view(-1)[0], torch.tensor(float("inf")))
    torch.save(models, tmp_path / "models.pt")
    assert doctor_checks.run_digest(tmp_path) != before  # one ulp of one weight
