"""Snakemake adapter: rule explain -> cflcore.stages.explain."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.external import activate
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
# the concrete device (cuda:1) from the config; the params hold its identity (cflcore.defaults.device_identity)
settings = json.loads(sm.params.settings)
run_job(sm.log[0], lambda: activate({"model": settings["model"]}) or stages.explain(
    sm.input.dataset, Path(sm.input.manifest).parent, Path(sm.input.models).parent,
    settings, sm.params.seed, Path(sm.output.insdel).parent, device=str(sm.config["device"]),
    deterministic=sm.params.deterministic))
