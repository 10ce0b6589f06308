"""The CNN of FeSEM's authors' code (anonymousgit2020/fedsem, LEAF's FEMNIST CNN with a 248-unit dense layer), for
FeSEM's home check (config/home-fesem-offline.yaml).

Checked against the authors' code (anonymousgit2020/fedsem at b8ad277, ``models/femnist/cnn.py`` lines 17-41): the
28 x 28 features reshaped to one channel (line 20); ``conv2d`` 32 filters 5 x 5, padding "same", ReLU (lines 21-26);
``max_pooling2d`` 2, stride 2 (line 27); ``conv2d`` 64 filters 5 x 5, "same", ReLU (lines 28-33); max-pool 2 (line
34); flatten to 7 * 7 * 64 (line 35); ``dense`` 248 units, ReLU (line 36); ``dense`` to the classes (line 37, logits;
the loss is ``sparse_softmax_cross_entropy``, line 42). FeSEM's clustering reads the last layer's kernel
(``dense_1/kernel``, ``models/mh_constants.py`` lines 2 and 10: 248 x 62).

Adapted, and only here: the authors' network has 62 outputs (``models/baseline_constants.py`` line 23, FEMNIST's 62
classes); this one takes the dataset's channels and classes: on MNIST-5k 1 channel (the authors' own) and 10 classes.
The initialisation is torch's default for each layer, not TensorFlow's (glorot-uniform kernels, zero biases): the
layers are the authors', the random numbers are not. The flattened size is 64 · (H // 4) · (W // 4), the authors'
7 * 7 * 64 on 28 x 28 images.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from . import MODELS

HIDDEN = 248
"""The dense layer's units (models/femnist/cnn.py line 36; mh_constants.py line 2: the clustered kernel's rows)."""


class FesemCNN(nn.Module):
    """conv1 C->32 (5x5, same), ReLU, max-pool 2; conv2 32->64 (5x5, same), ReLU, max-pool 2; dense 64*h*w -> 248,
    ReLU; dense_1 248 -> classes (logits)."""

    explain_layer = "conv2"

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int):
        super().__init__()
        h, w = (s // 4 for s in image_size)  # at least 1 from 4 x 4 images up (MIN_IMAGE_SIZE)
        self.conv1 = nn.Conv2d(in_channels, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.pool = nn.MaxPool2d(2, 2)
        self.dense = nn.Linear(64 * h * w, HIDDEN)
        self.dense_1 = nn.Linear(HIDDEN, n_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.dense_1(F.relu(self.dense(x.flatten(1))))


@MODELS.register("fesem-cnn")
def build_fesem_cnn(in_channels: int, image_size: tuple[int, int], n_classes: int) -> nn.Module:
    return FesemCNN(in_channels, image_size, n_classes)
