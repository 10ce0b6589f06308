"""Whether each method's home check holds, for the cross-paper table (``report.cross_paper.home_checks``).

A method's home check is the claim that runs it on its authors' own recipe, declared by the paper plug-in that owns
the claim (cflcore.report.papers.base.Paper.home_claims: strategy method -> claim id); the claim is decided in its
home-check study, whose report writes the verdict to its ``tables/paper_claims.csv``. The table reads that file at
report time (where it lies: cflcore.report.front_context.home_check_files) and gives each method one of:

* the verdict as written there: "holds", "contradicted", "n/a", or "inconclusive (lean toward|against)", followed by
  the mark that study's report wrote beside it ("; fails at home" or "; not testable here: <why>",
  cflcore.report.papers.base.home_mark) where it wrote one;
* :data:`NOT_RUN` while no listed study has written the claim's verdict;
* :data:`SEED_STUDY` for a method whose home is a seed's own study (the seeds' papers declare them:
  cflcore.report.papers.base.seed_study_methods), where that study's paper check decides it;
* :data:`NO_HOME_CHECK` for a method no paper declares a home check for.

Every method that has a home check and whose value is not "holds" is marked wherever it is ranked (:func:`marks`):
:data:`NOT_TESTABLE_MARK` where its home check is not testable here (its runs cannot decide the claim, whatever the
method does: not a verdict on it), :data:`NOT_RUN_MARK` where it was :data:`NOT_RUN` (no verdict either way), else
:data:`NOT_HOLDING_MARK` (it fails at home);
:data:`NO_HOME_CHECK` is printed, not marked (no authors' code to check against, or a reference such as FedAvg). A study that lists no home checks gets "" everywhere and no marks.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from .papers.base import NOT_TESTABLE, home_claims, home_mark, seed_study_methods
from .statistics.verdicts import HOLDS, INCONCLUSIVE, NONE

NOT_RUN = "not run"
"""No listed home-check study has written the claim's verdict (its ``paper_claims.csv`` is absent or lacks it)."""
SEED_STUDY = "checked in its seed's study"
NO_HOME_CHECK = "no home check"
NOT_HOLDING_MARK = "†"
"""Beside a method's name wherever it is ranked, where it fails at home (its home check does not hold on runs that
could decide it; :func:`marks`)."""
NOT_TESTABLE_MARK = "‡"
"""Beside a method's name wherever it is ranked, where its home check is not testable here (:func:`marks`)."""
NOT_RUN_MARK = "°"
"""Beside a method's name wherever it is ranked, where its home check has not been run for this report: no verdict
either way (:func:`marks`)."""
LEGEND = (f"{NOT_HOLDING_MARK} = fails at home: the method's home check (its authors' own recipe, in its own study) "
          f"does not hold on runs that could decide it; {NOT_TESTABLE_MARK} = {NOT_TESTABLE}: its home "
          f"check's runs cannot decide the claim whatever the method does; {NOT_RUN_MARK} = its home check is {NOT_RUN} "
          "for this report (column home_check of tables/cross_paper.csv)")
"""The section's sentence on the mark."""


def verdict_text(rows: pd.DataFrame) -> str:
    """A claim's row of ``paper_claims.csv`` as the column reads it: its verdict, with the lean of an inconclusive
    one ("inconclusive (lean against)")."""
    row = rows.iloc[0]
    holds, lean = str(row.get("holds", "")), str(row.get("lean", "") or "")
    return f"{holds} (lean {lean})" if holds == INCONCLUSIVE and lean not in ("", NONE) else holds


def claim_verdict(claim_id: str, files: Sequence[str]) -> str:
    """The verdict of ``claim_id`` in the first of ``files`` (``paper_claims.csv`` files) that holds it, with the mark
    its study wrote beside it in the same tables folder ("holds; …" never: a holding check has none);
    :data:`NOT_RUN` where none does."""
    for path in files:
        if Path(path).is_file():
            claims = pd.read_csv(path, dtype=str, keep_default_na=False)
            rows = claims[claims["claim_id"] == claim_id] if "claim_id" in claims else claims.iloc[0:0]
            if len(rows):
                mark = home_mark(claim_id, Path(path).parent)
                return verdict_text(rows) + (f"; {mark}" if mark else "")
    return NOT_RUN


def home_check_verdicts(context: Mapping[str, Any], variants: Sequence[str]) -> dict[str, str] | None:
    """Each variant -> its home check's verdict (module docstring), from the front page's context
    (cflcore.report.front_context.front_page_context: the variants' methods and ``home_checks``, their files);
    None where the study lists no home checks."""
    files = context.get("home_checks")
    if files is None:
        return None
    claims, seeds = home_claims(), seed_study_methods()
    algorithms = context.get("algorithms") or {}
    out = {}
    for variant in variants:
        method = str((algorithms.get(variant) or {}).get("method") or variant)
        if method in claims:
            out[variant] = claim_verdict(claims[method], files.get(variant) or [])
        elif seeds and (variant.startswith(seeds) or method.startswith(seeds)):
            out[variant] = SEED_STUDY
        else:
            out[variant] = NO_HOME_CHECK
    return out


def marked(verdict: str) -> bool:
    """Whether a method with this home-check value is marked: a value given (the study lists home checks) that is
    neither "holds", :data:`SEED_STUDY` nor :data:`NO_HOME_CHECK`."""
    return bool(verdict) and verdict not in (HOLDS, SEED_STUDY, NO_HOME_CHECK)


def mark_of(verdict: str) -> str:
    """A home-check value's mark: :data:`NOT_RUN_MARK` where it was not run, :data:`NOT_TESTABLE_MARK` where it is
    not testable here, :data:`NOT_HOLDING_MARK` where it is otherwise :func:`marked`, "" else."""
    if not marked(verdict):
        return ""
    if verdict == NOT_RUN:
        return NOT_RUN_MARK
    return NOT_TESTABLE_MARK if f"; {NOT_TESTABLE}" in verdict else NOT_HOLDING_MARK


def marks(tidy: pd.DataFrame) -> dict[str, str]:
    """Method -> " †", " ‡" or " °" (:func:`mark_of`) for the methods of the cross table (its ``home_check`` column) that are
    :func:`marked`."""
    if "home_check" not in tidy or tidy.empty:
        return {}
    return {m: f" {mark_of(str(v))}" for m, v in zip(tidy["method"], tidy["home_check"]) if marked(str(v))}
