"""What the front page reads from the config, and the departures that follow from the config alone.

:func:`front_page_context` runs at every Snakemake parse (cflcore.stages.report_plan, dry runs included), so this
module imports neither pandas nor the paper's tables: the departures it derives need only the config. Those
measured against the results or the paper's tables are :mod:`cflcore.report.front_page`'s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .. import layout
from ..calibration_keys import CALIBRATION_KEY, TUNING_KEY
from ..plugin import PLUGIN_FACTS_KEY
from ..settings import EngineSettings
from . import catalogue


@dataclass(frozen=True)
class Departure:
    """One departure by design (from 000, or from the study's own paper: ``report.departures``) and what it does
    to the comparison."""

    topic: str
    ours: str
    paper: str
    effect: str


# ---- what the front page needs from the config -------------------------------------------------
def front_page_context(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-able part of a validated config the front page reads (the report rule's param), with the facts
    about its variants that validation derived from their plug-ins (cflcore.plugin.PLUGIN_FACTS_KEY), so that no
    plug-in is imported here: ``told_true_k``, the variants their own parameters tell the true number of groups,
    ``cannot_split``, variant -> split -> why it cannot recover that split's groups, and, where the study lists
    ``report.cross_paper.home_checks``, ``home_checks`` (:func:`home_check_files`)."""
    study = cfg["study"]
    facts = cfg.get(PLUGIN_FACTS_KEY) or {}
    checks = ({"home_checks": home_check_files(cfg)}
              if ((cfg.get("report") or {}).get("cross_paper") or {}).get("home_checks") else {})
    ablations = ablation_claims_files(cfg)
    block = cfg.get(CALIBRATION_KEY)  # its rule and chosen values, printed (cflcore.report.calibration)
    calibration = {CALIBRATION_KEY: {k: v for k, v in block.items() if k != TUNING_KEY}} if block else {}
    return {**checks, **({"ablation_claims": ablations} if ablations else {}), **calibration,
        "study": {k: study[k] for k in ("datasets", "splits", "clients", "seeds", "algorithms")},
        "datasets": {d: dict(cfg["datasets"][d]) for d in study["datasets"]},
        "splits": {s: dict(cfg["splits"][s]) for s in study["splits"]},
        "algorithms": {a: dict(cfg["algorithms"][a]) for a in study["algorithms"]},
        "told_true_k": list(facts.get("told_true_k") or []),
        "cannot_split": {a: dict(v) for a, v in (facts.get("cannot_split") or {}).items()},
        "engine": dict(cfg.get("engine") or {}),
        "report": dict(cfg.get("report") or {}),
    }


def home_check_files(cfg: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each study variant -> the ``paper_claims.csv`` of the home-check studies that run its strategy method (the
    ``home_checks`` fact of :data:`cflcore.plugin.PLUGIN_FACTS_KEY`: their results folders), in the order listed;
    [] where none does. The path is the report's own (:data:`catalogue.CLAIMS_TABLE` under the study's report
    folder)."""
    studies = (cfg.get(PLUGIN_FACTS_KEY) or {}).get("home_checks") or {}
    claims = catalogue.OUTPUTS[catalogue.CLAIMS_TABLE].paths()[0]
    return {a: [layout.report_file(results, claims) for results in studies.get(str(cfg["algorithms"][a]["method"]), [])]
            for a in cfg["study"]["algorithms"]}


def ablation_claims_files(cfg: Mapping[str, Any]) -> dict[str, list[list[str]]]:
    """Claim id -> [ablation study, its ``paper_claims.csv``] for each ablation study of a claim of a paper the study
    checks (the ``ablations`` fact of :data:`cflcore.plugin.PLUGIN_FACTS_KEY`: their results folders, derived at
    validation from the papers' declarations, cflcore.paper_sources.declared_ablations)."""
    studies = (cfg.get(PLUGIN_FACTS_KEY) or {}).get("ablations") or {}
    claims = catalogue.OUTPUTS[catalogue.CLAIMS_TABLE].paths()[0]
    return {claim_id: [[study, layout.report_file(results, claims)] for study, results in entries]
            for claim_id, entries in studies.items()}


# ---- departures from the config alone ----------------------------------------------------------------------
def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def split_departures(splits: Mapping[str, Mapping[str, Any]]) -> list[Departure]:
    """One line per distinct ``samples_per_client`` (the paper draws len(train) / n_clients per client)."""
    by_size: dict[int, list[str]] = {}
    for name, settings in splits.items():
        if settings.get("samples_per_client"):
            by_size.setdefault(int(settings["samples_per_client"]), []).append(name)
    return [Departure(f"Split size ({', '.join(names)})", f"{n} samples drawn per client",
                      "len(train) / n_clients per client (docs/architecture.md §7)",
                      "Smaller local train/test sets: lower and noisier per-client PF1 than the paper's; "
                      "clustering is unaffected as long as each client still shows its cluster's classes.")
            for n, names in by_size.items()]


def engine_departures(engine: EngineSettings, paper: str) -> list[Departure]:
    """From the study's typed engine block (cflcore.settings.EngineSettings), against ``paper`` (the id of the paper
    whose published tables the report sets beside the runs)."""
    out = []
    participation = float(engine.participation or 1.0)
    if participation < 1.0:
        out.append(Departure("Participation", f"{participation:g} of the clients per round", "every client, every round",
                             "Fewer updates per round: the divergence matrix and temperature see a subset, so "
                             "clustering rounds and scores are noisier than the paper's."))
    aggregation = engine.aggregation
    if aggregation != "unweighted":
        out.append(Departure("Aggregation", str(aggregation), f"unweighted mean ({paper})",
                             "Large clients weigh more in each cluster model: PF1 of small clients may drop."))
    return out


def metric_departure() -> Departure:
    return Departure("PF1 / GF1 definition",
                     "macro F1 of each client's cluster model on its local test split (PF1) and on the "
                     "orchestrator's test set (GF1), averaged over clients (docs/architecture.md §8)",
                     "the f1score columns of the authors' after_update_metrics.csv / "
                     "after_update_generalizability.csv, averaged over clients and rounds (Fig. 2's data)",
                     "The F1 averaging of the published files is not stated, so absolute differences carry "
                     "that uncertainty; the ranking (τ) does not.")
