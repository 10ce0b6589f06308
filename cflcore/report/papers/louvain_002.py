"""002's claims (Louvain community CFL, §V-B): Figs. 2-5 and the superclass split, checked on the study's runs
with the framework's verdicts, leans and reasons (:mod:`cflcore.report.statistics.verdicts`: paired per-seed t-tests, the standard error floored at the
metric's resolution, Holm over a claim's parts; a difference within the seed noise is inconclusive).

Choices fixed before the data: the silhouette is the authors' (:func:`silhouette_of`); resolution parts pair over
(seed, m_k) (:data:`MK_PAIR_KEYS`); AVG and Late are compared with 1NN (:data:`AVG_LATE_COMPARATOR`); IFCA's W_t
parts are n/a (:data:`IFCA_WT_NA`); Fig. 2 is read round by round (:func:`separation_rounds`). ARI claims that a
labels-only baseline (:func:`labels_only_ari`) also holds are sanity checks, not evidence."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ... import filenames as fn
from ..statistics.verdicts import (PAIR_KEYS, SANITY, SIDE_ALPHA, Part, above, assess, cell, combine, comparable, comparison,
                        difference, greater, t_interval, threshold)
from ._louvain_002_measures import (  # noqa: F401  (the paper's names, read by its tables and tests)
    AVG_SILHOUETTE, COMMUNITIES_FOUND, EQ2_MODULE, FIG3, FIG4, HALF_ARI_CLOSE_TO_ZERO, LABELS_ONLY_ARI, LATE_OWN, SPREAD,
    SUPERCLASS, W_T, differs, labels_only_ari, separation_rounds, silhouette_levels, similarity_convergence,
    with_labels_only)
from .base import (ClaimData, ClaimResult, Paper, Role, SettingHome, claim, factor_values, fmt, register_paper, result, select,
                   silhouette_column, verdict)

PAPER = "002"
FLAT_DRIFT = 0.1  # "minimal variation over rounds": the drift (second half − first half) within ± 0.1
MK_PAIR_KEYS = (*PAIR_KEYS, "majority_share")
"""Resolution parts pair over (seed, m_k): each m_k's cell of one seed against the same m_k and seed at another
resolution, pooled over the m_k sweep (002 states the resolution's effect over all of Fig. 3's m_k)."""


def silhouette_of(runs: pd.DataFrame) -> str:
    """The silhouette of 002's verdicts: the authors' (``silhouette_authors``: their evaluator, 0 for one
    community; docs/seed-text-vs-code.md makes the authors' code the default) where recorded, else scikit-learn's
    in the method's space (kept as the ablation: :func:`ablations`)."""
    if runs is not None and "silhouette_authors" in runs and runs["silhouette_authors"].notna().any():
        return "silhouette_authors"
    return silhouette_column(runs)


def against_only(label: str, part: tuple[str, Part]) -> dict[str, Part]:
    """A monotonicity step (e.g. m_k 0.4 not below 0.1): it enters the claim only where it lies against the claim
    beyond the seed noise at its own level (a rise need not show at every step; a fall beyond the noise
    contradicts "rises")."""
    key, p = part
    return {f"{label} ({key.split(': ', 1)[-1]})": p} if assess(p).p_against < SIDE_ALPHA else {}


def sanity_if_labels_suffice(data: ClaimData, row: ClaimResult, parts_for: Any) -> ClaimResult:
    """``row`` as a sanity check where the labels-only baseline holds the same claim (``parts_for(runs, metric)``
    gives the claim's parts on a metric): the split gives the answer away, so the row is no evidence for 002."""
    runs = with_labels_only(data)
    if row.holds != "holds" or runs is None or LABELS_ONLY_ARI not in runs or runs[LABELS_ONLY_ARI].isna().all():
        return row
    base = combine(parts_for(runs, LABELS_ONLY_ARI))
    if base.word != "holds":
        return row
    from dataclasses import replace

    return replace(row, kind=SANITY, reason=row.reason + "; the labels-only baseline (Louvain on the clients' label "
                   "histograms, no training) holds it too: true by the split's construction, a sanity check, no "
                   "evidence for 002")


def _mk_runs(data: ClaimData, resolution: float = 1.0) -> tuple[list[float], list[pd.DataFrame]]:
    shares = factor_values(data.runs, FIG3, "majority_share")
    return shares, [select(data.runs, FIG3, majority_share=float(m), resolution=resolution) for m in shares]


@claim("002", "002-ari-mk", version=2)
def ari_rises_with_majority_share(data: ClaimData) -> ClaimResult:
    text = "ARI rises with the majority share m_k (1NN, resolution 1.0)"
    where = "§V-B1, Fig. 3b"
    data = ClaimData(with_labels_only(data), data.rounds, data.summaries, data.loaded)
    shares, runs = _mk_runs(data)
    if len(shares) < 2:
        return result("002-ari-mk", "002", where, text, "no m_k sweep in this study", None)

    def parts_for(all_runs: pd.DataFrame, metric: str) -> dict[str, Part]:
        cells = [select(all_runs, FIG3, majority_share=float(m), resolution=1.0) for m in shares]
        parts = dict([greater(f"m_k {shares[-1]:g} above m_k {shares[0]:g}", cells[-1], cells[0], metric)])
        for (m0, a), (m1, b) in zip(zip(shares, cells), zip(shares[1:], cells[1:])):
            parts.update(against_only(f"m_k {m1:g} not below m_k {m0:g}", greater("step", b, a, metric)))
        return parts

    ours = "ARI: " + "; ".join(f"m_k {m:g}: {cell(r, 'ari').text()}" for m, r in zip(shares, runs)) + _labels_text(runs)
    return sanity_if_labels_suffice(data, verdict(PAPER, "002-ari-mk", where, text, ours, parts_for(data.runs, "ari")),
                                    parts_for)


@claim("002", "002-mk1", version=2)
def two_communities_at_full_majority(data: ClaimData) -> ClaimResult:
    text = f"At m_k = 1.0 and resolution 1.0, Louvain finds the two communities (ARI ≈ 1, read as ≥ {COMMUNITIES_FOUND})"
    where = "§V-B1, Fig. 3b"
    data = ClaimData(with_labels_only(data), data.rounds, data.summaries, data.loaded)
    runs = select(data.runs, FIG3, majority_share=1.0, resolution=1.0)
    if not len(runs):
        return result("002-mk1", "002", where, text, "no run at m_k 1.0, resolution 1.0", None)
    ari, k = cell(runs, "ari"), cell(runs, "n_clusters")

    def parts_for(all_runs: pd.DataFrame, metric: str) -> dict[str, Part]:
        return dict([threshold(f"ARI ≥ {COMMUNITIES_FOUND}", select(all_runs, FIG3, majority_share=1.0, resolution=1.0),
                               metric, lo=COMMUNITIES_FOUND)])

    row = verdict(PAPER, "002-mk1", where, text, f"final ARI {ari.text()}, {fmt(k.mean, 1)} clusters ({ari.n} seeds)"
                  + _labels_text([runs]), parts_for(data.runs, "ari"))
    return sanity_if_labels_suffice(data, row, parts_for)


def _labels_text(cells: Sequence[pd.DataFrame]) -> str:
    values = [cell(c, LABELS_ONLY_ARI) for c in cells if LABELS_ONLY_ARI in c]
    if not values or not any(np.isfinite(v.mean) for v in values):
        return ""
    return "; labels-only baseline ARI: " + ", ".join(v.text() for v in values)


@claim("002", "002-acc-res", version=2)
def accuracy_depends_on_mk_not_resolution(data: ClaimData) -> ClaimResult:
    text = "Accuracy (W_t) depends on m_k, not notably on the Louvain resolution"
    where = "§V-B1, Fig. 3a"
    shares = factor_values(data.runs, FIG3, "majority_share")
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(shares) < 2 or len(resolutions) < 2 or 1.0 not in resolutions:
        return result("002-acc-res", "002", where, text, "needs an m_k × resolution sweep through 1.0", None)
    at = {(m, r): select(data.runs, FIG3, majority_share=float(m), resolution=float(r)) for m in shares for r in resolutions}
    parts = dict([differs(f"W_t accuracy differs between m_k {shares[0]:g} and {shares[-1]:g} (resolution 1)",
                          at[(shares[0], 1.0)], at[(shares[-1], 1.0)], W_T)])
    for r in resolutions:  # every resolution's accuracy comparable to resolution 1.0's, paired over (seed, m_k)
        if r != 1.0:
            parts.update([comparable(f"resolution {r:g} vs 1 (paired over seed × m_k)",
                                     select(data.runs, FIG3, resolution=float(r)), select(data.runs, FIG3, resolution=1.0),
                                     W_T, keys=MK_PAIR_KEYS)])
    ours = "W_t accuracy: " + "; ".join(f"m_k {m:g}: " + ", ".join(f"res {r:g} {cell(at[(m, r)], W_T).text(3)}"
                                                                   for r in resolutions) for m in shares)
    return verdict(PAPER, "002-acc-res", where, text, ours, parts)


@claim("002", "002-sil-mk", version=2)
def silhouette_rises_with_mk_and_resolution(data: ClaimData) -> ClaimResult:
    text = "Clusters are denser and better separated (silhouette) with more non-iid data and a higher resolution"
    where = "§V-B1, Fig. 3c"
    col = silhouette_of(data.runs)
    shares, runs = _mk_runs(data)
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(shares) < 2:
        return result("002-sil-mk", "002", where, text, "no m_k sweep in this study", None)
    parts = dict([greater(f"m_k {shares[-1]:g} above m_k {shares[0]:g} (resolution 1)", runs[-1], runs[0], col)])
    ours = f"{col} at resolution 1.0: " + "; ".join(f"m_k {m:g}: {cell(r, col).text()}" for m, r in zip(shares, runs))
    if len(resolutions) >= 2:
        lo, hi = min(resolutions), max(resolutions)  # the highest resolution above the lowest, over (seed, m_k)
        parts.update([greater(f"resolution {hi:g} above {lo:g} (paired over seed × m_k)",
                              select(data.runs, FIG3, resolution=float(hi)), select(data.runs, FIG3, resolution=float(lo)),
                              col, keys=MK_PAIR_KEYS)])
    else:
        parts["resolution (no resolution sweep)"] = "missing"
    return verdict(PAPER, "002-sil-mk", where, text, ours, parts)


@claim("002", "002-res-clusters", version=2)
def higher_resolution_fewer_clusters(data: ClaimData) -> ClaimResult:
    text = "A higher Louvain resolution gives fewer, larger clusters"
    where = "§IV-B, §V-B1"
    resolutions = factor_values(data.runs, FIG3, "resolution")
    shares = factor_values(data.runs, FIG3, "majority_share") or [None]
    if len(resolutions) < 2:
        return result("002-res-clusters", "002", where, text, "no resolution sweep in this study", None)
    lo, hi = resolutions[0], resolutions[-1]
    pooled = {r: select(data.runs, FIG3, resolution=float(r)) for r in resolutions}
    # more clusters at the lowest resolution than at the highest, paired over (seed, m_k); no step adding clusters
    parts = dict([greater(f"resolution {lo:g} more clusters than {hi:g} (paired over seed × m_k)", pooled[lo],
                          pooled[hi], "n_clusters", 1, keys=MK_PAIR_KEYS)])
    for r0, r1 in zip(resolutions, resolutions[1:]):
        parts.update(against_only(f"not more clusters at {r1:g} than at {r0:g}",
                                  greater("step", pooled[r0], pooled[r1], "n_clusters", 1, keys=MK_PAIR_KEYS)))
    rows = []
    for m in shares:
        at = {r: select(data.runs, FIG3, resolution=float(r), **({} if m is None else {"majority_share": float(m)}))
              for r in resolutions}
        name = "" if m is None else f"m_k {m:g}: "
        rows.append(name + ", ".join(f"res {r:g} {cell(at[r], 'n_clusters').text(1)}" for r in resolutions))
    return verdict(PAPER, "002-res-clusters", where, text, "final clusters: " + "; ".join(rows), parts)


@claim("002", "002-res-best", version=2)
def resolution_one_is_best(data: ClaimData) -> ClaimResult:
    text = "Resolution 1.0 is the best for community detection (ARI over Fig. 3's m_k sweep)"
    where = "§V-B1, Fig. 3b"
    resolutions = factor_values(data.runs, FIG3, "resolution")
    if len(resolutions) < 2 or 1.0 not in resolutions:
        return result("002-res-best", "002", where, text, "needs a resolution sweep through 1.0", None)
    # 002 names resolution 1.0 and m_k 1.0 the optimum of Fig. 3; at m_k 1.0 alone every resolution saturates at
    # ARI 1, so the parts pool Fig. 3's m_k, paired over (seed, m_k)
    at = {r: select(data.runs, FIG3, resolution=float(r)) for r in resolutions}
    parts = dict(greater(f"resolution 1 above {r:g} (paired over seed × m_k)", at[1.0], at[r], "ari", keys=MK_PAIR_KEYS)
                 for r in resolutions if r != 1.0)
    return verdict(PAPER, "002-res-best", where, text,
                   "ARI over m_k: " + "; ".join(f"resolution {r:g}: {cell(c, 'ari').text()}" for r, c in at.items()),
                   parts)


def _attribution_cells(data: ClaimData, participation: float = 1.0) -> dict[str, pd.DataFrame]:
    return {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": participation})
            for a in ("avg", "1nn", "wnn", "late")}


@claim("002", "002-1nn-wnn", version=2)
def one_nn_beats_wnn(data: ClaimData) -> ClaimResult:
    text = "1NN yields superior metrics to WNN (ARI and W_t accuracy, 100 % participation)"
    where = "§V-B2, Fig. 4"
    cells = _attribution_cells(data)
    if not len(cells["1nn"]) or not len(cells["wnn"]):
        return result("002-1nn-wnn", "002", where, text, "needs 1NN and WNN runs", None)
    parts = dict([greater("ARI: 1NN above WNN", cells["1nn"], cells["wnn"], "ari"),
                  greater("W_t accuracy: 1NN above WNN", cells["1nn"], cells["wnn"], W_T, 3)])
    return verdict(PAPER, "002-1nn-wnn", where, text,
                   f"ARI 1NN {cell(cells['1nn'], 'ari').text()} vs WNN {cell(cells['wnn'], 'ari').text()}; W_t accuracy "
                   f"1NN {cell(cells['1nn'], W_T).text(3)} vs WNN {cell(cells['wnn'], W_T).text(3)}", parts)


@claim("002", "002-participation", version=2)
def full_participation_beats_half(data: ClaimData) -> ClaimResult:
    text = "100 % client participation gives higher scores than 50 % (1NN and WNN, ARI and W_t accuracy)"
    where = "§V-B2, Fig. 4"
    rows, parts = [], {}
    for attribution in ("1nn", "wnn"):
        full = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 1.0})
        half = select(data.runs, FIG4, attribution=attribution, **{"engine.participation": 0.5})
        if not len(full) or not len(half):
            continue
        for metric, label in ((W_T, "W_t acc"), ("ari", "ARI")):
            rows.append(f"{attribution} {label} {cell(full, metric).text()} vs {cell(half, metric).text()}")
            key, status = greater(f"{attribution} {label}: 100 % above 50 %", full, half, metric)
            parts[key] = status
    if not rows:
        return result("002-participation", "002", where, text, "needs 100 % and 50 % runs", None)
    return verdict(PAPER, "002-participation", where, text, "; ".join(rows), parts)


AVG_LATE_COMPARATOR = "1nn"
"""002 §V-B2's "AVG and Late ... comparable accuracy but higher ARI ... silhouette the lowest" compares them with
the strategy the paragraph has just found best ("1NN yields superior metrics"): 1NN, fixed here before any run
(the earlier check picked the more accurate of 1NN / WNN from the data)."""


@claim("002", "002-avg-late", version=2)
def avg_late_highest_ari_lowest_silhouette(data: ClaimData) -> ClaimResult:
    text = "AVG and Late: comparable accuracy, higher ARI and a lower silhouette than 1NN (100 % participation)"
    where = "§V-B2, Fig. 4a-c"
    cells = {a: r for a, r in _attribution_cells(data).items() if len(r)}
    if not {"avg", "late", AVG_LATE_COMPARATOR} <= set(cells):
        return result("002-avg-late", "002", where, text, "needs AVG, Late and 1NN runs", None)
    col = silhouette_of(data.runs)
    metrics = {"ARI": "ari", col: col, "W_t accuracy": W_T}
    other = AVG_LATE_COMPARATOR
    parts = {}
    for mine in ("avg", "late"):
        parts.update([greater(f"{mine} ARI above {other}", cells[mine], cells[other], "ari"),
                      greater(f"{mine} silhouette below {other}", cells[other], cells[mine], col),
                      comparable(f"{mine} W_t accuracy comparable to {other}", cells[mine], cells[other], W_T)])
    ours = " | ".join(f"{label} " + ", ".join(f"{a} {cell(cells[a], m).text(3 if m == W_T else 2)}" for a in cells)
                      for label, m in metrics.items())
    return verdict(PAPER, "002-avg-late", where, text, ours, parts)


IFCA_WT_NA = ("the W_t accuracy part is n/a: IFCA trains k cluster models from round 0 and has no global model; "
              "002 does not say which model its IFCA curves in Figs. 4a and 5a evaluate (its IFCA numbers come from "
              "IFCA's paper), and a W_t built here (e.g. the mean of the k models) would be our construction, not "
              "theirs, so only the ARI part is tested")


@claim("002", "002-ifca", version=2)
def ifca_below_louvain(data: ClaimData) -> ClaimResult:
    text = "IFCA is below Louvain CFL (ARI and W_t accuracy, 100 % participation, m_k 0.7)"
    where = "§V-B2, Fig. 4a-b"
    ifca = select(data.runs, "ifca")
    louvain = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(ifca) or not len(louvain):
        return result("002-ifca", "002", where, text, "needs IFCA and Louvain 1NN runs", None)
    parts = dict([greater("ARI: 1NN above IFCA", louvain, ifca, "ari")])
    ifca_acc = cell(ifca, W_T)
    note = ""
    if np.isfinite(ifca_acc.mean):
        parts.update([greater("W_t accuracy: 1NN above IFCA", louvain, ifca, W_T, 3)])
    else:
        note = IFCA_WT_NA
    return verdict(PAPER, "002-ifca", where, text,
                   f"ARI IFCA {cell(ifca, 'ari').text()} vs 1NN {cell(louvain, 'ari').text()}; W_t accuracy IFCA "
                   f"{ifca_acc.text(3) if np.isfinite(ifca_acc.mean) else 'n/a'} vs 1NN {cell(louvain, W_T).text(3)}",
                   parts, note)


@claim("002", "002-global-order", version=2)
def global_model_avg_above1nn_aboveifca(data: ClaimData) -> ClaimResult:
    text = "The global model W_t is most accurate with AVG, slightly lower with 1NN, lowest with IFCA (100 %)"
    where = "§V-B3, Fig. 5a"
    avg = select(data.runs, FIG4, attribution="avg", **{"engine.participation": 1.0})
    one = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    a, o = cell(avg, W_T), cell(one, W_T)
    if not (np.isfinite(a.mean) and np.isfinite(o.mean)):
        return result("002-global-order", "002", where, text, "W_t is not recorded for AVG and 1NN runs", None)
    parts = dict([greater("AVG above 1NN", avg, one, W_T, 3)])
    ifca = select(data.runs, "ifca")
    i = cell(ifca, W_T)
    note = ""
    if np.isfinite(i.mean):
        parts.update([greater("1NN above IFCA", one, ifca, W_T, 3)])
        ifca_text = i.text(3)
    else:
        ifca_text = "n/a"
        note = "the 1NN-above-IFCA part is n/a: " + IFCA_WT_NA.split(": ", 1)[1].replace(", so only the ARI part is tested", "")
    return verdict(PAPER, "002-global-order", where, text,
                   f"W_t accuracy on the held-out set: AVG {a.text(3)}, 1NN {o.text(3)}, IFCA {ifca_text}", parts, note)


@claim("002", "002-avg-sil", version=2)
def avg_silhouette_half_and_flat(data: ClaimData) -> ClaimResult:
    level, width = AVG_SILHOUETTE
    text = f"AVG's silhouette stays ≈ {level} (read as {level} ± {width}) with minimal variation over rounds (100 %)"
    where = "§V-B3, Fig. 5b"
    runs = select(data.runs, FIG4, attribution="avg", **{"engine.participation": 1.0})
    col = silhouette_of(data.rounds if data.rounds is not None and len(data.rounds) else data.runs)
    levels, drifts = silhouette_levels(data.rounds, runs, col)
    if not len(runs) or not len(levels):
        return result("002-avg-sil", "002", where, text, "needs AVG's per-round silhouette", None)
    lv, dr = t_interval(levels.to_numpy()), t_interval(drifts.to_numpy())  # drifts: each seed against itself
    parts = {f"level within {level} ± {width}: {lv.text(2, signed=False)}": Part(lv, level - width, level + width),
             f"flat: drift (second half − first half of the rounds) within ± {FLAT_DRIFT:g}: {dr.text()}":
                 Part(dr, -FLAT_DRIFT, FLAT_DRIFT)}
    return verdict(PAPER, "002-avg-sil", where, text,
                   f"{col} of AVG over rounds 1..: per-seed mean {lv.text(2, signed=False)}, drift {dr.text()}", parts)


@claim("002", "002-half-1nn", version=2)
def one_nn_half_participation_loses_communities(data: ClaimData) -> ClaimResult:
    text = (f"At 50 % participation 1NN's ARI falls close to 0 (read as ≤ {HALF_ARI_CLOSE_TO_ZERO}) while AVG and Late "
            f"keep the communities (≥ {COMMUNITIES_FOUND})")
    where = "§V-B3, Fig. 5c"
    half = {a: select(data.runs, FIG4, attribution=a, **{"engine.participation": 0.5}) for a in ("1nn", "avg", "late")}
    if not len(half["1nn"]):
        return result("002-half-1nn", "002", where, text, "needs 1NN at 50 %", None)
    parts = dict([threshold(f"1NN ARI ≤ {HALF_ARI_CLOSE_TO_ZERO}", half["1nn"], "ari", hi=HALF_ARI_CLOSE_TO_ZERO)])
    for a in ("avg", "late"):
        parts.update([threshold(f"{a} ARI ≥ {COMMUNITIES_FOUND}", half[a], "ari", lo=COMMUNITIES_FOUND)])
    return verdict(PAPER, "002-half-1nn", where, text,
                   "final ARI at 50 %: " + ", ".join(f"{a} {cell(r, 'ari').text()}" for a, r in half.items()), parts)


@claim("002", "002-global", version=2)
def community_models_beat_global(data: ClaimData) -> ClaimResult:
    text = "Community models beat the global model W_t on their clients' validation data (1NN, 100 %)"
    where = "§V-B3, Fig. 6"
    runs = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    if not len(runs) or "global_acc" not in runs or runs["global_acc"].isna().all():
        return result("002-global", "002", where, text, "W_t is not recorded for these runs", None)
    d = difference(runs, runs, "local_acc", "global_acc")
    return verdict(PAPER, "002-global", where, text,
                   f"community {cell(runs, 'local_acc').text(3)} vs global {cell(runs, 'global_acc').text(3)} (local test sets)",
                   dict([comparison("community above global", d, digits=3)]))


@claim("002", "002-fig2", version=2)
def normalised_similarity_separates_communities(data: ClaimData) -> ClaimResult:
    text = ("With normalised distances (eq. 3) the communities separate sooner in training than with the raw "
            "distances (Fig. 2)")
    where = "§V-B1, Fig. 2"
    runs = select(data.runs, FIG4, attribution="1nn", **{"engine.participation": 1.0})
    loaded = {(r.spec.dataset, r.spec.clients, r.spec.split, r.spec.seed, r.spec.algorithm): r for r in data.loaded}
    rows = []
    for _, row in runs.iterrows():
        run = loaded.get((row["dataset"], row["clients"], row["split"], row["seed"], row["algorithm"]))
        path = None if run is None else Path(run.spec.run_dir) / fn.DIVERGENCE
        truth = None if run is None else (run.manifest or {}).get("cluster_of_client")
        if path is None or not path.exists() or not truth:
            continue
        found = separation_rounds(pd.read_parquet(path), truth, int(row["seed"]))
        if found["rounds"]:
            rows.append({"dataset": row["dataset"], "clients": row["clients"], "seed": row["seed"], **found})
    if not rows:
        return result("002-fig2", "002", where, text,
                      "needs the recorded distance matrices of 1NN at 100 % (divergence.parquet) and the true communities",
                      None)
    frame = pd.DataFrame(rows)
    d = difference(frame, frame, "raw", "normalised")
    same, total = int(frame["same_partition"].sum()), int(frame["rounds"].sum())
    ours = (f"first round (1-based) whose Louvain partition finds the communities (ARI ≥ {COMMUNITIES_FOUND}), 1NN "
            f"100 %: normalised {cell(frame, 'normalised').text(1)}, raw {cell(frame, 'raw').text(1)}; the two "
            f"transforms give one partition in {same} of {total} recorded rounds")
    note = ("the two transforms give one partition in every recorded round: on this proxy Fig. 2's difference does "
            "not reach the clustering" if same == total else "")
    return verdict(PAPER, "002-fig2", where, text, ours,
                   dict([comparison("rounds to separation, raw − normalised", d, digits=1)]), note)


def _labels_against_classes(run: Any) -> tuple[float, float, int] | None:
    """(ARI against the class groups, ARI against the majority classes, clusters) of a run's final partition."""
    from sklearn.metrics import adjusted_rand_score

    path = Path(run.spec.run_dir) / fn.HISTORY
    majority = (run.manifest or {}).get("majority_class_of_client")
    if not path.exists() or not majority:
        return None
    history = pd.read_parquet(path, columns=["round", "client", "cluster"])
    final = history[history["round"] == history["round"].max()].sort_values("client")
    found = final["cluster"].to_numpy()
    classes = np.asarray(majority)[final["client"].to_numpy()]
    groups = np.asarray((run.manifest or {}).get("cluster_of_client") or [])
    truth = groups[final["client"].to_numpy()] if len(groups) else None
    ari_groups = float(adjusted_rand_score(truth, found)) if truth is not None else float("nan")
    return ari_groups, float(adjusted_rand_score(classes, found)), int(len(np.unique(found)))


@claim("002", "002-superclass", version=2)
def superclass_communities(data: ClaimData) -> ClaimResult:
    text = (f"Louvain groups clients by superclass (the group of their majority class), not by class: ARI ≥ "
            f"{COMMUNITIES_FOUND} against the groups at m_k 0.7, resolution 1.0")
    where = "§V-B1 (animals / vehicles)"
    runs = select(data.runs, SUPERCLASS)
    if not len(runs):
        return result("002-superclass", "002", where, text,
                      "no superclass-like split in this study (CIFAR-10's majority split is one already)", None)
    rows, parts = [], {}
    loaded = {(r.spec.dataset, r.spec.clients, r.spec.split, r.spec.seed, r.spec.algorithm): r for r in data.loaded}
    for attribution, group in runs.groupby("attribution") if "attribution" in runs else [("1nn", runs)]:
        k = cell(group, "n_clusters")
        against = []
        for _, row in group.iterrows():
            key = (row["dataset"], row["clients"], row["split"], row["seed"], row["algorithm"])
            found = _labels_against_classes(loaded[key]) if key in loaded else None
            if found is not None:
                against.append({"dataset": row["dataset"], "clients": row["clients"], "seed": row["seed"],
                                "groups": row["ari"], "classes": found[1]})
        by = pd.DataFrame(against)
        rows.append(f"{attribution}: ARI vs groups {cell(group, 'ari').text()}, vs majority classes "
                    f"{cell(by, 'classes').text()}, {fmt(k.mean, 1)} clusters")
        parts.update([threshold(f"{attribution} ARI vs groups ≥ {COMMUNITIES_FOUND}", group, "ari", lo=COMMUNITIES_FOUND)])
        if len(by):
            d = difference(by, by, "classes", "groups")
            if above(d) == "yes":
                parts[comparison(f"{attribution} found the majority classes rather than the groups (ARI vs classes "
                                 f"− vs groups)", d, "no")[0]] = "no"
    return verdict(PAPER, "002-superclass", where, text, "; ".join(rows), parts,
                   "distance matrices ordered by group: figures/louvain_groups/")


CONCEPT = "louvain-concept"
"""The variant of config/louvain-002-concept.yaml: 1NN at resolution 1 on communities that differ by a concept shift
only (rotation, label swap), every client with the same label distribution."""


@claim("002", "002-concept", version=2)
def communities_beyond_the_labels(data: ClaimData) -> ClaimResult:
    """Reading fixed before the concept proxy's data (config/louvain-002-concept.yaml): on each of its splits, 1NN's
    final ARI minus the labels-only baseline's (:func:`labels_only_ari`, the same run's split), paired per seed, is
    above 0 beyond the seed noise. Where the communities hold one label distribution, the baseline has nothing to
    read, so the claim asks whether the trained updates carry the communities: evidence for 002, not the split's
    construction."""
    text = ("Louvain finds communities the clients' training carries, not only their label histograms: on communities "
            "that differ by a concept shift only, 1NN's final ARI is above the labels-only baseline's")
    where = "§V-B1, on a proxy whose communities no label histogram shows"
    runs = select(with_labels_only(data), CONCEPT)
    if not len(runs):
        return result("002-concept", "002", where, text, "no concept-shift community split in this study "
                      "(config/louvain-002-concept.yaml)", None)
    rows, parts = [], {}
    for split, group in runs.groupby("split_base", sort=True):
        rows.append(f"{split}: 1NN ARI {cell(group, 'ari').text()}, {fmt(cell(group, 'n_clusters').mean, 1)} clusters, "
                    f"labels-only {cell(group, LABELS_ONLY_ARI).text()}")
        parts.update([comparison(f"{split}: 1NN above the labels-only baseline",
                                 difference(group, group, "ari", LABELS_ONLY_ARI))])
    return verdict(PAPER, "002-concept", where, text, "; ".join(rows), parts)


@register_paper("002")
class Louvain002(Paper):
    """002: Louvain community CFL (Louvain communities on the trusted-distance graph; AVG / 1NN / WNN / Late
    attribution, partial participation); its own tables (:mod:`._louvain_002_tables`): the one-factor ablations and
    the proxy knob's spread beside the labels-only baseline."""

    title = "Louvain CFL (002)"
    homes = {PAPER: SettingHome("Louvain CFL's settings", methods=("louvain",), accuracy="pf1")}
    table_titles = {
        "louvain_002_ablations": "002's one-factor ablations: which departure option moves which cell",
        "louvain_002_spread": "002's proxy knob: 1NN's ARI beside the labels-only baseline's per group_spread and m_k",
    }
    output_titles = {
        "sweeps": "Factor sweeps: final scores against the swept values (002 Figs. 3-4)",
        "round_envelopes": "Per-round scores, mean and std envelope over seeds (002 Fig. 5)",
        "louvain_groups": "Client distances ordered by superclass-like group and majority class (002 §V-B1)",
    }
    roles = {
        "fig3": Role("variant", FIG3, "Louvain swept over the majority share m_k and the resolution (Figs. 3, 5)"),
        "fig4": Role("variant", FIG4, "Louvain swept over the attribution and the participation (Fig. 4)"),
        "superclass": Role("variant", SUPERCLASS, "Louvain on superclass-like communities (§V-B1)"),
        "concept": Role("variant", CONCEPT, "Louvain on communities the labels do not give away"),
        "spread": Role("variant", SPREAD, "Louvain over the proxy knob group_spread"),
        "eq2_module": Role("variant", EQ2_MODULE, "the ablation of eq. 2's module"),
        "late_own": Role("variant", LATE_OWN, "the ablation of Late's own model"),
        "ifca": Role("variant", "ifca", "IFCA, Fig. 4's baseline"),
    }

    @classmethod
    def tables(cls, data: ClaimData, checked: bool) -> dict[str, pd.DataFrame]:
        from ._louvain_002_tables import ablations, spread_table

        runs = data.runs if checked else pd.DataFrame()
        return {"louvain_002_ablations": ablations(runs, data.rounds if checked else None),
                "louvain_002_spread": spread_table(runs, data.loaded)}
