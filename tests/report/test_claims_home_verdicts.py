"""The home check decides both ways (cflcore.report.papers.home): IFCA's claim, fed a noisy table where it is true,
holds; fed one false beyond the seed noise, is contradicted; fed one false within the noise, is inconclusive and leans
against the authors' result; a study without the runs gives n/a (tables: tests/report/claim_tables.py)."""
import pandas as pd
import pytest

from claim_tables import BEYOND, SEEDS, WITHIN, noise
from cflcore.report.statistics import verdicts as vd
from cflcore.report.papers import base as cl
from cflcore.report.papers import home

CLAIM = "home-ifca-rotations"


def table(ari: float, size: float = 0.02, seeds=SEEDS, variant: str = home.IFCA_VARIANT,
          split: str = home.IFCA_SPLIT) -> pd.DataFrame:
    """IFCA's home runs, one per seed: final ARI ``ari`` jittered by ``size`` (zero-mean over the seeds)."""
    return pd.DataFrame([{"dataset": "mnist5k", "clients": 40, "seed": s, "algorithm": variant,
                          "algorithm_base": variant, "split": split, "split_base": split,
                          "ari": ari + noise(s, 0, size), "n_clusters": 4.0, "local_acc": 0.9 + noise(s, 1, size)}
                         for s in seeds])


def row(runs: pd.DataFrame) -> pd.Series:
    return cl.check_claims([home.PAPER], cl.ClaimData(runs)).set_index("claim_id").loc[CLAIM]


def test_true_table_holds_and_names_its_source():
    got = row(table(home.FOUND + 0.07))
    assert (got["holds"], got["lean"]) == (vd.HOLDS, vd.TOWARD), got["note"]
    assert "jichan3751/ifca" in got["where"] and "(9 of 9 ≥ 0.9)" in got["ours"]


def test_six_seeds_at_the_bound_hold_and_one_merged_seed_does_not_decide():
    """The one convention (the t-test, its standard error floored at ARI's resolution): 6 of 6 seeds at ARI 1.00 hold;
    with one seed merged to 0.55 the mean (0.93) lies within the seed noise of 0.9; the row says 5 of 6."""
    six = table(1.0, size=0.0, seeds=range(6))
    assert row(six)["holds"] == vd.HOLDS
    one_merged = six.assign(ari=[1.0] * 5 + [0.55])
    got = row(one_merged)
    assert got["holds"] == vd.INCONCLUSIVE and "(5 of 6 ≥ 0.9" in got["ours"]


def test_false_table_is_contradicted():
    got = row(table(home.FOUND - BEYOND))
    assert (got["holds"], got["lean"]) == (vd.CONTRADICTED, vd.AGAINST), got["note"]


def test_within_noise_table_is_inconclusive_leaning_against():
    got = row(table(home.FOUND - WITHIN))
    assert (got["holds"], got["lean"]) == (vd.INCONCLUSIVE, vd.AGAINST), got["note"]


@pytest.mark.parametrize("names", [dict(variant="ifca-oracle"), dict(split="rotation-4")])
def test_other_runs_are_not_the_home_check(names):
    """Only the variant and split the home config defines are read: IFCA on the heterogeneity study's rotations is not
    its home check."""
    assert row(table(1.0, **names))["holds"] == vd.NA


SCL_CLAIM = "home-scl-rotated-half"


def scl_table(ari: float, size: float = 0.02, seeds=SEEDS, variant: str = home.SCL_VARIANT,
              split: str = home.SCL_SPLIT) -> pd.DataFrame:
    """SCL's home runs, one per seed: 10 clients, final ARI ``ari`` jittered by ``size``."""
    return table(ari, size, seeds, variant, split).assign(clients=10, n_clusters=2.0)


def scl_row(runs: pd.DataFrame) -> pd.Series:
    return cl.check_claims([home.PAPER], cl.ClaimData(runs)).set_index("claim_id").loc[SCL_CLAIM]


def test_scl_true_table_holds_and_names_its_source():
    got = scl_row(scl_table(home.FOUND + 0.07))
    assert (got["holds"], got["lean"]) == (vd.HOLDS, vd.TOWARD), got["note"]
    assert "felisat/clustered-federated-learning" in got["where"] and "≥ 0.9)" in got["ours"]


def test_scl_false_table_is_contradicted():
    """Fed a table where SCL merges or over-splits the halves (ARI far below 0.9 on every seed): contradicted."""
    got = scl_row(scl_table(home.FOUND - BEYOND))
    assert (got["holds"], got["lean"]) == (vd.CONTRADICTED, vd.AGAINST), got["note"]


@pytest.mark.parametrize("names", [dict(variant="scl"), dict(split="rotation-2")])
def test_other_scl_runs_are_not_the_home_check(names):
    assert scl_row(scl_table(1.0, **names))["holds"] == vd.NA


FESEM_CLAIM = "home-fesem-beats-fedavg"


def fesem_table(fesem_acc: float, fedavg_acc: float = 0.6, size: float = 0.02, seeds=SEEDS,
                split: str = home.FESEM_SPLIT) -> pd.DataFrame:
    """FeSEM's home runs and FedAvg's on the same seeds: local accuracies ``fesem_acc`` and ``fedavg_acc``, each
    jittered by ``size`` (zero-mean over the seeds, another jitter per variant)."""
    def runs(variant: str, acc: float, index: int, ari: float, k: float) -> pd.DataFrame:
        return table(ari, 0.0, seeds, variant, split).assign(
            clients=30, n_clusters=k, local_acc=[acc + noise(s, index, size) for s in seeds])
    return pd.concat([runs(home.FESEM_VARIANT, fesem_acc, 2, 0.5, 3.0), runs(home.FEDAVG_VARIANT, fedavg_acc, 3, 0.0, 1.0)],
                     ignore_index=True)


def fesem_row(runs: pd.DataFrame) -> pd.Series:
    return cl.check_claims([home.PAPER], cl.ClaimData(runs)).set_index("claim_id").loc[FESEM_CLAIM]


def test_fesem_true_table_holds_and_names_its_source():
    got = fesem_row(fesem_table(0.8))
    assert (got["holds"], got["lean"]) == (vd.HOLDS, vd.TOWARD), got["note"]
    assert "anonymousgit2020/fedsem" in got["where"] and "against FedAvg's 0.60" in got["ours"]
    assert "final ARI 0.50" in got["ours"]


def test_fesem_false_table_is_contradicted():
    """FeSEM below FedAvg beyond the seed noise (its clusters starve each model of clients): contradicted."""
    got = fesem_row(fesem_table(0.6 - BEYOND))
    assert (got["holds"], got["lean"]) == (vd.CONTRADICTED, vd.AGAINST), got["note"]


def test_fesem_tied_table_is_inconclusive_leaning_against():
    """FeSEM a hair below FedAvg, within the seed noise (both at chance, as two untrained models): not decided."""
    got = fesem_row(fesem_table(0.6 - WITHIN))
    assert (got["holds"], got["lean"]) == (vd.INCONCLUSIVE, vd.AGAINST), got["note"]


def test_fesem_without_its_fedavg_or_on_another_split_is_not_the_home_check():
    runs = fesem_table(0.8)
    assert fesem_row(runs[runs["algorithm"] == home.FESEM_VARIANT])["holds"] == vd.NA
    assert fesem_row(fesem_table(0.8, split="rotation-3"))["holds"] == vd.NA
