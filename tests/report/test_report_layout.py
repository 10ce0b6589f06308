"""The report read at a glance: distinct series styles in every figure, the method × round
heatmaps, the compact front-page table with the best per column marked, the HTML report's labels, and the
report written in parts (one Snakemake job each) gathered into one index."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from cflcore.report import figures as fg
from cflcore.report.palette import series_colors, series_styles, style_map

N = 11  # one more than tab10 holds: the default study draws 11 methods per split


def line_colours(ax) -> list[tuple]:
    """The RGBA colour of every line of ``ax`` that carries a legend label (a series, not a marker or rule)."""
    return [matplotlib.colors.to_rgba(line.get_color()) for line in ax.get_lines()
            if not str(line.get_label()).startswith("_")]


def assert_distinct(colours: list[tuple], n: int) -> None:
    assert len(colours) == n
    assert len(set(colours)) == n, colours


@pytest.mark.parametrize("n", [1, 5, 10, 11, 20, 21, 40])
def test_series_colours_are_pairwise_different(n):
    colours = series_colors(n)
    assert len(colours) == n and len(set(colours)) == n
    styles = series_styles(n)
    assert len({(s.color, s.linestyle) for s in styles}) == n


def test_palette_steps_tab10_tab20_turbo():
    tab10 = [matplotlib.colors.to_rgba(c) for c in matplotlib.colormaps["tab10"].colors]
    assert series_colors(10) == tab10
    # 11..20: the tab10 hues first (tab20's dark half equals tab10), the light half after it, dashed
    assert series_colors(11)[:10] == [matplotlib.colors.to_rgba(c) for c in matplotlib.colormaps["tab20"].colors[0::2]]
    assert [s.linestyle for s in series_styles(12)] == ["-"] * 10 + ["--"] * 2
    assert series_colors(21)[0] == matplotlib.colors.to_rgba(matplotlib.colormaps["turbo"](0.05))
    assert style_map(["b", "a", "b"]) == dict(zip(["b", "a"], series_styles(2)))


def _curves(n: int, rounds: int = 4) -> list[fg.Curve]:
    return [fg.Curve(f"m{i}", np.arange(rounds), np.linspace(0, 1, rounds) * (i + 1) / n) for i in range(n)]


def test_line_figures_give_eleven_series_eleven_colours():
    """Every figure drawing one line per series, given 11 series in one panel, draws 11 colours."""
    from cflcore.report.late_clients import late_figure
    from cflcore.report.runs import RunSpec
    from cflcore.report.traces import TracePanel, trace_figure

    fig = fg.series_figure({"p": _curves(N)}, "t", "ARI")
    assert_distinct(line_colours(fig.axes[0]), N)
    fig = fg.temperature_runs_figure({"p": _curves(N)}, "t")
    assert_distinct(line_colours(fig.axes[0]), N)
    personal = pd.DataFrame({"algorithm": "a", "split": [f"s{i}" for i in range(N)], "pf1_mean": 0.9, "gf1_mean": 0.5})
    fig = fg.learning_gap_figure(personal, "t")
    assert_distinct(line_colours(fig.axes[0]), N)
    # split traces: one colour per cluster (11 clusters), thresholds black/grey are not series of a cluster
    panel = TracePanel("t", "MSE", [fg.Curve(f"cluster {i}", np.arange(3), np.ones(3) * (i + 1)) for i in range(N)],
                       [("ε", 0.5)])
    fig = trace_figure([panel], "t")
    clusters = [matplotlib.colors.to_rgba(line.get_color()) for line in fig.axes[0].get_lines()
                if str(line.get_label()).startswith("cluster")]
    assert_distinct(clusters, N)
    # late clients: one colour per algorithm (founding solid, late dashed: two lines of one colour each)
    curves = pd.DataFrame([{"split": "x", "algorithm": f"a{i}", "round": r, "role": role, "pf1": 0.5}
                           for i in range(N) for r in range(3) for role in ("founding", "late")])
    summary = pd.DataFrame({"split": "x", "algorithm": [f"a{i}" for i in range(N)], "attach_accuracy": 1.0,
                            "join_round": 2.0})
    fig = late_figure(curves, summary, "t")
    founding = [matplotlib.colors.to_rgba(line.get_color()) for line in fig.axes[0].get_lines()
                if str(line.get_label()).endswith("founding")]
    assert_distinct(founding, N)
    assert RunSpec  # the late figure's frames are the report's tidy frames (pf1_by_round)


def test_temperature_band_draws_one_coloured_series_per_panel():
    """000 Figs. 3-4: the runs behind the band are thin grey lines (not series to tell apart); the mean is the
    panel's one coloured series."""
    fig = fg.temperature_band_figure({"p": _curves(N)}, "t")
    grey = matplotlib.colors.to_rgba("grey")
    colours = [matplotlib.colors.to_rgba(line.get_color()) for line in fig.axes[0].get_lines()]
    assert colours.count(grey) == N and len([c for c in colours if c != grey]) == 1


def _round_frame(n_algorithms: int, seeds=(0, 1)) -> pd.DataFrame:
    rows = []
    for split in ("nb", "oi"):
        for i in range(n_algorithms):
            for seed in seeds:
                for r in range(5):
                    rows.append({"split": split, "algorithm": f"m{i}", "seed": seed, "round": r,
                                 "ari": float(r >= i % 5) * (1.0 if seed == 0 else 0.5), "n_clusters": 1 + seed + (r > 2)})
    return pd.DataFrame(rows)


def test_clustering_progress_is_a_method_by_round_heatmap_per_split():
    """11 methods x 5 rounds x 2 seeds: one panel per split, a row per method, cells the mean over seeds."""
    frame = _round_frame(N)
    fig = fg.score_progress_figure(frame, "t")
    panels = [ax for ax in fig.axes if ax.get_images() and ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["nb", "oi"]
    image = panels[0].get_images()[0].get_array()
    assert image.shape == (N, 5)
    assert [t.get_text() for t in panels[0].get_yticklabels()] == [f"m{i}" for i in range(N)]
    # m3 reaches its partition at round 3 (0-based): seed 0 scores 1, seed 1 scores 0.5 -> mean 0.75
    assert image[3].tolist() == pytest.approx([0, 0, 0, 0.75, 0.75])
    assert "mean over 2 seeds" in fig._suptitle.get_text()
    texts = {t.get_text() for t in panels[0].texts}
    assert "0.75" in texts
    counts = fg.n_clusters_figure(frame, "t")
    grid = [ax for ax in counts.axes if ax.get_images() and ax.get_title()][0].get_images()[0].get_array()
    assert grid[0].tolist() == pytest.approx([1.5, 1.5, 1.5, 2.5, 2.5])  # seeds give 1 and 2 clusters, +1 after round 2
    assert "1.5" in {t.get_text() for t in counts.axes[0].texts}  # fractional means: one decimal


def test_round_scores_of_every_seed(tmp_path):
    from test_evaluate import write_synthetic_run

    from cflcore.evaluate import evaluate_run
    from cflcore.report.build import round_scores
    from cflcore.report.runs import load_runs

    specs = []
    for seed, at in ((0, 2), (1, 3)):
        spec, _ = write_synthetic_run(tmp_path, clients=6, seed=seed, rounds=5, cluster_at=at)
        evaluate_run(spec.run_dir, spec.manifest, spec.eval_dir)
        specs.append(spec)
    loaded, _ = load_runs(specs)
    frame = round_scores(loaded)
    assert sorted(frame["seed"].unique()) == [0, 1] and len(frame) == 10
    first = frame.groupby("seed").apply(lambda g: int(g.loc[g["ari"] == 1.0, "round"].min()), include_groups=False)
    assert first.to_dict() == {0: 2, 1: 3}
    assert set(frame.loc[frame["round"] < 2, "n_clusters"]) == {1.0}


# ---- the compact front-page table --------------------------------------------------------------
def _headline(rows) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "d", "clients": 6, "split": split, "algorithm": algorithm, "n_seeds": seeds,
                          "pf1_final_mean": pf1, "ari_final_mean": ari} for split, algorithm, seeds, pf1, ari in rows])


def test_glance_marks_the_best_of_each_column_ties_included():
    from cflcore.report.front_page import glance_frame, glance_table

    head = _headline([("nonoverlap-balanced", "a", 2, 0.912, 1.0), ("nonoverlap-balanced", "b", 2, 0.9149, 1.0),
                      ("nonoverlap-balanced", "c", 0, np.nan, np.nan),
                      ("overlap-imbalanced", "a", 1, 0.5, 0.2), ("overlap-imbalanced", "b", 1, 0.7, np.nan),
                      ("overlap-imbalanced", "c", 1, 0.99, 0.1)])
    glance = glance_table(head)
    best = glance.set_index(["split", "algorithm"])
    # 0.912 and 0.9149 both show as 0.91: a tie at the shown precision, both best; ARI 1.0 tied too
    assert best.loc[("nonoverlap-balanced", "a"), "pf1_final_best"] and best.loc[("nonoverlap-balanced", "b"), "pf1_final_best"]
    assert not best.loc[("nonoverlap-balanced", "c"), "pf1_final_best"]  # missing: never best
    assert best.xs("overlap-imbalanced")["pf1_final_best"].tolist() == [False, False, True]
    assert best.xs("overlap-imbalanced")["ari_final_best"].tolist() == [True, False, False]  # NaN is not best
    cells, marks = glance_frame(glance)
    assert list(cells.columns) == ["method", "NB PF1", "NB ARI", "OI PF1", "OI ARI"]
    assert cells["method"].tolist() == ["a", "b", "c"]
    assert cells["NB PF1"].tolist() == ["0.91", "0.91", "missing"] and cells["OI ARI"].tolist() == ["0.20", "–", "0.10"]
    assert marks["OI PF1"].tolist() == [False, False, True] and not marks["method"].any()


def test_glance_renders_bold_stars_in_rst():
    from docutils.core import publish_parts

    from cflcore.report.front_page import glance_rst

    head = _headline([("nonoverlap-balanced", "a", 1, 0.8, 0.5), ("nonoverlap-balanced", "b*", 1, 0.7, 0.9)])
    html = publish_parts(glance_rst(head), writer="html", settings_overrides={"halt_level": 2})["html_body"]
    assert "<strong>0.80 ▲</strong>" in html and "<strong>0.90 ▲</strong>" in html and "★</strong>" not in html
    assert "0.70" in html and "<strong>0.70" not in html
    assert "b*" in html  # escaped, not emphasis
    assert "bold and marked (▲)" in html and "At a glance: d, 6 clients" in html


# ---- labels of the HTML report --------------------------------------------------------------------
def test_figure_labels_from_file_names():
    from cflcore.report.labels import figure_labels

    study = {"datasets": ["mnist5k", "my_set"], "splits": ["nonoverlap-balanced", "maj_7"]}
    assert figure_labels("clustering_progress", "my_set_n15", study) == {"dataset": "my_set", "clients": 15}
    assert figure_labels("split_traces", "mnist5k_n15_scl", study) == {"dataset": "mnist5k", "clients": 15, "method": "scl"}
    assert figure_labels("whatif_heatmap", "my_set_maj_7_n6_s2", study) == {
        "dataset": "my_set", "split": "maj_7", "clients": 6, "seed": 2}
    assert figure_labels("saliency_grid", "explain_saliency_mnist5k_nonoverlap-balanced_n15_s0", study)["split"] == \
        "nonoverlap-balanced"
    assert figure_labels("cd", "explain_cd_out_cluster_deletion", study) == {"samples": "out-of-cluster", "metric": "deletion"}
    assert figure_labels("insdel_box", "explain_sanity", study)["plot"] == "model-randomisation sanity check"
    assert figure_labels("temperature_mean", "all_datasets", study) == {"dataset": "all datasets"}
    # every file of a kind has the same keys, its catalogue labels, even one that does not parse
    assert set(figure_labels("whatif_heatmap", "odd", study)) == {"dataset", "split", "clients", "seed"}


def test_figure_labels_are_the_catalogues_keys():
    """Each figure kind's labels are exactly the keys its catalogue entry declares, for a parsing name and not."""
    from cflcore.report import catalogue
    from cflcore.report.labels import figure_labels

    study = {"datasets": ["mnist5k"], "splits": ["iid"]}
    names = {("dataset", "split", "clients", "seed"): "mnist5k_iid_n6_s0", ("dataset",): "mnist5k",
             ("plot", "samples"): "explain_box_in_cluster", ("samples", "metric"): "explain_cd_in_cluster_ari"}
    for kind in catalogue.OUTPUTS.values():
        if kind.form != "figures":
            continue
        assert kind.labels, kind.kind
        name = names.get(kind.labels, "mnist5k_n6_rest")
        for stem in (name, "odd"):
            assert tuple(figure_labels(kind.kind, stem, study)) == kind.labels, (kind.kind, stem)


def test_every_report_output_is_registered_with_labels():
    """rules/report*.smk: every report() flag carries a category and labels (so the HTML report can filter)."""
    import re

    rules = Path(__file__).resolve().parents[2] / "rules"
    text = (rules / "report.smk").read_text() + (rules / "report_common.smk").read_text()
    bodies = []
    for m in re.finditer(r"\breport(?:_file)?\(\n", text):  # a call opening a line: the flag, not the rule
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        bodies.append(text[m.end():i])
    assert len(bodies) == 2  # tables (the benchmark tables too) and figure folders, from the catalogue
    for body in bodies:
        assert "labels=" in body and "category=" in body and "caption=" in body, body


# ---- the report in parts ----------------------------------------------------------------------------
def test_the_parts_and_their_index(tmp_path):
    """The tiny config with every run missing: each part writes its parts/<part>.json; the gathered index lists
    every file the parts wrote (and nothing else), and an unknown part is refused by name."""
    import yaml

    from cflcore import config as cc
    from cflcore import stages
    from cflcore.errors import CflError
    from cflcore.report.parts import PARTS

    repo = Path(__file__).resolve().parents[2]
    cfg = yaml.safe_load((repo / "config" / "tiny.yaml").read_text())
    cfg["results_dir"] = str(tmp_path / "results")
    plan = stages.report_plan(cc.validate_config(cfg))
    assert set(plan["benchmarks"]["jobs"]) >= {f"report_{p}" for p in PARTS}
    out = tmp_path / "report"
    for part in PARTS:
        stages.report_part(plan, part, out)
        assert json.loads((out / "parts" / f"{part}.json").read_text())["part"] == part
    index = stages.report_index(plan, out)
    assert index["n_expected"] == 3 and index["n_missing"] == 3
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    listed = {e["path"] for e in index["files"]}
    assert listed == written - {"index.json", "index.csv"} - {f"parts/{p}.json" for p in PARTS}
    assert {"tables/at_a_glance.csv", "front_page.rst", "missing_runs.csv", "tables/table_late_clients.csv",
            "tables/benchmarks_by_rule.csv"} <= listed
    # every file is of a catalogued kind, at one of the kind's paths, written by the kind's part
    from cflcore.report import catalogue

    by_part = {e["path"]: json.loads((out / "parts" / f"{p}.json").read_text())["part"]
               for p in PARTS for e in json.loads((out / "parts" / f"{p}.json").read_text())["entries"]}
    for e in index["files"]:
        kind = catalogue.OUTPUTS[e["kind"]]
        assert any(e["path"] == p or e["path"].startswith(p + "/") for p in kind.paths()), e
        assert by_part.get(e["path"], "index") == kind.part, e
        assert e["caption"] == f"report/captions/{kind.caption}.rst"
    # and every table and page of the catalogue was written, every figure folder exists
    for kind in catalogue.OUTPUTS.values():
        for p in kind.paths():
            assert (out / p).is_dir() if kind.form == "figures" else p in listed, p
    with pytest.raises(CflError, match="unknown report part 'plots'; allowed: tables, figures"):
        stages.report_part(plan, "plots", out)


def test_the_catalogues_writers_are_the_orchestrators():
    """Every writer the catalogue names is one the orchestrator runs (and no other); rule `report` writes the
    benchmark tables itself."""
    from cflcore.report import catalogue
    from cflcore.report.parts import WRITERS

    named = {o.writer for o in catalogue.OUTPUTS.values()}
    assert named == set(WRITERS) | {"benchmarks"}
    assert {o.part for o in catalogue.OUTPUTS.values()} == {p.name for p in (*catalogue.PARTS, catalogue.INDEX)}


def test_critical_path_runs_through_the_report_parts(tmp_path):
    from test_report_benchmarks import write_tsv

    from cflcore.report import benchmarks as bm

    root = tmp_path / "benchmarks"
    for rule, job, s in [("train", "d/sp/n4/s0/a", 10.0), ("evaluate", "d/sp/n4/s0/a", 1.0),
                         ("explain", "d/sp/n4/s0/a", 5.0), ("report_tables", "report_tables", 2.0),
                         ("report_explain", "report_explain", 4.0), ("report", "report", 1.0)]:
        write_tsv(root, rule, job, s)
    records, missing = bm.read_benchmarks(root, bm.discover_jobs(root))
    assert not missing
    path = bm.critical_path(records)
    assert [j.rule for j in path] == ["train", "explain", "report_explain", "report"]


def test_cflcore_has_no_import_circle():
    """Every import statement of cflcore (module level and inside functions) as a graph: no cycle. The report's
    former second-process worker (report/parallel.py <-> stages.py) was one; the report parts must not make
    another (report/parts.py -> build.py -> index.py, never back)."""
    import ast

    import networkx as nx

    root = Path(__file__).resolve().parents[2] / "cflcore"

    def name_of(path: Path) -> str:
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in root.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [module, *(f"{module}.{a.name}" for a in node.names)]
            else:
                continue
            graph.add_edges_from((name, t) for t in targets if t in modules and t != name)
    assert graph.has_edge("cflcore.report.parts", "cflcore.report.build")  # the graph sees lazy imports
    assert list(nx.simple_cycles(graph)) == []


def test_the_hardware_table_counts_the_runs_per_device_record(tmp_path):
    """tables/hardware.csv: one row per distinct status.json ``hardware`` record with its number of runs; a run
    without one reads –, never a dropped row."""
    from types import SimpleNamespace

    from cflcore.report.build import hardware_table

    def run(i, **hardware):
        path = tmp_path / f"status{i}.json"
        path.write_text(json.dumps({"status": "ok", "seconds": 1.0, "hardware": {**hardware, "chunk_size": i}}))
        return SimpleNamespace(spec=SimpleNamespace(status=path))

    xeon = dict(name="Xeon", kind="cpu", device="cpu", cpu_capability="AVX512", torch="2.14.1", cuda=None,
                trainer="LoopTrainer")
    runs = [run(0, **xeon), run(1, **xeon), run(2, **{**xeon, "cpu_capability": "AVX2"}),
            SimpleNamespace(spec=SimpleNamespace(status=None))]
    table = hardware_table(runs).set_index("cpu_capability")
    assert table["runs"].to_dict() == {"AVX2": 1, "AVX512": 2, "–": 1}  # chunk_size is no column: one row per device
    assert table.loc["AVX512", "cuda"] == "–" and table.loc["AVX512", "name"] == "Xeon"
    assert list(hardware_table([]).columns)[-1] == "runs"
