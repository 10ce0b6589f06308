"""004's FedGWC figures (cflcore.report.fedgwc_figures) drawn from a real short FedGWC run: the default
study's FedGWC settings on MNIST-5k NB (the session's ``mnist_study`` data and split) with 004's text readings
(cflcore.strategies.fedgwc.TEXT_READINGS). Under the authors' code's defaults this 15-client, ρ 0.8 study
samples 12 of 15 clients and has no candidate n for Alg. 2 (2 … ⌊15/12⌋ + 1 − 1), so it never splits; the
figures need splits."""
import json

import numpy as np
import pandas as pd
import pytest

from cflcore.report import fedgwc_figures as ff
from cflcore.strategies.fedgwc import TEXT_READINGS, affinity_matrix


@pytest.fixture(scope="module")
def gwc(mnist_study, tmp_path_factory):
    settings = mnist_study.settings("fedgwc")
    settings["algorithm"].update(TEXT_READINGS)
    run = tmp_path_factory.mktemp("fedgwc-text")
    mnist_study.train("fedgwc", run, settings)
    manifest = json.loads(mnist_study.manifest.read_text())
    return {"server": pd.read_parquet(run / "server.parquet"), "history": pd.read_parquet(run / "history.parquet"),
            "truth": np.asarray(manifest["cluster_of_client"]), "hist": np.asarray(manifest["label_histograms_train"]),
            "beta": settings["algorithm"].get("beta", 0.5)}


@pytest.mark.kernels
def test_snapshots_are_recorded_where_alg2_decided(gwc):
    server, snaps = gwc["server"], ff.matrix_snapshots(gwc["server"])
    decided_rounds = sorted({int(r) for r, c in zip(server["round"], server["db_considered"]) if json.loads(c)})
    assert decided_rounds and sorted({s.round for s in snaps if s.decided}) == decided_rounds
    for s in snaps:
        k = len(s.members)
        assert s.interaction.shape == s.affinity.shape == (k, k) and s.embedding.shape == (k, 2)
        np.testing.assert_allclose(s.affinity, affinity_matrix(s.interaction, gwc["beta"], "rows", False))
    split = ff.split_rounds(server)
    assert split and all(any(s.round == r and s.labels.max() > 0 for s in snaps) for r in split)


def test_accuracy_figure_draws_the_mean_and_marks_the_splits(gwc):
    curve = ff.accuracy_by_round(gwc["history"], "local_bacc")
    h = gwc["history"]
    assert curve["value"].iloc[-1] == pytest.approx(h.loc[h["round"] == h["round"].max(), "local_bacc"].mean())
    splits = ff.split_rounds(gwc["server"])
    fig = ff.accuracy_rounds_figure({"FedGWC": curve}, {"FedGWC": splits}, "Fig. 2")
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), curve["value"].to_numpy())
    vertical = [line for line in ax.lines[1:] if np.ptp(line.get_xdata()) == 0]
    assert sorted(float(line.get_xdata()[0]) for line in vertical) == [r + 1.0 for r in splits]


def test_matrix_and_embedding_figures_show_the_recorded_matrices(gwc):
    snap = next(s for s in ff.matrix_snapshots(gwc["server"]) if s.labels.max() > 0)
    fig = ff.matrices_figure(snap, gwc["truth"], "Fig. 8")
    order = np.argsort(gwc["truth"][snap.members], kind="stable")
    images = [ax.images[0].get_array() for ax in fig.axes if ax.images]
    np.testing.assert_allclose(images[0], snap.interaction[np.ix_(order, order)])
    np.testing.assert_allclose(images[1], snap.affinity[np.ix_(order, order)])
    points = np.concatenate([c.get_offsets() for c in fig.axes[2].collections])
    assert points.shape == (len(snap.members), 2)
    snaps = ff.matrix_snapshots(gwc["server"])
    fig3 = ff.embedding_figure(snaps, gwc["truth"], "Fig. 3")
    assert sum(ax.axison for ax in fig3.axes) == len(snaps)


def test_class_distribution_figure_bars_are_each_clusters_class_shares(gwc):
    labels = gwc["history"].loc[gwc["history"]["round"] == gwc["history"]["round"].max()].sort_values("client")["cluster"].to_numpy()
    fig = ff.class_distribution_figure(gwc["hist"], labels, "Fig. 7")
    bars = fig.axes[0].containers
    assert len(bars) == len(np.unique(labels))
    for container, c in zip(bars, np.unique(labels)):
        heights = np.array([b.get_height() for b in container])
        expected = gwc["hist"][labels == c].sum(0)
        np.testing.assert_allclose(heights, expected / expected.sum())
