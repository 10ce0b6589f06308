"""Snakemake adapter: rule prepare_dataset -> cflcore.stages.prepare_dataset."""
import json

from cflcore import stages
from cflcore.external import activate, dataset_preparer
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821  (injected by Snakemake)
settings = json.loads(sm.params.settings)


def prepare() -> None:
    # an external dataset plug-in the job selects joins its registry first (cflcore.external; logged with its version);
    # one that reads more than a loader's settings (a federation table) writes the dataset itself
    activate({"dataset": settings["loader"]})
    (dataset_preparer(settings) or stages.prepare_dataset)(settings, sm.output.dataset)


run_job(sm.log[0], prepare)
