"""OCFL (000 Algorithm 1): trigger semantics, one-shot clustering, diagnostics, checkpointing, schema."""
import io
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import adjusted_rand_score

from synthetic_clusters import planted_deltas, planted_labels, round_updates
from cflcore.clustering.graph import leiden_available
from cflcore.strategies.base import StrategyContext, build_strategy
from cflcore.strategies.ocfl import trigger_fires

SIZES = [5, 5, 5]


def first_fire(temps, window=1, strict=True):
    """The first round at which the production trigger (``trigger_fires``) fires on this temperature history."""
    for t in range(len(temps)):
        if trigger_fires(list(temps[: t + 1]), window, strict):
            return t
    return None


def algorithm1_first_fire(temps, strict=True):
    """Literal Algorithm 1 of 000, l. 6 and 17–20 (strict: the authors' code)."""
    t_prev, t_cur = math.inf, None
    for t, value in enumerate(temps):
        if t_cur is not None:
            t_prev = t_cur
        t_cur = value
        if (t_cur > t_prev) if strict else (t_cur >= t_prev):
            return t
    return None


def test_fall_then_rise_fires_at_the_rise():
    assert first_fire([0.9, 0.7, 0.5, 0.6, 0.8]) == 3


def test_steady_rise_fires_at_round_one():
    assert first_fire([0.1, 0.2, 0.3]) == 1


def test_round_zero_never_fires():
    assert first_fire([0.5]) is None and first_fire([0.5], strict=False) is None


def test_strict_differs_from_nonstrict_on_a_plateau():
    temps = [0.5, 0.5, 0.5, 0.4]
    assert first_fire(temps, strict=True) is None
    assert first_fire(temps, strict=False) == 1


def test_moving_average_window_postpones():
    temps = [0.9, 0.5, 0.6, 0.4, 0.3, 0.5, 0.7]
    assert first_fire(temps, window=1) == 2
    # window 3: averages defined from round 2: 0.667, 0.5, 0.433, 0.4, 0.5 → first rise at round 6
    assert first_fire(temps, window=3) == 6


@pytest.mark.parametrize("min_round,expected", [(0, 1), (1, 1), (2, 2), (3, 3)])
def test_min_round_postpones_the_clustering_round_of_aggregate(min_round, expected):
    """``min_round`` through ``OCFL.aggregate``: on a temperature that rises every round (one cluster of updates
    whose spread grows), the strict trigger would fire at round 1 (round 0 never fires); with ``min_round`` m it
    fires at exactly max(m, 1), and not a round earlier or later."""
    strategy = make({"clusterer": "kmeans", "min_round": min_round})
    results = [strategy.aggregate(round_updates(r, planted_deltas([15], 300, seed=300 + r, noise=noise)))
               for r, noise in enumerate([0.05, 0.2, 0.4, 0.8, 1.6])]
    temps = [res.diagnostics["temperature_p"] for res in results if "temperature_p" in res.diagnostics]
    assert temps == sorted(temps) and len(set(temps)) == len(temps)  # strictly rising while recorded
    assert [res.diagnostics["clustered"] for res in results] == [r >= expected for r in range(5)]
    assert strategy.clustering_round == expected and "n_found" in results[expected].diagnostics


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=12), st.booleans())
def test_window_one_is_algorithm_1(temps, strict):
    assert first_fire(temps, window=1, strict=strict) == algorithm1_first_fire(temps, strict)


# ----- the strategy end to end on synthetic rounds ----------------------------------------------------
def make(variant, n=15, n_true=3, participation=1.0):
    strategy = build_strategy({"method": "ocfl", **variant})
    strategy.setup(StrategyContext(n_clients=n, n_params=300, seed=7, device=torch.device("cpu"),
                                   participation=participation, n_true_clusters=n_true))
    return strategy


def aligned_deltas(rnd, noise=0.05):
    """Everyone moves the same way: Γ ≈ 0 (the early, converging phase)."""
    return planted_deltas([15], 300, seed=100 + rnd, noise=noise)


def diverged_deltas(rnd):
    return planted_deltas(SIZES, 300, seed=200 + rnd, noise=0.3)


@pytest.mark.parametrize("clusterer", ["kmeans", "affinity", "meanshift", "hdbscan", "louvain", pytest.param(
    "leiden", marks=pytest.mark.skipif(not leiden_available(), reason="no Leiden backend: pip install -e '.[leiden]'"))])
def test_ocfl_clusters_once_at_the_rise_and_recovers_planted(clusterer):
    strategy = make({"clusterer": clusterer})
    rounds = [aligned_deltas(0, 0.1), aligned_deltas(1, 0.02), diverged_deltas(2), diverged_deltas(3), aligned_deltas(4)]
    results = [strategy.aggregate(round_updates(r, d)) for r, d in enumerate(rounds)]
    temps = [res.diagnostics.get("temperature_p") for res in results]
    assert temps[1] < temps[0] < temps[2]  # a fall, then the rise
    assert [res.diagnostics["clustered"] for res in results] == [False, False, True, True, True]
    assert results[2].divergence.shape == (15, 15)
    assert "temperature_p" not in results[3].diagnostics  # recorded only until clustering
    labels = results[2].assignment.labels
    assert adjusted_rand_score(planted_labels(SIZES), labels) == 1.0
    assert np.array_equal(results[4].assignment.labels, labels)  # one-shot: fixed afterwards
    assert set(results[2].inherit.values()) == {0}  # every new cluster starts from the global model
    assert strategy.clustering_round == 2


def test_ocfl_never_clusters_on_falling_temperature():
    strategy = make({"clusterer": "kmeans"})
    noises = [0.9, 0.6, 0.3, 0.1]
    for r, noise in enumerate(noises):
        res = strategy.aggregate(round_updates(r, planted_deltas([15], 300, seed=1, noise=noise)))
        assert res.diagnostics["clustered"] is False and res.assignment.n_clusters == 1
        assert np.isfinite(res.diagnostics["temperature_p"])


def test_ocfl_all_zero_deltas_do_not_produce_nan():
    strategy = make({"clusterer": "hdbscan", "trigger": "nonstrict"})
    for r in range(2):
        res = strategy.aggregate(round_updates(r, torch.zeros(15, 300)))
        assert res.diagnostics["temperature_p"] == 0.0 and np.all(np.isfinite(res.divergence))
    assert res.diagnostics["clustered"] is True and res.assignment.n_clusters == 1  # fired on the plateau: one cluster


def test_ocfl_partial_participation_keeps_unsampled_in_old_cohort():
    strategy = make({"clusterer": "kmeans", "k": 3}, n=18)
    sampled = np.arange(15)
    strategy.aggregate(round_updates(0, aligned_deltas(0, 0.01), clients=sampled, n_clients=18))
    res = strategy.aggregate(round_updates(1, diverged_deltas(1), clients=sampled, n_clients=18))
    assert res.diagnostics["clustered"] is True
    assert res.assignment.labels[15:].tolist() == [0, 0, 0]
    assert adjusted_rand_score(planted_labels(SIZES), res.assignment.labels[:15]) == 1.0


def test_ocfl_state_dict_round_trip_through_torch_load():
    strategy = make({"clusterer": "kmeans", "window": 2})
    for r in range(3):
        strategy.aggregate(round_updates(r, aligned_deltas(r, 0.1 / (r + 1)) if r < 2 else diverged_deltas(r)))
    buf = io.BytesIO()
    torch.save(strategy.state_dict(), buf)
    buf.seek(0)
    restored = make({"clusterer": "kmeans", "window": 2})
    restored.load_state_dict(torch.load(buf, weights_only=True))
    assert restored.temperatures == strategy.temperatures
    assert restored.clustered == strategy.clustered and restored.clustering_round == strategy.clustering_round
    for r in range(3, 6):
        d = diverged_deltas(r)
        a, b = strategy.aggregate(round_updates(r, d)), restored.aggregate(round_updates(r, d))
        assert np.array_equal(a.assignment.labels, b.assignment.labels) and a.diagnostics == b.diagnostics
