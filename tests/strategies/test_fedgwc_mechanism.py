"""FedGWC's server logic alone recovers loss domains: synthetic per-step loss traces of two
and of three domains go through the strategy's own select_clients / aggregate (stand-in zero updates, no
training) at 004's scale, K = 100 clients, N = 10 a round (ρ = 0.1, α = 0.1), β = 0.5, ε = 1e-5.

Traces: client k of domain d reports, on each of 7 local steps s, loss 2 − s/6 + d + o_k + e, with a fixed
client offset o_k ~ N(0, 0.1²) and fresh step noise e ~ N(0, 0.1²); domains differ by 1.

Measured (this file's settings, 3,000 rounds, seeds 0-4, final Rand index against the domains; AMD EPYC, shared
machine; identical with ATEN_CPU_CAPABILITY=avx2/ONEDNN_MAX_CPU_ISA=AVX2 and =default/SSE41, about 11 s per case):
* defaults (UPVs from P's columns, the authors' code): two domains 0.914 0.960 0.941 0.960 0.980;
  three domains 0.947 0.987 0.961 0.914 0.987. The threshold (Rand ≥ 0.9 in at least 4 of 5 seeds) sits 0.014
  below the lowest measured value.
* ``upv: rows`` (004 §4.2's text), everything else equal: two domains 0.755 0.495 0.495 0.495 0.742 (no seed
  reaches 0.9: the two-domain case fails); three domains 0.974 1.000 0.923 0.901 0.890 (4 of 5: with domains at
  loss levels 0, 1, 2 the middle domain is the typical one, so a row's reward level alone orders the three). The
  two-domain case is the one that tells columns from rows; test_rows_do_not_recover_two_domains keeps it so.

"""
import numpy as np
import pytest
import torch
from sklearn.metrics import rand_score

from synthetic_clusters import round_updates
from cflcore.strategies.base import StrategyContext, build_strategy

K, STEPS, ROUNDS, SEEDS = 100, 7, 3000, range(5)


def recovered(n_domains: int, seed: int, rounds: int = ROUNDS, **params) -> tuple[float, int]:
    """Final Rand index of FedGWC's partition against the domains, and its number of clusters."""
    rng = np.random.default_rng([seed, 27])
    domains = np.arange(K) % n_domains
    offsets = rng.normal(0.0, 0.1, K)
    strategy = build_strategy({"method": "fedgwc", "participation": 0.1, "beta": 0.5, "epsilon": 1e-5,
                               "db_every_round": False, **params})
    strategy.setup(StrategyContext(n_clients=K, n_params=1, seed=seed, device=torch.device("cpu")))
    base = np.linspace(2.0, 1.0, STEPS)
    zeros = torch.zeros(K, 1)
    for rnd in range(rounds):
        sampled = strategy.select_clients(rnd, np.arange(K))
        losses = (base + domains[sampled, None] + offsets[sampled, None]
                  + rng.normal(0.0, 0.1, (sampled.size, STEPS)))
        strategy.aggregate(round_updates(rnd, zeros[: sampled.size], clients=sampled, step_losses=list(losses),
                                         n_clients=K))
    return rand_score(domains, strategy.assignment.labels), strategy.assignment.n_clusters


@pytest.mark.kernels
@pytest.mark.parametrize("n_domains", [2, 3])
def test_server_logic_recovers_loss_domains(n_domains):
    scores = [recovered(n_domains, seed)[0] for seed in SEEDS]
    assert sum(s >= 0.9 for s in scores) >= 4, f"Rand per seed {np.round(scores, 3).tolist()}"

@pytest.mark.kernels
def test_rows_do_not_recover_two_domains():
    """The same federation with UPVs from P's rows (004 §4.2's text): measured 0.755 0.495 0.495 0.495 0.742, so
    test_server_logic_recovers_loss_domains[2] fails under that reading. Three seeds keep this under 10 s."""
    scores = [recovered(2, seed, upv="rows")[0] for seed in range(3)]
    assert max(scores) < 0.9, f"Rand per seed {np.round(scores, 3).tolist()}"
