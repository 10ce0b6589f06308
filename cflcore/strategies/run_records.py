"""What a finished run's own records say about its method: whether it acted at all (issue 68).

A method can be given a setting it could split and still never act in a run: a split criterion never met within the
rounds, a trigger that never fired. Its final ARI is then 0 by default, not by failure, and a table that ranks it
reads a budget for a verdict. The run-time counterpart of :meth:`cflcore.plugin.Plugin.cannot_split` (which needs
no run): a method with such a case registers a reader by its registered name, ``@register_no_action("scl")``, in a
file of its own beside its strategy (``<method>_records.py``); the reader takes the run's server.parquet (one row per
round, the diagnostics its ``aggregate`` returned) and the variant's parameters with their defaults, and returns a
:class:`NoAction` or None (it acted, or the records cannot tell). A method without a reader always acted.

The readers live apart from the strategy modules on purpose: a train job's code hash covers its strategy's module
and what that imports (docs/architecture.md §11), so a reader of finished runs written there would rerun every
shipped run; nothing a train job imports imports this module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..registry import Registry

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class NoAction:
    """Why a run's method never acted: ``reason`` is one clause with ``{name}`` fields, ``figures`` the numbers
    that fill them; a cross table joins the seeds of a cell into ranges (:func:`no_action_text`)."""

    reason: str
    figures: Mapping[str, float] = field(default_factory=dict)

    def text(self) -> str:
        return no_action_text([self])


def _figure_text(values: list[float]) -> str:
    """"0.15" for one value (or several equal), "0.15–0.18" for a range; whole numbers printed whole, others to 2
    significant digits."""
    def one(v: float) -> str:
        return str(int(v)) if float(v).is_integer() and abs(v) < 1e6 else f"{v:.2g}"

    lo, hi = one(min(values)), one(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def no_action_text(reasons: list[NoAction]) -> str:
    """The seeds' reasons as one clause per distinct ``reason``, each figure the range over those seeds
    ("smallest mean update norm 0.15–0.18 (round 17–19) against ε₁ 0.03–0.06"); clauses joined by "; "."""
    by_reason: dict[str, list[NoAction]] = {}
    for r in reasons:
        by_reason.setdefault(r.reason, []).append(r)
    return "; ".join(reason.format(**{k: _figure_text([float(r.figures[k]) for r in rs]) for k in rs[0].figures})
                     for reason, rs in by_reason.items())


NoActionReader = Callable[["pd.DataFrame", Mapping[str, Any]], "NoAction | None"]
NO_ACTION_READERS: Registry[NoActionReader] = Registry("did-not-act reader", package="cflcore.strategies")
"""Method (its registered strategy name) -> its reader (module docstring)."""
register_no_action = NO_ACTION_READERS.register


def did_not_act(method: str, server: "pd.DataFrame | None", params: Mapping[str, Any]) -> NoAction | None:
    """Why a run of ``method`` never acted, from its server records and its parameters with their defaults; None
    where it acted, where the method registers no reader, or where the run has no server records."""
    if server is None or not len(server) or method not in NO_ACTION_READERS:
        return None
    return NO_ACTION_READERS.get(method)(server, params)
