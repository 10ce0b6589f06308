"""Factor sweeps (cflcore.sweep_expansion): expansion into named variants and splits, clear errors for bad sweeps,
and rerun-only-what-changed in the DAG (add a value: only its jobs; remove one: the others stay cached;
change one: only that value's jobs)."""
import copy
import subprocess
from pathlib import Path

import pytest
import yaml

import cflcore.config as cc
from cflcore.config.plan import ENGINE_OMITTED_AT_DEFAULT
from cflcore.errors import ConfigError
from conftest import copy_workflow, snakemake_cmd
from test_rerun import planned

REPO = Path(__file__).resolve().parents[2]


def config(**sections):
    """The default config with ``sections`` deep-merged over it, validated."""
    return cc.load_config(REPO / "config" / "config.yaml", overrides=sections)


SWEEP = {
    "study": {"splits": ["nonoverlap-balanced", "maj"], "algorithms": ["bnc", "louvain"]},
    "splits": {"maj": {"generator": "majority", "samples_per_client": 120, "sweep": {"majority_share": [0.4, 1.0]}}},
    "algorithms": {"louvain": {"method": "louvain", "attribution": "1nn",
                               "sweep": {"resolution": [0.5, 1.0], "engine.participation": [1.0, 0.5]}}},
}


def test_sweep_expands_into_named_variants_and_splits():
    cfg = config(**copy.deepcopy(SWEEP))
    assert cfg["study"]["splits"] == ["nonoverlap-balanced", "maj@majority_share=0.4", "maj@majority_share=1.0"]
    assert cfg["study"]["algorithms"] == [
        "bnc", "louvain@resolution=0.5,participation=1.0", "louvain@resolution=0.5,participation=0.5",
        "louvain@resolution=1.0,participation=1.0", "louvain@resolution=1.0,participation=0.5"]
    assert "louvain" not in cfg["algorithms"] and "maj" not in cfg["splits"]
    record = cfg["sweep_index"]["algorithms"]["louvain@resolution=0.5,participation=0.5"]
    assert record == {"base": "louvain", "factors": {"resolution": 0.5, "engine.participation": 0.5},
                      "labels": {"resolution": "0.5", "engine.participation": "0.5"}}
    assert cfg["sweep_index"]["splits"]["maj@majority_share=1.0"]["factors"] == {"majority_share": 1.0}
    assert cfg["splits"]["maj@majority_share=0.4"]["majority_share"] == 0.4
    assert len(cc.study_runs(cfg)) == 3 * 5


def test_swept_values_reach_the_jobs_settings_and_nothing_else():
    cfg = config(**copy.deepcopy(SWEEP))
    run = cc.run_settings(cfg, "mnist5k", "louvain@resolution=0.5,participation=0.5")
    assert run["algorithm"]["resolution"] == 0.5 and run["algorithm"]["attribution"] == "1nn"
    assert run["engine"]["participation"] == 0.5 and "engine" not in run["algorithm"]
    other = cc.run_settings(cfg, "mnist5k", "louvain@resolution=0.5,participation=1.0")
    assert other["engine"]["participation"] == 1.0
    # the variant's engine override leaves the global engine block (and every other variant) alone
    assert cfg["engine"]["participation"] == 1.0
    # (less the options a run leaves out while they hold their default, cflcore.config.plan.ENGINE_OMITTED_AT_DEFAULT)
    assert cc.run_settings(cfg, "mnist5k", "bnc")["engine"] == {k: v for k, v in cfg["engine"].items()
                                                                 if k not in ENGINE_OMITTED_AT_DEFAULT}
    # a split's settings are its generator's parameters only (no name, no factor record)
    assert cc.split_settings(cfg, "maj@majority_share=0.4") == {**cfg["splits"]["maj@majority_share=0.4"]}
    assert "sweep" not in cc.split_settings(cfg, "maj@majority_share=0.4")


def test_no_sweep_leaves_the_default_config_as_it_was():
    cfg = config()
    assert cfg["sweep_index"] == {"algorithms": {}, "splits": {}}
    assert cfg["study"]["algorithms"][:3] == ["bnc", "scl", "bcl"]
    assert all("@" not in a for a in cfg["algorithms"])


def test_mapping_values_and_references_follow_the_expansion():
    cfg = config(
        study={"splits": ["mix"], "algorithms": ["fedgwc"]},
        splits={"mix": {"generator": "dirichlet-mix", "cluster_shares": [0.5, 0.5], "alphas": [0.0, 1000.0],
                        "sweep": {"alphas": {"hard": [0.0, 1000.0], "soft": [0.5, 1000.0]}}}},
        algorithms={"fedgwc": {"method": "fedgwc", "participation": 0.8, "splits": ["mix"], "sweep": {"epsilon": [0.1, 0.05]}}},
        datasets={"mnist5k": {"algorithm_params": {"fedgwc": {"epsilon": 0.2, "beta": 2.0}}}},
    )
    assert cfg["study"]["splits"] == ["mix@alphas=hard", "mix@alphas=soft"]
    assert cfg["splits"]["mix@alphas=soft"]["alphas"] == [0.5, 1000.0]
    assert cfg["algorithms"]["fedgwc@epsilon=0.1"]["splits"] == ["mix@alphas=hard", "mix@alphas=soft"]
    # a per-dataset override of the variant applies to every expansion; the swept value wins over it
    run = cc.run_settings(cfg, "mnist5k", "fedgwc@epsilon=0.05")["algorithm"]
    assert run["epsilon"] == 0.05 and run["beta"] == 2.0


@pytest.mark.parametrize("sections, field", [
    ({"algorithms": {"louvain": {"method": "louvain", "sweep": {"resolutoin": [1.0]}}}},
     "algorithms.louvain.sweep{resolutoin=1.0}: Additional properties"),
    ({"algorithms": {"louvain": {"method": "louvain", "sweep": {"resolution": []}}}},
     "algorithms.louvain.sweep.resolution"),
    ({"algorithms": {"louvain": {"method": "louvain", "sweep": {"resolution": [1.0, -2.0]}}}},
     "algorithms.louvain.sweep{resolution=-2.0}.resolution"),
    ({"algorithms": {"louvain": {"method": "louvain", "sweep": {"engine.participaton": [0.5]}}}},
     "algorithms.louvain.sweep.engine.participaton: unknown engine option; allowed: engine.aggregation"),
    ({"algorithms": {"louvain": {"method": "louvain", "sweep": {"engine.participation": [0.5, 1.5]}}}},
     "algorithms.louvain.sweep{engine.participation=1.5}.engine.participation: 1.5 is greater than the maximum of 1"),
    ({"algorithms": {"louvain": {"method": "louvain", "sweep": {"resolution": [1.0, 1.0]}}}},
     "algorithms.louvain.sweep.resolution: values ['1.0', '1.0'] repeat"),
    ({"algorithms": {"louvain": {"method": "louvain", "sweep": {"method": ["bnc"]}}}},
     "algorithms.louvain.sweep.method: 'method' cannot be swept"),
    ({"splits": {"maj": {"generator": "majority", "sweep": {"majority_share": [0.5, 1.7]}}},
      "study": {"splits": ["maj"]}},
     "splits.maj.sweep{majority_share=1.7}.majority_share"),
    ({"splits": {"maj": {"generator": "majority", "sweep": {"majority_shar": [0.5]}}}, "study": {"splits": ["maj"]}},
     "splits.maj.sweep{majority_shar=0.5}: unknown key 'majority_shar'"),
    ({"splits": {"mix": {"generator": "dirichlet-mix", "cluster_shares": [1.0], "alphas": [1.0],
                         "sweep": {"alphas": [[0.0], [1.0]]}}}, "study": {"splits": ["mix"]}},
     "splits.mix.sweep.alphas[0]: [0.0] cannot be part of a run name; allowed: numbers"),
])
def test_bad_sweeps_get_one_error_naming_the_field(sections, field):
    with pytest.raises(ConfigError) as err:
        config(**sections)
    assert field in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# The DAG: a small swept study runs once; dry runs with edited sweeps plan exactly the affected jobs
# ---------------------------------------------------------------------------------------------
STUDY = {
    "results_dir": "results",
    "device": "cpu",
    "study": {"datasets": ["digits"], "splits": ["maj"], "clients": [6], "seeds": [0], "algorithms": ["louvain"]},
    "datasets": {"digits": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 16, "local_epochs": 1,
                            "rounds": 2}},  # a batch within a client's 28 local train samples (40 draws less 30 %)
    "splits": {"maj": {"generator": "majority", "samples_per_client": 40, "sweep": {"majority_share": [0.5, 1.0]}}},
    "algorithms": {"louvain": {"method": "louvain", "sweep": {"resolution": [1.0, 2.0]}}},
    "engine": {"checkpoint_every": 1},
    "explain": {"enabled": False},
    "whatif": {"enabled": False},
}


def sm(wd: Path, cfg: dict, *args: str) -> list[tuple[str, dict[str, str]]]:
    path = wd / "config" / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    p = subprocess.run(snakemake_cmd("--cores", "2", *args, "--configfile", str(path)), cwd=wd,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    return planned(p.stdout + p.stderr)


def is_report(rule: str) -> bool:
    """The report's rules: ``report`` and its parts ``report_<part>`` (rules/report.smk)."""
    return rule == "report" or rule.startswith("report_")


def edited(split_values=None, resolution=None) -> dict:
    cfg = copy.deepcopy(STUDY)
    if split_values is not None:
        cfg["splits"]["maj"]["sweep"]["majority_share"] = split_values
    if resolution is not None:
        cfg["algorithms"]["louvain"]["sweep"]["resolution"] = resolution
    return cfg


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    wd = Path(copy_workflow(tmp_path_factory.mktemp("sweep")))
    (wd / "config" / "config.yaml").write_text(yaml.safe_dump(STUDY))
    sm(wd, STUDY)
    return wd


@pytest.mark.slow
def test_swept_study_ran_every_value_and_replans_nothing(swept):
    runs = sorted(p.parent.name + "|" + p.parents[3].name for p in (swept / "results" / "runs").rglob("history.parquet"))
    assert runs == ["louvain@resolution=1.0|maj@majority_share=0.5", "louvain@resolution=1.0|maj@majority_share=1.0",
                    "louvain@resolution=2.0|maj@majority_share=0.5", "louvain@resolution=2.0|maj@majority_share=1.0"]
    assert sm(swept, STUDY, "-n") == []


@pytest.mark.slow
def test_added_value_plans_only_its_jobs(swept):
    jobs = sm(swept, edited(resolution=[1.0, 2.0, 0.5]), "-n")
    assert {w["algorithm"] for r, w in jobs if not is_report(r)} == {"louvain@resolution=0.5"}
    assert sum(r == "train_evaluate" for r, _ in jobs) == 2  # one per split value (trained and scored)
    jobs = sm(swept, edited(split_values=[0.5, 1.0, 0.7]), "-n")
    assert {w["split"] for r, w in jobs if not is_report(r)} == {"maj@majority_share=0.7"}
    assert sorted(r for r, _ in jobs if not is_report(r)) == ["split", "train_evaluate", "train_evaluate"]


@pytest.mark.slow
def test_removed_value_leaves_the_others_cached(swept):
    jobs = sm(swept, edited(resolution=[2.0]), "-n")
    assert jobs and all(is_report(r) for r, _ in jobs)  # the report's input lists shrank; no run reruns


@pytest.mark.slow
def test_changed_value_reruns_only_that_value(swept):
    jobs = sm(swept, edited(split_values=[0.5, 0.9]), "-n")
    assert {w["split"] for r, w in jobs if not is_report(r)} == {"maj@majority_share=0.9"}
    assert not any(w.get("split") == "maj@majority_share=0.5" for _, w in jobs)


@pytest.mark.slow
def test_another_study_in_its_own_results_dir_leaves_this_one_cached(swept):
    """A second study (its own results_dir, as config/louvain-002*.yaml and fedgwc-004*.yaml have) runs in
    the same working directory; the first study then still plans nothing."""
    other = copy.deepcopy(STUDY)
    other["results_dir"] = "results/other-study"
    other["splits"]["maj"]["sweep"]["majority_share"] = [0.8]
    other["algorithms"]["louvain"]["sweep"]["resolution"] = [1.0]
    other["datasets"]["digits"]["rounds"] = 1
    sm(swept, other)  # a real run (sm asserts it exits 0)
    assert (swept / "results" / "other-study" / "report" / "index.json").is_file()
    assert sm(swept, STUDY, "-n") == []


# ---------------------------------------------------------------------------------------------
# `extends:` and the per-paper configs
# ---------------------------------------------------------------------------------------------
def test_extends_merges_the_extended_file_first(tmp_path):
    (tmp_path / "base.yaml").write_text("a: 1\nb: {x: 1, y: 2}\n")
    (tmp_path / "mid.yaml").write_text("extends: base.yaml\nb: {y: 3}\n")
    (tmp_path / "top.yaml").write_text("extends: mid.yaml\nc: 4\n")
    assert cc.read_config_file(tmp_path / "top.yaml") == {"a": 1, "b": {"x": 1, "y": 3}, "c": 4}
    (tmp_path / "loop.yaml").write_text("extends: loop2.yaml\n")
    (tmp_path / "loop2.yaml").write_text("extends: loop.yaml\n")
    with pytest.raises(ConfigError, match="extends itself"):
        cc.read_config_file(tmp_path / "loop.yaml")
    (tmp_path / "bad.yaml").write_text("extends: [base.yaml]\n")
    with pytest.raises(ConfigError, match="extends: .* allowed: the path of another config file"):
        cc.read_config_file(tmp_path / "bad.yaml")


def test_snakemake_config_layers_default_then_extended_then_file_then_overrides(tmp_path):
    (tmp_path / "default.yaml").write_text("a: 0\nb: {x: 0, y: 0}\nd: 0\n")
    (tmp_path / "paper.yaml").write_text("a: 1\nb: {x: 1}\n")
    (tmp_path / "offline.yaml").write_text("extends: paper.yaml\nb: {y: 2}\n")
    merged = cc.snakemake_config({"ignored": True}, [tmp_path / "default.yaml"], [tmp_path / "offline.yaml"], {"d": 5})
    assert merged == {"a": 1, "b": {"x": 1, "y": 2}, "d": 5}
    # no file extends another: Snakemake's own merge is returned as is
    assert cc.snakemake_config({"k": 1}, [tmp_path / "default.yaml"], [tmp_path / "paper.yaml"], {}) == {"k": 1}


def test_louvain_002_configs_are_one_study():
    paper = cc.load_config(REPO / "config" / "config.yaml", REPO / "config" / "louvain-002.yaml")
    offline = cc.load_config(REPO / "config" / "config.yaml", REPO / "config" / "louvain-002-offline.yaml")
    # the same sweeps, variants and splits; only the data, model and budget differ: the offline study defines the
    # superclass-like split's variants and the departures' one-factor ablations (not in its default run) and leaves
    # out 75 %
    extra = {"louvain-superclass@attribution=avg", "louvain-superclass@attribution=1nn",
             *(f"louvain-eq2-module@attribution={a},participation={p}" for a in ("1nn", "wnn") for p in ("0.5", "1.0")),
             "louvain-late-own@participation=0.5", "louvain-late-own@participation=1.0"}
    assert offline["sweep_index"]["algorithms"].keys() - paper["sweep_index"]["algorithms"].keys() == extra
    left_out = {f"louvain-fig4@attribution={a},participation=0.75" for a in ("avg", "1nn", "wnn", "late")}
    assert paper["sweep_index"]["algorithms"].keys() - offline["sweep_index"]["algorithms"].keys() == left_out
    # Figs. 3-5 run offline on the 002-like community splits (distinct majority digits in two groups), the
    # paper's majority-mk / majority in shape: the m_k sweep and m_k 0.7; the group_spread sweep runs beside
    rename = {"majority-mk": "community-mk", "majority": "community"}
    spread = [f"community-spread@majority_share={m},group_spread={s}" for m in ("0.1", "1.0") for s in ("0.0", "0.1", "0.25")]
    assert offline["study"]["splits"] == [*(s.replace(*next((k, v) for k, v in rename.items() if s.startswith(k)), 1)
                                            for s in paper["study"]["splits"]), *spread]
    for name in ("community-mk@majority_share=0.7", "community"):
        assert offline["splits"][name]["generator"] == "majority" and offline["splits"][name]["majority_share"] == 0.7
        assert len({c for group in offline["splits"][name]["class_sets"] for c in group}) == 10
    assert offline["study"]["algorithms"] == [*(a for a in paper["study"]["algorithms"] if a not in left_out),
                                              "louvain-spread"]
    assert paper["study"]["clients"] == offline["study"]["clients"] == [10]
    assert paper["study"]["seeds"] == [0, 1, 2, 3] and len(offline["study"]["seeds"]) >= 10
    assert "002-superclass" in offline["report"]["claims_not_carried"]
    assert paper["results_dir"] != offline["results_dir"] != cc.load_config(REPO / "config" / "config.yaml")["results_dir"]
    # 002's full grid: Fig. 3 (4 m_k x 3 resolutions) + Fig. 4 (4 attributions x 3 rates) + IFCA, 4 seeds
    assert len(cc.study_runs(paper)) == (4 * 3 + 4 * 3 + 1) * 4
    assert paper["report"]["paper_checks"] == ["002"]


def test_a_dataset_runs_only_its_own_splits():
    cfg = config(study={"datasets": ["mnist5k", "digits"]},
                 datasets={"digits": {"splits": ["overlap-balanced"]}})
    runs = {(s["dataset"], s["split"]) for s, _ in cc.study_runs(cfg)}
    assert {sp for d, sp in runs if d == "digits"} == {"overlap-balanced"}
    assert len({sp for d, sp in runs if d == "mnist5k"}) == 4
    assert "splits" not in cc.run_settings(cfg, "digits", "bnc")["training"]  # study-level, never a training param
    with pytest.raises(ConfigError, match=r"datasets.digits.splits\[0\]: unknown split 'nb'"):
        config(study={"datasets": ["mnist5k", "digits"]}, datasets={"digits": {"splits": ["nb"]}})


@pytest.mark.parametrize("name, trainings", [("louvain-002-offline.yaml", 270), ("fedgwc-004-offline.yaml", 46),
                                             ("fedgwc-004-domains.yaml", 6), ("paper-mnist5k.yaml", 56)])
def test_offline_studies_plan_their_grid(tmp_path, name, trainings):
    """Each seed's offline study parses and plans its trainings and the report's six rules (its config text, e.g. a
    departure's "{0}", reaches the report's params unformatted)."""
    from test_workflow import planned_jobs

    wd = copy_workflow(tmp_path / "wf")
    p = subprocess.run(snakemake_cmd("-n", "--cores", "2", "--quiet", "rules", "--configfile", f"config/{name}"),
                       cwd=wd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    jobs = planned_jobs(p.stdout + p.stderr)
    assert jobs.get("train", 0) + jobs.get("train_evaluate", 0) == trainings  # with a what-if replay or without
    assert all(jobs.get(r) == 1 for r in ("report_tables", "report_figures", "report_whatif", "report_late_clients",
                                          "report_explain", "report")), jobs


def test_paper_mnist5k_trains_at_000_table_3():
    """config/paper-mnist5k.yaml over config.yaml: 000's CNN with no constructor arguments (config.yaml's tinyvgg
    {hidden: 8} must not merge in), SGD lr 0.01, batch 32, 3 local epochs, 50 rounds, 000's draw per client."""
    cfg = cc.validate_config(cc.load_config(REPO / "config" / "config.yaml", REPO / "config" / "paper-mnist5k.yaml"))
    assert sorted(a for _, a in cc.study_runs(cfg))[::8] == ["bcl", "bnc", "ocfl-aff", "ocfl-hdb", "ocfl-km",
                                                               "ocfl-ms", "scl"]
    for _, algorithm in cc.study_runs(cfg):
        training = cc.run_settings(cfg, "mnist5k", algorithm)["training"]
        assert not training["model_kwargs"] and {k: training[k] for k in ("model", "optimizer", "lr", "batch_size",
                                                                           "local_epochs", "rounds")} == \
            {"model": "ocfl-cnn", "optimizer": "sgd", "lr": 0.01, "batch_size": 32, "local_epochs": 3, "rounds": 50}
    assert all(cc.split_settings(cfg, s)["samples_per_client"] is None for s in cfg["study"]["splits"])
    scl = cc.run_settings(cfg, "mnist5k", "scl")["algorithm"]
    assert {k: scl[k] for k in ("eps1", "eps2", "cooldown")} == {"eps1": 0.35, "eps2": 1.0, "cooldown": 30}  # Table 4


def test_a_split_carries_its_home_papers_clients_and_participation():
    """`splits.<name>.clients` and `.participation` (a setting's scale): that split's scenarios only, the engine's
    participation and FedGWC's own for its runs; never a generator parameter; a variant's engine block still wins."""
    cfg = yaml.safe_load((REPO / "config" / "tiny.yaml").read_text())
    cfg["study"]["splits"] = ["nonoverlap-balanced", "home"]
    cfg["splits"]["home"] = {"generator": "ocfl", "overlap": False, "imbalanced": False, "clients": [10],
                             "participation": 0.5}
    cfg["algorithms"]["fedgwc"] = {"method": "fedgwc"}
    cfg["algorithms"]["bnc-full"] = {"method": "bnc", "engine": {"participation": 1.0}}
    cfg["study"]["algorithms"] = ["bnc", "fedgwc", "bnc-full"]
    cfg = cc.validate_config(cfg)
    assert {(s["split"], s["clients"]) for s in cc.scenarios(cfg)} == {("nonoverlap-balanced", 6), ("home", 10)}
    assert "clients" not in cc.split_settings(cfg, "home") and "participation" not in cc.split_settings(cfg, "home")
    home, other = cc.run_settings(cfg, "digits", "fedgwc", "home"), cc.run_settings(cfg, "digits", "fedgwc", "nonoverlap-balanced")
    assert home["engine"]["participation"] == 0.5 and home["algorithm"]["participation"] == 0.5
    assert other["engine"]["participation"] == 1.0 and other["algorithm"]["participation"] == 0.1  # FedGWC's default
    assert cc.run_settings(cfg, "digits", "bnc-full", "home")["engine"]["participation"] == 1.0
    assert cc.run_settings(cfg, "digits", "bnc", "home")["engine"]["participation"] == 0.5
    from cflcore.stages import report_plan

    plan = report_plan(cfg)
    assert not {"study", "split_clients", "algorithm_splits", "dataset_splits"} & set(plan)  # run ids, not config
    from cflcore.report.parts import plan_specs

    assert {(s.split, s.clients) for s in plan_specs(plan)} == {("nonoverlap-balanced", 6), ("home", 10)}
    bad = yaml.safe_load((REPO / "config" / "tiny.yaml").read_text())
    bad["splits"]["nonoverlap-balanced"]["participation"] = 1.5
    with pytest.raises(Exception, match="participation"):
        cc.validate_config(bad)
