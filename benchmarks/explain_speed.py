"""Insertion+deletion throughput: the batched implementation vs a per-image, per-step loop.

Usage: OMP_NUM_THREADS=1 python benchmarks/explain_speed.py [--quick] [--images N] [--repeats R]

Workload: a TinyVGG (cflcore.models ``tinyvgg`` when it exists, else the local equivalent below),
28×28 greyscale images, step = 28 pixels (29 points per curve), zero substrate, random attributions
(attribution cost is not part of the metric). Both paths run in one process, alternating order,
median of the repeats; the AUCs of both are compared as a correctness check.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

import copy

from cflcore.explain.insdel import insertion_deletion, insertion_deletion_per_image, to_channels_last


class LocalTinyVGG(nn.Module):
    """CNN-explainer TinyVGG: 2 × [conv3×3 → ReLU → conv3×3 → ReLU → maxpool] → linear."""

    explain_layer = "block2.2"

    def __init__(self, in_channels: int = 1, image_size: int = 28, n_classes: int = 10, hidden: int = 10):
        super().__init__()

        def block(cin: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(cin, hidden, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(hidden, hidden, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))

        self.block1, self.block2 = block(in_channels), block(hidden)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(hidden * (image_size // 4) ** 2, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block2(self.block1(x)))


def build_tinyvgg() -> tuple[nn.Module, str]:
    try:
        from cflcore.models import build_model

        return build_model("tinyvgg", 1, 28, 10), "cflcore.models tinyvgg"
    except (ImportError, AttributeError, KeyError) as e:
        return LocalTinyVGG(), f"local TinyVGG (cflcore.models unavailable: {type(e).__name__})"


def time_call(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer images and repeats (a smoke run)")
    ap.add_argument("--images", type=int, default=None, help="images per measurement (default 128; quick 32)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per path (default 3; quick 1)")
    ap.add_argument("--step", type=int, default=28)
    ap.add_argument("--forward-batch", type=int, default=512, help="images per forward pass of the batched path")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the same for both paths)")
    args = ap.parse_args()
    n_images = args.images or (32 if args.quick else 128)
    repeats = args.repeats or (1 if args.quick else 3)
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    model, source = build_tinyvgg()
    model.eval()
    fast = to_channels_last(copy.deepcopy(model))  # what explain_run does; the loop keeps the default layout
    x = torch.rand(n_images, 1, 28, 28, generator=gen)
    attribution = torch.rand(n_images, 28, 28, generator=gen)
    target = torch.randint(0, 10, (n_images,), generator=gen)
    n_loop = max(4, n_images // 8)  # the loop is slow: time it on a subset, report per-image rates

    batched_s, loop_s = [], []
    for r in range(repeats):
        runs = [("b", lambda: insertion_deletion(fast, x, attribution, target, args.step,
                                                 forward_batch=args.forward_batch)),
                ("l", lambda: insertion_deletion_per_image(model, x[:n_loop], attribution[:n_loop],
                                                           target[:n_loop], args.step))]
        for name, fn in (runs if r % 2 == 0 else runs[::-1]):
            (batched_s if name == "b" else loop_s).append(time_call(fn))
    batched = insertion_deletion(fast, x[:n_loop], attribution[:n_loop], target[:n_loop], args.step,
                                 forward_batch=args.forward_batch)
    loop = insertion_deletion_per_image(model, x[:n_loop], attribution[:n_loop], target[:n_loop], args.step)
    max_diff = max(float((batched.insertion_auc - loop.insertion_auc).abs().max()),
                   float((batched.deletion_auc - loop.deletion_auc).abs().max()))
    batched_rate = n_images / statistics.median(batched_s)
    loop_rate = n_loop / statistics.median(loop_s)
    print(f"model: {source}; torch threads: {torch.get_num_threads()}; 28x28x1, step {args.step} "
          f"({batched.x.numel()} points per curve); forward batch {args.forward_batch}; repeats: {repeats}")
    print(f"batched : {batched_rate:9.1f} images/s  ({n_images} images, median {statistics.median(batched_s):.3f} s)")
    print(f"per-image loop: {loop_rate:9.1f} images/s  ({n_loop} images, median {statistics.median(loop_s):.3f} s)")
    print(f"speed-up: {batched_rate / loop_rate:.1f}x  (max |AUC batched - loop| = {max_diff:.2e})")


if __name__ == "__main__":
    main()
