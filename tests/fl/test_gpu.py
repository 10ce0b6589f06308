"""Training, resuming and explaining on a CUDA GPU (issue 41), marked ``gpu``: skipped, with the reason printed
(pytest's ``-ra`` summary), where ``torch.cuda.is_available()`` is False. .ci/run's skip check covers the SLURM
tests only, so these skips do not fail CI on a machine without a GPU.

What they check, with ``engine.deterministic`` at its default (true):
* the same run in two processes gives the same bytes (the default study's ocfl-km run did not before, issue 41);
* a run SIGKILLed after a round and resumed ends bit-identical to the uninterrupted run;
* the vmap trainer equals the loop trainer within the tolerance tests/fl/test_trainers.py states for the CPU;
* ``explain`` runs on CUDA (captum's backward passes under the deterministic mode, mobilenet's global pool).
"""
from __future__ import annotations

import signal

import pytest
import torch

from cflcore.data.synthetic import synthetic_federated
from test_resume import FED_KW, _assert_same_outputs, _run

DEVICE = "cuda"  # the tests' device (set to "cpu" to try their code paths on a machine without a GPU)
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="gpu: no CUDA device (torch.cuda.is_available() is False)")]

# 000's CNN with its dropout and a clustering method, on the vmap trainer (auto's choice on CUDA)
GPU_SETTINGS = {"training": {"model": "ocfl-cnn", "optimizer": "sgd", "lr": 0.01, "batch_size": 8, "local_epochs": 2,
                             "rounds": 5},
                "engine": {"trainer": "vmap", "checkpoint_every": 2, "participation": 0.8},
                "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": "oracle"}, "device": DEVICE}
FED = {**FED_KW, "shape": [1, 28, 28]}


def test_two_processes_give_the_same_bytes(tmp_path):
    for name in ("a", "b"):
        done = _run(tmp_path / name, settings=GPU_SETTINGS, fed=FED)
        assert done.returncode == 0, done.stderr[-2000:]
    _assert_same_outputs(tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("kill_after", [2])
def test_kill_and_resume_is_bit_identical_on_cuda(tmp_path, kill_after):
    reference = _run(tmp_path / "ref", settings=GPU_SETTINGS, fed=FED)
    assert reference.returncode == 0, reference.stderr[-2000:]
    killed = _run(tmp_path / "run", kill_after, settings=GPU_SETTINGS, fed=FED)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    done = _run(tmp_path / "run", settings=GPU_SETTINGS, fed=FED)
    assert done.returncode == 0 and "resuming from checkpoint round 1" in done.stdout, done.stderr[-2000:]
    _assert_same_outputs(tmp_path / "ref", tmp_path / "run")


@pytest.mark.parametrize("name,kw,sizes,shape", [
    ("tinyvgg", {}, [40, 33, 17, 50], (1, 8, 8)),                                  # unequal sizes, short last batches
    ("resnet34", {"width": 4}, [20, 13, 28], (1, 16, 16)),                          # BatchNorm, global pool
    ("ocfl-cnn", {}, [20, 13], (1, 28, 28)),                                        # active dropout masks
    ("mobilenetv1", {"width_mult": 0.125, "dropout": 0.2}, [16, 13], (1, 32, 32)),  # depthwise, BN, dropout
])
def test_vmap_equals_loop_on_cuda(name, kw, sizes, shape):
    """tests/fl/test_trainers.py's stated tolerance, float64 parameters within 1e-10, holds on CUDA too."""
    from cflcore.fl.device import prepare_device
    from cflcore.fl.flat_params import ModelLayout
    from cflcore.fl.optim import ClientOptimizer
    from cflcore.fl.trainers import LoopTrainer, TrainSpec, VmapTrainer, derive_seed
    from test_trainers import _seeded_model

    device = prepare_device(DEVICE, True)
    fed = synthetic_federated(n_clients=len(sizes), n_train=sizes, shape=shape).to(device)
    make = lambda: _seeded_model(name, shape, fed.n_classes, kw)  # noqa: E731
    layout = ModelLayout.of(make())
    start = layout.flatten(make()).double().to(device)
    starts = torch.stack([start + 0.01 * i for i in range(len(sizes))])
    spec = TrainSpec(ClientOptimizer("sgd", 0.01), 8, 2, precision="fp64")
    seeds = [derive_seed(1, i) for i in range(len(sizes))]
    a = LoopTrainer(make(), layout, spec, device).train(starts, fed.clients, seeds)
    b = VmapTrainer(make(), layout, spec, device).train(starts, fed.clients, seeds)
    assert (a.params - starts).abs().max() > 1e-4  # training moved the parameters
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
