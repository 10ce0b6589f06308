"""LeNet-5 (LeCun et al. 1998), the FedGWC (004) network, with ReLU and max-pooling."""
from __future__ import annotations

from torch import nn

from . import MODELS


class LeNet5(nn.Module):
    """conv5x5(pad 2) C->6, pool, conv5x5 6->16, pool, FC 16*s*s->120->84->classes (28x28: s = 5)."""

    explain_layer = "features.3"

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int):
        super().__init__()
        h, w = image_size
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        )
        fh, fw = (h // 2 - 4) // 2, (w // 2 - 4) // 2
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * fh * fw, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, n_classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


@MODELS.register("lenet5")
def build_lenet5(in_channels: int, image_size: tuple[int, int], n_classes: int) -> nn.Module:
    return LeNet5(in_channels, image_size, n_classes)
