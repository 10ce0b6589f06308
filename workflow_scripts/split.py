"""Snakemake adapter: rule split -> cflcore.stages.make_split."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.make_split(
    sm.input.dataset, json.loads(sm.params.settings), int(sm.wildcards.clients), int(sm.wildcards.seed),
    Path(sm.output.manifest).parent, name=sm.wildcards.split))
