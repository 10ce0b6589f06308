"""Snakemake adapter: rules report_<part> -> cflcore.stages.report_part (one part of the report's tables and
figures, cflcore/report/parts.py; report_tables also writes front_page.rst, which report/workflow.rst includes)."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.external import activate
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
plan = json.loads(sm.params.runs)
papers = ((plan.get("front_page") or {}).get("report") or {}).get("paper_checks") or []  # external ones join PAPERS
run_job(sm.log[0], lambda: activate({"paper": papers}) or stages.report_part(plan, sm.params.part, Path(sm.output.part).parent.parent))
