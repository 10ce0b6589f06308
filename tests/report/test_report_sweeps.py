"""Sweep tables and figures, per-round seed envelopes, and the claims of the paper checks, on planted values."""
import numpy as np
import pandas as pd
import pytest

from cflcore.report.papers import base as cl
from cflcore.report.papers import louvain_002 as c002
from cflcore.report import sweeps as sw


def planted_runs(seeds=(0, 1), step: float = 0.01) -> pd.DataFrame:
    """002's grid with planted final scores: ARI rises with m_k and is best at resolution 1.0, accuracy falls with
    m_k, resolution inert on accuracy, fewer clusters and a higher silhouette at a higher resolution; a small seed
    jitter gives every cell a seed envelope."""
    rows = []
    for seed in seeds:
        j = step * seed
        for m in (0.1, 0.4, 0.7, 1.0):
            for r in (0.5, 1.0, 2.0):
                rows.append({"dataset": "d", "clients": 10, "split": f"mk@majority_share={m}", "seed": seed,
                             "algorithm": f"louvain-fig3@resolution={r}", "algorithm_base": "louvain-fig3",
                             "split_base": "mk", "majority_share": m, "resolution": r,
                             "ari": m * (1.0 - 0.1 * abs(np.log2(r))) + j, "orch_acc": 0.9 - 0.3 * m + 0.001 * r,
                             "silhouette_method": 0.2 + 0.5 * m + 0.05 * np.log2(r) + j,
                             "n_clusters": {0.5: 4.0, 1.0: 2.0, 2.0: 1.0}[r] + 10 * j})
        for a, ari, sil, acc in (("avg", 0.95, 0.3, 0.795), ("late", 0.97, 0.35, 0.8), ("1nn", 0.9, 0.7, 0.8),
                                 ("wnn", 0.6, 0.6, 0.76)):
            for p in (1.0, 0.5):
                half_ari = {"1nn": 0.1, "wnn": 0.5}.get(a, 1.0)
                rows.append({"dataset": "d", "clients": 10, "split": "maj", "seed": seed,
                             "algorithm": f"louvain-fig4@attribution={a},participation={p}", "algorithm_base": "louvain-fig4",
                             "split_base": "maj", "attribution": a, "engine.participation": p,
                             "ari": ari * (1.0 if p == 1.0 else half_ari) + j, "orch_acc": acc * (1.0 if p == 1.0 else 0.9) + j,
                             "silhouette_method": sil + j, "local_acc": 0.9 + j, "global_acc": 0.6 + j,
                             "global_orch_acc": {"avg": 0.7, "1nn": 0.65}.get(a, 0.6) + j, "n_clusters": 2.0})
        rows.append({"dataset": "d", "clients": 10, "split": "maj", "seed": seed, "algorithm": "ifca",
                     "algorithm_base": "ifca", "split_base": "maj", "ari": 0.2 + j, "orch_acc": 0.5 + j, "n_clusters": 2.0})
    return pd.DataFrame(rows)


def planted_rounds(level: float = 0.5, slope: float = 0.0) -> pd.DataFrame:
    """AVG's per-round silhouette at 100 %: ``level`` + ``slope`` · round, ± 0.02 between the two seeds."""
    name = "louvain-fig4@attribution=avg,participation=1.0"
    return pd.DataFrame([{"dataset": "d", "clients": 10, "split": "maj", "seed": s, "algorithm": name, "round": r,
                          "silhouette_method": level + slope * r + (0.02 if s else -0.02) + 0.001 * (r % 2)}
                         for s in (0, 1) for r in range(20)])


def test_sweep_table_has_mean_std_and_seed_count_per_combination():
    runs = planted_runs()
    groups = {(k["algorithm_base"], k["split_base"]): f for k, f, _ in sw.sweeps(runs, {"algorithms": {
        "x": {"base": "louvain-fig3", "factors": {"resolution": 1.0}, "labels": {}},
        "y": {"base": "louvain-fig4", "factors": {"attribution": "avg", "engine.participation": 1.0}, "labels": {}}},
        "splits": {"z": {"base": "mk", "factors": {"majority_share": 0.1}, "labels": {}}}})}
    assert groups[("louvain-fig3", "mk")] == ["resolution", "majority_share"]
    assert groups[("louvain-fig4", "maj")] == ["attribution", "engine.participation"]
    assert ("ifca", "maj") not in groups
    fig3 = runs[runs["algorithm_base"] == "louvain-fig3"]
    table = sw.sweep_table(fig3, ["resolution", "majority_share"])
    assert len(table) == 12 and set(table["n_seeds"]) == {2}
    cell = table[(table["resolution"] == 1.0) & (table["majority_share"] == 0.7)].iloc[0]
    assert cell["ari_mean"] == pytest.approx(0.705) and cell["ari_std"] == pytest.approx(np.std([0.7, 0.71], ddof=1))
    # numeric factors are ordered ascending
    assert table["resolution"].tolist()[:4] == [0.5, 0.5, 0.5, 0.5]


def test_sweep_figures_one_factor_line_two_factor_heatmaps():
    runs = planted_runs()
    fig3 = runs[runs["algorithm_base"] == "louvain-fig3"]
    one = sw.sweep_figure(sw.sweep_table(fig3[fig3["resolution"] == 1.0], ["majority_share"]), ["majority_share"], "t")
    axes = [ax for ax in one.get_axes() if ax.get_visible()]
    assert len(axes) == 4  # orch_acc, ari, silhouette_method, n_clusters
    line = axes[1].get_lines()[0]
    assert np.allclose(line.get_xdata(), [0.1, 0.4, 0.7, 1.0]) and np.allclose(line.get_ydata(), [0.105, 0.405, 0.705, 1.005])
    assert len(axes[1].collections) == 1  # the ± std band
    two = sw.sweep_figure(sw.sweep_table(fig3, ["resolution", "majority_share"]), ["resolution", "majority_share"], "t")
    images = [ax.get_images()[0] for ax in two.get_axes() if ax.get_images()]
    assert len(images) == 4 and images[1].get_array().shape == (3, 4)


def test_sweep_figures_wrap_into_a_grid_that_reads_at_page_width(tmp_path):
    """Panels wrap into rows of at most three (six heatmaps in one row were 3,635 px wide); the saved PNG of a
    two-factor sweep with a third factor faceted stays under 1,700 px wide and its cell labels at 9 pt."""
    from PIL import Image

    from cflcore.report.figures import save_figure

    runs = planted_runs()
    fig4 = runs[runs["algorithm_base"] == "louvain-fig4"]
    factors = ["attribution", "engine.participation"]
    fig = sw.sweep_figure(sw.sweep_table(fig4, factors), factors, "t")
    heatmaps = [ax for ax in fig.get_axes() if ax.get_images()]
    columns = {round(ax.get_position().x0, 3) for ax in heatmaps}
    assert len(heatmaps) > sw.GRID_COLUMNS and len(columns) <= sw.GRID_COLUMNS
    assert {t.get_fontsize() for ax in heatmaps for t in ax.texts} == {9}
    png = [p for p in save_figure(fig, tmp_path / "sweep") if p.suffix == ".png"][0]
    width, height = Image.open(png).size
    assert width <= 1700, (width, height)
    fig3 = runs[runs["algorithm_base"] == "louvain-fig3"]  # 3 resolutions × 4 m_k per heatmap
    factors = ["resolution", "majority_share"]
    png = [p for p in save_figure(sw.sweep_figure(sw.sweep_table(fig3, factors), factors, "t"), tmp_path / "fig3")
           if p.suffix == ".png"][0]
    assert Image.open(png).size[0] <= 1800, Image.open(png).size


def test_round_envelope_draws_mean_and_band_per_algorithm():
    rounds = pd.DataFrame([{"dataset": "d", "clients": 3, "split": "s", "seed": s, "algorithm": a, "round": r,
                            "ari": r * 0.1 + s * 0.02 + (0.5 if a == "b" else 0.0)}
                           for s in (0, 1, 2) for a in ("a", "b") for r in range(5)])
    fig = sw.round_envelope_figure(rounds, ["a", "b"], "t")
    ax = fig.get_axes()[0]
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["a", "b"]
    assert np.allclose(lines[0].get_ydata(), np.arange(5) * 0.1 + 0.02)
    assert lines[0].get_color() != lines[1].get_color() and len(ax.collections) == 2
    styles = sw.series_styles(14)
    assert len({(tuple(s["color"]), s["linestyle"]) for s in styles}) == 14


def test_002_half_participation_check_fails_at_the_offline_proxys_old_value():
    runs = planted_runs(seeds=range(9), step=0.002)  # every seed one offset: the floored t-test decides
    half_1nn = (runs["attribution"] == "1nn") & (runs["engine.participation"] == 0.5)
    runs.loc[half_1nn, "ari"] = 0.80  # the co-sampled graph's ARI on 002's offline study: not "close to 0"
    table = cl.check_claims(["002"], cl.ClaimData(runs)).set_index("claim_id")
    assert table.loc["002-half-1nn", "holds"] == "contradicted" and "≤ 0.3" in table.loc["002-half-1nn", "note"]


def test_fig2_convergence_normalised_against_raw_distances():
    """Distances whose two-mode shape is fixed from round 3 on while their scale keeps growing: the normalised
    similarities settle at round 3, the raw ones keep moving (002 Fig. 2); with shape and scale fixed both have settled."""
    truth = np.repeat([0, 1], 4)
    rng = np.random.default_rng(0)

    def frame(scale_growth: float, settles: int = 3) -> pd.DataFrame:
        rows = []
        for r in range(10):
            shape = np.where(truth[:, None] == truth[None, :], 1.0, 3.0 if r >= settles else 1.5)
            d = shape * (1 + scale_growth * r) + 0.01 * rng.random((8, 8))
            d = (d + d.T) / 2
            rows += [{"round": r, "i": i, "j": k, "value": 0.0 if i == k else float(d[i, k])} for i in range(8) for k in range(8)]
        return pd.DataFrame(rows)
    growing = c002.similarity_convergence(frame(0.5))
    assert growing["normalised"] < growing["raw"]
    fixed = c002.similarity_convergence(frame(0.0, settles=0))  # shape and scale fixed: both settled from round 0
    assert fixed["normalised"] < 0.05 and fixed["raw"] < 0.05


def planted_004(gwc_rand: float = 1.0) -> pd.DataFrame:
    rows = []
    for seed in range(18):  # constant offsets: the floored t-test decides; 18 seeds: the Rand level's share can hold
        def add(base, split, seed=seed, **values):
            rows.append({"dataset": "d", "clients": 30, "seed": seed, "algorithm": base, "algorithm_base": base,
                         "split": split, "split_base": split, **values})
        for split in ("domains-noise", "domains-blur"):
            add("fedgwc", split, rand=gwc_rand, n_clusters=2.0)
            for k, acc in ((2, 0.7), (3, 0.6)):  # k 2 has the best accuracy, so its Rand is the one compared
                add("ifca", split, k=k, rand=0.5 if k == 2 else 0.99, local_bacc=acc)
                add("fesem", split, k=k, rand=0.55 if k == 2 else 0.99, local_bacc=acc)
        add("fedgwc", "mix-3", was=0.4)
        add("ifca", "mix-3", k=3, was=-0.2, local_bacc=0.6)
        add("fesem", "mix-3", k=3, was=0.1, local_bacc=0.6)
        for b, acc in ((0.1, 0.80), (0.5, 0.82), (2.0, 0.81)):
            add("fedgwc-beta", "dirichlet-hard", beta=b, local_bacc=acc, n_clusters=2.0)
        for split, alpha, gwc, avg in (("dirichlet-hard", 0.05, 0.85, 0.60), ("dirichlet-soft", 1.0, 0.90, 0.88)):
            add("fedgwc", split, local_bacc=gwc, split_alpha=alpha)
            add("fedavg", split, local_bacc=avg, split_alpha=alpha)
            add("fedgwc-fedavgm", split, local_bacc=gwc + 0.01, split_alpha=alpha)
            add("fedavgm", split, local_bacc=avg + 0.01, split_alpha=alpha)
    return pd.DataFrame(rows)


def planted_004_data(runs: pd.DataFrame, first_split: int = 5, rounds: int = 20) -> "cl.ClaimData":
    """ClaimData with run summaries (first_clustering_round) and a per-round frame (the number of rounds)."""
    keys = ["dataset", "clients", "split", "seed", "algorithm"]
    ids = runs[keys].drop_duplicates()
    summaries = ids.assign(first_clustering_round=float(first_split))
    per_round = ids.merge(pd.DataFrame({"round": range(rounds)}), how="cross")
    return cl.ClaimData(runs, rounds=per_round, summaries=summaries)


def test_004_claims_hold_on_planted_values_and_fail_when_fedgwc_does_not_separate():
    table = cl.check_claims(["004"], planted_004_data(planted_004())).set_index("claim_id")
    for claim_id in ("004-domains", "004-domains-baselines", "004-was", "004-beta", "004-heterogeneity", "004-aggregators"):
        assert table.loc[claim_id, "holds"] == "holds", (claim_id, table.loc[claim_id, "ours"])
    assert "d: dirichlet-hard (α 0.05) 25.0 points" in table.loc["004-heterogeneity", "ours"]
    assert "cifar100 (dirichlet alpha=0.5): FedGWC − FedAvg +11.8 points" in table.loc["004-heterogeneity", "ours"]
    assert "ifca 0.50 (k 2, best accuracy)" in table.loc["004-domains-baselines", "ours"]  # not k 3's Rand 0.99
    assert "Table 4 cifar100 domains (50,50,0): 1.0 ± 0.0" in table.loc["004-domains", "ours"]
    late = cl.check_claims(["004"], planted_004_data(planted_004(), first_split=15)).set_index("claim_id")
    assert late.loc["004-beta", "holds"] == "n/a"  # splits at round 15 of 20 test nothing about clustered models
    table = cl.check_claims(["004"], cl.ClaimData(planted_004(gwc_rand=0.52))).set_index("claim_id")
    assert table.loc["004-domains", "holds"] == "contradicted" and table.loc["004-domains-baselines", "holds"] == "contradicted"


def test_superclass_claim_and_figure_say_when_louvain_finds_the_classes(tmp_path):
    """A superclass-like split ({0, 6} vs {1, 7}): a run whose final partition is the four majority classes fails
    002-superclass with "found the majority classes", and its distances are drawn ordered by group."""
    from types import SimpleNamespace

    from sklearn.metrics import adjusted_rand_score

    groups, classes = [0, 1, 0, 1, 0, 1, 0, 1], [0, 1, 6, 7, 0, 1, 6, 7]
    manifest = {"class_sets": [[0, 6], [1, 7]], "cluster_of_client": groups, "majority_class_of_client": classes}
    loaded, rows = [], []
    for seed in (0, 1):
        run_dir = tmp_path / f"s{seed}"
        run_dir.mkdir()
        found = [c + 10 for c in classes]  # one community per majority class
        pd.DataFrame({"round": 4, "client": range(8), "cluster": found}).to_parquet(run_dir / "history.parquet")
        d = np.array([[0.0 if a == b else 1.0 if ca == cb else 3.0 for b, cb in enumerate(classes)] for a, ca in enumerate(classes)])
        pd.DataFrame([{"round": 4, "i": i, "j": j, "value": d[i, j]} for i in range(8) for j in range(8)]).to_parquet(
            run_dir / "divergence.parquet")
        spec = SimpleNamespace(dataset="d", clients=8, split="superclass", seed=seed, algorithm="louvain-superclass@attribution=1nn",
                               run_dir=run_dir)
        loaded.append(SimpleNamespace(spec=spec, manifest=manifest))
        rows.append({"dataset": "d", "clients": 8, "split": "superclass", "seed": seed, "algorithm": spec.algorithm,
                     "algorithm_base": "louvain-superclass", "split_base": "superclass", "attribution": "1nn",
                     "ari": adjusted_rand_score(groups, found), "n_clusters": 4.0})
    table = cl.check_claims(["002"], cl.ClaimData(pd.DataFrame(rows), loaded=loaded)).set_index("claim_id")
    assert table.loc["002-superclass", "holds"] == "contradicted"
    assert "found the majority classes" in table.loc["002-superclass", "note"]
    assert "vs majority classes 1.00" in table.loc["002-superclass", "ours"]
    assert list(sw.superclass_runs(loaded)) == [("d", 8, "superclass")]
    fig = sw.group_distance_figure(loaded, "t")
    panels = [ax for ax in fig.get_axes() if ax.get_images()]
    assert len(panels) == 2
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["0", "0", "6", "6", "1", "1", "7", "7"]


def _gwc_server(seed: int, mse: list[float], clusters: list[int], epsilon: float = 0.01,
                considered: list[str] | None = None, min_db: list[float] | None = None):
    from types import SimpleNamespace

    server = pd.DataFrame({"round": range(len(mse)), "min_mse": mse, "epsilon": epsilon, "n_clusters": clusters})
    if considered is not None:  # as the trace stores them: a JSON list per round
        server["db_considered"], server["min_db"] = considered, min_db
    return SimpleNamespace(spec=SimpleNamespace(split="homogeneous", algorithm="fedgwc", seed=seed), server=server)


def test_004_negative_control_needs_mse_below_epsilon_and_no_split():
    """004 Fig. 6: holds when every run reaches MSE < ε and stays one cluster; fails on a split; n/a when a run
    never reaches ε (it decided nothing)."""
    def check(*loaded):
        return cl.check_claims(["004"], cl.ClaimData(planted_004(), loaded=loaded)).set_index("claim_id").loc[
            "004-negative-control"]

    calm = [_gwc_server(s, [0.5, 0.02, 0.005, 0.004], [1, 1, 1, 1]) for s in (0, 1)]
    row = check(*calm)
    assert row["holds"] == "holds" and "s0: MSE < ε from round 3, at most 1 cluster(s)" in row["ours"]
    assert check(calm[0], _gwc_server(1, [0.5, 0.005, 0.004, 0.004], [1, 1, 2, 2]))["holds"] == "contradicted"
    assert check(calm[0], _gwc_server(1, [0.5, 0.3, 0.2, 0.1], [1, 1, 1, 1]))["holds"] == "n/a"
    assert check()["holds"] == "n/a"  # no homogeneous federation
    # with Alg. 2's decisions in the trace: counted, with their best DB; a run with none tests nothing
    traced = _gwc_server(1, [0.5, 0.005, 0.004, 0.004], [1, 1, 1, 1], considered=["[]", "[]", "[0]", "[0]"],
                         min_db=[0.2, 1.3, 1.25, 1.4])
    row = check(calm[0], traced)
    assert row["holds"] == "holds" and "s1: MSE < ε from round 2, 2 Alg. 2 decisions (best DB 1.25)" in row["ours"]
    undecided = _gwc_server(1, [0.5, 0.005, 0.004, 0.004], [1, 1, 1, 1], considered=["[]"] * 4, min_db=[0.2] * 4)
    assert check(calm[0], undecided)["holds"] == "n/a"


def test_004_cells_compare_matching_federations_and_say_what_was_not_run():
    from cflcore.report.papers.fedgwc_004 import paper004, paper004_cells

    table = paper004_cells(planted_004())
    assert len(table) == len(paper004())  # one row per printed cell
    noise = table[(table["table"] == 4) & (table["federation"] == "domains (50,50,0)") & (table["method"] == "fedgwc")].iloc[0]
    assert noise["status"] == "compared" and noise["ours"].startswith("domains-noise: 1.00 ± 0.00 (18 seeds)")
    # IFCA at the k of its best balanced accuracy (k 2: Rand 0.5), not the k with the higher Rand
    ifca = table[(table["table"] == 4) & (table["federation"] == "domains (50,50,0)") & (table["method"] == "ifca")].iloc[0]
    assert "0.50 ± 0.00 (18 seeds, k 2)" in ifca["ours"]
    # a β of Table 5 the sweep ran, and one it did not
    t5 = table[(table["table"] == 5) & (table["dataset"] == "cifar100")].set_index("beta")
    assert t5.loc[0.5, "ours"].startswith("dirichlet-hard: 82.0 ± 0.0")
    assert t5.loc[1.0, "status"].startswith("not run in this study")
    assert (table.loc[table["federation"].str.startswith("users"), "status"] ==
            "not run in this study (no such federation here)").all()
    # Table 9's personalised rows map to the engine.personalisation variants of config/fedgwc-004.yaml
    pfedme = table[(table["table"] == 9) & (table["aggregator"] == "pfedme")]
    assert len(pfedme) == 4 and pfedme["status"].str.startswith("not run in this study (pfedme not run on dirichlet-hard").sum() == 2
    assert pfedme["status"].str.startswith("not run in this study (fedgwc-pfedme not run").sum() == 2
    rows = []
    for seed in (0, 1):
        for name, acc in (("pfedme", 0.70), ("fedgwc-pfedme", 0.72), ("perfedavg", 0.60), ("fedgwc-perfedavg", 0.66)):
            rows.append({"dataset": "d", "clients": 30, "seed": seed, "algorithm": name, "algorithm_base": name,
                         "split": "dirichlet-hard", "split_base": "dirichlet-hard", "local_bacc": acc + 0.01 * seed})
    table = paper004_cells(pd.concat([planted_004(), pd.DataFrame(rows)], ignore_index=True)).set_index(
        ["table", "dataset", "method", "aggregator"])
    for method, aggregator, ours in (("pfedme", "pfedme", "70.5"), ("fedgwc", "pfedme", "72.5"),
                                     ("per-fedavg", "per-fedavg", "60.5"), ("fedgwc", "per-fedavg", "66.5")):
        cell = table.loc[(9, "cifar100", method, aggregator)]
        # the sample std (ddof 1: 0.71 points for 70 and 71), as every table (issue 58; ddof 0 read 0.5)
        assert cell["status"] == "compared" and cell["ours"] == f"dirichlet-hard: {ours} ± 0.7 (2 seeds)", (method, aggregator)
    assert table.loc[(9, "femnist", "fedgwc", "per-fedavg"), "paper"] == "72 ± 0.2"
