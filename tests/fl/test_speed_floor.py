"""The roofline floor of cflcore.fl.speed: the pure model (round_floor over LayerCosts and DeviceRates) against
hand-computed parts, the FLOP split of a real model against closed forms, and every rate measured with its precision
pinned whatever the global TF32 flags, which are restored after it."""
import math

import pytest
import torch

from cflcore.fl import speed
from cflcore.fl.speed import (OPTIMIZER_STEP_BYTES, WEIGHT_PASS_BYTES, DeviceRates, LayerCosts, layer_costs,
                              optimizer_bytes, round_floor, sample_flops)

CPU = torch.device("cpu")
COSTS = LayerCosts(conv_train=3e6, conv_forward=1e6, fc_train=6e5, fc_forward=2e5, n_params=1000, fc_params=600)


def test_the_floor_is_the_sum_of_its_hand_computed_parts():
    rates = DeviceRates(conv_flops=1e9, fc_flops=1e8, copy_bytes=1e9)
    f = round_floor(COSTS, rates, n_clients=3, n_train=10, batch_size=4, epochs=2, evaluated_samples=50)
    steps = 3 * 2 * 3  # 3 clients x 2 epochs x ceil(10 / 4) batches
    trained = 3 * 10 * 2
    assert f.conv == pytest.approx((3e6 * trained + 1e6 * 50) / 1e9)
    assert f.fc == pytest.approx(6e5 * trained / 1e8) and f.fc_bound == "flops"  # 0.36 s of FLOPs > 0.13 ms of bytes
    assert f.optimizer == pytest.approx(1000 * 12 * steps / 1e9)
    assert f.evaluation == pytest.approx(2e5 * 50 / 1e8)
    assert f.seconds == pytest.approx(f.conv + f.fc + f.optimizer + f.evaluation) == f.parts()["total"]
    assert "fc 360.0 (flops-bound)" in f.line()


def test_the_fc_part_is_the_longer_of_its_flops_and_its_weight_bytes():
    kw = dict(n_clients=3, n_train=10, batch_size=4, epochs=2, evaluated_samples=0)
    fast_memory = round_floor(COSTS, DeviceRates(1e9, 1e8, 1e12), **kw)
    slow_memory = round_floor(COSTS, DeviceRates(1e9, 1e8, 1e3), **kw)
    assert fast_memory.fc_bound == "flops" and slow_memory.fc_bound == "bytes"
    assert slow_memory.fc == pytest.approx(600 * WEIGHT_PASS_BYTES * 18 / 1e3)
    assert slow_memory.conv == fast_memory.conv  # the convolutions do not depend on the bandwidth


def test_optimizer_bytes_a_parameter_a_step():
    assert optimizer_bytes("sgd") == 12 and optimizer_bytes("sgd", 0.9) == 20 and optimizer_bytes("adam") == 28
    assert WEIGHT_PASS_BYTES + OPTIMIZER_STEP_BYTES["sgd"] == 24  # the 24 bytes a parameter a step of plain SGD


def test_ocfl_cnn_layer_costs_are_the_closed_forms_and_its_round_moves_245_gb_at_15_clients():
    costs = layer_costs("ocfl-cnn", (1, 28, 28), 10, 2)
    convs = [(1, 16), (16, 32), (32, 32)]  # 5x5, padding 2: every output 28 x 28
    assert costs.conv_forward == 2 * 28 * 28 * 25 * sum(i * o for i, o in convs)
    fc = [(25088, 1000), (1000, 250), (250, 100), (100, 10)]
    assert costs.fc_forward == 2 * sum(i * o for i, o in fc)
    assert costs.fc_params == sum(i * o + o for i, o in fc) and costs.n_params > costs.fc_params
    train, forward = sample_flops("ocfl-cnn", (1, 28, 28), 10, 2)
    assert costs.conv_train + costs.fc_train == pytest.approx(train)
    assert costs.conv_forward + costs.fc_forward == pytest.approx(forward)
    steps = 15 * 3 * math.ceil(267 / 32)  # the doctor's N = 15 round: 267 samples, batch 32, 3 epochs
    moved = (costs.fc_params * WEIGHT_PASS_BYTES + costs.n_params * optimizer_bytes("sgd")) * steps
    assert 240e9 < moved < 250e9  # the "about 245 GB a round at N = 15"


@pytest.mark.parametrize("matmul, cudnn", [(True, True), (False, False), (True, False)])
def test_each_rate_is_measured_at_its_pinned_precision_and_the_flags_are_restored(monkeypatch, matmul, cudnn):
    seen = []
    real = speed._best_rate

    def spy(device, work, call, calls, repeats):
        seen.append((torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32))
        return real(device, work, call, calls, repeats)

    monkeypatch.setattr(speed, "_best_rate", spy)
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
        rates = speed.device_rates(CPU, repeats=1)
        assert seen[:2] == [(False, True), (False, False)]  # conv: TF32 in cuDNN only; GEMM: IEEE fp32
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (matmul, cudnn)
        with pytest.raises(RuntimeError), speed.pinned_tf32(matmul=not matmul, cudnn=not cudnn):
            raise RuntimeError
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (matmul, cudnn)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    assert all(math.isfinite(r) and r > 0 for r in (rates.conv_flops, rates.fc_flops, rates.copy_bytes))
