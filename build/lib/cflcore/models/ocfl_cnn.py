"""The OCFL authors' MNIST/FMNIST network (000 §4.2, published code): three 5x5 convolutions, no pooling."""
from __future__ import annotations

from torch import nn

from . import MODELS
from ._layers import GeneratorDropout


class OcflCnn(nn.Module):
    """conv5x5 1->16->32->32 (padding 2, ReLU, no pooling), FC 32*H*W->1000->250->100->classes, dropout 0.2.
    On 28x28 MNIST: 25088 flattened features, about 25.4M parameters."""

    explain_layer = "features.4"

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int, dropout: float = 0.2):
        super().__init__()
        h, w = image_size
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 5, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(),
            nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(32 * h * w, 1000), nn.ReLU(), GeneratorDropout(dropout),
            nn.Linear(1000, 250), nn.ReLU(), GeneratorDropout(dropout),
            nn.Linear(250, 100), nn.ReLU(), GeneratorDropout(dropout),
            nn.Linear(100, n_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


@MODELS.register("ocfl-cnn")
def build_ocfl_cnn(in_channels: int, image_size: tuple[int, int], n_classes: int, dropout: float = 0.2) -> nn.Module:
    return OcflCnn(in_channels, image_size, n_classes, dropout)
