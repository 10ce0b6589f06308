"""MobileNetV2 (torchvision; the Louvain CFL (002) network) adapted to small images."""
from __future__ import annotations

from torch import nn

from . import MODELS
from ._layers import GeneratorDropout


@MODELS.register("mobilenetv2")
def build_mobilenetv2(in_channels: int, image_size: tuple[int, int], n_classes: int, width_mult: float = 1.0,
                      dropout: float = 0.2) -> nn.Module:
    """torchvision's MobileNetV2 with: a stride-1 stem taking ``in_channels`` for images below 64 px (the
    usual CIFAR adaptation; total stride 16 instead of 32), ``n_classes`` outputs, and the classifier's
    dropout replaced by :class:`GeneratorDropout` (explicit-generator masks)."""
    from torchvision.models import mobilenet_v2  # lazy: importing torchvision costs ~2 s per job

    model = mobilenet_v2(weights=None, num_classes=n_classes, width_mult=width_mult, dropout=dropout)
    stem = model.features[0][0]
    stride = 1 if min(image_size) < 64 else 2
    model.features[0][0] = nn.Conv2d(in_channels, stem.out_channels, 3, stride, 1, bias=False)
    nn.init.kaiming_normal_(model.features[0][0].weight, mode="fan_out")
    model.classifier[0] = GeneratorDropout(dropout)
    model.explain_layer = f"features.{len(model.features) - 1}.0"
    return model
