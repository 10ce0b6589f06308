"""The transforms a split records per client and the loaded data applies (docs/architecture.md §7): the visual
domains (004 §7.3: clean, Gaussian noise, Gaussian blur; a rotation; greyscale erosion or dilation) and the label swaps
of a concept shift on labels. A split generator decides them when the split is built and writes them in the manifest
(``domains``, ``label_swaps``); cflcore.data.store.load_federated applies them to a client's train and test data, so
every stage that loads the split sees the same images and labels. torch and scipy are imported where an image is
transformed: the split job imports this module for :func:`swapped_histogram` only.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..errors import DataError

if TYPE_CHECKING:
    import torch


def gaussian_noise(images: torch.Tensor, noise_std: float, generator: torch.Generator) -> torch.Tensor:
    """Add N(0, noise_std²) pixel noise (images in [0, 1]) and clip back to [0, 1]."""
    import torch

    noise = torch.randn(images.shape, generator=generator, dtype=images.dtype) * noise_std
    return (images + noise).clamp_(0.0, 1.0)


def gaussian_blur(images: torch.Tensor, blur_sigma: float) -> torch.Tensor:
    """Gaussian blur of every image and channel, σ = ``blur_sigma`` pixels, kernel ±3σ, reflected borders
    (``scipy.ndimage.gaussian_filter``; torchvision's version needs a kernel smaller than the image)."""
    import torch
    from scipy.ndimage import gaussian_filter

    if len(images) == 0:
        return images
    blurred = gaussian_filter(images.numpy(), sigma=(0, 0, blur_sigma, blur_sigma), mode="reflect", truncate=3.0)
    return torch.from_numpy(np.ascontiguousarray(blurred, dtype=np.float32))


def rotate(images: torch.Tensor, angle: int) -> torch.Tensor:
    """Rotate every image by ``angle`` degrees counter-clockwise (as ``np.rot90``): multiples of 90° exactly
    (``torch.rot90``), other angles by ``scipy.ndimage.rotate`` (bilinear, same size, zero fill)."""
    import torch
    from scipy.ndimage import rotate as nd_rotate

    angle = int(angle) % 360
    if angle % 90 == 0 or len(images) == 0:
        return torch.rot90(images, k=angle // 90, dims=(2, 3)).contiguous()
    out = nd_rotate(images.numpy(), angle, axes=(3, 2), reshape=False, order=1, mode="constant", cval=0.0)
    return torch.from_numpy(np.ascontiguousarray(np.clip(out, 0.0, 1.0), dtype=np.float32))


def morphology(images: torch.Tensor, kind: str, size: int) -> torch.Tensor:
    """Greyscale erosion or dilation of every image and channel with a ``size`` × ``size`` square
    (``scipy.ndimage.grey_erosion`` / ``grey_dilation``, reflected borders)."""
    import torch
    from scipy.ndimage import grey_dilation, grey_erosion

    if len(images) == 0:
        return images
    op = grey_erosion if kind == "erode" else grey_dilation
    return torch.from_numpy(np.ascontiguousarray(op(images.numpy(), size=(1, 1, size, size)), dtype=np.float32))


DOMAIN_KINDS = ("clean", "noise", "blur", "rotate", "erode", "dilate")


def apply_domain(images: torch.Tensor, domain: Mapping[str, Any], generator: torch.Generator) -> torch.Tensor:
    """Apply one client's domain record from the manifest (``{"domain": "clean"|"noise"|"blur"|"rotate"|"erode"|
    "dilate", ...}``)."""
    kind = domain.get("domain", "clean")
    if kind == "clean":
        return images
    if kind == "noise":
        return gaussian_noise(images, float(domain["noise_std"]), generator)
    if kind == "blur":
        return gaussian_blur(images, float(domain["blur_sigma"]))
    if kind == "rotate":
        return rotate(images, int(domain["angle"]))
    if kind in ("erode", "dilate"):
        return morphology(images, kind, int(domain["morphology_size"]))
    raise DataError(f"manifest.json: domains: unknown domain {kind!r}; allowed: {', '.join(DOMAIN_KINDS)}")


def swap_labels(labels: np.ndarray, swaps: Sequence[Sequence[int]]) -> np.ndarray:
    """Exchange the labels of every pair [a, b] in ``swaps`` (the ``label-swap`` split's concept shift)."""
    out = labels.copy()
    for a, b in swaps:
        out[labels == a], out[labels == b] = b, a
    return out


def swapped_histogram(histogram: list[int], swaps: Sequence[Sequence[int]] | None) -> list[int]:
    """A client's label histogram as its data shows it once :func:`swap_labels` ran: the counts of every swapped pair
    exchanged."""
    for a, b in swaps or ():
        histogram[a], histogram[b] = histogram[b], histogram[a]
    return histogram
