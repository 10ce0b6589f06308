"""004's paper check can tell: every claim, fed a synthetic table where it is false, never "holds", and fed one where
its compared values tie within the seed noise, says "inconclusive" (cflcore.report.claims.fedgwc_004; issue 42).
The negative control (Fig. 6) counts per-run events, not a difference of means: it has a false table, no tie."""
from types import SimpleNamespace

import pandas as pd
import pytest

from cflcore.report.claims import fedgwc_004 as c004
from cflcore.report.claims import framework as cl

SEEDS = (0, 1, 2)
CLAIMS = ("004-domains", "004-domains-baselines", "004-was", "004-beta", "004-heterogeneity", "004-aggregators")


def noise(seed: int, index: int, size: float = 0.02) -> float:
    """A zero-mean seed jitter that differs between cells: any two cells' paired differences average 0 over SEEDS."""
    return size * (((seed + index) % 3) - 1)


def table(gwc_rand: float = 1.0, ifca_rand: float = 0.5, gwc_was: float = 0.4, betas=(0.80, 0.82, 0.81),
          hard_gain: float = 0.25, soft_gain: float = 0.05, wrap_gain: float = 0.03,
          jitter: float = 0.0) -> pd.DataFrame:
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

    for seed in SEEDS:
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


def test_the_true_table_holds_every_claim_beyond_the_noise():
    got = verdicts(table(jitter=0.003))
    assert {c: got[c] for c in CLAIMS} == {c: cl.HOLDS for c in CLAIMS}


FALSE = {  # each claim false in the table's means (other claims left true)
    "004-domains": dict(gwc_rand=0.6),
    "004-domains-baselines": dict(ifca_rand=1.0, gwc_rand=0.92),
    "004-was": dict(gwc_was=0.0),
    "004-beta": dict(betas=(0.70, 0.82, 0.81)),
    "004-heterogeneity": dict(hard_gain=0.05, soft_gain=0.25),
    "004-aggregators": dict(wrap_gain=-0.03),
}
TIE = {  # the compared values equal (or at the threshold) in the means, apart within the seed noise
    "004-domains": dict(gwc_rand=0.9, ifca_rand=0.5),
    "004-domains-baselines": dict(ifca_rand=0.95, gwc_rand=0.95),
    "004-was": dict(gwc_was=0.1),
    "004-beta": dict(betas=(0.78, 0.82, 0.81)),
    "004-heterogeneity": dict(hard_gain=0.1, soft_gain=0.1),
    "004-aggregators": dict(wrap_gain=0.0),
}


@pytest.mark.parametrize("claim_id", CLAIMS)
def test_a_false_table_never_holds(claim_id):
    for jitter in (0.0, 0.01):
        assert verdicts(table(jitter=jitter, **FALSE[claim_id]))[claim_id] != cl.HOLDS, (claim_id, jitter)


@pytest.mark.parametrize("claim_id", CLAIMS)
def test_a_tie_within_the_noise_is_inconclusive(claim_id):
    assert verdicts(table(jitter=0.02, **TIE[claim_id]))[claim_id] == cl.INCONCLUSIVE


def test_one_seed_gives_no_interval_and_never_holds():
    got = verdicts(table(jitter=0.01).query("seed == 0"))
    assert all(got[c] in (cl.INCONCLUSIVE, cl.NA) for c in CLAIMS), got.to_dict()


def test_the_negative_control_has_a_false_table():
    """Fig. 6's claim counts per-run events (MSE below ε, a split): one run that splits contradicts it."""
    def run(seed, clusters):
        server = pd.DataFrame({"round": range(4), "min_mse": [0.5, 0.005, 0.004, 0.004], "epsilon": 0.01,
                               "n_clusters": clusters})
        return SimpleNamespace(spec=SimpleNamespace(split="homogeneous", algorithm="fedgwc", seed=seed), server=server)

    calm, split = run(0, [1, 1, 1, 1]), run(1, [1, 1, 2, 2])
    check = c004.fedgwc_negative_control
    assert check(cl.ClaimData(table(), loaded=[calm, run(1, [1] * 4)])).holds == cl.HOLDS
    assert check(cl.ClaimData(table(), loaded=[calm, split])).holds == cl.CONTRADICTED
