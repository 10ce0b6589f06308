"""Snakemake adapter: rule train -> cflcore.stages.train; rules train_evaluate and train_kernels ->
cflcore.stages.train, then cflcore.stages.evaluate in the same process (its job declares the scores among its
outputs); rule train_kernels first holds the CPU's kernels to its path, before torch is imported."""
import json
from pathlib import Path

from cflcore.kernel_paths import hold_kernels

sm = snakemake  # noqa: F821
if "kernels" in sm.params.keys():  # rule train_kernels (report.kernel_paths): before anything imports torch
    hold_kernels(sm.params.kernels)

from cflcore import layout as lay  # noqa: E402
from cflcore import stages  # noqa: E402
from cflcore.external import activate  # noqa: E402
from cflcore.logutil import run_job  # noqa: E402

# config monitor.tensorboard is read here, not passed as a param: switching it reruns no training (its schema entry);
# so is the concrete device (cuda:1): the params hold its identity only (cflcore.defaults.device_identity)
w = sm.wildcards
run = lay.run_id(w.dataset, w.split, w.clients, w.seed, w.algorithm)
tensorboard = None
if sm.config["monitor"]["tensorboard"]:
    results = str(sm.config["results_dir"]).rstrip("/")
    tensorboard = lay.tensorboard_dir(lay.kernel_results(results, sm.params.kernels) if "kernels" in sm.params.keys()
                                      else results, run)
run_dir = Path(sm.output.status).parent


def train_and_score() -> None:
    settings = json.loads(sm.params.run)
    clusterer = settings["algorithm"].get("clusterer")
    # the external plug-ins the run selects join their registries first (cflcore.external; logged with their versions)
    activate({"method": settings["algorithm"]["method"], "model": settings["training"]["model"],
              "clusterer": clusterer if isinstance(clusterer, str) else None})
    stages.train(
        sm.input.dataset, Path(sm.input.manifest).parent, settings, sm.params.seed, run_dir,
        on_failure=sm.params.on_failure, tensorboard_dir=tensorboard,
        inputs={name: path for name, path in sm.input.items() if name not in ("dataset", "assignments", "manifest")},
        device=str(sm.config["device"]))
    if "clustering" in sm.output.keys():
        stages.evaluate(run_dir, sm.input.manifest, Path(sm.output.clustering).parent, json.loads(sm.params.settings))


run_job(sm.log[0], train_and_score)
