"""The ConvNet of Sattler et al.'s clustered-FL demonstration (felisat/clustered-federated-learning), for SCL's home
check (config/home-scl-offline.yaml).

Checked against the authors' code (felisat/clustered-federated-learning at 23a1c38, ``models.py`` lines 5-18, class
``ConvNet``): ``conv1 = Conv2d(1, 6, 5)``, ``pool = MaxPool2d(2, 2)``, ``conv2 = Conv2d(6, 16, 5)``,
``fc1 = Linear(16 * 4 * 4, 62)``; ``forward`` is pool(relu(conv1)), pool(relu(conv2)), flatten, ``fc1`` (logits, no
activation after it; the loss is ``CrossEntropyLoss``, ``fl_devices.py`` line 17). The layers keep the authors' names
and torch's default initialisation, as theirs.

Adapted, and only here: the authors' network has one input channel (line 8) and 62 outputs (line 11, EMNIST
``byclass``'s 62 classes, the notebook's ``datasets.EMNIST(..., split="byclass")``); this one takes the dataset's
channels and classes: on MNIST-5k 1 channel (the authors' own) and 10 classes (not 62). The flattened size is
16 · h' · w' with h' = ((H - 4) // 2 - 4) // 2, which is the authors' 16 * 4 * 4 on 28 x 28 images.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from . import MODELS


def _pooled(side: int) -> int:
    """A side after conv 5 (no padding), pool 2, conv 5, pool 2: 28 -> 4, 16 -> 1."""
    return ((side - 4) // 2 - 4) // 2


class SattlerConvNet(nn.Module):
    """conv1 C->6 (5x5), ReLU, max-pool 2; conv2 6->16 (5x5), ReLU, max-pool 2; fc1 16*h'*w' -> classes (logits)."""

    explain_layer = "conv2"

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int):
        super().__init__()
        h, w = (_pooled(s) for s in image_size)  # at least 1 from 16 x 16 images up (MIN_IMAGE_SIZE)
        self.conv1 = nn.Conv2d(in_channels, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * h * w, n_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc1(x.flatten(1))


@MODELS.register("sattler-convnet")
def build_sattler_convnet(in_channels: int, image_size: tuple[int, int], n_classes: int) -> nn.Module:
    return SattlerConvNet(in_channels, image_size, n_classes)
