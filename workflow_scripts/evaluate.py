"""Snakemake adapter: rule evaluate -> cflcore.stages.evaluate."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.evaluate(
    Path(sm.input.history).parent, sm.input.manifest, Path(sm.output.clustering).parent,
    json.loads(sm.params.settings)))
