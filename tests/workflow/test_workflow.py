"""The Snakemake workflow end to end: planning, the data stage, a tiny study through the report."""
import json

import pandas as pd
import subprocess
from pathlib import Path

from conftest import snakemake_cmd


def run_sm(cwd, *args, check=True, timeout=900):
    p = subprocess.run(snakemake_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-6000:]}")
    return p


def planned_jobs(stdout: str) -> dict[str, int]:
    """Parse the 'Job stats' table of a dry run into {rule: count}."""
    counts: dict[str, int] = {}
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("job") and "count" in line:
            for row in lines[i + 2:]:
                parts = row.split()
                if len(parts) != 2 or not parts[1].isdigit():
                    break
                if parts[0] != "total":
                    counts[parts[0]] = int(parts[1])
            break
    return counts


def test_dry_run_default_config_plans_the_whole_study(workflow_dir):
    p = run_sm(workflow_dir, "-n", "--cores", "2", "--quiet", "rules")
    jobs = planned_jobs(p.stdout + p.stderr)
    assert jobs.get("prepare_dataset") == 1
    assert jobs.get("split") == 4
    # 10 methods x 4 splits, plus ocfl-hdb-late on the 2 non-overlapping splits (its `splits:` list)
    assert jobs.get("train") == 42
    # one evaluate job per run: its scores and the what-if replay (every run records its matrices)
    assert jobs.get("evaluate") == 42 and "train_evaluate" not in jobs
    assert jobs.get("explain") == 42
    assert jobs.get("evaluate_late_clients") == 2
    assert jobs.get("report") == 1


def test_data_stage_runs_and_is_cached(workflow_dir):
    target = "results/splits/digits/nonoverlap-balanced/n6/s0/manifest.json"
    run_sm(workflow_dir, target, "--cores", "2", "--configfile", "config/tiny.yaml")
    manifest = json.loads((Path(workflow_dir) / target).read_text())
    assert manifest["n_clusters"] == 3
    assert (Path(workflow_dir) / "results/data/digits.parquet").exists()
    assert (Path(workflow_dir) / "results/logs/split/digits/nonoverlap-balanced/n6/s0.log").exists()
    assert (Path(workflow_dir) / "results/benchmarks/split/digits/nonoverlap-balanced/n6/s0.tsv").exists()
    p = run_sm(workflow_dir, target, "-n", "--cores", "2", "--configfile", "config/tiny.yaml")
    assert "Nothing to be done" in p.stdout + p.stderr


def test_bad_config_stops_before_any_job(workflow_dir):
    bad = Path(workflow_dir) / "config" / "bad.yaml"
    bad.write_text("study: {datasets: [nosuchset], splits: [nonoverlap-balanced], clients: [6], seeds: [0]}\n")
    p = run_sm(workflow_dir, "-n", "--cores", "1", "--configfile", str(bad), check=False)
    assert p.returncode != 0
    assert "nosuchset" in p.stdout + p.stderr
    assert not (Path(workflow_dir) / "results").exists()


def test_tiny_study_through_report_and_html(workflow_dir):
    """digits, 6 clients, 3 rounds, three methods: data -> report, then the HTML report."""
    wd = Path(workflow_dir)
    run_sm(workflow_dir, "--cores", "2", "--configfile", "config/tiny.yaml")
    index = json.loads((wd / "results/report/index.json").read_text())
    assert index["n_missing"] == 0 and index["n_loaded"] == 3
    tables = wd / "results/report/tables"
    for t in ("table1_clustering", "table2_clustering_round", "table_personalisation", "paper_vs_run"):
        assert "\\begin{tabular}" in (tables / f"{t}.tex").read_text(), t
        assert "| algorithm" in (tables / f"{t}.md").read_text() or "| method" in (tables / f"{t}.md").read_text(), t
    # the headline: one row per run of the tiny study, each trained once; BNC never clusters, the two
    # OCFL variants recover the 3 planted clusters of digits NB (as in tests/workflow/test_end_to_end.py on MNIST)
    headline = pd.read_csv(tables / "headline.csv").set_index("algorithm")
    assert sorted(headline.index) == ["bnc", "ocfl-hdb", "ocfl-km"]
    assert (headline["n_seeds"] == 1).all() and (headline["n_missing"] == 0).all()
    assert headline.loc["bnc", "ari_final_mean"] == 0.0 and headline.loc["bnc", "n_clustered"] == 0
    assert (headline.loc[["ocfl-km", "ocfl-hdb"], "ari_final_mean"] == 1.0).all()
    # at a glance: the OCFL variants share the best final ARI (1.00, both marked); BNC's single cluster is not
    glance = pd.read_csv(tables / "at_a_glance.csv").set_index("algorithm")
    assert glance["ari_final_best"].to_dict() == {"bnc": False, "ocfl-km": True, "ocfl-hdb": True}
    assert glance["pf1_final_best"].sum() >= 1
    by_rule = pd.read_csv(tables / "benchmarks_by_rule.csv").set_index("rule")
    assert by_rule.loc["train", "jobs"] == 3 and by_rule.loc["all jobs", "jobs"] == by_rule.drop("all jobs")["jobs"].sum()
    # the report is written in parts, one job each (rules/report.smk), then gathered
    assert {"report_tables", "report_figures", "report_whatif", "report_late_clients", "report_explain",
            "report"} <= set(by_rule.index)
    for kind in ("learning_gap", "temperature_mean", "temperature_runs", "clustering_progress", "n_clusters",
                 "saliency_grid", "insdel_box", "cd"):
        pngs = list((wd / "results/report/figures" / kind).glob("*.png"))
        assert pngs and all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in pngs), kind
    run_sm(workflow_dir, "--cores", "1", "--configfile", "config/tiny.yaml", "--report", "results/report.html")
    html = (wd / "results/report.html").read_text(errors="replace")
    assert html.lstrip().lower().startswith("<!doctype html")
    for name in ("bnc", "ocfl-km", "ocfl-hdb", "benchmarks_by_rule", "critical_path"):
        assert name in html, name
    # the landing page is the front page (report/workflow.rst includes front_page.rst), not the rule graph
    assert "Headline" in html and "Paper check" in html
    assert "At a glance" in html and html.index("At a glance") < html.index("Headline")
    # figures and tables carry labels to filter by (report() labels=, cflcore/report/labels.py)
    assert '"labels": {"dataset": "digits", "clients": 6}' in html  # e.g. figures/clustering_progress/digits_n6.png
    assert '"labels": {"dataset": "digits", "split": "nonoverlap-balanced", "clients": 6, "seed": 0}' in html
    # a rerun with no change plans nothing
    p = run_sm(workflow_dir, "-n", "--cores", "2", "--configfile", "config/tiny.yaml")
    assert "Nothing to be done" in p.stdout + p.stderr
