"""Divergence, temperature and the OCFL clusterers on synthetic deltas with a planted partition."""
import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cosine as scipy_cosine
from sklearn.metrics import adjusted_rand_score

from cflcore.clustering.clusterers import (CLUSTERERS, SKLEARN_ALLOWLIST, ClusteringInput, assign_noise_to_nearest,
                                           build_clusterer, run_clusterer)
from cflcore.clustering.divergence import cosine_divergence_matrix, max_divergence_constant, temperature
from cflcore.clustering import graph as graph_module
from cflcore.clustering.graph import community_labels, leiden_available, leiden_backend
from cflcore.clustering.partition import consecutive_labels, inherit_by_overlap, match_cluster_ids
from synthetic_clusters import planted_deltas, planted_labels
from cflcore.errors import ConfigError
from cflcore.strategies._common import divergence_numpy
from cflcore.strategies.ocfl import OneShotClustering

SIZES = [3, 7, 5]  # the imbalanced 15-client split of 000 (20 % / 47 % / 33 %)
# Leiden runs where leidenalg (the `leiden` extra, part of the `test` extra) or a networkx backend is installed;
# elsewhere its tests are skipped with this reason, visible in `pytest -rs`.
NEEDS_LEIDEN = pytest.mark.skipif(not leiden_available(), reason="no Leiden backend: pip install -e '.[leiden]'")


@pytest.fixture(scope="module")
def planted():
    deltas = planted_deltas(SIZES, 400, seed=0, noise=0.5)
    return deltas, divergence_numpy(deltas), planted_labels(SIZES)


# ----- divergence and temperature ------------------------------------------------------------------
def test_divergence_matches_scipy_pairwise_cosine():
    x = torch.randn(6, 50, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gamma = cosine_divergence_matrix(x, "float64")
    ref = np.array([[0.0 if i == j else scipy_cosine(x[i].numpy(), x[j].numpy()) for j in range(6)] for i in range(6)])
    np.testing.assert_allclose(gamma, ref, atol=1e-12)
    g32 = cosine_divergence_matrix(x.float(), "float32")
    assert g32.dtype == np.float32  # Γ keeps the run's precision (OCFL clusters the float32 Γ)
    g32 = g32.astype(np.float64)
    np.testing.assert_allclose(g32, ref, atol=1e-5)
    assert np.array_equal(g32, g32.T) and np.all(np.diag(g32) == 0)


def test_divergence_float64_precision_on_float32_input_is_chunk_exact():
    x = torch.randn(4, 3000, generator=torch.Generator().manual_seed(2))
    a = cosine_divergence_matrix(x, "float64")
    b = cosine_divergence_matrix(x.double(), "float64")
    assert a.dtype == np.float64
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-13)


def test_divergence_zero_deltas_are_defined():
    x = torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [-2.0, 0.0]])
    gamma = cosine_divergence_matrix(x)
    assert np.all(np.isfinite(gamma))
    assert gamma[0, 1] == 0.0  # two zero updates: identical
    assert gamma[0, 2] == 1.0 and gamma[1, 3] == 1.0  # zero vs non-zero: orthogonal
    assert gamma[2, 3] == pytest.approx(2.0)  # opposite: the clamp's upper end
    assert temperature(cosine_divergence_matrix(torch.zeros(5, 3))) == 0.0


def test_temperature_on_hand_computed_matrix():
    gamma = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 0.5], [2.0, 0.5, 0.0]])
    # p = 2: ‖Γ‖ = sqrt(2·(1 + 4 + 0.25)) = sqrt(10.5), λ = sqrt(3·2·2²) = sqrt(24)
    assert temperature(gamma, 2) == pytest.approx(math.sqrt(10.5) / math.sqrt(24.0), rel=1e-12)
    # p = 1: ‖Γ‖ = 7, λ = 3·2·2 = 12
    assert temperature(gamma, 1) == pytest.approx(7.0 / 12.0, rel=1e-12)
    assert max_divergence_constant(3, 2) == pytest.approx(math.sqrt(24.0))
    assert temperature(2.0 * (1 - np.eye(4)), 2) == pytest.approx(1.0)  # maximal divergence → T = 1
    assert temperature(np.zeros((1, 1))) == 0.0


# ----- clusterers -----------------------------------------------------------------------------------
RECOVERING = [
    {"clusterer": "kmeans"},
    {"clusterer": "kmeans", "k": 3, "features": "deltas"},
    {"clusterer": "affinity"},
    {"clusterer": "meanshift"},
    {"clusterer": "hdbscan"},
    {"clusterer": "hdbscan", "backend": "hdbscan"},
    {"clusterer": "hdbscan", "noise": "nearest"},
    {"clusterer": "louvain"},
    pytest.param({"clusterer": "leiden"}, marks=NEEDS_LEIDEN, id="leiden-"),
    {"clusterer": "sklearn", "estimator": "SpectralClustering", "clusterer_params": {"n_clusters": 3, "affinity": "precomputed"}},
    {"clusterer": "sklearn", "estimator": "AgglomerativeClustering",
     "clusterer_params": {"n_clusters": None, "distance_threshold": 0.5, "metric": "precomputed", "linkage": "average"}},
    {"clusterer": "sklearn", "estimator": "DBSCAN", "clusterer_params": {"eps": 0.3, "min_samples": 2, "metric": "precomputed"}},
    {"clusterer": "sklearn", "estimator": "Birch", "clusterer_params": {"n_clusters": 3}},
]


@pytest.mark.parametrize("params", RECOVERING, ids=lambda p: p["clusterer"] + "-" + str(p.get("estimator", p.get("backend", p.get("features", "")))))
def test_clusterer_recovers_planted_partition(planted, params):
    deltas, gamma, truth = planted
    labels = run_clusterer(build_clusterer(params), ClusteringInput(gamma, deltas, seed=0, n_true_clusters=3))
    assert adjusted_rand_score(truth, labels) == 1.0


def test_hdbscan_min_samples_pinned_keeps_small_cluster(planted):
    """docs/architecture.md §6: the hdbscan package's default min_samples = min_cluster_size merges the 3-client cluster."""
    deltas, gamma, truth = planted
    data = ClusteringInput(gamma, deltas, seed=0)
    pinned = run_clusterer(build_clusterer({"clusterer": "hdbscan", "backend": "hdbscan"}), data)
    package_default = run_clusterer(build_clusterer({"clusterer": "hdbscan", "backend": "hdbscan", "min_samples": 3}), data)
    assert adjusted_rand_score(truth, pinned) == 1.0
    assert adjusted_rand_score(truth, package_default) < 1.0


def test_affinity_distance_variant_is_the_published_bug(planted):
    deltas, gamma, truth = planted
    data = ClusteringInput(gamma, deltas, seed=0)
    right = run_clusterer(build_clusterer({"clusterer": "affinity"}), data)
    buggy = run_clusterer(build_clusterer({"clusterer": "affinity", "affinity_input": "distance"}), data)
    assert adjusted_rand_score(truth, right) == 1.0
    assert adjusted_rand_score(truth, buggy) < 0.9


@pytest.mark.parametrize("name", [pytest.param(n, marks=NEEDS_LEIDEN) if n == "leiden" else n for n in CLUSTERERS.names()])
def test_degenerate_inputs_give_one_cluster(name):
    extra = {"estimator": "KMeans", "clusterer_params": {"n_clusters": 3}} if name == "sklearn" else {}
    clusterer = build_clusterer({"clusterer": name, **extra})
    for deltas in (torch.zeros(6, 20), torch.ones(6, 20), torch.ones(1, 20)):
        labels = run_clusterer(clusterer, ClusteringInput(divergence_numpy(deltas), deltas, seed=0, n_true_clusters=3))
        assert labels.tolist() == [0] * deltas.shape[0]


def test_kmeans_k_is_clipped_to_distinct_points():
    deltas = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    labels = run_clusterer(build_clusterer({"clusterer": "kmeans", "k": 5}), ClusteringInput(divergence_numpy(deltas), deltas))
    assert labels.tolist() == [0, 0, 1]


def test_kmeans_oracle_without_truth_is_an_error(planted):
    deltas, gamma, _ = planted
    with pytest.raises(Exception, match="oracle"):
        run_clusterer(build_clusterer({"clusterer": "kmeans"}), ClusteringInput(gamma, deltas, n_true_clusters=None))


def test_noise_nearest_assignment():
    gamma = np.array([[0, .1, .9, .5], [.1, 0, .9, .6], [.9, .9, 0, .2], [.5, .6, .2, 0]], dtype=float)
    assert assign_noise_to_nearest(np.array([0, 0, 1, -1]), gamma).tolist() == [0, 0, 1, 1]
    assert assign_noise_to_nearest(np.array([-1, -1, -1, -1]), gamma).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("name", ["sklearn.cluster.KMeans", "os.system", "GaussianMixture", "builtins.eval"])
def test_sklearn_allowlist_refuses_other_names(name):
    with pytest.raises(ConfigError) as err:
        OneShotClustering.check_params({"clusterer": "sklearn", "estimator": name, "clusterer_params": {}}, "algorithms.x")
    msg = str(err.value)
    assert "algorithms.x.estimator" in msg and "AgglomerativeClustering" in msg and "\n" not in msg
    assert len(SKLEARN_ALLOWLIST) >= 7


def test_sklearn_clusterer_params_must_exist():
    with pytest.raises(ConfigError, match=r"algorithms\.x\.clusterer_params\.bogus"):
        OneShotClustering.check_params({"clusterer": "sklearn", "estimator": "DBSCAN", "clusterer_params": {"bogus": 1}}, "algorithms.x")
    OneShotClustering.check_params({"clusterer": "sklearn", "estimator": "DBSCAN", "clusterer_params": {"eps": 0.2}}, "algorithms.x")


def test_features_refused_for_precomputed_clusterers():
    with pytest.raises(ConfigError, match=r"algorithms\.x\.features"):
        OneShotClustering.check_params({"clusterer": "hdbscan", "features": "deltas"}, "algorithms.x")


def test_leiden_is_refused_without_backend(monkeypatch):
    """With neither leidenalg nor a networkx backend (simulated), config validation refuses `leiden` naming the fix."""
    monkeypatch.setattr(graph_module, "_leidenalg_importable", lambda: False)
    monkeypatch.setattr(graph_module, "_networkx_leiden_backend", lambda: False)
    assert leiden_backend() is None
    with pytest.raises(ConfigError, match=r"algorithms\.ocfl-leiden\.clusterer: 'leiden' is not available.*\[leiden\]"):
        OneShotClustering.check_params({"clusterer": "leiden"}, "algorithms.ocfl-leiden")
    with pytest.raises(ConfigError, match="leiden"):
        community_labels(1.0 - np.eye(3), 1.0, 0, "leiden")


def planted_partition_graph(sizes, p_in, p_out, seed):
    """Similarity matrix of a stochastic block model: weight 1 inside a block with probability p_in, across with p_out."""
    import networkx as nx

    g = nx.stochastic_block_model(sizes, [[p_in if i == j else p_out for j in range(len(sizes))] for i in range(len(sizes))],
                                  seed=seed)
    return nx.to_numpy_array(g, nodelist=range(sum(sizes)))


@NEEDS_LEIDEN
def test_leiden_recovers_a_planted_partition_and_follows_002_resolution():
    """Leiden for real on a planted-partition graph (4 blocks of 12, dense inside, sparse across): it recovers the
    blocks, is seeded, and its resolution follows 002's convention like louvain (higher = fewer communities)."""
    sizes = [12, 12, 12, 12]
    sim = planted_partition_graph(sizes, 0.8, 0.05, seed=3)
    truth = planted_labels(sizes)
    labels = community_labels(sim, 1.0, seed=5, algorithm="leiden")
    assert adjusted_rand_score(truth, labels) == 1.0
    assert np.array_equal(labels, community_labels(sim, 1.0, seed=5, algorithm="leiden"))  # seeded
    # two super-blocks (pairs of blocks 0.6 apart, 0.95 across): a high resolution merges the pairs, a low one splits
    groups = np.repeat(np.arange(4), 4)
    gamma = np.where(groups[:, None] == groups[None, :], 0.0, np.where(groups[:, None] // 2 == groups[None, :] // 2, 0.6, 0.95))
    np.fill_diagonal(gamma, 0.0)
    counts = {r: len(np.unique(run_clusterer(build_clusterer({"clusterer": "leiden", "resolution": r}),
                                             ClusteringInput(gamma, None, 0, None)))) for r in (0.3, 3.0)}
    assert counts[0.3] > counts[3.0], counts
    OneShotClustering.check_params({"clusterer": "leiden"}, "algorithms.ocfl-leiden")  # accepted where it runs


@pytest.mark.skipif(leiden_backend() != "leidenalg", reason="leidenalg not installed: pip install -e '.[leiden]'")
def test_leidenalg_adapter_optimises_networkx_modularity_at_the_same_gamma():
    """The leidenalg adapter maximises the same objective as networkx's modularity with γ = 1/resolution: its
    partition's networkx modularity is at least Louvain's, at two resolutions."""
    import networkx as nx

    sim = planted_partition_graph([10, 14, 8], 0.5, 0.1, seed=11)
    graph = graph_module.similarity_graph(sim)
    for resolution in (0.5, 2.0):
        gamma = graph_module.networkx_resolution(resolution)
        leiden = graph_module.leidenalg_communities(graph, gamma, seed=0)
        louvain = nx.community.louvain_communities(graph, weight="weight", resolution=gamma, seed=0)
        q = {name: nx.community.modularity(graph, parts, weight="weight", resolution=gamma)
             for name, parts in (("leiden", leiden), ("louvain", louvain))}
        assert q["leiden"] >= q["louvain"] - 1e-9, (resolution, q)


# ----- partition helpers ----------------------------------------------------------------------------
def test_partition_helpers():
    assert consecutive_labels(np.array([7, 7, -1, 3, 7])).tolist() == [0, 0, 1, 2, 0]
    prev = np.array([0, 0, 0, 1, 1, 1])
    new = np.array([5, 5, 6, 6, 6, 7])
    assert inherit_by_overlap(prev, new) == {5: 0, 6: 1, 7: 1}
    ids, nxt = match_cluster_ids(prev, [np.array([3, 4, 5]), np.array([0, 1]), np.array([2])], next_id=2)
    assert ids.tolist() == [1, 0, 2] and nxt == 3


def test_louvain_clusterer_resolution_follows_002():
    """OCFL's louvain clusterer shares the Louvain CFL strategy's convention (002 §IV-B): a higher
    resolution gives fewer, larger communities (networkx's own parameter runs the other way)."""
    from cflcore.clustering.clusterers import ClusteringInput, build_clusterer, run_clusterer

    groups = np.repeat(np.arange(4), 4)
    gamma = np.where(groups[:, None] == groups[None, :], 0.0, np.where(groups[:, None] // 2 == groups[None, :] // 2, 0.6, 0.95))
    np.fill_diagonal(gamma, 0.0)
    counts = {r: len(np.unique(run_clusterer(build_clusterer({"clusterer": "louvain", "resolution": r}),
                                             ClusteringInput(gamma, None, 0, None)))) for r in (0.3, 3.0)}
    assert counts[0.3] > counts[3.0], counts


def test_divergence_from_a_torch_gram_equals_the_numpy_one_bit_for_bit():
    """The engine hands a torch Gram matrix, the what-if replay a numpy one read from gram.parquet: both
    give the same Γ and T, in the Gram matrix's own precision."""
    from cflcore.clustering.divergence import cosine_divergence_from_gram, gram_matrix

    x = torch.randn(7, 300, generator=torch.Generator().manual_seed(3))
    x[2] = 0.0
    for precision in ("float32", "float64"):
        g = gram_matrix(x, precision)
        a, b = cosine_divergence_from_gram(g), cosine_divergence_from_gram(g.numpy())
        assert a.dtype == b.dtype == g.numpy().dtype
        assert np.array_equal(a, b) and temperature(a) == temperature(b)
