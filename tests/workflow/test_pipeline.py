"""The stage records (cflcore/pipeline.py) are the one list of stages: the Snakemake rules match them (names, named
inputs and outputs, wildcards, read from Snakemake's own parse of the workflow), every stage has its entry functions,
its adapters and its ``cfl`` command, and a stage added as one record is seen by provenance, the report's benchmark
view and ``cfl --help``."""
import inspect
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cflcore import cli, pipeline, provenance, stages
from cflcore.report import benchmarks as bm
from conftest import REPO

# Snakemake's own parse of the workflow (its Python API, in a child process: the API changes the working directory)
_RULES = r"""
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import (ConfigSettings, DeploymentSettings, OutputSettings, ResourceSettings,
                                      StorageSettings, WorkflowSettings)

repo = Path(sys.argv[1])
with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=1),
                            config_settings=ConfigSettings(configfiles=[repo / "config" / "tiny.yaml"]),
                            storage_settings=StorageSettings(), workflow_settings=WorkflowSettings(),
                            deployment_settings=DeploymentSettings(), snakefile=repo / "Snakefile", workdir=Path.cwd())
    print(json.dumps({rule.name: {"input": sorted(rule.input.keys()), "output": sorted(rule.output.keys()),
                                  "unnamed_outputs": len(rule.output) - len(rule.output.keys()),
                                  "wildcards": sorted(rule.wildcard_names)} for rule in workflow._workflow.rules}))
"""


@pytest.fixture(scope="module")
def parsed_rules(tmp_path_factory):
    wd = tmp_path_factory.mktemp("rules")
    out = subprocess.run([sys.executable, "-c", _RULES, str(REPO)], cwd=wd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def mismatches(parsed: dict, stages: tuple) -> list[str]:
    """Where Snakemake's rules and the records ``stages`` disagree: rule names, wildcards, named inputs and outputs."""
    parts = bm.report_parts()
    files = pipeline.rule_files(parts, stages)
    found = [f"rule {r}: no record" for r in sorted(set(parsed) - set(pipeline.TARGET_RULES) - set(files))]
    found += [f"record of rule {r}: no rule" for r in sorted(set(files) - set(parsed))]
    wildcards: dict[str, set[str]] = {}
    for stage in pipeline.with_report_parts(parts, stages):
        for rule in stage.rules:
            wildcards.setdefault(rule, set()).update(stage.wildcards, stage.rule_wildcards.get(rule, ()))
    for rule, declared in files.items():
        got = parsed.get(rule)
        if got is None:
            continue
        if set(got["wildcards"]) != wildcards[rule]:
            found.append(f"rule {rule}: wildcards {got['wildcards']}, record {sorted(wildcards[rule])}")
        if declared is None:  # the report's rules: their files come from the catalogue (tests/report/)
            continue
        if (set(got["input"]), set(got["output"])) != declared or got["unnamed_outputs"]:
            found.append(f"rule {rule}: inputs {got['input']}, outputs {got['output']} (unnamed "
                         f"{got['unnamed_outputs']}); record {sorted(declared[0])}, {sorted(declared[1])}")
    return found


def test_the_rules_are_the_records(parsed_rules):
    assert mismatches(parsed_rules, pipeline.STAGES) == []


def test_the_check_fails_on_a_record_that_disagrees(parsed_rules):
    fewer = tuple(replace(s, outputs=("insdel", "samples", "saliency")) if s.name == "explain" else s
                  for s in pipeline.STAGES)
    assert [m for m in mismatches(parsed_rules, fewer) if m.startswith("rule explain:")]
    missing = tuple(s for s in pipeline.STAGES if s.name != "evaluate_late_clients")
    assert "rule evaluate_late_clients: no record" in mismatches(parsed_rules, missing)


def test_every_stage_runs_functions_of_stages_through_adapters_and_a_command():
    commands = set(cli.build_parser()._subparsers._group_actions[0].choices)
    dispatch = inspect.getsource(cli._dispatch)
    for stage in pipeline.STAGES:
        for entry in stage.entries:
            assert callable(getattr(stages, entry, None)), (stage.name, entry)
        assert stage.command in commands and f'a.cmd == "{stage.command}"' in dispatch, stage.name
        for rule, jobs in stage.rules.items():
            assert jobs in pipeline.JOB_SETS, (rule, jobs)
            adapter = {"part": "report_part", "index": "report"}.get(jobs, {"train_evaluate": "train", "train_kernels": "train"}.get(rule, rule))
            assert (Path(REPO) / "workflow_scripts" / f"{adapter}.py").is_file(), rule
        for up in stage.upstream:
            pipeline.stage(up)  # a known stage
    names = [s.name for s in pipeline.STAGES]
    assert len(set(names)) == len(names) and len({s.command for s in pipeline.STAGES}) == len(names)


def test_cfl_runs_the_new_stage_commands(tmp_path):
    """centralised_update_norms and evaluate_late_clients run from the command line as their rules run them."""
    help_text = cli.build_parser().format_help()
    assert "centralised_update_norms" in help_text and "evaluate_late_clients" in help_text
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["centralised_update_norms", "--dataset", "d", "--split", "s", "--clients", "6",
                                       "--round-size", "hour"])
    a = cli.build_parser().parse_args(["evaluate_late_clients", "--dataset", "d", "--split", "s", "--clients", "6",
                                       "--algorithm", "ocfl-late"])
    assert (a.dataset, a.split, a.clients, a.seed, a.algorithm) == ("d", "s", 6, 0, "ocfl-late")


TOY = pipeline.Stage(name="toy_stage", entries=("whatif",), rules={"toy_rule": "runs"},
                     wildcards=("dataset", "split", "clients", "seed", "algorithm"), inputs=("history",), outputs=("toy",),
                     upstream=("train",), command="toy_command", help="a toy stage added as one record")


def test_a_stage_added_as_one_record_is_seen_everywhere(monkeypatch):
    monkeypatch.setattr(pipeline, "STAGES", (*pipeline.STAGES, TOY))
    # provenance: the stage gets a code hash over what its entries run
    graph = provenance._package_graph(provenance.PKG)
    assert "toy_stage" in graph["entries"]
    assert provenance.modules_in(graph, "toy_stage", {}) == provenance.modules_in(graph, "whatif", {})
    # the report's benchmark view: the rule and where it sits in the DAG
    assert bm.workflow_upstream()["toy_rule"] == ("train", "train_evaluate", "train_kernels")  # the train stage's rules
    assert bm.rule_order(["report", "toy_rule", "train", "split"]) == ["split", "train", "toy_rule", "report"]
    # cfl: a command with the stage's wildcards as options
    assert "toy_command" in cli.build_parser().format_help() and "a toy stage added as one record" in \
        cli.build_parser().format_help()
    a = cli.build_parser().parse_args(["toy_command", "--dataset", "d", "--split", "s", "--clients", "6",
                                       "--algorithm", "x"])
    assert a.cmd == "toy_command" and a.algorithm == "x"
