"""A claim read in the stages a study states before it adds seeds (issue 67, item 2; :data:`.rules.SEED_STAGES`).

A study that reads a verdict and then runs more seeds takes a second look at the same claim; read at the full level
both times, a wrong verdict has two chances (tests/report/test_verdict_calibration.py measures it above 2.5 %). The
study states the looks before the second one (``report.seed_stages: {claim id: [n1, n]}``, validated in
cflcore/config_checks.py): stage 1 reads the claim on the first n1 of the study's seeds (``study.seeds`` in the
config's order) at one-sided :func:`stage_levels`' first level; only if that verdict is inconclusive (or n/a), stage 2
reads it on all n seeds at the second. Within a stage each part takes its test under :data:`.rules.SHARE_AND_STEP`
(the exact binomial test of a level claim's share of seeds, the step-floored t for a mean or a paired difference), and
Holm's and the intersection–union combinations of :func:`.verdicts.combine` at the stage's level. The levels split
the one-sided :data:`.verdicts.SIDE_ALPHA` equally (Bonferroni, :data:`.rules.STAGES`), so a wrong "holds" (or
"contradicted") at either look has probability at most their sum.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import numpy as np

from . import rules
from .verdicts import CONTRADICTED, HOLDS, SIDE_ALPHA

DECIDED = (HOLDS, CONTRADICTED)
"""The verdicts that stop the reading at a stage; any other (inconclusive, n/a) goes on to the next."""
T = TypeVar("T")


def stage_levels(stages: int = rules.STAGES, total: float = SIDE_ALPHA) -> tuple[float, ...]:
    """Each stage's one-sided level per side: ``total`` split equally over ``stages`` looks (Bonferroni)."""
    return (total / stages,) * stages


@dataclass(frozen=True)
class SeedStages:
    """The looks a study states for a claim: ``sizes``, the seeds each look reads, cumulative (``[6, 18]``: the first
    6, then all 18), of the study's ``seeds`` in the config's order."""

    sizes: tuple[int, ...]
    seeds: tuple[int, ...]

    @property
    def levels(self) -> tuple[float, ...]:
        return stage_levels(len(self.sizes))

    def seeds_at(self, stage: int) -> tuple[int, ...]:
        """The seeds stage ``stage`` (0-based) reads."""
        return self.seeds[:self.sizes[stage]]

    def describe(self, stage: int) -> str:
        """Stage ``stage`` (0-based) in words: "stage 1 (6 seeds: 0–5, one-sided 1.25%)"."""
        seeds = self.seeds_at(stage)
        span = (f"{seeds[0]}–{seeds[-1]}" if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds)))
                else ", ".join(map(str, seeds)))
        return f"stage {stage + 1} ({len(seeds)} seeds: {span}, one-sided {self.levels[stage]:.2%})"


def read_in_stages(read: Callable[[Sequence[int]], T], word: Callable[[T], str], stages: SeedStages) -> list[T]:
    """The claim read stage by stage (``read``: the claim on the given seeds; ``word``: its verdict), each under
    :data:`.rules.SEED_STAGES` at the stage's level, until a stage decides (:data:`DECIDED`) or the last: the readings
    made, the last of them the verdict."""
    readings: list[T] = []
    for stage, level in enumerate(stages.levels):
        with rules.using(rules.SEED_STAGES), rules.at_level(level):
            readings.append(read(stages.seeds_at(stage)))
        if word(readings[-1]) in DECIDED:
            break
    return readings


def stage_note(stages: SeedStages, words: Sequence[str], leans: Sequence[str]) -> str:
    """Which stage decided, in words, from each stage's verdict and lean as :func:`read_in_stages` made them: "decided
    at stage 1 of 2" or "inconclusive at both stages", then every stage read with its verdict."""
    last = len(words) - 1
    head = (f"decided at stage {last + 1} of {len(stages.sizes)}" if words[last] in DECIDED
            else f"{words[last]} at {'both stages' if len(words) == 2 else 'every stage'}" if last == len(stages.sizes) - 1
            else f"{words[last]} at stage {last + 1} of {len(stages.sizes)}")
    return head + ": " + "; ".join(f"{stages.describe(i)}: {w} (lean {l})" for i, (w, l) in enumerate(zip(words, leans)))


def staged_words(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Many tables' verdicts under two stages, vectorised (cflcore.report.statistics.calibration): the first stage's
    word where it decides, else the last stage's."""
    first, last = np.asarray(first), np.asarray(last)
    return np.where(np.isin(first, DECIDED), first, last)
