"""Plan a validated study (cflcore.config, step 3): its grid of scenarios and runs, and the settings of every job.

Every function here takes a config :mod:`cflcore.config.validate` returned: validation filled every default of the
schema once, so none of them applies one again. Each job's settings hold only what that job depends on (its rule's
params, docs/architecture.md §2), so a change of ``lr`` reruns the training and nothing upstream of it.
"""
from __future__ import annotations

import copy
import re
from typing import Any, Iterator, Mapping

from ..defaults import config_defaults, device_identity
from ..errors import ConfigError
from ..layout import scenario_id
from ..settings import NOT_TRAINING

STUDY_KEYS = ("splits", "engine", "training")
"""Keys of an algorithm variant that belong to the study, not to the strategy: ``splits`` restricts the
variant to some splits of the grid (default: all); ``engine`` overrides engine options for this variant's
runs only (e.g. ``engine: {participation: 0.5}``, or a swept ``engine.participation``); ``training`` overrides
keys of the dataset's training recipe for this variant's runs only (e.g. ``training: {optimizer_state: kept}``,
:func:`run_training`). They are stripped before the strategy is built."""


def strategy_params(variant: Mapping[str, Any]) -> dict[str, Any]:
    """A variant without ``method`` and without the study-level keys (:data:`STUDY_KEYS`)."""
    return {k: v for k, v in variant.items() if k != "method" and k not in STUDY_KEYS}


def algorithm_splits(cfg: Mapping[str, Any]) -> dict[str, list[str]]:
    """algorithm -> the splits its variant is restricted to (only variants with a ``splits:`` list)."""
    return {str(a): list(v["splits"]) for a, v in (cfg.get("algorithms") or {}).items() if v.get("splits")}


# ---------------------------------------------------------------------------------------------
# The what-if replay: which clusterers a ``whatif`` job replays
# ---------------------------------------------------------------------------------------------
WHATIF_IMPORT_PATH = re.compile(r"^(sklearn\.cluster|hdbscan)\.([A-Za-z][A-Za-z0-9_]*)$")
"""An sklearn-style import path a what-if entry may name: only ``sklearn.cluster.<Class>`` (Class on
``cflcore.clustering.clusterers.SKLEARN_ALLOWLIST``) and ``hdbscan.HDBSCAN``. The string is matched,
never imported or evaluated."""
WHATIF_ENTRY_KEYS = ("name", "clusterer", "select_k", "k_max")  # every other key is a clusterer parameter


def whatif_clusterer_params(entry: Mapping[str, Any], field: str) -> dict[str, Any]:
    """The ``cflcore.clustering`` clusterer parameters of one ``whatif.clusterers`` entry: its keys minus
    :data:`WHATIF_ENTRY_KEYS`, with ``clusterer`` a registered name. ``sklearn.cluster.<Class>`` becomes
    ``{clusterer: sklearn, estimator: <Class>}`` (keyword arguments under ``clusterer_params``) and
    ``hdbscan.HDBSCAN`` becomes ``{clusterer: hdbscan, backend: hdbscan}`` (the ``hdbscan`` package)."""
    params = {k: copy.deepcopy(v) for k, v in entry.items() if k not in WHATIF_ENTRY_KEYS}
    name = str(entry["clusterer"])
    match = WHATIF_IMPORT_PATH.match(name)
    if match is None:
        return {"clusterer": name, **params}
    module, cls = match.groups()
    if module == "hdbscan":
        if cls != "HDBSCAN" or "backend" in params:
            raise ConfigError(f"{field}.clusterer: {name!r} is not allowed; allowed from the hdbscan package: "
                              f"hdbscan.HDBSCAN (without a backend key)")
        return {"clusterer": "hdbscan", "backend": "hdbscan", **params}
    if "estimator" in params:
        raise ConfigError(f"{field}.estimator: not allowed beside the import path {name!r}; allowed: no estimator key")
    return {"clusterer": "sklearn", "estimator": cls, **params}


def own_clusterer(variant: Mapping[str, Any]) -> dict[str, Any] | None:
    """The clusterer a run itself used, as clusterer parameters, when it can be replayed from recorded
    matrices: its method's ``replay_clusterer`` hook (cflcore.strategies.base.Strategy; each method's own file says
    what it replays) on the variant's parameters with defaults. None when the method's clustering cannot be
    replayed. Imports the strategy plug-ins: validation (pass 3) stores the result (:data:`OWN_CLUSTERERS_KEY`)."""
    from ..strategies import STRATEGIES

    cls = STRATEGIES.get(variant["method"])
    return cls.replay_clusterer(cls.with_defaults(strategy_params(variant)))


OWN_CLUSTERERS_KEY = "own_clusterers"
"""``whatif.own_clusterers``: ``{"<dataset>/<algorithm>": own_clusterer(...)}``, derived by validation pass 3 (which
imports the plug-ins anyway), so that building the what-if params at every Snakemake start imports none. Dropped
and derived again whenever a config is validated."""


def whatif_settings(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, Any]:
    """Everything a ``whatif`` job depends on besides its input files: the matrix choice, the resolved
    clusterer list and the run's own clusterer (``run:<name>``). ``enabled`` and ``algorithms`` (which
    runs get a job) are left out, so changing them adds or drops jobs without rerunning the others."""
    whatif = cfg["whatif"]
    k_max = config_defaults("whatif.clusterers[]")["k_max"]  # an array's items get no default at validation
    clusterers = [{"name": e["name"], "params": whatif_clusterer_params(e, f"whatif.clusterers[{i}]"),
                   "select_k": e.get("select_k"), "k_max": int(e["k_max"]) if "k_max" in e else k_max, "own": False}
                  for i, e in enumerate(whatif["clusterers"] or [])]
    own = None
    if whatif["replay_own"]:
        stored = whatif.get(OWN_CLUSTERERS_KEY)
        key = f"{dataset}/{algorithm}"
        own = stored[key] if stored and key in stored else own_clusterer(run_settings(cfg, dataset, algorithm)["algorithm"])
    if own is not None:
        label = "agglomerative" if own["clusterer"] == "sklearn" else own["clusterer"]
        clusterers.append({"name": f"run:{label}", "params": own, "select_k": None, "k_max": k_max, "own": True})
    return {"matrix": whatif["matrix"], "clusterers": clusterers}


def whatif_clusterer_names(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> tuple[str, ...]:
    """The registered clusterers a run's ``whatif`` job replays (:func:`whatif_settings`; an import path aside)."""
    names = {c["params"].get("clusterer") for c in whatif_settings(cfg, dataset, algorithm)["clusterers"]}
    return tuple(sorted(n for n in names if isinstance(n, str)))


def whatif_runs(cfg: Mapping[str, Any]) -> list[str]:
    """``{scenario}/{algorithm}`` of every run that gets a ``whatif`` job: every run of the study (each
    records gram.parquet), or only the variants in ``whatif.algorithms``; none when disabled."""
    whatif = cfg["whatif"]
    if not whatif["enabled"]:
        return []
    only = whatif["algorithms"]
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg) if only is None or a in only]


# ---------------------------------------------------------------------------------------------
# Scenarios and runs
# ---------------------------------------------------------------------------------------------
def dataset_splits(cfg: Mapping[str, Any]) -> dict[str, list[str]]:
    """dataset -> the splits it is restricted to (``datasets.<name>.splits``, study-level; only datasets with
    one)."""
    return {str(d): list(v["splits"]) for d, v in (cfg.get("datasets") or {}).items() if v.get("splits")}


SPLIT_STUDY_KEYS = ("clients", "participation", "engine")
"""A split's study-level keys (a setting of its home paper: its client counts and participation; or a setting of a
study: its own engine options, e.g. the availability or the stragglers of one setting of the dynamics study), never
passed to its generator: :func:`split_settings` leaves them out."""


def split_clients(cfg: Mapping[str, Any]) -> dict[str, list[int]]:
    """split -> its own client counts (``splits.<name>.clients``, over ``study.clients``; only splits with one)."""
    return {str(k): [int(n) for n in v["clients"]] for k, v in (cfg.get("splits") or {}).items() if v.get("clients")}


def scenarios(cfg: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every scenario of the grid: datasets × splits × clients × seeds, a dataset with a ``splits:`` list
    only on those splits (004's study runs its domain federations on CIFAR-100 only, not on FEMNIST)."""
    s = cfg["study"]
    only = dataset_splits(cfg)
    own_clients = split_clients(cfg)
    for d in s["datasets"]:
        for sp in s["splits"]:
            if d in only and sp not in only[d]:
                continue
            for n in own_clients.get(sp, s["clients"]):
                for seed in s["seeds"]:
                    yield {"dataset": d, "split": sp, "clients": int(n), "seed": int(seed)}


def study_runs(cfg: Mapping[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Every (scenario, algorithm) of the study grid, honouring each variant's optional ``splits:`` list."""
    only = algorithm_splits(cfg)
    return [(s, a) for s in scenarios(cfg) for a in cfg["study"]["algorithms"] if a not in only or s["split"] in only[a]]


def study_run_ids(cfg: Mapping[str, Any]) -> list[str]:
    """The run ids (``{scenario}/{algorithm}``) of :func:`study_runs`, in its order."""
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg)]


def explain_runs(cfg: Mapping[str, Any]) -> list[str]:
    """The run ids the explain stage explains: every run of the study whose client count ``study.explain.clients``
    names (all when it names none), none when ``explain.enabled`` is false (its default: the schema's). The rules'
    targets and the report's plan both read it from here."""
    if not cfg["explain"]["enabled"]:
        return []
    only = (cfg["study"].get("explain") or {}).get("clients")
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg) if not only or s["clients"] in only]


def late_client_runs(cfg: Mapping[str, Any]) -> list[str]:
    """Run ids (``{scenario}/{algorithm}``) whose variant holds clients out until after clustering
    (``late_clients`` > 0, 000 §6.2): they get a late_clients.parquet evaluation."""
    return [f"{scenario_id(**s)}/{a}" for s, a in study_runs(cfg)
            if run_settings(cfg, s["dataset"], a)["algorithm"].get("late_clients")]


def dataset_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    ds = dict(cfg["datasets"][dataset])
    ds.setdefault("loader", dataset)
    return ds


def data_settings(cfg: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """Only what ``prepare_dataset`` depends on (so a change of lr does not rebuild the data); for a dataset run on a
    split that declares a federation table (:func:`federation_split`), that declaration too."""
    from ..federation import FEDERATION_KEY, FEDERATION_KEYS

    ds = dataset_settings(cfg, dataset)
    split = federation_split(cfg, dataset)
    return {
        "loader": ds["loader"],
        "test_fraction": ds["test_fraction"],
        "max_train": ds.get("max_train"),
        "data_root": str(cfg["data_root"]),
        "download": bool(cfg["download"]),
        **({FEDERATION_KEY: {k: cfg["splits"][split].get(k) for k in FEDERATION_KEYS}} if split else {}),
    }


def federation_split(cfg: Mapping[str, Any], dataset: str) -> str | None:
    """The first split ``dataset`` runs on whose entry declares a federation table (a ``table`` key: the natural
    generator's, cflcore/federation/natural.py); None for every other dataset."""
    names = cfg["datasets"][dataset].get("splits") or cfg["study"]["splits"]
    return next((s for s in names if "table" in (cfg["splits"].get(s) or {})), None)


def split_settings(cfg: Mapping[str, Any], split: str) -> dict[str, Any]:
    """The split generator's parameters (its study-level keys, :data:`SPLIT_STUDY_KEYS`, left out)."""
    return {k: v for k, v in cfg["splits"][split].items() if k not in SPLIT_STUDY_KEYS}


def run_variant(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, Any]:
    """Variant ``algorithm`` as it runs on ``dataset``: its entry with the dataset's ``algorithm_params`` override
    of it over it (each key replaced whole, ``engine`` and ``training`` blocks included)."""
    return {**cfg["algorithms"][algorithm], **(cfg["datasets"][dataset].get("algorithm_params") or {}).get(algorithm, {})}


def run_training(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, Any]:
    """A run's training recipe: its dataset's (``datasets.<d>`` less :data:`NOT_TRAINING`) with its variant's own
    ``training:`` keys over it. A variant without one runs its dataset's recipe unchanged."""
    ds = dataset_settings(cfg, dataset)
    return {**{k: v for k, v in ds.items() if k not in NOT_TRAINING},
            **(run_variant(cfg, dataset, algorithm).get("training") or {})}


ENGINE_OMITTED_AT_DEFAULT = ("availability", "stragglers", "conv_form", "fc_tf32")
"""Engine options left out of a run's settings while they hold their schema default (federations that move,
cflcore/fl/participation.py; the vectorised trainer's convolution form and the Linear layers' TF32, docs/gpu.md): a run
without them keeps the settings of earlier versions, so its params and its checkpoints' config hash do not move; the
typed settings fill the default back (cflcore.settings). A value other than the default is in the run's identity."""


def _engine_identity(engine: Mapping[str, Any]) -> dict[str, Any]:
    """``engine`` less the :data:`ENGINE_OMITTED_AT_DEFAULT` options that hold their default (a block: every key at
    its default; a value: the schema's)."""
    out = dict(engine)
    scalars = config_defaults("engine")
    for key in ENGINE_OMITTED_AT_DEFAULT:
        if key not in out:
            continue
        if isinstance(scalars.get(key), dict) or isinstance(out[key], dict) or out[key] is None:
            defaults = config_defaults(f"engine.{key}")
            if {**defaults, **(out[key] or {})} == defaults:
                del out[key]
        elif out[key] == scalars.get(key):
            del out[key]
    return out


def run_settings(cfg: Mapping[str, Any], dataset: str, algorithm: str, split: str | None = None) -> dict[str, Any]:
    """Everything a ``train`` job depends on besides its input files (the split); ``device`` as
    :func:`device_identity` gives it, so that moving a study from ``cuda:0`` to ``cuda:1`` reruns nothing.

    A split with its own ``participation`` (a setting of its home paper, :data:`SPLIT_STUDY_KEYS`) sets the engine's
    participation and the method's own ``participation`` parameter where it has one (FedGWC samples per cluster
    itself); a split's own ``engine:`` block overrides the engine's options for the runs on that split (each key
    replaced whole); a variant's own ``engine:`` block still overrides both, its own ``training:`` block its dataset's
    recipe (:func:`run_training`)."""
    training = run_training(cfg, dataset, algorithm)
    variant = run_variant(cfg, dataset, algorithm)
    setting = (cfg.get("splits") or {}).get(split, {}) if split is not None else {}
    engine = {**cfg["engine"],
              **({"participation": setting["participation"]} if "participation" in setting else {}),
              **(setting.get("engine") or {}),  # the split's own engine options
              **(variant.get("engine") or {})}  # the variant's own engine overrides
    variant = {"method": variant["method"], **strategy_params(variant)}  # `splits:` is the study's, not the strategy's
    if "participation" in setting and "participation" in variant:
        variant["participation"] = setting["participation"]
    return {
        "training": training,
        "engine": _engine_identity(engine),
        "algorithm": variant,
        "device": device_identity(cfg["device"]),
    }


def centralised_settings(cfg: Mapping[str, Any], dataset: str, round_size: str) -> dict[str, Any]:
    """What a ``centralised_update_norms`` job depends on (cflcore/fl/centralised.py): the dataset's training recipe
    and rounds, the engine's shared-vector choice, and the round size."""
    ds = dataset_settings(cfg, dataset)
    training = {k: v for k, v in ds.items() if k not in NOT_TRAINING}
    engine = cfg["engine"]
    return {"training": training, "round_size": round_size,
            "engine": {k: engine[k] for k in ("bn_buffers_in_delta", "bn_stats") if k in engine}}


DECLARED_INPUTS_KEY = "declared_inputs"
"""``declared_inputs``: ``{"<dataset>/<algorithm>": {name: file kind}}``, what each run's strategy declares it reads
beyond the split (``Strategy.inputs``), derived by validation pass 3 (which imports the plug-ins anyway) so that
building the train jobs' inputs at every Snakemake start imports none. Dropped and derived again whenever a config
is validated."""


def run_inputs(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, str]:
    """The files a run's train job reads beyond its split, ``{name: file kind}`` (``Strategy.inputs``)."""
    stored = cfg.get(DECLARED_INPUTS_KEY)
    key = f"{dataset}/{algorithm}"
    if stored and key in stored:
        return dict(stored[key])
    from ..strategies.base import declared_inputs

    return declared_inputs(run_settings(cfg, dataset, algorithm)["algorithm"])


def run_plugins(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, str]:
    """The plug-ins a run's train job selects, registry kind -> name: its method and its model (its code hash covers
    their modules and no other plug-in's, cflcore.provenance.code_version)."""
    from ..external import external_only

    settings = run_settings(cfg, dataset, algorithm)
    clusterer = settings["algorithm"].get("clusterer")  # an external one only: a built-in one is in every hash
    return {"method": str(settings["algorithm"]["method"]), "model": str(settings["training"]["model"]),
            **(external_only({"clusterer": clusterer}) if isinstance(clusterer, str) else {})}


def explain_plugins(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, str]:
    """The plug-ins an explain job selects: its run's model (:func:`run_training`)."""
    return {"model": str(explain_settings(cfg, dataset, algorithm)["model"])}


def explain_settings(cfg: Mapping[str, Any], dataset: str, algorithm: str) -> dict[str, Any]:
    """The explain block with the per-dataset sample size resolved (000 §5: 350; 180 for BloodMNIST) and the model of
    the run it explains (its variant's own where its ``training:`` block names one, :func:`run_training`)."""
    ex = dict(cfg["explain"])
    if ex.get("samples") is None:
        ex["samples"] = int(dataset_settings(cfg, dataset)["explain_samples"])
    ex["model"] = run_training(cfg, dataset, algorithm)["model"]
    return ex
