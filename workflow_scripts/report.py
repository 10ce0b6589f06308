"""Snakemake adapter: rule report -> cflcore.stages.report_index (the parts' index entries gathered into
index.json, and the per-rule benchmark tables, the report job's own row measured by itself)."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.external import activate
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
plan = json.loads(sm.params.runs)
papers = ((plan.get("front_page") or {}).get("report") or {}).get("paper_checks") or []  # external ones join PAPERS
run_job(sm.log[0], lambda: activate({"paper": papers}) or stages.report_index(plan, Path(sm.output.index).parent))
