"""LeNet-5 (LeCun et al. 1998) and the LeNet-5 of 004's experiments, with ReLU and max-pooling.

Checked against 004 App. F ("LeNet5 … a CNN with two convolutional blocks and three dense layers") and the
authors' published code (``datasets/CIFAR100/utils.py``, class ``CNN``): the network 004 trains is not the
6/16-channel original but the LeNet-5 of the federated-learning literature (Hsu et al. 2020, "Federated
visual classification with real-world data distribution", the paper 004 takes Landmarks/iNaturalist from;
Caldarola et al. 2022, the authors' group): conv 5×5 (no padding) C→64, 2×2 max-pool, conv 5×5 64→64,
2×2 max-pool, FC 64·5·5 = 1600 → 384 → 192 → classes, ReLU after each pooled block and hidden layer.
``lenet5-004`` is that network; ``lenet5`` stays the original's sizes (6/16 channels, 120/84 units, first
convolution padded by 2 so 28×28 inputs give the classic 5×5 maps). Both accept ``channels`` / ``hidden``
/ ``padding`` keyword arguments (``model_kwargs``). ReLU then max-pool equals max-pool then ReLU (ReLU is
monotone), so the authors' pool-then-ReLU order is the same function.
"""
from __future__ import annotations

from typing import Sequence

from torch import nn

from . import MODELS


class LeNet5(nn.Module):
    """conv5x5(pad p) C->c1, pool, conv5x5 c1->c2, pool, FC c2*s*s->h1->h2->classes (28x28, p = 2: s = 5)."""

    explain_layer = "features.3"

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int,
                 channels: Sequence[int] = (6, 16), hidden: Sequence[int] = (120, 84), padding: int = 2):
        super().__init__()
        h, w = image_size
        c1, c2 = (int(c) for c in channels)
        h1, h2 = (int(u) for u in hidden)
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 5, padding=padding), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5), nn.ReLU(), nn.MaxPool2d(2),
        )
        fh, fw = ((h + 2 * padding - 4) // 2 - 4) // 2, ((w + 2 * padding - 4) // 2 - 4) // 2
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(c2 * fh * fw, h1), nn.ReLU(), nn.Linear(h1, h2), nn.ReLU(), nn.Linear(h2, n_classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


@MODELS.register("lenet5")
def build_lenet5(in_channels: int, image_size: tuple[int, int], n_classes: int, **kwargs) -> nn.Module:
    return LeNet5(in_channels, image_size, n_classes, **kwargs)


@MODELS.register("lenet5-004")
def build_lenet5_004(in_channels: int, image_size: tuple[int, int], n_classes: int, **kwargs) -> nn.Module:
    """004's LeNet-5 (module doc): 64/64 channels, 384/192 hidden units, unpadded first convolution."""
    return LeNet5(in_channels, image_size, n_classes, **{"channels": (64, 64), "hidden": (384, 192), "padding": 0, **kwargs})
