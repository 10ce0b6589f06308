"""Snakemake adapter: rule train -> cflcore.stages.train."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.train(
    sm.input.dataset, Path(sm.input.manifest).parent, json.loads(sm.params.run), sm.params.seed,
    Path(sm.output.status).parent, on_failure=sm.params.on_failure))
