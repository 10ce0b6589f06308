"""Whether each run's method acted: the run-time counterpart of "cannot split here" (issue 68).

A method can be given a setting it could split and still never act in a run: its split criterion never met within the
rounds, its trigger never fired. Its final ARI is then 0 by default, not by failure. Each such method says so from
the run's own records (its reader in cflcore.strategies.run_records, on its server.parquet); this module asks for
every loaded run, knowing no method by name, and puts the answer beside the run's scores (:data:`NO_ACTION`), where
the cross table reads it (cflcore.report.cross_paper).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from ..defaults import schema_defaults
from ..plugin import NoAction, no_action_text

if TYPE_CHECKING:
    from .runs import LoadedRun

NO_ACTION = "no_action"
"""The sweep summary's column (:func:`with_actions`): the run's :class:`cflcore.plugin.NoAction`, None where it acted
or its records cannot tell."""


def run_no_action(run: "LoadedRun", variant: Mapping[str, Any] | None) -> NoAction | None:
    """Why ``run`` never acted, from its method's reader (``variant``: its config entry, ``method`` and parameters);
    None where it acted, where the variant or its method is unknown, or where the run has no server records."""
    from ..strategies import STRATEGIES
    from ..strategies.run_records import did_not_act

    if not variant or str(variant.get("method")) not in STRATEGIES.names():
        return None
    method = str(variant["method"])
    schema = STRATEGIES.get(method).params_schema
    params = {**schema_defaults(schema), **{k: v for k, v in variant.items() if k in schema}}
    return did_not_act(method, run.server, params)


def with_actions(summary: pd.DataFrame, loaded: Sequence["LoadedRun"],
                 algorithms: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """``summary`` (cflcore.report.sweeps.sweep_summary of ``loaded``: one row per loaded run, in order) with the
    column :data:`NO_ACTION`; ``algorithms``: the study's variants (the front page context's ``algorithms``)."""
    if summary is None or not len(summary):
        return summary
    if len(summary) != len(loaded):
        raise ValueError(f"the summary has {len(summary)} rows for {len(loaded)} runs")
    return summary.assign(**{NO_ACTION: [run_no_action(run, algorithms.get(run.spec.algorithm)) for run in loaded]})


def cell_actions(runs: pd.DataFrame) -> tuple[str, str]:
    """A cell's runs (seeds) -> (why it did not act, "k of n seeds acted"): the first where no seed acted (the
    seeds' reasons joined into ranges, cflcore.plugin.no_action_text), the second where some did and some did not;
    ("", "") where every seed acted or the summary has no :data:`NO_ACTION` column."""
    if not len(runs) or NO_ACTION not in runs:
        return "", ""
    reasons = [r for r in runs[NO_ACTION] if isinstance(r, NoAction)]
    if not reasons:
        return "", ""
    if len(reasons) == len(runs):
        return no_action_text(reasons), ""
    return "", f"{len(runs) - len(reasons)} of {len(runs)} seeds acted"


def references(algorithms: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The study's variants that are reference bands, not contestants (a method's records' ``reference``,
    cflcore.strategies.run_records), with the band's words; ``algorithms``: variant -> its config entry."""
    from ..strategies.run_records import records

    out = {}
    for variant, entry in (algorithms or {}).items():
        band = records(str(entry.get("method"))).reference if entry.get("method") else None
        if band:
            out[str(variant)] = band
    return out
