"""No host traffic inside a round (docs/gpu.md): the counter (cflcore.fl.host_traffic) sees explicit and implicit
host-to-device transfers, inside vmap too; a training round of the engine sends at most a handful from the host, on
every device this machine has (a CPU, where there is nothing to count; CUDA, ocfl-cnn at 15 clients of unequal
sizes, where 7c11a35's round sent about 1,287)."""
from __future__ import annotations

import logging

import pytest
import torch

from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.host_traffic import HostToDeviceCounter
from cflcore.fl.trainers import epoch_order, uniform_source
from engine_runs import build_engine, cpu_train_spec

MAX_PER_ROUND = 10
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def test_the_counter_sees_copies_and_implicit_transfers():
    with HostToDeviceCounter() as c:
        torch.ones(3).to("meta")                                       # explicit copy
        torch.empty(5, 4, device="meta")[torch.tensor([1, 2])]          # a host index: implicit
        torch.empty(3, device="meta").copy_(torch.ones(3))             # copy_ from the host
        torch.empty(3, device="meta") + 1                              # a Python scalar: nothing sent
        torch.func.vmap(lambda x: x[torch.tensor([0, 1])])(torch.empty(2, 4, device="meta"))  # inside vmap
        torch.ones(3) * 2                                              # host only
    assert c.count == 4 and c.ops == ["aten::_to_copy", "aten::index", "aten::copy_", "aten::index"]


def test_the_counter_sees_uploads_that_dispatch_does_not():
    """torch.tensor / as_tensor / asarray with a device copy below the dispatcher: the function mode counts them, once."""
    import numpy as np

    with HostToDeviceCounter() as c:
        torch.tensor([1, 2], device="meta")                  # a list: invisible to a dispatch mode
        torch.as_tensor([3, 4], device=torch.device("meta"))
        torch.asarray(np.ones(2), device="meta")             # numpy: one upload, not two
        torch.as_tensor(torch.ones(2, device="meta"), device="meta")  # already there: nothing sent
        torch.tensor([1, 2])                                  # host only
    assert c.count == 3 and c.ops == ["torch.tensor", "torch.as_tensor", "torch.asarray"]


def test_the_counter_sees_syncs_on_a_fake_cuda_device():
    """Copies to the host, .item(), nonzero and boolean indexing of a device tensor are syncs; arithmetic, indexing by
    a device index and nonzero_static are not. A fake CUDA device (no GPU needed) stands in for a real one."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from cflcore.fl.host_traffic import HostTraffic

    with FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()):
        x = torch.ones(4, device="cuda")
        index = torch.zeros(2, dtype=torch.long, device="cuda")
        with HostTraffic() as t:
            x.cpu()                       # a copy to the host
            x.nonzero()                   # an output size the host must read
            x[x > 0]                      # boolean indexing: the same
            x.sum().item()                # a value
            x * 2 + 1                     # none
            x[index]                      # none: the index is on the device
            torch.nonzero_static(x, size=2)  # none: its size is known
            torch.tensor([1, 2], device="cuda")  # an upload, not a sync
    assert t.syncs == 4 and t.sync_ops == ["aten::_to_copy", "aten::nonzero", "aten::index", "aten::_local_scalar_dense"]
    assert t.uploads == 1 and t.upload_ops == ["torch.tensor"]


def test_the_vmap_trainer_fetches_a_rounds_losses_once_whatever_its_chunks(monkeypatch):
    """One device-to-host copy of the losses a round (cflcore.fl.trainers.host_losses), not one a chunk or client:
    counted on a CPU as calls of Tensor.cpu (a CPU copies nothing, but the code asks the same)."""
    from cflcore.fl.flat_params import ModelLayout
    from cflcore.fl.optim import ClientOptimizer
    from cflcore.fl.trainers import VmapTrainer
    from cflcore.models import build_model

    fed = synthetic_federated(n_clients=5, n_train=[12, 9, 16, 11, 12], shape=(1, 8, 8), n_test=4, n_orch=8)
    layout = ModelLayout.of(build_model("tinyvgg", 1, (8, 8), fed.n_classes))
    spec = cpu_train_spec(optimizer=ClientOptimizer("sgd", 0.1), batch_size=4, local_epochs=1, precision="fp64", memory_budget_mb=64)
    trainer = VmapTrainer(build_model("tinyvgg", 1, (8, 8), fed.n_classes), layout, spec, torch.device("cpu"))
    trainer._probe(fed.clients[0].x_train.to(torch.float64))
    trainer._activation_numel = 10 ** 7  # chunks of one client
    starts = layout.flatten(build_model("tinyvgg", 1, (8, 8), fed.n_classes)).to(torch.float64).expand(5, -1).clone()
    calls, real = [], torch.Tensor.cpu
    monkeypatch.setattr(torch.Tensor, "cpu", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    result = trainer.train(starts, fed.clients, [1, 2, 3, 4, 5])
    assert trainer.last_plan.chunks == 5 and len(calls) == 1
    assert [len(ls) for ls in result.step_losses] == [3, 3, 4, 3, 3]


@pytest.mark.parametrize("device", DEVICES)
def test_permutations_and_masks_are_drawn_on_the_device(device):
    gen, perm = epoch_order(7, 1, 50, device)
    assert gen.device.type == perm.device.type == device
    mask = uniform_source(gen)((4, 3), torch.float32, torch.device(device))
    assert mask.device.type == device
    if device == "cpu":  # the CPU generator of earlier versions: the same bytes
        old = torch.Generator().manual_seed(gen.initial_seed())
        assert torch.equal(perm, torch.randperm(50, generator=old))
        assert torch.equal(mask, torch.rand((4, 3), generator=old))


@pytest.mark.parametrize("device", DEVICES)
def test_a_round_sends_at_most_a_handful_from_the_host(device):
    gpu = device == "cuda"
    model, n, sizes, shape = ("ocfl-cnn", 15, [162 + i for i in range(15)], [1, 28, 28]) if gpu else \
        ("tinyvgg", 6, [20, 17, 24, 13, 20, 22], [1, 8, 8])
    settings = {"training": {"model": model, "optimizer": "sgd", "lr": 0.01, "batch_size": 32 if gpu else 8,
                             "local_epochs": 2, "rounds": 3},
                "engine": {"trainer": "vmap"}, "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": 2},
                "device": device}
    fed = synthetic_federated(n_clients=n, n_train=sizes, shape=shape)
    engine, state = build_engine(fed, settings, 0, logging.getLogger("test"))
    engine.run_round(state, 0, 3)  # round 0 warms up (probe, caches)
    with HostToDeviceCounter() as counter:
        engine.run_round(state, 1, 3)
    assert counter.count <= MAX_PER_ROUND, counter.ops
