"""The cross-paper comparison: every method on every seed's home settings, in one table (``report.cross_paper``).

Each setting is a split of the study with its home: a seed or a baseline's own paper, each declared by the paper
plug-in that owns it (cflcore.report.papers.base.Paper.homes: the methods it is home to, the clients' accuracy it
scores by, whether it reports Rand). A cell is the final round's score, mean ± sample std over seeds
(cflcore.report.statistics.seed_stats): ARI everywhere, with the seeds that found the groups ("k of n ≥ 0.9", bimodal
cells marked), the Rand index on the settings of a home that reports it, and the clients' accuracy on their own data
as the setting's home scores it. The best ARI of a column is marked ★ only where it beats the runner-up beyond the
seed noise, paired over seeds (the claims' test, cflcore.report.statistics.verdicts.assess); otherwise the best and
every method within the noise of it read "tied". Under the table, each method's average rank over the settings (by
ARI, ties shared) and a critical-difference analysis with the settings as blocks, the seeds averaged within a setting
(Demšar 2006: the blocks are independent data sets; a setting's seeds are repeated measurements on one): Friedman,
then Wilcoxon–Holm, as the OCFL paper's analysis does. Methods given an oracle's advantage (the true number of groups)
are marked, and so, where the study lists home checks (``report.cross_paper.home_checks``), are the methods whose
home check does not hold (:mod:`.home_checks`: column ``home_check``, † beside the name). :func:`what_it_shows` turns
the numbers into sentences: who wins where, who never fails badly, and where each paper's own method stands away from
home.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .acted import cell_actions
from .home_checks import LEGEND, marks
from .papers.base import SettingHome, setting_homes
from .statistics.seed_stats import BIMODAL, FOUND_ARI, MISSED_ARI, from_columns, summary_columns
from .tables import BEST_MARK

MIN_WILCOXON_BLOCKS = 6
"""Below this many blocks the exact two-sided Wilcoxon signed-rank p cannot fall under 0.05 (2 / 2^5 = 0.0625)."""
TIED_MARK = "tied"
"""A column's top cells where the best ARI does not beat the others beyond the seed noise (paired over seeds)."""

FAIL_ARI = 0.3  # "fails badly": a final ARI at or under this on a setting
ACCURACY_NAMES = {"local_bacc": "bal. acc.", "pf1": "PF1", "local_acc": "acc."}
"""How a cell names the clients' accuracy a home scores by (cflcore.report.papers.base.SettingHome.accuracy)."""
ACCURACY_WORDS = {"local_bacc": "balanced accuracy", "pf1": "PF1", "local_acc": "accuracy"}
"""The same in the section's text."""
TITLE = "Comparing the seeds' methods"
"""The section's default title (``report.cross_paper.title`` names another: the heterogeneity study's)."""


NO_GROUPS = "ARI n/a (no ground-truth groups)"
"""A setting whose split has no groups (``ground_truth: false``: shards, dirichlet): its external scores are null."""

CANNOT_SPLIT = "cannot split here"
"""A cell whose method cannot recover the setting's groups by construction (cflcore.plugin.Plugin.cannot_split): the
table prints this and the reason instead of an ARI, and the cell is out of the column's ranks, its mark and the CD."""

DID_NOT_ACT = "did not act"
"""A cell where the method could act but never did in any seed (its reader in cflcore.strategies.run_records, on each
run's records: cflcore.report.acted): printed with the reason and its figures instead of an ARI, and out of the
column's ranks, its mark and the CD, as :data:`CANNOT_SPLIT`. Where some seeds acted the cell is scored on all its
seeds and says "k of n seeds acted"."""

COLUMNS = ["method", "setting", "split", "home", "control", "accuracy_metric", "n_seeds", "cannot_split",
           "did_not_act", "seeds_acted", "reference", "ari_mean",
           "ari_std", "ari_n", "ari_found", "ari_missed", "rand_mean", "rand_std", "rand_n", "accuracy_mean",
           "accuracy_std", "accuracy_n", "best_ari", "tied_best", "home_check"]
"""The tidy table's columns (``tables/cross_paper.csv``), also when the study has no cross-paper block.
``cannot_split``: the reason a method cannot act on the setting ("" where it can); its ARI and Rand are then null.
``did_not_act``: why it acted in none of its seeds there ("" where it acted in some); its ARI and Rand are then null.
``seeds_acted``: "k of n seeds acted" where some seeds acted and some did not ("" otherwise; scored on all seeds).
``reference``: the band a reference method draws (FedAvg, oracle, local: cflcore.strategies.run_records), "" for a
ranked method; a reference is shown apart and never ranked, marked or in the CD.
``home_check``: whether the method's home check holds (:mod:`.home_checks`; "" where the study lists none)."""
MARK_COLUMNS = ["best_ari", "tied_best"]
"""The columns :func:`mark_best` fills."""


@dataclass(frozen=True)
class Setting:
    split: str
    home: str
    label: str
    control: bool = False  # a negative control (quantity skew): no groups to find; out of the ranks, the CD and the marks

    @property
    def accuracy(self) -> str:
        """The clients' accuracy the setting's home scores by (cflcore.report.papers.base.SettingHome.accuracy)."""
        return setting_homes()[self.home].accuracy


def rand_homes() -> list[str]:
    """The homes that report the Rand index beside ARI (:attr:`SettingHome.rand`)."""
    return [home for home, facts in setting_homes().items() if facts.rand]


def accuracy_text() -> str:
    """The section's words for the clients' accuracy of each home: "PF1 on a's and b's; balanced accuracy on c's;
    accuracy elsewhere", the metrics in the order of their first home (:func:`setting_homes`); the default accuracy is
    "elsewhere"."""
    by_metric: dict[str, list[str]] = {}
    for home, facts in setting_homes().items():
        by_metric.setdefault(facts.accuracy, []).append(f"{home}'s")
    default = SettingHome("").accuracy
    parts = [f"{ACCURACY_WORDS.get(metric, metric)} on {' and '.join(homes)}" for metric, homes in by_metric.items()
             if metric != default]
    return "; ".join(parts + [f"{ACCURACY_WORDS[default]} elsewhere"])


def settings_of(block: Mapping[str, Any] | None) -> list[Setting]:
    """``report.cross_paper.settings``: split -> {home, label}, ordered by home paper, then label (the report's
    params reach here as canonical JSON, whose keys are sorted by split name)."""
    out = [Setting(str(split), str(entry["home"]), str(entry.get("label") or split), bool(entry.get("control", False)))
           for split, entry in ((block or {}).get("settings") or {}).items()]
    return sorted(out, key=lambda s: (s.home, s.label))


def cross_table(summary: pd.DataFrame, settings: Sequence[Setting], methods: Sequence[str],
                cannot_split: Mapping[str, Mapping[str, str]] | None = None,
                home_checks: Mapping[str, str] | None = None, references: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Tidy: one row per method × setting with ARI, Rand and accuracy (mean, sample std, seeds; ARI's seeds ≥ 0.9 and
    ≤ 0.2), whether the ARI is the column's best beyond the seed noise (``best_ari``: ★) and whether it is among the
    column's top cells within the noise of each other (``tied_best``: "tied"; :func:`mark_best`). ``summary``:
    sweep_summary (one row per run, final-round scores); ``cannot_split``: method -> split -> why it cannot recover
    that split's groups (cflcore.plugin.PLUGIN_FACTS_KEY): its ARI and Rand are left null there (its accuracy stays:
    it still trained), and so where no seed of the cell acted (``summary``'s cflcore.report.acted.NO_ACTION column,
    :data:`DID_NOT_ACT`); ``home_checks``: method -> whether its home check holds (:mod:`.home_checks`), the
    ``home_check`` column ("" without); ``references``: method -> its band (the ``reference`` column)."""
    rows = []
    for s in settings:
        for method in methods:
            runs = summary[(summary["split_base"] == s.split) & (summary["algorithm"] == method)] if len(summary) else summary
            reason = str(((cannot_split or {}).get(method) or {}).get(s.split) or "")
            idle, acted = ("", "") if reason else cell_actions(runs)
            row: dict[str, Any] = {"method": method, "setting": s.label, "split": s.split, "home": s.home,
                                   "control": s.control, "accuracy_metric": s.accuracy, "n_seeds": int(len(runs)),
                                   "cannot_split": reason, "did_not_act": idle, "seeds_acted": acted,
                                   "reference": str((references or {}).get(method, "")),
                                   "home_check": str((home_checks or {}).get(method, ""))}
            for name, column in (("ari", "ari"), ("rand", "rand"), ("accuracy", s.accuracy)):
                ruled_out = bool(reason or idle) and name != "accuracy"
                values = (pd.to_numeric(runs[column], errors="coerce") if len(runs) and column in runs and not ruled_out
                          else pd.Series(dtype=float))
                row.update(summary_columns(values.to_numpy(dtype=np.float64), name, counts=name == "ari"))
            rows.append(row)
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in MARK_COLUMNS])
    if frame.empty:
        return frame.assign(best_ari=pd.Series(dtype=bool), tied_best=pd.Series(dtype=bool))[COLUMNS]
    return mark_best(frame, summary, settings)[COLUMNS]


def mark_best(frame: pd.DataFrame, summary: pd.DataFrame, settings: Sequence[Setting]) -> pd.DataFrame:
    """Per column (not a control): the method of the best mean ARI against every other method, its ARI minus theirs
    paired over seeds (cflcore.report.statistics.verdicts: the t-test with the standard error floored at ARI's
    resolution, one-sided at the claims' level). The best is marked ★ (``best_ari``) only where it is beyond the noise
    above every other; else it and every method not beyond the noise below it are ``tied_best``."""
    from .statistics.verdicts import Part, assess, difference

    frame = frame.assign(best_ari=False, tied_best=False)
    for s in settings:
        rows = frame[(frame["split"] == s.split) & frame["ari_mean"].notna() & (frame["reference"] == "")]
        if s.control or not len(rows):
            continue
        best = rows["ari_mean"].idxmax()

        def runs(method: str, split: str = s.split) -> pd.DataFrame:
            return summary[(summary["split_base"] == split) & (summary["algorithm"] == method)]

        ahead = {i: assess(Part(difference(runs(frame.at[best, "method"]), runs(frame.at[i, "method"]), "ari"),
                                0.0, strict=True)).toward for i in rows.index if i != best}
        tied = [i for i, beyond in ahead.items() if not beyond]
        if tied:
            frame.loc[[best, *tied], "tied_best"] = True
        else:
            frame.at[best, "best_ari"] = True
    return frame


def average_ranks(tidy: pd.DataFrame) -> pd.Series:
    """Each method's mean rank over the settings by mean ARI (1 = best; ties share the average rank), on the table the
    CD uses (:data:`CD_INCOMPLETE`: a method without a score on every scored setting is left out, every setting
    stays)."""
    from .statistics.cd import complete_scores, mean_ranks

    tidy = tidy[~tidy["control"]] if "control" in tidy else tidy
    tidy = tidy[tidy["reference"] == ""] if "reference" in tidy else tidy
    if tidy.empty:
        return pd.Series(dtype=float)
    complete, _ = complete_scores(tidy.pivot(index="setting", columns="method", values="ari_mean"), CD_INCOMPLETE)
    return mean_ranks(complete).sort_values(kind="stable") if len(complete) else pd.Series(dtype=float)


CD_INCOMPLETE = "methods"
"""How the CD and the average ranks treat a cell without a score (cflcore.report.statistics.cd.complete_scores): a
missing cell is a method that cannot act there, missing because of the method, so the method is left out (and named)
and every setting stays a block; dropping the setting instead would take it away from every other method."""


CD_BLOCKS = "settings as blocks, seeds averaged within a setting (Demšar 2006)"
"""What a block of the CD analysis is (the diagram's title and the section's text say it)."""


def cd_scores(summary: pd.DataFrame, settings: Sequence[Setting], methods: Sequence[str],
              cannot_split: Mapping[str, Mapping[str, str]] | None = None) -> pd.DataFrame:
    """Blocks (settings, not controls) × methods of final ARI, each the mean over the setting's seeds: Demšar (2006)
    ranks methods over independent data sets, and the seeds of one setting are repeated measurements on one data
    set, not independent blocks. A method that cannot act on a setting (``cannot_split``, as :func:`cross_table`) has
    no score there (its column is all null where that holds on every setting): the CD analysis leaves the method out
    and names it (:data:`CD_INCOMPLETE`); the setting stays a block for the others."""
    splits = {s.split: s.label for s in settings if not s.control}
    ruled_out = {(m, sp) for m, by_split in (cannot_split or {}).items() for sp in by_split}
    if len(summary):  # and the cells where no seed acted (:data:`DID_NOT_ACT`)
        ruled_out |= {(m, sp) for (m, sp), runs in summary.groupby(["algorithm", "split_base"], sort=False)
                      if cell_actions(runs)[0]}
    runs = summary[summary["split_base"].isin(splits) & summary["algorithm"].isin(methods)] if len(summary) else summary
    if len(runs):
        runs = runs[[(m, sp) not in ruled_out for m, sp in zip(runs["algorithm"], runs["split_base"])]]
    if not len(runs):
        return pd.DataFrame(columns=list(methods))
    wide = runs.assign(setting=runs["split_base"].map(splits)).pivot_table(
        index="setting", columns="algorithm", values="ari", aggfunc="mean")
    return wide.reindex(columns=list(methods))


REFERENCE = "reference"
"""A reference method's row label suffix: a band, shown under the ranked methods (``reference`` column)."""


def method_label(method: str, oracle: Sequence[str], marked: Mapping[str, str], reference: bool = False) -> str:
    """A method's row label: (oracle) where told the true number of groups, then its home check's mark
    (:func:`marks`); a reference band: "<method> (reference)"."""
    if reference:
        return f"{method} ({REFERENCE})"
    return (f"{method} (oracle)" if method in oracle else method) + marked.get(method, "")


def row_order(tidy: pd.DataFrame) -> tuple[list[str], set[str]]:
    """The table's and the heatmap's methods, the ranked ones first, then the references (bands); and the references."""
    methods = list(dict.fromkeys(tidy["method"]))
    bands = set(tidy.loc[tidy["reference"] != "", "method"]) if "reference" in tidy else set()
    return [m for m in methods if m not in bands] + [m for m in methods if m in bands], bands


def wide_table(tidy: pd.DataFrame, oracle: Sequence[str] = ()) -> pd.DataFrame:
    """Methods × settings, each cell :func:`cell_text`; a method with an oracle's advantage marked (oracle), one whose
    home check does not hold marked † (:mod:`.home_checks`)."""
    if tidy.empty:
        return pd.DataFrame(columns=["method"])
    out = tidy.assign(cell=tidy.apply(cell_text, axis=1)).pivot(index="method", columns="setting", values="cell")
    order, bands = row_order(tidy)
    out = out.reindex(index=order, columns=list(dict.fromkeys(tidy["setting"])))
    marked = marks(tidy)
    out.index = [method_label(m, oracle, marked, m in bands) for m in out.index]
    return out.rename_axis("method").reset_index()


def best_mark(r: Mapping[str, Any]) -> str:
    """A tidy row's mark: ★ (the column's best beyond the noise), "tied" (among its top cells within the noise) or ""."""
    return BEST_MARK if r.get("best_ari") else TIED_MARK if r.get("tied_best") else ""


def cell_text(r: Mapping[str, Any]) -> str:
    """One cell of the wide table from a tidy row: "ARI 0.49 ± 0.51 (3 of 6 ≥ 0.9; bimodal) ★ · acc. 0.74 ± 0.05"
    (Rand added on the settings of a home that reports it; :data:`NO_GROUPS` where the split has no groups; "n/a"
    without runs). The one place a cross-table cell is written."""
    if not r["n_seeds"]:
        return "n/a"
    if r.get("cannot_split"):
        ari = f"{CANNOT_SPLIT}: {r['cannot_split']}"
    elif r.get("did_not_act"):
        ari = f"{DID_NOT_ACT}: {r['did_not_act']}"
    elif not np.isfinite(r["ari_mean"]):  # a standard partition (shards, dirichlet): no groups to recover
        ari = NO_GROUPS
    else:
        mark = best_mark(r)
        ari = ("ARI " + from_columns(r, "ari").text(2, k_of_n=True) + (f" {mark}" if mark else "")
               + (f" ({r['seeds_acted']})" if r.get("seeds_acted") else ""))
    rand = f" · Rand {r['rand_mean']:.2f}" if r["home"] in rand_homes() and np.isfinite(r["rand_mean"]) else ""
    acc_name = ACCURACY_NAMES.get(r["accuracy_metric"], "acc.")
    acc = f" · {acc_name} {from_columns(r, 'accuracy').text()}" if np.isfinite(r["accuracy_mean"]) else ""
    return ari + rand + acc


def _possessive(homes: Sequence[str]) -> str:
    """``["a"]`` -> "a's"; ``["a", "b"]`` -> "a's and b's"."""
    return " and ".join(f"{home}'s" for home in homes)


def _span(values: pd.Series) -> str:
    """"0.61–0.74" (or "0.70", or "n/a") of a band's values over the settings."""
    if not len(values):
        return "n/a"
    lo, hi = f"{values.min():.2f}", f"{values.max():.2f}"
    return lo if lo == hi else f"{lo}–{hi}"


def what_it_shows(tidy: pd.DataFrame, ranks: pd.Series, left_out: Sequence[str] = (),
                  n_blocks: int | None = None) -> list[str]:
    """Sentences from the numbers: the winner of each setting, the method that never fails badly (its worst ARI
    highest), and each paper's own method at home against away; a method whose home check does not hold carries its
    mark (:func:`marks`); ``left_out``: the methods the ranks leave out (no score on every setting), ``n_blocks``: the
    settings the ranks rest on."""
    if tidy.empty:
        return ["No runs."]
    marked = marks(tidy)

    def names(methods: Any) -> str:
        return ", ".join(f"{m}{marked.get(m, '')}" for m in methods)

    lines = []
    bands = tidy[tidy["reference"] != ""] if "reference" in tidy else tidy.iloc[:0]
    tidy = tidy[~tidy.index.isin(bands.index)]
    control = tidy["control"] if "control" in tidy else pd.Series(False, index=tidy.index)
    for setting, rows in tidy[control].groupby("setting", sort=False):
        found = rows[rows["ari_mean"] > FAIL_ARI]
        lines.append(f"{setting} (a negative control, out of the ranks): methods above ARI {FAIL_ARI} there, which separate "
                     f"clients the shift does not: {names(found['method']) or 'none'}.")
    tidy = tidy[~control]
    for setting, rows in tidy.groupby("setting", sort=False):
        best, tied = rows[rows["best_ari"]], rows[rows["tied_best"]]
        if len(best):
            lines.append(f"{setting} ({rows['home'].iloc[0]}'s setting): best ARI {best['ari_mean'].iloc[0]:.2f} by "
                         f"{names(best['method'])}, beyond the seed noise.")
        elif len(tied):
            lines.append(f"{setting} ({rows['home'].iloc[0]}'s setting): no method beyond the seed noise above the "
                         f"others; tied at the top: {names(tied['method'])} (best mean ARI "
                         f"{tied['ari_mean'].max():.2f}).")
    worst = tidy.groupby("method")["ari_mean"].min().dropna().sort_values(ascending=False)
    if len(worst):
        top = worst.index[0]
        lines.append(f"Never failing badly: {names([top])}'s worst final ARI over the settings is {worst.iloc[0]:.2f} "
                     f"(the highest worst case); methods at ARI ≤ {FAIL_ARI} somewhere: "
                     f"{names(m for m, v in worst.items() if v <= FAIL_ARI) or 'none'}.")
    for home, prefixes in ((h, facts.methods) for h, facts in setting_homes().items() if facts.methods):
        own = tidy[tidy["method"].str.startswith(prefixes)]
        if own.empty:
            continue
        at_home = own[own["home"] == home]["ari_mean"].mean()
        away = own[own["home"] != home]["ari_mean"].mean()
        if np.isfinite(at_home) and np.isfinite(away):
            lines.append(f"{home}'s method ({names(dict.fromkeys(own['method']))}): mean ARI {at_home:.2f} on its "
                         f"own settings, {away:.2f} on the others' ({'lower' if away < at_home else 'not lower'} away "
                         "from home).")
    for method, rows in bands.groupby("method", sort=False):
        acc = rows["accuracy_mean"].dropna()
        lines.append(f"Reference, not ranked: {method} ({rows['reference'].iloc[0]}); final ARI "
                     f"{_span(rows['ari_mean'].dropna())}, accuracy {_span(acc)} over the settings.")
    if len(ranks):
        over = f" over {n_blocks} settings" if n_blocks else ""
        lines.append(f"Average rank by ARI{over} (1 = best): "
                     + ", ".join(f"{names([m])} {r:.1f}" for m, r in ranks.items())
                     + (f"; left out (no score on every setting): {names(left_out)}" if left_out else "") + ".")
    return lines


def cross_analysis(summary: pd.DataFrame | None, block: Mapping[str, Any], methods: Sequence[str],
                   oracle: Sequence[str] = (), cannot_split: Mapping[str, Mapping[str, str]] | None = None,
                   home_checks: Mapping[str, str] | None = None,
                   references: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything the table, the CD diagram and the front page's section need, from the sweep summary (None or
    no ``block``: empty); ``oracle``: the variants told the true number of groups
    (cflcore.plugin.Plugin.told_true_k), marked in the table; ``cannot_split``: method -> split -> why it cannot act
    there (cflcore.plugin.PLUGIN_FACTS_KEY), printed in the cell and kept out of ranks, marks and the CD;
    ``home_checks``: method -> whether its home check holds (:func:`.home_checks.home_check_verdicts`; None: the
    study lists none); ``references``: method -> its band (cflcore.report.acted.references), shown apart and never
    ranked, marked or in the CD."""
    from .statistics.cd import cd_analysis

    if summary is None or not len(summary):
        summary = pd.DataFrame(columns=["split_base", "algorithm", "seed", "ari", "rand", "pf1", "local_bacc"])
    settings = settings_of(block)
    tidy = cross_table(summary, settings, methods, cannot_split, home_checks, references)
    ranked = [m for m in methods if m not in (references or {})]
    cd = cd_analysis(cd_scores(summary, settings, ranked, cannot_split), higher_is_better=True, incomplete=CD_INCOMPLETE)
    ranks = pd.Series(cd.mean_ranks, dtype=float)  # the CD's own: the same blocks and methods
    return {"settings": settings, "tidy": tidy, "ranks": ranks, "cd": cd,
            "oracle": list(oracle), "lines": what_it_shows(tidy, ranks, cd.dropped, cd.n_blocks),
            "title": block.get("title") or TITLE, "notes": list(block.get("notes") or []),
            "home_checks": home_checks is not None}


def cross_section_rst(analysis: Mapping[str, Any]) -> str:
    """The front page's opening section: the table, the average ranks, the CD result, what it shows."""
    from .front_page import _section, csv_table

    tidy, cd = analysis["tidy"], analysis["cd"]
    parts = [_section(analysis.get("title") or TITLE, "-"),
             "Every method on every setting (each keeps its home paper's clients and participation). "
             f"A cell: final-round ARI (Rand too on {_possessive(rand_homes())} settings) and accuracy on the clients' "
             f"own data ({accuracy_text()}), mean ± sample std over seeds; beside ARI, the "
             f"seeds that found the groups (k of n ≥ {FOUND_ARI:g}; {BIMODAL}: some seeds ≥ {FOUND_ARI:g}, some ≤ "
             f"{MISSED_ARI:g}); {BEST_MARK} = the column's best ARI, beyond the seed noise above every other (paired "
             f"over seeds); {TIED_MARK} = the column's top cells, within the noise of each other; (oracle) = told the "
             f"true number of groups; {NO_GROUPS} = a standard partition; {CANNOT_SPLIT}: <reason> = the method's own "
             "parameters rule the setting's groups out before it runs (out of the ranks and the CD); "
             f"{DID_NOT_ACT}: <reason> = it could act but acted in none of its seeds (its criterion never met, its "
             "trigger never fired: read from the runs' own records; out of the ranks and the CD); k of n seeds acted = "
             f"scored on all its seeds; ({REFERENCE}) = a band every method is read against (FedAvg, the oracle, local "
             "training), under the ranked methods and never ranked"
             + (f"; {LEGEND}" if analysis.get("home_checks") else "") + ".\n\n"]
    parts += [f"{note}\n\n" for note in analysis.get("notes") or []]
    parts.append(csv_table(wide_table(tidy, analysis["oracle"]), "Methods × settings") + "\n")
    if cd.note:
        cd_text = cd.note
    else:
        cd_text = (f"Friedman p = {cd.friedman_p:.3g} over {cd.n_blocks} complete blocks ({CD_BLOCKS}); groups not "
                   "significantly different (Wilcoxon–Holm, α 0.05): "
                   + "; ".join("{" + ", ".join(c) + "}" for c in cd.cliques))
    if cd.dropped:
        cd_text += f"; left out of the CD and the ranks (no score on every setting): {', '.join(cd.dropped)}"
    if cd.nemenyi_cd is not None:
        cd_text += f"; Nemenyi critical difference {cd.nemenyi_cd:.2f} of mean rank (α 0.05)"
    if cd.n_blocks and cd.n_blocks < MIN_WILCOXON_BLOCKS:
        cd_text += (f" (with {cd.n_blocks} blocks the exact Wilcoxon signed-rank test cannot separate a pair: its "
                    f"smallest two-sided p is {2 / 2 ** cd.n_blocks:.3g})")
    parts.append(f"Critical difference (figures/cross_paper_cd/): {cd_text}.\n\n")
    parts.append(_section("What it shows", "~"))
    parts += [f"- {line}\n" for line in analysis["lines"]]
    return "".join(parts) + "\n"


def write_cross_paper(analysis: Mapping[str, Any], out_dir, entry) -> list[dict[str, Any]]:
    """``tables/cross_paper.{csv,md,tex}``, ``figures/cross_paper_cd/cross_paper_cd_ari.{png,pdf}`` with its
    ranks, and ``figures/cross_paper_heatmap/cross_paper_heatmap.{png,pdf}`` (:func:`draw_cross_heatmap`);
    ``entry(kind, path, dataset, clients)`` makes an index entry."""
    from pathlib import Path

    from .statistics.cd import draw_cd_diagram
    from .tables import write_table, write_text

    out_dir = Path(out_dir)
    caption = (f"{analysis.get('title') or TITLE}: final ARI (with the seeds ≥ {FOUND_ARI:g}, k of n), Rand "
               f"({', '.join(rand_homes())}) and "
               f"accuracy per method and setting, mean ± sample std over seeds; {BEST_MARK} = best beyond the seed "
               f"noise, {TIED_MARK} = top cells within it" + (f"; {LEGEND}." if analysis.get("home_checks") else "."))
    entries = [entry("cross_paper", p, None, None) for p in
               write_table(analysis["tidy"], wide_table(analysis["tidy"], analysis["oracle"]), "cross_paper",
                           out_dir / "tables", caption)]
    if analysis["tidy"].empty:
        return entries
    stem = out_dir / "figures" / "cross_paper_cd" / "cross_paper_cd_ari"
    entries += [entry("cross_paper_cd", p, None, None)
                for p in draw_cd_diagram(analysis["cd"], stem, title=f"Final ARI: {CD_BLOCKS}")]
    entries += [entry("cross_paper_heatmap", p, None, None)
                for p in draw_cross_heatmap(analysis["tidy"], out_dir / "figures" / "cross_paper_heatmap" / "cross_paper_heatmap",
                                            analysis["oracle"], analysis.get("title") or TITLE)]
    cd = analysis["cd"]
    left_out = f"left out (no score on every setting): {', '.join(cd.dropped)}" if cd.dropped else None
    ranks = cd.table().assign(friedman_p=cd.friedman_p, note="; ".join(n for n in (cd.note, left_out) if n) or None)
    entries.append(entry("cross_paper_cd", write_text(ranks.to_csv(index=False), stem.with_name(stem.name + "_ranks.csv")),
                         None, None))
    return entries


def heatmap_text(r: Mapping[str, Any], name: str) -> str:
    """A heatmap cell from a tidy row: the mean of ``name`` (``ari`` or ``accuracy``), "n/a" without one; ARI adds the
    table's mark (★ or tied) and, under it, the seeds that found the groups (k of n ≥ 0.9; bimodal marked)."""
    if name == "ari" and r.get("cannot_split"):
        return "cannot\nsplit"
    if name == "ari" and r.get("did_not_act"):
        return "did not\nact"
    v = r.get(f"{name}_mean", np.nan)
    if v is None or not np.isfinite(v):
        return "n/a"
    text = f"{0.0 if abs(v) < 0.005 else v:.2f}"
    if name != "ari":
        return text
    mark = best_mark(r)
    return text + (f" {mark}" if mark else "") + "\n" + from_columns(r, "ari").k_of_n().replace("; ", "\n")


def draw_cross_heatmap(tidy: pd.DataFrame, stem, oracle: Sequence[str] = (), title: str = TITLE) -> list:
    """``<stem>.{png,pdf}``: the table as two heatmaps side by side, methods × settings, final ARI (marked as in the
    table, with the seeds that found the groups: :func:`heatmap_text`) and accuracy on the clients' own data, each cell its mean over seeds; a setting without
    ground-truth groups is grey with "n/a", a negative control's column is labelled so."""
    import matplotlib.pyplot as plt

    from .statistics.cd import save_figure

    methods, bands = row_order(tidy)
    settings = list(dict.fromkeys(tidy["setting"]))
    controls = set(tidy.loc[tidy["control"], "setting"]) if "control" in tidy else set()
    columns = [f"{s}\n(control)" if s in controls and "control" not in s else s for s in settings]
    marked = marks(tidy)
    rows = [method_label(m, oracle, marked, m in bands) for m in methods]
    fig, axes = plt.subplots(1, 2, figsize=(2.4 + 1.25 * len(settings) * 2, 1.0 + 0.55 * len(methods)), squeeze=False)
    for ax, (name, label) in zip(axes[0], (("ari", f"final ARI ({BEST_MARK} best beyond the noise; seeds ≥ {FOUND_ARI:g})"),
                                            ("accuracy", "accuracy on the clients' own data"))):
        grid = tidy.pivot(index="method", columns="setting", values=f"{name}_mean").reindex(index=methods, columns=settings)
        values = grid.to_numpy(dtype=float)
        image = ax.imshow(np.ma.masked_invalid(values), cmap=plt.get_cmap("viridis").with_extremes(bad="lightgrey"),
                          vmin=0.0, vmax=1.0, aspect="auto")
        rows_by_cell = {(r["method"], r["setting"]): r for r in tidy.to_dict("records")}
        for (i, j), v in np.ndenumerate(values):
            text = heatmap_text(rows_by_cell.get((methods[i], settings[j]), {}), name)
            ax.text(j, i, text, ha="center", va="center", fontsize=6 if name == "ari" else 7,
                    color="black" if not np.isfinite(v) or v > 0.6 else "white")
        ax.set_xticks(range(len(columns)), columns, rotation=35, ha="right", fontsize=7)
        ax.set_yticks(range(len(rows)), rows if ax is axes[0][0] else [""] * len(rows), fontsize=7)
        if bands and len(bands) < len(methods):  # the references below a line, apart from the ranked methods
            ax.axhline(len(methods) - len(bands) - 0.5, color="white", lw=3)
        ax.set_title(label, fontsize=8)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, pad=0.01)
    n_seeds = tidy.loc[tidy["n_seeds"] > 0, "n_seeds"]
    seeds = f"{int(n_seeds.min())}" if len(n_seeds) and n_seeds.min() == n_seeds.max() else \
        (f"{int(n_seeds.min())}–{int(n_seeds.max())}" if len(n_seeds) else "0")
    fig.suptitle(f"{title}: mean over {seeds} seeds", fontsize=9)
    return save_figure(fig, stem)
