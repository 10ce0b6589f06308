"""The checks of each run of the study grid against its own engine and recipe (cflcore.config.plan.run_settings), before
any job: its participation samples a client, its kept optimiser states have a trainer that keeps them, its availability
leaves every round a client (issue 69). A part of :mod:`.validate` (``_check_study``), kept apart to hold that module
under the project's length limit."""
from __future__ import annotations

from typing import Any, Mapping

from ..config_checks import check_availability, entry_field
from ..defaults import config_defaults
from ..errors import ConfigError
from .plan import run_settings, run_variant, split_settings


def check_runs(cfg: Mapping[str, Any], runs: list[tuple[dict[str, Any], str]]) -> None:
    """Every check below on every (scenario, variant) of ``runs``."""
    for scenario, algorithm in runs:
        check_participation(cfg, scenario, algorithm)
        check_kept_optimizer_state(cfg, scenario, algorithm)
    check_availability_of_runs(cfg, runs)


def check_availability_of_runs(cfg: Mapping[str, Any], runs: list[tuple[dict[str, Any], str]]) -> None:
    """``engine.availability`` against each run's rounds and its split's groups (cflcore.config_checks.check_availability)."""
    from ..data.splits import SPLIT_GENERATORS

    for scenario, algorithm in runs:
        d, sp, n = scenario["dataset"], scenario["split"], int(scenario["clients"])
        settings = run_settings(cfg, d, algorithm, sp)
        availability = settings["engine"].get("availability")
        if not availability:
            continue
        own = "availability" in (run_variant(cfg, d, algorithm).get("engine") or {})
        split_own = "availability" in (cfg["splits"][sp].get("engine") or {})
        field = (f"{entry_field(cfg, 'algorithms', algorithm)}.engine.availability" if own
                 else f"{entry_field(cfg, 'splits', sp)}.engine.availability" if split_own else "engine.availability")
        generator = SPLIT_GENERATORS.get(cfg["splits"][sp]["generator"])(split_settings(cfg, sp), field=f"splits.{sp}")
        sizes = generator.group_sizes(n)
        check_availability({**config_defaults("engine.availability"), **availability},
                           int(settings["training"]["rounds"]), None if sizes is None else len(sizes), field,
                           f"dataset {d}, split {sp}, {n} clients, variant {algorithm}")


def check_participation(cfg: Mapping[str, Any], scenario: Mapping[str, Any], algorithm: str) -> None:
    """The engine samples round(participation × clients) clients a round (cflcore.fl.engine.sample_clients): that must
    be at least one, or the run would silently train one client where the config asks for none."""
    d, sp, n = scenario["dataset"], scenario["split"], int(scenario["clients"])
    p = float(run_settings(cfg, d, algorithm, sp)["engine"]["participation"])
    if p >= 1.0 or round(p * n) >= 1:
        return
    override = (cfg["datasets"][d].get("algorithm_params") or {}).get(algorithm) or {}
    if "participation" in (override.get("engine") or {}):
        field = f"datasets.{d}.algorithm_params.{algorithm}.engine.participation"
    elif "participation" in (cfg["algorithms"][algorithm].get("engine") or {}):
        field = f"{entry_field(cfg, 'algorithms', algorithm)}.engine.participation"
    elif "participation" in (cfg["splits"][sp].get("engine") or {}):
        field = f"{entry_field(cfg, 'splits', sp)}.engine.participation"
    elif "participation" in cfg["splits"][sp]:
        field = f"{entry_field(cfg, 'splits', sp)}.participation"
    else:
        field = "engine.participation"
    raise ConfigError(f"{field}: {p} samples no client of {n} (round({p} × {n}) = 0; run {d}/{sp}/{algorithm}); "
                      f"allowed: a participation above {0.5 / n:.4g} with {n} clients")


def kept_state_trainer(engine: Mapping[str, Any]) -> str | None:
    """Why a run with ``optimizer_state: kept`` cannot keep its clients' optimiser states, or None where it can: the
    trainer that would run it (cflcore.fl.run.build_engine) must take them. The loop and vmap trainers do; the
    personalisation trainer (cflcore.fl.personal) starts every inner problem's optimiser afresh."""
    kind = {**config_defaults("engine.personalisation"), **(engine.get("personalisation") or {})}["kind"]
    if kind != "none":
        return f"engine.personalisation.kind {kind} (its trainer starts every inner problem afresh)"
    return None


def check_kept_optimizer_state(cfg: Mapping[str, Any], scenario: Mapping[str, Any], algorithm: str) -> None:
    """A run whose recipe keeps its clients' optimiser states (``optimizer_state: kept``) needs a trainer that takes
    them (:func:`kept_state_trainer`); refused here, before any job, as the run itself would refuse it."""
    d, sp = scenario["dataset"], scenario["split"]
    settings = run_settings(cfg, d, algorithm, sp)
    if settings["training"].get("optimizer_state") != "kept":
        return
    reason = kept_state_trainer(settings["engine"])
    if reason is None:
        return
    own = "optimizer_state" in (run_variant(cfg, d, algorithm).get("training") or {})
    field = f"{entry_field(cfg, 'algorithms', algorithm)}.training.optimizer_state" if own else f"datasets.{d}.optimizer_state"
    raise ConfigError(f"{field}: kept cannot run with {reason} (run {d}/{sp}/{algorithm}); allowed: per_round, or "
                      f"kept with engine.personalisation.kind none")
