"""Run-time "did not act" (issue 68): each strategy says from its own records whether a run acted
(cflcore.strategies.run_records: a reader per method, in a file beside it), and the cross table prints it instead of a score and keeps it out of
the ranks, the mark and the CD (cflcore.report.acted, cflcore.report.cross_paper)."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from cflcore.report import cross_paper as cp
from cflcore.report.acted import NO_ACTION, cell_actions, with_actions
from cflcore.strategies import STRATEGIES
from cflcore.strategies.run_records import NoAction, did_not_act, no_action_text


def scl_run(tmp_path, eps1: float, eps2: float, seed: int = 0) -> pd.DataFrame:
    """Three rounds of SCL on six synthetic clients (two groups); its server.parquet."""
    from cflcore.data.synthetic import synthetic_federated
    from engine_runs import train_run

    fed = synthetic_federated(n_clients=6, n_train=16, n_test=8, n_orch=16, n_clusters=2, seed=seed)
    settings = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                             "rounds": 3}, "engine": {"eval_every": 10},
                "algorithm": {"method": "scl", "eps1": eps1, "eps2": eps2, "cooldown": 0}, "device": "cpu"}
    out = tmp_path / f"scl-{eps1}-{seed}"
    train_run(fed, settings, seed, out, logging.getLogger("test"))
    return pd.read_parquet(out / "server.parquet")


def test_scl_says_it_did_not_act_when_its_eps1_is_never_reached_and_acts_when_it_is(tmp_path):
    """The same three rounds: with ε₁ 1e-9 no mean update norm is under it, no split, and the reason names the
    smallest norm against ε₁; with ε₁ = ε₂ between the mean and the largest update norm it splits and did_not_act is
    None."""
    scl = STRATEGIES.get("scl")
    idle = scl_run(tmp_path, 1e-9, 1e-9)
    why = did_not_act("scl", idle, scl.with_defaults({"eps1": 1e-9, "eps2": 1e-9}))
    assert isinstance(why, NoAction) and why.reason.startswith("smallest mean update norm")
    norms = idle["largest_mean_update_norm"].astype(float)
    assert why.figures == {"norm": norms.min(), "round": int(idle.loc[norms.idxmin(), "round"]), "eps1": 1e-9}
    # ε₁ = ε₂ between round 0's mean and largest update norm (the same round 0: same seed): it splits there
    eps = float(idle.loc[0, "largest_mean_update_norm"] + idle.loc[0, "largest_max_update_norm"]) / 2
    acting = scl_run(tmp_path, eps, eps)
    assert acting["n_splits"].sum() >= 1 and did_not_act("scl", acting, scl.with_defaults({"eps1": eps, "eps2": eps})) is None


def _server(**columns) -> pd.DataFrame:
    return pd.DataFrame({"round": range(len(next(iter(columns.values())))), **columns})


def test_each_plug_in_reads_its_own_criterion():
    def of(method: str, server: pd.DataFrame, **params) -> NoAction | None:
        return did_not_act(method, server, STRATEGIES.get(method).with_defaults(params))

    base = {"n_splits": [0, 0, 0], "eps1": [0.05] * 3, "eps2": [0.25] * 3}
    # SCL: under the cool-down in every round; under ε₁ but never over ε₂
    assert of("scl", _server(**base, cooldown=[5] * 3, largest_mean_update_norm=[0.01] * 3,
                             largest_max_update_norm=[1.0] * 3)).reason.startswith("no round past the cool-down")
    why = of("scl", _server(**base, cooldown=[0] * 3, largest_mean_update_norm=[0.2, 0.04, 0.03],
                            largest_max_update_norm=[0.3, 0.2, 0.1]))
    assert why.text() == "mean update norm under ε₁ in 2 rounds, where the largest update norm 0.2 is under ε₂ 0.25"
    # OCFL: clustered in some round -> acted; never -> the temperature's first and last values
    assert of("ocfl", _server(clustered=[False, True, True], trigger_value=[0.4, 0.5, None])) is None
    why = of("ocfl", _server(clustered=[False] * 3, trigger_value=[0.44, 0.41, 0.38]))
    assert why.text() == ("trigger never fired: the temperature never rose above the round before's in 3 rounds "
                          "(from 0.44 to 0.38)")
    # FedGWC: Alg. 2 decided in some round (even without a split) -> acted; never -> the smallest MSE against ε
    assert of("fedgwc", _server(db_considered=["[]", "[0]"], min_mse=[0.5, 1e-4], epsilon=[1e-3] * 2)) is None
    why = of("fedgwc", _server(db_considered=["[]"] * 3, min_mse=[0.5, 0.13, 0.065], epsilon=[1e-3] * 3))
    assert why.text() == "Alg. 2 never ran: smallest running MSE 0.065 (round 2) against ε 0.001"
    # BCL: its clustering round past the run's rounds
    assert of("bcl", _server(clustered=[False] * 3), round=20).text() == "its clustering round 20 is past the run's 3 rounds"
    assert of("bcl", _server(clustered=[False, False, True]), round=2) is None
    # a method without a reader (it acts from round 0) never says it did not
    assert of("ifca", _server(n_clusters=[2, 2])) is None


def test_the_seeds_reasons_join_into_ranges():
    reasons = [NoAction("smallest mean update norm {norm} (round {round}) against ε₁ {eps1}",
                        {"norm": n, "round": r, "eps1": e}) for n, r, e in ((0.15, 19, 0.03), (0.18, 17, 0.06))]
    assert no_action_text(reasons) == "smallest mean update norm 0.15–0.18 (round 17–19) against ε₁ 0.03–0.06"
    runs = pd.DataFrame({NO_ACTION: [reasons[0], None, reasons[1]]})
    assert cell_actions(runs) == ("", "1 of 3 seeds acted")
    assert cell_actions(runs.iloc[[0, 2]])[0].startswith("smallest mean update norm 0.15–0.18")
    assert cell_actions(runs.iloc[[1]]) == ("", "")


SETTINGS = [cp.Setting(f"s{i}", "leahcimali", f"setting {i}") for i in range(6)]


def summary_with(idle: dict[str, list[int]]) -> pd.DataFrame:
    """Four methods × six settings × 3 seeds, "a" best, "scl" worst (ARI 0 where it did not act); ``idle``: method ->
    the seeds that did not act (on every setting)."""
    skill = {"a": 0.95, "b": 0.7, "c": 0.5, "scl": 0.0}
    rows = []
    for i, s in enumerate(SETTINGS):
        for m, v in skill.items():
            for seed in range(3):
                no = (NoAction("smallest mean update norm {norm} (round {round}) against ε₁ {eps1}",
                               {"norm": 0.15 + 0.01 * seed, "round": 19, "eps1": 1e-9})
                      if seed in idle.get(m, []) else None)
                rows.append({"split_base": s.split, "algorithm": m, "seed": seed, "rand": 0.5, "local_acc": 0.7,
                             "ari": (0.0 if no else max(v, 0.9)) - 0.03 * ((i + seed) % 3), NO_ACTION: no})
    return pd.DataFrame(rows)


def test_a_method_that_did_not_act_prints_so_and_is_out_of_the_ranks_the_mark_and_the_cd():
    block = {"settings": {s.split: {"home": s.home, "label": s.label} for s in SETTINGS}}
    analysis = cp.cross_analysis(summary_with({"scl": [0, 1, 2]}), block, ["a", "b", "c", "scl"])
    wide = cp.wide_table(analysis["tidy"]).set_index("method")
    assert wide.loc["scl", "setting 0"].startswith(f"{cp.DID_NOT_ACT}: smallest mean update norm 0.15–0.17 (round 19) "
                                                   "against ε₁ 1e-09 · acc. 0.70")
    tidy = analysis["tidy"]
    assert tidy.loc[tidy["method"] == "scl", "ari_mean"].isna().all()
    assert not tidy.loc[tidy["method"] == "scl", ["best_ari", "tied_best"]].any().any()
    assert analysis["cd"].dropped == ["scl"] and analysis["cd"].n_blocks == 6 and "scl" not in analysis["ranks"]
    assert cp.DID_NOT_ACT in cp.cross_section_rst(analysis)
    # without the records' word, the same zeros are ranked last: the declaration is what moves it
    plain = cp.cross_analysis(summary_with({"scl": [0, 1, 2]}).drop(columns=[NO_ACTION]), block, ["a", "b", "c", "scl"])
    assert plain["ranks"]["scl"] == 4.0 and plain["cd"].dropped == []


def test_a_cell_where_some_seeds_acted_says_k_of_n_and_is_scored_on_all_seeds():
    block = {"settings": {s.split: {"home": s.home, "label": s.label} for s in SETTINGS}}
    runs = summary_with({"b": [2]})
    analysis = cp.cross_analysis(runs, block, ["a", "b", "c", "scl"])
    tidy = analysis["tidy"].set_index(["method", "split"])
    assert tidy.loc[("b", "s0"), "seeds_acted"] == "2 of 3 seeds acted" and tidy.loc[("b", "s0"), "ari_n"] == 3
    assert tidy.loc[("b", "s0"), "ari_mean"] == pytest.approx(np.mean(runs.query("algorithm == 'b' and split_base == 's0'")["ari"]))
    assert "(2 of 3 seeds acted)" in cp.wide_table(analysis["tidy"]).set_index("method").loc["b", "setting 0"]
    assert "b" in analysis["ranks"] and analysis["cd"].dropped == []


def test_with_actions_asks_each_runs_own_plug_in():
    server = _server(clustered=[False] * 3, trigger_value=[0.44, 0.41, 0.38])
    loaded = [SimpleNamespace(spec=SimpleNamespace(algorithm=a), server=server) for a in ("km", "ifca", "gone")]
    summary = pd.DataFrame({"algorithm": ["km", "ifca", "gone"], "ari": [0.0, 1.0, 0.5]})
    out = with_actions(summary, loaded, {"km": {"method": "ocfl", "clusterer": "kmeans"}, "ifca": {"method": "ifca"}})
    assert out[NO_ACTION].iloc[0].reason.startswith("trigger never fired") and out[NO_ACTION].iloc[1:].isna().all()


@pytest.mark.parametrize("method", ["scl", "ocfl", "fedgwc", "bcl"])
def test_no_train_job_runs_a_reader_so_no_run_reruns_for_one(method):
    """The readers read finished runs; a train job's code hash covers what it imports (cflcore/provenance.py), so
    they live outside the strategy modules and nothing a train job runs imports them."""
    from cflcore.provenance import job_modules

    modules = job_modules("train", {"method": method, "model": "tinyvgg"})
    assert f"cflcore.strategies.{method}" in modules
    assert not [m for m in modules if m.endswith("_records") or m == "cflcore.strategies.run_records"]


def test_references_are_shown_apart_as_bands_and_never_ranked_marked_or_in_the_cd(tmp_path, monkeypatch):
    """FedAvg (ARI 0 by construction) and an oracle (ARI 1.00 by construction, above every method) are bands: listed
    under the ranked methods with "(reference)", without ★ (the oracle's 1.00 does not take the column's mark), out of
    the ranks and the CD; the heatmap draws them below a line."""
    import matplotlib.axes

    summary = summary_with({})
    extra = []
    for s in SETTINGS:
        for seed in range(3):
            extra.append({"split_base": s.split, "algorithm": "bnc", "seed": seed, "rand": 0.5, "local_acc": 0.6, "ari": 0.0})
            extra.append({"split_base": s.split, "algorithm": "oracle", "seed": seed, "rand": 1.0, "local_acc": 0.9,
                          "ari": 1.0})
    summary = pd.concat([summary, pd.DataFrame(extra)], ignore_index=True)
    bands = {"bnc": "FedAvg", "oracle": "the true groups"}
    block = {"settings": {s.split: {"home": s.home, "label": s.label} for s in SETTINGS}}
    methods = ["bnc", "a", "oracle", "b", "c", "scl"]
    analysis = cp.cross_analysis(summary, block, methods, references=bands)
    wide = cp.wide_table(analysis["tidy"])
    assert wide["method"].tolist() == ["a", "b", "c", "scl", "bnc (reference)", "oracle (reference)"]
    oracle = wide.set_index("method").loc["oracle (reference)", "setting 0"]
    assert oracle.startswith("ARI 1.00 ± 0.00") and cp.BEST_MARK not in oracle
    tidy = analysis["tidy"]
    assert tidy.loc[(tidy["method"] == "a") & (tidy["split"] == "s0"), ["best_ari", "tied_best"]].any(axis=None)
    assert set(analysis["ranks"].index) == {"a", "b", "c", "scl"} and analysis["cd"].dropped == []
    assert set(analysis["cd"].algorithms) == {"a", "b", "c", "scl"}
    assert set(cp.average_ranks(tidy).index) == {"a", "b", "c", "scl"}
    assert any(line.startswith("Reference, not ranked: oracle (the true groups); final ARI 1.00, accuracy 0.90")
               for line in analysis["lines"])
    lines = []
    real = matplotlib.axes.Axes.axhline
    monkeypatch.setattr(matplotlib.axes.Axes, "axhline", lambda self, y, *a, **k: lines.append(y) or real(self, y, *a, **k))
    cp.draw_cross_heatmap(tidy, tmp_path / "heat")
    assert lines == [3.5, 3.5]  # both panels: a line under the four ranked methods, the two bands below it


def test_the_written_ranks_name_the_methods_left_out(tmp_path):
    block = {"settings": {s.split: {"home": s.home, "label": s.label} for s in SETTINGS}}
    analysis = cp.cross_analysis(summary_with({"scl": [0, 1, 2]}), block, ["a", "b", "c", "scl"])
    cp.write_cross_paper(analysis, tmp_path, lambda kind, path, dataset, clients: {"kind": kind, "path": str(path)})
    ranks = pd.read_csv(tmp_path / "figures" / "cross_paper_cd" / "cross_paper_cd_ari_ranks.csv")
    assert ranks["algorithm"].tolist() == ["a", "b", "c"]
    assert ranks["note"].iloc[0].endswith("left out (no score on every setting): scl")
    tidy = pd.read_csv(tmp_path / "tables" / "cross_paper.csv", keep_default_na=False)
    assert tidy.loc[tidy["method"] == "scl", "did_not_act"].str.startswith("smallest mean update norm").all()


def test_an_scl_run_that_never_reaches_its_eps1_prints_did_not_act_and_is_out_of_the_ranks(tmp_path):
    """Issue 68's test, end to end from a real run's records: SCL at ε₁ 1e-9 (never reached) on two settings beside two
    methods that act; its cells print "did not act: smallest mean update norm … against ε₁ 1e-09" and it is left out
    of the ranks and the CD, which rest on both settings."""
    server = scl_run(tmp_path, 1e-9, 1e-9)
    rows, loaded = [], []
    for split in ("s0", "s1"):
        for method, ari in (("a", 0.9), ("b", 0.5), ("scl", 0.0)):
            for seed in range(2):
                rows.append({"split_base": split, "algorithm": method, "seed": seed, "ari": ari + 0.01 * seed,
                             "rand": 0.5, "local_acc": 0.7})
                loaded.append(SimpleNamespace(spec=SimpleNamespace(algorithm=method), server=server))
    variants = {"a": {"method": "ifca"}, "b": {"method": "bnc"}, "scl": {"method": "scl", "eps1": 1e-9, "eps2": 1e-9}}
    summary = with_actions(pd.DataFrame(rows), loaded, variants)
    block = {"settings": {s: {"home": "leahcimali", "label": s} for s in ("s0", "s1")}}
    analysis = cp.cross_analysis(summary, block, ["a", "b", "scl"])
    cell = cp.wide_table(analysis["tidy"]).set_index("method").loc["scl", "s0"]
    assert cell.startswith(f"{cp.DID_NOT_ACT}: smallest mean update norm ") and "against ε₁ 1e-09" in cell
    assert list(analysis["ranks"].index) == ["a", "b"] and analysis["cd"].dropped == ["scl"]
    assert analysis["cd"].n_blocks == 2
