"""The device a job runs on, checked without a GPU: ``device: cuda:N``, ``engine.deterministic`` (CUDA
only), ``memory_budget_mb`` / ``channels_last: auto``, the deterministic global pool, and the GPU slots that spread a
workstation's jobs over its GPUs (cflcore.fl.gpu_slots) with fake device counts. The checks that need a GPU are
tests/fl/test_gpu.py."""
from __future__ import annotations

import multiprocessing
import os
import signal

import pytest
import torch
from torch import nn

from cflcore import config as cc
from cflcore.errors import CflError, ConfigError
from cflcore.fl import device as device_module
from cflcore.fl.device import prepare_device, resolve_device, set_deterministic
from cflcore.fl.gpu_slots import acquire_gpu_slot
from cflcore.fl.trainers import CPU_MEMORY_BUDGET_MB, resolve_channels_last, resolve_memory_budget
from cflcore.models import build_model
from cflcore.models._layers import GlobalAvgPool, global_avg_pool
from conftest import REPO

CPU = torch.device("cpu")


def _fake_gpus(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


@pytest.mark.parametrize("name", ["cuda:x", "cuda:", "cuda:01", "gpu", "cuda:-1", "CUDA"])
def test_bad_device_names_are_refused(name):
    with pytest.raises(ConfigError, match=r"device: .*allowed: auto, cpu, cuda, cuda:N"):
        resolve_device(name)


def test_cuda_index_must_be_visible(monkeypatch):
    _fake_gpus(monkeypatch, 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(CflError, match=r"device: 'cuda:2' requested but only 2 CUDA GPU\(s\) are visible"):
        resolve_device("cuda:2")
    _fake_gpus(monkeypatch, 0)
    with pytest.raises(CflError, match="device: 'cuda:0' requested but no CUDA GPU is available"):
        resolve_device("cuda:0")


def test_schema_takes_cuda_n_and_refuses_others():
    base = cc.load_config(os.path.join(REPO, "config", "tiny.yaml"))
    for ok in ("cuda", "cuda:0", "cuda:3", "auto", "cpu"):
        cc.validate_config({**base, "device": ok})
    with pytest.raises(ConfigError, match="device"):
        cc.validate_config({**base, "device": "cuda:a"})


def test_deterministic_mode_is_never_set_for_a_cpu(monkeypatch):
    """On a CPU nothing is set (CPU results keep their bytes); on CUDA all four settings are, and an existing
    CUBLAS_WORKSPACE_CONFIG is kept."""
    calls = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda mode: calls.append(mode))
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    assert set_deterministic(CPU, True) is False and prepare_device("cpu", True) == CPU
    assert calls == [] and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    assert set_deterministic(torch.device("cuda"), False) is False and calls == []
    assert set_deterministic(torch.device("cuda"), True) is True
    assert calls == [True] and os.environ["CUBLAS_WORKSPACE_CONFIG"] == device_module.CUBLAS_WORKSPACE
    assert torch.backends.cudnn.deterministic is True and torch.backends.cudnn.benchmark is False
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    set_deterministic(torch.device("cuda"), True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_auto_settings_keep_the_cpu_figures(monkeypatch):
    assert resolve_memory_budget("auto", CPU) == CPU_MEMORY_BUDGET_MB == 2048
    assert resolve_memory_budget(512, CPU) == 512 and resolve_memory_budget(512, torch.device("cuda")) == 512
    for total in (80, 40, 12):  # the card's memory plays no part (nor does the free memory)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None, t=total: (3 * 2 ** 30, t * 2 ** 30))
        assert resolve_memory_budget("auto", torch.device("cuda"), 4) == 40 * 1024 * 3 // 4 // 4 == 7680
    assert resolve_memory_budget("auto", torch.device("cuda"), 1) == 4 * resolve_memory_budget("auto", torch.device("cuda"), 4)
    assert resolve_channels_last("auto", CPU) is True and resolve_channels_last("auto", torch.device("cuda")) is False
    assert resolve_channels_last(True, torch.device("cuda")) is True and resolve_channels_last(False, CPU) is False


def test_engine_runs_auto_like_the_cpu_figures(tmp_path):
    """A run with ``memory_budget_mb`` and ``channels_last`` set to auto gives the bytes of 2048 / true on a CPU."""
    from engine_runs import train_run

    from cflcore.data.synthetic import synthetic_federated
    from test_resume import _assert_same_outputs

    def settings(engine):
        return {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                             "rounds": 2}, "engine": {"trainer": "vmap", **engine}, "algorithm": {"method": "bnc"},
                "device": "cpu"}

    fed = synthetic_federated(n_clients=3, n_train=16)
    train_run(fed, settings({"memory_budget_mb": "auto", "channels_last": "auto"}), 1, tmp_path / "auto")
    train_run(fed, settings({"memory_budget_mb": 2048, "channels_last": True}), 1, tmp_path / "fixed")
    _assert_same_outputs(tmp_path / "auto", tmp_path / "fixed")


def test_global_pool_is_the_adaptive_pool_on_a_cpu():
    x = torch.randn(5, 7, 3, 4, dtype=torch.float64)
    assert torch.equal(GlobalAvgPool()(x), nn.AdaptiveAvgPool2d(1)(x)) and torch.equal(global_avg_pool(x), GlobalAvgPool()(x))
    for name in ("mobilenetv1", "mobilenetv2", "resnet34"):  # no AdaptiveAvgPool2d left (its CUDA backward raises)
        model = build_model(name, 1, 16, 4)
        assert not any(isinstance(m, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)) for m in model.modules()), name


def test_mobilenetv2_forward_is_torchvisions(monkeypatch):
    """torchvision's forward pools with adaptive_avg_pool2d (no deterministic CUDA backward); ours goes through
    global_avg_pool, with the same numbers on a CPU."""
    from torchvision.models.mobilenetv2 import MobileNetV2

    from cflcore.models import mobilenet

    torch.manual_seed(0)
    model = build_model("mobilenetv2", 1, 16, 4).eval()
    x = torch.randn(3, 1, 16, 16)
    pooled = []
    monkeypatch.setattr(mobilenet, "global_avg_pool", lambda t: pooled.append(t.shape) or global_avg_pool(t))
    assert torch.equal(model(x), MobileNetV2.forward(model, x)) and len(pooled) == 1


def test_gpu_slots_spread_jobs_evenly(tmp_path):
    """Slot 0 of every GPU first, then slot 1...; a released slot is taken again before a fuller GPU's next one."""
    held = [acquire_gpu_slot(3, tmp_path) for _ in range(5)]
    assert [(s.index, s.slot) for s in held] == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)]
    held[2].release()
    again = acquire_gpu_slot(3, tmp_path)
    assert (again.index, again.slot) == (2, 0)
    assert acquire_gpu_slot(1, tmp_path / "one").index == 0
    for s in [*held, again]:
        s.release()
    with pytest.raises(ValueError, match="n_devices"):
        acquire_gpu_slot(0, tmp_path)


def _hold_slot_and_die(directory: str, ready) -> None:
    acquire_gpu_slot(2, directory)
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_job_frees_its_gpu(tmp_path):
    """The kernel drops a SIGKILLed job's lock: its GPU is free again without any clean-up."""
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=_hold_slot_and_die, args=(str(tmp_path), ready))
    child.start()
    child.join(30)
    assert ready.is_set() and child.exitcode == -signal.SIGKILL
    assert (tmp_path / "index0.slot0").exists()
    first = acquire_gpu_slot(2, tmp_path)
    assert (first.index, first.slot) == (0, 0)
    first.release()


def test_a_job_on_several_gpus_takes_a_slot(tmp_path, monkeypatch):
    """``device: cuda`` with 3 visible GPUs takes the process's slot; ``cuda:N`` takes none."""
    from cflcore.fl import gpu_slots

    _fake_gpus(monkeypatch, 3)
    monkeypatch.setenv(gpu_slots.LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(gpu_slots, "_HELD", [])
    monkeypatch.setattr(device_module, "set_deterministic", lambda device, deterministic=True: False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    other = acquire_gpu_slot(3, tmp_path)  # another job holds GPU 0's first slot
    assert prepare_device("cuda:2", True) == torch.device("cuda", 2) and gpu_slots._HELD == []
    assert prepare_device("cuda", True) == torch.device("cuda", 1)
    assert prepare_device("auto", True) == torch.device("cuda", 1)  # the same process keeps its GPU
    gpu_slots._HELD[0].release()
    other.release()


def test_gpu_slots_are_keyed_by_uuid(tmp_path):
    """Two jobs that see the same two GPUs in opposite orders (CUDA_VISIBLE_DEVICES) coordinate: the second job takes
    the GPU the first did not, whatever its visible index; the slot files are named by UUID."""
    a = acquire_gpu_slot(["GPU-aaaa", "GPU-bbbb"], tmp_path)
    b = acquire_gpu_slot(["GPU-bbbb", "GPU-aaaa"], tmp_path)
    assert (a.key, a.index) == ("GPU-aaaa", 0) and (b.key, b.index) == ("GPU-bbbb", 0)
    assert {p.name for p in tmp_path.iterdir()} == {"GPU-aaaa.slot0", "GPU-bbbb.slot0"}
    a.release()
    b.release()


def test_default_lock_dir_is_shared_by_every_user(monkeypatch):
    from cflcore.fl import gpu_slots

    monkeypatch.delenv(gpu_slots.LOCK_DIR_ENV, raising=False)
    assert str(gpu_slots.lock_dir()) == gpu_slots.DEFAULT_LOCK_DIR and str(os.getuid()) not in gpu_slots.DEFAULT_LOCK_DIR
    assert gpu_slots.DEFAULT_LOCK_DIR.startswith("/var/tmp/")  # node-local, not a per-user or per-job $TMPDIR


def test_a_new_lock_dir_is_world_writable(tmp_path):
    slot = acquire_gpu_slot(2, tmp_path / "shared")
    assert (tmp_path / "shared").stat().st_mode & 0o7777 == 0o1777
    slot.release()


@pytest.mark.parametrize("breakage", ["dir-is-a-file", "flock-unsupported"])
def test_a_lock_error_gives_no_slot_and_a_warning(tmp_path, monkeypatch, caplog, breakage):
    """Any lock error but "held" (here: the lock folder is a file; NFS without locks, ENOLCK) falls back to no slot
    with one warning, never a crash; prepare_device then keeps the current CUDA device."""
    import errno
    import logging

    from cflcore.fl import gpu_slots

    monkeypatch.setattr(gpu_slots, "_HELD", [])
    if breakage == "dir-is-a-file":
        (tmp_path / "f").write_text("")
        monkeypatch.setenv(gpu_slots.LOCK_DIR_ENV, str(tmp_path / "f" / "locks"))
    else:
        monkeypatch.setenv(gpu_slots.LOCK_DIR_ENV, str(tmp_path))

        def no_locks(fd, op):
            raise OSError(errno.ENOLCK, "No locks available")

        monkeypatch.setattr(gpu_slots.fcntl, "flock", no_locks)
    with caplog.at_level(logging.WARNING, logger="cflcore.fl"):
        assert gpu_slots.job_gpu(2, ["GPU-a", "GPU-b"]) is None
    assert len(caplog.records) == 1 and "no slot taken" in caplog.records[0].getMessage()
    assert gpu_slots._HELD == []
    _fake_gpus(monkeypatch, 2)
    monkeypatch.setattr(device_module, "set_deterministic", lambda device, deterministic=True: False)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    assert prepare_device("cuda", True) == torch.device("cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU (the GPU tests would run)")
def test_require_gpu_turns_a_gpu_skip_into_a_failure():
    """tests/conftest.py: under CFL_REQUIRE_GPU=1 a skipped ``gpu`` test fails, naming the skip's reason."""
    import subprocess
    import sys

    def run(require: bool):
        env = {k: v for k, v in os.environ.items() if k not in ("CFL_REQUIRE_GPU", "CFL_GPU_TEST_DEVICE")}
        if require:
            env["CFL_REQUIRE_GPU"] = "1"
        return subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-q", "-rs",
                               "tests/fl/test_gpu.py", "-k", "two_processes"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)

    plain, required = run(False), run(True)
    assert plain.returncode == 0 and "1 skipped" in plain.stdout, plain.stdout[-1500:]
    assert required.returncode == 1 and "1 error" in required.stdout, required.stdout[-1500:]  # fails in set-up
    assert "CFL_REQUIRE_GPU=1: a GPU test was skipped" in required.stdout and "no CUDA device" in required.stdout
