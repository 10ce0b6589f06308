"""The contract of a paper plug-in (:class:`Paper`), its registry (:data:`PAPERS`) and the claims framework its
module uses: one row per claim, ours against the paper's, and a verdict.

A *paper* is one module of :mod:`cflcore.report.papers` (``papers/<paper>.py``), registered as the strategies are:
``@register_paper("002") class Louvain002(Paper)``. Adding one is one new file: config validation reads the ids from
the decorators (cflcore.paper_sources.declared_papers, never importing the report); the registry finds the
modules in this package. The module holds everything of its paper: its claims (``@claim(paper, claim_id)``
functions), its reference tables (package data in cflcore/reference/), the tables of its own it adds to the report
(:meth:`Paper.tables`, with their captions in the report's catalogue) and its runs' roles.

000's check compares published table cells (:mod:`.ocfl_000`, :attr:`Paper.published_tables`); the other papers publish figures and
qualitative statements, so their checks are claims: a function of the study's runs that returns what we measured,
what the paper says, and a row (:data:`CLAIM_COLUMNS`):

* ``holds`` (the verdict, one of cflcore.report.statistics.verdicts.VERDICTS) with its ``lean``, decided by the statistics of
  :mod:`cflcore.report.statistics.verdicts` (parts, their tests under the decision rule in force, Holm over a claim's parts); ``n/a`` also where the study has
  no run that can test it, or its proxy cannot carry it (``report.claims_not_carried``);
* ``reason``: in words, why the row is what it is; ``seeds_to_decide``: for an inconclusive row, the seeds that would
  decide it at the observed effect and spread, or "never" with the blocker;
* ``kind``: ``evidence``, or ``sanity`` where the study's design makes the claim true whatever the method does;
* ``note``: every part with its numbers and test, and the multiplicity rule. The study's own explanation of a row
  (``report.claim_notes: {claim id: text}``) follows the check's note.

Readings are fixed before the data (:mod:`.versions`): each claim is registered with the version of its reading
(``@claim(paper, claim_id, version=N)``), and a committed record (``cflcore/report/papers/versions.json``) holds, per
claim and version, the commit that introduced the reading, its reading in one line and a hash of the claim's source;
a test fails when a claim's source changes without a new version. A claim whose reading changed keeps its earlier
reading beside it (``@claim(..., earlier=...)``), so the report shows the earlier verdict with the commit that changed
it (:func:`check_claims`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...kernel_paths import NATIVE
from ...registry import Registry
from ..front_context import Departure
from ..statistics.rules import CURRENT, DIGIT_FLOOR, SEED_STAGES, current, using
from ..statistics.stages import SeedStages, read_in_stages, stage_note
from ..statistics.verdicts import CONTRADICTED, EVIDENCE, HOLDS, INCONCLUSIVE, NA, NONE, VERDICTS, Part, combine


@dataclass(frozen=True)
class ClaimResult:
    claim_id: str
    paper: str  # seed
    where: str  # section / figure of the seed
    claim: str
    ours: str
    holds: str  # a verdict of VERDICTS: holds / contradicted / inconclusive / n/a
    note: str = ""
    lean: str = "none"  # of LEANS: where the numbers lean, toward the paper or against it (or none)
    reason: str = ""  # in words: why the row is what it is (noise, exact tie, saturation, a missing part, n/a's why)
    seeds_to_decide: str = ""  # inconclusive rows: the seeds that would decide at the observed effect and spread
    kind: str = "evidence"  # evidence, or a sanity check the study's design makes true (the row says why)


@dataclass
class ClaimData:
    """What a claim may read: the per-run sweep summary (cflcore.report.sweeps.sweep_summary: base names,
    factor values, final-round scores), the per-round frame (sweeps.round_frame) and the run summaries
    (tables.run_summaries: scores averaged over rounds)."""

    runs: pd.DataFrame
    rounds: pd.DataFrame = field(default_factory=pd.DataFrame)
    summaries: pd.DataFrame = field(default_factory=pd.DataFrame)
    loaded: Sequence[Any] = ()
    """The loaded runs (cflcore.report.runs.LoadedRun: spec with run_dir, manifest), for claims that read a run's
    own files (002 Fig. 2: the recorded distance matrices; the superclass split: final partitions)."""
    told_true_k: frozenset[str] = frozenset()
    """The variants told the true number of groups (cflcore.plugin.Plugin.told_true_k): they split
    because they are told to, which a claim about who splits must set apart."""
    ablation_claims: Mapping[str, Sequence[tuple[str, str]]] = field(default_factory=dict)
    """Claim id -> (ablation study, its ``paper_claims.csv``) of each ablation study that decides the claim again
    (:attr:`Paper.ablations`; cflcore.report.front_context.ablation_claims_files), for the table that prints each
    ablation's verdict beside the claim's own."""
    seed_stages: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """Claim id -> the seeds each of its looks reads (report.seed_stages), of :attr:`seeds` (study.seeds, in order):
    the claims read in stages (:func:`read_claim`)."""
    seeds: Sequence[int] = ()

    def of_seeds(self, seeds: Sequence[int]) -> "ClaimData":
        """The same data, the runs of ``seeds`` only (a stage of a claim read in stages, cflcore.report.statistics.stages)."""
        keep = {int(s) for s in seeds}

        def frame(df: pd.DataFrame) -> pd.DataFrame:
            return df[df["seed"].isin(keep)] if df is not None and len(df) and "seed" in df else df
        return replace(self, runs=frame(self.runs), rounds=frame(self.rounds), summaries=frame(self.summaries),
                       loaded=tuple(r for r in self.loaded if getattr(getattr(r, "spec", None), "seed", None) in keep))


CLAIM_COLUMNS = ("claim_id", "paper", "where", "claim", "ours", "holds", "lean", "reason", "seeds_to_decide", "kind",
                 "version", "earlier", "note")
"""paper_claims.csv's columns: the verdict (``holds``) with its lean beside it, the reason in words, the seeds that
would decide an inconclusive row, evidence or sanity check, the reading's version (with the commit that introduced
it), the earlier readings' verdicts on the same runs (with the commits that changed them), and the parts with their
numbers (``note``)."""

ClaimFn = Callable[[ClaimData], ClaimResult]
CLAIMS: dict[str, list[ClaimFn]] = {}


def claim(paper: str, claim_id: str, version: int = 1,
          earlier: Mapping[int, ClaimFn] | None = None) -> Callable[[ClaimFn], ClaimFn]:
    """Register a claim of seed ``paper`` under ``claim_id``, the id its rows carry and a study's config names
    (``report.claim_notes``, ``report.claims_not_carried``), at ``version`` of its reading (:mod:`.versions`: the
    committed history, and the test that a reading does not change without a new version); ``earlier``: {version: a
    function computing that earlier reading}, run on the same data so the report shows its verdict beside the current
    one. ``paper`` and ``claim_id`` are string literals or module constants: config validation reads them from the
    source, never importing the report (cflcore/config_checks.py)."""
    if version < 1 or any(v >= version for v in (earlier or {})):
        raise ValueError(f"claim version {version}; earlier versions {sorted(earlier or {})} must lie in 1..{version - 1}")

    def register(fn: ClaimFn) -> ClaimFn:
        fn.claim_id = claim_id  # type: ignore[attr-defined]
        fn.claim_version = version  # type: ignore[attr-defined]
        fn.earlier_readings = dict(earlier or {})  # type: ignore[attr-defined]
        CLAIMS.setdefault(paper, []).append(fn)
        return fn
    return register


# ---- selection helpers -----------------------------------------------------------------------
def select(runs: pd.DataFrame, base: str | None = None, **factors: Any) -> pd.DataFrame:
    """The runs of variant family ``base`` whose factor columns equal ``factors`` (a column absent = no match).
    ``split_base`` and ``algorithm`` may be given as factors too."""
    if runs is None or not len(runs):
        return pd.DataFrame()
    mask = np.ones(len(runs), dtype=bool)
    if base is not None:
        mask &= (runs["algorithm_base"] == base).to_numpy()
    for key, value in factors.items():
        if key not in runs:
            return runs.iloc[0:0]
        column = runs[key]
        if isinstance(value, float):
            mask &= np.isclose(pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64), value)
        else:
            mask &= (column == value).to_numpy()
    return runs[mask]


def mean_of(runs: pd.DataFrame, metric: str) -> float:
    if runs is None or not len(runs) or metric not in runs:
        return float("nan")
    values = pd.to_numeric(runs[metric], errors="coerce").dropna()
    return float(values.mean()) if len(values) else float("nan")


def silhouette_column(runs: pd.DataFrame) -> str:
    """The silhouette in the space the method clusters in when recorded, else on the updates."""
    return "silhouette_method" if "silhouette_method" in runs and runs["silhouette_method"].notna().any() else "silhouette"


def fmt(value: float, digits: int = 2) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def result(fn_id: str, paper: str, where: str, text: str, ours: str, holds: bool | str | None,
           note: str = "", reason: str = "") -> ClaimResult:
    """A claim's row decided without parts (an event count, or n/a); ``holds`` True / False / None (n/a) or a
    verdict word of :data:`VERDICTS`. The reason defaults to ``ours`` for n/a rows (what the study lacks)."""
    if isinstance(holds, str):
        word = holds
    else:
        word = NA if holds is None else (HOLDS if holds else CONTRADICTED)
    if word not in VERDICTS:
        raise ValueError(f"claim {fn_id}: verdict {word!r}; allowed: {', '.join(VERDICTS)}")
    lean = {HOLDS: "toward", CONTRADICTED: "against"}.get(word, "none")
    why = reason or (f"n/a: {ours}" if word == NA else "decided by a count of events, not a difference of means")
    return ClaimResult(fn_id, paper, where, text, ours, word, note, lean, why)


def factor_values(runs: pd.DataFrame, base: str, column: str) -> list:
    sub = select(runs, base)
    if not len(sub) or column not in sub:
        return []
    values = sub[column].dropna().unique().tolist()
    return sorted(values) if all(isinstance(v, (int, float)) for v in values) else values


def verdict(paper: str, fn_id: str, where: str, text: str, ours: str, parts: Mapping[str, str | Part],
            note: str = "", kind: str = EVIDENCE) -> ClaimResult:
    """Seed ``paper``'s claim row from its parts (:func:`combine`): the verdict, its lean, reason and seeds to decide,
    and the parts' numbers before ``note``."""
    dec = combine(parts)
    shares = sorted({p.share for p in parts.values() if isinstance(p, Part) and p.share is not None})
    if shares and current() != DIGIT_FLOOR:  # a level claim states its share of seeds (issue 67)
        text += f" (in at least {' / '.join(f'{s:.0%}' for s in shares)} of seeds)"
    return ClaimResult(fn_id, paper, where, text, ours, dec.word, "; ".join(x for x in (dec.note, note) if x),
                       dec.lean, dec.reason, dec.seeds_to_decide, kind)


# ---- running the checks ---------------------------------------------------------------------
def check_claims(papers: Sequence[str], data: ClaimData, notes: Mapping[str, str] | None = None,
                 not_carried: Mapping[str, str] | None = None,
                 roles: Mapping[str, Mapping[str, str]] | None = None,
                 kernel_sets: Mapping[str, ClaimData] | None = None,
                 seed_stages: Mapping[str, Sequence[int]] | None = None, seeds: Sequence[int] = ()) -> pd.DataFrame:
    """One row per claim of each of ``papers``; ``notes`` (report.claim_notes) are appended to a claim's own note;
    a claim of ``not_carried`` (report.claims_not_carried: {claim id: why the study's proxy cannot carry it}) is
    n/a with that reason, its measured values and the check's own verdict on them kept in the row. Each paper reads
    ``data`` cast to the roles the study maps for it (``roles``, report.roles: :func:`paper_data`). ``kernel_sets``
    (report.kernel_paths): {kernel path: the same runs trained again on it}; each claim is decided again on each,
    and a column ``kernels`` says beside the verdict whether it is the same (:func:`_kernel_stability`).
    ``seed_stages`` (report.seed_stages: {claim id: the seeds each look reads, of ``seeds``, study.seeds}): those claims
    are read in stages (:func:`_read`), and a column ``stage`` says which stage decided."""
    rows = []
    seed_stages = seed_stages if seed_stages is not None else data.seed_stages
    data = replace(data, seed_stages=dict(seed_stages or {}), seeds=tuple(seeds or data.seeds))
    for paper in papers:
        cast = paper_data(paper, data, roles)
        for fn in PAPERS.get(str(paper), field="report.paper_checks").claims():
            plan = _plan(fn, cast)
            res, stage = _read(fn, paper, cast, plan)
            if not_carried and res.claim_id in not_carried:
                res = ClaimResult(res.claim_id, res.paper, res.where, res.claim, res.ours, NA,
                                  f"the check's own verdict on these runs: {res.holds} (lean {res.lean}): {res.note}",
                                  NONE, f"n/a: the proxy cannot carry this claim: {not_carried[res.claim_id]}")
            stability = ""
            if kernel_sets and res.holds != NA:
                res, stability = _kernel_stability(res, {
                    name: (_read(fn, paper, paper_data(paper, other, roles), plan)[0], len(other.loaded))
                    for name, other in kernel_sets.items()}, len(data.loaded))
            row = {**asdict(res), **_versions(fn, paper, cast, plan), **({KERNELS_COLUMN: stability} if kernel_sets else {}),
                   **({STAGE_COLUMN: stage} if seed_stages else {})}
            if notes and res.claim_id in notes:  # the study's explanation, after the check's own reason
                row["note"] = " | ".join(x for x in (res.note, str(notes[res.claim_id])) if x)
            rows.append(row)
    columns = list(CLAIM_COLUMNS)
    if kernel_sets:  # beside the verdict and its lean
        columns.insert(columns.index("lean") + 1, KERNELS_COLUMN)
    if seed_stages:
        columns.insert(columns.index("reason"), STAGE_COLUMN)
    return pd.DataFrame(rows, columns=columns)


KERNELS_COLUMN = "kernels"
"""paper_claims.csv's column, with ``report.kernel_paths`` set: is the verdict the same on every kernel path."""
STAGE_COLUMN = "stage"
"""paper_claims.csv's column, with ``report.seed_stages`` set: the stage that decided a claim read in stages (and the
earlier stages' verdicts), "one stage" for the study's other claims."""


def _plan(fn: ClaimFn, data: ClaimData) -> SeedStages | None:
    """The looks ``data``'s study states for the claim (:attr:`ClaimData.seed_stages`), of its seeds; None for one."""
    sizes = data.seed_stages.get(getattr(fn, "claim_id", ""))
    if not sizes:
        return None
    seeds = data.seeds or sorted({int(s) for s in data.runs["seed"].dropna()} if "seed" in data.runs else ())
    return SeedStages(tuple(int(n) for n in sizes), tuple(int(s) for s in seeds))


def read_claim(fn: ClaimFn, paper: str, data: ClaimData) -> ClaimResult:
    """The claim's row on ``data``, in the stages its study states for it (:attr:`ClaimData.seed_stages`) or in one:
    what a paper's own table reads where it shows a claim's verdict (the home table)."""
    return _read(fn, paper, data, _plan(fn, data))[0]


def _read(fn: ClaimFn, paper: str, data: ClaimData, plan: SeedStages | None,
          rule: str | None = None) -> tuple[ClaimResult, str]:
    """The claim's row on ``data`` and its ``stage`` cell: in one stage under ``rule`` (default: the one in force), or
    stage by stage with a ``plan`` under :data:`SEED_STAGES` (cflcore.report.statistics.stages)."""
    if plan is None or rule not in (None, SEED_STAGES):
        with using(rule or current()):
            return _run_claim(fn, paper, data), "one stage"
    readings = read_in_stages(lambda seeds: _run_claim(fn, paper, data.of_seeds(seeds)), lambda r: r.holds, plan)
    res, stage = readings[-1], stage_note(plan, [r.holds for r in readings], [r.lean for r in readings])
    need = (f"{res.seeds_to_decide} at one-sided {plan.levels[-1]:.2%}; more seeds would be a look no stated stage covers"
            if res.seeds_to_decide and len(readings) == len(plan.sizes) else res.seeds_to_decide)
    return replace(res, reason="; ".join(x for x in (res.reason, stage.split(":")[0]) if x), seeds_to_decide=need), stage


def _kernel_stability(res: ClaimResult, others: Mapping[str, tuple[ClaimResult, int]],
                      n_runs: int) -> tuple[ClaimResult, str]:
    """The row and its ``kernels`` cell, from the claim decided on the native runs (``res``) and on each kernel path
    (``others``: {path: (its row, its loaded runs)}; ``n_runs``: the native runs loaded). The same verdict
    everywhere: "same under avx2, default" (its lean none, and the paths' leans named, where they differ). A verdict
    that differs on a path flips: the row is inconclusive, leaning
    where every path leans (else none), its reason names each path's verdict, the native verdict kept in the note
    (issue 67, item 4)."""
    missing = {name: n for name, (_, n) in others.items() if n < n_runs}
    short = "".join(f"; {name} has {n} of {n_runs} runs" for name, n in missing.items())
    flips = {name: other for name, (other, _) in others.items() if other.holds != res.holds}
    if not flips:
        leans = {name: other.lean for name, (other, _) in others.items() if other.lean != res.lean}
        if not leans:
            return res, f"same under {', '.join(others)}{short}"
        moved = "; ".join(f"leans {lean} under {name}" for name, lean in leans.items())
        why = (f"{res.reason}; where it leans differs under the CPU's kernels ({NATIVE} {res.lean}, "
               + ", ".join(f"{name} {other.lean}" for name, (other, _) in others.items()) + ")")
        return replace(res, lean=NONE, reason=why), f"same under {', '.join(others)}, but {moved}{short}"
    cell = "; ".join(f"flips under {name} ({other.holds}, lean {other.lean})" for name, other in flips.items())
    verdicts = ", ".join([f"{NATIVE} {res.holds}", *(f"{name} {other.holds}" for name, (other, _) in others.items())])
    why = f"inconclusive: the verdict flips under the CPU's kernels ({verdicts})"
    note = "; ".join(x for x in (f"the verdict on the native kernels: {res.holds} (lean {res.lean}, {res.reason})",
                                 res.note) if x)
    lean = res.lean if all(other.lean == res.lean for other, _ in others.values()) else NONE  # kept where all agree
    return replace(res, holds=INCONCLUSIVE, lean=lean, reason=why, note=note), cell + short


def _run_claim(fn: ClaimFn, paper: str, data: ClaimData) -> ClaimResult:
    try:
        return fn(data)
    except (KeyError, ValueError, IndexError) as e:  # a claim never stops the report
        return ClaimResult(getattr(fn, "claim_id", fn.__name__), str(paper), "", fn.__name__,
                           f"could not be evaluated: {e}", NA, reason=f"n/a: could not be evaluated: {e}")


def _versions(fn: ClaimFn, paper: str, data: ClaimData, plan: SeedStages | None = None) -> dict[str, str]:
    """The row's ``version`` ("v2 (commit)") and ``earlier``: each earlier reading's verdict on the same runs,
    with the commit that introduced it and the one that changed it (:mod:`.versions`)."""
    from .versions import history

    version = int(getattr(fn, "claim_version", 1))
    readings = {r.version: r for r in history(fn)}
    now = readings.get(version)
    current = f"v{version}" + (f" ({now.commit})" if now else "")  # its reading is the row's claim
    kept = dict(getattr(fn, "earlier_readings", {}))
    if now:  # a version that changed the rule only: the same code, read under its earlier rule
        kept.update({v: fn for v, r in readings.items() if v < version and v not in kept
                     and r.source_sha256 == now.source_sha256})
    earlier = []
    for v, old in sorted(kept.items(), reverse=True):
        this, changed = readings.get(v), readings.get(v + 1)
        res = _read(old, paper, data, plan, this.rule if this else CURRENT)[0]
        when = (f"from {this.commit}" if this else "") + (f", changed at {changed.commit}" if changed else "")
        what = (f"{this.reading}; rule: {this.rule}" if this else "")
        earlier.append(f"v{v} ({when}{': ' + what if what else ''}): {res.holds} (lean {res.lean})")
    return {"version": current, "earlier": " | ".join(earlier)}
# ---- the paper plug-in -----------------------------------------------------------------------------------
ROLE_KINDS = ("split", "variant")
"""What a role names: a split of the study (the runs' ``split``) or a variant (the runs' ``algorithm``)."""


@dataclass(frozen=True)
class Role:
    """A run a paper's claims read, in the paper's terms: ``kind`` (:data:`ROLE_KINDS`), ``name`` (the name its claims
    select it by: a run's base name, or the start of a family's names) and ``what`` (the role in words, e.g. "FedAvg",
    "the rotated groups")."""

    kind: str
    name: str
    what: str


def _renamed(values: pd.Series, names: Mapping[str, str]) -> pd.Series:
    """``values`` (run names) with each study name of ``names`` replaced by its role's name: the name itself, or the
    base of a swept name (``<name>@<factor>=<value>``)."""
    def one(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        base, at, rest = value.partition("@")
        return names[base] + at + rest if base in names else value
    return values.map(one)


@dataclass(frozen=True)
class PaperCheck:
    """One paper-check section of the front page: a title, an introduction (RST), titled tables and
    sub-sections. The front page renders a list of them (a paper's :meth:`Paper.front_sections`, the claims' checks)."""

    title: str
    text: str
    tables: Sequence[tuple[str, pd.DataFrame]] = ()
    subsections: Sequence["PaperCheck"] = ()


@dataclass(frozen=True)
class PaperDepartures:
    """A paper's departures by design (:meth:`Paper.departures`), by where the front page lists them: ``settings``
    (its datasets, rounds and training against the paper's) before the splits' and the engine's, ``methods`` (the
    study's methods against the paper's) after them, before the metric's and the study's own (``report.departures``)."""

    settings: Sequence[Departure] = ()
    methods: Sequence[Departure] = ()


@dataclass(frozen=True)
class SettingHome:
    """A home of the cross-paper comparison's settings (``report.cross_paper.settings.<split>.home``,
    cflcore.report.cross_paper): where a setting comes from and how that source scores it. ``what``: the source in
    words; ``methods``: the method families it is home to (a variant whose name starts with one); ``accuracy``: the
    clients' accuracy it scores by (a run summary's column); ``rand``: whether it reports the Rand index beside ARI."""

    what: str
    methods: tuple[str, ...] = ()
    accuracy: str = "local_acc"
    rand: bool = False


class Paper:
    """A paper check: its claims (registered by ``@claim(<its id>, ...)`` in its module), the roles of the runs they
    read and the tables of its own the report writes beside ``paper_claims.csv`` (:attr:`table_titles`, :meth:`tables`)."""

    registered_name: ClassVar[str] = "?"
    plugin_kind: ClassVar[str] = "paper"
    title: ClassVar[str] = ""
    """The paper in a few words (its method and its source), for the report's and the config reference's text."""
    table_titles: ClassVar[Mapping[str, str]] = {}
    """The tables of the paper's own (:meth:`tables`): catalogue kind -> its title in the HTML report, as literals (the
    catalogue reads them from the source, cflcore.paper_sources.declared_paper_tables); each kind's caption is
    report/captions/<kind>.rst."""
    output_titles: ClassVar[Mapping[str, str]] = {}
    """The report's kinds drawn after this paper (tables and figures its own writers draw, e.g. 000's learning gap):
    catalogue kind -> its title in the HTML report, citing the paper, as literals (the catalogue reads them from the
    source, cflcore.paper_sources.declared_output_titles; its entry's title is "")."""
    output_captions: ClassVar[Mapping[str, str]] = {}
    """The captions, citing this paper, of report tables of :attr:`output_titles` (catalogue kind -> the caption of
    its Markdown and LaTeX versions), as literals (read from the source, cflcore.paper_sources.declared_output_captions)."""
    front_tables: ClassVar[tuple[str, ...]] = ()
    """Kinds of :attr:`table_titles` the front page opens with when the study checks the paper (``report.paper_checks``),
    each under its title, before everything else (cflcore.report.build.write_tables)."""
    published_tables: ClassVar[bool] = False
    """Whether every study's report sets this paper's published tables beside its runs (the "paper versus this run"
    table and its Kendall's τ, the SCL thresholds beside its table: cflcore.report.build, front_page, scl_epsilons).
    One registered paper does (:func:`published_tables_paper`); it sets the readers below."""
    # ---- the readers of the published-tables paper (published_tables = True); unset on the others ----
    reference_dir: ClassVar[Path]
    """The folder of its published tables (package data, cflcore/reference/)."""
    dataset_aliases: ClassVar[Mapping[str, str]]
    """Our dataset -> the paper's, where it is a subset of it (mnist5k -> mnist)."""
    split_short: ClassVar[Mapping[str, str]]
    """The paper's split -> its short name (the front page's compact column heads)."""
    read_reference: ClassVar[Callable[[str], pd.DataFrame]]
    """A published table by its file name in :attr:`reference_dir`."""
    table1: ClassVar[Callable[[], pd.DataFrame]]
    table3: ClassVar[Callable[[], pd.DataFrame]]
    fig2: ClassVar[Callable[[], pd.DataFrame]]
    algorithm: ClassVar[Callable[[str], str]]
    """Our variant -> the paper's method whose row it is compared with."""
    dataset: ClassVar[Callable[[str], str | None]]
    """Our dataset -> the paper's (None: not in the paper)."""
    split: ClassVar[Callable[[str, Mapping[str, Any] | None], str | None]]
    """Our split (and its manifest) -> the paper's (None: not comparable)."""
    vs_run: ClassVar[Callable[[pd.DataFrame, Mapping[str, str | None]], pd.DataFrame]]
    """The "paper versus this run" table (``paper_vs_run``) from the seeds' aggregates and the split map."""
    ranking: ClassVar[Callable[[pd.DataFrame], pd.DataFrame]]
    """Kendall's τ per split and metric (``paper_ranking``) from :attr:`vs_run`'s table."""
    ranking_wide: ClassVar[Callable[[pd.DataFrame], pd.DataFrame]]
    """``paper_ranking``'s wide (rendered) form."""
    homes: ClassVar[Mapping[str, SettingHome]] = {}
    """Home id -> :class:`SettingHome`: the homes of cross-paper settings this paper owns, its own (a seed's id) or a
    source it checks (a baseline's own demonstration). Config validation reads the ids from the source
    (cflcore.paper_sources.declared_homes): literals, or module-level string constants."""
    home_claims: ClassVar[Mapping[str, str]] = {}
    """Strategy method -> the id of this paper's claim that checks the method on its authors' own recipe (its home
    check): the cross-paper table reads that claim's verdict from the home-check study's ``paper_claims.csv``
    (``report.cross_paper.home_checks``, :func:`home_claims`)."""
    ablations: ClassVar[Mapping[str, str]] = {}
    """Config file of an ablation study (one of this paper's checks layered over with one departure put back, another
    recipe or more seeds) -> the id of this paper's claim it decides again. Literals only: the Snakefile's parse reads
    them from the source (cflcore.paper_sources.declared_ablations), and the report reads each study's verdict from
    its ``paper_claims.csv`` (:attr:`ClaimData.ablation_claims`)."""
    home_marks_table: ClassVar[str | None] = None
    """The catalogue kind of this paper's table (``tables/<kind>.csv``) whose rows give each home claim's mark
    (:data:`FAILS_AT_HOME` or :data:`NOT_TESTABLE` with why) in a ``mark`` column, the claim's id closing its
    ``verdict`` column ("… ; <claim id>)"): the cross-paper table reads it beside the verdict (:func:`home_mark`)."""
    roles: ClassVar[Mapping[str, Role]] = {}
    """Role key -> :class:`Role`: the runs the claims read. A study whose splits or variants carry other names maps
    them (``report.roles: {<paper>: {<role key>: <its split or variant>}}``); a role it does not map is read under the
    role's own name."""

    @classmethod
    def claims(cls) -> list[ClaimFn]:
        """The paper's claims, in their declaration order."""
        return list(CLAIMS.get(cls.registered_name, []))

    @classmethod
    def cast(cls, data: ClaimData, mapping: Mapping[str, str] | None) -> ClaimData:
        """``data`` as the claims read it: each run the study's ``mapping`` (role key -> its split or variant,
        ``report.roles.<paper>``) names renamed to its role's name, in every frame and loaded run; ``data`` itself
        without a mapping. An unknown role key is a ConfigError naming the field and the paper's roles."""
        if not mapping:
            return data
        field_ = f"report.roles.{cls.registered_name}"
        for key in mapping:
            if key not in cls.roles:
                raise ConfigError(f"{field_}: unknown role {key!r}; allowed: "
                                  f"{', '.join(sorted(cls.roles)) or 'none (the paper declares no roles)'}")
        names = {kind: {str(study): cls.roles[key].name for key, study in mapping.items() if cls.roles[key].kind == kind}
                 for kind in ROLE_KINDS}
        columns = {"split": ("split", "split_base"), "variant": ("algorithm", "algorithm_base")}

        def frame(df: pd.DataFrame | None) -> pd.DataFrame | None:
            if df is None or not len(df):
                return df
            out = df.copy()
            for kind, cols in columns.items():
                for col in cols:
                    if col in out and names[kind]:
                        out[col] = _renamed(out[col], names[kind])
            return out

        def run(loaded: Any) -> Any:
            spec = loaded.spec
            split = _renamed(pd.Series([spec.split]), names["split"]).iloc[0]
            algorithm = _renamed(pd.Series([spec.algorithm]), names["variant"]).iloc[0]
            return replace(loaded, spec=replace(spec, split=split, algorithm=algorithm))

        return replace(data, runs=frame(data.runs), rounds=frame(data.rounds), summaries=frame(data.summaries),
                       loaded=tuple(run(r) for r in data.loaded))

    @classmethod
    def departures(cls, context: Mapping[str, Any], headline: pd.DataFrame,
                   comparison: pd.DataFrame) -> PaperDepartures:
        """The study's departures by design from this paper, on the front page of a study that reports on it
        (cflcore.report.front_page.reported_papers). ``context``: cflcore.report.front_context.front_page_context's,
        its ``study`` datasets, clients and algorithms filled in from the results where the config is absent;
        ``headline``: the headline table; ``comparison``: the published-tables paper's ``paper_vs_run``. Default:
        none (a study states its own in ``report.departures``)."""
        return PaperDepartures()

    @classmethod
    def front_sections(cls, comparison: pd.DataFrame, ranking: pd.DataFrame) -> list[PaperCheck]:
        """The paper's own sections of the front page of a study that reports on it, after its claims' (``comparison``
        and ``ranking``: the published-tables paper's ``paper_vs_run`` and Kendall's τ). Default: none."""
        return []

    @classmethod
    def tables(cls, data: ClaimData, checked: bool) -> dict[str, pd.DataFrame]:
        """The paper's own tables (catalogue kind -> frame), written by the report's ``paper_tables`` writer for every
        registered paper: with the study's rows where it checks the paper (``checked``, ``report.paper_checks``;
        ``data`` cast to its roles), else the header only, so the files the workflow declares always exist. Default:
        none."""
        return {}


PAPERS: Registry[type[Paper]] = Registry("paper", package="cflcore.report.papers")
register_paper = PAPERS.register


def published_tables_paper() -> Any:
    """The registered paper whose published tables every study's report compares with (:attr:`Paper.published_tables`)."""
    found = [PAPERS.get(name) for name in PAPERS.names() if PAPERS.get(name).published_tables]
    if len(found) != 1:
        raise ValueError(f"{len(found)} registered papers set published_tables; exactly one must")
    return found[0]


def setting_homes() -> dict[str, SettingHome]:
    """Every registered paper's :attr:`Paper.homes`, by home id: the papers in the order of their ids, each paper's homes
    in its declaration's order (the order the cross-paper section speaks of them)."""
    return {home: facts for name in PAPERS.names() for home, facts in PAPERS.get(name).homes.items()}


def home_claims() -> dict[str, str]:
    """Every registered paper's :attr:`Paper.home_claims`: strategy method -> the claim that is its home check (the
    first paper by id that declares the method)."""
    found: dict[str, str] = {}
    for name in PAPERS.names():
        for method, claim_id in PAPERS.get(name).home_claims.items():
            found.setdefault(method, claim_id)
    return found


FAILS_AT_HOME = "fails at home"
"""A home check's mark where its runs could decide the claim and it does not hold: the authors' recipe, with the
departures put back as far as the data allows, does not reproduce their result (a verdict on the method at home)."""
NOT_TESTABLE = "not testable here"
"""A home check's mark where its runs cannot decide the claim whatever the method does (our data or scale cannot test
it), followed by why: not a verdict on the method."""


def home_mark(claim_id: str, tables_dir: str | Path) -> str:
    """The mark of the home claim ``claim_id`` as the home-check study's report wrote it in ``tables_dir`` (the table of
    the paper that declares the claim, :attr:`Paper.home_marks_table`); "" where none is written."""
    for name in PAPERS.names():
        paper = PAPERS.get(name)
        if paper.home_marks_table and claim_id in paper.home_claims.values():
            path = Path(tables_dir) / f"{paper.home_marks_table}.csv"
            if path.is_file():
                table = pd.read_csv(path, dtype=str, keep_default_na=False)
                if {"verdict", "mark"} <= set(table.columns):
                    rows = table[table["verdict"].str.endswith(f"; {claim_id})")]
                    return str(rows["mark"].iloc[0]) if len(rows) else ""
    return ""


def seed_study_methods() -> tuple[str, ...]:
    """The method families whose home is a seed's own study: the :attr:`SettingHome.methods` of each paper's home
    under the paper's own id (:attr:`Paper.homes`: "its own (a seed's id)"); the seed's study checks them."""
    return tuple(dict.fromkeys(method for name in PAPERS.names() for home, facts in PAPERS.get(name).homes.items()
                               if home == name for method in facts.methods))


def paper_data(paper: str, data: ClaimData, roles: Mapping[str, Mapping[str, str]] | None) -> ClaimData:
    """``data`` cast to the roles of ``paper`` the study maps (``report.roles``, :meth:`Paper.cast`)."""
    return PAPERS.get(str(paper), field="report.paper_checks").cast(data, (roles or {}).get(str(paper)))
