"""Snakemake adapter: rule tune -> cflcore.stages.tune (the calibration's choice, written as a config file)."""
import json

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.tune(json.loads(sm.params.plan), sm.output.calibrated))
