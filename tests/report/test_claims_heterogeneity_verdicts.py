"""The heterogeneity claims can tell: each holds on a table where it is true, says "contradicted" on a false table
and "inconclusive" on one whose compared values tie within the seed noise (cflcore.report.papers.heterogeneity)."""
import pandas as pd
import pytest

from cflcore.errors import ConfigError
from cflcore.report.statistics import verdicts as vd
from cflcore.report.papers import base as cl
from cflcore.report.papers import heterogeneity as het

SEEDS = tuple(range(18))
"""18 seeds: the level claims ("ARI ≥ 0.9 in at least 80 % of seeds", the exact binomial test, issue 67) can hold from
17 seeds at the level on; the paired claims get t-intervals of a few points."""


def noise(seed: int, index: int, size: float) -> float:
    """A zero-mean seed jitter that differs between cells (see test_claims_004_verdicts)."""
    return size * (((seed + index) % 3) - 1)


def table(scl_ari=1.0, ifca_ari=1.0, ifca_k=4.0, fedavg_acc=0.5, finder_acc=0.9, quantity_ari=0.0,
          jitter=0.0) -> pd.DataFrame:
    rows = []

    def add(base, split, seed, **values):
        i = sum(r["seed"] == seed for r in rows)  # the row's place within its seed: cells jitter differently
        rows.append({"dataset": "mnist5k", "clients": 12, "seed": seed, "algorithm": base, "algorithm_base": base,
                     "split": split, "split_base": split,
                     **{k: (v + noise(seed, i, jitter) if k in ("ari", "local_acc") else v) for k, v in values.items()}})

    for seed in SEEDS:
        add("scl", het.ROTATED_HALF, seed, ari=scl_ari, n_clusters=2.0)
        add("ifca-oracle", het.ROTATION_GROUPS, seed, ari=ifca_ari, n_clusters=ifca_k)
        add("bnc", het.LABEL_SWAP, seed, ari=0.0, local_acc=fedavg_acc, n_clusters=1.0)
        add("ocfl-km", het.LABEL_SWAP, seed, ari=1.0, local_acc=finder_acc, n_clusters=6.0)
        add("bcl", het.LABEL_SWAP, seed, ari=0.2, local_acc=0.3, n_clusters=3.0)  # finds no groups: not compared
        add("ocfl-hdb", het.QUANTITY_SKEW, seed, ari=quantity_ari, n_clusters=2.0)
        add("ifca-oracle", het.QUANTITY_SKEW, seed, ari=0.0, n_clusters=4.0)
        add("bnc", het.QUANTITY_SKEW, seed, ari=0.0, n_clusters=1.0)
    return pd.DataFrame(rows)


def verdicts(runs: pd.DataFrame) -> pd.Series:
    return cl.check_claims(["heterogeneity"], cl.ClaimData(runs)).set_index("claim_id")["holds"]


CASES = {  # claim -> (false table, tied table)
    "het-scl-rotated-half": (dict(scl_ari=0.0), dict(scl_ari=0.9, jitter=0.05)),
    "het-ifca-rotation-groups": (dict(ifca_ari=0.3, ifca_k=2.0), dict(ifca_ari=0.9, jitter=0.05)),
    "het-label-swap-fedavg": (dict(fedavg_acc=0.95, finder_acc=0.8), dict(fedavg_acc=0.8, finder_acc=0.8, jitter=0.02)),
    "het-label-swap-conditioned": (dict(fedavg_acc=0.95, finder_acc=0.8),
                                   dict(fedavg_acc=0.8, finder_acc=0.8, jitter=0.02)),
    "het-quantity-control": (dict(quantity_ari=0.9), dict(quantity_ari=0.3, jitter=0.05)),
}


def test_every_claim_holds_on_a_true_table_and_names_its_source():
    rows = cl.check_claims(["heterogeneity"], cl.ClaimData(table())).set_index("claim_id")
    assert set(rows.index) == set(CASES)
    assert (rows["holds"] == vd.HOLDS).all(), rows["note"].to_dict()
    assert rows["where"].str.len().gt(20).all()  # each names its source
    assert "split anyway: ocfl-hdb (2.0 clusters), ifca-oracle (4.0 clusters)" in rows.loc["het-quantity-control", "ours"]


def test_the_quantity_control_names_apart_the_methods_told_k():
    """A method told the true number of groups splits because it is told to: not "split anyway"."""
    data = cl.ClaimData(table(), told_true_k=frozenset({"ifca-oracle"}))
    ours = cl.check_claims(["heterogeneity"], data).set_index("claim_id").loc["het-quantity-control", "ours"]
    assert ours.startswith("split anyway: ocfl-hdb (2.0 clusters); told the true k: ifca-oracle (4.0 clusters); ARI")


@pytest.mark.parametrize("claim_id", sorted(CASES))
def test_false_table_is_contradicted(claim_id):
    assert verdicts(table(**CASES[claim_id][0]))[claim_id] == vd.CONTRADICTED


@pytest.mark.parametrize("claim_id", sorted(CASES))
def test_tied_table_is_inconclusive(claim_id):
    assert verdicts(table(**CASES[claim_id][1]))[claim_id] == vd.INCONCLUSIVE


def test_no_setting_gives_na():
    assert (verdicts(table().assign(split_base="elsewhere")) == vd.NA).all()


def test_label_swap_without_a_finder_is_not_a_verdict():
    runs = table()
    runs.loc[runs["algorithm"] == "ocfl-km", "ari"] = 0.1
    assert verdicts(runs)["het-label-swap-fedavg"] in (vd.NA, vd.INCONCLUSIVE)


def test_label_swap_reads_all_seeds_and_keeps_the_conditioned_reading_as_a_sanity_row():
    """OCFL-KM finds the groups in 12 of 18 seeds (ARI 1.00, ahead of FedAvg there) and misses them in 6, where it is
    below FedAvg: the claim (v3 on) reads all 18 seeds, where the misses count, and is no longer "holds"; the conditioned
    reading (its runs that find the groups only) holds, in a row of kind sanity named as such."""
    runs = table(jitter=0.02)
    late = (runs["algorithm"] == "ocfl-km") & (runs["seed"] >= 12)
    runs.loc[late, "ari"], runs.loc[late, "local_acc"] = 0.1, 0.1
    rows = cl.check_claims(["heterogeneity"], cl.ClaimData(runs)).set_index("claim_id")
    main, sanity = rows.loc["het-label-swap-fedavg"], rows.loc["het-label-swap-conditioned"]
    assert main["holds"] != vd.HOLDS and main["kind"] == vd.EVIDENCE, main.to_dict()
    assert "ocfl-km (in 12 of 18 seeds" in main["ours"] and "18 paired seeds" in main["note"]
    assert sanity["holds"] == vd.HOLDS and sanity["kind"] == vd.SANITY and sanity["claim"].startswith("Sanity check")
    assert "ocfl-km in 12 of 18 seeds" in sanity["ours"] and "12 paired seeds" in sanity["note"]
    assert "unpaired" not in sanity["note"] + sanity["reason"]
    assert "v2 (from 9402aef" in main["earlier"] and ": holds (lean toward)" in main["earlier"]


def test_a_study_maps_its_own_names_to_the_papers_roles():
    """A study whose rotation split and FedAvg carry other names maps them to the roles (``report.roles``): the rows
    are those of the roles' own names; unmapped, the rotation claim finds no run (n/a)."""
    ours = table().replace({"split": {het.ROTATION_GROUPS: "rot4"}, "split_base": {het.ROTATION_GROUPS: "rot4"},
                            "algorithm": {"bnc": "fedavg-plain"}, "algorithm_base": {"bnc": "fedavg-plain"}})
    roles = {"heterogeneity": {"rotation_groups": "rot4", "fedavg": "fedavg-plain"}}
    expected = cl.check_claims(["heterogeneity"], cl.ClaimData(table()))
    pd.testing.assert_frame_equal(cl.check_claims(["heterogeneity"], cl.ClaimData(ours), roles=roles), expected)
    unmapped = cl.check_claims(["heterogeneity"], cl.ClaimData(ours)).set_index("claim_id")["holds"]
    assert unmapped["het-ifca-rotation-groups"] == vd.NA
    with pytest.raises(ConfigError, match=r"report\.roles\.heterogeneity: unknown role 'rotations'; allowed: fedavg"):
        cl.check_claims(["heterogeneity"], cl.ClaimData(ours), roles={"heterogeneity": {"rotations": "rot4"}})


def test_the_reference_bands_are_kept_from_claims_about_every_method():
    """Issue 68: the oracle (ARI 1.00 by construction) and local training are bands, not methods. A claim about every
    method (the quantity control: nobody finds quantity groups) read with the oracle's runs would be contradicted by
    the band; the report keeps the bands no paper names from the claims, and FedAvg, which the claims name, in."""
    from cflcore.report.build import unnamed_bands, without_variants

    runs = table()
    for seed in SEEDS:
        for band, ari, k in (("oracle", 1.0, 4.0), ("local", 0.0, 16.0)):
            runs.loc[len(runs)] = {"dataset": "mnist5k", "clients": 12, "seed": seed, "algorithm": band,
                                   "algorithm_base": band, "split": het.QUANTITY_SKEW, "split_base": het.QUANTITY_SKEW,
                                   "ari": ari, "n_clusters": k}
    bands = {"bnc": "FedAvg", "oracle": "the true groups", "local": "every client alone"}
    unread = unnamed_bands(["heterogeneity"], bands, None)
    assert unread == {"oracle", "local"}  # FedAvg is a role of the heterogeneity claims
    counted = cl.check_claims(["heterogeneity"], cl.ClaimData(runs)).set_index("claim_id").loc["het-quantity-control"]
    kept = cl.check_claims(["heterogeneity"], without_variants(cl.ClaimData(runs), unread)).set_index(
        "claim_id").loc["het-quantity-control"]
    assert counted["holds"] == vd.CONTRADICTED and " oracle ARI" in counted["note"]
    assert kept["holds"] == vd.HOLDS and " oracle ARI" not in kept["note"] and "local" not in kept["ours"]
    fedavg = cl.check_claims(["heterogeneity"], without_variants(cl.ClaimData(runs), unread)).set_index(
        "claim_id").loc["het-label-swap-fedavg"]
    assert fedavg["holds"] == vd.HOLDS  # FedAvg's runs are still read where a claim names it


def _idle(runs: pd.DataFrame, method: str, split: str, seeds=SEEDS) -> pd.DataFrame:
    """``runs`` with the run-time "did not act" (cflcore.report.acted.NO_ACTION) set for ``method`` on ``split`` in
    ``seeds``: its ARI stays the 0 a method that never split keeps."""
    from cflcore.plugin import NoAction
    from cflcore.report.acted import NO_ACTION

    runs = runs.assign(**{NO_ACTION: None}).astype({NO_ACTION: object})
    at = (runs["algorithm_base"] == method) & (runs["split_base"] == split) & runs["seed"].isin(seeds)
    runs.loc[at, "ari"] = 0.0
    runs.loc[at, NO_ACTION] = pd.Series([NoAction("mean update norm {norm} against ε₁ {eps1}",
                                                  {"norm": 0.15 + 0.001 * s, "eps1": 0.05}) for s in runs[at]["seed"]],
                                        index=runs.index[at], dtype=object)
    return runs


def test_a_method_that_never_acted_is_not_read_as_a_miss():
    """Issue 68 (claims v3): SCL that split in no seed keeps ARI 0 by default; the rotated-half claim is n/a "did not
    act" with the figures, not "contradicted" (v2, kept beside it, says contradicted); a method that acted in some
    seeds is read on all of them, the idle seeds counting as misses."""
    rows = cl.check_claims(["heterogeneity"], cl.ClaimData(_idle(table(), "scl", het.ROTATED_HALF))).set_index("claim_id")
    scl = rows.loc["het-scl-rotated-half"]
    assert scl["holds"] == vd.NA and "did not act" in scl["note"] and "0.15–0.17" in scl["note"]
    assert scl["version"].startswith("v3") and "v2 (" in scl["earlier"] and "contradicted" in scl["earlier"]
    some = cl.check_claims(["heterogeneity"], cl.ClaimData(_idle(table(), "scl", het.ROTATED_HALF, SEEDS[:9])))
    assert some.set_index("claim_id").loc["het-scl-rotated-half", "holds"] == vd.CONTRADICTED


def test_the_quantity_control_leaves_out_a_method_that_never_acted():
    """A method that never split passes a negative control by default: v3 leaves it out and names it; the control is
    n/a when no clustering method acted, and still contradicted by a method that acted and split the quantities."""
    runs = _idle(table(), "ocfl-hdb", het.QUANTITY_SKEW)
    quantity = cl.check_claims(["heterogeneity"], cl.ClaimData(runs)).set_index("claim_id").loc["het-quantity-control"]
    assert quantity["holds"] == vd.HOLDS and "left out: ocfl-hdb did not act" in quantity["ours"]
    assert "ocfl-hdb ARI" not in quantity["note"]
    alone = _idle(table()[lambda t: t["algorithm_base"] != "ifca-oracle"], "ocfl-hdb", het.QUANTITY_SKEW)
    assert cl.check_claims(["heterogeneity"], cl.ClaimData(alone)).set_index("claim_id").loc[
        "het-quantity-control", "holds"] == vd.NA
    split = _idle(table(quantity_ari=0.9), "ifca-oracle", het.QUANTITY_SKEW)
    assert cl.check_claims(["heterogeneity"], cl.ClaimData(split)).set_index("claim_id").loc[
        "het-quantity-control", "holds"] == vd.CONTRADICTED
