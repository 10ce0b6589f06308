"""004's paper check decides both ways (cflcore.report.papers.fedgwc_004): every claim, fed a noisy table where it
is true, holds; fed one false beyond the seed noise, is contradicted; fed one false within the noise, is
inconclusive and leans against 004 (tables: tests/report/claim_tables.py). The negative control (Fig. 6) counts
per-run events, not a difference of means: it has a false table, no noise."""
from types import SimpleNamespace

import pandas as pd
import pytest

from claim_tables import BEYOND, SEEDS, WITHIN, noise
from cflcore.report.papers import fedgwc_004 as c004
from cflcore.report.statistics import verdicts as vd
from cflcore.report.papers import base as cl

CLAIMS = ("004-domains", "004-domains-baselines", "004-was", "004-beta", "004-heterogeneity", "004-aggregators")


def table(gwc_rand: float = 1.0, ifca_rand: float = 0.5, gwc_was: float = 0.4, betas=(0.80, 0.82, 0.81),
          hard_gain: float = 0.25, soft_gain: float = 0.05, wrap_gain: float = 0.03,
          jitter: float = 0.0, seeds=SEEDS) -> pd.DataFrame:
    """One row per run over SEEDS: FedGWC and the k-tuned baselines on two domain splits and a mix, a β sweep and
    FedGWC / FedAvg (plain and wrapped FedAvgM) on two Dirichlet federations. ``jitter`` adds a seed noise that
    differs per cell (index) so that equal means become ties within the noise."""
    rows, index = [], iter(range(10_000))

    def add(base, split, seed, **values):
        i = next(index)
        rows.append({"dataset": "d", "clients": 30, "seed": seed, "algorithm": base, "algorithm_base": base,
                     "split": split, "split_base": split,
                     **{k: (v + noise(seed, i, jitter) if k in ("rand", "was", "local_bacc") else v)
                        for k, v in values.items()}})

    for seed in seeds:
        index = iter(range(10_000))  # the cells numbered alike for every seed: each cell's jitter is zero-mean
        for split in ("domains-noise", "domains-blur"):
            add("fedgwc", split, seed, rand=gwc_rand, n_clusters=2.0)
            for k, acc in ((2, 0.7), (3, 0.6)):  # k 2 has the best accuracy, so its Rand is the one compared
                add("ifca", split, seed, k=k, rand=ifca_rand if k == 2 else 0.99, local_bacc=acc)
                add("fesem", split, seed, k=k, rand=ifca_rand if k == 2 else 0.99, local_bacc=acc)
        add("fedgwc", "mix-3", seed, was=gwc_was)
        add("ifca", "mix-3", seed, k=3, was=0.1, local_bacc=0.6)
        add("fesem", "mix-3", seed, k=3, was=0.1, local_bacc=0.6)
        for b, acc in zip((0.1, 0.5, 2.0), betas):
            add("fedgwc-beta", "dirichlet-hard", seed, beta=b, local_bacc=acc, n_clusters=2.0)
        for split, alpha, gain in (("dirichlet-hard", 0.05, hard_gain), ("dirichlet-soft", 1.0, soft_gain)):
            add("fedgwc", split, seed, local_bacc=0.6 + gain, split_alpha=alpha)
            add("fedavg", split, seed, local_bacc=0.6, split_alpha=alpha)
            add("fedgwc-fedavgm", split, seed, local_bacc=0.6 + gain + wrap_gain, split_alpha=alpha)
            add("fedavgm", split, seed, local_bacc=0.6 + gain, split_alpha=alpha)
    return pd.DataFrame(rows)


def verdicts(runs: pd.DataFrame) -> pd.Series:
    keys = ["dataset", "clients", "split", "seed", "algorithm"]
    ids = runs[keys].drop_duplicates()
    data = cl.ClaimData(runs, rounds=ids.merge(pd.DataFrame({"round": range(20)}), how="cross"),
                        summaries=ids.assign(first_clustering_round=5.0))
    return cl.check_claims(["004"], data).set_index("claim_id")["holds"]


def checked(runs: pd.DataFrame) -> pd.DataFrame:
    keys = ["dataset", "clients", "split", "seed", "algorithm"]
    ids = runs[keys].drop_duplicates()
    data = cl.ClaimData(runs, rounds=ids.merge(pd.DataFrame({"round": range(20)}), how="cross"),
                        summaries=ids.assign(first_clustering_round=5.0))
    return cl.check_claims(["004"], data).set_index("claim_id")


JITTER = 0.01
TRUE = dict(gwc_rand=0.97)  # no value at the Rand index's bound


def test_the_noisy_true_table_holds_every_claim_beyond_the_noise():
    got = checked(table(jitter=JITTER, **TRUE))
    assert {c: (got.loc[c, "holds"], got.loc[c, "lean"]) for c in CLAIMS} == {c: (vd.HOLDS, vd.TOWARD) for c in CLAIMS}


def false(delta: float) -> dict[str, dict]:
    """Each claim false in the table's means by ``delta`` past what it claims (the other claims left true)."""
    return {
        "004-domains": dict(gwc_rand=c004.DOMAINS_SEPARATED - delta),
        "004-domains-baselines": dict(gwc_rand=0.9, ifca_rand=0.9 + delta),
        "004-was": dict(gwc_was=0.1 - delta),
        "004-beta": dict(betas=(0.82 - c004.BETA_SPREAD - delta, 0.82, 0.81)),
        "004-heterogeneity": dict(hard_gain=0.1 - delta, soft_gain=0.1),
        "004-aggregators": dict(wrap_gain=-delta),
    }


@pytest.mark.parametrize("claim_id", CLAIMS)
def test_a_false_table_beyond_the_noise_is_contradicted(claim_id):
    row = checked(table(jitter=JITTER, **{**TRUE, **false(BEYOND)[claim_id]})).loc[claim_id]
    assert (row["holds"], row["lean"]) == (vd.CONTRADICTED, vd.AGAINST), (claim_id, row.to_dict())


LEVEL_CLAIMS = ("004-domains",)
"""Level claims on a bounded score, read as a share of seeds (issue 67): a mean within the seed noise below the level
is about half the seeds below it, far under 80 %: contradicted (the within-noise case of a share is below)."""


@pytest.mark.parametrize("claim_id", [c for c in CLAIMS if c not in LEVEL_CLAIMS])
def test_a_false_table_within_the_noise_is_inconclusive_leaning_against(claim_id):
    row = checked(table(jitter=JITTER, **{**TRUE, **false(WITHIN)[claim_id]})).loc[claim_id]
    assert (row["holds"], row["lean"]) == (vd.INCONCLUSIVE, vd.AGAINST), (claim_id, row.to_dict())
    assert "within the seed noise" in row["reason"] and row["seeds_to_decide"], (claim_id, row.to_dict())


@pytest.mark.parametrize("claim_id", LEVEL_CLAIMS)
def test_a_level_within_the_noise_of_its_mean_is_a_share_far_below_80_percent(claim_id):
    row = checked(table(jitter=JITTER, **{**TRUE, **false(WITHIN)[claim_id]})).loc[claim_id]
    assert (row["holds"], row["lean"]) == (vd.CONTRADICTED, vd.AGAINST), (claim_id, row.to_dict())


def test_a_share_within_the_binomial_noise_is_inconclusive_leaning_against():
    """FedGWC's Rand reaches the level in 13 of 18 seeds on one split (72 % < 80 %: P(X ≤ 13 | 18, 0.8) = 0.28)."""
    runs = table(jitter=JITTER, **TRUE)
    low = (runs["algorithm"] == "fedgwc") & (runs["split"] == "domains-noise") & (runs["seed"] >= 13)
    runs.loc[low, "rand"] = c004.DOMAINS_SEPARATED - 0.2
    row = checked(runs).loc["004-domains"]
    assert (row["holds"], row["lean"]) == (vd.INCONCLUSIVE, vd.AGAINST), row.to_dict()
    assert row["seeds_to_decide"].endswith("(to contradict)"), row["seeds_to_decide"]


def test_one_seed_gives_no_interval_and_never_holds():
    got = verdicts(table(jitter=0.01, seeds=(0,)))
    assert all(got[c] in (vd.INCONCLUSIVE, vd.NA) for c in CLAIMS), got.to_dict()


def test_the_negative_control_has_a_false_table():
    """Fig. 6's claim counts per-run events (MSE below ε, a split): one run that splits contradicts it."""
    def run(seed, clusters):
        server = pd.DataFrame({"round": range(4), "min_mse": [0.5, 0.005, 0.004, 0.004], "epsilon": 0.01,
                               "n_clusters": clusters})
        return SimpleNamespace(spec=SimpleNamespace(split="homogeneous", algorithm="fedgwc", seed=seed), server=server)

    calm, split = run(0, [1, 1, 1, 1]), run(1, [1, 1, 2, 2])
    check = c004.fedgwc_negative_control
    assert check(cl.ClaimData(table(), loaded=[calm, run(1, [1] * 4)])).holds == vd.HOLDS
    assert check(cl.ClaimData(table(), loaded=[calm, split])).holds == vd.CONTRADICTED
