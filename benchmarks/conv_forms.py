"""Which ``engine.conv_form`` to run on a device (script, not a test; docs/gpu.md, "The convolutions").

The vmap trainer's per-client convolutions (cflcore/fl/client_conv.py) as ``grouped`` (torch's own vmap rule: one
grouped convolution a chunk), ``loop`` (one plain convolution per client) and ``unfold`` (im2col + one batched
product). For each model and client count, one local epoch of N clients (batch 32, 267 samples each: the doctor's
workload, cflcore.fl.selfcheck) through ``VmapTrainer.train`` under each form, timed side by side (harness), and:

* equivalence (asserted): each form's trained vectors against ``grouped``'s within rtol 1e-3 / atol 1e-5 (float32;
  the forms sum in other orders), and in float64 within 1e-10 in ``--quick``;
* determinism (asserted on CUDA with ``engine.deterministic``'s flags, cflcore.fl.device.set_deterministic): the same
  form twice gives the same bytes;
* the pick: the fastest form by median, printed as ``pick: engine.conv_form <form>`` per case.

Usage (on a GPU box, see docs/gpu.md):
    python benchmarks/conv_forms.py --device cuda [--models ocfl-cnn resnet34] [--clients 15 30] [--repeats 3]
    python benchmarks/conv_forms.py --quick            # CPU smoke run: tinyvgg, 3 clients, float64 equivalence
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from cflcore.data.synthetic import synthetic_federated  # noqa: E402
from cflcore.fl.client_conv import CONV_FORMS  # noqa: E402
from cflcore.fl.device import prepare_device  # noqa: E402
from cflcore.fl.flat_params import ModelLayout  # noqa: E402
from cflcore.fl.optim import ClientOptimizer  # noqa: E402
from cflcore.fl.spec import train_spec  # noqa: E402
from cflcore.fl.trainers import VmapTrainer, derive_seed  # noqa: E402
from cflcore.models import build_model  # noqa: E402
from cflcore.settings import EngineSettings, TrainingSettings  # noqa: E402

SHAPES = {"ocfl-cnn": ((1, 28, 28), {}), "tinyvgg": ((1, 28, 28), {}), "resnet34": ((3, 32, 32), {}),
          "mobilenetv1": ((3, 32, 32), {})}
BATCH, N_TRAIN = 32, 267


def trainer_for(model: str, form: str, device: torch.device, precision: str) -> tuple[VmapTrainer, torch.Tensor]:
    shape, kw = SHAPES[model]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = build_model(model, shape[0], shape[1:], 10, **kw)
    layout = ModelLayout.of(net)
    training = TrainingSettings.of({"model": model, "optimizer": "sgd", "lr": 0.01, "batch_size": BATCH,
                                    "local_epochs": 1, "rounds": 1})
    spec = train_spec(training, EngineSettings.of({"trainer": "vmap", "conv_form": form, "precision": precision,
                                                   "gpu_jobs": 1}), device)
    assert spec.optimizer == ClientOptimizer("sgd", 0.01)
    return VmapTrainer(net, layout, spec, device), layout.flatten(net)


def run_case(model: str, n: int, n_train: int, device: torch.device, precision: str, repeats: int,
             rec: harness.Recorder) -> str:
    shape, _ = SHAPES[model]
    fed = synthetic_federated(n_clients=n, n_train=n_train, shape=shape, n_classes=10, seed=0).to(device)
    seeds = [derive_seed(0, i) for i in range(n)]
    trainers = {form: trainer_for(model, form, device, precision) for form in CONV_FORMS}
    starts = trainers["grouped"][1].to(device=device, dtype=trainers["grouped"][0].spec.dtype).expand(n, -1).contiguous()

    def one_round(form: str):
        out = trainers[form][0].train(starts, fed.clients, seeds).params
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out

    results = harness.time_side_by_side({form: (lambda f=form: one_round(f)) for form in CONV_FORMS}, repeats)
    case = f"{model} N={n} {precision} {device.type}"
    rec.record(case, results)
    reference = results["grouped"].output
    rtol, atol = (0.0, 1e-10) if precision == "fp64" else (1e-3, 1e-5)
    for form in CONV_FORMS:
        harness.assert_close(form, results[form].output, reference, rtol, atol, "trained vectors")
        if device.type == "cuda" and not torch.equal(one_round(form), one_round(form)):
            raise harness.EquivalenceError(f"{form}: two runs of the same round gave different bytes")
    pick = min(CONV_FORMS, key=lambda f: results[f].median)
    print(f"{case}: " + ", ".join(f"{f} {results[f].median * 1e3:.1f} ms" for f in CONV_FORMS)
          + f"; pick: engine.conv_form {pick}")
    return pick


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_args(ap)
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    ap.add_argument("--models", nargs="*", default=None, help="default: ocfl-cnn resnet34 (quick: tinyvgg)")
    ap.add_argument("--clients", nargs="*", type=int, default=None, help="default: 15 30 (quick: 3)")
    args = ap.parse_args(argv)
    rec = harness.setup(args, "conv_forms")
    device = prepare_device(args.device, True)
    models = args.models or (["tinyvgg"] if args.quick else ["ocfl-cnn", "resnet34"])
    clients = args.clients or ([3] if args.quick else [15, 30])
    precision = "fp64" if args.quick else "fp32"
    n_train = 40 if args.quick else N_TRAIN
    picks = [run_case(m, n, n_train, device, precision, args.repeats, rec) for m in models for n in clients]
    print(f"all forms within tolerance{' and deterministic' if device.type == 'cuda' else ''}; picks: {picks}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
