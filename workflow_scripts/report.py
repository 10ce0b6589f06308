"""Snakemake adapter: rule report -> cflcore.stages.report_index (the parts' index entries gathered into
index.json, and the per-rule benchmark tables, the report job's own row measured by itself)."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
plan = json.loads(sm.params.runs)
run_job(sm.log[0], lambda: stages.report_index(plan, Path(sm.output.index).parent))
