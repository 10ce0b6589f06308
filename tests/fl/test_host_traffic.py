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
from engine_runs import build_engine

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
