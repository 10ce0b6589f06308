"""Snakemake adapter: rule split -> cflcore.stages.make_split."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.external import activate
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
settings = json.loads(sm.params.settings)
run_job(sm.log[0], lambda: activate({"split generator": settings["generator"]}) or stages.make_split(
    sm.input.dataset, settings, int(sm.wildcards.clients), int(sm.wildcards.seed),
    Path(sm.output.manifest).parent, name=sm.wildcards.split))
