"""TinyVGG (CNN Explainer; the Tiny-VGG-inspired network of 000 §4.2): the CPU default."""
from __future__ import annotations

from torch import nn

from . import MODELS


def _block(c_in: int, c_out: int) -> nn.Sequential:
    """conv3x3 -> ReLU -> conv3x3 -> ReLU -> maxpool2, computed as ... -> maxpool2 -> ReLU.

    ReLU is monotone, so max(relu(a), relu(b)) = relu(max(a, b)) bit for bit, and the gradients agree too
    (a window whose maximum is <= 0 gets zero gradient either way). Pooling first runs the second ReLU,
    forward and backward, on a quarter of the elements (benchmarks/round_speed.py)."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU(),
        nn.Conv2d(c_out, c_out, 3, padding=1), nn.MaxPool2d(2),
        nn.ReLU(),
    )


class TinyVGG(nn.Module):
    """Two blocks [conv3x3 -> ReLU -> conv3x3 -> ReLU -> maxpool2] (see ``_block``), then one linear classifier.
    Padding 1 keeps the side, so 8x8 inputs (digits) end at 2x2 and 28x28 at 7x7."""

    explain_layer = "block2.2"

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int, hidden: int = 10):
        super().__init__()
        h, w = image_size
        self.block1 = _block(in_channels, hidden)
        self.block2 = _block(hidden, hidden)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(hidden * (h // 4) * (w // 4), n_classes))

    def forward(self, x):
        return self.classifier(self.block2(self.block1(x)))


@MODELS.register("tinyvgg")
def build_tinyvgg(in_channels: int, image_size: tuple[int, int], n_classes: int, hidden: int = 10) -> nn.Module:
    return TinyVGG(in_channels, image_size, n_classes, hidden)
