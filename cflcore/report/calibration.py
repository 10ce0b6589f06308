"""The tuning step of a ``calibration: {mode: tune}`` study (issue 68 item 3; cflcore/config/calibration.py): from the
finished tuning runs, one combination of thresholds per variant, written as a config file that extends the study.

The rule, the same for every method:

* a combination's score is the mean of the calibration's ``metric`` (a final-round run-summary score,
  cflcore.report.sweeps.sweep_summary) over all its runs: the study's settings × the tuning seeds;
* a combination cannot win where its parameters rule out a setting's groups by construction ("cannot split
  here", cflcore.plugin.Plugin.cannot_split, derived at validation), where the method acted in none of its runs
  (cflcore.strategies.run_records: its score is then its "did not act", never a 0), where a run failed or is missing,
  or where the metric is missing; one that acted in some runs and not others is scored on all of them, as a cross
  table scores such a cell (issue 68 item 1);
* the highest score wins; a tie goes to the combination first in the grid's order (each list's first value first,
  the last key varying fastest).

:func:`calibration_lines` prints, for the report, the rule a study declared and the values it runs with.
"""
from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from ..calibration_keys import AUTHORS, CALIBRATION_KEY, CHOSEN_KEY, RECORD_KEY, TUNING_KEY
from ..errors import CflError
from ..io import atomic_path
from .acted import NO_ACTION, with_actions
from .runs import load_runs, run_specs
from .sweeps import sweep_summary


def combination_scores(summary: pd.DataFrame, tuning: Mapping[str, Mapping[str, Any]], metric: str,
                       expected: Mapping[str, int]) -> pd.DataFrame:
    """One row per tuning variant (``tuning``: cflcore.config.calibration.TUNING_KEY, in the grid's order): its
    ``variant``, ``values``, ``runs`` (loaded of ``expected``), ``acted`` (runs where the method acted), ``score``
    (the mean ``metric`` over its loaded runs) and ``excluded`` (why it cannot win, "" where it can)."""
    rows = []
    for name, record in tuning.items():
        runs = summary[summary["algorithm"] == name] if len(summary) else summary
        n, want = len(runs), int(expected.get(name, 0))
        acted = int(sum(r is None for r in runs[NO_ACTION])) if n and NO_ACTION in runs else n
        values = pd.to_numeric(runs[metric], errors="coerce") if n else pd.Series(dtype=float)
        score = float(values.mean()) if n and values.notna().all() else math.nan
        if record.get("cannot_split"):
            excluded = "cannot split here: " + "; ".join(f"{split}: {why}" for split, why in record["cannot_split"].items())
        elif n < want:
            excluded = f"{want - n} of {want} runs failed or missing"
        elif not acted:
            excluded = f"did not act in any of its {n} runs"
        elif math.isnan(score):
            excluded = f"{metric} missing in {int(values.isna().sum())} of {n} runs"
        else:
            excluded = ""
        rows.append({"variant": record["variant"], "tuning_variant": name, "values": dict(record["values"]),
                     "runs": n, "acted": acted, "score": score, "excluded": excluded})
    return pd.DataFrame(rows, columns=["variant", "tuning_variant", "values", "runs", "acted", "score", "excluded"])


def pick(scores: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Variant -> the values of its winning combination (module docstring: the highest score among those that can
    win, the grid's first on a tie). A variant none of whose combinations can win is a CflError naming them."""
    chosen: dict[str, dict[str, Any]] = {}
    for variant, rows in scores.groupby("variant", sort=False):
        eligible = rows[rows["excluded"] == ""]
        if not len(eligible):
            why = "; ".join(f"{r.tuning_variant}: {r.excluded}" for r in rows.itertuples())
            raise CflError(f"calibration.grid.{variant}: no combination can be chosen ({why}); widen the grid")
        best = eligible["score"].max()
        chosen[str(variant)] = dict(eligible[eligible["score"] == best].iloc[0]["values"])  # first in grid order
    return chosen


def _commit() -> str:
    """The working tree's git commit (``+dirty`` when it has changes), or "unknown" outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def calibrated_config(calibration: Mapping[str, Any], scores: pd.DataFrame, chosen: Mapping[str, Mapping[str, Any]],
                      study_file: str | Path, out_path: str | Path) -> str:
    """The calibrated file's text: ``extends:`` the study's config file, the chosen values over its variants, and
    the record of how they were chosen (cflcore.config.calibration.CHOSEN_KEY and ``record``)."""
    extends = os.path.relpath(Path(study_file).absolute(), Path(out_path).absolute().parent)
    record = {"commit": _commit(), "metric": calibration["metric"], "tuning_seeds": list(calibration["tuning_seeds"]),
              "rule": "highest mean metric over settings x tuning seeds; no run acted, a failed run or a missing metric "
                      "cannot win; a tie goes to the grid's first",
              "scores": {r.tuning_variant: (round(r.score, 6) if not r.excluded else r.excluded)
                         for r in scores.itertuples()}}
    body = {"extends": extends, CALIBRATION_KEY: {CHOSEN_KEY: {v: dict(p) for v, p in chosen.items()}, RECORD_KEY: record},
            "algorithms": {v: dict(p) for v, p in chosen.items()}}
    header = (f"# Written by `snakemake tune --configfile {study_file}` (cflcore/report/calibration.py); do not edit.\n"
              f"# Run the calibrated study with `snakemake --configfile {out_path}`.\n")
    return header + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)


def tune(plan: Mapping[str, Any], out_path: str | Path) -> dict[str, dict[str, Any]]:
    """Rule ``tune``: ``plan`` (cflcore.stages.tune_plan) -> the calibrated config at ``out_path``, written
    atomically; returns the chosen values."""
    calibration = plan[CALIBRATION_KEY]
    loaded, _ = load_runs(run_specs(plan["results_dir"], plan["runs"]))
    summary = with_actions(sweep_summary(loaded, {}), loaded, plan["algorithms"])
    if summary is None or not len(summary):
        summary = pd.DataFrame(columns=["algorithm", NO_ACTION, calibration["metric"]])
    expected = pd.Series([r.rsplit("/", 1)[1] for r in plan["runs"]]).value_counts().to_dict()
    scores = combination_scores(summary, calibration[TUNING_KEY], calibration["metric"], expected)
    chosen = pick(scores)
    text = calibrated_config(calibration, scores, chosen, plan["study_file"], out_path)
    with atomic_path(out_path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return chosen


def calibration_lines(block: Mapping[str, Any] | None, algorithms: Sequence[str]) -> list[str]:
    """The report's words on how the study's thresholds were set (``block``: its ``calibration``, None where it
    declares none: no words): the declared rule and, after ``snakemake tune``, each tuned variant's chosen values
    with the grid they came from; ``algorithms``: the study's variants, in its order."""
    if not block:
        return []
    if block["mode"] == AUTHORS:
        return ["Thresholds: every method's as the config writes them, its authors' defaults or the values the "
                "config states (calibration: authors)."]
    chosen = block.get(CHOSEN_KEY) or {}
    grid = block["grid"]
    state = "tuned" if chosen else "to be tuned (snakemake tune has not run: every variant runs as written)"
    lines = [f"Thresholds: {state} on seeds {', '.join(map(str, block['tuning_seeds']))} (none of them a study seed), "
             f"by the highest mean {block['metric']} over the study's settings; a value that cannot split a setting, or "
             f"at which the method acted in no run, cannot win; every other variant as written."]
    for variant in [a for a in algorithms if a in grid]:
        values = ", ".join(f"{p} = {v}" for p, v in (chosen.get(variant) or {}).items())
        tried = "; ".join(f"{p} in [{', '.join(map(str, vs))}]" for p, vs in grid[variant].items())
        lines.append(f"{variant}: {values} (grid: {tried})" if values else f"{variant}: grid {tried}")
    return lines
