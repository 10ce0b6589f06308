"""The checks across a study config's fields, and of its requests against the data, before any job runs.

Each field of a config has its own check (the schema, the plug-ins' parameter schemas: cflcore.config). What those
cannot see is a field that names something another field defines, or asks what a dataset cannot give:

* :func:`check_cross_references` (validation, after the study checks): every claim id a config names
  (``report.claim_notes``, ``report.claims_not_carried``, ``report.seed_stages``) is a claim of the study's paper
  checks (``report.paper_checks``; the ids are read from the paper modules' source,
  cflcore.paper_sources.declared_claims), a claim's seed stages end at the study's seeds, every
  setting of ``report.cross_paper`` is a split of the study, every ``explain.grid_clients`` index a client of an
  explained run, and every client count of a split gives each of its ground-truth groups a client (a ``rotation``
  split with 4 angles needs 4 clients; the split generator says which groups its parameters fix,
  ``SplitGenerator.group_sizes``), and every round a split's drift schedule names is a round of its runs
  (:func:`check_drift_rounds`);
* :func:`check_data_requests` (cflcore.config.check_feasible, never remembered: the disk may change): against what
  each dataset's loader declares without reading an image (cflcore.data.loaders.SourceFacts): every class a split
  names is one of the dataset's, every client gets its minimum of samples, a split draws no more per client than the
  train part holds (and, drawn without replacement, no more in all), and the dataset's files are on disk or may be
  downloaded (or its Parquet is already prepared).

Every refusal is one ConfigError line naming the dotted field, the value and what would be allowed. Two warnings: a
batch above a client's local training samples (each step is then full-batch, as IFCA's authors' recipe runs), and:
a dry run (``snakemake -n``) of a study whose data is missing plans as asked, so it is told, not refused.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import ConfigError
from .kernel_paths import KERNEL_PATHS
from .layout import dataset_file
from .paper_sources import declared_claims, declared_homes, declared_papers, declared_roles
from .registry import declared_names
from .sweep_expansion import INDEX_KEY

log = logging.getLogger(__name__)

REFUSE, WARN = "refuse", "warn"
"""What :func:`check_data_requests` does with a dataset neither on disk nor allowed to download: refuse it (a run is
about to start) or warn (a dry run, or validation alone: the data job would refuse it)."""

CLAIM_FIELDS = ("claims_not_carried", "claim_notes", "seed_stages")
"""The ``report.<field>`` mappings keyed by claim id."""


def entry_field(cfg: Mapping[str, Any], section: str, name: str) -> str:
    """The config field an entry comes from: ``algorithms.louvain``, or for an entry expanded from a sweep
    (cflcore.sweep_expansion) ``algorithms.louvain.sweep{resolution=0.5}``, so an error names what the user wrote."""
    record = ((cfg.get(INDEX_KEY) or {}).get(section) or {}).get(name)
    if record is None:
        return f"{section}.{name}"
    labels = ",".join(f"{k}={v}" for k, v in record["labels"].items())
    return f"{section}.{record['base']}.sweep{{{labels}}}"


def _clients_field(cfg: Mapping[str, Any], split: str) -> str:
    """Where a split's client counts come from: its own ``clients`` list, or the study's."""
    return f"{entry_field(cfg, 'splits', split)}.clients" if cfg["splits"][split].get("clients") else "study.clients"


# ---------------------------------------------------------------------------------------------- names
def check_cross_references(cfg: Mapping[str, Any], scenarios: Iterable[Mapping[str, Any]],
                           split_params: Mapping[str, Mapping[str, Any]]) -> None:
    """Every name the config gives resolves to what the study has; every client count fills every group of its
    split. ``scenarios``: the study's grid (cflcore.config.scenarios); ``split_params``: split -> its generator's
    parameters (cflcore.config.split_settings)."""
    report = cfg.get("report") or {}
    scenarios = list(scenarios)
    _check_claim_ids(report)
    _check_seed_stages(cfg, report)
    _check_roles(cfg, report)
    _check_cross_paper_splits(cfg, report)
    _check_groups_have_clients(cfg, scenarios, split_params)
    _check_grid_clients(cfg, scenarios)


def check_drift_rounds(cfg: Mapping[str, Any], split_params: Mapping[str, Mapping[str, Any]],
                       run_rounds: Iterable[tuple[str, int, str]]) -> None:
    """Every round a split's drift schedule names (cflcore.data.drift) is a round of every run on it: ``run_rounds``
    gives (split, rounds, the field the rounds come from) of each run of the study."""
    from .data.drift import DRIFT_KEY, check_schedule_rounds

    for split, rounds, rounds_field in run_rounds:
        schedule = split_params[split].get(DRIFT_KEY)
        if schedule:
            check_schedule_rounds(schedule, int(rounds), f"{entry_field(cfg, 'splits', split)}.{DRIFT_KEY}",
                                  rounds_field)


def claims_allowed(papers: Iterable[str]) -> list[str]:
    """The claim ids of the paper checks ``papers`` (``report.paper_checks``), in their declaration order."""
    declared = declared_claims()
    return [c for p in papers for c in declared.get(str(p), ())]


def _check_claim_ids(report: Mapping[str, Any]) -> None:
    papers = [str(p) for p in report.get("paper_checks") or []]
    allowed = claims_allowed(papers)
    for key in CLAIM_FIELDS:
        for claim_id in report.get(key) or {}:
            if claim_id in allowed:
                continue
            owner = next((p for p, ids in declared_claims().items() if claim_id in ids), None)
            why = (f"a claim of {owner}, whose check the study does not run" if owner
                   else "no paper check defines it")
            none = f"none until report.paper_checks names a paper with claims ({', '.join(sorted(declared_claims()))})"
            raise ConfigError(f"report.{key}: {claim_id!r} is not a claim of the study's paper checks ({why}; "
                              f"report.paper_checks: {papers}); allowed: {', '.join(allowed) or none}")


def _check_seed_stages(cfg: Mapping[str, Any], report: Mapping[str, Any]) -> None:
    """Each claim's stages (``report.seed_stages``, cflcore/report/statistics/stages.py: [n1, n]) read more seeds at
    the second look than at the first, and the second reads all of ``study.seeds``."""
    seeds = len(cfg["study"]["seeds"])
    for claim_id, sizes in (report.get("seed_stages") or {}).items():
        if not (len(sizes) == 2 and 2 <= sizes[0] < sizes[1] == seeds):
            allowed = (f"[n1, {seeds}] with 2 <= n1 < {seeds} (the first n1 of study.seeds, then all of them)"
                       if seeds > 2 else "none: two stages need at least 3 study seeds")
            raise ConfigError(f"report.seed_stages.{claim_id}: {list(sizes)} with {seeds} study seeds; "
                              f"allowed: {allowed}")


def _check_roles(cfg: Mapping[str, Any], report: Mapping[str, Any]) -> None:
    """Each ``report.roles`` key is a paper the study checks, each of its keys a role the paper declares
    (cflcore.paper_sources.declared_roles), and each value a split (or a variant) of the study, as the role names."""
    papers = [str(p) for p in report.get("paper_checks") or []]
    names = {"split": sorted(cfg["study"]["splits"]), "variant": sorted(cfg["study"]["algorithms"])}
    swept = cfg.get(INDEX_KEY) or {}
    for kind, group in (("split", "splits"), ("variant", "algorithms")):  # a swept name's base names its runs too
        names[kind] = sorted(set(names[kind]) | {(swept.get(group) or {})[n]["base"] for n in names[kind]
                                                 if n in (swept.get(group) or {})})
    for paper, mapping in (report.get("roles") or {}).items():
        if str(paper) not in papers:
            raise ConfigError(f"report.roles: {paper!r} is not a paper the study checks; allowed: "
                              f"{', '.join(papers) or 'none until report.paper_checks names one'} (report.paper_checks)")
        declared = declared_roles().get(str(paper), {})
        for role, name in mapping.items():
            if role not in declared:
                raise ConfigError(f"report.roles.{paper}: unknown role {role!r}; allowed: "
                                  f"{', '.join(sorted(declared)) or 'none (the paper declares no roles)'}")
            kind = declared[role]
            if name not in names[kind]:
                raise ConfigError(f"report.roles.{paper}.{role}: {name!r} is not a {kind} of the study; allowed: "
                                  f"{', '.join(names[kind])}")


def _check_cross_paper_splits(cfg: Mapping[str, Any], report: Mapping[str, Any]) -> None:
    """Each ``report.cross_paper.settings`` key is a split of the study (or the base name of a swept one)."""
    study = list(cfg["study"]["splits"])
    swept = (cfg.get(INDEX_KEY) or {}).get("splits") or {}
    allowed = sorted(set(study) | {swept[s]["base"] for s in study if s in swept})
    for split in ((report.get("cross_paper") or {}).get("settings") or {}):
        if split not in allowed:
            raise ConfigError(f"report.cross_paper.settings: {split!r} is not a split of the study, so its column "
                              f"would be empty; allowed: {', '.join(allowed)} (study.splits)")


def _check_groups_have_clients(cfg: Mapping[str, Any], scenarios: list[Mapping[str, Any]],
                               split_params: Mapping[str, Mapping[str, Any]]) -> None:
    """A split whose parameters fix k ground-truth groups (``rotation``'s angles, ``dirichlet-mix``'s alphas, ...)
    needs at least max(3, k) clients in each of its scenarios: with fewer, a group has no client and the study's
    ground truth silently has fewer groups than the config names."""
    from .data.splits import SPLIT_GENERATORS
    from .data.splits.base import min_clients

    for s in scenarios:
        split, n = s["split"], int(s["clients"])
        generator = SPLIT_GENERATORS.get(split_params[split]["generator"])(split_params[split])
        sizes = generator.group_sizes(n)
        k = len(sizes) if sizes is not None else None
        if k is None or n >= min_clients(k):
            continue
        groups = f"{entry_field(cfg, 'splits', split)}.{generator.group_key}"
        raise ConfigError(f"{_clients_field(cfg, split)}: {n} clients are too few for the {k} groups of {groups}, so "
                          f"a group would have no client; allowed: at least {min_clients(k)} clients (one per group, "
                          f"and at least 3), or fewer groups in {groups}")


def _check_grid_clients(cfg: Mapping[str, Any], scenarios: list[Mapping[str, Any]]) -> None:
    """Each ``explain.grid_clients`` index is a client of some explained run (the report draws, per run, the indices
    its clients have: an index beyond every explained run's clients draws nothing)."""
    explain = cfg.get("explain") or {}
    if not explain.get("enabled"):
        return
    only = (cfg["study"].get("explain") or {}).get("clients")
    counts = sorted({int(s["clients"]) for s in scenarios if not only or s["clients"] in only})
    if not counts:
        return
    for i, client in enumerate(explain.get("grid_clients") or []):
        if client >= counts[-1]:
            raise ConfigError(f"explain.grid_clients[{i}]: client {client} is in no explained run (their client "
                              f"counts: {', '.join(map(str, counts))}), so the grid draws nothing for it; allowed: "
                              f"client indices 0..{counts[-1] - 1}")


# ---------------------------------------------------------------------------------------------- the data
def check_data_requests(cfg: Mapping[str, Any], scenarios: Iterable[Mapping[str, Any]],
                        data_settings: Mapping[str, Mapping[str, Any]],
                        split_params: Mapping[str, Mapping[str, Any]], missing_data: str,
                        batch_sizes: Mapping[tuple[str, str], Mapping[int, str]]) -> None:
    """Every scenario's requests against its dataset's declared facts (module doc). ``data_settings``: dataset ->
    cflcore.config.data_settings; ``missing_data``: :data:`REFUSE` or :data:`WARN`; ``batch_sizes``: (dataset, split)
    -> the batch sizes its runs train with (a variant's own recipe may set one), each -> the field it comes from."""
    from .data.loaders import source_facts
    from .data.splits import SPLIT_GENERATORS

    facts = {d: source_facts(settings) for d, settings in data_settings.items()}
    for d, settings in data_settings.items():
        if facts[d] is not None:
            _check_on_disk(cfg, d, settings, facts[d], missing_data)
    generators = {name: SPLIT_GENERATORS.get(p["generator"]) for name, p in split_params.items()}
    params = {name: generators[name].normalise(p) for name, p in split_params.items()}
    settings_of = {(s["dataset"], s["split"], int(s["clients"])): s for s in scenarios}  # seeds aside: each is alike
    for s in settings_of.values():
        d, split = s["dataset"], s["split"]
        if facts[d] is None:
            continue
        generators[split].check_classes(params[split], facts[d].classes, str(data_settings[d]["loader"]),
                                        entry_field(cfg, "splits", split))
        _check_shares(cfg, s, data_settings[d], params[split], batch_sizes.get((d, split)) or {})
        _check_drift_draws(cfg, s, data_settings[d], params[split], generators[split])


def _check_on_disk(cfg: Mapping[str, Any], dataset: str, settings: Mapping[str, Any], facts: Any,
                   missing_data: str) -> None:
    if facts.on_disk or (facts.downloadable and settings["download"]):
        return
    if Path(dataset_file(str(cfg["results_dir"]).rstrip("/"), dataset)).exists():
        return  # already prepared: the data job has nothing to read
    allowed = ("download: true, or its files placed there" if facts.downloadable
               else "its files placed there (this loader cannot download)")
    message = (f"datasets.{dataset}.loader: {settings['loader']!r} has no files at {facts.location} and "
               f"download is {str(bool(settings['download'])).lower()}; allowed: {allowed}")
    if missing_data == REFUSE:
        raise ConfigError(message)
    log.warning("config warning: %s (a run would be refused)", message)


def _check_shares(cfg: Mapping[str, Any], scenario: Mapping[str, Any], settings: Mapping[str, Any],
                  params: Mapping[str, Any], batch_sizes: Mapping[int, str]) -> None:
    """Per client: at least the split's minimum of the train part (``len(train) // clients``, what a split without
    ``samples_per_client`` draws, 000 §4.1), ``samples_per_client`` draws within the train part (all clients' draws
    within it where the split draws without replacement, ``replace: false``), and a local train
    part (the draws less the local test fraction, an upper bound: duplicates are dropped before it is taken); a batch
    above it is told, not refused: each step is then full-batch, which the study can run as asked."""
    from .data.loaders import train_size
    from .data.splits.base import MIN_SAMPLES_PER_CLIENT
    from .data.splits.build import local_train_bound

    n_train = train_size(settings)
    if n_train is None:
        return
    d, split, n = scenario["dataset"], scenario["split"], int(scenario["clients"])
    field = entry_field(cfg, "splits", split)
    draws = params.get("samples_per_client")
    if isinstance(draws, int) and draws > n_train:
        raise ConfigError(f"{field}.samples_per_client: {draws} draws per client from the {n_train} train samples of "
                          f"dataset {d}; allowed: at most {n_train} (draws beyond the train part only repeat samples, "
                          f"and cost memory per draw)")
    if n_train // n < MIN_SAMPLES_PER_CLIENT:
        raise ConfigError(f"{_clients_field(cfg, split)}: {n} clients on dataset {d} (split {split}) get {n_train // n} "
                          f"of its {n_train} train samples each; allowed: at most "
                          f"{n_train // MIN_SAMPLES_PER_CLIENT} clients ({MIN_SAMPLES_PER_CLIENT} samples each, "
                          f"the split's minimum; datasets.{d}.max_train and test_fraction set the train part)")
    if isinstance(draws, int) and params.get("replace") is False and n * draws > n_train:
        raise ConfigError(f"{field}.replace: false: {n} clients × {draws} draws need {n * draws} distinct images, dataset "
                          f"{d} has {n_train} train samples; allowed: at most {n_train // n} samples_per_client with {n} "
                          "clients, or replace: true")
    if not isinstance(draws, int):
        draws = n_train // n
    local = local_train_bound(draws, float(params["local_test_fraction"]))
    for batch, batch_field in batch_sizes.items():
        if batch > local:
            log.warning("config warning: %s: %s is more than the %s local train samples a client holds at most on "
                        "split %s with %s clients (%s draws, less the local test part): every local step takes the "
                        "client's whole train part (full-batch, as IFCA's authors' recipe does)",
                        batch_field, batch, local, split, n, draws)



def _check_drift_draws(cfg: Mapping[str, Any], scenario: Mapping[str, Any], settings: Mapping[str, Any],
                       params: Mapping[str, Any], generator: Any) -> None:
    """A class-distribution split's drift schedule without replacement (cflcore.data.drift): each client that moves
    draws a new sample from the images no client holds; the train part must hold the clients' draws and those of the
    first event's movers (the fewest the schedule can draw; the split job checks the exact count, per class)."""
    from .data.drift import DRIFT_KEY, fewest_drawn_pairs
    from .data.loaders import train_size

    n_train = train_size(settings)
    schedule = params.get(DRIFT_KEY)
    if n_train is None or not schedule or params.get("replace") is not False or not generator.drift_draws:
        return
    n = int(scenario["clients"])
    draws = params.get("samples_per_client") or n_train // n
    movers = fewest_drawn_pairs(schedule, generator(params).group_sizes(n), n)
    if (n + movers) * draws > n_train:
        raise ConfigError(f"{entry_field(cfg, 'splits', scenario['split'])}.{DRIFT_KEY}: with replace: false, {n} "
                          f"clients × {draws} draws and at least {movers} moving clients × {draws} new draws need "
                          f"{(n + movers) * draws} distinct images, dataset {scenario['dataset']} has {n_train} train "
                          f"samples; allowed: a smaller first event, fewer samples_per_client or clients, or replace: "
                          "true")


# ---------------------------------------------------------------------------------------------- the reference
def naming_fields() -> dict[str, str]:
    """Each field that names something (as docs/configuration.md writes its path) -> a sentence saying what it may name
    ("Names ...") or, for a request of the data, how much it may ask ("Allowed: ..."), as validation checks it: the
    config reference (cflcore/config_reference.py) prints it after the field's description. Names come from their declarations
    (the plug-ins' and claims' decorators, the loaders' facts), so the page follows them."""
    from .data.loaders import loader_declarations
    from .data.splits.base import MIN_SAMPLES_PER_CLIENT, min_clients

    loaders = loader_declarations()
    classes = "; ".join(f"{name} {facts.classes}" for name, facts in loaders.items())
    downloads = ", ".join(name for name, facts in loaders.items() if facts.downloadable)
    claims = "; ".join(f"{paper}: {', '.join(ids)}" for paper, ids in declared_claims().items())
    study_split = "an entry of `splits:`, and at least one of them a split of the study (`study.splits`)"
    counts = (f"at least {min_clients(0)} clients, and at least the number of groups of a split whose parameters fix "
              f"them (a `rotation` split's `angles`, `dirichlet-mix`'s `alphas`, ...: one client per group), and at "
              f"most the dataset's train part / {MIN_SAMPLES_PER_CLIENT} ({MIN_SAMPLES_PER_CLIENT} samples a client)")
    return {
        "study.datasets": "Names entries of `datasets:`",
        "study.splits": "Names entries of `splits:`",
        "study.clients": f"Allowed: {counts}",
        "study.algorithms": "Names entries of `algorithms:`",
        "study.explain.clients": "Names client counts of the study (`study.clients`, `splits.<name>.clients`)",
        "datasets.<name>.loader": (f"Names a dataset loader: {', '.join(declared_names('dataset'))}; its files on "
                                   f"disk under `data_root`, or `download: true` for a loader that downloads ({downloads}); a "
                                   f"run of a study whose data is neither is refused, a dry run is told"),
        "datasets.<name>.model": f"Names a model: {', '.join(declared_names('model'))}",
        "datasets.<name>.batch_size": ("Allowed: at most the local train samples of a client: its draws "
                                       "(`samples_per_client`, or the train part / clients) less the split's "
                                       "`local_test_fraction`"),
        "datasets.<name>.splits": f"Names {study_split}",
        "datasets.<name>.algorithm_params": "Its keys name entries of `algorithms:`",
        "splits.<name>.generator": f"Names a split generator: {', '.join(declared_names('split generator'))}",
        "splits.<name>.swaps": f"Names class indices of the dataset, 0 to its class count − 1 (classes: {classes})",
        "splits.<name>.class_sets": (f"Names class indices of the dataset, 0 to its class count − 1 (classes: "
                                     f"{classes}); null: the generator's default sets, which exist for some class "
                                     f"counts only"),
        "splits.<name>.samples_per_client": "Allowed: at most the dataset's train part (after `max_train`)",
        "splits.<name>.clients": f"Allowed: {counts}",
        "algorithms.<name>.method": f"Names a method: {', '.join(declared_names('method'))}",
        "algorithms.<name>.splits": f"Names {study_split}",
        "whatif.algorithms": "Names variants of the study (`study.algorithms`)",
        "whatif.clusterers[].clusterer": (f"Names a clusterer: {', '.join(declared_names('clusterer'))}, or an "
                                          f"import path `sklearn.cluster.<Class>` or `hdbscan.HDBSCAN`"),
        "explain.grid_clients": "Names clients of the explained runs: indices below their largest client count",
        "report.paper_checks": "Names papers: " + ", ".join(declared_papers()),
        "report.kernel_paths": "Names kernel paths: " + ", ".join(KERNEL_PATHS),
        "report.claim_notes": f"Its keys name claims of the papers in `report.paper_checks` ({claims})",
        "report.claims_not_carried": f"Its keys name claims of the papers in `report.paper_checks` ({claims})",
        "report.seed_stages": (f"Its keys name claims of the papers in `report.paper_checks` ({claims}); each value "
                               "[n1, n] has 2 <= n1 < n and n the number of `study.seeds`"),
        "report.roles": ("Its keys name papers of `report.paper_checks`; under each, its keys name roles the paper declares "
                         "(" + "; ".join(f"{p}: {', '.join(r)}" for p, r in declared_roles().items()) + ") and "
                         "their values a split (a split role) or a variant (a variant role) of the study"),
        "report.cross_paper.settings": "Its keys name splits of the study (`study.splits`, or a swept split's base name)",
        "report.cross_paper.settings.<name>.home": "Names a home: " + ", ".join(declared_homes()),
    }


def check_availability(availability: Mapping[str, Any], rounds: int, n_groups: int | None, field: str,
                       where: str) -> None:
    """``engine.availability`` (cflcore/fl/participation.py; its defaults filled) against a run's rounds and its split's groups
    (``n_groups``: None where the data decides them): ``group_rates`` one per group, ``quiet`` windows inside the run
    and naming groups there are, mode ``label`` naming classes, and no round in which no client can show up (every
    group's rate 0 or every group quiet). ``field``: where the block was set; ``where``: the run, for the message."""
    mode = availability["mode"]
    if mode == "label" and not availability["classes"]:
        raise ConfigError(f"{field}.classes: [] names no class for mode label ({where}); allowed: one class or more")
    if mode != "group":
        return
    rates = [float(r) for r in availability["group_rates"]]
    quiet = [(int(w["group"]), int(w["rounds"][0]), int(w["rounds"][1])) for w in availability["quiet"]]
    for i, (g, first, last) in enumerate(quiet):
        if not first <= last < rounds:
            raise ConfigError(f"{field}.quiet[{i}].rounds: [{first}, {last}] is not a stretch of this run's {rounds} "
                              f"rounds ({where}); allowed: [first, last] with 0 <= first <= last <= {rounds - 1}")
        if n_groups is not None and g >= n_groups:
            raise ConfigError(f"{field}.quiet[{i}].group: {g} is not a group of the split ({where}, {n_groups} groups); "
                              f"allowed: 0..{n_groups - 1}")
    if n_groups is not None and rates and len(rates) != n_groups:
        raise ConfigError(f"{field}.group_rates: {len(rates)} rates for the split's {n_groups} groups ({where}); "
                          f"allowed: [] or {n_groups} rates in [0, 1]")
    groups = n_groups if n_groups is not None else len(rates) or None
    if groups is None:
        return
    rate = rates or [1.0] * groups
    for rnd in range(rounds):
        silent = {g for g, first, last in quiet if first <= rnd <= last}
        if all(rate[g] == 0 or g in silent for g in range(groups)):
            raise ConfigError(f"{field}: round {rnd} leaves no client able to show up ({where}: group rates {rate}, "
                              f"quiet groups {sorted(silent)}); allowed: a group with a rate above 0 outside its quiet "
                              f"windows in every round")
