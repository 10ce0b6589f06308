"""Snakemake adapter: rule prepare_dataset -> cflcore.stages.prepare_dataset."""
import json

from cflcore import stages
from cflcore.external import activate
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821  (injected by Snakemake)
settings = json.loads(sm.params.settings)
# an external dataset plug-in the job selects joins its registry first (cflcore.external; logged with its version)
run_job(sm.log[0], lambda: (activate({"dataset": settings["loader"]}), stages.prepare_dataset(settings, sm.output.dataset)))
