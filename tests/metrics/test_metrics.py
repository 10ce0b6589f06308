"""Metric functions on small hand-computed cases (cflcore.metrics)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import wasserstein_distance
from sklearn.metrics import davies_bouldin_score, silhouette_score

from cflcore.errors import DataError
from cflcore import metrics as M

TRUE = [0, 0, 1, 1]


def test_identical_partitions_score_one_under_relabelling():
    scores = M.external_scores(TRUE, [5, 5, 2, 2])
    assert scores == pytest.approx({k: 1.0 for k in M.EXTERNAL_SCORES})


def test_rand_and_adjusted_rand_hand_computed():
    # pairs: (0,3) and (1,2) agree (different/different); the other 4 disagree -> RI = 2/6
    assert M.rand_index(TRUE, [0, 1, 0, 1]) == pytest.approx(1 / 3)
    # contingency all ones: index 0, expected (2*2)/6, max 2 -> ARI = (0 - 2/3) / (2 - 2/3)
    assert M.adjusted_rand(TRUE, [0, 1, 0, 1]) == pytest.approx(-0.5)


def test_homogeneity_completeness_and_the_published_com_swap():
    singletons = [0, 1, 2, 3]
    assert M.homogeneity(TRUE, singletons) == pytest.approx(1.0)
    assert M.completeness(TRUE, singletons) == pytest.approx(math.log(2) / math.log(4))  # 1 - H(K|C)/H(K)
    assert M.v_measure(TRUE, singletons) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    # the published COM is completeness_score(pred, true), i.e. homogeneity(true, pred)
    assert M.published_com(TRUE, singletons) == pytest.approx(M.homogeneity(TRUE, singletons))
    assert M.published_com(TRUE, singletons) != pytest.approx(M.completeness(TRUE, singletons))
    one = [0, 0, 0, 0]
    assert M.homogeneity(TRUE, one) == pytest.approx(0.0) and M.completeness(TRUE, one) == pytest.approx(1.0)
    assert M.published_com(TRUE, one) == pytest.approx(0.0)
    assert M.adjusted_mutual_info(TRUE, one) == pytest.approx(0.0)


def test_label_length_mismatch_is_a_data_error():
    with pytest.raises(DataError, match="4 clients but predicted has 3"):
        M.adjusted_rand(TRUE, [0, 1, 1])


def test_silhouette_from_gram_hand_computed_on_a_line():
    x = np.array([[0.0], [1.0], [10.0], [11.0]])
    # a = 1 for every point; b = 10.5, 9.5, 9.5, 10.5
    expected = np.mean([(10.5 - 1) / 10.5, (9.5 - 1) / 9.5, (9.5 - 1) / 9.5, (10.5 - 1) / 10.5])
    assert M.silhouette_from_gram(x @ x.T, [0, 0, 1, 1]) == pytest.approx(expected)
    # DB: s1 = s2 = 0.5, centroid distance 10 -> 0.1
    assert M.davies_bouldin_from_gram(x @ x.T, [0, 0, 1, 1]) == pytest.approx(0.1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gram_scores_equal_sklearn_on_explicit_vectors(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(11, 7)) + np.repeat(rng.normal(scale=3, size=(3, 7)), [4, 4, 3], axis=0)
    labels = np.array([0] * 4 + [1] * 4 + [2] * 3)
    gram = x @ x.T
    assert M.silhouette_from_gram(gram, labels) == pytest.approx(silhouette_score(x, labels), abs=1e-9)
    assert M.davies_bouldin_from_gram(gram, labels) == pytest.approx(davies_bouldin_score(x, labels), abs=1e-9)
    assert M.distances_from_gram(gram) == pytest.approx(np.linalg.norm(x[:, None] - x[None], axis=2), abs=1e-6)


def test_internal_scores_undefined_for_one_cluster_or_all_singletons():
    x = np.random.default_rng(0).normal(size=(4, 3))
    for labels in ([0, 0, 0, 0], [0, 1, 2, 3]):
        assert M.silhouette_from_gram(x @ x.T, labels) is None
        assert M.davies_bouldin_from_gram(x @ x.T, labels) is None
    bad = x @ x.T
    bad[0, 1] = np.nan
    assert M.silhouette_from_gram(bad, [0, 0, 1, 1]) is None


def test_sorted_frequency_wasserstein_hand_cases_and_scipy_for_p1():
    assert M.sorted_frequency_wasserstein([0.5, 0.3, 0.2], [0.2, 0.5, 0.3]) == pytest.approx(0.0)
    # sorted [1, 0] vs [0.5, 0.5]: sqrt((0.25 + 0.25) / 2)
    assert M.sorted_frequency_wasserstein([1.0, 0.0], [0.5, 0.5]) == pytest.approx(0.5)
    rng = np.random.default_rng(3)
    for _ in range(5):
        x, y = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
        assert M.sorted_frequency_wasserstein(x, y, p=1) == pytest.approx(wasserstein_distance(x, y))
    with pytest.raises(DataError, match="equal size"):
        M.sorted_frequency_wasserstein([1.0], [0.5, 0.5])


HISTOGRAMS = [[10, 0, 0], [0, 10, 0], [5, 5, 0], [0, 5, 5]]  # ranked: [1,0,0] x2, [.5,.5,0] x2


def test_was_is_silhouette_under_the_sorted_frequency_distance():
    distance = M.wasserstein_distance_matrix(M.class_frequencies(HISTOGRAMS))
    between = math.sqrt((0.25 + 0.25) / 3)
    assert distance == pytest.approx(np.array([[0, 0, between, between], [0, 0, between, between],
                                               [between, between, 0, 0], [between, between, 0, 0]]))
    assert M.wasserstein_silhouette(HISTOGRAMS, [0, 0, 1, 1]) == pytest.approx(1.0)   # a = 0, b = between
    # client 0 with client 2: a = between; other cluster {1, 3}: b = (0 + between) / 2 -> s = -1/2 for all
    assert M.wasserstein_silhouette(HISTOGRAMS, [0, 1, 0, 1]) == pytest.approx(-0.5)
    # the plain (unsorted) Euclidean silhouette of the same partition is lower: the ranking matters
    plain = silhouette_score(M.class_frequencies(HISTOGRAMS), [0, 0, 1, 1])
    assert plain < 0.5
    # eq. 7's 1/C factor differs from eq. 38 by a constant: silhouette unchanged
    assert silhouette_score(distance * math.sqrt(3), [0, 0, 1, 1], metric="precomputed") == pytest.approx(1.0)


def test_wadb_hand_computed():
    # ranked: [1,0], [.75,.25] | [.5,.5], [.6,.4]; s1 = .125*sqrt2, s2 = .05*sqrt2, centroid gap .325*sqrt2
    histograms = [[4, 0], [1, 3], [2, 2], [2, 3]]
    assert M.wasserstein_davies_bouldin(histograms, [0, 0, 1, 1]) == pytest.approx(0.175 / 0.325)
    assert M.wasserstein_davies_bouldin(histograms, [0, 0, 0, 0]) is None
    assert M.wasserstein_silhouette(histograms, [0, 0, 0, 0]) is None


def test_class_frequencies_rejects_empty_clients():
    with pytest.raises(DataError, match=r"label_histograms\[1\]"):
        M.class_frequencies([[1, 2], [0, 0]])


def test_personalisation_scores_hand_computed():
    history = pd.DataFrame({
        "round": [0, 0, 1, 1], "local_f1": [0.8, 0.6, None, 1.0], "orch_f1": [0.4, 0.2, None, 0.3],
        "local_bacc": [0.5, 0.5, None, 0.8], "orch_bacc": [0.1, 0.1, None, 0.4],
    })
    scores = M.personalisation_scores(history)
    assert scores.pf1 == pytest.approx(0.8) and scores.gf1 == pytest.approx(0.3)
    assert scores.learning_gap == pytest.approx(0.5) and scores.n_evaluations == 3
    assert scores.local_bacc == pytest.approx(0.6) and scores.orch_bacc == pytest.approx(0.2)
    assert math.isnan(scores.local_acc)  # column absent -> NaN, not an error
    by_round = M.personalisation_by_round(history)
    assert by_round["pf1"].tolist() == pytest.approx([0.7, 1.0])
    with pytest.raises(DataError, match="orch_f1"):
        M.personalisation_scores(history.drop(columns=["orch_f1"]))


def test_balanced_accuracy_weighted_by_test_size_hand_computed():
    """004 App. F: client balanced accuracies averaged with weights = local test-set sizes."""
    history = pd.DataFrame({
        "round": [0, 0, 1, 1], "client": [0, 1, 0, 1], "local_f1": [0.8, 0.6, None, 1.0], "orch_f1": [0.4, 0.2, None, 0.3],
        "local_bacc": [0.5, 0.9, None, 0.7], "orch_bacc": [0.1, 0.1, None, 0.4],
    })
    scores = M.personalisation_scores(history, test_sizes=[10, 30])
    assert scores.local_bacc == pytest.approx(0.7)  # unweighted, unchanged
    assert scores.local_bacc_weighted == pytest.approx((10 * 0.5 + 30 * 0.9 + 30 * 0.7) / 70)
    by_round = M.personalisation_by_round(history, test_sizes=[10, 30])
    assert by_round["local_bacc_weighted"].tolist() == pytest.approx([(5 + 27) / 40, 0.7])
    assert math.isnan(M.personalisation_scores(history).local_bacc_weighted)  # no sizes -> NaN
    assert M.size_weighted_bacc(history, [1, 1]) == pytest.approx(0.7)  # equal sizes -> the plain mean
    with pytest.raises(DataError, match="test sizes"):
        M.personalisation_scores(history, test_sizes=[10])
