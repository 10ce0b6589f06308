"""``cfl``: run any single stage of the pipeline without Snakemake.

    cfl validate                      # check the config, print the planned grid
    cfl data --dataset mnist5k
    cfl split --dataset mnist5k --split nonoverlap-balanced --clients 15 --seed 0 [--summary]
    cfl train --dataset mnist5k --split nonoverlap-balanced --clients 15 --seed 0 --algorithm ocfl-hdb
    cfl centralised_update_norms ... --round-size client     # a strategy input beside the split (SCL's proxy)
    cfl evaluate ... --algorithm ocfl-hdb
    cfl whatif   ... --algorithm ocfl-hdb
    cfl evaluate_late_clients ... --algorithm ocfl-hdb-late
    cfl explain  ... --algorithm ocfl-hdb
    cfl report
    cfl status [--watch]              # every planned run: state, round, speed, ETA; the study's count and ETA
    cfl --config config/tiny.yaml --set engine.threads=2 --set study.clients=[6,12] validate

One command per stage of the pipeline (cflcore.pipeline.STAGES). Paths follow the Snakemake layout under
``results_dir`` so that the two can be mixed; the settings are resolved by the same functions that build the rules'
params.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from . import filenames as fn
from . import config as cc
from . import layout, pipeline, stages
from .config_checks import REFUSE, WARN
from .doctor import add_parser as add_doctor_parser, run_doctor
from .errors import CflError, ConfigError
from .logutil import setup_logging


def _paths(cfg: dict[str, Any], a: argparse.Namespace) -> dict[str, Path]:
    """The stage's paths in the Snakemake layout (cflcore.layout)."""
    res = str(cfg["results_dir"]).rstrip("/")
    out: dict[str, Path] = {"results": Path(res), "report": Path(layout.report_dir(res))}
    if getattr(a, "dataset", None):
        out["dataset"] = Path(layout.dataset_file(res, a.dataset))
    if getattr(a, "split", None):
        scen = layout.scenario_id(a.dataset, a.split, a.clients, a.seed)
        out["split"] = Path(layout.split_dir(res, scen))
        out["manifest"] = Path(layout.split_file(res, scen, fn.MANIFEST))
        if getattr(a, "algorithm", None):
            run = layout.run_id(a.dataset, a.split, a.clients, a.seed, a.algorithm)
            out["run"] = Path(layout.run_dir(res, run))
            out["eval"] = Path(layout.eval_dir(res, run))
            out["whatif"] = Path(layout.eval_file(res, run, fn.WHATIF))
            out["explain"] = Path(layout.explain_dir(res, run))
    return out


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """``--set a.b.c=VALUE`` items -> one nested override dict (later items win). VALUE is parsed as YAML, as
    ``snakemake --config`` parses its values (``2`` an integer, ``[6, 12]`` a list, ``{k: 3}`` a mapping); the
    result is deep-updated over the config files and validated with them (cflcore.config.load_config)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE with a dotted KEY, e.g. engine.threads=2")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {key}: value {raw!r} is not valid YAML ({str(e).splitlines()[0]})") from None
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
    return out


def _wildcard_args(p: argparse.ArgumentParser, wildcards: Sequence[str]) -> None:
    """A stage's wildcards (cflcore.pipeline.Stage.wildcards) as options: ``--dataset``, ``--split``, ``--clients``,
    ``--seed`` (default 0), ``--algorithm``, ``--round-size``."""
    for name in wildcards:
        if name == "clients":
            p.add_argument("--clients", type=int, required=True)
        elif name == "seed":
            p.add_argument("--seed", type=int, default=0)
        elif name == "round_size":
            p.add_argument("--round-size", dest="round_size", choices=("client", "epoch"), required=True,
                           help="a proxy round: a client's step count per round, or an epoch over the pooled data")
        else:
            p.add_argument(f"--{name}", required=True)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cfl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", default=None,
                    help=f"config YAML (repeatable; later files deep-update earlier ones). Default: {cc.BASE_CONFIG}")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                    help="override one config value after the files, e.g. --set engine.threads=2 (dotted key, YAML "
                         "value; repeatable; validated like the files, as `snakemake --config` does)")
    ap.add_argument("--log", default=None, help="also log to this file")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate", help="validate the config and print the grid")
    for stage in pipeline.STAGES:  # one command per stage of the pipeline, its wildcards as options
        p = sub.add_parser(stage.command, help=stage.help)
        _wildcard_args(p, stage.wildcards)
        if "summary" in stage.options:
            p.add_argument("--summary", action="store_true", help="print clients per cluster, samples and classes")
    p = sub.add_parser("status", help="state, round, speed and ETA of every planned run, and the study's ETA")
    p.add_argument("--watch", action="store_true", help="refresh in place until Ctrl-C")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes with --watch (default 2)")
    add_doctor_parser(sub)  # cfl doctor [--gpu]: the machine's self-check (cflcore/doctor.py); reads no config
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    log = setup_logging(a.log)
    if a.cmd == "doctor":
        return run_doctor(a)
    try:
        # a stage command runs a job: data neither on disk nor allowed to download is refused before it starts
        stage_commands = {stage.command for stage in pipeline.STAGES}
        cfg = cc.load_config(*(a.config or [cc.BASE_CONFIG]), overrides=parse_set(a.overrides),
                             missing_data=REFUSE if a.cmd in stage_commands else WARN)
        return _dispatch(cfg, a, log)
    except CflError as e:
        print(f"cfl: error: {e}", file=sys.stderr)
        return 2


class ProgressBar:
    """``cfl train``'s bar on a terminal (a cflcore.fl.progress.Monitor): rounds done, the last round's loss,
    clusters and F1, the time left. While it shows, log lines go above it (rich redirects stderr; the logging
    handlers writing to the terminal are pointed at the redirect and back)."""

    def __init__(self, run: str):
        self.run = run
        self.progress = None
        self.handlers: list[tuple[Any, Any]] = []

    def start(self, first_round: int, n_rounds: int) -> None:
        import logging

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), TextColumn("{task.fields[last]}"), transient=False)
        self.task = self.progress.add_task(self.run, total=n_rounds, completed=first_round, last="")
        self.progress.start()
        for h in logging.getLogger().handlers:
            if type(h) is logging.StreamHandler and h.stream in (sys.__stderr__, sys.__stdout__):
                self.handlers.append((h, h.stream))
                h.setStream(sys.stderr)

    def round(self, record: Any) -> None:
        f1 = f", F1 {record['local_f1']:.3f}" if record["local_f1"] is not None else ""
        self.progress.update(self.task, completed=record["round"] + 1,
                             last=f"loss {record['loss']:.4f}, {record['clusters']} clusters{f1}")

    def close(self) -> None:
        for h, stream in self.handlers:
            h.setStream(stream)
        if self.progress is not None:
            self.progress.stop()


def _dispatch(cfg: dict[str, Any], a: argparse.Namespace, log) -> int:
    p = _paths(cfg, a)
    if a.cmd == "validate":
        runs = [layout.run_id(**s, algorithm=alg) for s, alg in cc.study_runs(cfg)]
        print(f"config OK: {len(runs)} runs")
        for run in runs:
            print(f"  {run}")
        return 0
    if a.cmd == "data":
        from .external import dataset_preparer  # a federation table writes its dataset itself (docs/extending.md)

        settings = cc.data_settings(cfg, a.dataset)
        (dataset_preparer(settings) or stages.prepare_dataset)(settings, p["dataset"])
    elif a.cmd == "split":
        if a.summary:
            from .data.splits import split_summary

            print(split_summary(p["split"]).to_string(index=False))
            return 0
        stages.make_split(p["dataset"], cc.split_settings(cfg, a.split), a.clients, a.seed, p["split"], name=a.split)
    elif a.cmd == "train":
        run = layout.run_id(a.dataset, a.split, a.clients, a.seed, a.algorithm)
        tensorboard = layout.tensorboard_dir(str(p["results"]), run) if cfg["monitor"]["tensorboard"] else None
        bar = [ProgressBar(run)] if sys.stderr.isatty() else []  # under Snakemake (no terminal): log lines only
        settings = cc.run_settings(cfg, a.dataset, a.algorithm, a.split)
        inputs = stages.strategy_input_paths(cfg, a.dataset, a.split, a.clients, a.seed, a.algorithm)
        st = stages.train(p["dataset"], p["split"], settings, a.seed, p["run"], on_failure="fail",
                          tensorboard_dir=tensorboard, monitors=bar, inputs=inputs, device=cfg["device"])
        log.info("run status: %s", st)
    elif a.cmd == "status":
        from .status import show

        return show(cfg, watch=a.watch, interval=a.interval)
    elif a.cmd == "evaluate":
        stages.evaluate(p["run"], p["manifest"], p["eval"], cfg["report"])
    elif a.cmd == "whatif":
        stages.whatif(p["run"], p["manifest"], p["whatif"],
                      cc.whatif_settings(cfg, a.dataset, a.algorithm), a.seed)
    elif a.cmd == "explain":
        stages.explain(p["dataset"], p["split"], p["run"], cc.explain_settings(cfg, a.dataset, a.algorithm), a.seed,
                       p["explain"], device=cfg["device"], deterministic=cfg["engine"]["deterministic"])
    elif a.cmd == "centralised_update_norms":
        scenario = layout.scenario_id(a.dataset, a.split, a.clients, a.seed)
        out = layout.input_file(str(p["results"]), scenario, f"centralised_update_norms/{a.round_size}")
        stages.centralised_update_norms(p["dataset"], p["split"], cc.centralised_settings(cfg, a.dataset, a.round_size),
                                        a.seed, out)
    elif a.cmd == "evaluate_late_clients":
        run = layout.run_id(a.dataset, a.split, a.clients, a.seed, a.algorithm)
        stages.evaluate_late_clients(p["run"], p["manifest"], layout.eval_file(str(p["results"]), run, fn.LATE_CLIENTS))
    elif a.cmd == "report":
        stages.report(cfg, p["report"])
    elif a.cmd == "tune":  # the tuning runs must be there (snakemake tune makes them); the last --config is the study
        from .config.calibration import calibrated_file

        study_file = (a.config or [cc.BASE_CONFIG])[-1]
        print(stages.tune(stages.tune_plan(cfg, study_file), calibrated_file(study_file)))
    else:
        raise CflError(f"cfl {a.cmd}: stage {a.cmd!r} has a record (cflcore.pipeline) but no command here (cflcore.cli)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
