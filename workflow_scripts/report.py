"""Snakemake adapter: rule report -> cflcore.stages.report_runs (tables, figures, and front_page.rst with
the config's departures, which report/workflow.rst includes as the HTML report's landing page); with 2
threads a second process draws part of the figures."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
plan = json.loads(sm.params.runs)
run_job(sm.log[0], lambda: stages.report_runs(plan, Path(sm.output.index).parent, workers=sm.threads))
