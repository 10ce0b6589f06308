"""Snakemake adapter: rule centralised_update_norms -> cflcore.stages.centralised_update_norms."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.centralised_update_norms(
    sm.input.dataset, Path(sm.input.manifest).parent, json.loads(sm.params.settings), sm.params.seed, sm.output.norms))
