"""Claims fixed before the data: each claim's reading has a version, and the history of its readings is committed.

A claim is registered with the version of its reading (``@claim(paper, version=N)``, :mod:`.base`). The record
``versions.json`` beside this module holds, per claim function, one entry per version: the commit that introduced
the reading, the reading in one line, and :func:`reading_hash` of the claim's code at that version. The test
tests/report/test_claim_versions.py recomputes the hash of every registered claim and fails when it differs from its
version's entry: a reading changed without a new version. Changing a reading is then three steps: a new version on
the decorator, a new entry in the record (its commit, its one-line reading, the new hash) and, where the earlier
reading can still be computed, the earlier reading kept as a function (``@claim(..., earlier={N: fn})``), so the
report shows its verdict beside the new one with the commit that changed it (:func:`.base.check_claims`).

The hash reads the claim function and, transitively, the functions and constants of its paper's code it names (its
module and the private helper modules beside it, ``_<module>_*.py``: the helpers that select its runs, its
thresholds), as syntax trees: comments, docstrings and layout do not count,
code and constant values do. The framework's tests (:mod:`cflcore.report.statistics.verdicts`) are a convention of every claim, versioned
with the project, not here.

The decision rule is part of the reading (issue 67): each entry records the rule its verdict was read under
(``rule``, one of cflcore.report.statistics.rules.RULES), the current version a rule in force (``rules.IN_FORCE``:
``rules.CURRENT``, or ``rules.SEED_STAGES`` for a claim a study reads in the stages it states, report.seed_stages;
the test fails otherwise). A change of rule is a new version whose code hash may be unchanged; the report then reads
the earlier version by the same claim code under the earlier rule (:func:`.base.check_claims`), so its verdict stays
beside the new one. Entries before issue 67 record the rule of 86306b5 (``rules.DIGIT_FLOOR``); the versions read
before 86306b5 (the sign test where the seeds agreed or reached a bound) are not reconstructed.

The record starts at this mechanism's introduction (issue 58): a claim's version 1 names the commit that introduced
the claim; readings edited between that commit and the record's start are not reconstructed, except the label-swap
claim's, which docs/results.md and commit 9402aef document.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import json
import sys
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

RECORD = Path(__file__).with_name("versions.json")
"""The committed history of every claim's readings (see the module's docstring)."""


@dataclass(frozen=True)
class Reading:
    """One version of a claim's reading: its number, the commit that introduced it, the reading in one line, the
    hash of the claim's code at that version (:func:`reading_hash`) and the decision rule it was read under."""

    version: int
    commit: str
    reading: str
    source_sha256: str
    rule: str


def _tree(obj: Callable[..., Any]) -> ast.AST:
    node = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node.decorator_list = []  # the version on the decorator is recorded beside the hash, not in it
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]  # the docstring explains the reading; it is not the reading
    return node


def paper_code(module_name: str) -> list[ModuleType]:
    """A paper's code: its module and its private helper modules beside it (``_<module>_*.py``, e.g.
    ``_louvain_002_measures.py``), which it imports (a paper's module stays under the project's length limit)."""
    module = sys.modules[module_name]
    package, _, stem = module_name.rpartition(".")
    helpers = sorted(Path(str(module.__file__)).parent.glob(f"_{stem}_*.py"))
    return [module, *(importlib.import_module(f"{package}.{path.stem}" if package else path.stem) for path in helpers)]


def reading_hash(fn: Callable[..., Any]) -> str:
    """sha256 of the claim's code: its syntax tree (no docstring, no decorator) and, transitively, those of the functions
    and the values of the constants of its paper's code (:func:`paper_code`) that it names."""
    scope = paper_code(fn.__module__)
    names = set().union(*(vars(m) for m in scope))
    seen: dict[str, str] = {}
    todo = [fn.__name__]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        for module in scope:  # where the name is defined: a function of that module, or a constant it assigns
            if name not in vars(module):
                continue
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__module__ == module.__name__:
                tree = _tree(inspect.unwrap(obj))
                seen[name] = ast.dump(tree, annotate_fields=False)
                todo += sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & names)
                break
            if not inspect.isfunction(obj) and not inspect.ismodule(obj) and not inspect.isclass(obj) \
                    and name in _module_assignments(module.__name__):
                seen[name] = repr(obj)
                break
    text = "\n".join(f"{k}: {v}" for k, v in sorted(seen.items()))
    return hashlib.sha256(text.encode()).hexdigest()


@cache
def _module_assignments(module_name: str) -> frozenset[str]:
    """The names a module assigns at its top level (its own constants, not the names it imports)."""
    tree = ast.parse(inspect.getsource(sys.modules[module_name]))
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return frozenset(names)


def record() -> dict[str, list[Reading]]:
    """The committed history: claim function name → its readings, oldest first."""
    raw = json.loads(RECORD.read_text())
    return {name: [Reading(**entry) for entry in entries] for name, entries in raw.items()}


def history(fn: Callable[..., Any]) -> list[Reading]:
    """``fn``'s readings, oldest first ([] for a claim not in the record)."""
    return record().get(fn.__name__, [])


def entry_for(fn: Callable[..., Any], commit: str = "", reading: str = "") -> dict[str, Any]:
    """The record's entry for ``fn``'s current version (what a new version adds to versions.json)."""
    from ..statistics.rules import CURRENT

    return {"version": int(getattr(fn, "claim_version", 1)), "commit": commit, "reading": reading,
            "source_sha256": reading_hash(fn), "rule": CURRENT}
