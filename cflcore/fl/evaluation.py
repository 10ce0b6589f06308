"""Evaluation of flat models: classification metrics identical to scikit-learn's, batched inference,
and the ``evaluate(models, clients)`` training-loss function handed to IFCA-style strategies."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .flat_params import ModelLayout


@dataclass(frozen=True)
class Scores:
    loss: float
    acc: float
    f1: float
    bacc: float


def confusion(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> np.ndarray:
    return np.bincount(np.asarray(y_true) * n_classes + np.asarray(y_pred), minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def scores_from_confusion(cm: np.ndarray, loss: float) -> Scores:
    """Accuracy, macro F1 and balanced accuracy as sklearn computes them:
    * f1_score(average="macro"): mean over labels present in y_true or y_pred of 2tp/(2tp+fp+fn);
    * balanced_accuracy_score: mean recall over classes present in y_true."""
    tp = np.diag(cm).astype(np.float64)
    support = cm.sum(axis=1).astype(np.float64)
    predicted = cm.sum(axis=0).astype(np.float64)
    total = cm.sum()
    acc = float(tp.sum() / total) if total else float("nan")
    present = (support + predicted) > 0
    denom = support + predicted  # = 2tp + fp + fn
    f1 = float(np.mean(np.where(denom[present] > 0, 2 * tp[present] / np.maximum(denom[present], 1), 0.0))) if present.any() else 0.0
    has_true = support > 0
    bacc = float(np.mean(tp[has_true] / support[has_true])) if has_true.any() else float("nan")
    return Scores(float(loss), acc, f1, bacc)


CPU_EVAL_BATCH, GPU_EVAL_BATCH = 64, 1024


def default_eval_batch(device: torch.device) -> int:
    """Inference batch size: 64 on CPU, 1024 elsewhere. On CPU the activations of a small batch stay in the
    core's L2 cache (tinyvgg at 28x28: 64 x 10 x 28 x 28 fp32 = 2 MB): one round's evaluation ran 1.3-1.5x
    faster than with 1024 (benchmarks/round_speed.py docstring; ablation row "- eval batch 64 (1024)"), and eval-mode outputs do
    not depend on the batch size in fp32 (each sample's logits are bit-identical; tests/fl/test_trainers.py). In bf16 on
    a CPU with AMX, oneDNN's bf16 matrix product may sum in another order for another batch size (1.2e-6 relative
    in the losses, same predictions)."""
    return CPU_EVAL_BATCH if torch.device(device).type == "cpu" else GPU_EVAL_BATCH


class Evaluator:
    """A separate eval-mode copy of the network that flat vectors are loaded into (the trainer's copy is untouched).
    ``batch_size`` None = :func:`default_eval_batch` of the device."""

    def __init__(self, model: nn.Module, model_layout: ModelLayout, device: torch.device, dtype: torch.dtype,
                 batch_size: int | None = None, bf16: bool = False, channels_last: bool = False):
        self.model = model.to(device=device, dtype=dtype).eval()
        if channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        if batch_size is None:
            batch_size = default_eval_batch(device)
        self.model_layout, self.device, self.dtype, self.batch_size = model_layout, device, dtype, int(batch_size)
        self.bf16, self.channels_last = bf16, channels_last
        self.n_orchestrator_calls = 0

    @torch.no_grad()
    def predict(self, vector: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(predicted labels, per-sample cross-entropy) of model ``vector`` on (x, y), in batches."""
        self.model_layout.load(self.model, vector)
        preds, losses = [], []
        for lo in range(0, len(y), self.batch_size):
            xb = x[lo:lo + self.batch_size].to(device=self.device, dtype=self.dtype)
            if self.channels_last and xb.dim() == 4:
                xb = xb.contiguous(memory_format=torch.channels_last)
            yb = y[lo:lo + self.batch_size].to(self.device)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                logits = self.model(xb).float() if self.bf16 else self.model(xb)
            preds.append(logits.argmax(dim=1))
            losses.append(F.cross_entropy(logits, yb, reduction="none").to(torch.float64))
        if not preds:
            return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.float64)
        return torch.cat(preds).cpu(), torch.cat(losses).cpu()

    def scores(self, vector: torch.Tensor, x: torch.Tensor, y: torch.Tensor, n_classes: int) -> Scores:
        pred, loss = self.predict(vector, x, y)
        return scores_from_confusion(confusion(y.cpu().numpy(), pred.numpy(), n_classes), float(loss.mean()) if len(loss) else float("nan"))

    def grouped_scores(self, vector: torch.Tensor, xs: list[torch.Tensor], ys: list[torch.Tensor], n_classes: int) -> list[Scores]:
        """Scores of one model on several clients' sets in one batched pass (sets concatenated)."""
        y_all = torch.cat(ys)
        pred, loss = self.predict(vector, torch.cat(xs), y_all)
        labels = y_all.cpu().numpy()  # one copy to the host for every client, not one a client
        out, lo = [], 0
        for y in ys:
            hi = lo + len(y)
            cm = confusion(labels[lo:hi], pred[lo:hi].numpy(), n_classes)
            out.append(scores_from_confusion(cm, float(loss[lo:hi].mean()) if hi > lo else float("nan")))
            lo = hi
        return out

    def orchestrator_scores(self, vector: torch.Tensor, x: torch.Tensor, y: torch.Tensor, n_classes: int) -> Scores:
        """Scores on the orchestrator test set; counted, so tests can check it runs once per distinct model."""
        self.n_orchestrator_calls += 1
        return self.scores(vector, x, y, n_classes)

    def mean_losses(self, vector: torch.Tensor, x: torch.Tensor, y: torch.Tensor, owner: torch.Tensor, n_owners: int) -> np.ndarray:
        """Mean per-sample loss of ``vector`` for each owner (client) over concatenated data: one pass."""
        _, loss = self.predict(vector, x, y)
        sums = torch.zeros(n_owners, dtype=torch.float64).index_add_(0, owner, loss)
        counts = torch.bincount(owner, minlength=n_owners).to(torch.float64)
        return (sums / counts).numpy()
