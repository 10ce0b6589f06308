"""Saliency maps through captum, chosen by name from an allowlist (000 §5.1; docs/architecture.md §9).

Every attribution returns one map per image, shape (B, H, W): the captum attribution summed over
the input channels (the CAM methods over the layer's channels). These maps rank pixels for the
insertion/deletion metrics (:mod:`cflcore.explain.insdel`).

Grad-CAM vs HiResCAM. Grad-CAM (Selvaraju et al. 2017; 000 §5) weights each channel A_k of the layer
by α_k = mean_ij ∂y_c/∂A_k(i, j). That average is only faithful when the head pools globally (CAM's
setting). The networks here end in Flatten → Linear, where ∂y_c/∂A_k(i, j) = W_c[k, i, j] changes
sign over positions: α_k can be negative for a channel that adds evidence exactly where the digit is,
and the map then ranks the digit *last* (measured on the default study: OCFL-HDB cluster models had
α_k < 0 for 82-88 % of channels, Spearman(Grad-CAM, exact contribution) ≈ 0, insertion 0.29-0.54 <
random 0.65-0.74 < deletion 0.74-0.83). HiResCAM (Draelos & Carin 2020) keeps the gradient element-wise,
Σ_k ∂y_c/∂A_k ⊙ A_k (captum ``LayerGradientXActivation`` summed over channels); for a linear head it is
exactly each position's contribution to the logit, so it is the default here (a departure from the
paper, noted in config/config.yaml); ``gradcam`` remains selectable.
"""
from __future__ import annotations

from typing import Callable

import torch
from captum.attr import IntegratedGradients, LayerAttribution, LayerGradCam, LayerGradientXActivation, Saliency
from torch import nn

from ..errors import ConfigError

ATTRIBUTIONS: tuple[str, ...] = ("hirescam", "gradcam", "saliency", "integrated_gradients")
CAM_ATTRIBUTIONS: frozenset[str] = frozenset({"hirescam", "gradcam"})  # need a layer
IG_STEPS = 32  # integral approximation points (captum's default is 50; 32 keeps CPU runs short)


def check_attribution_name(name: str, field: str = "explain.attribution") -> str:
    """Return ``name`` if it is an allowed attribution, else a one-line ConfigError listing the allowed."""
    if name not in ATTRIBUTIONS:
        raise ConfigError(f"{field}: unknown attribution {name!r}; allowed: {', '.join(ATTRIBUTIONS)}")
    return name


def conv_layer_names(model: nn.Module) -> list[str]:
    """Module paths of every 2-D convolution, in registration order."""
    return [name for name, mod in model.named_modules() if isinstance(mod, nn.Conv2d)]


def default_layer_name(model: nn.Module) -> str:
    """The model's ``explain_layer`` (its last convolution, cflcore.models contract), else its last Conv2d."""
    name = getattr(model, "explain_layer", None)
    if name:
        return str(name)
    convs = conv_layer_names(model)
    if not convs:
        raise ConfigError(f"explain.attribution: hirescam/gradcam need a convolution layer; {type(model).__name__} has none; "
                          f"allowed without one: saliency, integrated_gradients")
    return convs[-1]


def resolve_layer(model: nn.Module, layer_name: str | None, field: str = "explain.layer") -> nn.Module:
    """The sub-module at ``layer_name`` (None → :func:`default_layer_name`); unknown → ConfigError naming the conv layers."""
    name = default_layer_name(model) if layer_name is None else layer_name
    modules = dict(model.named_modules())
    if name not in modules or name == "":
        raise ConfigError(f"{field}: {type(model).__name__} has no layer {name!r}; "
                          f"conv layers: {', '.join(conv_layer_names(model)) or '(none)'}")
    return modules[name]


def gradcam_maps(model: nn.Module, x: torch.Tensor, target: torch.Tensor, layer: nn.Module,
                 interpolate_mode: str = "bilinear") -> torch.Tensor:
    """Grad-CAM (captum LayerGradCam) upsampled to the image size with LayerAttribution.interpolate.

    ReLU is *not* applied here: it is monotone, so the ranking of the positive evidence is the same as
    the original Grad-CAM's, while the ties it would create among non-positive pixels are broken by
    their (negative) evidence. Plots clip at zero (see :func:`cflcore.explain.tables.display_map`). See the module
    doc for why Grad-CAM's averaged gradients can invert the ranking on a Flatten → Linear head."""
    cam = LayerGradCam(model, layer).attribute(x, target=target, relu_attributions=False)
    cam = LayerAttribution.interpolate(cam, tuple(x.shape[-2:]), interpolate_mode)
    return cam.sum(dim=1)


def hirescam_maps(model: nn.Module, x: torch.Tensor, target: torch.Tensor, layer: nn.Module,
                  interpolate_mode: str = "bilinear") -> torch.Tensor:
    """HiResCAM (Draelos & Carin 2020): Σ_k ∂y_c/∂A_k ⊙ A_k at ``layer`` (captum LayerGradientXActivation),
    upsampled like Grad-CAM. Signed, like :func:`gradcam_maps`: negative evidence is ranked last."""
    cam = LayerGradientXActivation(model, layer).attribute(x, target=target).sum(dim=1, keepdim=True)
    cam = LayerAttribution.interpolate(cam, tuple(x.shape[-2:]), interpolate_mode)
    return cam.sum(dim=1)


def saliency_maps(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """|∂p/∂x| (captum Saliency, Simonyan et al.) summed over channels."""
    x = x.detach().requires_grad_(True)
    return Saliency(model).attribute(x, target=target, abs=True).sum(dim=1)


def integrated_gradient_maps(model: nn.Module, x: torch.Tensor, target: torch.Tensor,
                             n_steps: int = IG_STEPS) -> torch.Tensor:
    """Integrated Gradients from a zero baseline (the same black substrate as insertion) summed over channels."""
    ig = IntegratedGradients(model)
    x = x.detach().requires_grad_(True)
    attr = ig.attribute(x, baselines=torch.zeros_like(x), target=target, n_steps=n_steps,
                        internal_batch_size=max(1, x.shape[0]))
    return attr.sum(dim=1)


def make_attributor(model: nn.Module, name: str, layer_name: str | None = None
                    ) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A function ``(x, target) -> maps (B, H, W)`` for the named attribution; validates names up front."""
    check_attribution_name(name)
    if name in CAM_ATTRIBUTIONS:
        layer = resolve_layer(model, layer_name)
        cam = gradcam_maps if name == "gradcam" else hirescam_maps
        return lambda x, t: cam(model, x, t, layer)
    if layer_name is not None:
        resolve_layer(model, layer_name)  # a bad layer name is an error even where it is unused
    if name == "saliency":
        return lambda x, t: saliency_maps(model, x, t)
    return lambda x, t: integrated_gradient_maps(model, x, t)


def attribute(model: nn.Module, x: torch.Tensor, target: torch.Tensor, name: str = "hirescam",
              layer_name: str | None = None) -> torch.Tensor:
    """Attribution maps (B, H, W) of ``model`` for images ``x`` (B, C, H, W) and classes ``target`` (B,)."""
    maps = make_attributor(model, name, layer_name)(x, target)
    return maps.detach()
