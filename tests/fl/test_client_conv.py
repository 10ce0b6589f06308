"""``engine.conv_form`` (cflcore/fl/client_conv.py): the vmap trainer's per-client convolutions as a loop of plain
convolutions or unfold + a batched product, through a convolution with its own vmap rule (forward and backward), agree
with the loop trainer within the loop-vs-vmap tolerance of tests/fl/test_trainers.py (float64, 1e-10); the forms are
really taken (the rule runs); the combinations the Function does not serve are refused in one line; and the form is in
the run's identity and its status.json."""
import logging

import numpy as np
import pytest
import torch

from cflcore import config as cc
from cflcore.data.synthetic import synthetic_federated
from cflcore.errors import ConfigError
from cflcore.fl import client_conv
from cflcore.fl.checkpoint import config_hash
from cflcore.fl.flat_params import ModelLayout
from cflcore.fl.optim import ClientOptimizer
from cflcore.fl.run import train_run
from cflcore.fl.trainers import LoopTrainer, VmapTrainer, derive_seed
from cflcore.models import build_model
from cflcore.settings import RunSettings
from conftest import REPO
from engine_runs import cpu_train_spec

CPU = torch.device("cpu")
SGD = ClientOptimizer("sgd", 0.05, momentum=0.9, weight_decay=1e-3)


def _model(name, shape, n_classes, kw):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        return build_model(name, shape[0], shape[1:], n_classes, **kw)


@pytest.mark.parametrize("form", ["loop", "unfold"])
@pytest.mark.parametrize("name,kw,sizes,shape", [
    ("tinyvgg", {}, [40, 33, 17], (1, 8, 8)),                                              # unequal sizes
    ("ocfl-cnn", {}, [20, 13], (1, 8, 8)),                                                 # 5x5, dropout masks
    ("resnet34", {"width": 4}, [20, 13], (1, 16, 16)),                                     # BatchNorm, stride 2, 1x1
    ("mobilenetv1", {"width_mult": 0.125, "dropout": 0.2}, [16, 13], (1, 32, 32)),        # depthwise (groups > 1)
])
def test_a_conv_form_agrees_with_the_loop_trainer_in_float64(monkeypatch, form, name, kw, sizes, shape):
    calls = {"forward": 0, "backward": 0}
    forward, backward = client_conv.ClientConv2d.vmap, client_conv.ClientConv2dBackward.vmap

    def counted(key, rule):
        def run(*args):
            calls[key] += 1
            return rule(*args)
        return staticmethod(run)

    monkeypatch.setattr(client_conv.ClientConv2d, "vmap", counted("forward", forward))
    monkeypatch.setattr(client_conv.ClientConv2dBackward, "vmap", counted("backward", backward))
    fed = synthetic_federated(n_clients=len(sizes), n_train=sizes, shape=shape)
    layout = ModelLayout.of(_model(name, shape, fed.n_classes, kw))
    start = layout.flatten(_model(name, shape, fed.n_classes, kw)).double()
    starts = torch.stack([start + 0.01 * i for i in range(len(sizes))])
    seeds = [derive_seed(1, i) for i in range(len(sizes))]
    spec = cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=2, precision="fp64")
    a = LoopTrainer(_model(name, shape, fed.n_classes, kw), layout, spec, CPU).train(starts, fed.clients, seeds)
    vmap_spec = cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=2, precision="fp64", conv_form=form)
    b = VmapTrainer(_model(name, shape, fed.n_classes, kw), layout, vmap_spec, CPU).train(starts, fed.clients, seeds)
    assert calls["forward"] > 0 and calls["backward"] > 0  # the form's rule ran, not torch's grouped convolution
    assert (a.params - starts).abs().max() > 1e-4
    assert (a.params - b.params).abs().max().item() <= 1e-10
    for la, lb in zip(a.step_losses, b.step_losses):
        np.testing.assert_allclose(la, lb, rtol=0, atol=1e-10)


def test_outside_vmap_the_function_is_a_plain_convolution_with_its_gradient():
    x = torch.randn(3, 4, 9, 9, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 4, 3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    conf = ((2, 2), (1, 1), (1, 1), 1, "unfold")
    torch.autograd.gradcheck(lambda *t: client_conv.ClientConv2d.apply(*t, conf), (x, w, b))
    with client_conv.ClientConvMode("loop"):
        ours = torch.nn.functional.conv2d(x, w, b, stride=2, padding=1)
    assert torch.equal(ours, torch.nn.functional.conv2d(x, w, b, stride=2, padding=1))


@pytest.mark.parametrize("engine, message", [
    ({"conv_form": "loop", "precision": "bf16"}, r"^engine\.precision: 'bf16' is not allowed; allowed: fp32, fp64$"),
    ({"conv_form": "unfold", "compile": True}, r"^engine\.compile: True is not allowed; allowed: False$"),
])
def test_a_conv_form_the_function_does_not_serve_is_refused_before_any_job(engine, message):
    cfg = cc.read_config_file(f"{REPO}/config/tiny.yaml")
    cfg["engine"] = {**(cfg.get("engine") or {}), **engine}
    with pytest.raises(ConfigError, match=message) as err:
        cc.validate_config(cfg, plugins=False)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^engine\.conv_form: "):
        cpu_train_spec(optimizer=SGD, batch_size=8, local_epochs=1, **engine)


def test_the_conv_form_is_in_the_runs_identity_and_its_status(tmp_path):
    settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                             "rounds": 2},
                "engine": {"trainer": "vmap"}, "algorithm": {"method": "bnc"}, "device": "cpu"}
    fed = synthetic_federated(n_clients=3, n_train=16, shape=(1, 8, 8))
    unfold = {**settings, "engine": {**settings["engine"], "conv_form": "unfold"}}
    assert config_hash(RunSettings.of(settings), 0, fed) != config_hash(RunSettings.of(unfold), 0, fed)
    hardware = train_run(fed, unfold, 0, tmp_path / "unfold", logging.getLogger("t"), strategy=_bnc())
    assert hardware["conv_form"] == "unfold" and hardware["fc_tf32"] is False  # fc_tf32: no effect on a CPU
    assert train_run(fed, settings, 0, tmp_path / "grouped", logging.getLogger("t"), strategy=_bnc())["conv_form"] == "grouped"


def _bnc():
    from cflcore.strategies import build_strategy

    return build_strategy({"method": "bnc"})


def test_fc_tf32_sets_the_matmul_flag_on_cuda_only_and_changes_no_cpu_byte(tmp_path):
    """``engine.fc_tf32`` (cflcore.fl.device.set_fc_tf32): on a CUDA device the process's matmul TF32 flag, either way;
    on a CPU nothing (the same Parquet bytes), though the setting is in the run's identity."""
    from cflcore.fl.device import set_fc_tf32

    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert set_fc_tf32(CPU, True) is False and torch.backends.cuda.matmul.allow_tf32 is False
        assert set_fc_tf32(torch.device("cuda"), True) is True and torch.backends.cuda.matmul.allow_tf32 is True
        assert set_fc_tf32(torch.device("cuda"), False) is False and torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                             "rounds": 2}, "engine": {}, "algorithm": {"method": "bnc"}, "device": "cpu"}
    tf32 = {**settings, "engine": {"fc_tf32": True}}
    fed = synthetic_federated(n_clients=3, n_train=16, shape=(1, 8, 8))
    assert config_hash(RunSettings.of(settings), 0, fed) != config_hash(RunSettings.of(tf32), 0, fed)
    for name, s in (("ieee", settings), ("tf32", tf32)):
        train_run(fed, s, 0, tmp_path / name, logging.getLogger("t"), strategy=_bnc())
    for table in ("history.parquet", "gram.parquet"):  # server.parquet holds each round's seconds
        assert (tmp_path / "ieee" / table).read_bytes() == (tmp_path / "tf32" / table).read_bytes()
