"""IFCA's MNIST network (Ghosh et al. 2020; jichan3751/ifca): one hidden layer of ReLU units, no convolution.

Checked against the authors' code (jichan3751/ifca, ``mnist/train_cluster_mnist.py`` lines 521-533, class
``SimpleLinear``): ``fc1 = Linear(28*28, h1)``, ``fc2 = Linear(h1, 10)``, ``relu(fc1(x))`` then ``fc2``, the image
flattened first (``x.view(-1, 28 * 28)``); ``mnist/config.json`` line 7 sets ``"h1": 200``, so 784-200-10, the
default here. The layers keep the authors' names (``fc1``, ``fc2``) and torch's default ``nn.Linear`` initialisation,
as theirs. The authors' ``forward`` ends in ``log_softmax`` (line 533) and their loss is ``CrossEntropyLoss`` on it
(line 188), which applies log-softmax again; log-softmax is idempotent (its log-sum-exp of log-probabilities is 0), so
the loss and the predictions equal those of the raw logits this network returns, which every stage of this project
expects. The flattened size is ``C·H·W`` of the dataset, so the network runs on any image size.

No convolution, so ``explain_layer`` is None: the layer attributions (Grad-CAM, HiResCAM) refuse it in one line
(cflcore.explain.attribution.default_layer_name) and pixel attributions (saliency, integrated gradients) run.
"""
from __future__ import annotations

from torch import nn

from . import MODELS

HIDDEN_UNITS = 200
"""``h1`` of the authors' ``mnist/config.json`` (line 7)."""


class OneHiddenLayerMlp(nn.Module):
    """Flatten, ``fc1`` C·H·W -> hidden, ReLU, ``fc2`` hidden -> classes (logits)."""

    explain_layer = None  # no convolution: pixel attributions only

    def __init__(self, in_channels: int, image_size: tuple[int, int], n_classes: int, hidden: int = HIDDEN_UNITS):
        super().__init__()
        h, w = image_size
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(in_channels * h * w, int(hidden))
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(int(hidden), n_classes)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(self.flatten(x))))


@MODELS.register("mlp")
def build_mlp(in_channels: int, image_size: tuple[int, int], n_classes: int, hidden: int = HIDDEN_UNITS) -> nn.Module:
    return OneHiddenLayerMlp(in_channels, image_size, n_classes, hidden)
