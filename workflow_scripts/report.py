"""Snakemake adapter: rule report -> cflcore.stages.report_runs, then the front page with the config's
departures (cflcore.report.build.refresh_front_page; report/workflow.rst includes it)."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_logged
from cflcore.report.build import refresh_front_page
from cflcore.report.runs import run_specs_from_config

sm = snakemake  # noqa: F821
plan, context = json.loads(sm.params.runs), json.loads(sm.params.front_page)
out_dir = Path(sm.output.index).parent


def run() -> None:
    stages.report_runs(plan, out_dir)
    specs = run_specs_from_config({"study": plan["study"], "results_dir": plan["results_dir"]})
    refresh_front_page(specs, out_dir, context)


run_logged(sm.log[0], run)
