"""Claims about federations that move (``report.paper_checks: [dynamics]``), checked on the dynamics study
(config/dynamics-offline.yaml): a rotation split where a third of the clients switch group at mid-run
(cflcore.data.drift), one where a whole group is absent for a stretch of rounds and one with stragglers
(cflcore/fl/participation.py), and the bytes each method sends (traffic.parquet, ``Strategy.traffic``). Written
before any run of that study (issue 69: the claims are committed before the run).

Source of the question: ANDA and Flux (arXiv 2511.22305), Fielding (arXiv 2411.01580) and microsoft/FedDrift study
groups that drift over rounds, which is where a one-shot clustering (OCFL, BCL: the partition is fixed at its
clustering round) and a per-round one (IFCA's loss-based assignment, Louvain's per-round communities) should part
ways. Every claim takes the framework's rule in force (:mod:`cflcore.report.statistics.rules`): a level on ARI is a
share of seeds (at least 80 %, the exact binomial test), a level on the lag the t-interval of the per-seed values;
within the seed noise a part is ``inconclusive``, beyond it the other way ``contradicted``, and a study without the
setting gives ``n/a``.

The absent group (:data:`QUIET_SPLIT`, group :data:`QUIET_GROUP` absent in rounds :data:`QUIET_ROUNDS`, inclusive)
is read from each run's per-round ARI (clustering.parquet ``round`` rows, every client's current cluster against the
true groups): the round before the window, and :data:`WITHIN_ROUNDS` rounds after the group's return. The downlink
is the sum over the rounds of ``bytes_down`` (traffic.parquet), IFCA's against FedAvg's (``bnc``) of the same seed
and setting: the same clients are sampled in every round (the sample is a draw of seed, round and client,
cflcore.fl.participation), so the ratio is the models per client IFCA sends, k (the true number of groups: IFCA runs
``k: oracle`` here).

The ARI of a run is read against each round's ground truth (cflcore.evaluate.clustering): the final ARI is the
partition of the last round against the groups after the switch. The re-clustering lag (cflcore.metrics.drift) is read
from the run's ``switch`` row; a lag of "never" counts as the rounds left after the switch (more than any bound here).

The label-skew drift (:data:`LABEL_SKEW_SWITCH`, added before any run of it, after the rotation claims' premise was
met in no seed of the first run, docs/results.md): the heterogeneity study's label skew (two classes whole per
group, the others at 1/28), where its histogram-reading methods found the groups in 6 of 6 seeds at 20 rounds, with
the rotation drift's schedule (a mover holds a fresh sample of its new group's class distribution,
cflcore.data.drift). Its two claims read the rotation claims' readings with the premise made a gate
(:func:`premised_parts`): a method that had not found the groups before the switch is set aside and named, the
reading is taken on the seeds where it had, and with no method left the claim is n/a. The one-shot reading is then
about a partition fixed before the switch (a clustering round after it is a pre-switch ARI of 0), which the rotation
reading did not condition on.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...evaluate.clustering import PRE_SWITCH_ARI, RECLUSTERING_LAG, SWITCH_KIND, SWITCH_LAST_ROUND
from ..statistics.seed_stats import FOUND_ARI
from ..statistics.verdicts import CONTRADICTED, threshold, verdict_word
from ._dynamics_table import Setting, dynamics_table
from .base import ClaimData, ClaimResult, Paper, Role, claim, register_paper, result, select, verdict

PAPER = "dynamics"
SUDDEN_SWITCH = "rotation-switch"  # a rotation split where a third of the clients switch group at mid-run
ONE_SHOT = ("ocfl", "bcl")  # one-shot methods: the partition is fixed at the clustering round
PER_ROUND = ("ifca", "louvain")  # per-round methods: every round assigns every client again
FOUND = FOUND_ARI  # "recovers the groups": ARI at or above 0.9 (seed_stats)
WITHIN_ROUNDS = 3  # R: a per-round method re-clusters within this many rounds after the switch
LAG = RECLUSTERING_LAG
PRE_SWITCH = PRE_SWITCH_ARI
QUIET_SPLIT = "rotation-quiet"  # a rotation split where one whole group is absent for a stretch of rounds
QUIET_GROUP = 0
QUIET_ROUNDS = (3, 5)  # the absent group's window, inclusive (config/dynamics-offline.yaml, engine.availability)
BEFORE_QUIET, AFTER_RETURN = "ari_before_quiet", "ari_after_return"
STRAGGLER_SPLIT = "rotation-stragglers"  # half of the sampled clients make only part of their local steps
IFCA, FEDAVG = ("ifca",), "bnc"
DOWNLINK_RATIO = "downlink_ratio"
DOWNLINK_TOLERANCE = 0.01  # the ratio within 1 % of k: the bytes are counted, not estimated


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


def quiet_aris(data: ClaimData, split: str) -> pd.DataFrame:
    """One row per run on ``split``: ``dataset``, ``clients``, ``seed``, ``algorithm_base``, ``split_base``,
    :data:`BEFORE_QUIET` (the ARI of the round before :data:`QUIET_ROUNDS`) and :data:`AFTER_RETURN` (the ARI
    :data:`WITHIN_ROUNDS` rounds after the group's return: round last + WITHIN_ROUNDS), from clustering.parquet."""
    first, last = QUIET_ROUNDS
    rows = []
    for run in data.loaded:
        spec, frame = run.spec, run.clustering
        if spec.split != split or frame is None or "kind" not in frame or "ari" not in frame:
            continue
        per_round = frame[frame["kind"] == "round"]
        ari = dict(zip(pd.to_numeric(per_round["round"], errors="coerce"), pd.to_numeric(per_round["ari"], errors="coerce")))
        if first - 1 not in ari or last + WITHIN_ROUNDS not in ari:
            continue
        rows.append({"dataset": spec.dataset, "clients": spec.clients, "seed": spec.seed,
                     "algorithm_base": spec.algorithm, "split_base": spec.split,
                     BEFORE_QUIET: float(ari[first - 1]), AFTER_RETURN: float(ari[last + WITHIN_ROUNDS])})
    return pd.DataFrame(rows)


def downlink_ratios(data: ClaimData) -> pd.DataFrame:
    """One row per (setting, seed, IFCA variant) with a FedAvg (``bnc``) run of the same setting and seed: ``dataset``,
    ``clients``, ``seed``, ``algorithm_base``, ``split_base``, :data:`DOWNLINK_RATIO` (IFCA's bytes down summed over
    the rounds over FedAvg's) and ``k`` (the true number of groups at round 0, the split's manifest)."""
    down, groups = {}, {}
    for run in data.loaded:
        traffic, spec = getattr(run, "traffic", None), run.spec
        if traffic is None or not len(traffic) or "bytes_down" not in traffic:
            continue
        key = (spec.dataset, spec.clients, spec.split, spec.seed)
        down[(*key, spec.algorithm)] = float(pd.to_numeric(traffic["bytes_down"]).sum())
        truth = (getattr(run, "manifest", None) or {}).get("cluster_of_client")
        if truth is not None:
            groups[key] = len(set(truth))
    rows = []
    for (d, n, sp, seed, algorithm), total in down.items():
        base = down.get((d, n, sp, seed, FEDAVG))
        if not algorithm.startswith(IFCA) or not base or (d, n, sp, seed) not in groups:
            continue
        rows.append({"dataset": d, "clients": n, "seed": seed, "algorithm_base": algorithm, "split_base": sp,
                     DOWNLINK_RATIO: total / base, "k": groups[(d, n, sp, seed)]})
    return pd.DataFrame(rows)



@claim(PAPER, "dyn-absent-rejoins")
def absent_group_rejoins(data: ClaimData) -> ClaimResult:
    text = (f"A group absent for a stretch of rounds (group {QUIET_GROUP} in rounds {QUIET_ROUNDS[0]}-{QUIET_ROUNDS[1]}) "
            f"is re-joined to its own cluster on return by a per-round method (IFCA, Louvain) that had found the "
            f"groups before (ARI ≥ {FOUND} the round before the window): ARI ≥ {FOUND} again {WITHIN_ROUNDS} rounds "
            f"after the return")
    aris = quiet_aris(data, QUIET_SPLIT)
    names = _families(aris, PER_ROUND)
    if not names:
        return _na("dyn-absent-rejoins", WHERE, text, f"no per-round run on split {QUIET_SPLIT}")
    parts = {}
    for m in names:
        mine = select(aris, m)
        label, status = threshold(f"{m} ARI before the window", mine.rename(columns={BEFORE_QUIET: "ari"}), "ari",
                                  lo=FOUND)
        parts[label] = status
        label, status = threshold(f"{m} ARI {WITHIN_ROUNDS} rounds after the return",
                                  mine.rename(columns={AFTER_RETURN: "ari"}), "ari", lo=FOUND)
        parts[label] = status
    return verdict(PAPER, "dyn-absent-rejoins", WHERE, text, "; ".join(parts), parts)


@claim(PAPER, "dyn-ifca-k-downlink")
def ifca_costs_k_downlinks(data: ClaimData) -> ClaimResult:
    text = ("IFCA costs k times FedAvg's downlink: it sends each sampled client all k cluster models a round, so its "
            f"bytes down over the run are k times FedAvg's (k the number of true groups; within {DOWNLINK_TOLERANCE:.0%})")
    ratios = downlink_ratios(data)
    names = _families(ratios, IFCA)
    if not names:
        return _na("dyn-ifca-k-downlink", "issue 69 (bytes per round)", text,
                   "no IFCA run with a FedAvg (bnc) run of the same setting and seed")
    parts = {}
    for m in names:
        for sp in dict.fromkeys(ratios["split_base"]):
            mine = select(ratios, m, split_base=sp)
            if not len(mine):
                continue
            k = float(mine["k"].iloc[0])
            label, status = threshold(f"{m} / {FEDAVG} bytes down on {sp} (k = {k:g})", mine, DOWNLINK_RATIO,
                                      lo=k * (1 - DOWNLINK_TOLERANCE), hi=k * (1 + DOWNLINK_TOLERANCE), share=None)
            parts[label] = status
    return verdict(PAPER, "dyn-ifca-k-downlink", "issue 69 (bytes per round)", text, "; ".join(parts), parts)


@claim(PAPER, "dyn-stragglers-found")
def per_round_finds_groups_with_stragglers(data: ClaimData) -> ClaimResult:
    text = (f"With stragglers (each sampled client, with chance one half, makes only part of its local steps, at least "
            f"one), a per-round method (IFCA, Louvain) still finds the groups: its final ARI ≥ {FOUND}. IFCA assigns "
            f"a client by the loss of each cluster model before training, which local work does not change; "
            f"Louvain compares update directions, which a shorter update keeps")
    runs = _on(data.runs, STRAGGLER_SPLIT)
    names = _families(runs, PER_ROUND)
    if not names:
        return _na("dyn-stragglers-found", WHERE, text, f"no per-round run on split {STRAGGLER_SPLIT}")
    parts = dict(threshold(f"{m} final ARI", select(runs, m), "ari", lo=FOUND) for m in names)
    return verdict(PAPER, "dyn-stragglers-found", WHERE, text, "; ".join(parts), parts)


LABEL_SKEW_SWITCH = "label-skew-switch"  # a label-skew split where a third of the clients switch group at mid-run
FINAL_ARI = "ari"  # the ARI of a run's last round against that round's groups


def switch_readings(data: ClaimData, split: str) -> pd.DataFrame:
    """:func:`switch_lags` of the runs on ``split`` with :data:`FINAL_ARI` beside each: the ARI of the run's last round
    (clustering.parquet ``round`` rows) against that round's groups, i.e. after the switch."""
    lags = switch_lags(data, split)
    if not len(lags):
        return lags
    final = {}
    for run in data.loaded:
        spec, frame = run.spec, run.clustering
        if spec.split == split and frame is not None and "kind" in frame and "ari" in frame:
            per_round = frame[frame["kind"] == "round"].sort_values("round")
            if len(per_round):
                final[(spec.dataset, spec.clients, spec.seed, spec.algorithm)] = float(
                    pd.to_numeric(per_round["ari"], errors="coerce").iloc[-1])
    keys = zip(lags["dataset"], lags["clients"], lags["seed"], lags["algorithm_base"])
    return lags.assign(**{FINAL_ARI: [final.get(key, np.nan) for key in keys]})


def premised_parts(readings: pd.DataFrame, names: list[str], metric: str, lo: float, hi: float,
                   what: str) -> tuple[dict, list[str]]:
    """Per method of ``names``: its premise, the groups found before the switch (:data:`PRE_SWITCH` ≥ :data:`FOUND`, a
    share of its seeds), and ``metric`` within [lo, hi] read on the seeds that met it (labelled ``what``). A method
    whose premise alone is contradicted (beyond the seed noise: it had not found the groups) is set aside, not read:
    the second list holds its premise's label."""
    parts, aside = {}, []
    for m in names:
        mine = select(readings, m)
        label, premise = threshold(f"{m} pre-switch ARI", mine, PRE_SWITCH, lo=FOUND)
        if verdict_word({label: premise}) == CONTRADICTED:
            aside.append(label)
            continue
        parts[label] = premise
        met = mine[pd.to_numeric(mine[PRE_SWITCH], errors="coerce") >= FOUND]
        label, status = threshold(f"{m} {what} (the seeds that had found them)", met, metric, lo=lo, hi=hi)
        parts[label] = status
    return parts, aside


def _premised_verdict(fn_id: str, text: str, parts: dict, aside: list[str]) -> ClaimResult:
    if not parts:  # n/a, not contradicted: the claim says nothing of a method that had not found the groups
        return result(fn_id, PAPER, WHERE, text, "; ".join(aside), None,
                      reason="n/a: the premise not met (no method had found the groups before the switch)")
    note = "set aside, the premise not met: " + "; ".join(aside) if aside else ""
    return verdict(PAPER, fn_id, WHERE, text, "; ".join(parts), parts, note=note)


@claim(PAPER, "dyn-label-skew-per-round-recovers")
def per_round_recovers_on_label_skew(data: ClaimData) -> ClaimResult:
    text = (f"On a label-skew split (each group holds two classes whole, the others thinned), a per-round method "
            f"(IFCA, Louvain) that had found the groups before a sudden switch of a third of the clients (ARI ≥ "
            f"{FOUND} the round before it) re-clusters within {WITHIN_ROUNDS} rounds of it: its re-clustering lag is "
            f"at most {WITHIN_ROUNDS} (never counted as the rounds left), read on the seeds where it had found them. "
            f"A method that had not found them (its pre-switch ARI short of {FOUND} beyond the seed noise) is set "
            f"aside; with none left the claim is n/a (the premise not met)")
    readings = switch_readings(data, LABEL_SKEW_SWITCH)
    names = _families(readings, PER_ROUND)
    if not names:
        return _na("dyn-label-skew-per-round-recovers", WHERE, text,
                   f"no per-round run with a switch on split {LABEL_SKEW_SWITCH}")
    parts, aside = premised_parts(readings, names, LAG, 0.0, WITHIN_ROUNDS, "lag")
    return _premised_verdict("dyn-label-skew-per-round-recovers", text, parts, aside)


@claim(PAPER, "dyn-label-skew-one-shot-stays")
def one_shot_stays_on_label_skew(data: ClaimData) -> ClaimResult:
    text = (f"On a label-skew split (each group holds two classes whole, the others thinned), a one-shot method (OCFL, "
            f"BCL) that had found the groups before a sudden switch of a third of the clients (ARI ≥ {FOUND} the round "
            f"before it, so its partition was fixed before the switch) does not recover them after it: its final ARI "
            f"against the groups after the switch stays below {FOUND}, read on the seeds where it had found them. A "
            f"method that had not found them (its pre-switch ARI short of {FOUND} beyond the seed noise, e.g. its "
            f"clustering round after the switch) is set aside; with none left the claim is n/a (the premise not met)")
    readings = switch_readings(data, LABEL_SKEW_SWITCH)
    names = _families(readings, ONE_SHOT)
    if not names:
        return _na("dyn-label-skew-one-shot-stays", WHERE, text,
                   f"no one-shot run with a switch on split {LABEL_SKEW_SWITCH}")
    parts, aside = premised_parts(readings, names, FINAL_ARI, -1.0, FOUND, "final ARI")
    return _premised_verdict("dyn-label-skew-one-shot-stays", text, parts, aside)


DYNAMICS_TABLE = "dynamics_table"  # the front table's catalogue kind (caption report/captions/dynamics_table.rst)
ORACLE, LOCAL = "oracle", "local"  # the reference bands beside FedAvg (cflcore.strategies.run_records)
SETTINGS = (Setting("drift", SUDDEN_SWITCH, "switch"), Setting("availability", QUIET_SPLIT, "window", QUIET_ROUNDS),
            Setting("stragglers", STRAGGLER_SPLIT), Setting("label-skew drift", LABEL_SKEW_SWITCH, "switch"))


@register_paper("dynamics")
class Dynamics(Paper):
    """Federations that move: a one-shot against a per-round clustering after a sudden switch, a group absent for a
    stretch of rounds, stragglers, and IFCA's downlink against FedAvg's."""

    title = "Federations that move (issue 69)"
    roles = {"sudden_switch": Role("split", SUDDEN_SWITCH, "a rotation split where a third of the clients switch "
                                                           "group at mid-run"),
             "absent_group": Role("split", QUIET_SPLIT, "a rotation split where one whole group is absent for a "
                                                        "stretch of rounds"),
             "stragglers": Role("split", STRAGGLER_SPLIT, "a rotation split where half of the sampled clients make "
                                                          "only part of their local steps"),
             "label_skew_switch": Role("split", LABEL_SKEW_SWITCH, "a label-skew split where a third of the "
                                                                   "clients switch group at mid-run"),
             "fedavg": Role("variant", FEDAVG, "FedAvg: one model for every client (a reference band)"),
             "oracle": Role("variant", ORACLE, "the oracle: every client with its true group of round 0 (the upper "
                                               "band)"),
             "local": Role("variant", LOCAL, "local training: every client alone (the lower band)")}
    table_titles = {
        "dynamics_table": "every method on a federation that moves: lag, ARI, accuracy and megabytes per setting",
    }
    front_tables = (DYNAMICS_TABLE,)

    @classmethod
    def tables(cls, data: ClaimData, checked: bool) -> dict[str, pd.DataFrame]:
        bands = {name: cls.roles[key].what for key, name in (("fedavg", FEDAVG), ("oracle", ORACLE), ("local", LOCAL))}
        frame = dynamics_table(data if checked else ClaimData(pd.DataFrame()), SETTINGS, bands, FEDAVG)
        return {DYNAMICS_TABLE: frame}
