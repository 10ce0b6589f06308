"""The aggregate report built from a synthetic set of run files (cflcore.report.build_report)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cflcore.io import write_json
from cflcore.evaluate import evaluate_run
from cflcore.report import build_report, run_specs
from cflcore.report import figures as fg
from cflcore.report.papers.ocfl_000 import paper_split, paper_table1, paper_table2
from cflcore.report.runs import RunSpec, load_run
from test_evaluate import write_synthetic_run

SPLITS = ["nonoverlap-balanced", "overlap-imbalanced"]
CLIENTS = 15


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict:
    """2 splits × 2 seeds × {ocfl-km (clusters at round 2 or 3), bcl (never clusters)}; two runs fail."""
    root = tmp_path_factory.mktemp("results")
    specs, raw = [], {}
    for split in SPLITS:
        for seed in (0, 1):
            for algorithm, at in (("ocfl-km", 2 + seed), ("bcl", None)):
                failed = split == "overlap-imbalanced" and seed == 1 and algorithm == "ocfl-km"
                spec, data = write_synthetic_run(root, split=split, clients=CLIENTS, seed=seed, algorithm=algorithm,
                                                 rounds=6, cluster_at=at)
                if failed:  # training died: no run files, only a log
                    for f in spec.run_dir.iterdir():
                        f.unlink()
                    spec.log.parent.mkdir(parents=True, exist_ok=True)
                    spec.log.write_text("round 0 done\nTrainingDiverged: loss is NaN at round 3 (client 4)\n\n")
                else:
                    evaluate_run(spec.run_dir, spec.manifest, spec.eval_dir)
                specs.append(spec)
                raw[spec.run_id] = data
    # a run the config expects whose scenario never ran at all (no files, no log)
    ghost = RunSpec("mnist5k", SPLITS[0], CLIENTS, 7, "bcl", eval_dir=root / "eval/ghost", run_dir=root / "runs/ghost",
                    manifest=root / "splits/ghost/manifest.json", log=root / "logs/ghost.log")
    specs.append(ghost)
    out = root / "report"
    index = build_report(specs, out)
    return {"root": root, "out": out, "index": index, "specs": specs, "raw": raw}


def read_csv(study, name: str) -> pd.DataFrame:
    return pd.read_csv(study["out"] / "tables" / name)


def test_table1_means_over_seeds_with_std(study):
    t1 = read_csv(study, "table1_clustering.csv")
    row = t1[(t1["split"] == SPLITS[0]) & (t1["algorithm"] == "ocfl-km")].iloc[0]
    # seed 0 clusters at round 2 (4 of 6 rounds perfect), seed 1 at round 3 (3 of 6)
    assert row["ari_mean"] == pytest.approx((4 / 6 + 3 / 6) / 2)
    assert row["ari_std"] == pytest.approx(np.std([4 / 6, 3 / 6], ddof=1))
    assert row["n_seeds"] == 2 and row["n_missing"] == 0 and row["n_clustered"] == 2
    failed = t1[(t1["split"] == SPLITS[1]) & (t1["algorithm"] == "ocfl-km")].iloc[0]
    assert failed["n_seeds"] == 1 and failed["n_missing"] == 1 and np.isnan(failed["ari_std"])
    bcl = t1[(t1["split"] == SPLITS[0]) & (t1["algorithm"] == "bcl")].iloc[0]
    assert bcl["n_clustered"] == 0 and bcl["n_missing"] == 1  # the ghost seed
    md = (study["out"] / "tables" / "table1_clustering.md").read_text()
    assert "0.58 ± 0.12" in md  # (4/6 + 3/6)/2 = 0.583, std 0.118
    bcl_line = next(line for line in md.splitlines() if "| bcl" in line)
    assert "–" in bcl_line and "0.00" not in bcl_line  # never clustered -> dash, as in the paper
    tex = (study["out"] / "tables" / "table1_clustering.tex").read_text()
    assert r"\begin{tabular}" in tex and r"$\pm$" in tex


def test_table2_clustering_round_is_one_based(study):
    t2 = read_csv(study, "table2_clustering_round.csv")
    row = t2[(t2["split"] == SPLITS[0]) & (t2["algorithm"] == "ocfl-km")].iloc[0]
    assert row["clustering_round_mean"] == pytest.approx(3.5)  # rounds 3 and 4 (1-based)
    bcl = t2[(t2["split"] == SPLITS[0]) & (t2["algorithm"] == "bcl")].iloc[0]
    assert np.isnan(bcl["clustering_round_mean"])


def test_personalisation_table_matches_history(study):
    tp = read_csv(study, "table_personalisation.csv")
    row = tp[(tp["split"] == SPLITS[0]) & (tp["algorithm"] == "ocfl-km")].iloc[0]
    pf1 = [study["raw"][f"mnist5k/{SPLITS[0]}/n{CLIENTS}/s{s}/ocfl-km"]["history"]["local_f1"].mean() for s in (0, 1)]
    assert row["pf1_mean"] == pytest.approx(np.mean(pf1))
    assert row["learning_gap_mean"] == pytest.approx(np.mean([p - p / 3 for p in pf1]))


def test_paper_versus_run_uses_mnist_rows_for_mnist5k(study):
    cmp = read_csv(study, "paper_vs_run.csv")
    assert set(cmp["paper_dataset"]) == {"mnist"} and set(cmp["clients"]) == {CLIENTS}
    rand = cmp[(cmp["split"] == SPLITS[0]) & (cmp["algorithm"] == "ocfl-km") & (cmp["metric"] == "rand")].iloc[0]
    published = paper_table1()
    expected = published[(published["dataset"] == "mnist") & (published["clients"] == 15)
                         & (published["split"] == SPLITS[0]) & (published["algorithm"] == "ocfl-km")]["rand"].iloc[0]
    assert rand["paper"] == pytest.approx(expected)
    assert rand["ours"] == pytest.approx((4 / 6 + 3 / 6) / 2)
    assert "5k" in rand["note"]
    bcl_round = cmp[(cmp["split"] == SPLITS[0]) & (cmp["algorithm"] == "bcl") & (cmp["metric"] == "clustering_round")].iloc[0]
    t2 = paper_table2()
    assert bcl_round["paper"] == t2[(t2["dataset"] == "mnist") & (t2["clients"] == 15) & (t2["split"] == SPLITS[0])
                                    & (t2["algorithm"] == "bcl")]["clustering_round"].iloc[0]
    bcl_rand = cmp[(cmp["split"] == SPLITS[0]) & (cmp["algorithm"] == "bcl") & (cmp["metric"] == "rand")].iloc[0]
    assert np.isnan(bcl_rand["paper"]) and np.isnan(bcl_rand["ours"])  # "–" on both sides
    assert "mnist5k" in (study["out"] / "tables" / "paper_vs_run.md").read_text()


def test_missing_runs_listed_with_reasons(study):
    missing = pd.read_csv(study["out"] / "missing_runs.csv")
    reasons = dict(zip(missing["run"], missing["reason"]))
    assert reasons == {
        f"mnist5k/{SPLITS[1]}/n{CLIENTS}/s1/ocfl-km": "TrainingDiverged: loss is NaN at round 3 (client 4)",
        f"mnist5k/{SPLITS[0]}/n{CLIENTS}/s7/bcl": "no run files",
    }
    assert study["index"]["n_missing"] == 2 and study["index"]["n_loaded"] == 7


def test_index_lists_every_written_file_and_figures_are_valid(study):
    index = json.loads((study["out"] / "index.json").read_text())
    kinds = {e["kind"] for e in index["files"]}
    assert {"table1_clustering", "table2_clustering_round", "table_personalisation", "paper_vs_run", "at_a_glance", "learning_gap",
            "temperature_mean", "temperature_runs", "clustering_progress", "n_clusters", "missing_runs"} <= kinds
    for entry in index["files"]:
        path = study["out"] / entry["path"]
        assert path.stat().st_size > 0, path
        if entry["format"] == "png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if entry["format"] == "pdf":
            assert path.read_bytes()[:5] == b"%PDF-"
        if entry["format"] == "csv":
            assert len(pd.read_csv(path).columns) > 1, path
        if entry["format"] == "tex":
            assert r"\begin{tabular}" in path.read_text(), path
    # the tables hold one row per (split, method) of the study: 2 splits × 2 methods
    for kind in ("table1_clustering", "table2_clustering_round", "table_personalisation"):
        entry = next(e for e in index["files"] if e["kind"] == kind and e["format"] == "csv")
        table = pd.read_csv(study["out"] / entry["path"])
        assert sorted(zip(table["split"], table["algorithm"])) == sorted((s, a) for s in SPLITS for a in ("bcl", "ocfl-km"))
    repo = Path(__file__).resolve().parents[2]
    for kind in kinds:
        assert (repo / "report" / "captions" / f"{kind}.rst").is_file(), kind
    assert len(pd.read_csv(study["out"] / "index.csv")) == len(index["files"])


def test_status_json_reason_wins_and_eval_missing_after_training(tmp_path):
    spec, _ = write_synthetic_run(tmp_path, clients=6)
    missing = load_run(spec)
    assert missing.reason.startswith("no eval files")
    write_json({"status": "failed", "reason": "CUDA out of memory\nat step 3"}, spec.status)
    assert load_run(spec).reason == "CUDA out of memory at step 3"


def test_report_with_every_run_missing_still_writes_tables_and_folders(tmp_path):
    spec = RunSpec("digits", "iid", 6, 0, "bnc", tmp_path / "e", tmp_path / "r", tmp_path / "m.json")
    index = build_report([spec], tmp_path / "out")
    assert index["n_missing"] == 1
    assert "missing" in (tmp_path / "out" / "tables" / "table1_clustering.md").read_text()
    assert len(pd.read_csv(tmp_path / "out" / "tables" / "paper_vs_run.csv")) == 0
    for kind in ("learning_gap", "temperature_mean", "temperature_runs", "clustering_progress", "n_clusters"):
        assert (tmp_path / "out" / "figures" / kind).is_dir()  # the report rule declares them as directory()


def test_run_specs_paths():
    runs = [f"mnist5k/a/n15/s{seed}/{algo}" for seed in (0, 1) for algo in ("ocfl-km", "bcl")]
    specs = run_specs("res/", runs)
    assert [s.run_id for s in specs] == runs
    assert (specs[1].clients, specs[1].seed, specs[1].algorithm) == (15, 0, "bcl")
    assert specs[0].eval_dir == Path("res/eval/mnist5k/a/n15/s0/ocfl-km")
    assert specs[0].manifest == Path("res/splits/mnist5k/a/n15/s0/manifest.json")
    assert specs[0].log == Path("res/logs/train/mnist5k/a/n15/s0/ocfl-km.log")


def test_paper_split_from_manifest_parameters():
    assert paper_split("overlap-balanced") == "overlap-balanced"
    assert paper_split("ob", {"generator": "ocfl", "params": {"overlap": True, "imbalanced": False}}) == "overlap-balanced"
    assert paper_split("maj", {"generator": "majority"}) is None


def test_normalise_band_and_minimum_helpers():
    assert fg.normalise([2.0, 4.0, np.nan, 3.0]).tolist()[:2] == [0.0, 1.0]
    assert fg.normalise([5.0, 5.0]).tolist() == [0.0, 0.0]
    curves = [fg.Curve("a", np.arange(3), np.array([0.0, 1.0, 2.0])), fg.Curve("b", np.arange(3), np.array([2.0, 1.0, 4.0]))]
    band = fg.mean_confidence_band(curves)
    assert band["mean"].tolist() == pytest.approx([1.0, 1.0, 3.0])
    # n = 2: half width = t(0.975, 1) * sd / sqrt(2), sd of (0, 2) = sqrt(2) -> 12.706
    assert (band["high"] - band["mean"]).iloc[0] == pytest.approx(12.7062047, rel=1e-6)
    assert fg.pre_clustering_minimum(np.array([3.0, 2.0, 1.0, 2.0]), 3) == 2
    assert fg.pre_clustering_minimum(np.array([1.0, 2.0, 3.0]), 2) is None  # rose from the start: no minimum
    assert fg.pre_clustering_minimum(np.array([1.0, 2.0]), None) is None


def test_figure_functions_write_png_and_pdf(tmp_path):
    curves = {"p": [fg.Curve("s0", np.arange(5), fg.normalise([3, 2, 1, 2, 3]), 3)]}
    personal = pd.DataFrame({"algorithm": ["a", "b"], "split": ["x", "x"], "pf1_mean": [0.9, 0.8], "gf1_mean": [0.5, 0.6]})
    rounds = pd.DataFrame({"split": "x", "algorithm": "a", "seed": 0, "round": np.arange(5), "ari": [0, 0, 1, 1, 1.0],
                           "n_clusters": [1, 1, 3, 3, 3.0]})
    for name, fig in {"band": fg.temperature_band_figure(curves, "t"), "runs": fg.temperature_runs_figure(curves, "t"),
                      "gap": fg.learning_gap_figure(personal, "t"), "ari": fg.score_progress_figure(rounds, "t"),
                      "k": fg.n_clusters_figure(rounds, "t"), "lines": fg.series_figure(curves, "t", "ARI")}.items():
        png, pdf = fg.save_figure(fig, tmp_path / name)
        assert png.stat().st_size > 1000 and pdf.read_bytes()[:5] == b"%PDF-"



# ---- front page: headline, paper check, Kendall's tau, departures --------------------------------------
def _final_and_mean_pf1(history: pd.DataFrame) -> tuple[float, float]:
    last = history[history["round"] == history["round"].max()]
    return float(last["local_f1"].mean()), float(history["local_f1"].mean())


def test_headline_table_values_from_known_runs(study):
    head = read_csv(study, "headline.csv")
    row = head[(head["split"] == SPLITS[0]) & (head["algorithm"] == "ocfl-km")].iloc[0]
    runs = [study["raw"][f"mnist5k/{SPLITS[0]}/n{CLIENTS}/s{s}/ocfl-km"]["history"] for s in (0, 1)]
    finals, means = zip(*map(_final_and_mean_pf1, runs))
    assert row["pf1_final_mean"] == pytest.approx(np.mean(finals))
    assert row["pf1_final_std"] == pytest.approx(np.std(finals, ddof=1))
    assert row["pf1_mean"] == pytest.approx(np.mean(means))
    # GF1 = orch_f1 = local_f1 / 3 in the synthetic runs
    assert row["gf1_final_mean"] == pytest.approx(np.mean(finals) / 3)
    assert row["ari_final_mean"] == pytest.approx(1.0)  # both seeds end on the true partition
    assert row["ari_mean"] == pytest.approx((4 / 6 + 3 / 6) / 2)
    assert row["clustering_round_mean"] == pytest.approx(3.5)
    bcl = head[(head["split"] == SPLITS[0]) & (head["algorithm"] == "bcl")].iloc[0]
    assert bcl["ari_final_mean"] == pytest.approx(0.0) and np.isnan(bcl["clustering_round_mean"])


def test_front_page_holds_headline_and_paper_check_and_renders(study):
    from docutils.core import publish_parts

    text = (study["out"] / "front_page.rst").read_text()
    sections = ["At a glance\n---", "Headline\n---", "Paper check (000 Tables 1–2, Figure 2)\n---", "Does the ranking of the methods agree?",
                "Departures by design, and what they do to the comparison\n---"]
    assert [text.index(s) for s in sections] == sorted(text.index(s) for s in sections)
    assert f".. csv-table:: mnist5k, {CLIENTS} clients\n" in text
    head = read_csv(study, "headline.csv")
    row = head[(head["split"] == SPLITS[0]) & (head["algorithm"] == "ocfl-km")].iloc[0]
    assert f"{row['pf1_final_mean']:.2f} ± {row['pf1_final_std']:.2f}" in text  # the headline PF1 final cell
    fig2 = pd.read_csv(Path(__file__).resolve().parents[2] / "cflcore/reference/paper_fig2_f1.csv")
    paper = fig2[(fig2["dataset"] == "mnist") & (fig2["clients"] == CLIENTS) & (fig2["split"] == SPLITS[0])
                 & (fig2["algorithm"] == "ocfl-km")].iloc[0]
    cell = f"{row['pf1_final_mean']:.2f} vs {paper['pf1_final']:.2f} ({row['pf1_final_mean'] - paper['pf1_final']:+.2f})"
    assert cell in text  # the paper check's PF1 final cell: ours vs paper (difference)
    html = publish_parts(text, writer_name="html", settings_overrides={"halt_level": 2})["html_body"]
    assert html.count("<table") >= 3
    assert_headline_table_holds_the_known_values(html, study)


def test_paper_vs_run_holds_pf1_and_gf1(study):
    cmp = read_csv(study, "paper_vs_run.csv")
    assert {"pf1", "gf1", "pf1_final", "gf1_final", "rand", "clustering_round"} <= set(cmp["metric"])
    pf1 = cmp[(cmp["split"] == SPLITS[0]) & (cmp["algorithm"] == "ocfl-km") & (cmp["metric"] == "pf1")].iloc[0]
    head = read_csv(study, "headline.csv")
    ours = head[(head["split"] == SPLITS[0]) & (head["algorithm"] == "ocfl-km")]["pf1_mean"].iloc[0]
    assert pf1["ours"] == pytest.approx(ours) and pf1["paper"] == pytest.approx(0.955202)  # 000 Fig. 2, MNIST-15 NB
    assert pf1["difference"] == pytest.approx(ours - 0.955202)
    assert pf1["basis"] == "mean, all rounds"


def _comparison(cells: list[tuple[str, str, float, float]], metric: str = "pf1_final") -> pd.DataFrame:
    from cflcore.report.papers.ocfl_000 import paper_algorithm

    return pd.DataFrame([{"dataset": "mnist5k", "clients": 15, "split": split, "algorithm": algorithm,
                          "paper_algorithm": paper_algorithm(algorithm),
                          "published_variant": algorithm.endswith("-published"), "metric": metric,
                          "ours": ours, "paper": paper} for split, algorithm, ours, paper in cells])


def test_kendall_tau_per_split_on_known_rankings():
    from scipy import stats

    from cflcore.report.papers.ocfl_000 import ranking_agreement

    methods = ["bnc", "bcl", "ocfl-aff", "ocfl-km"]
    paper = [0.30, 0.35, 0.47, 0.96]
    cells = [("same", m, o, p) for m, o, p in zip(methods, [0.1, 0.2, 0.3, 0.9], paper)]
    cells += [("reversed", m, o, p) for m, o, p in zip(methods, [0.9, 0.3, 0.2, 0.1], paper)]
    cells += [("one-swap", m, o, p) for m, o, p in zip(methods, [0.1, 0.3, 0.2, 0.9], paper)]
    cells += [("with-nan", m, o, p) for m, o, p in zip(methods, [0.1, np.nan, 0.3, 0.9], paper)]
    # a published twin: the fixed ocfl-aff ranks first, the published one (the paper's code) third
    cells += [("twins", m, o, p) for m, o, p in zip(methods, [0.1, 0.2, 0.99, 0.9], paper)]
    cells += [("twins", "ocfl-aff-published", 0.4, 0.47)]
    ranking = ranking_agreement(_comparison(cells)).set_index(["split", "variants"])
    assert ranking.loc[("same", "ours"), "tau"] == pytest.approx(1.0)
    assert ranking.loc[("same", "ours"), "verdict"] == "same order"
    assert ranking.loc[("reversed", "ours"), "tau"] == pytest.approx(-1.0)
    assert ranking.loc[("reversed", "ours"), "verdict"] == "disagrees"
    expected = stats.kendalltau([0.1, 0.3, 0.2, 0.9], paper)
    assert ranking.loc[("one-swap", "ours"), "tau"] == pytest.approx(expected.statistic)  # 4/6 concordant-discordant
    assert ranking.loc[("one-swap", "ours"), "tau"] == pytest.approx(2 / 3)
    assert ranking.loc[("one-swap", "ours"), "p_value"] == pytest.approx(expected.pvalue)
    assert ranking.loc[("with-nan", "ours"), "n_methods"] == 3 and ranking.loc[("with-nan", "ours"), "tau"] == pytest.approx(1.0)
    assert ("same", "published substituted") not in ranking.index  # no twin pair ran there
    fixed, published = ranking.loc[("twins", "ours")], ranking.loc[("twins", "published substituted")]
    assert fixed["n_methods"] == published["n_methods"] == 4
    assert "ocfl-aff-published" not in fixed["methods"] and "ocfl-aff-published" in published["methods"]
    assert fixed["tau"] == pytest.approx(stats.kendalltau([0.1, 0.2, 0.99, 0.9], paper).statistic)
    assert published["tau"] == pytest.approx(1.0)


def _context(**dataset_changes) -> dict:
    import cflcore.config as cc
    from cflcore.report.front_page import front_page_context

    repo = Path(__file__).resolve().parents[2]
    cfg = cc.validate_config(cc.load_config(repo / "config" / "config.yaml"))
    cfg["datasets"]["mnist5k"].update(dataset_changes)
    return front_page_context(cfg)


def _departure(items, topic: str):
    return next(d for d in items if d.topic.startswith(topic))


def test_departures_reflect_the_config(study):
    from cflcore.report.build import comparison_tables
    from cflcore.report.front_page import departures
    from cflcore.report.runs import load_runs

    loaded, _ = load_runs(study["specs"])
    headline, comparison, _ = comparison_tables(study["specs"], loaded)
    short = _departure(departures(_context(rounds=8), headline, comparison), "Rounds (mnist5k)")
    longer = _departure(departures(_context(rounds=20), headline, comparison), "Rounds (mnist5k)")
    assert short.ours.startswith("8 rounds") and "1/8 of our means" in short.effect
    assert longer.ours.startswith("20 rounds") and "1/20 of our means" in longer.effect
    assert "50 rounds" in short.paper  # 000 Table 3, MNIST
    median = np.nanmedian(headline["clustering_round_mean"])  # from the results: NB 3.5 (rounds 3, 4), OI 3
    assert median == pytest.approx(3.25) and f"Median clustering round here {median:g}:" in short.effect
    training = _departure(departures(_context(optimizer="adam", lr=0.003), headline, comparison), "Training")
    assert "optimizer adam" in training.ours and "optimizer sgd" in training.paper and "lr 0.01" in training.paper
    as_paper = _departure(departures(_context(optimizer="sgd", lr=0.01), headline, comparison), "Training")
    assert "optimizer" not in as_paper.ours and "optimizer sgd" in as_paper.effect  # listed as unchanged
    assert "mnist5k" in _departure(departures(_context(), headline, comparison), "Dataset").ours


def test_departures_for_published_bugs_follow_the_variants():
    from cflcore.report.front_page import departures
    from cflcore.report.papers._ocfl_000_front import bug_departures

    fixed = {"ocfl-aff": {"method": "ocfl", "clusterer": "affinity", "affinity_input": "similarity"},
             "bcl": {"method": "bcl", "distance_input": "divergence"},
             "ocfl-hdb": {"method": "ocfl", "clusterer": "hdbscan", "min_samples": 1}}
    published = {"ocfl-aff-published": {"method": "ocfl", "clusterer": "affinity", "affinity_input": "distance"},
                 "bcl-published": {"method": "bcl", "distance_input": "similarity"},
                 "ocfl-hdb-published": {"method": "ocfl", "clusterer": "hdbscan", "min_samples": None}}
    items = bug_departures({**fixed, **published}, ["mnist5k"], [15])
    topics = [d.topic for d in items]
    assert topics == ["Published bug fixed (ocfl-aff)", "Published bug fixed (bcl)", "Published bug fixed (ocfl-hdb)",
                      "Published bug reproduced (ocfl-aff-published)", "Published bug reproduced (bcl-published)",
                      "Published bug reproduced (ocfl-hdb-published)"]
    assert "Compare with ocfl-aff-published" in items[0].effect
    assert "0.13–0.30" in items[0].effect  # the paper's OCFL-AFF ARI on MNIST-15 (Table 1)
    assert "never clusters" in items[1].effect  # the paper's BCL on MNIST-15: "–"
    only_fixed = bug_departures(fixed, ["mnist5k"], [15])
    assert "Add the ocfl-aff-published variant" in only_fixed[0].effect
    extra = departures({"study": {"datasets": ["digits"], "clients": [6], "algorithms": ["bnc", "louvain"]}},
                       pd.DataFrame(), pd.DataFrame())
    assert _departure(extra, "Dataset (digits)").paper == "not in 000"
    assert _departure(extra, "Methods not in 000").ours == "louvain"  # BNC is in 000 (Figure 2)


def test_a_papers_departures_and_sections_show_only_where_the_study_reports_on_it(tmp_path):
    """000's departures and paper-check section are on the front page of a study that checks no other paper, or
    has a cell 000 publishes; a study checking another paper only (heterogeneity's) shows none of 000's."""
    from cflcore.report.front_page import departures, reported_papers, write_front_page
    from cflcore.report.papers.base import published_tables_paper

    published = published_tables_paper().registered_name
    study = {"study": {"datasets": ["digits"], "splits": [], "clients": [6], "seeds": [0], "algorithms": ["bnc", "louvain"]}}
    none, cell = pd.DataFrame(), pd.DataFrame({"metric": ["rand"]})
    assert reported_papers([], none) == [published]
    assert reported_papers(["heterogeneity"], none) == ["heterogeneity"]
    assert reported_papers(["heterogeneity"], cell) == ["heterogeneity", published]
    assert reported_papers([published], none) == [published]
    own = {"topic": "Data (x)", "ours": "a", "paper": "b", "effect": "c"}
    other = {**study, "report": {"paper_checks": ["heterogeneity"], "departures": [own]}}
    topics = [d.topic for d in departures(other, pd.DataFrame(), none)]
    assert "Methods not in 000" not in topics and not any(t.startswith("Dataset") for t in topics), topics
    assert topics[-2:] == ["PF1 / GF1 definition", "Data (x)"]  # the generic ones and the study's own stay
    topics = [d.topic for d in departures({**study, "report": {"paper_checks": []}}, pd.DataFrame(), none)]
    assert topics[0] == "Dataset (digits)" and "Methods not in 000" in topics
    for checks, shown in (([], True), (["heterogeneity"], False)):
        write_front_page(pd.DataFrame(), none, pd.DataFrame(), {**study, "report": {"paper_checks": checks}}, tmp_path)
        assert ("Paper check (000" in (tmp_path / "front_page.rst").read_text()) is shown, checks


def test_published_variants_are_labelled_in_tables(tmp_path):
    specs = []
    for algorithm in ("ocfl-aff", "ocfl-aff-published"):
        spec, _ = write_synthetic_run(tmp_path, split=SPLITS[0], clients=CLIENTS, algorithm=algorithm, rounds=4)
        evaluate_run(spec.run_dir, spec.manifest, spec.eval_dir)
        specs.append(spec)
    out = tmp_path / "report"
    build_report(specs, out)
    assert "ocfl-aff-published †" in (out / "tables" / "table1_clustering.md").read_text()
    assert "ocfl-aff-published †" in (out / "tables" / "headline.md").read_text()
    cmp = pd.read_csv(out / "tables" / "paper_vs_run.csv")
    published = cmp[cmp["algorithm"] == "ocfl-aff-published"]
    assert len(published) and set(published["paper_algorithm"]) == {"ocfl-aff"}
    assert published["note"].str.contains("published bug reproduced").all()
    assert published["published_variant"].all() and not cmp[cmp["algorithm"] == "ocfl-aff"]["published_variant"].any()
    front = (out / "front_page.rst").read_text()
    assert "ocfl-aff-published (published bug reproduced)" in front
    assert "[published substituted]" in front  # the twin pair ran: tau also with the paper's own variant


def test_temperature_bands_are_grouped_by_algorithm(study):
    from cflcore.report.build import temperature_bands
    from cflcore.report.runs import load_runs

    loaded, _ = load_runs(study["specs"])
    bands = temperature_bands(loaded)
    assert set(bands) == {f"n={CLIENTS} · ocfl-km", f"n={CLIENTS} · bcl"}
    assert len(bands[f"n={CLIENTS} · ocfl-km"]) == 3  # 2 splits × 2 seeds, one failed
    assert len(bands[f"n={CLIENTS} · bcl"]) == 4
    assert sorted(c.label for c in bands[f"n={CLIENTS} · bcl"]) == ["s0", "s0", "s1", "s1"]
    assert list((study["out"] / "figures" / "temperature_mean").glob("mnist5k.png"))


def test_fig2_reference_agrees_with_the_papers_text():
    from cflcore.report.papers.ocfl_000 import paper_f1_text_claims, paper_fig2

    fig2, claims = paper_fig2(), paper_f1_text_claims()
    assert len(fig2) == 280 and fig2[["pf1", "gf1", "pf1_final", "gf1_final"]].notna().all().all()
    printed = {("mnist", 15, "nonoverlap-balanced", "bnc"): (0.302475, 0.286148),  # Notebook III cell 8 output
               ("mnist", 15, "nonoverlap-balanced", "ocfl-km"): (0.955202, 0.177630),
               ("bloodmnist", 30, "overlap-imbalanced", "ocfl-hdb"): (0.426148, 0.243896)}
    indexed = fig2.set_index(["dataset", "clients", "split", "algorithm"])
    for key, (pf1, gf1) in printed.items():
        assert indexed.loc[key, "pf1"] == pytest.approx(pf1, abs=1e-6) and indexed.loc[key, "gf1"] == pytest.approx(gf1, abs=1e-6)
    for _, claim in claims.iterrows():  # each range end of §4.6.1 lies within the per-run values
        runs = fig2[(fig2["dataset"] == claim["dataset"]) & fig2["algorithm"].isin(claim["algorithms"].split(";"))]
        assert runs[claim["metric"]].min() - 0.02 <= claim["value"] <= runs[claim["metric"]].max() + 0.02, claim["claim"]
        assert "line 402" in claim["source"]


def html_tables(html: str) -> dict[str, list[dict[str, str]]]:
    """The captioned tables of an HTML page: {caption: [{column header: cell text}, ...]} (stdlib parser)."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.text, self.row, self.header, self.caption = {}, None, None, None, None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.caption, self.header, self.rows = None, None, []
            elif tag in ("caption", "th", "td"):
                self.text = ""
            elif tag == "tr":
                self.row = []

        def handle_data(self, data):
            if self.text is not None:
                self.text += data

        def handle_endtag(self, tag):
            if tag == "caption":
                self.caption, self.text = self.text.strip(), None
            elif tag in ("th", "td"):
                self.row.append(self.text.strip())
                self.text = None
            elif tag == "tr":
                if self.header is None:
                    self.header = self.row
                else:
                    self.rows.append(dict(zip(self.header, self.row)))
            elif tag == "table" and self.caption:
                self.tables[self.caption] = self.rows

    parser = Tables()
    parser.feed(html)
    return parser.tables


def assert_headline_table_holds_the_known_values(html: str, study) -> None:
    """The HTML holds the Headline table (caption 'mnist5k, 15 clients') with the values the synthetic study was
    built to give: ocfl-km on NB clusters at rounds 2 and 3 of 6 (ARI mean (4/6 + 3/6)/2 ± std, 1-based clustering
    round 3.5 ± 0.7), bcl never clusters (ARI 0, round –), and the failed and never-run seeds are counted."""
    tables = html_tables(html)
    assert f"mnist5k, {CLIENTS} clients" in tables, sorted(tables)
    rows = {(r["split"], r["method"]): r for r in tables[f"mnist5k, {CLIENTS} clients"]}
    assert set(rows) == {(f"{split} ({abbr})", method) for split, abbr in zip(SPLITS, ("NB", "OI"))
                         for method in ("ocfl-km", "bcl")}
    finals, _ = zip(*(_final_and_mean_pf1(study["raw"][f"mnist5k/{SPLITS[0]}/n{CLIENTS}/s{s}/ocfl-km"]["history"])
                      for s in (0, 1)))
    ocfl = rows[(f"{SPLITS[0]} (NB)", "ocfl-km")]
    assert ocfl == {**ocfl, "ARI final": "1.00 ± 0.00 (2 of 2 ≥ 0.9)",  # k of n seeds beside every ARI (issue 58)
                    "ARI mean": f"{(4 / 6 + 3 / 6) / 2:.2f} ± {np.std([4 / 6, 3 / 6], ddof=1):.2f} (0 of 2 ≥ 0.9)",
                    "clustering round": "3.5 ± 0.7", "seeds": "2",
                    "PF1 final": f"{np.mean(finals):.2f} ± {np.std(finals, ddof=1):.2f}"}
    assert ocfl["ARI mean"] == "0.58 ± 0.12 (0 of 2 ≥ 0.9)"
    bcl = rows[(f"{SPLITS[0]} (NB)", "bcl")]
    assert bcl == {**bcl, "ARI final": "0.00 ± 0.00 (0 of 2 ≥ 0.9)", "ARI mean": "0.00 ± 0.00 (0 of 2 ≥ 0.9)",
                   "clustering round": "–",
                   "seeds": "2 (1 missing)"}
    one_seed = rows[(f"{SPLITS[1]} (OI)", "ocfl-km")]  # seed 1 failed: seed 0 alone, clustered at round 2 (1-based 3)
    assert one_seed == {**one_seed, "ARI mean": f"{4 / 6:.2f} (0 of 1 ≥ 0.9)", "ARI final": "1.00 (1 of 1 ≥ 0.9)",
                        "clustering round": "3.0",
                        "seeds": "1 (1 missing)"}


def test_workflow_rst_includes_the_front_page(study):
    """Render report/workflow.rst as Snakemake does (Jinja, then docutils) against the study's results."""
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    repo = Path(__file__).resolve().parents[2]
    template = (repo / "report" / "workflow.rst").read_text() + "\n.. _headline.csv: javascript:void(0)\n"
    config = {"results_dir": str(study["root"]), "study": {"datasets": ["mnist5k"], "splits": SPLITS,
                                                           "clients": [CLIENTS], "seeds": [0, 1], "algorithms": ["ocfl-km", "bcl"]}}
    env = Environment(trim_blocks=True, lstrip_blocks=True)
    files = [SimpleNamespace(name="headline.csv", target="headline.csv")]
    rst = env.from_string(template).render(snakemake=SimpleNamespace(config=config), categories={}, files=files)
    html = publish_parts(rst, writer_name="html", settings_overrides={"halt_level": 2})["html_body"]
    assert "Headline" in html and "Paper check" in html and "Departures by design" in html
    assert_headline_table_holds_the_known_values(html, study)
    missing = env.from_string(template).render(snakemake=SimpleNamespace(config=config), categories={}, files=[])
    assert ".. include::" not in missing and "not there yet" in missing


def test_a_studys_own_departures_join_the_table():
    """report.departures (002's and 004's configs): each row is listed after the computed ones, as written."""
    import cflcore.config as cc
    from cflcore.report.front_page import departures, front_page_context

    repo = Path(__file__).resolve().parents[2]
    for name, paper in (("louvain-002-offline.yaml", "(002)"), ("fedgwc-004-offline.yaml", "(004)")):
        cfg = cc.load_config(repo / "config" / "config.yaml", repo / "config" / name)  # validated, sweeps expanded
        context = {**front_page_context(cfg), "datasets": {}}  # no results here: skip the computed per-dataset rows
        items = departures(context, pd.DataFrame(), pd.DataFrame())
        own = [d for d in items if d.topic.endswith(paper)]
        assert len(own) == len(cfg["report"]["departures"]) >= 4, name
        assert items[-len(own):] == own and all(d.ours and d.paper and d.effect for d in own)


def test_a_departure_without_its_effect_is_refused():
    import cflcore.config as cc

    repo = Path(__file__).resolve().parents[2]
    bad = {"report": {"departures": [{"topic": "Data", "ours": "MNIST", "paper": "CIFAR-10"}]}}
    with pytest.raises(cc.ConfigError, match=r"report\.departures.*effect"):
        cc.load_config(repo / "config" / "config.yaml", overrides=bad)
