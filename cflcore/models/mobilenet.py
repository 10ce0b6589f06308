"""MobileNet v1 (Howard et al. 2017, the network of Louvain CFL, 002 §V-A) and MobileNetV2 (torchvision),
adapted to small images."""
from __future__ import annotations

import types

import torch
from torch import nn

from . import MODELS
from ._layers import GeneratorDropout, GlobalAvgPool, global_avg_pool


@MODELS.register("mobilenetv2")
def build_mobilenetv2(in_channels: int, image_size: tuple[int, int], n_classes: int, width_mult: float = 1.0,
                      dropout: float = 0.2) -> nn.Module:
    """torchvision's MobileNetV2 with: a stride-1 stem taking ``in_channels`` for images below 64 px (the
    usual CIFAR adaptation; total stride 16 instead of 32), ``n_classes`` outputs, and the classifier's
    dropout replaced by :class:`GeneratorDropout` (explicit-generator masks), and the global pool by
    :func:`global_avg_pool` (deterministic on CUDA)."""
    from torchvision.models import mobilenet_v2  # lazy: importing torchvision costs ~2 s per job

    model = mobilenet_v2(weights=None, num_classes=n_classes, width_mult=width_mult, dropout=dropout)
    stem = model.features[0][0]
    stride = 1 if min(image_size) < 64 else 2
    model.features[0][0] = nn.Conv2d(in_channels, stem.out_channels, 3, stride, 1, bias=False)
    nn.init.kaiming_normal_(model.features[0][0].weight, mode="fan_out")
    model.classifier[0] = GeneratorDropout(dropout)
    model.explain_layer = f"features.{len(model.features) - 1}.0"
    model.forward = types.MethodType(_mobilenetv2_forward, model)
    return model


def _mobilenetv2_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """torchvision's MobileNetV2.forward with :func:`global_avg_pool` (the same on a CPU) in place of
    ``adaptive_avg_pool2d``, whose CUDA backward has no deterministic kernel (engine.deterministic)."""
    return self.classifier(torch.flatten(global_avg_pool(self.features(x)), 1))


# MobileNet v1 body (Howard et al. 2017, Table 1): (output channels, stride) of the 13 depthwise-separable
# blocks after the 32-channel stem; the last block's stride is 1 (Table 1 prints s2 but keeps 7x7 -> 7x7).
MOBILENET_V1_BLOCKS: tuple[tuple[int, int], ...] = (
    (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
)
MOBILENET_V1_STEM = 32


def scaled(channels: int, width_mult: float) -> int:
    """Howard et al. §3.3: the width multiplier α thins every layer to αM channels (at least 1)."""
    return max(1, int(channels * width_mult))


def _conv_bn_relu(c_in: int, c_out: int, kernel: int, stride: int, groups: int = 1) -> list[nn.Module]:
    """conv (no bias) -> BatchNorm -> ReLU, Howard et al. Fig. 3."""
    return [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True)]


def depthwise_separable(c_in: int, c_out: int, stride: int) -> nn.Sequential:
    """3x3 depthwise conv (one filter per input channel, ``groups=c_in``) -> BN -> ReLU -> 1x1 pointwise conv
    -> BN -> ReLU (Howard et al. §3.1, Fig. 3 right)."""
    return nn.Sequential(*_conv_bn_relu(c_in, c_in, 3, stride, groups=c_in), *_conv_bn_relu(c_in, c_out, 1, 1))


def mobilenet_v1_parameters(in_channels: int, n_classes: int, width_mult: float = 1.0) -> int:
    """Trainable parameters of :func:`build_mobilenetv1`, from Howard et al.'s layer list: stem 3x3 conv
    D_K²·C·M; per block the depthwise D_K²·M plus the pointwise M·N (§3.1); γ and β of every BatchNorm
    (2 per channel); the classifier N·classes + classes. With α = 1 on 224x224x3 ImageNet this is the
    4.2 M of the paper's Table 8."""
    m = scaled(MOBILENET_V1_STEM, width_mult)
    total = 9 * in_channels * m + 2 * m
    for channels, _ in MOBILENET_V1_BLOCKS:
        n = scaled(channels, width_mult)
        total += 9 * m + 2 * m + m * n + 2 * n
        m = n
    return total + m * n_classes + n_classes


class MobileNetV1(nn.Module):
    """Stem conv, the 13 depthwise-separable blocks, global average pooling, dropout, linear classifier."""

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int, width_mult: float = 1.0,
                 dropout: float = 0.0):
        super().__init__()
        stride = 1 if min(image_size) < 64 else 2
        c = scaled(MOBILENET_V1_STEM, width_mult)
        layers: list[nn.Module] = [nn.Sequential(*_conv_bn_relu(in_channels, c, 3, stride))]
        for channels, s in MOBILENET_V1_BLOCKS:
            layers.append(depthwise_separable(c, scaled(channels, width_mult), s))
            c = scaled(channels, width_mult)
        self.features = nn.Sequential(*layers)
        self.pool = GlobalAvgPool()  # AdaptiveAvgPool2d(1), deterministic on CUDA
        self.classifier = nn.Sequential(nn.Flatten(), GeneratorDropout(dropout), nn.Linear(c, n_classes))
        self.explain_layer = f"features.{len(layers) - 1}.3"  # the last pointwise conv
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)))


@MODELS.register("mobilenetv1")
def build_mobilenetv1(in_channels: int, image_size: tuple[int, int], n_classes: int, width_mult: float = 1.0,
                      dropout: float = 0.0) -> nn.Module:
    """MobileNet v1 (Howard et al. 2017; 002 §V-A trains it on CIFAR-10) with width multiplier ``width_mult``
    (α, §3.3) and ``in_channels`` inputs. Small images (below 64 px: CIFAR's 32x32, MNIST's 28x28) get a
    stride-1 stem, the usual CIFAR adaptation also used for MobileNetV2 here: total stride 16 instead of 32,
    so 32x32 ends at 2x2 and 28x28 at 2x2 (padding 1 rounds 7 up to 4) before the global average pooling.
    Departure: the paper's ImageNet model has no dropout; ``dropout`` (default 0, Keras' MobileNet uses 1e-3)
    is applied before the classifier with explicit-generator masks (:class:`GeneratorDropout`)."""
    return MobileNetV1(in_channels, image_size, n_classes, float(width_mult), float(dropout))
