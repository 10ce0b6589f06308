"""What the report reads about a method beyond its scores, declared beside the method (issue 68): whether a finished
run acted at all, and whether the method is a reference band rather than a contestant.

* A method can be given a setting it could split and still never act in a run: a split criterion never met within
  the rounds, a trigger that never fired. Its final ARI is then 0 by default, not by failure, and a table that ranks
  it reads a budget for a verdict. :meth:`MethodRecords.did_not_act` is the run-time counterpart of
  :meth:`cflcore.plugin.Plugin.cannot_split` (which needs no run): it takes the run's server.parquet (one row per
  round, the diagnostics its ``aggregate`` returned) and the variant's parameters with their defaults, and returns a
  :class:`NoAction` or None (it acted, or the records cannot tell).
* A method's thresholds (:attr:`MethodRecords.thresholds`) are the parameters a study's calibration may tune
  (cflcore/config/calibration.py); every other parameter stays as the study writes it.
* A reference (:attr:`MethodRecords.reference`) decides no grouping: FedAvg (one model), the oracle (the true groups
  from round 0), local training (no aggregation). A cross table shows it apart, as a band every method is read
  against, and never ranks it.

A method registers its records class by its registered strategy name, ``@register_records("scl")``, in a file of its
own beside its strategy (``<method>_records.py``); a method without one acted in every run and is ranked. The records
live apart from the shipped strategy modules on purpose: a train job's code hash covers its strategy's module and
what that imports (docs/architecture.md §11), so a reader of finished runs written there would rerun every shipped
run; no shipped method's train job imports this module (tests/report/test_acted.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from ..plugin import NoAction, no_action_text  # noqa: F401 (the records' result type, re-exported)
from ..registry import Registry

if TYPE_CHECKING:
    import pandas as pd


class MethodRecords:
    """A method's records (module docstring); the defaults: it acts in every run and is ranked."""

    reference: ClassVar[str | None] = None
    """The band this method draws in a cross table ("upper band: ..."), or None for a ranked method."""

    thresholds: ClassVar[tuple[str, ...]] = ()
    """The method's parameters that are thresholds a study calibrates (issue 68 item 3): the only keys a
    ``calibration.grid`` entry may tune for a variant of this method (cflcore/config/calibration.py)."""

    @classmethod
    def did_not_act(cls, server: "pd.DataFrame", params: Mapping[str, Any]) -> NoAction | None:
        return None

    @classmethod
    def check_grid(cls, params: Mapping[str, Any], grid: Mapping[str, list[Any]], field: str) -> None:
        """Cross-field checks of a calibration grid (``grid``: threshold -> values) over a variant's parameters with
        their defaults (``params``): a threshold its other parameters make the method ignore is a ConfigError naming
        ``<field>.<threshold>``. Default: none."""


RECORDS: Registry[type[MethodRecords]] = Registry("method records", package="cflcore.strategies")
"""Method (its registered strategy name) -> its records class (module docstring)."""
register_records = RECORDS.register


def records(method: str) -> type[MethodRecords]:
    """The records of ``method``; :class:`MethodRecords` itself where the method registers none."""
    return RECORDS.get(method) if method in RECORDS else MethodRecords


def thresholds(method: str) -> tuple[str, ...]:
    """The parameters of ``method`` a calibration may tune (:attr:`MethodRecords.thresholds`); none where it
    registers no records."""
    return records(method).thresholds


def did_not_act(method: str, server: "pd.DataFrame | None", params: Mapping[str, Any]) -> NoAction | None:
    """Why a run of ``method`` never acted, from its server records and its parameters with their defaults; None
    where it acted, where the method registers no records, or where the run has no server records."""
    if server is None or not len(server):
        return None
    return records(method).did_not_act(server, params)
