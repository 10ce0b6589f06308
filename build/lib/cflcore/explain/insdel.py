"""Insertion and deletion curves and their AUC (Petsiuk et al. 2018, RISE; 000 §5.1).

Pixels are ranked by attribution (summed over channels), most important first. *Deletion* starts
from the image and replaces ``step`` pixels at a time by the substrate; *insertion* starts from the
substrate and copies ``step`` pixels at a time from the image. After every step the softmax
probability of the target class is recorded; there are ceil(H·W / step) steps (000 §5.1) and so
ceil(H·W / step) + 1 points, at x = (pixels changed) / (H·W) ∈ [0, 1]. AUC is the trapezoid rule
over x. The substrate is zeros (the authors' black images) or a Gaussian-blurred copy (RISE's
insertion substrate).

Batched: for a batch of B images, all (image, step) pairs are run through the model in chunks. The
mask of step k for image b is ``rank[b, p] < n_k`` (rank = position of pixel p in b's ordering,
n_k = pixels changed after k steps): one comparison builds the masks of every step at once
(the cumulative index trick), so no Python loop runs over images or steps.
:func:`insertion_deletion_per_image` is the per-image, per-step reference loop (RISE's ``single_run``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..errors import ConfigError

SUBSTRATES: tuple[str, ...] = ("zeros", "blur")
BLUR_KERNEL, BLUR_SIGMA = 11, 5.0  # RISE's insertion substrate: gkern(klen=11, nsig=5)
# Images per forward pass (insertion and deletion together). 64, not 512: on one CPU thread stages.explain of
# 3 default-study runs took 2.3-2.6 s CPU at 32-128 vs 4.4-4.7 s at 512 (AMD EPYC, 1 MiB L2 per core: a
# TinyVGG's activations for 64 28x28 images stay in L2). All 42 runs' outputs were bit-identical to 512's.
DEFAULT_FORWARD_BATCH = 64


@dataclass(frozen=True)
class InsDelCurves:
    """Curves of B images: probabilities (B, K+1) at fractions ``x`` (K+1,), and their AUCs (B,)."""

    x: torch.Tensor
    insertion: torch.Tensor
    deletion: torch.Tensor
    insertion_auc: torch.Tensor
    deletion_auc: torch.Tensor


def check_substrate_name(name: str, field: str = "explain.substrate") -> str:
    if name not in SUBSTRATES:
        raise ConfigError(f"{field}: unknown substrate {name!r}; allowed: {', '.join(SUBSTRATES)}")
    return name


def make_substrate(x: torch.Tensor, name: str = "zeros") -> torch.Tensor:
    """The image every pixel is removed to / inserted from: zeros, or a Gaussian blur of ``x``."""
    check_substrate_name(name)
    if name == "zeros":
        return torch.zeros_like(x)
    kernel = min(BLUR_KERNEL, 2 * (min(x.shape[-2:]) // 2) - 1)  # odd and no larger than the image
    import torchvision.transforms.functional as TF  # lazy: torchvision's import costs ~2 s

    return TF.gaussian_blur(x, [kernel, kernel], [BLUR_SIGMA, BLUR_SIGMA])


def step_pixel_counts(n_pixels: int, step: int) -> torch.Tensor:
    """Pixels changed after each of the ceil(n_pixels / step) steps, starting at 0 (000 §5.1)."""
    if step < 1:
        raise ConfigError(f"explain.step: {step} must be a positive number of pixels")
    n_steps = math.ceil(n_pixels / step)
    return (torch.arange(n_steps + 1, dtype=torch.long) * step).clamp(max=n_pixels)


def pixel_order(attribution: torch.Tensor) -> torch.Tensor:
    """(B, H·W) pixel indices, most important first; ties keep raster order (stable sort) so results are deterministic."""
    return torch.argsort(attribution.flatten(1), dim=1, descending=True, stable=True)


def pixel_ranks(attribution: torch.Tensor) -> torch.Tensor:
    """(B, H·W) rank of every pixel in its image's ordering (the inverse permutation of :func:`pixel_order`)."""
    order = pixel_order(attribution)
    positions = torch.arange(order.shape[1], device=order.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, positions)


def trapezoid_auc(probabilities: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Area under each row of ``probabilities`` over ``x`` by the trapezoid rule."""
    return torch.trapezoid(probabilities.double(), x.double().to(probabilities.device), dim=-1)


@torch.inference_mode()
def target_probabilities(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Softmax probability (computed in float64) of each image's target class."""
    return torch.softmax(model(x).double(), dim=-1).gather(1, target.view(-1, 1)).squeeze(1)


def _is_channels_last(model: nn.Module) -> bool:
    weight = next((p for p in model.parameters() if p.dim() == 4 and p.shape[1] > 1), None)
    return weight is not None and weight.is_contiguous(memory_format=torch.channels_last)


def to_channels_last(model: nn.Module) -> nn.Module:
    """Convolution weights in channels-last layout (in place; values unchanged): about 2x faster batched
    CPU convolution for the narrow networks here (measured, benchmarks/explain_speed.py)."""
    return model.to(memory_format=torch.channels_last)


def _check_shapes(x: torch.Tensor, attribution: torch.Tensor, target: torch.Tensor) -> None:
    if x.dim() != 4 or attribution.shape != (x.shape[0], *x.shape[-2:]) or target.shape != (x.shape[0],):
        raise ValueError(f"expected x (B,C,H,W), attribution (B,H,W), target (B,); got "
                         f"{tuple(x.shape)}, {tuple(attribution.shape)}, {tuple(target.shape)}")


@torch.inference_mode()
def insertion_deletion(model: nn.Module, x: torch.Tensor, attribution: torch.Tensor, target: torch.Tensor,
                       step: int, substrate: str = "zeros",
                       forward_batch: int = DEFAULT_FORWARD_BATCH) -> InsDelCurves:
    """Insertion and deletion curves of a whole batch, all (image, step) pairs batched (see module doc)."""
    _check_shapes(x, attribution, target)
    device = x.device
    b, c, h, w = x.shape
    base = make_substrate(x, substrate)
    ranks = pixel_ranks(attribution.to(device))                     # (B, N)
    counts = step_pixel_counts(h * w, step).to(device)              # (K+1,)
    n_points = counts.numel()
    pair_image = torch.arange(b, device=device).repeat_interleave(n_points)
    pair_count = counts.repeat(b)
    probs = torch.empty(2, b * n_points, device=device, dtype=torch.float64)
    chunk = max(1, forward_batch // 2)                               # insertion + deletion share one pass
    layout = torch.channels_last if c > 1 or _is_channels_last(model) else torch.contiguous_format
    for start in range(0, b * n_points, chunk):
        img, cnt = pair_image[start:start + chunk], pair_count[start:start + chunk]
        changed = (ranks[img] < cnt[:, None]).view(-1, 1, h, w)      # the masks of every step at once
        inserted = torch.where(changed, x[img], base[img])
        deleted = torch.where(changed, base[img], x[img])
        both = torch.cat([inserted, deleted]).contiguous(memory_format=layout)
        p = target_probabilities(model, both, target[img].repeat(2))
        probs[:, start:start + img.numel()] = p.view(2, -1)
    insertion, deletion = probs.view(2, b, n_points).unbind(0)
    frac = counts.double() / (h * w)
    return InsDelCurves(frac, insertion, deletion, trapezoid_auc(insertion, frac), trapezoid_auc(deletion, frac))


@torch.inference_mode()
def insertion_deletion_per_image(model: nn.Module, x: torch.Tensor, attribution: torch.Tensor,
                                 target: torch.Tensor, step: int, substrate: str = "zeros") -> InsDelCurves:
    """Reference: one image and one step per forward pass, pixels copied in place (RISE ``single_run``)."""
    _check_shapes(x, attribution, target)
    b, c, h, w = x.shape
    base = make_substrate(x, substrate)
    order = pixel_order(attribution.to(x.device))
    counts = step_pixel_counts(h * w, step)
    curves = torch.empty(2, b, counts.numel(), device=x.device, dtype=torch.float64)
    for i in range(b):
        inserting, deleting = base[i:i + 1].clone().flatten(2), x[i:i + 1].clone().flatten(2)
        source, sink = x[i:i + 1].flatten(2), base[i:i + 1].flatten(2)
        for k in range(counts.numel()):
            curves[0, i, k] = target_probabilities(model, inserting.view(1, c, h, w), target[i:i + 1])[0]
            curves[1, i, k] = target_probabilities(model, deleting.view(1, c, h, w), target[i:i + 1])[0]
            if k + 1 < counts.numel():
                pix = order[i, counts[k]:counts[k + 1]]
                inserting[..., pix] = source[..., pix]
                deleting[..., pix] = sink[..., pix]
    frac = counts.double() / (h * w)
    return InsDelCurves(frac, curves[0], curves[1], trapezoid_auc(curves[0], frac), trapezoid_auc(curves[1], frac))
