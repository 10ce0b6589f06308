"""The aggregate report built from a synthetic set of run files (cflcore.report.build_report)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cflcore.io import write_json
from cflcore.report import build_report, evaluate_run, run_specs_from_config
from cflcore.report import figures as fg
from cflcore.report.paper import paper_split, paper_table1, paper_table2
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
    assert {"table1_clustering", "table2_clustering_round", "table_personalisation", "paper_vs_run", "learning_gap",
            "temperature_mean", "temperature_runs", "clustering_progress", "n_clusters", "missing_runs"} <= kinds
    for entry in index["files"]:
        path = study["out"] / entry["path"]
        assert path.stat().st_size > 0, path
        if entry["format"] == "png":
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if entry["format"] == "pdf":
            assert path.read_bytes()[:5] == b"%PDF-"
    repo = Path(__file__).resolve().parents[1]
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


def test_run_specs_from_config_paths():
    cfg = {"results_dir": "res", "study": {"datasets": ["mnist5k"], "splits": ["a"], "clients": [15], "seeds": [0, 1],
                                           "algorithms": ["ocfl-km", "bcl"]}}
    specs = run_specs_from_config(cfg)
    assert len(specs) == 4
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
    for name, fig in {"band": fg.temperature_band_figure(curves, "t"), "runs": fg.temperature_runs_figure(curves, "t"),
                      "gap": fg.learning_gap_figure(personal, "t"), "ari": fg.score_progress_figure(curves, "t"),
                      "k": fg.n_clusters_figure(curves, "t")}.items():
        png, pdf = fg.save_figure(fig, tmp_path / name)
        assert png.stat().st_size > 1000 and pdf.read_bytes()[:5] == b"%PDF-"

