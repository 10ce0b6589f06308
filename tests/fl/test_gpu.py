"""Training, resuming and explaining on a CUDA GPU, marked ``gpu``: skipped, with the reason printed (pytest's ``-ra``
summary), where ``torch.cuda.is_available()`` is False; under ``CFL_REQUIRE_GPU=1`` (.ci/run sets it where
``nvidia-smi -L`` lists a GPU) such a skip fails instead (tests/conftest.py).

The workload is one where nondeterminism shows: 000's CNN (ocfl-cnn, 25.4M parameters, dropout) at 15 clients of
unequal sizes on the vmap trainer (auto's choice on CUDA), 6 rounds. What they check, with ``engine.deterministic``
at its default (true):
* the same run in two processes gives the same bytes, and the child processes had the flags set (cuBLAS workspace,
  cuDNN deterministic without autotuning, ``torch.use_deterministic_algorithms``);
* the control: the same pair with ``engine.deterministic: false`` differs; where it happens not to on some card the
  test skips with a reason starting ``control:`` (not a failure under CFL_REQUIRE_GPU: the flags are still checked);
* a run SIGKILLed after a round and resumed ends bit-identical to the uninterrupted run;
* the vmap trainer equals the loop trainer within the tolerance tests/fl/test_trainers.py states for the CPU;
* ``explain`` runs on CUDA (captum's backward passes under the deterministic mode, mobilenet's global pool);
* issue 71's settings (``engine.conv_form`` loop / unfold, ``engine.fc_tf32``, ``optimizer_state: kept`` on the vmap
  trainer): the same bytes in two processes with each, and each convolution form equal to the loop trainer.

``CFL_GPU_TEST_DEVICE=cpu`` runs the same code paths on a CPU with a small workload: the flags are then asserted
unset, and the control skips (the CPU kernels are deterministic anyway). ``cfl doctor --gpu`` runs its own workloads
(cflcore/fl/selfcheck.py), not these tests; docs/gpu.md's one-script recipe runs both.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import torch

from cflcore.data.synthetic import synthetic_federated
from test_resume import FED_KW, _assert_same_outputs, _run

DEVICE = os.environ.get("CFL_GPU_TEST_DEVICE", "cuda")  # "cpu": these tests' code paths on a machine without a GPU
ON_GPU = DEVICE.startswith("cuda")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(ON_GPU and not torch.cuda.is_available(),
                                 reason="gpu: no CUDA device (torch.cuda.is_available() is False)")]

# 000's CNN with its dropout and a clustering method, on the vmap trainer, 15 clients of unequal sizes
GPU_SETTINGS = {"training": {"model": "ocfl-cnn" if ON_GPU else "tinyvgg", "optimizer": "sgd", "lr": 0.01,
                             "batch_size": 16, "local_epochs": 2, "rounds": 6 if ON_GPU else 3},
                "engine": {"trainer": "vmap", "checkpoint_every": 2, "participation": 0.8},
                "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": "oracle"}, "device": DEVICE}
FED = ({**FED_KW, "n_clients": 15, "n_train": [40 + 3 * i for i in range(15)], "shape": [1, 28, 28]} if ON_GPU
       else {**FED_KW, "shape": [1, 8, 8]})

FLAGS_SCRIPT = """
import json, logging, os, sys
import torch
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.run import train_run
from cflcore.strategies import build_strategy
settings = json.loads(sys.argv[3])
train_run(synthetic_federated(**json.loads(sys.argv[2])), settings, 3, sys.argv[1], strategy=build_strategy(settings["algorithm"]))
flags = {"deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
         "cudnn_deterministic": torch.backends.cudnn.deterministic, "cudnn_benchmark": torch.backends.cudnn.benchmark,
         "cublas_workspace": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}
open(os.path.join(sys.argv[1], "flags.json"), "w").write(json.dumps(flags))
"""


def _run_child(out_dir, settings):
    """One training in a fresh interpreter; its determinism flags, as set in that process, in flags.json."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("CUBLAS_WORKSPACE_CONFIG", None)  # the engine must set it itself
    done = subprocess.run([sys.executable, "-c", FLAGS_SCRIPT, str(out_dir), json.dumps(FED), json.dumps(settings)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out_dir / "flags.json").read_text())


def _outputs_equal(a, b) -> bool:
    try:
        _assert_same_outputs(a, b)
    except AssertionError:
        return False
    return True


def test_two_processes_give_the_same_bytes(tmp_path):
    flags = [_run_child(tmp_path / name, GPU_SETTINGS) for name in ("a", "b")]
    expected = ({"deterministic_algorithms": True, "cudnn_deterministic": True, "cudnn_benchmark": False,
                 "cublas_workspace": ":4096:8"} if ON_GPU else
                {"deterministic_algorithms": False, "cudnn_deterministic": False, "cudnn_benchmark": False,
                 "cublas_workspace": None})  # a CPU sets nothing (cflcore.fl.device.set_deterministic)
    assert flags == [expected, expected]
    _assert_same_outputs(tmp_path / "a", tmp_path / "b")


NEW_SETTINGS = {"conv_form-loop": ({"conv_form": "loop"}, {}), "conv_form-unfold": ({"conv_form": "unfold"}, {}),
                "fc_tf32": ({"fc_tf32": True}, {}),
                "kept-state": ({}, {"momentum": 0.9, "optimizer_state": "kept"})}
"""Issue 71's settings, each (engine, training recipe) over GPU_SETTINGS: the same bytes in two processes with each."""


@pytest.mark.parametrize("name", list(NEW_SETTINGS))
def test_each_new_setting_is_byte_identical_across_processes(tmp_path, name):
    engine, training = NEW_SETTINGS[name]
    settings = {**GPU_SETTINGS, "engine": {**GPU_SETTINGS["engine"], **engine},
                "training": {**GPU_SETTINGS["training"], **training}}
    for run in ("a", "b"):
        _run_child(tmp_path / run, settings)
    _assert_same_outputs(tmp_path / "a", tmp_path / "b")


def test_the_control_without_determinism_differs(tmp_path):
    """engine.deterministic: false, the same pair: the flags are off in the child, and the bytes differ (else this
    workload could not tell the flags' effect, and the test above proves nothing on this card)."""
    control = {**GPU_SETTINGS, "engine": {**GPU_SETTINGS["engine"], "deterministic": False}}
    flags = [_run_child(tmp_path / name, control) for name in ("a", "b")]
    assert all(not f["deterministic_algorithms"] for f in flags), flags
    if _outputs_equal(tmp_path / "a", tmp_path / "b"):
        pytest.skip(f"control: two runs with engine.deterministic false gave the same bytes on {DEVICE} "
                    f"({torch.cuda.get_device_name() if ON_GPU else 'a CPU, whose kernels are deterministic'})")


@pytest.mark.parametrize("kill_after", [2])
def test_kill_and_resume_is_bit_identical_on_cuda(tmp_path, kill_after):
    reference = _run(tmp_path / "ref", settings=GPU_SETTINGS, fed=FED)
    assert reference.returncode == 0, reference.stderr[-2000:]
    killed = _run(tmp_path / "run", kill_after, settings=GPU_SETTINGS, fed=FED)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    done = _run(tmp_path / "run", settings=GPU_SETTINGS, fed=FED)
    assert done.returncode == 0 and "resuming from checkpoint round 1" in done.stdout, done.stderr[-2000:]
    _assert_same_outputs(tmp_path / "ref", tmp_path / "run")


def _parity_setup(name, kw, sizes, shape):
    """What the vmap-against-loop tests on ``DEVICE`` share: the device, a synthetic federation of ``sizes`` clients
    on it, a maker of the seeded model (test_trainers), its layout, each client's float64 start (the same start moved
    by 0.01 a client) and each client's seed."""
    from cflcore.fl.device import prepare_device
    from cflcore.fl.flat_params import ModelLayout
    from cflcore.fl.trainers import derive_seed
    from test_trainers import _seeded_model

    device = prepare_device(DEVICE, True)
    fed = synthetic_federated(n_clients=len(sizes), n_train=sizes, shape=shape).to(device)
    make = lambda: _seeded_model(name, shape, fed.n_classes, kw)  # noqa: E731
    layout = ModelLayout.of(make())
    start = layout.flatten(make()).double().to(device)
    starts = torch.stack([start + 0.01 * i for i in range(len(sizes))])
    seeds = [derive_seed(1, i) for i in range(len(sizes))]
    return device, fed, make, layout, starts, seeds


@pytest.mark.parametrize("name,kw,sizes,shape", [
    ("tinyvgg", {}, [40, 33, 17, 50], (1, 8, 8)),                                  # unequal sizes, short last batches
    ("resnet34", {"width": 4}, [20, 13, 28], (1, 16, 16)),                          # BatchNorm, global pool
    ("ocfl-cnn", {}, [20, 13], (1, 28, 28)),                                        # active dropout masks
    ("mobilenetv1", {"width_mult": 0.125, "dropout": 0.2}, [16, 13], (1, 32, 32)),  # depthwise, BN, dropout
])
@pytest.mark.parametrize("ragged", ["split", "pad"])  # pad: CUDA's default (engine.ragged_batches auto)
def test_vmap_equals_loop_on_cuda(name, kw, sizes, shape, ragged):
    """tests/fl/test_trainers.py's stated tolerance, float64 parameters within 1e-10, holds on CUDA too, for both ways
    of training unequal batches (BatchNorm models always split)."""
    from cflcore.fl.optim import ClientOptimizer
    from cflcore.fl.trainers import LoopTrainer, VmapTrainer
    from engine_runs import cpu_train_spec

    device, fed, make, layout, starts, seeds = _parity_setup(name, kw, sizes, shape)
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", 0.01), batch_size=8, local_epochs=2, precision="fp64", ragged_batches=ragged)
    a = LoopTrainer(make(), layout, spec, device).train(starts, fed.clients, seeds)
    vmap = VmapTrainer(make(), layout, spec, device)
    b = vmap.train(starts, fed.clients, seeds)
    assert vmap.pad == (ragged == "pad" and not layout.has_bn)
    assert (a.params - starts).abs().max() > 1e-4  # training moved the parameters
    assert (a.params - b.params).abs().max().item() <= 1e-10


@pytest.mark.parametrize("form", ["loop", "unfold"])
@pytest.mark.parametrize("name,kw,sizes,shape", [
    ("resnet34", {"width": 4}, [20, 13, 28], (1, 16, 16)),                          # BatchNorm, stride 2, 1x1
    ("ocfl-cnn", {}, [20, 13], (1, 28, 28)),                                        # 5x5, active dropout masks
    ("mobilenetv1", {"width_mult": 0.125, "dropout": 0.2}, [16, 13], (1, 32, 32)),  # depthwise (the loop)
])
def test_conv_forms_equal_loop_on_cuda(name, kw, sizes, shape, form):
    """engine.conv_form (cflcore/fl/client_conv.py) on CUDA: the vmap trainer equals the loop trainer within
    tests/fl/test_client_conv.py's CPU tolerance, float64 parameters within 1e-10."""
    from cflcore.fl.optim import ClientOptimizer
    from cflcore.fl.trainers import LoopTrainer, VmapTrainer
    from engine_runs import cpu_train_spec

    device, fed, make, layout, starts, seeds = _parity_setup(name, kw, sizes, shape)
    opt = ClientOptimizer("sgd", 0.01)
    a = LoopTrainer(make(), layout, cpu_train_spec(optimizer=opt, batch_size=8, local_epochs=2, precision="fp64"),
                    device).train(starts, fed.clients, seeds)
    spec = cpu_train_spec(optimizer=opt, batch_size=8, local_epochs=2, precision="fp64", conv_form=form)
    b = VmapTrainer(make(), layout, spec, device).train(starts, fed.clients, seeds)
    assert (a.params - starts).abs().max() > 1e-4
    assert (a.params - b.params).abs().max().item() <= 1e-10


def test_explain_runs_on_cuda(tmp_path):
    """A trained run's models explained on the GPU (HiResCAM's and the sanity check's backward passes), as the
    explain stage does it; the result has one row per cluster model and finite scores."""
    import pandas as pd
    from engine_runs import train_run

    from cflcore.explain import explain_run
    from cflcore.fl.artifacts import load_run_models
    from cflcore.fl.device import prepare_device

    settings = {**GPU_SETTINGS, "training": {**GPU_SETTINGS["training"], "model": "mobilenetv1", "rounds": 2}}
    fed = synthetic_federated(n_clients=4, n_train=16, shape=(1, 28, 28))
    train_run(fed, settings, 0, tmp_path / "run")
    device = prepare_device(DEVICE, True)
    models = load_run_models(tmp_path / "run" / "models.pt", device=device)
    explain_run(models, fed, {"samples": 8, "step": 98, "grid_clients": [0, 1], "model": "mobilenetv1"}, 0,
                tmp_path / "explain")
    insdel = pd.read_parquet(tmp_path / "explain" / "insdel.parquet")
    assert len(insdel) > 0 and insdel.select_dtypes("number").notna().all().all()
