"""The home table (issue 57, cflcore.report.papers.home): one row per method with its home, the authors'
demonstration and result, ours as mean ± std with "k of n seeds", the verdict and the departures; built from a toy runs
table, and opening the front page of a study that checks ``home``."""
import pandas as pd

from cflcore.report.statistics import verdicts as vd
from cflcore.report.build import front_tables_rst
from cflcore.report.papers import base as cl
from cflcore.report.papers import home
from cflcore.report.papers._home_rows import HOME_COLUMNS, HOME_TABLE, NOT_RUN
from cflcore.report.papers.base import FAILS_AT_HOME, NOT_TESTABLE
from cflcore.strategies import fesem_departures, ifca_departures


def ifca_runs(ari: float, seeds=range(6)) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "mnist5k", "clients": 40, "seed": s, "algorithm": home.IFCA_VARIANT,
                          "algorithm_base": home.IFCA_VARIANT, "split": home.IFCA_SPLIT, "split_base": home.IFCA_SPLIT,
                          "ari": ari, "n_clusters": 4.0, "local_acc": 0.9} for s in seeds])


def table(runs: pd.DataFrame) -> pd.DataFrame:
    return home.Home.tables(cl.ClaimData(runs), checked=True)[HOME_TABLE].set_index("method")


def row(frame: pd.DataFrame, start: str) -> pd.Series:
    return frame.loc[[m for m in frame.index if m.startswith(start)][0]]


def test_ifca_row_reads_its_runs_verdict_source_and_departures():
    got = table(ifca_runs(1.0, seeds=range(18)))
    assert list(got.reset_index().columns) == list(HOME_COLUMNS)
    ifca = row(got, "IFCA")
    assert "18 of 18 ≥ 0.9" in ifca["ours"] and ifca["ours"].startswith("final ARI 1.00")
    assert ifca["verdict"].startswith(vd.HOLDS)  # 18 of 18 seeds clear "in at least 80 % of seeds" (issue 67)
    six = row(table(ifca_runs(1.0)), "IFCA")  # 6 of 6 do not: 0.8^6 = 0.26
    assert six["verdict"].startswith(f"{vd.INCONCLUSIVE} (lean toward")
    assert "jichan3751/ifca" in ifca["authors' demonstration"] and "mnist/config.json" in ifca["authors' demonstration"]
    assert "final test accuracy only" in ifca["authors' result"]
    assert ifca["departures"].startswith(f"{len(ifca_departures.DEPARTURES)} (cflcore.strategies.ifca_departures")


def test_absent_method_is_not_run_and_other_homes_are_named():
    got = table(ifca_runs(1.0))
    scl = row(got, "SCL")
    assert scl["ours"] == NOT_RUN and scl["verdict"] == NOT_RUN
    assert "felisat/clustered-federated-learning" in scl["authors' demonstration"]
    for method, config in (("OCFL", "config/config.yaml"), ("Louvain", "config/louvain-002-offline.yaml"),
                           ("FedGWC", "config/fedgwc-004-offline.yaml")):
        assert config in row(got, method)["home"] and row(got, method)["ours"] == "checked there, not rerun here"
    assert "no authors' code found" in row(got, "BCL")["authors' demonstration"]
    assert "anonymousgit2020/fedsem" in row(got, "FeSEM")["authors' demonstration"]


def fesem_runs(fesem_acc: float, fedavg_acc: float, seeds=range(6)) -> pd.DataFrame:
    """FeSEM's home runs (final ARI 0.5, 3 clusters) and FedAvg's (one model), with jittered local accuracies."""
    jitter = [0.01 * (s - 2.5) for s in seeds]
    return pd.concat([ifca_runs(ari, seeds).assign(algorithm=v, algorithm_base=v, split=home.FESEM_SPLIT,
                                                   split_base=home.FESEM_SPLIT, clients=30, n_clusters=k,
                                                   local_acc=[acc + j * sign for j in jitter])
                      for v, ari, k, acc, sign in ((home.FESEM_VARIANT, 0.5, 3.0, fesem_acc, 1),
                                                   (home.FEDAVG_VARIANT, 0.0, 1.0, fedavg_acc, -1))],
                     ignore_index=True)


def test_fesem_row_reads_its_runs_the_accuracy_claim_and_its_departures():
    fesem = row(table(fesem_runs(0.8, 0.6)), "FeSEM")
    assert fesem["home"] == "this study (config/home-fesem-offline.yaml)"
    assert fesem["ours"].startswith("final ARI 0.50") and "0 of 6 ≥ 0.9" in fesem["ours"] and "local_acc 0.80" in fesem["ours"]
    assert fesem["verdict"].startswith(vd.HOLDS) and "home-fesem-beats-fedavg" in fesem["verdict"]
    assert "models/mlhead_trainer.py" in fesem["authors' demonstration"] and "0.839" in fesem["authors' result"]
    assert fesem["departures"].startswith(f"{len(fesem_departures.DEPARTURES)} (cflcore.strategies.fesem_departures")
    assert row(table(fesem_runs(0.4, 0.6)), "FeSEM")["verdict"].startswith(vd.CONTRADICTED)
    assert row(table(ifca_runs(1.0)), "FeSEM")["ours"] == NOT_RUN


def test_false_table_reads_contradicted():
    ifca = row(table(ifca_runs(0.0)), "IFCA")
    assert ifca["verdict"].startswith(vd.CONTRADICTED) and "0 of 6 ≥ 0.9" in ifca["ours"]


def test_unchecked_study_gets_the_header_only_and_the_front_page_opens_on_the_table():
    assert home.Home.tables(cl.ClaimData(ifca_runs(1.0)), checked=False)[HOME_TABLE].empty
    rst = front_tables_rst([home.PAPER], cl.ClaimData(ifca_runs(1.0)), None)
    assert rst.startswith("Every method on its home ground") and "6 of 6" in rst
    assert front_tables_rst([], cl.ClaimData(ifca_runs(1.0)), None) == ""


def loaded_runs(loss: float) -> list:
    """FeSEM's and FedAvg's home runs as the report loads them: server.parquet's last mean training loss, 10 classes."""
    from types import SimpleNamespace

    return [SimpleNamespace(spec=SimpleNamespace(algorithm=v, split=home.FESEM_SPLIT),
                            server=pd.DataFrame({"round": [0, 1], "mean_train_loss": [2.3026, loss + 0.0001 * s]}),
                            manifest={"n_classes": 10})
            for v in (home.FESEM_VARIANT, home.FEDAVG_VARIANT) for s in range(6)]


def test_the_mark_splits_fails_at_home_from_not_testable_here():
    """Issue 68: FeSEM's accuracy claim on runs that never leave ln 10 reads "not testable here" (whatever its verdict:
    here a tie, inconclusive), the same verdict on trained runs reads "fails at home"; IFCA contradicted fails at
    home, holding has no mark."""
    runs = fesem_runs(0.11, 0.11)
    untrained = row(home.Home.tables(cl.ClaimData(runs, loaded=loaded_runs(2.3010)), True)[HOME_TABLE].set_index("method"),
                    "FeSEM")
    assert untrained["mark"].startswith(f"{NOT_TESTABLE}: neither {home.FESEM_VARIANT} nor {home.FEDAVG_VARIANT} leaves "
                                        "the untrained loss (ln 10 = 2.303): last training loss 2.3010–2.3015 over 12 runs")
    trained = row(home.Home.tables(cl.ClaimData(runs, loaded=loaded_runs(0.5)), True)[HOME_TABLE].set_index("method"),
                  "FeSEM")
    assert trained["verdict"] == untrained["verdict"] and trained["mark"] == FAILS_AT_HOME
    assert row(table(ifca_runs(0.0)), "IFCA")["mark"] == FAILS_AT_HOME
    holding = table(ifca_runs(1.0, seeds=range(18)))  # a level claim holds from 17 seeds on (issue 67's binomial)
    assert row(holding, "IFCA")["verdict"].startswith(vd.HOLDS)
    assert row(holding, "IFCA")["mark"] == "" and row(holding, "SCL")["mark"] == ""


def test_each_ablations_verdict_stands_beside_the_home_verdict(tmp_path):
    """Issue 68: the ablation studies the home paper declares (Home.ablations) decide its claims again; the home table
    prints each one's verdict (with its mark) from its report's paper_claims.csv, "not run" where it is absent, and the
    Snakefile's report plan makes those files inputs of the tables part."""
    from cflcore.report.papers.base import CLAIM_COLUMNS

    claim = "home-fesem-beats-fedavg"
    written = tmp_path / "aligned" / "paper_claims.csv"
    written.parent.mkdir()
    pd.DataFrame([{**dict.fromkeys(CLAIM_COLUMNS, ""), "claim_id": claim, "holds": "inconclusive", "lean": "toward"}],
                 columns=list(CLAIM_COLUMNS)).to_csv(written, index=False)
    ablations = {claim: [["home-fesem-offline-aligned", str(written)],
                         ["home-fesem-offline-rounds", str(tmp_path / "absent" / "paper_claims.csv")]]}
    got = home.Home.tables(cl.ClaimData(fesem_runs(0.8, 0.6), ablation_claims=ablations), True)[HOME_TABLE]
    fesem = row(got.set_index("method"), "FeSEM")
    assert fesem["ablations"] == ("home-fesem-offline-aligned: inconclusive (lean toward) · "
                                  "home-fesem-offline-rounds: not run")
    assert row(got.set_index("method"), "IFCA")["ablations"] == ""


def test_the_report_plan_reads_the_declared_ablations_of_a_home_study():
    from pathlib import Path

    import cflcore.config as cc
    from cflcore.report.catalogue import STUDY_INPUTS
    from cflcore.stages import report_plan

    repo = Path(__file__).resolve().parents[2]
    cfg = cc.load_config(repo / "config" / "config.yaml", repo / "config" / "home-fesem-offline.yaml")
    plan = report_plan(cfg)
    assert [s for s, _ in plan["front_page"]["ablation_claims"]["home-fesem-beats-fedavg"]] == [
        "home-fesem-offline-estep", "home-fesem-offline-aligned", "home-fesem-offline-rounds"]
    assert "results/home-fesem-offline-rounds/report/tables/paper_claims.csv" in plan[STUDY_INPUTS]["tables"]
