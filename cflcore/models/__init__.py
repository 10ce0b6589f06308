"""Networks by name (docs/architecture.md §4): ``MODELS`` registry, ``build_model`` and ``check_compatible``.

Every model module in this package registers a builder ``f(in_channels, image_size, n_classes, **kw)``
with ``@MODELS.register(name)``; the registry imports the package's modules on first lookup, so a new
network is one new file. Each built model has ``explain_layer``: the module path of its last
convolution (Grad-CAM target, 000 §5).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from ..errors import ConfigError
from ..registry import Registry

ModelBuilder = Callable[..., nn.Module]
MODELS: Registry[ModelBuilder] = Registry("model", package="cflcore.models")

# Smallest spatial side each network accepts (pooling / strides would reduce it below 1 pixel otherwise).
MIN_IMAGE_SIZE = {"ocfl-cnn": 1, "tinyvgg": 4, "resnet34": 8, "lenet5": 12, "lenet5-004": 16, "mobilenetv2": 8,
                  "sattler-convnet": 16, "fesem-cnn": 4}


def build_model(name: str, in_channels: int, image_size: int | tuple[int, int], n_classes: int,
                **model_kwargs: Any) -> nn.Module:
    """Instantiate network ``name`` for images (in_channels, H, W) and ``n_classes`` outputs."""
    builder = MODELS.get(name, field="datasets.*.model")
    hw = _hw(image_size)
    model = builder(in_channels=int(in_channels), image_size=hw, n_classes=int(n_classes), **model_kwargs)
    if not hasattr(model, "explain_layer"):
        raise ConfigError(f"model {name!r}: builder did not set explain_layer")
    model.model_name = name  # type: ignore[attr-defined]
    return model


def _hw(image_size: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    if isinstance(image_size, int):
        return (image_size, image_size)
    h, w = image_size
    return (int(h), int(w))


def check_compatible(name: str, shape: tuple[int, int, int], n_classes: int, **model_kwargs: Any) -> None:
    """Raise ConfigError at start-up when network ``name`` cannot run on images of ``shape`` = (C, H, W)
    with ``n_classes`` classes. Builds the model and runs one CPU forward pass of two zero images."""
    MODELS.get(name, field="datasets.*.model")
    if len(shape) != 3 or min(shape) < 1:
        raise ConfigError(f"dataset shape {tuple(shape)}: expected (channels, height, width) with positive sizes")
    c, h, w = (int(s) for s in shape)
    if n_classes < 2:
        raise ConfigError(f"dataset classes: {n_classes} classes; a classifier needs at least 2")
    need = MIN_IMAGE_SIZE.get(name, 1)
    if min(h, w) < need:
        raise ConfigError(f"datasets.*.model: {name!r} needs images of at least {need}x{need}; dataset has {h}x{w}")
    try:
        # a CPU forward of 2 zero images: on the meta device ReLU runs torch's Python reference, whose first call
        # imports torch._dynamo (1.5 s of every train job); fork_rng keeps the global RNG where it was
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            model = build_model(name, c, (h, w), n_classes, **model_kwargs)
            out = model.eval()(torch.zeros(2, c, h, w))
    except (RuntimeError, ValueError) as e:
        raise ConfigError(f"datasets.*.model: {name!r} cannot run on images {c}x{h}x{w} ({str(e).splitlines()[0][:100]})") from None
    if tuple(out.shape) != (2, n_classes):
        raise ConfigError(f"datasets.*.model: {name!r} gives output {tuple(out.shape)} for {n_classes} classes")


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


__all__ = ["MODELS", "build_model", "check_compatible", "count_parameters", "MIN_IMAGE_SIZE"]
