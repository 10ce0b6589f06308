"""The cross-paper study (config/cross-paper-offline.yaml) and its table (cflcore/report/cross_paper.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cflcore.report import cross_paper as cp
from test_workflow import planned_jobs, run_sm

SETTINGS = [cp.Setting("a", "000", "000 a"), cp.Setting("b", "002", "002 b"), cp.Setting("c", "004", "004 c")]


def planted(flip: bool = False) -> pd.DataFrame:
    """Three methods × three settings × 3 seeds; "home" wins everywhere, "weak" fails on c (ARI 0.1)."""
    rows = []
    for seed in range(3):
        for split, ari in (("a", {"home": 1.0, "mid": 0.8, "weak": 0.6}), ("b", {"home": 0.9, "mid": 0.7, "weak": 0.5}),
                           ("c", {"home": 0.8, "mid": 0.6, "weak": 0.1})):
            for method, value in ari.items():
                value = 1.1 - value if flip else value
                rows.append({"split_base": split, "algorithm": method, "seed": seed, "ari": value + 0.01 * seed,
                             "rand": value, "pf1": 0.5, "local_bacc": 0.6})
    return pd.DataFrame(rows)


def test_the_table_marks_the_best_ranks_the_methods_and_says_what_it_shows():
    tidy = cp.cross_table(planted(), SETTINGS, ["home", "mid", "weak"])
    assert len(tidy) == 9 and tidy.loc[tidy["best_ari"], "method"].tolist() == ["home"] * 3
    assert tidy.loc[(tidy["method"] == "home") & (tidy["split"] == "a"), "ari_mean"].item() == np.mean([1.0, 1.01, 1.02])
    assert set(tidy.loc[tidy["home"] == "004", "accuracy_metric"]) == {"local_bacc"}  # 004 scores balanced accuracy
    ranks = cp.average_ranks(tidy)
    assert ranks.to_dict() == {"home": 1.0, "mid": 2.0, "weak": 3.0}
    lines = cp.what_it_shows(tidy, ranks)
    assert any(line.startswith("Never failing badly: home's worst final ARI") and "weak" in line for line in lines)
    wide = cp.wide_table(tidy, oracle=["mid"])
    assert wide["method"].tolist() == ["home", "mid (oracle)", "weak"]
    assert "Rand" in wide.loc[0, "004 c"] and "Rand" not in wide.loc[0, "000 a"]
    # the ordering follows the numbers: flipped, "weak" wins
    flipped = cp.cross_table(planted(flip=True), SETTINGS, ["home", "mid", "weak"])
    assert flipped.loc[flipped["best_ari"], "method"].tolist() == ["weak"] * 3


def test_the_cd_analysis_takes_the_settings_as_blocks_with_seeds_averaged():
    """Demšar (2006): a block is a setting, its seeds averaged (not setting × seed pairs as independent blocks); with
    fewer than 6 blocks the text says Wilcoxon–Holm cannot separate a pair."""
    analysis = cp.cross_analysis(planted(), {"settings": {s.split: {"home": s.home, "label": s.label} for s in SETTINGS}},
                                 ["home", "mid", "weak"])
    assert analysis["cd"].n_blocks == 3 and analysis["cd"].algorithms[0] == "home"
    scores = cp.cd_scores(planted(), SETTINGS, ["home", "mid", "weak"])
    assert list(scores.index) == ["000 a", "002 b", "004 c"] and scores.loc["000 a", "home"] == np.mean([1.0, 1.01, 1.02])
    assert analysis["cd"].friedman_p < 0.05
    rst = cp.cross_section_rst(analysis)
    assert rst.startswith("Comparing the seeds' methods") and "What it shows" in rst
    assert cp.CD_BLOCKS in rst and "with 3 blocks the exact Wilcoxon signed-rank test cannot separate a pair" in rst


def test_a_partition_without_groups_says_ari_na_and_other_homes_score_local_accuracy():
    """A shards / dirichlet split has null external scores: its cell says so (never ARI 0), ranks skip it; the
    baselines' homes and leahcimali's settings score accuracy on the clients' own test sets; title and notes print."""
    runs = planted().assign(local_acc=0.7)
    runs.loc[runs["split_base"] == "c", ["ari", "rand"]] = np.nan
    settings = [cp.Setting("a", "scl", "scl a"), cp.Setting("b", "leahcimali", "rotation"),
                cp.Setting("c", "leahcimali", "shards")]
    tidy = cp.cross_table(runs, settings, ["home", "mid", "weak"])
    assert set(tidy["accuracy_metric"]) == {"local_acc"} and not tidy.loc[tidy["setting"] == "shards", "best_ari"].any()
    wide = cp.wide_table(tidy)
    assert wide.loc[0, "shards"] == f"{cp.NO_GROUPS} · acc. 0.70 ± 0.00"
    assert wide.loc[0, "rotation"] == "ARI 0.91 ± 0.01 (3 of 3 ≥ 0.9) ★ · acc. 0.70 ± 0.00"
    assert cp.average_ranks(tidy).to_dict() == {"home": 1.0, "mid": 2.0, "weak": 3.0}
    block = {"settings": {s.split: {"home": s.home, "label": s.label} for s in settings},
             "title": "Which method for which shift", "notes": ["A note."]}
    rst = cp.cross_section_rst(cp.cross_analysis(runs, block, ["home", "mid", "weak"]))
    assert rst.startswith("Which method for which shift") and "A note." in rst


def test_a_negative_control_is_out_of_the_ranks_and_names_who_splits_there():
    """Quantity skew (control: true): finding its "groups" is over-splitting, so it earns no mark, no rank, no CD block."""
    settings = [*SETTINGS[:2], cp.Setting("c", "leahcimali", "quantity", control=True)]
    tidy = cp.cross_table(planted(), settings, ["home", "mid", "weak"])
    assert not tidy.loc[tidy["control"], "best_ari"].any()
    ranks = cp.average_ranks(tidy)
    assert ranks.to_dict() == cp.average_ranks(cp.cross_table(planted(), SETTINGS[:2], ["home", "mid", "weak"])).to_dict()
    assert set(cp.cd_scores(planted(), settings, ["home", "mid", "weak"]).index.get_level_values(0)) == {"000 a", "002 b"}
    lines = cp.what_it_shows(tidy, ranks)
    assert lines[0] == ("quantity (a negative control, out of the ranks): methods above ARI 0.3 there, which separate "
                        "clients the shift does not: home, mid.")


def test_the_heatmap_draws_every_cell_and_marks_the_best_the_control_and_the_missing(tmp_path, monkeypatch):
    """The figure holds one annotated cell per method × setting in each panel: the ARI panel marks the column's best
    as the table does, a setting without groups reads "n/a", a control's column is labelled so."""
    import matplotlib.axes

    runs = planted().assign(local_acc=0.7)
    runs.loc[runs["split_base"] == "b", ["ari", "rand"]] = np.nan
    settings = [SETTINGS[0], cp.Setting("b", "leahcimali", "shards"), cp.Setting("c", "leahcimali", "quantity", control=True)]
    tidy = cp.cross_table(runs, settings, ["home", "mid", "weak"])
    texts, ticks = [], []
    real_text, real_ticks = matplotlib.axes.Axes.text, matplotlib.axes.Axes.set_xticks
    monkeypatch.setattr(matplotlib.axes.Axes, "text", lambda ax, x, y, s, **kw: texts.append(s) or real_text(ax, x, y, s, **kw))
    monkeypatch.setattr(matplotlib.axes.Axes, "set_xticks",
                        lambda ax, t, labels=None, **kw: ticks.append(list(labels)) or real_ticks(ax, t, labels, **kw))
    paths = cp.draw_cross_heatmap(tidy, tmp_path / "heat", oracle=["mid"])
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size for p in paths)
    assert len(texts) == 2 * 9 and texts.count("n/a") == 3  # the ARI of 3 methods on shards; accuracy is there
    assert [t for t in texts if "★" in t] == ["1.01 ★\n3 of 3 ≥ 0.9"]  # home on "000 a"; none on control, shards
    assert ticks[0] == ["000 a", "shards", "quantity\n(control)"]


@pytest.mark.parametrize("name", ["cross-paper-offline", "cross-paper"])
def test_the_study_plans_every_method_on_every_setting(workflow_dir, name):
    """The offline study and its paper-scale sibling (CIFAR-10) plan every method × setting × seed, each setting at
    its own client count."""
    import yaml
    from snakemake.utils import update_config

    from cflcore import config as cc

    root = Path(workflow_dir)
    files = [root / "config" / "config.yaml", root / "config" / f"{name}.yaml"]
    merged: dict = {}
    for f in files:  # Snakemake's own merge, for a file without `extends:` (snakemake_config returns it unchanged)
        update_config(merged, yaml.safe_load(f.read_text()))
    cfg = cc.snakemake_config(merged, files[:1], files[1:], {})
    methods, settings = cfg["study"]["algorithms"], cfg["report"]["cross_paper"]["settings"]
    dataset = cfg["study"]["datasets"][0]
    assert set(settings) == set(cfg["study"]["splits"]) and len(methods) >= 9 and len(cfg["study"]["seeds"]) >= 3
    p = run_sm(workflow_dir, "-n", "--cores", "2", "--configfile", f"config/{name}.yaml", "-p")
    out = p.stdout + p.stderr
    jobs = planned_jobs(out)  # a run with a what-if replay is a train job, one without a train_evaluate job
    trainings = jobs.get("train", 0) + jobs.get("train_evaluate", 0)
    assert trainings == len(methods) * len(settings) * len(cfg["study"]["seeds"])
    only = cc.dataset_splits(cfg)
    for split in settings:
        clients = cfg["splits"][split]["clients"][0]
        data = next((d for d in cfg["study"]["datasets"] if split in only.get(d, [split])), dataset)
        for method in methods:
            for seed in cfg["study"]["seeds"]:
                run = f"runs/{data}/{split}/n{clients}/s{seed}/{method}/status.json"
                assert run in out, run


def test_the_variants_told_k_are_read_from_their_parameters():
    """(oracle) marks the variants whose cluster count is ``oracle`` in their own parameters, defaults included
    (K-Means' ``k``): no list to keep in step. OCFL asks its clusterer; HDBSCAN has no count."""
    import cflcore.config as cc
    from cflcore.report.front_context import front_page_context
    from cflcore.strategies import STRATEGIES

    repo = Path(__file__).resolve().parents[2]
    cfg = cc.load_config(repo / "config" / "config.yaml", repo / "config" / "cross-paper-offline.yaml")
    assert front_page_context(cfg)["told_true_k"] == ["ocfl-km", "ifca-oracle", "fesem-oracle"]
    ocfl, ifca = STRATEGIES.get("ocfl"), STRATEGIES.get("ifca")
    assert ocfl.told_true_k({"clusterer": "kmeans"}) and not ocfl.told_true_k({"clusterer": "kmeans", "k": 3})
    assert not ocfl.told_true_k({"clusterer": "hdbscan", "k": "oracle"})
    assert ocfl.told_true_k({"clusterer": "sklearn", "clusterer_params": {"n_clusters": "oracle"}})
    assert ifca.told_true_k({"k": "oracle"}) and not ifca.told_true_k({})  # IFCA's default k is 3


def test_a_method_that_cannot_split_a_setting_says_why_and_leaves_its_ranks_and_cd():
    """FedGWC at participation 1.0 (its per-round sample is the whole cluster: no candidate split, ever) and HDBSCAN
    with a minimum cluster size above the smallest group cannot recover the groups by construction: the validated
    config names them from their own parameters and the split's, and the table prints the reason, never 0.00; the
    cell is out of the column's mark, the ranks and the CD. A setting where each can act gets no reason."""
    import cflcore.config as cc
    from cflcore.report.front_context import front_page_context

    cfg = cc.load_config(Path(cc.__file__).resolve().parents[2] / "config" / "config.yaml")
    cfg["algorithms"] = {}  # the variants below only (the default config's fedgwc is 004's text reading, which can split)
    cc.deep_update(cfg, {
        "splits": {"swap": {"generator": "label-swap", "swaps": [[1, 7], [2, 7], [4, 7], [3, 8], [5, 6], [7, 9]],
                            "clients": [12], "participation": 1.0},
                   "swap-big": {"generator": "label-swap", "swaps": [[1, 7], [2, 7], [4, 7]], "clients": [12]}},
        "algorithms": {"fedgwc": {"method": "fedgwc", "epsilon": 1.0e-3}, "hdb": {"method": "ocfl", "clusterer": "hdbscan"},
                       "km": {"method": "ocfl", "clusterer": "kmeans"}},
        "study": {"splits": ["swap", "swap-big"], "algorithms": ["fedgwc", "hdb", "km"], "clients": [12]},
        "explain": {"grid_clients": [1, 3, 5]}})  # the default's client 12 is in no run of 12 clients
    reasons = front_page_context(cc.validate_config(cfg))["cannot_split"]
    assert set(reasons) == {"fedgwc", "hdb"} and set(reasons["fedgwc"]) == {"swap"} and set(reasons["hdb"]) == {"swap"}
    assert "K_n = 12" in reasons["fedgwc"]["swap"] and "participation 1" in reasons["fedgwc"]["swap"]
    assert reasons["hdb"]["swap"] == ("HDBSCAN's min_cluster_size 3 (min_cluster_fraction × 12 clients) is above the "
                                      "smallest group (2 clients)")
    # the table: both ruled-out methods score ARI 0 on "swap" (what they would score), k-means 1.0 on both
    rows = [{"split_base": sp, "algorithm": m, "seed": seed,
             "ari": 1.0 if m == "km" else (0.9 + 0.01 * seed if sp == "swap-big" else 0.0),
             "rand": 0.5, "pf1": 0.5, "local_bacc": 0.6, "local_acc": 0.7}
            for sp in ("swap", "swap-big") for m in ("fedgwc", "hdb", "km") for seed in range(3)]
    runs = pd.DataFrame(rows)
    settings = [cp.Setting("swap", "leahcimali", "label swap"), cp.Setting("swap-big", "leahcimali", "label swap (4 a group)")]
    analysis = cp.cross_analysis(runs, {"settings": {s.split: {"home": s.home, "label": s.label} for s in settings}},
                                 ["fedgwc", "hdb", "km"], cannot_split=reasons)
    wide = cp.wide_table(analysis["tidy"]).set_index("method")
    for m in ("fedgwc", "hdb"):
        assert wide.loc[m, "label swap"].startswith(f"{cp.CANNOT_SPLIT}: {reasons[m]['swap']} · acc. 0.70")
        assert "0.00" not in wide.loc[m, "label swap"].split(" · ")[0]
    assert wide.loc["km", "label swap"].startswith("ARI 1.00")
    tidy = analysis["tidy"]
    assert tidy.loc[tidy["cannot_split"] != "", ["method", "split"]].values.tolist() == [["fedgwc", "swap"], ["hdb", "swap"]]
    # the CD never scores a ruled-out cell as 0: the two methods without a score on "swap" are left out (and named),
    # both settings stay blocks for km; the ranks beside it are the CD's
    scores = cp.cd_scores(runs, settings, ["fedgwc", "hdb", "km"], reasons)
    swap = scores.loc["label swap"]
    assert swap[["fedgwc", "hdb"]].isna().all() and swap["km"] == 1.0
    assert analysis["cd"].n_blocks == 2 and analysis["cd"].dropped == ["fedgwc", "hdb"]
    assert analysis["ranks"].to_dict() == {"km": 1.0} == cp.average_ranks(tidy).to_dict()
    assert "left out of the CD and the ranks (no score on every setting): fedgwc, hdb" in cp.cross_section_rst(analysis)
    # without the reasons, the same data ranks them last on "swap" with ARI 0.00: the mechanism is what moves it
    plain = cp.wide_table(cp.cross_table(runs, settings, ["fedgwc", "hdb", "km"])).set_index("method")
    assert plain.loc["fedgwc", "label swap"].startswith("ARI 0.00")


def test_a_method_ruled_out_of_6_of_8_settings_leaves_the_others_ranked_on_all_8():
    """Issue 68 item 4: FedGWC cannot split on 6 of 8 settings. The CD rests on all 8 blocks among the methods scored on
    every one, says FedGWC was left out, and the average ranks beside it are the CD's (same blocks, same methods). The
    old rule (a block with a missing cell dropped for everyone) rested on 2 blocks."""
    from cflcore.report.statistics.cd import cd_analysis

    methods = ["fedgwc", "a", "b", "c", "d"]
    settings = [cp.Setting(f"s{i}", "leahcimali", f"setting {i}") for i in range(8)]
    skill = {"fedgwc": 0.95, "a": 0.9, "b": 0.7, "c": 0.5, "d": 0.3}
    runs = pd.DataFrame([{"split_base": s.split, "algorithm": m, "seed": seed, "rand": 0.5, "local_acc": 0.7,
                          "ari": skill[m] - 0.02 * ((i + j) % 3) + 0.001 * seed}
                         for i, s in enumerate(settings) for j, m in enumerate(methods) for seed in range(3)])
    reasons = {"fedgwc": {s.split: "K_n above the clients" for s in settings[:6]}}
    block = {"settings": {s.split: {"home": s.home, "label": s.label} for s in settings}}
    analysis = cp.cross_analysis(runs, block, methods, cannot_split=reasons)
    cd = analysis["cd"]
    assert cd.n_blocks == 8 and cd.dropped == ["fedgwc"] and cd.algorithms == ["a", "b", "c", "d"]
    assert cd.mean_ranks == {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0} and cd.friedman_p < 0.01
    assert analysis["ranks"].to_dict() == cd.mean_ranks == cp.average_ranks(analysis["tidy"]).to_dict()
    assert any(line.startswith("Average rank by ARI over 8 settings") and "left out (no score on every setting): fedgwc"
               in line for line in analysis["lines"])
    # FedGWC's two scored cells stay in the table; the old complete-block rule would have left 2 blocks
    assert cd_analysis(cp.cd_scores(runs, settings, methods, reasons), incomplete="blocks").n_blocks == 2


def test_a_method_ruled_out_everywhere_is_left_out_of_the_cd():
    runs = planted()
    reasons = {"weak": {s.split: "its parameters rule it out" for s in SETTINGS}}
    scores = cp.cd_scores(runs, SETTINGS, ["home", "mid", "weak"], reasons)
    assert scores["weak"].isna().all() and scores[["home", "mid"]].notna().all().all() and len(scores) == 3
    block = {"settings": {s.split: {"home": s.home, "label": s.label} for s in SETTINGS}}
    cd = cp.cross_analysis(runs, block, ["home", "mid", "weak"], cannot_split=reasons)["cd"]
    assert cd.dropped == ["weak"] and cd.algorithms == ["home", "mid"] and cd.n_blocks == 3


def test_the_front_page_context_reads_the_plug_in_facts_without_importing_a_plug_in(tmp_path):
    """Every Snakemake start builds the report's context; a validated config read back from the validation cache
    (no plug-in imported) gives it without importing a strategy: validation derived the facts (plugin_facts)."""
    import json
    import subprocess
    import sys

    import cflcore.config as cc

    repo = Path(__file__).resolve().parents[2]
    cfg = cc.load_config(repo / "config" / "config.yaml", repo / "config" / "cross-paper-offline.yaml")
    (tmp_path / "validated.json").write_text(json.dumps(cfg))
    code = ("import json, sys\n"
            "from cflcore.report.front_context import front_page_context\n"
            f"ctx = front_page_context(json.load(open({str(tmp_path / 'validated.json')!r})))\n"
            "print(json.dumps({'told': ctx['told_true_k'], 'cannot': sorted(ctx['cannot_split']),\n"
            "                  'imported': sorted(m for m in sys.modules if m.startswith('cflcore.strategies'))}))\n")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    cwd=repo).stdout)
    assert out == {"told": ["ocfl-km", "ifca-oracle", "fesem-oracle"], "cannot": ["fedgwc-code"], "imported": []}, out


def test_the_star_needs_the_best_beyond_the_noise_else_the_top_cells_read_tied():
    """★ only where the best mean beats every other method paired over seeds beyond the noise: home and mid swap
    places by seed (means 0.95 and 0.9 within the noise) read "tied", weak far below is not tied."""
    rows = []
    for seed, (home, mid) in enumerate(((1.0, 0.7), (0.75, 1.0), (1.1, 1.0))):
        for method, value in (("home", home), ("mid", mid), ("weak", 0.1 + 0.01 * seed)):
            rows.append({"split_base": "a", "algorithm": method, "seed": seed, "ari": value, "pf1": 0.5})
    tidy = cp.cross_table(pd.DataFrame(rows), SETTINGS[:1], ["home", "mid", "weak"]).set_index("method")
    assert not tidy["best_ari"].any() and tidy["tied_best"].to_dict() == {"home": True, "mid": True, "weak": False}
    assert cp.cell_text(tidy.loc["home"].to_dict() | {"method": "home"}).startswith("ARI 0.95 ± 0.18 (2 of 3 ≥ 0.9) tied")
    assert any("tied at the top: home, mid" in line for line in cp.what_it_shows(tidy.reset_index(), pd.Series(dtype=float)))


def test_cells_use_the_sample_std_and_count_the_seeds_that_found_the_groups():
    """ddof 1 (the claims' std), and ARI cells say how many seeds reached 0.9 and mark all-or-nothing cells."""
    rows = [{"split_base": "a", "algorithm": "m", "seed": s, "ari": v, "pf1": 0.5}
            for s, v in enumerate((1.0, 1.0, 1.0, 0.1, 0.05, 0.0))]
    row = cp.cross_table(pd.DataFrame(rows), SETTINGS[:1], ["m"]).iloc[0]
    assert row["ari_std"] == pytest.approx(np.std([1.0, 1.0, 1.0, 0.1, 0.05, 0.0], ddof=1))
    assert (row["ari_found"], row["ari_missed"], row["ari_n"]) == (3, 3, 6)
    assert cp.cell_text(row.to_dict()).startswith("ARI 0.53 ± 0.52 (3 of 6 ≥ 0.9; bimodal)")
    assert cp.heatmap_text(row.to_dict(), "ari") == "0.53 ★\n3 of 6 ≥ 0.9\nbimodal"  # the only method: best alone
