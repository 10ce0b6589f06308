"""A per-client convolution with its own vmap rule (``engine.conv_form``; docs/gpu.md, "The convolutions").

Under the vmap trainer every client has its own convolution weights, and torch's own batching rule for
``conv2d(x[i], w[i])`` folds the clients into one *grouped* convolution (channels ``clients x C``), which reshapes away
channels-last and which cuDNN runs far below its dense rate (docs/gpu.md). :class:`ClientConv2d` is a
``torch.autograd.Function`` whose ``vmap`` staticmethod runs another form instead, and whose gradient is a second
Function, :class:`ClientConv2dBackward`, with its own ``vmap`` rule, so the backward pass never becomes a grouped
convolution either (a ``torch.library.custom_op`` with ``register_vmap`` is refused under ``grad`` inside ``vmap``
by torch 2.14: its generated autograd Function has no ``setup_context``):

* ``grouped``: torch's own rule (the Function is not used; the bytes of earlier versions; the default);
* ``loop``: one plain convolution per client (``conv2d`` and ``aten.convolution_backward`` on each client's slice);
* ``unfold``: ``unfold`` (im2col) of each client's batch and one batched matrix product against its weights
  (``matmul``; the input gradient through ``fold``); groups > 1 (depthwise) run the loop.

Outside vmap the Functions are a plain ``conv2d`` and its ``aten.convolution_backward``. The vmap trainer routes the
model's ``F.conv2d`` calls here with :class:`ClientConvMode` (a ``TorchFunctionMode``) around its forward. The forms
give the same numbers up to summation order (tests/fl/test_client_conv.py states the tolerance against the loop
trainer).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.modules.utils import _pair
from torch.overrides import TorchFunctionMode

CONV_FORMS = ("grouped", "loop", "unfold")
Conf = tuple  # (stride, padding, dilation, groups, form): the convolution's settings, plain values


def _empty(like: Tensor) -> Tensor:
    return like.new_empty(0)


def _front(t: Tensor | None, dim: int | None, n: int) -> Tensor | None:
    """A vmapped argument with its client dimension first (an unbatched one expanded to ``n`` clients)."""
    if t is None:
        return None
    return t.movedim(dim, 0) if dim is not None else t.expand(n, *t.shape)


def _unfold(x: Tensor, kernel: tuple[int, int], stride, padding, dilation) -> Tensor:
    """(clients, batch, C, H, W) -> (clients, batch, C * kh * kw, L) columns (im2col)."""
    k, n = x.shape[:2]
    cols = F.unfold(x.flatten(0, 1), kernel, dilation=dilation, padding=padding, stride=stride)
    return cols.view(k, n, *cols.shape[1:])


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


class ClientConv2d(torch.autograd.Function):
    """One client's ``F.conv2d``; under vmap (every client its own weights), ``conf``'s form (module docstring); its
    gradient is :class:`ClientConv2dBackward`, which has its own vmap rule too."""

    @staticmethod
    def forward(x: Tensor, weight: Tensor, bias: Tensor | None, conf: Conf) -> Tensor:
        stride, padding, dilation, groups, _ = conf
        return F.conv2d(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, weight, bias, conf = inputs
        ctx.save_for_backward(x, weight)
        ctx.conf, ctx.has_bias = conf, bias is not None

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        mask = (bool(needs[0]), bool(needs[1]), ctx.has_bias and bool(needs[2]))
        gx, gw, gb = ClientConv2dBackward.apply(grad, x, weight, ctx.conf, mask)
        return gx if mask[0] else None, gw if mask[1] else None, gb if mask[2] else None, None

    @staticmethod
    def vmap(info, in_dims, x, weight, bias, conf):
        stride, padding, dilation, groups, form = conf
        n = info.batch_size
        x, weight, bias = _front(x, in_dims[0], n), _front(weight, in_dims[1], n), _front(bias, in_dims[2], n)
        if form == "unfold" and groups == 1:
            k_out, _, kh, kw = weight.shape[1:]
            out = torch.matmul(weight.reshape(n, 1, k_out, -1), _unfold(x, (kh, kw), stride, padding, dilation))
            if bias is not None:  # out: (clients, batch, K, L)
                out = out + bias.view(n, 1, k_out, 1)
            h = _out_size(x.shape[-2], kh, stride[0], padding[0], dilation[0])
            w = _out_size(x.shape[-1], kw, stride[1], padding[1], dilation[1])
            return out.view(n, x.shape[1], k_out, h, w), 0
        return torch.stack([F.conv2d(x[i], weight[i], None if bias is None else bias[i], stride, padding, dilation,
                                     groups) for i in range(n)]), 0


class ClientConv2dBackward(torch.autograd.Function):
    """(input, weight, bias) gradients of one client's convolution (``aten.convolution_backward``), a gradient ``mask``
    leaves out an empty tensor; under vmap, the form's (no second derivative)."""

    @staticmethod
    def forward(grad: Tensor, x: Tensor, weight: Tensor, conf: Conf, mask: tuple[bool, bool, bool]):
        stride, padding, dilation, groups, _ = conf
        out = torch.ops.aten.convolution_backward(grad, x, weight, [weight.shape[0]] if mask[2] else None, stride,
                                                  padding, dilation, False, [0, 0], groups, list(mask))
        return tuple(g if m else _empty(x) for g, m in zip(out, mask))

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("cflcore.fl.client_conv: no second derivative of a client convolution")

    @staticmethod
    def vmap(info, in_dims, grad, x, weight, conf, mask):
        stride, padding, dilation, groups, form = conf
        n = info.batch_size
        grad, x, weight = _front(grad, in_dims[0], n), _front(x, in_dims[1], n), _front(weight, in_dims[2], n)
        if form == "unfold" and groups == 1:
            k_out, _, kh, kw = weight.shape[1:]
            g = grad.flatten(-2)  # (clients, batch, K, L)
            gx = gw = gb = x.new_empty(n, 0)
            if mask[1]:
                cols = _unfold(x, (kh, kw), stride, padding, dilation)
                gw = torch.matmul(g, cols.transpose(-1, -2)).sum(1).view(weight.shape)
            if mask[0]:
                gcols = torch.matmul(weight.reshape(n, 1, k_out, -1).transpose(-1, -2), g)  # (clients, batch, CKK, L)
                gx = F.fold(gcols.flatten(0, 1), x.shape[-2:], (kh, kw), dilation=dilation, padding=padding,
                            stride=stride).view(x.shape)
            if mask[2]:
                gb = grad.sum((1, 3, 4))
            return (gx, gw, gb), (0, 0, 0)
        parts = [ClientConv2dBackward.forward(grad[i], x[i], weight[i], conf, mask) for i in range(n)]
        return tuple(torch.stack(p) for p in zip(*parts)), (0, 0, 0)


class ClientConvMode(TorchFunctionMode):
    """Routes ``F.conv2d`` (what ``nn.Conv2d`` calls) to :class:`ClientConv2d` with ``form``; a string padding
    (``'same'``) keeps torch's own convolution."""

    def __init__(self, form: str):
        super().__init__()
        self.form = form

    def __torch_function__(self, func: Callable, types, args=(), kwargs=None) -> Any:
        kwargs = kwargs or {}
        if func is torch.conv2d:
            bound = dict(zip(("input", "weight", "bias", "stride", "padding", "dilation", "groups"), args), **kwargs)
            padding = bound.get("padding", 0)
            if not isinstance(padding, str):
                conf = (tuple(_pair(bound.get("stride", 1))), tuple(_pair(padding)), tuple(_pair(bound.get("dilation", 1))),
                        int(bound.get("groups", 1)), self.form)
                return ClientConv2d.apply(bound["input"], bound["weight"], bound.get("bias"), conf)
        return func(*args, **kwargs)


def conv_form_context(form: str) -> contextlib.AbstractContextManager:
    """The context the vmap trainer's forward runs in: ``grouped`` none (torch's own rule), else :class:`ClientConvMode`."""
    return contextlib.nullcontext() if form == "grouped" else ClientConvMode(form)
