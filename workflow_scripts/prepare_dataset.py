"""Snakemake adapter: rule prepare_dataset -> cflcore.stages.prepare_dataset."""
import json

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821  (injected by Snakemake)
run_job(sm.log[0], lambda: stages.prepare_dataset(json.loads(sm.params.settings), sm.output.dataset))
