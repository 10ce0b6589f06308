"""Snakemake adapter: rule whatif -> cflcore.stages.whatif."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.whatif(
    Path(sm.input.history).parent, sm.input.manifest, sm.output.whatif, json.loads(sm.params.settings),
    int(sm.params.seed)))
