"""Claims about federations whose groups drift (``report.paper_checks: [dynamics]``), checked on the dynamics study
(config/dynamics-offline.yaml): a rotation split where a third of the clients switch group at mid-run
(cflcore.data.drift). Written before any run of that study (issue 69: the claims are committed before the run).

Source of the question: ANDA and Flux (arXiv 2511.22305), Fielding (arXiv 2411.01580) and microsoft/FedDrift study
groups that drift over rounds, which is where a one-shot clustering (OCFL, BCL: the partition is fixed at its
clustering round) and a per-round one (IFCA's loss-based assignment, Louvain's per-round communities) should part
ways. Every claim takes the framework's rule in force (:mod:`cflcore.report.statistics.rules`): a level on ARI is a
share of seeds (at least 80 %, the exact binomial test), a level on the lag the t-interval of the per-seed values;
within the seed noise a part is ``inconclusive``, beyond it the other way ``contradicted``, and a study without the
setting gives ``n/a``.

The ARI of a run is read against each round's ground truth (cflcore.evaluate.clustering): the final ARI is the
partition of the last round against the groups after the switch. The re-clustering lag (cflcore.metrics.drift) is read
from the run's ``switch`` row; a lag of "never" counts as the rounds left after the switch (more than any bound here).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...evaluate.clustering import PRE_SWITCH_ARI, RECLUSTERING_LAG, SWITCH_KIND, SWITCH_LAST_ROUND
from ..statistics.seed_stats import FOUND_ARI
from ..statistics.verdicts import threshold
from .base import ClaimData, ClaimResult, Paper, Role, claim, register_paper, select, verdict

PAPER = "dynamics"
SUDDEN_SWITCH = "rotation-switch"  # a rotation split where a third of the clients switch group at mid-run
ONE_SHOT = ("ocfl", "bcl")  # one-shot methods: the partition is fixed at the clustering round
PER_ROUND = ("ifca", "louvain")  # per-round methods: every round assigns every client again
FOUND = FOUND_ARI  # "recovers the groups": ARI at or above 0.9 (seed_stats)
WITHIN_ROUNDS = 3  # R: a per-round method re-clusters within this many rounds after the switch
LAG = RECLUSTERING_LAG
PRE_SWITCH = PRE_SWITCH_ARI


def _on(runs: pd.DataFrame, split: str) -> pd.DataFrame:
    return select(runs, split_base=split) if runs is not None and len(runs) and "split_base" in runs else pd.DataFrame()


def _families(runs: pd.DataFrame, prefixes: tuple[str, ...]) -> list[str]:
    """The variants (``algorithm_base``) of ``runs`` whose name starts with one of ``prefixes``."""
    if not len(runs):
        return []
    return [a for a in dict.fromkeys(str(a) for a in runs["algorithm_base"]) if a.startswith(prefixes)]


def switch_lags(data: ClaimData, split: str) -> pd.DataFrame:
    """One row per run on ``split`` (its first switch): ``dataset``, ``clients``, ``seed``, ``algorithm_base``,
    ``split_base``, :data:`PRE_SWITCH` and :data:`LAG`, "never" (null) counted as the rounds left after the switch."""
    rows = []
    for run in data.loaded:
        spec, frame = run.spec, run.clustering
        if spec.split != split or frame is None or "kind" not in frame or LAG not in frame:
            continue
        switches = frame[frame["kind"] == SWITCH_KIND]
        rounds = pd.to_numeric(frame.loc[frame["kind"] == "round", "round"], errors="coerce")
        if not len(switches) or not len(rounds):
            continue
        first = switches.iloc[0]
        lag = pd.to_numeric(pd.Series([first[LAG]]), errors="coerce").iloc[0]
        left = float(rounds.max()) - float(first[SWITCH_LAST_ROUND]) + 1.0
        rows.append({"dataset": spec.dataset, "clients": spec.clients, "seed": spec.seed,
                     "algorithm_base": spec.algorithm, "split_base": spec.split,
                     PRE_SWITCH: float(first[PRE_SWITCH]), LAG: left if np.isnan(lag) else float(lag)})
    return pd.DataFrame(rows)


def _na(fn_id: str, where: str, text: str, why: str) -> ClaimResult:
    return verdict(PAPER, fn_id, where, text, "–", {why: "missing"})


WHERE = ("ANDA / Flux (arXiv 2511.22305), Fielding (arXiv 2411.01580), microsoft/FedDrift: groups that drift over "
         "rounds; issue 69")


@claim(PAPER, "dyn-one-shot-stays")
def one_shot_does_not_recover(data: ClaimData) -> ClaimResult:
    text = ("After a sudden switch of a third of the clients at mid-run, a one-shot method (OCFL, BCL), whose partition "
            f"is fixed at its clustering round, does not recover the groups: its final ARI against the groups after "
            f"the switch stays below {FOUND}")
    runs = _on(data.runs, SUDDEN_SWITCH)
    names = _families(runs, ONE_SHOT)
    if not names:
        return _na("dyn-one-shot-stays", WHERE, text, f"no one-shot run on split {SUDDEN_SWITCH}")
    parts = dict(threshold(f"{m} final ARI", select(runs, m), "ari", lo=-1.0, hi=FOUND) for m in names)
    return verdict(PAPER, "dyn-one-shot-stays", WHERE, text, "; ".join(parts), parts)


@claim(PAPER, "dyn-per-round-recovers")
def per_round_recovers(data: ClaimData) -> ClaimResult:
    text = (f"A per-round method (IFCA, Louvain) that had found the groups before a sudden switch (ARI ≥ {FOUND} "
            f"the round before it) re-clusters within {WITHIN_ROUNDS} rounds of it: its re-clustering lag is at most "
            f"{WITHIN_ROUNDS} (a lag of never counts as the rounds left)")
    lags = switch_lags(data, SUDDEN_SWITCH)
    names = _families(lags, PER_ROUND)
    if not names:
        return _na("dyn-per-round-recovers", WHERE, text, f"no per-round run with a switch on split {SUDDEN_SWITCH}")
    parts = {}
    for m in names:
        mine = select(lags, m)
        label, status = threshold(f"{m} pre-switch ARI", mine, PRE_SWITCH, lo=FOUND)
        parts[label] = status
        label, status = threshold(f"{m} lag", mine, LAG, lo=0.0, hi=WITHIN_ROUNDS)
        parts[label] = status
    return verdict(PAPER, "dyn-per-round-recovers", WHERE, text, "; ".join(parts), parts)


@register_paper("dynamics")
class Dynamics(Paper):
    """Federations whose groups drift: a one-shot against a per-round clustering after a sudden switch."""

    title = "Federations whose groups drift (issue 69)"
    roles = {"sudden_switch": Role("split", SUDDEN_SWITCH, "a rotation split where a third of the clients switch "
                                                           "group at mid-run")}
