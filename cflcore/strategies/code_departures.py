"""The record of a method's departures from its authors' published code (issue 57, item 3), and its check.

A method's home check (config/home-offline.yaml) runs the method on its authors' own demonstration; what still differs
from their code is one :class:`CodeDeparture` per parameter, in a table beside the plug-in (IFCA's:
:mod:`cflcore.strategies.ifca_departures`). Each row names the parameter, the authors' value and where their code sets
it (``path:line`` or ``path:first-last`` in their repository), ours, and why. :func:`check_departures` refuses a
malformed table in one line naming the row and the field. Standard library only: the report may read a table without
importing a plug-in, and no train job imports one (a table edit retrains nothing, docs/architecture.md §11).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Sequence

SOURCE = re.compile(r"^[\w./-]+\.(py|json|md|ipynb|sh):\d+(-\d+)?$")
"""``path:line`` or ``path:first-last`` in the authors' repository, e.g. ``mnist/config.json:9``."""


@dataclass(frozen=True)
class CodeDeparture:
    """One parameter where this project's home check differs from the authors' code."""

    parameter: str
    authors: str  # the authors' value, as their code sets it
    source: str  # where their code sets it: SOURCE
    ours: str  # this project's value in the home check
    why: str  # why it differs, and what it may do to the result


def check_departures(rows: Sequence[CodeDeparture], table: str) -> None:
    """Raise ValueError naming ``table``, the row and the field when a row is malformed: an empty field, a source that
    is not ``path:line``, ours equal to the authors' value (not a departure), or a parameter listed twice."""
    seen: set[str] = set()
    for i, row in enumerate(rows):
        where = f"{table}[{i}] ({getattr(row, 'parameter', '?')!r})"
        if not isinstance(row, CodeDeparture):
            raise ValueError(f"{where}: {type(row).__name__} is not a CodeDeparture")
        for f in fields(CodeDeparture):
            value = getattr(row, f.name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}.{f.name}: {value!r} is not allowed; allowed: a non-empty string")
        if not SOURCE.match(row.source):
            raise ValueError(f"{where}.source: {row.source!r} is not allowed; allowed: path:line or path:first-last "
                             "in the authors' repository")
        if row.ours.strip() == row.authors.strip():
            raise ValueError(f"{where}.ours: {row.ours!r} equals the authors' value; allowed: a departure only")
        if row.parameter in seen:
            raise ValueError(f"{where}.parameter: {row.parameter!r} is listed twice; allowed: one row per parameter")
        seen.add(row.parameter)
