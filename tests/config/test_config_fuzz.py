"""A property-based fuzzer of config validation: every config is either refused before any job, with one
line naming a field, or planned and run.

It mutates valid configs (config/tiny.yaml alone, and layered over config/config.yaml as ``--configfile`` does): it
drops keys, changes a value's type, pushes numbers past their bounds, renames references (a name the config uses
for a dataset, split or variant, or the key that defines one) and empties lists. For every mutant, either

* validation (cflcore.config.validate_config, what rules/common.smk runs before Snakemake plans anything) raises a
  ConfigError whose message is one line starting with the dotted field at fault, or
* the study plans: every params function the rules call at parse time (rules/common.smk, rules/report_common.smk)
  runs on every job of the DAG, and the DAG's first split job (with its dataset job) runs through cflcore.stages
  and gives what the config says: the clients asked for, each with at least the split's minimum of samples, the
  clusters in the ``cluster_shares`` asked for; the engine samples round(participation × clients) clients.

Anything else fails the test: a traceback (any other exception), a job that fails on a config validation
accepted, or a silent change of meaning (validation rewriting a value the config gave, a split that does not
give what it was asked). ``test_a_real_dry_run_plans_a_mutant`` runs one accepted mutant through a real
``snakemake -n``.

It also combines valid fields into invalid studies (``cross_field_cases``, one class of :data:`CROSS_FIELD_CLASSES` per
case): a claim id no paper check defines, a claim of a paper the study does not check, a cross-paper setting that is no
split of the study, a saliency-grid client in no explained run, a split with more groups than clients, a label outside the dataset's classes, draws or
clients beyond what the data gives (draws without replacement beyond it in all), a dataset neither on disk nor
downloadable. Every such case must be refused before
any job with one line starting with the field at fault (cflcore/config_checks.py), never a traceback.

CI runs a fixed, derandomised sample of 400 mutants (``EXAMPLES`` below; 14 s on a 2-core AMD EPYC). For a longer local
search set ``CFL_FUZZ_EXAMPLES`` (e.g. ``CFL_FUZZ_EXAMPLES=3000 python -m pytest -n0 tests/config/test_config_fuzz.py``);
``CFL_FUZZ_SEED`` then picks another random sequence (unset: derandomised, the same mutants every time).
"""
from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import cflcore.config as cc
import cflcore.layout as lay
from cflcore import stages
from cflcore.data.loaders import LoaderSettings, facts_queries, train_size
from cflcore.data.splits.base import MIN_SAMPLES_PER_CLIENT
from cflcore.errors import ConfigError
from cflcore.fl.run import sample_clients
from cflcore.io import canonical_json
from cflcore.provenance import code_version
from cflcore.paper_sources import declared_claims, declared_homes
from conftest import REPO, copy_workflow, snakemake_cmd

CONFIG_DIR = Path(REPO) / "config"
TINY = cc.read_config_file(CONFIG_DIR / "tiny.yaml")
LAYERED = cc.deep_update(cc.read_config_file(CONFIG_DIR / "config.yaml"), copy.deepcopy(TINY))
MIX = cc.deep_update(copy.deepcopy(TINY), {
    "study": {"splits": ["mix"]},
    "splits": {"mix": {"generator": "dirichlet-mix", "cluster_shares": [0.5, 0.25, 0.25], "alphas": [1000.0, 0.05, 0.0],
                       "samples_per_client": 50, "participation": 0.5}}})
"""tiny on a 004-style split: shares, a sample count and a participation for the mutations to push."""
BASES = {"tiny": TINY, "config+tiny": LAYERED, "tiny+mix": MIX}
TOP_LEVEL = set(cc.load_schema()["properties"])

EXAMPLES = int(os.environ.get("CFL_FUZZ_EXAMPLES", "400"))
SEED = os.environ.get("CFL_FUZZ_SEED")

FIELD = re.compile(r"^(?P<field>[A-Za-z0-9_<>][^\s:]*):\s")
"""A refusal starts with the field at fault: ``study.clients.0:``, ``splits.mix.cluster_shares:``,
``<config>:`` (a required top-level key, named in the message), ``results_dir:``."""

OTHER_TYPES = ["x", 7, 0.5, True, None, [], {}, [1, 2], {"a": 1}]
NAMES = ("datasets", "splits", "algorithms")


# ---------------------------------------------------------------------------------------------- mutations
def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in the config tree (mappings and lists), the root's children first."""
    out: list[tuple] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        out.append((*prefix, k))
        out.extend(paths(v, (*prefix, k)))
    return out


def get(cfg: dict, path: tuple) -> Any:
    for k in path:
        cfg = cfg[k]
    return cfg


def put(cfg: dict, path: tuple, value: Any) -> None:
    get(cfg, path[:-1])[path[-1]] = value


def drop(cfg: dict, path: tuple) -> None:
    parent = get(cfg, path[:-1])
    del parent[path[-1]]


def past_bounds(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [0, 1, "true"]
    if isinstance(value, int):
        return [-1, 0, 1, 2, value + 1, value * 1000, 10**9, -(10**9), value + 0.5]
    return [-value, 0.0, -1e-9, 1.0, 1.0 + 1e-9, value * 1000, float("inf"), float("nan"), 1e-12]


def reference_names(cfg: dict) -> list[str]:
    return sorted({name for section in NAMES if isinstance(cfg.get(section), dict) for name in cfg[section]})


def applicable(cfg: dict, path: tuple) -> list[str]:
    value = get(cfg, path)
    ops = ["drop", "type"]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ops.append("bounds")
    if isinstance(value, list):
        ops.append("empty")
    if isinstance(value, str) or (len(path) == 2 and path[0] in NAMES and isinstance(cfg[path[0]], dict)):
        ops.append("rename")
    return ops


@st.composite
def mutants(draw) -> tuple[str, dict, list[str]]:
    """A base config and 1-3 mutations. The kind of mutation is drawn first, then a path it applies to, so the few
    numbers and lists of a config are pushed as often as its many keys are dropped."""
    base_name = draw(st.sampled_from(sorted(BASES)))
    cfg = copy.deepcopy(BASES[base_name])
    log = [base_name]
    for _ in range(draw(st.integers(1, 3))):
        by_op: dict[str, list[tuple]] = {}
        for path in paths(cfg):
            for op in applicable(cfg, path):
                by_op.setdefault(op, []).append(path)
        if not by_op:
            break
        op = draw(st.sampled_from(sorted(by_op)))
        path = draw(st.sampled_from(by_op[op]))
        value = get(cfg, path)
        if op == "drop":
            drop(cfg, path)
        elif op == "type":
            other = draw(st.sampled_from([v for v in OTHER_TYPES if type(v) is not type(value)]))
            put(cfg, path, copy.deepcopy(other))  # a copy: a later mutation may edit inside it
        elif op == "bounds":
            put(cfg, path, draw(st.sampled_from(past_bounds(value))))
        elif op == "empty":
            put(cfg, path, [])
        elif len(path) == 2 and path[0] in NAMES and isinstance(cfg[path[0]], dict):  # the key defining an entry
            new = draw(st.sampled_from(["renamed", *[n for n in reference_names(cfg) if n != path[1]]]))
            section = get(cfg, path[:1])
            section[new] = section.pop(path[1])
            op = f"rename-key->{new}"
        else:  # a reference: another name the config defines, or none
            new = draw(st.sampled_from(["nosuch", *reference_names(cfg)]))
            put(cfg, path, new)
            op = f"rename->{new}"
        log.append(f"{op} {'.'.join(map(str, path))}")
    return base_name, cfg, log


# ---------------------------------------------------------------------------------------------- what must hold
def given_values_kept(given: Any, validated: Any, path: str = "") -> None:
    """Validation only adds defaults: every value the config gave is in the validated config unchanged."""
    if isinstance(given, dict) and isinstance(validated, dict):
        for k, v in given.items():
            if k == "sweep":
                continue  # expanded into named entries (cflcore.sweep_expansion)
            assert k in validated, f"validation dropped {path}{k}"
            given_values_kept(v, validated[k], f"{path}{k}.")
    else:
        assert given == validated, f"validation changed {path.rstrip('.')}: {given!r} -> {validated!r}"


def plan(cfg: dict) -> list[tuple[dict, str]]:
    """What parsing the Snakefile computes for every job of the DAG (rules/common.smk's params functions)."""
    runs = cc.study_runs(cfg)
    assert runs, "validation accepted a study that plans no run"
    for s, a in runs:
        run = lay.run_id(**s, algorithm=a)
        lay.run_dir(cfg["results_dir"], run)
        canonical_json(cc.data_settings(cfg, s["dataset"]))
        canonical_json(cc.split_settings(cfg, s["split"]))
        canonical_json(cc.run_settings(cfg, s["dataset"], a, s["split"]))
        code_version("train", cc.run_plugins(cfg, s["dataset"], a))
        for kind in cc.run_inputs(cfg, s["dataset"], a).values():
            lay.input_file(cfg["results_dir"], lay.scenario_id(**s), kind)
            canonical_json(cc.centralised_settings(cfg, s["dataset"], kind.partition("/")[2]))
        canonical_json(cc.explain_settings(cfg, s["dataset"], a))
        code_version("explain", cc.explain_plugins(cfg, s["dataset"], a))
        canonical_json(cc.whatif_settings(cfg, s["dataset"], a))
    cc.whatif_runs(cfg)
    cc.late_client_runs(cfg)
    canonical_json(stages.report_plan(cfg))
    return runs


_DATASETS: dict[str, Path] = {}  # data settings -> a prepared dataset Parquet (the data job is cached the same way)


def run_first_split(cfg: dict, runs: list[tuple[dict, str]], tmp: Path) -> None:
    """The DAG's first split job (and its dataset job), as the rules run them; then what it must give."""
    s, _ = runs[0]
    res = str(cfg["results_dir"]).rstrip("/")
    data = cc.data_settings(cfg, s["dataset"])
    key = canonical_json(data)
    dataset = Path(lay.dataset_file(res, s["dataset"]))
    if key not in _DATASETS:
        _DATASETS[key] = tmp.parent / f"dataset-{len(_DATASETS)}.parquet"
        stages.prepare_dataset(data, _DATASETS[key])
    dataset.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_DATASETS[key], dataset)
    scenario = lay.scenario_id(**s)
    params = cc.split_settings(cfg, s["split"])
    manifest = stages.make_split(dataset, params, s["clients"], s["seed"], lay.split_dir(res, scenario), name=s["split"])
    n = s["clients"]
    assert manifest["n_clients"] == n
    assert manifest["samples_per_client"] >= MIN_SAMPLES_PER_CLIENT, \
        f"the split drew {manifest['samples_per_client']} samples per client, below the minimum {MIN_SAMPLES_PER_CLIENT}"
    if params.get("samples_per_client") is not None:
        assert manifest["samples_per_client"] == params["samples_per_client"]
    shares = params.get("cluster_shares")
    if shares is not None:
        bumped = sum(n * share < 1 for share in shares)  # apportion gives every cluster one client, from the largest
        for c, (got, share) in enumerate(zip(manifest["clients_per_cluster"], shares)):
            assert abs(got - n * share) < 1 + bumped, f"cluster {c} got {got} of {n} clients for share {share}"
    for scenario_, a in runs:
        p = float(cc.run_settings(cfg, scenario_["dataset"], a, scenario_["split"])["engine"]["participation"])
        if p < 1:
            assert len(sample_clients(0, 1, scenario_["clients"], p)) == round(p * scenario_["clients"]), \
                f"participation {p} of {scenario_['clients']} clients is not what the engine samples"


def check_mutant(cfg: dict, tmp: Path) -> str:
    """'refused' or 'ran'; an AssertionError or any other exception is a finding."""
    try:
        validated = cc.validate_config(cfg)
    except ConfigError as e:
        message = str(e)
        assert "\n" not in message
        m = FIELD.match(message)
        assert m, f"the refusal names no field: {message}"
        top = m["field"].split(".")[0].split("[")[0]
        assert top in TOP_LEVEL or top in ("<config>", "clients", "seed"), f"unknown field {m['field']!r}: {message}"
        return "refused"
    given_values_kept({k: v for k, v in cfg.items()}, validated)
    run_first_split(validated, plan(validated), tmp)
    return "ran"


# ---------------------------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _fuzz_settings(fn):
    fn = settings(max_examples=EXAMPLES, derandomize=SEED is None, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                         HealthCheck.data_too_large])(fn)
    return seed(int(SEED))(fn) if SEED is not None else fn


OUTCOMES: dict[str, int] = {"refused": 0, "ran": 0}


@_fuzz_settings
@given(mutant=mutants())
def test_every_mutant_is_refused_with_a_field_or_runs(fuzz_dir, monkeypatch, mutant):
    base_name, cfg, log = mutant
    work = Path(fuzz_dir) / f"m{sum(OUTCOMES.values())}"
    work.mkdir()
    monkeypatch.chdir(work)  # the relative results_dir and data_root land here
    try:
        OUTCOMES[check_mutant(cfg, work)] += 1
    except Exception as e:
        raise AssertionError(f"mutant {' | '.join(log)}: {type(e).__name__}: {e}") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_fuzzer_both_refuses_and_runs():
    """The sample above exercises both outcomes (it would prove nothing if every mutant were refused)."""
    if not any(OUTCOMES.values()):
        pytest.skip("the fuzz test did not run in this process")
    assert OUTCOMES["refused"] > 0 and OUTCOMES["ran"] > 0, OUTCOMES


def test_a_real_dry_run_plans_a_mutant(tmp_path):
    """One accepted mutant (tiny with a variant's participation at the smallest that samples a client) and one
    refused (the same one notch lower) through a real ``snakemake -n`` over config/config.yaml."""
    wf = Path(copy_workflow(tmp_path / "wf"))
    for participation, ok in ((0.09, True), (0.08, False)):
        override = copy.deepcopy(TINY)
        override["algorithms"]["bnc"]["engine"] = {"participation": participation}
        assert check_mutant(copy.deepcopy(override), tmp_path) == ("ran" if ok else "refused")
        (wf / "override.yaml").write_text(yaml.safe_dump(override))
        p = subprocess.run(snakemake_cmd("-n", "--cores", "1", "--configfile", "override.yaml"), cwd=wf,
                           capture_output=True, text=True, timeout=120)
        out = p.stdout + p.stderr
        assert (p.returncode == 0) == ok, out
        assert "Traceback" not in out
        if ok:
            assert "split" in out and "train" in out
        else:
            errors = [line for line in out.splitlines() if line.startswith("config error:")]
            assert len(errors) == 1 and "algorithms.bnc.engine.participation: 0.08" in errors[0], out


# ---------------------------------------------------------------------------------------------- cross-field cases
CROSS_EXAMPLES = int(os.environ.get("CFL_FUZZ_CROSS_EXAMPLES", "120"))
NOWHERE = "/nonexistent/cfl-fuzz-data"
PAPERS = sorted(declared_claims())


def _study_split(cfg: dict) -> str:
    return cfg["study"]["splits"][0]


def _n_train(cfg: dict) -> int:
    ds = cfg["datasets"]["digits"]
    n = train_size({"loader": "digits", **{k: ds[k] for k in ("test_fraction", "max_train") if k in ds}})
    assert n is not None
    return n


def _claim_key(draw) -> str:
    return draw(st.sampled_from(["claims_not_carried", "claim_notes"]))


def _unknown_claim(draw, cfg: dict) -> str:
    checks = draw(st.lists(st.sampled_from(PAPERS), unique=True, max_size=len(PAPERS)))
    known = {c for ids in declared_claims().values() for c in ids}
    claim_id = draw(st.from_regex(r"\A(002|004|het|000)-[a-z]{1,10}\Z").filter(lambda c: c not in known))
    key = _claim_key(draw)
    cc.deep_update(cfg, {"report": {"paper_checks": checks, key: {claim_id: "a reason"}}})
    return f"report.{key}"


def _claim_not_checked(draw, cfg: dict) -> str:
    paper = draw(st.sampled_from(PAPERS))
    others = draw(st.lists(st.sampled_from([p for p in PAPERS if p != paper]), unique=True))
    key = _claim_key(draw)
    cc.deep_update(cfg, {"report": {"paper_checks": others, key: {draw(st.sampled_from(declared_claims()[paper])): "x"}}})
    return f"report.{key}"


def _cross_paper_elsewhere(draw, cfg: dict) -> str:
    name = draw(st.sampled_from(["nosuch", *[n for n in cfg["splits"] if n not in cfg["study"]["splits"]]]))
    home = draw(st.sampled_from(sorted(declared_homes())))
    cc.deep_update(cfg, {"report": {"cross_paper": {"settings": {name: {"home": home}}}}})
    return "report.cross_paper.settings"


def _grid_client_elsewhere(draw, cfg: dict) -> str:
    largest = max(cfg["study"]["clients"])
    grid = draw(st.lists(st.integers(0, largest - 1), max_size=3))
    grid.insert(draw(st.integers(0, len(grid))), draw(st.integers(largest, 10**6)))
    cfg["explain"] = {**cfg.get("explain", {}), "enabled": True, "grid_clients": grid}
    return "explain.grid_clients"


def _groups(draw, k: int) -> dict:
    """A valid grouped split of ``k`` groups."""
    kind = draw(st.sampled_from(["rotation", "label-swap", "quantity-skew", "dirichlet-mix"]))
    if kind == "rotation":
        return {"generator": kind, "angles": draw(st.lists(st.integers(0, 359), min_size=k, max_size=k, unique=True))}
    if kind == "label-swap":
        pairs = draw(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)).filter(lambda p: p[0] != p[1]),
                              min_size=k, max_size=k))
        return {"generator": kind, "swaps": [list(p) for p in pairs]}
    if kind == "quantity-skew":
        return {"generator": kind, "fractions": draw(st.lists(st.sampled_from([0.25, 0.5, 1.0]), min_size=k, max_size=k))}
    return {"generator": kind, "alphas": [1.0] * k, "cluster_shares": [1 / k] * k}


def _groups_without_client(draw, cfg: dict) -> str:
    n = draw(st.integers(3, 8))
    k = draw(st.integers(n + 1, n + 6))
    cfg["splits"]["grouped"] = _groups(draw, k)
    cfg["study"]["splits"] = ["grouped"]
    cfg["study"]["clients"] = [n]
    cfg["study"].pop("explain", None)
    for variant in cfg["algorithms"].values():  # variants restricted to other splits would run nowhere
        variant.pop("splits", None)
    return "study.clients"


def _label_outside(draw, cfg: dict) -> str:
    bad = draw(st.integers(10, 10**6))
    split = _study_split(cfg)
    if draw(st.booleans()):
        cfg["splits"][split] = {"generator": "label-swap", "swaps": [[0, 1], [2, bad]]}
        return f"splits.{split}.swaps[1]"
    cfg["splits"][split] = {"generator": "ocfl", "class_sets": [[0, 1], [2, 3], [4, bad]]}
    return f"splits.{split}.class_sets[2]"


def _draws_beyond(draw, cfg: dict) -> str:
    if draw(st.booleans()):
        cfg["datasets"]["digits"]["max_train"] = draw(st.integers(1000, 2000))  # leaves every client a batch
    split = _study_split(cfg)
    cfg["splits"][split]["samples_per_client"] = _n_train(cfg) + draw(st.integers(1, 10**6))
    return f"splits.{split}.samples_per_client"


def _clients_beyond(draw, cfg: dict) -> str:
    if draw(st.booleans()):
        cfg["datasets"]["digits"]["max_train"] = draw(st.integers(1000, 2000))  # leaves every client a batch
    n = draw(st.integers(_n_train(cfg) // MIN_SAMPLES_PER_CLIENT + 1, 100000))
    cfg["study"]["clients"] = sorted({*cfg["study"]["clients"], n})
    return "study.clients"


def _disjoint_beyond(draw, cfg: dict) -> str:
    split = _study_split(cfg)
    n_train, clients = _n_train(cfg), min(cfg["splits"][split].get("clients") or cfg["study"]["clients"])
    cfg["splits"][split]["samples_per_client"] = min(n_train, n_train // clients + draw(st.integers(1, 50)))
    cfg["splits"][split]["replace"] = False
    return f"splits.{split}.replace"


def _data_missing(draw, cfg: dict) -> str:
    loader = draw(st.sampled_from(sorted(set(facts_queries()) - {"mnist5k", "digits"})))  # those two ship with libraries
    cfg["data_root"] = NOWHERE
    cfg["datasets"]["digits"]["loader"] = loader
    facts = facts_queries()[loader](LoaderSettings.from_dict({"loader": loader, "data_root": NOWHERE}))
    cfg["download"] = False if facts.downloadable else draw(st.booleans())
    return "datasets.digits.loader"


CROSS_FIELD_CLASSES = {
    "claim-id-no-paper-defines": _unknown_claim,
    "claim-of-a-paper-not-checked": _claim_not_checked,
    "cross-paper-setting-not-a-split": _cross_paper_elsewhere,
    "grid-client-in-no-run": _grid_client_elsewhere,
    "groups-without-a-client": _groups_without_client,
    "label-outside-the-classes": _label_outside,
    "share-beyond-the-train-part": _draws_beyond,
    "clients-beyond-the-data": _clients_beyond,
    "disjoint-draws-beyond-the-train-part": _disjoint_beyond,
    "data-neither-on-disk-nor-downloadable": _data_missing,
}
"""Each class of cross-field case: a function that turns a valid base config into a case of that class (valid fields
only, every one of them passing its own check) and returns the field its refusal must start with."""


@st.composite
def cross_field_cases(draw) -> tuple[str, dict, str, list[str]]:
    base_name = draw(st.sampled_from(sorted(BASES)))
    cls = draw(st.sampled_from(sorted(CROSS_FIELD_CLASSES)))
    cfg = copy.deepcopy(BASES[base_name])
    field = CROSS_FIELD_CLASSES[cls](draw, cfg)
    return cls, cfg, field, [base_name, cls]


GENERATED: dict[str, int] = {}


@settings(max_examples=CROSS_EXAMPLES, derandomize=SEED is None, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(case=cross_field_cases())
def test_every_cross_field_case_is_refused_in_one_line(fuzz_dir, monkeypatch, case):
    cls, cfg, field, log = case
    monkeypatch.chdir(fuzz_dir)  # the relative results_dir lands here; validation writes nothing
    try:
        cc.validate_config(cfg, missing_data="refuse")  # a run's validation (a dry run only tells of missing data)
    except ConfigError as e:
        message = str(e)
        assert "\n" not in message, message
        assert re.match(rf"{re.escape(field)}(\[\d+\])?: ", message) and "; allowed: " in message, \
            f"{' | '.join(log)}: {message}"
    except Exception as e:
        raise AssertionError(f"{' | '.join(log)}: {type(e).__name__}: {e}") from e
    else:
        raise AssertionError(f"{' | '.join(log)}: accepted, expected a refusal naming {field}")
    GENERATED[cls] = GENERATED.get(cls, 0) + 1


def test_the_fuzzer_generates_every_cross_field_class():
    if not GENERATED:
        pytest.skip("the cross-field fuzz test did not run in this process")
    assert set(GENERATED) == set(CROSS_FIELD_CLASSES), GENERATED
