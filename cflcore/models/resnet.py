"""CIFAR-style ResNet34 (He et al. 2016; 000 §4.2): 3x3 stride-1 stem, no max-pool, BatchNorm."""
from __future__ import annotations

from torch import nn

from . import MODELS
from ._layers import GlobalAvgPool


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU()
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    explain_layer = "layer4.2.conv2"

    def __init__(self, blocks: tuple[int, int, int, int], in_channels: int, n_classes: int, width: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        layers, c_in = [], width
        for i, n in enumerate(blocks):
            c_out = width * 2 ** i
            stride = 1 if i == 0 else 2
            mods = [BasicBlock(c_in, c_out, stride)] + [BasicBlock(c_out, c_out, 1) for _ in range(n - 1)]
            layers.append(nn.Sequential(*mods))
            c_in = c_out
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.pool = GlobalAvgPool()  # AdaptiveAvgPool2d(1), deterministic on CUDA
        self.fc = nn.Linear(c_in, n_classes)
        self.explain_layer = f"layer4.{blocks[3] - 1}.conv2"

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.pool(x).flatten(1))


@MODELS.register("resnet34")
def build_resnet34(in_channels: int, image_size: tuple[int, int], n_classes: int, width: int = 64) -> nn.Module:
    """``width`` (default 64, the standard) is exposed so tests can build a tiny ResNet34."""
    return ResNet((3, 4, 6, 3), in_channels, n_classes, width)
