"""One summary of a score over seeds for every table, figure and claim (cflcore.report.statistics.seed_stats): the sample std
(ddof 1), and "k of n seeds" beside ARI with all-or-nothing cells marked bimodal."""
import numpy as np
import pandas as pd
import pytest

from cflcore.report import cross_paper as cp
from cflcore.report.statistics import seed_stats as ss
from cflcore.report import sweeps as sw
from cflcore.report import tables as tb
from cflcore.report.statistics import verdicts as vd

ROTATION = [1.0, 0.05, 1.0, 1.0, 0.13, 0.0]  # OCFL on rotation: all or nothing per seed


def test_k_of_n_and_the_bimodal_mark():
    s = ss.summarise(ROTATION)
    assert (s.n, s.found, s.missed, s.bimodal) == (6, 3, 3, True)
    assert s.text(k_of_n=True) == f"0.53 ± {np.std(ROTATION, ddof=1):.2f} (3 of 6 ≥ 0.9; bimodal)"
    assert ss.summarise([1.0, 0.95, 0.5]).text(k_of_n=True) == "0.82 ± 0.28 (2 of 3 ≥ 0.9)"  # none ≤ 0.2: not bimodal
    assert ss.summarise([0.5]).text(k_of_n=True) == "0.50 (0 of 1 ≥ 0.9)" and np.isnan(ss.summarise([0.5]).std)
    assert ss.summarise([np.nan]).text(k_of_n=True) == "–"
    assert ss.summarise([ss.FOUND_ARI, ss.MISSED_ARI]).bimodal  # the thresholds are inclusive


def test_every_table_reads_the_same_sample_std():
    """The claims' cell, 000's tables, the sweep table, the cross-paper table: one std for the same seeds."""
    runs = pd.DataFrame({"dataset": "d", "clients": 6, "split": "a", "split_base": "a", "algorithm": "m",
                         "algorithm_base": "m", "seed": range(6), "ari": ROTATION, "ever_clustered": True, "pf1": 0.5,
                         "f": 1.0})
    want = pytest.approx(np.std(ROTATION, ddof=1))
    assert vd.cell(runs, "ari").sd == want and "(3 of 6 ≥ 0.9; bimodal)" in vd.cell(runs, "ari").text()
    groups = pd.DataFrame([{"dataset": "d", "clients": 6, "split": "a", "algorithm": "m", "n_expected": 6}])
    agg = tb.aggregate_seeds(runs, groups, ["ari"]).iloc[0]
    assert agg["ari_std"] == want and (agg["ari_found"], agg["ari_missed"]) == (3, 3)
    assert "(3 of 6 ≥ 0.9; bimodal)" in tb.wide_layout(tb.aggregate_seeds(runs, groups, ["ari"]), ["ari"], False).iloc[0, -1]
    assert sw.sweep_table(runs.assign(f=[1.0, 2.0] * 3), ["f"])["ari_std"].tolist() == [
        pytest.approx(np.std(ROTATION[0::2], ddof=1)), pytest.approx(np.std(ROTATION[1::2], ddof=1))]
    assert cp.cross_table(runs, [cp.Setting("a", "000", "a")], ["m"]).iloc[0]["ari_std"] == want
