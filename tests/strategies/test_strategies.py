"""SCL, BCL, Louvain CFL, FedGWC and IFCA driven directly with synthetic RoundUpdates (no engine)."""
import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score

from synthetic_clusters import planted_deltas, planted_labels, round_updates
from cflcore.config import validate_config
from cflcore.errors import ConfigError
from cflcore.strategies.base import STRATEGIES, ClusterAssignment, StrategyContext, build_strategy
from cflcore.strategies._common import divergence_numpy
from cflcore.strategies.fedgwc import fedgw_cluster, gaussian_rewards, upv_affinity
from cflcore.strategies.ifca import argmin_loss_choice
from cflcore.strategies.louvain import trusted_distance_matrix, layer_slices, wnn_weights

SIZES = [5, 5, 5]
TRUTH = planted_labels(SIZES)
CPU = torch.device("cpu")


def make(variant, n=15, n_params=300, participation=1.0, n_true=3):
    strategy = build_strategy(variant)
    strategy.setup(StrategyContext(n_clients=n, n_params=n_params, seed=3, device=CPU,
                                   participation=participation, n_true_clusters=n_true))
    return strategy


def save_load(strategy, variant, **kw):
    buf = io.BytesIO()
    torch.save(strategy.state_dict(), buf)
    buf.seek(0)
    restored = make(variant, **kw)
    restored.load_state_dict(torch.load(buf, weights_only=True))
    return restored


# ----- SCL -----------------------------------------------------------------------------------------
def scl_deltas(rnd, labels=TRUTH, n_params=300, scale=1.0):
    """Centres that cancel out (mean update ≈ 0, so ‖mean Δ‖ < ε1) while each client moves (‖Δ‖ > ε2)."""
    gen = torch.Generator().manual_seed(1000 + rnd)
    k = int(labels.max()) + 1
    centres = torch.randn(k, n_params, generator=gen, dtype=torch.float64)
    centres -= centres.mean(dim=0, keepdim=True)
    centres *= scale / torch.linalg.vector_norm(centres, dim=1, keepdim=True)
    noise = torch.randn(len(labels), n_params, generator=gen, dtype=torch.float64) * 0.02 * scale / n_params ** 0.5
    return (centres[torch.as_tensor(labels)] + noise).float()


SCL = {"method": "scl", "eps1": 0.5, "eps2": 0.8, "cooldown": 1}


def test_scl_recovers_planted_partition_by_recursive_splits():
    strategy = make(SCL)
    events = []
    for r in range(6):
        res = strategy.aggregate(round_updates(r, scl_deltas(r)))
        events += strategy.last_events
        if r < 1:
            assert res.assignment.n_clusters == 1  # cooldown 1: the first round (r = 0) never splits
    assert adjusted_rand_score(TRUTH, res.assignment.labels) == 1.0
    assert len(events) == 2  # 1 → 2 → 3
    restored = save_load(strategy, SCL)
    d = scl_deltas(9)
    assert np.array_equal(strategy.aggregate(round_updates(9, d)).assignment.labels,
                          restored.aggregate(round_updates(9, d)).assignment.labels)


@pytest.mark.parametrize("cooldown", [0, 1, 3])
def test_scl_cooldown_counts_rounds_like_sattler(cooldown):
    """Sattler et al. loop over c_round = 1, 2, … and split only when c_round > cooldown: with the engine's
    0-based rounds the first split is at round index ``cooldown`` (cooldown 0: the very first round)."""
    strategy = make({**SCL, "cooldown": cooldown})
    first = None
    for r in range(cooldown + 1):
        res = strategy.aggregate(round_updates(r, scl_deltas(r)))
        if res.diagnostics["n_splits"] and first is None:
            first = r
    assert first == cooldown
    assert strategy.last_events[0]["round"] == cooldown
    assert res.diagnostics["eps1"] == SCL["eps1"] and res.diagnostics["eps2"] == SCL["eps2"]
    assert set(res.diagnostics["mean_update_norms"]) == {"0"} and set(res.diagnostics["max_update_norms"]) == {"0"}


def test_scl_no_split_when_mean_update_is_large():
    strategy = make(SCL)
    d = planted_deltas(SIZES, 300, seed=0, noise=0.1)  # all in one direction: ‖mean Δ‖ ≈ 0.58 > ε1
    d = d + planted_deltas([15], 300, seed=9, noise=0.0)
    res = strategy.aggregate(round_updates(5, d))
    assert res.assignment.n_clusters == 1 and res.diagnostics["largest_mean_update_norm"] > 0.5


def test_scl_split_keeps_global_ids():
    """Clients of a cluster {1, 4, 6, 9, 12, 13} split into subsets of those ids (not local indices 0..5)."""
    labels0 = np.zeros(15, dtype=np.int64)
    members = np.array([1, 4, 6, 9, 12, 13])
    labels0[members] = 5
    strategy = make(SCL)
    strategy.load_state_dict({"labels": torch.as_tensor(labels0), "next_id": 6})
    planted = np.zeros(15, dtype=np.int64)
    planted[[4, 9, 13]] = 1  # two opposite centres: cluster 5's mean update ≈ 0
    res = strategy.aggregate(round_updates(5, scl_deltas(5, planted)))
    event = [e for e in strategy.last_events if e["parent"] == 5][0]
    assert sorted(map(sorted, event["members"])) == [[1, 6, 12], [4, 9, 13]]
    assert np.all(np.isin(np.flatnonzero(np.isin(res.assignment.labels, event["children"])), members))


@settings(max_examples=25, deadline=None)
@given(st.integers(6, 16), st.integers(2, 5), st.lists(st.integers(0, 10_000), min_size=1, max_size=5),
       st.floats(0.3, 1.0))
def test_scl_property_every_client_in_exactly_one_cluster(n, k, seeds, sampled_share):
    strategy = make({**SCL, "cooldown": 0, "eps1": 10.0, "eps2": 10.0}, n=n)  # splits often
    for r, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        m = max(3, int(round(sampled_share * n)))
        clients = np.sort(rng.choice(n, size=min(m, n), replace=False))
        labels = rng.integers(0, k, size=n)
        before = strategy.assignment.labels.copy()
        res = strategy.aggregate(round_updates(r + 1, scl_deltas(seed, labels[clients], scale=20.0), clients=clients, n_clients=n))
        after = res.assignment.labels
        assert after.shape == (n,)
        for event in strategy.last_events:
            parent_members = np.flatnonzero(before == event["parent"])
            kids = [np.asarray(m, dtype=int) for m in event["members"]]
            assert len(np.intersect1d(kids[0], kids[1])) == 0
            assert np.array_equal(np.sort(np.concatenate(kids)), parent_members)
            for c, kid in zip(event["children"], kids):
                assert np.array_equal(np.flatnonzero(after == c), kid)
        # clusters that did not split keep exactly their members
        split_parents = {e["parent"] for e in strategy.last_events}
        for c in set(np.unique(before)) - split_parents:
            assert np.array_equal(np.flatnonzero(after == c), np.flatnonzero(before == c))
        sizes = [len(v) for v in res.assignment.clusters().values()]
        assert sum(sizes) == n


def test_scl_max_clusters():
    strategy = make({**SCL, "max_clusters": 2})
    for r in range(2, 6):
        res = strategy.aggregate(round_updates(r, scl_deltas(r)))
    assert res.assignment.n_clusters == 2


# ----- BCL -----------------------------------------------------------------------------------------
BCL = {"method": "bcl", "round": 2, "distance_threshold": 0.5}


def test_bcl_fedavg_then_one_clustering():
    strategy = make(BCL)
    for r in range(2):
        assert strategy.aggregate(round_updates(r, planted_deltas(SIZES, 300, seed=r, noise=0.3))).assignment.n_clusters == 1
    res = strategy.aggregate(round_updates(2, planted_deltas(SIZES, 300, seed=2, noise=0.3)))
    assert adjusted_rand_score(TRUTH, res.assignment.labels) == 1.0 and res.divergence.shape == (15, 15)
    later = strategy.aggregate(round_updates(3, planted_deltas([15], 300, seed=3)))
    assert np.array_equal(later.assignment.labels, res.assignment.labels)
    assert save_load(strategy, BCL).clustered is True


def test_bcl_clusters_on_cosine_distance_not_similarity():
    """Two tight opposite groups: on distance they are two clusters; fed as similarity (the published
    bug), the 'distance' between opposite updates is −1 and everything merges differently."""
    base = torch.randn(1, 200, generator=torch.Generator().manual_seed(0))
    jitter = torch.randn(8, 200, generator=torch.Generator().manual_seed(1)) * 0.02
    d = torch.cat([base.repeat(4, 1), -base.repeat(4, 1)]) + jitter
    truth = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    strategy = make({**BCL, "round": 0, "distance_threshold": 0.3}, n=8)
    labels = strategy.aggregate(round_updates(0, d)).assignment.labels
    assert adjusted_rand_score(truth, labels) == 1.0
    similarity = 1.0 - divergence_numpy(d)
    buggy = AgglomerativeClustering(n_clusters=None, metric="precomputed", linkage="average",
                                    distance_threshold=0.3).fit_predict(similarity)
    assert adjusted_rand_score(truth, buggy) < 1.0


def test_bcl_degenerate_updates_one_cluster():
    strategy = make({**BCL, "round": 0})
    res = strategy.aggregate(round_updates(0, torch.zeros(15, 300)))
    assert res.assignment.n_clusters == 1 and np.all(np.isfinite(res.divergence))


# ----- Louvain CFL (002) ---------------------------------------------------------------------------
LOUVAIN = {"method": "louvain", "attribution": "1nn"}


def louvain_round(rnd, labels=TRUTH, clients=None):
    start = torch.ones(len(labels) if clients is None else len(clients), 300)
    sel = labels if clients is None else labels[clients]
    deltas = planted_deltas([int(np.sum(sel == c)) for c in range(3)], 300, seed=50 + rnd, noise=0.2)
    order = np.argsort(np.argsort(sel, kind="stable"), kind="stable")
    return round_updates(rnd, deltas[order], clients=clients, start=start, n_clients=len(labels))


@pytest.mark.parametrize("attribution", ["avg", "1nn", "wnn"])
def test_louvain_recovers_planted_communities(attribution):
    strategy = make({**LOUVAIN, "attribution": attribution})
    res = strategy.aggregate(louvain_round(0))
    assert adjusted_rand_score(TRUTH, res.assignment.labels) == 1.0
    assert 0 not in res.assignment.labels  # cluster 0 is reserved for never-seen clients
    models = {c: torch.zeros(300) for c in np.unique(res.assignment.labels)}
    specs = strategy.configure(1, np.arange(15), None, models)
    if attribution == "1nn":
        assert all(specs[q] == res.assignment.labels[q] for q in range(15))  # nearest = own community
    elif attribution == "avg":
        assert all(specs[q] == {c: pytest.approx(1 / 3) for c in models} for q in range(15))
    else:
        for q in range(15):
            assert isinstance(specs[q], dict) and sum(specs[q].values()) == pytest.approx(1.0)
            assert max(specs[q], key=specs[q].get) == res.assignment.labels[q]
    res2 = strategy.aggregate(louvain_round(1))
    assert np.array_equal(res2.assignment.labels, res.assignment.labels)  # ids stable across rounds


def test_louvain_attribution_modes_on_hand_made_distances():
    strategy = make(LOUVAIN, n=4)
    strategy.communities = [1, 2, 3]
    strategy.assignment = ClusterAssignment(np.array([1, 2, 3, 0]))
    strategy.client_distance = {0: {1: 0.1, 2: 0.5, 3: 2.0}, 1: {1: 0.3, 2: 0.2, 3: 0.25}}
    models = {0: None, 1: None, 2: None, 3: None}
    assert strategy.start_spec(0, models) == 1
    assert strategy.start_spec(1, models) == 2
    assert strategy.start_spec(3, models) == {1: pytest.approx(1 / 3), 2: pytest.approx(1 / 3), 3: pytest.approx(1 / 3)}  # newcomer
    strategy.params["attribution"] = "wnn"
    w = strategy.start_spec(0, models)
    e = np.exp(-np.array([0.1, 0.5, 2.0]))
    assert w == {1: pytest.approx(e[0] / e.sum()), 2: pytest.approx(e[1] / e.sum()), 3: pytest.approx(e[2] / e.sum())}
    strategy.params["k"] = 2
    assert set(strategy.start_spec(1, models)) == {2, 3}
    assert wnn_weights({5: 1.0}, 3, 1.0) == {5: 1.0}
    strategy.params["attribution"] = "avg"
    assert strategy.start_spec(0, {1: None, 2: None}) == {1: 0.5, 2: 0.5}


def test_trusted_distance_matches_eq2_by_hand():
    a = torch.tensor([[1.0, 0.0, 2.0, 0.0], [1.0, 1.0, 0.0, 2.0]], dtype=torch.float64)
    layers = layer_slices([2, 2])
    # t(a,b) = (1 + ‖(0,−1)‖/‖(1,0)‖)(1 + ‖(2,−2)‖/‖(2,0)‖) − 1 = 2·(1 + √2) − 1
    # t(b,a) = (1 + 1/√2)(1 + √8/2) − 1
    t_ab = 2 * (1 + np.sqrt(2)) - 1
    t_ba = (1 + 1 / np.sqrt(2)) * (1 + np.sqrt(8) / 2) - 1
    assert trusted_distance_matrix(a, layers)[0, 1] == pytest.approx(0.5 * (t_ab + t_ba), rel=1e-12)


def test_louvain_partial_participation_and_newcomers():
    strategy = make(LOUVAIN)
    sampled = np.array([0, 1, 2, 5, 6, 7, 10, 11, 12])
    res = strategy.aggregate(louvain_round(0, clients=sampled))
    labels = res.assignment.labels
    unseen = np.setdiff1d(np.arange(15), sampled)
    assert np.all(labels[unseen] == 0)
    assert adjusted_rand_score(TRUTH[sampled], labels[sampled]) == 1.0
    models = {c: torch.zeros(3) for c in np.unique(labels)}
    specs = strategy.configure(1, np.arange(15), None, models)
    comms = [c for c in np.unique(labels) if c != 0]
    for q in unseen:
        assert specs[int(q)] == {c: pytest.approx(1 / 3) for c in comms}  # global = mean of community models
    restored = save_load(strategy, LOUVAIN)
    assert restored.start_spec(3, models) == strategy.start_spec(3, models)
    nxt = louvain_round(1, clients=np.arange(15))
    assert np.array_equal(strategy.aggregate(nxt).assignment.labels, restored.aggregate(nxt).assignment.labels)


def test_louvain_stops_when_start_vectors_exceed_the_memory_budget():
    """002 compares models (eq. 2); without the start vectors the run must stop and say which budget."""
    strategy = make(LOUVAIN)
    deltas = planted_deltas(SIZES, 300, seed=1)
    with pytest.raises(ConfigError, match=r"^engine\.memory_budget_mb: .*allowed: engine\.memory_budget_mb >= 1\b"):
        strategy.aggregate(round_updates(0, deltas, start=None))


def hierarchical_models(seed=0, per_group=4, n_params=50):
    """4 groups of clients; groups {0, 1} and {2, 3} are close pairs: two scales of community structure."""
    gen = torch.Generator().manual_seed(seed)
    base = 3 * torch.randn(n_params, generator=gen, dtype=torch.float64)
    coarse = torch.randn(2, n_params, generator=gen, dtype=torch.float64)
    fine = 0.35 * torch.randn(4, n_params, generator=gen, dtype=torch.float64)
    rows = [base + coarse[g // 2] + fine[g] + 0.03 * torch.randn(n_params, generator=gen, dtype=torch.float64)
            for g in range(4) for _ in range(per_group)]
    return torch.stack(rows).float()


def test_louvain_resolution_follows_002_higher_means_fewer_larger_communities():
    """002 §IV-B: "Low-resolution values lead to numerous small clusters, while high values lead to a
    limited number of large clusters" (networkx's own resolution runs the other way)."""
    fine, coarse = np.repeat(np.arange(4), 4), np.repeat(np.arange(2), 8)
    models = hierarchical_models()
    found = {}
    for resolution in (0.5, 1.0, 2.0):
        strategy = make({**LOUVAIN, "resolution": resolution}, n=16, n_params=50)
        found[resolution] = strategy.aggregate(round_updates(0, models, start=torch.zeros_like(models), n_clients=16)).assignment.labels
    assert adjusted_rand_score(fine, found[0.5]) == 1.0  # low: the four small groups
    assert adjusted_rand_score(coarse, found[2.0]) == 1.0  # high: the two large ones
    assert len(np.unique(found[0.5])) > len(np.unique(found[1.0])) >= len(np.unique(found[2.0]))
    from cflcore.clustering.graph import networkx_resolution

    assert networkx_resolution(2.0) == 0.5 and networkx_resolution(1.0) == 1.0


def test_louvain_layer_sizes_must_sum_to_params():
    with pytest.raises(ConfigError, match="layer_sizes"):
        make({**LOUVAIN, "layer_sizes": [10, 10]})


# ----- FedGWC (004) --------------------------------------------------------------------------------
def loss_traces(groups, rnd, steps=6):
    """Group g's clients share one loss trace (level 1 + 2g); a tiny per-round drift."""
    return [np.linspace(1.0 + 2.0 * g, 0.5 + 2.0 * g, steps) + 1e-4 * rnd for g in groups]


def test_gaussian_rewards_eq1():
    losses = [np.array([1.0, 2.0]), np.array([3.0, 2.0]), np.array([2.0, 2.0])]
    r = gaussian_rewards(losses)
    # step 0: m = 2, σ² = 1 → exp(−1/2), exp(−1/2), 1 ; step 1: σ = 0 → 1 for all
    np.testing.assert_allclose(r, [(np.exp(-0.5) + 1) / 2, (np.exp(-0.5) + 1) / 2, 1.0])


def test_upv_affinity_matches_definition():
    p = np.random.default_rng(0).random((6, 6))
    w = upv_affinity(p, 0.5)
    for k in range(6):
        for j in range(6):
            keep = [l for l in range(6) if l not in (k, j)]
            assert w[k, j] == pytest.approx(np.exp(-0.5 * np.sum((p[k, keep] - p[j, keep]) ** 2)), rel=1e-10)


def test_fedgwc_recovers_two_loss_distributions():
    """Full participation: α = 1, so P is overwritten each round and the running MSE (from 1, Alg. 1 l. 5)
    is the plain MSE: large in round 0 (P leaves 0), 0 from round 1 when the losses repeat."""
    groups = np.array([0] * 10 + [1] * 5)
    from cflcore.strategies.fedgwc import TEXT_READINGS

    # 004's text readings: under the authors' code a fully sampled cluster (|C| = N) is never split
    variant = {"method": "fedgwc", "epsilon": 1e-6, "participation": 1.0, **TEXT_READINGS}
    strategy = make(variant, n=15)
    res, events = None, []
    for r in range(4):
        assert strategy.select_clients(r, np.arange(15)).tolist() == list(range(15))
        res = strategy.aggregate(round_updates(r, torch.zeros(15, 10), step_losses=loss_traces(groups, r)))
        events += strategy.last_events
    assert adjusted_rand_score(groups, res.assignment.labels) == 1.0
    assert events[0]["round"] == 1  # MSE(round 0) = large; round 1: P unchanged
    assert all(np.isfinite(v) for v in strategy.mse.values())
    restored = save_load(strategy, variant)
    np.testing.assert_array_equal(restored.interaction, strategy.interaction)
    assert restored.mse == strategy.mse


def test_fedgwc_no_split_when_every_db_above_one():
    rng = np.random.default_rng(4)
    p = 0.5 + 0.01 * rng.standard_normal((12, 12))  # no structure
    labels, scores = fedgw_cluster(p, n_max=5, beta=0.5, seed=0)
    assert scores and min(scores) > 1.0
    assert labels.tolist() == [0] * 12
    structured = np.repeat(np.repeat(np.array([[0.9, 0.1], [0.1, 0.9]]), 6, axis=0), 6, axis=1)
    labels, scores = fedgw_cluster(structured, n_max=5, beta=0.5, seed=0)
    assert min(scores) < 1.0 and adjusted_rand_score([0] * 6 + [1] * 6, labels) == 1.0


def test_fedgwc_identical_losses_never_split():
    strategy = make({"method": "fedgwc", "epsilon": 1.0}, n=6)
    for r in range(3):
        res = strategy.aggregate(round_updates(r, torch.zeros(6, 4), step_losses=[np.ones(5)] * 6))
    assert res.assignment.n_clusters == 1 and np.all(strategy.weights == 1.0)


# ----- IFCA ----------------------------------------------------------------------------------------
def test_ifca_picks_argmin_loss_model():
    assert argmin_loss_choice(np.array([[0.3, 0.1, 0.2], [0.5, 0.5, 0.1], [0.2, 0.2, 0.9]]), [4, 7, 9]).tolist() == [7, 9, 4]
    assert argmin_loss_choice(np.array([[np.nan, 1.0]]), [0, 1]).tolist() == [1]


def test_ifca_recovers_planted_partition():
    centres = planted_deltas([1, 1, 1], 20, seed=0, noise=0.0)
    strategy = make({"method": "ifca", "k": 3}, n_params=20)
    inits = strategy.initial_models(centres[0] * 0.9, lambda i: centres[i] * 0.9)
    assert sorted(inits) == [0, 1, 2]

    def evaluate(models, clients):
        return np.array([[float(torch.sum((m - centres[TRUTH[c]]) ** 2)) for m in models.values()] for c in clients])

    specs = strategy.configure(0, np.arange(15), evaluate, inits)
    assert [specs[q] for q in range(15)] == TRUTH.tolist()
    res = strategy.aggregate(round_updates(0, torch.zeros(15, 20), evaluate=evaluate))
    assert adjusted_rand_score(TRUTH, res.assignment.labels) == 1.0
    assert res.diagnostics["cluster_sizes"] == {"0": 5, "1": 5, "2": 5}
    # what decided each choice is recorded: every sampled client's loss under every model, the choice its argmin
    recorded = res.diagnostics["model_losses"]
    assert sorted(map(int, recorded)) == list(range(15)) and all(sorted(v) == ["0", "1", "2"] for v in recorded.values())
    assert [int(min(v, key=v.get)) for _, v in sorted(recorded.items(), key=lambda kv: int(kv[0]))] == TRUTH.tolist()
    assert np.array_equal(save_load(strategy, {"method": "ifca", "k": 3}, n_params=20).assignment.labels, res.assignment.labels)


@pytest.mark.parametrize("empty_models, kept", [("keep", (0, 1, 2)), ("drop", ())])
def test_ifca_keeps_every_model_for_the_next_round_unless_told_to_drop(empty_models, kept):
    """The authors' code scores all k models on every client each round, a model nobody chose included; ``drop``
    is the reading that loses it for good."""
    centres = planted_deltas([1, 1, 1], 20, seed=0, noise=0.0)
    strategy = make({"method": "ifca", "k": 3, "empty_models": empty_models}, n_params=20)
    inits = strategy.initial_models(centres[0] * 0.9, lambda i: centres[i] * 0.9)

    def evaluate(models, clients):  # every client is nearest model 0
        return np.array([[float(torch.sum((m - centres[0]) ** 2)) for m in models.values()] for _ in clients])

    strategy.configure(0, np.arange(15), evaluate, inits)
    res = strategy.aggregate(round_updates(0, torch.zeros(15, 20), evaluate=evaluate))
    assert res.assignment.n_clusters == 1 and res.keep_models == kept


# ----- all methods: degenerate rounds and schema -------------------------------------------------------
ALL = [{"method": "ocfl", "clusterer": "hdbscan"}, {"method": "scl", "cooldown": 0}, {"method": "bcl", "round": 0},
       {"method": "louvain"}, {"method": "fedgwc", "epsilon": 1.0}, {"method": "ifca", "k": 2}, {"method": "bnc"}]


@pytest.mark.parametrize("variant", ALL, ids=lambda v: v["method"])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_degenerate_rounds_never_nan(variant, n):
    strategy = make(variant, n=n, n_params=8)
    for r in range(3):
        clients = np.arange(n)
        if variant["method"] == "ifca":
            strategy.configure(r, clients, lambda models, cl: np.ones((len(cl), len(models))), {0: torch.zeros(8), 1: torch.zeros(8)})
        res = strategy.aggregate(round_updates(r, torch.zeros(n, 8), start=torch.zeros(n, 8),
                                               step_losses=[np.ones(3)] * n, n_clients=n))
        assert res.assignment.labels.shape == (n,)
        for v in res.diagnostics.values():
            if isinstance(v, float):
                assert np.isfinite(v)
        if res.divergence is not None:
            assert np.all(np.isfinite(res.divergence))


def config_with(variant):
    return {
        "study": {"datasets": ["digits"], "splits": ["nob"], "clients": [15], "seeds": [0]},
        "datasets": {"digits": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.01, "batch_size": 32,
                                "local_epochs": 1, "rounds": 2}},
        "splits": {"nob": {"generator": "ocfl", "overlap": False, "imbalanced": False}},
        "algorithms": {"algo": variant},
    }


@pytest.mark.parametrize("variant", [
    {"method": "ocfl", "clusterer": "hdbscan"},
    {"method": "ocfl", "clusterer": "sklearn", "estimator": "OPTICS", "clusterer_params": {"min_samples": 2}},
    {"method": "scl", "eps1": 0.35, "eps2": 1.0, "cooldown": 30},
    {"method": "bcl", "round": 20, "distance_threshold": 0.4},
    {"method": "louvain", "attribution": "wnn"},
    {"method": "fedgwc", "beta": 1.0},
    {"method": "ifca", "k": "oracle"},
])
def test_valid_variants_pass_validate_config_with_defaults(variant):
    cfg = validate_config(config_with(variant))
    algo = cfg["algorithms"]["algo"]
    cls = STRATEGIES.get(variant["method"])
    assert set(algo) == {"method", *cls.params_schema}  # defaults filled
    build_strategy(algo)


@pytest.mark.parametrize("variant, field", [
    ({"method": "scl", "eps1": 1.0, "eps2": 0.5}, "algorithms.algo.eps2"),
    ({"method": "bcl", "distance_threshold": -0.1}, "algorithms.algo.distance_threshold"),
    ({"method": "bcl", "distance_threshold": 0}, "algorithms.algo.distance_threshold"),
    ({"method": "ocfl", "window": 0}, "algorithms.algo.window"),
    ({"method": "ocfl", "trigger": "sometimes"}, "algorithms.algo.trigger"),
    ({"method": "ocfl", "clusterer": "dbscan"}, "algorithms.algo.clusterer"),
    ({"method": "ocfl", "clusterer": "hdbscan", "min_cluster_size": 3}, "algorithms.algo"),
    ({"method": "louvain", "attribution": "knn"}, "algorithms.algo.attribution"),
    ({"method": "fedgwc", "beta": 0}, "algorithms.algo.beta"),
    ({"method": "ifca", "k": 0}, "algorithms.algo.k"),
    ({"method": "scl", "epsilon1": 0.3}, "algorithms.algo"),
])
def test_schema_refuses_bad_variants(variant, field):
    with pytest.raises(ConfigError) as err:
        validate_config(config_with(variant))
    msg = str(err.value)
    assert msg.startswith(field) and "\n" not in msg
