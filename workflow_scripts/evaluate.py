"""Snakemake adapter: rule evaluate -> cflcore.stages.evaluate, then cflcore.stages.whatif, in one process (a run
without a what-if replay is scored by its train job, rule train_evaluate: workflow_scripts/train.py)."""
import json
from pathlib import Path

from cflcore import stages
from cflcore.external import activate
from cflcore.logutil import run_job

sm = snakemake  # noqa: F821
run_dir = Path(sm.input.history).parent


def evaluate_and_replay() -> None:
    stages.evaluate(run_dir, sm.input.manifest, Path(sm.output.clustering).parent, json.loads(sm.params.settings))
    if "whatif" in sm.output.keys():
        whatif = json.loads(sm.params.whatif)
        # an external clusterer the run's own clustering replays joins its registry first (cflcore.external)
        activate({"clusterer": [c["params"].get("clusterer") for c in whatif["clusterers"]
                                if isinstance(c["params"].get("clusterer"), str)]})
        stages.whatif(run_dir, sm.input.manifest, sm.output.whatif, whatif, int(sm.params.seed))


run_job(sm.log[0], evaluate_and_replay)
