"""Snakemake adapter: rule evaluate_late_clients -> cflcore.stages.evaluate_late_clients."""
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_job(sm.log[0], lambda: stages.evaluate_late_clients(Path(sm.input.history).parent, sm.input.manifest,
                                                           sm.output.late))
