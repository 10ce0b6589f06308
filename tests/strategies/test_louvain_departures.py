"""002's departures from its authors' code as options of Louvain CFL: eq. 2's product per weight array
or per module, Louvain's node order fixed per run or re-seeded per round, and the authors' silhouette beside
sklearn's (Late's start is tested in tests/strategies/test_louvain_late.py)."""
import numpy as np
import pytest
import torch
from torch import nn

from cflcore.fl.flat_params import ModelLayout
from cflcore.metrics import silhouette_authors_from_distances, silhouette_from_distances
from cflcore.strategies import build_strategy
from cflcore.strategies.base import StrategyContext
from cflcore.strategies.louvain import trusted_distance_matrix
from test_strategies import CPU, TRUTH, louvain_round


def test_array_sizes_split_a_modules_weight_and_bias():
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
    layout = ModelLayout.of(model)
    assert layout.layer_sizes(False, False) == (18 + 2, 2 + 2, 24 + 3)
    assert layout.array_sizes(False, False) == (18, 2, 2, 2, 24, 3)
    assert sum(layout.array_sizes(True, False)) == sum(layout.layer_sizes(True, False))  # buffers in the delta
    assert layout.array_sizes(False, True) == (18, 2, 24, 3)  # local batch-norm: its arrays are not shared


def make(params, ctx_sizes=True):
    strategy = build_strategy({"method": "louvain", **params})
    strategy.setup(StrategyContext(n_clients=15, n_params=300, seed=3, device=CPU,
                                   layer_sizes=(100, 200) if ctx_sizes else None,
                                   array_sizes=(60, 40, 150, 50) if ctx_sizes else None))
    return strategy


def test_eq2_product_takes_one_factor_per_array_by_default():
    default, module = make({}), make({"eq2_product": "module"})
    assert [s.stop - s.start for s in default.layers] == [60, 40, 150, 50]
    assert [s.stop - s.start for s in module.layers] == [100, 200]
    assert [s.stop - s.start for s in make({"layer_sizes": [300]}).layers] == [300]  # explicit sizes win
    models = torch.randn(4, 300, generator=torch.Generator().manual_seed(0))
    more = trusted_distance_matrix(models, default.layers)
    fewer = trusted_distance_matrix(models, module.layers)
    assert np.all(more[~np.eye(4, dtype=bool)] > fewer[~np.eye(4, dtype=bool)])  # more factors, larger products


def test_louvain_order_fixed_reuses_one_seed_and_per_round_reseeds(monkeypatch):
    from cflcore.strategies import louvain

    seeds, real = {}, louvain.community_labels
    for order in ("fixed", "per-round"):
        used = []
        monkeypatch.setattr(louvain, "community_labels",
                            lambda sim, res, seed, used=used: used.append(seed) or real(sim, res, seed))
        strategy = make({"louvain_order": order})
        for rnd in range(3):
            strategy.aggregate(louvain_round(rnd, labels=TRUTH))
        seeds[order] = used
    assert make({}).params["louvain_order"] == "fixed"
    assert len(set(seeds["fixed"])) == 1 and len(set(seeds["per-round"])) == 3


def test_authors_silhouette_counts_the_node_in_a_and_scores_singletons_one():
    d = np.array([[0, 1, 4, 4, 9], [1, 0, 4, 4, 9], [4, 4, 0, 1, 9], [4, 4, 1, 0, 9], [9, 9, 9, 9, 0]], dtype=float)
    labels = [0, 0, 1, 1, 2]
    # a = (0 + 1) / 2 = 0.5 for the four paired nodes, b = 4 (nearest other cluster by its medoid): s = 0.875; the
    # singleton: a = 0, s = 1
    assert silhouette_authors_from_distances(d, labels) == pytest.approx((4 * 0.875 + 1.0) / 5)
    assert silhouette_from_distances(d, labels) == pytest.approx((4 * 0.75 + 0.0) / 5)  # sklearn: singletons 0
    assert silhouette_authors_from_distances(d, [0] * 5) == 0.0  # one community: the authors' 0
