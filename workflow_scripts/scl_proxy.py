"""Snakemake adapter: rule scl_proxy -> cflcore.stages.scl_proxy (SCL's epsilons from a centralised proxy)."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.scl_proxy(
    sm.input.dataset, Path(sm.input.manifest).parent, json.loads(sm.params.settings), sm.params.seed, sm.output[0]))
