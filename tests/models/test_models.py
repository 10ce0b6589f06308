"""Models: registry, shapes, parameter counts, explain layers, compatibility checks, seeded dropout."""
import pytest
import torch
from torch import nn

from cflcore.errors import ConfigError
from cflcore.models import MODELS, build_model, check_compatible, count_parameters
from cflcore.models._layers import GeneratorDropout


def test_registry_has_all_models():
    assert {"ocfl-cnn", "tinyvgg", "resnet34", "lenet5", "mobilenetv2", "mobilenetv1"} <= set(MODELS.names())


@pytest.mark.parametrize("name,shape,kw", [
    ("ocfl-cnn", (1, 28, 28), {}), ("tinyvgg", (1, 28, 28), {}), ("tinyvgg", (1, 8, 8), {}),
    ("tinyvgg", (3, 32, 32), {"hidden": 4}), ("resnet34", (1, 28, 28), {"width": 4}), ("resnet34", (3, 32, 32), {"width": 4}),
    ("lenet5", (1, 28, 28), {}), ("lenet5", (3, 32, 32), {}), ("mobilenetv2", (3, 32, 32), {"width_mult": 0.25}),
    ("mobilenetv2", (1, 28, 28), {"width_mult": 0.25}), ("mobilenetv1", (3, 32, 32), {"width_mult": 0.25}),
    ("mobilenetv1", (1, 28, 28), {"width_mult": 0.25}), ("lenet5-004", (3, 32, 32), {}), ("lenet5-004", (1, 28, 28), {}),
    ("lenet5-004", (1, 16, 16), {}),
])
def test_forward_shape_and_explain_layer_is_last_conv(name, shape, kw):
    model = build_model(name, shape[0], shape[1:], 7, **kw).eval()
    with torch.no_grad():
        assert model(torch.rand(2, *shape)).shape == (2, 7)
    layer = model.get_submodule(model.explain_layer)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert isinstance(layer, nn.Conv2d) and layer is convs[-1]


def test_ocfl_cnn_matches_published_size():
    model = build_model("ocfl-cnn", 1, 28, 10)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(25088, 1000), (1000, 250), (250, 100), (100, 10)]
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (1, 16, (5, 5), (2, 2)), (16, 32, (5, 5), (2, 2)), (32, 32, (5, 5), (2, 2))]
    assert not any(isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)) for m in model.modules())
    assert 25_000_000 < count_parameters(model) < 26_000_000


def test_resnet34_is_cifar_style_with_batchnorm():
    model = build_model("resnet34", 3, 32, 10, width=8)
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) > 30
    assert [len(l) for l in (model.layer1, model.layer2, model.layer3, model.layer4)] == [3, 4, 6, 3]


def test_check_compatible_accepts_and_rejects():
    check_compatible("tinyvgg", (1, 8, 8), 10)
    check_compatible("resnet34", (3, 32, 32), 9)
    with pytest.raises(ConfigError, match="lenet5.*12x12"):
        check_compatible("lenet5", (1, 8, 8), 10)
    with pytest.raises(ConfigError, match="unknown model 'vgg99'"):
        check_compatible("vgg99", (1, 28, 28), 10)
    with pytest.raises(ConfigError, match="at least 2"):
        check_compatible("tinyvgg", (1, 28, 28), 1)
    with pytest.raises(ConfigError, match="tinyvgg"):
        check_compatible("tinyvgg", (1, 3, 3), 10)


def test_generator_dropout_uses_no_global_rng_and_is_seeded():
    drop = GeneratorDropout(0.5).train()
    x = torch.ones(4, 100)
    before = torch.random.get_rng_state()
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    drop.mask_source = lambda shape, dtype, device: torch.rand(shape, generator=g1, dtype=dtype)
    a = drop(x)
    drop.mask_source = lambda shape, dtype, device: torch.rand(shape, generator=g2, dtype=dtype)
    b = drop(x)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert torch.equal(a, b)
    assert set(a.unique().tolist()) == {0.0, 2.0}
    assert torch.equal(drop.eval()(x), x)


def test_lenet5_sizes_original_and_004():
    """lenet5 keeps the original's sizes (and its parameter count on 28x28); lenet5-004 is the network of 004's
    authors' code for CIFAR-100: conv 3->64 and 64->64 (5x5, unpadded), FC 1600 -> 384 -> 192 -> 100."""
    shapes = lambda m, kind: [(l.in_channels, l.out_channels, l.padding) if kind is nn.Conv2d  # noqa: E731
                              else (l.in_features, l.out_features) for l in m.modules() if isinstance(l, kind)]
    classic = build_model("lenet5", 1, 28, 10)
    assert shapes(classic, nn.Conv2d) == [(1, 6, (2, 2)), (6, 16, (0, 0))]
    assert shapes(classic, nn.Linear) == [(400, 120), (120, 84), (84, 10)]
    assert count_parameters(classic) == 61706
    fl = build_model("lenet5-004", 3, 32, 100)
    assert shapes(fl, nn.Conv2d) == [(3, 64, (0, 0)), (64, 64, (0, 0))]
    assert shapes(fl, nn.Linear) == [(1600, 384), (384, 192), (192, 100)]
    with pytest.raises(ConfigError, match="lenet5-004.*16x16"):
        check_compatible("lenet5-004", (1, 14, 14), 10)


def test_mlp_is_ifcas_784_200_10_with_the_authors_layer_names():
    """jichan3751/ifca mnist/train_cluster_mnist.py lines 521-533 (SimpleLinear) with h1 200 (mnist/config.json
    line 7): fc1 784 -> 200, ReLU, fc2 200 -> 10; no convolution, so no Grad-CAM layer."""
    from cflcore.explain.attribution import default_layer_name

    model = build_model("mlp", 1, 28, 10)
    assert "mlp" in MODELS.names()
    assert [(n, tuple(p.shape)) for n, p in model.named_parameters()] == [
        ("fc1.weight", (200, 784)), ("fc1.bias", (200,)), ("fc2.weight", (10, 200)), ("fc2.bias", (10,))]
    assert count_parameters(model) == 159_010 and model.explain_layer is None
    with pytest.raises(ConfigError, match="need a convolution layer"):
        default_layer_name(model)


def test_mlp_logits_give_the_authors_loss_and_predictions():
    """The authors' forward ends in log_softmax and their loss, CrossEntropyLoss, applies log-softmax again (lines 188,
    533): idempotent, so the same loss and gradient as the raw logits; a network that returned probabilities (softmax)
    would not be."""
    import torch.nn.functional as F

    model = build_model("mlp", 1, 28, 10)
    x, y = torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))
    logits = model(x)
    assert torch.allclose(F.cross_entropy(F.log_softmax(logits, dim=1), y), F.cross_entropy(logits, y), atol=1e-6)
    assert not torch.allclose(F.cross_entropy(F.softmax(logits, dim=1), y), F.cross_entropy(logits, y), atol=1e-3)
    assert torch.equal(F.log_softmax(logits, dim=1).argmax(1), logits.argmax(1))
