"""Snakemake adapter: rule report -> cflcore.stages.report_runs."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.logutil import run_logged

sm = snakemake  # noqa: F821
run_logged(sm.log[0], lambda: stages.report_runs(json.loads(sm.params.runs), Path(sm.output.index).parent))
