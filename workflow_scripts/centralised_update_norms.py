"""Snakemake adapter: rule centralised_update_norms -> cflcore.stages.centralised_update_norms."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.external import activate
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
settings = json.loads(sm.params.settings)
run_job(sm.log[0], lambda: activate({"model": settings["training"]["model"]}) or stages.centralised_update_norms(
    sm.input.dataset, Path(sm.input.manifest).parent, settings, sm.params.seed, sm.output.norms))
