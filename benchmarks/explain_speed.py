"""Explanation speed: insertion + deletion AUCs (and the attribution maps they rank) batched vs per image.

(a) Insertion + deletion curves (cflcore.explain.insdel; 000 §5.1) of B images: tinyvgg (cflcore.models),
    28×28 greyscale images from cflcore.data.synthetic, step = 28 pixels (29 points per curve), zero
    substrate, random attributions (the attribution's cost is section (b)). The model is trained for a
    few seeded SGD steps so its probabilities move along the curves. Variants:

    engine           insertion_deletion: every (image, step) pair of the batch through the model in
                     chunks of ``forward_batch`` = 64 images (insertion and deletion in one pass; 64 keeps
                     one thread's activations in L2, cflcore.explain.insdel.DEFAULT_FORWARD_BATCH), the
                     masks of all steps built by one comparison, conv weights channels-last (as explain_run).
    rise-batch       the strongest baseline a user would write, RISE's own ``batch_run``: a Python loop over
                     the steps, each forwarding all B images (insertion, then deletion), pixels copied in
                     place; default memory layout.
    per-image-loop   the reference, RISE's ``single_run`` (cflcore insertion_deletion_per_image): one image,
                     one step per forward pass. Slow, so timed on B/8 images; all rates are per image.

    Ablation (the engine's switchable parts): channels_last off (the model in the default layout), and
    ``forward_batch`` (explain.forward_batch) 64 → 512 → 2 (2 = one (image, step) pair per forward pass:
    the mask trick without the batching).

    Equivalence (asserted): every variant's insertion and deletion curves and AUCs against the per-image
    loop on the images both computed, atol 1e-5 (probabilities are softmaxes in float64 of float32 logits;
    batch size and memory layout change the convolution kernels' summation order, which moves logits by
    ~1e-6 relative, observed differences ~1e-7).

(b) Attribution maps (cflcore.explain.attribution, HiResCAM through captum, 000 §5.1): the engine's one
    captum call per batch of B images vs captum called the plain way, once per image. Equivalence: maps
    within rtol 1e-4, atol 1e-6 · max|map| (float32 gradients at different batch sizes).

Usage: OMP_NUM_THREADS=1 python benchmarks/explain_speed.py [--quick] [--images 128] [--repeats 3] [--threads 1] [--csv PATH]
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import Result, assert_close  # noqa: E402

from cflcore.explain.attribution import attribute  # noqa: E402
from cflcore.explain.insdel import (DEFAULT_FORWARD_BATCH, InsDelCurves, insertion_deletion,  # noqa: E402
                                    insertion_deletion_per_image, step_pixel_counts, to_channels_last,
                                    trapezoid_auc)
from cflcore.data.synthetic import synthetic_federated  # noqa: E402
from cflcore.models import build_model  # noqa: E402

INSDEL_ATOL = 1e-5


def trained_tinyvgg(seed: int, steps: int = 60) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A seeded tinyvgg after ``steps`` SGD steps on synthetic MNIST-shaped data; returns (model, x, y) of a
    held-out pool of images."""
    fed = synthetic_federated(n_clients=3, n_train=200, n_test=200, n_orch=600, shape=(1, 28, 28), n_classes=10, seed=seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model("tinyvgg", 1, (28, 28), 10)
    x = torch.cat([c.x_train for c in fed.clients])
    y = torch.cat([c.y_train for c in fed.clients])
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(y), (32,), generator=gen)
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
    return model.eval(), fed.x_orch, fed.y_orch


@torch.inference_mode()
def rise_batch_run(model: nn.Module, x: torch.Tensor, attribution: torch.Tensor, target: torch.Tensor,
                   step: int) -> InsDelCurves:
    """RISE's ``CausalMetric.batch_run`` (Petsiuk et al. 2018) for both modes: per step, one forward pass of
    all images, then ``step`` more pixels of each image copied in place."""
    b, c, h, w = x.shape
    hw = h * w
    counts = step_pixel_counts(hw, step)
    order = torch.argsort(attribution.reshape(b, hw), dim=1, descending=True, stable=True)
    rows = torch.arange(b)[:, None]
    curves = torch.empty(2, b, counts.numel(), dtype=torch.float64)
    inserting, deleting = torch.zeros_like(x), x.clone()
    src, zeros = x.reshape(b, c, hw), torch.zeros(b, c, hw)
    for k in range(counts.numel()):
        for mode, start in enumerate((inserting, deleting)):
            curves[mode, :, k] = torch.softmax(model(start).double(), dim=-1).gather(1, target[:, None])[:, 0]
        if k + 1 < counts.numel():
            pix = order[:, counts[k]:counts[k + 1]]
            ins, dele = inserting.view(b, c, hw), deleting.view(b, c, hw)
            ins.permute(0, 2, 1)[rows, pix] = src.permute(0, 2, 1)[rows, pix]
            dele.permute(0, 2, 1)[rows, pix] = zeros.permute(0, 2, 1)[rows, pix]
    frac = counts.double() / hw
    return InsDelCurves(frac, curves[0], curves[1], trapezoid_auc(curves[0], frac), trapezoid_auc(curves[1], frac))


def check_curves(name: str, got: InsDelCurves, ref: InsDelCurves) -> float:
    n = ref.insertion.shape[0]
    worst = 0.0
    for field in ("insertion", "deletion", "insertion_auc", "deletion_auc"):
        worst = max(worst, assert_close(name, getattr(got, field)[:n], getattr(ref, field), atol=INSDEL_ATOL,
                                        what=f"{field.replace('_', ' ')} (first {n} images)"))
    return worst


def per_image(res: Result, n_images: int) -> Result:
    return Result(res.name, [s / n_images for s in res.seconds], extrapolated=res.extrapolated)


def bench_insdel(rec: harness.Recorder, model: nn.Module, x: torch.Tensor, target: torch.Tensor, step: int,
                 forward_batch: int, repeats: int, seed: int) -> None:
    n = x.shape[0]
    n_loop = max(4, n // 8)
    gen = torch.Generator().manual_seed(seed + 1)
    attribution = torch.rand(n, 28, 28, generator=gen)
    fast = to_channels_last(copy.deepcopy(model))  # what explain_run does; the other paths keep the default layout
    case = f"insdel {n} images step {step}"
    counts = {"engine": n, "rise-batch": n, "per-image-loop": n_loop}
    variants: dict[str, Callable[[], InsDelCurves]] = {
        "engine": lambda: insertion_deletion(fast, x, attribution, target, step, forward_batch=forward_batch),
        "rise-batch": lambda: rise_batch_run(model, x, attribution, target, step),
        "per-image-loop": lambda: insertion_deletion_per_image(model, x[:n_loop], attribution[:n_loop], target[:n_loop], step),
    }
    ablation: dict[str, Callable[[], InsDelCurves]] = {
        "engine without channels_last": lambda: insertion_deletion(model, x, attribution, target, step, forward_batch=forward_batch),
        "engine forward_batch 512": lambda: insertion_deletion(fast, x, attribution, target, step, forward_batch=512),
        "engine forward_batch 2": lambda: insertion_deletion(fast, x[:n_loop], attribution[:n_loop], target[:n_loop], step, forward_batch=2),
    }
    counts.update({"engine without channels_last": n, "engine forward_batch 512": n, "engine forward_batch 2": n_loop})
    res = harness.time_side_by_side({**variants, **ablation}, repeats)
    ref = res["per-image-loop"].output
    worst = {k: check_curves(k, r.output, ref) for k, r in res.items() if k != "per-image-loop"}
    print(f"\n(a) insertion + deletion, tinyvgg 1x28x28, step {step} ({ref.x.numel()} points per curve), {n} images "
          f"(per-image loop and forward_batch 2: {n_loop}); forward_batch {forward_batch}")
    print(f"  equivalence vs per-image-loop (atol {INSDEL_ATOL:g} on curves and AUCs), max |diff|: "
          + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    rec.record(case, [Result(f"{k} [{counts[k]} images]", r.seconds) for k, r in res.items()])
    per = {k: per_image(r, counts[k]) for k, r in res.items()}
    e = per["engine"].median
    print(f"  components (ms per image, medians): forward passes at batch 1 (per-image-loop) "
          f"{per['per-image-loop'].median * 1e3:.2f}; batched by step (rise-batch) {per['rise-batch'].median * 1e3:.2f}; "
          f"batched over images and steps (engine) {e * 1e3:.2f}")
    rec.table("  seconds per image (images/s = 1 / median)", {k: per[k] for k in variants}, baseline="per-image-loop",
              unit="ms", notes={k: f"{1 / per[k].median:8.1f} images/s" for k in variants})
    print(f"  engine vs the strongest user baseline (rise-batch): {per['rise-batch'].median / e:.2f}x; "
          f"vs the per-image reference: {per['per-image-loop'].median / e:.2f}x")
    rec.table("  ablation: each engine optimisation switched off (seconds per image; speed-up vs the engine)",
              {"engine": per["engine"], **{k: per[k] for k in ablation}}, baseline="engine", unit="ms")


def bench_attribution(rec: harness.Recorder, model: nn.Module, x: torch.Tensor, target: torch.Tensor,
                      repeats: int) -> None:
    n = x.shape[0]
    n_single = max(4, n // 4)
    fast = to_channels_last(copy.deepcopy(model))

    def one_by_one() -> torch.Tensor:
        return torch.cat([attribute(model, x[i:i + 1], target[i:i + 1], "hirescam") for i in range(n_single)])

    res = harness.time_side_by_side({"engine (one captum call per batch)": lambda: attribute(fast, x, target, "hirescam"),
                                     "captum per image": one_by_one}, repeats)
    batched, single = res["engine (one captum call per batch)"].output, res["captum per image"].output
    scale = float(single.abs().max())
    diff = assert_close("engine attribution", batched[:n_single], single, rtol=1e-4, atol=1e-6 * scale,
                        what=f"HiResCAM maps (first {n_single} images)")
    counts = {"engine (one captum call per batch)": n, "captum per image": n_single}
    print(f"\n(b) HiResCAM maps (captum LayerGradientXActivation at {model.explain_layer}), {n} images "
          f"(per image: {n_single}); max |diff| {diff:.1e} (rtol 1e-4, atol {1e-6 * scale:.1e})")
    rec.record(f"hirescam {n} images", [Result(f"{k} [{counts[k]} images]", r.seconds) for k, r in res.items()])
    per = {k: per_image(r, counts[k]) for k, r in res.items()}
    rec.table("  seconds per image", per, baseline="captum per image", unit="ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_common_args(ap, default_repeats=3, quick_repeats=1)
    ap.add_argument("--images", type=int, default=None, help="images per measurement (default 128; quick 32)")
    ap.add_argument("--step", type=int, default=28)
    ap.add_argument("--forward-batch", type=int, default=DEFAULT_FORWARD_BATCH, help="images per forward pass of the engine")
    args = ap.parse_args()
    rec = harness.setup(args, "explain_speed")
    n = args.images or (32 if args.quick else 128)
    model, pool_x, pool_y = trained_tinyvgg(args.seed)
    if n > len(pool_y):
        raise SystemExit(f"--images {n}: at most {len(pool_y)} images in the synthetic pool")
    x = pool_x[:n].contiguous()
    with torch.no_grad():  # not inference_mode: captum's backward needs ordinary tensors
        target = model(x).argmax(1)  # explain.target: predicted (the default)
    bench_insdel(rec, model, x, target, args.step, args.forward_batch, args.repeats, args.seed)
    bench_attribution(rec, model, x, target, args.repeats)


if __name__ == "__main__":
    main()
