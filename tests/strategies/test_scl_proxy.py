"""SCL's ε₁, ε₂ and cool-down from a centralised proxy (000 App. A.2): the proxy is a strategy input
(cflcore/strategies/scl.py declares it, cflcore/fl/centralised.py trains it), the only one today."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from cflcore import config as cc
from cflcore.data.synthetic import synthetic_federated
from cflcore import layout
from cflcore.fl.centralised import centralised_update_norms as proxy_update_norms
from cflcore.fl.centralised import write_update_norms
from cflcore.strategies.base import declared_inputs, resolve_params
from cflcore.strategies.scl import convergence_round, epsilons_from_proxy

REPO = Path(__file__).resolve().parents[2]
TRAINING = {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1, "rounds": 4}


def test_sattlers_recommendation_on_the_proxy():
    """ε₁ = max/10, ε₂ = factor · ε₁, cool-down = the rounds before the trace settles."""
    norms = np.array([2.0, 4.0, 3.0, 1.0, 0.55, 0.52, 0.5])
    eps = epsilons_from_proxy(norms)
    assert eps.eps1 == pytest.approx(0.4) and eps.eps2 == pytest.approx(2.0) and eps.max_update_norm == 4.0
    # band: final 0.5 + 0.1 * (4.0 - 0.5) = 0.85; round 3 (1.0) is the last above it
    assert eps.cooldown == 4 == convergence_round(norms, 0.1)
    assert epsilons_from_proxy(norms, factor=10.0).eps2 == pytest.approx(4.0)
    assert convergence_round(np.array([1.0, 1.0, 1.0]), 0.1) == 0  # flat: settled from the start
    assert convergence_round(norms, 0.5) == 3  # a wider band settles earlier (2.25: round 2 is the last above)
    with pytest.raises(ValueError, match="allowed 1 <= factor <= 10"):
        epsilons_from_proxy(norms, factor=20.0)
    with pytest.raises(ValueError, match="not finite"):
        epsilons_from_proxy(np.array([1.0, np.nan]))


def test_the_proxy_trains_deterministically_and_an_epoch_round_moves_further():
    fed = synthetic_federated(n_clients=4, n_train=24, n_test=8, n_orch=16)
    client = proxy_update_norms(fed, TRAINING, {}, seed=3, round_size="client")
    assert client.shape == (4,) and np.isfinite(client).all() and (client > 0).all()
    assert np.array_equal(client, proxy_update_norms(fed, TRAINING, {}, seed=3, round_size="client"))  # bit for bit
    assert not np.array_equal(client, proxy_update_norms(fed, TRAINING, {}, seed=4, round_size="client"))
    epoch = proxy_update_norms(fed, TRAINING, {}, seed=3, round_size="epoch")
    # an epoch over the pooled data takes 4x a client's steps (96 rows against 24): a larger first update
    assert epoch[0] > client[0]
    with pytest.raises(ValueError, match="allowed client, epoch"):
        proxy_update_norms(fed, TRAINING, {}, seed=3, round_size="batch")


def test_an_scl_run_with_epsilon_proxy_takes_its_thresholds_from_the_proxy(tmp_path):
    algorithm = {"method": "scl", "eps1": 0.35, "eps2": 1.0, "cooldown": 30, "epsilon": "proxy",
                 "proxy_round": "client", "proxy_factor": 5.0, "proxy_tolerance": 0.1}
    declared = declared_inputs(algorithm)
    assert declared == {"proxy": "centralised_update_norms/client"}
    path = tmp_path / layout.input_file_name(declared["proxy"])
    assert path.name == "scl_proxy-client.parquet"  # the name the proxy always had
    write_update_norms(np.array([3.0, 6.0, 2.0, 1.0]), path, {"round_size": "client"})
    resolved = resolve_params(algorithm, {"proxy": path})
    assert (resolved["eps1"], resolved["eps2"], resolved["cooldown"]) == (pytest.approx(0.6), pytest.approx(3.0), 3)
    explicit = {**algorithm, "epsilon": "explicit"}
    assert declared_inputs(explicit) == {} and resolve_params(explicit, {}) == explicit  # the config's values
    assert declared_inputs({"method": "bnc"}) == {} and resolve_params({"method": "bnc"}, {}) == {"method": "bnc"}
    assert declared_inputs({**algorithm, "proxy_round": "epoch"}) == {"proxy": "centralised_update_norms/epoch"}
    with pytest.raises(FileNotFoundError):
        resolve_params(algorithm, {"proxy": tmp_path / "missing.parquet"})


def _tiny(**algorithms):
    cfg = yaml.safe_load((REPO / "config" / "tiny.yaml").read_text())
    cfg["algorithms"].update(algorithms)
    cfg["study"]["algorithms"] = list(algorithms)
    return cfg


def test_the_config_names_the_field_and_the_allowed_values():
    with pytest.raises(cc.ConfigError, match=r"epsilon.*allowed.*explicit.*proxy|epsilon.*'explicit', 'proxy'"):
        cc.validate_config(_tiny(**{"scl-x": {"method": "scl", "epsilon": "guess"}}))
    with pytest.raises(cc.ConfigError, match="proxy_factor"):
        cc.validate_config(_tiny(**{"scl-x": {"method": "scl", "epsilon": "proxy", "proxy_factor": 20}}))
    cfg = cc.validate_config(_tiny(**{"scl-p": {"method": "scl", "epsilon": "proxy"}, "scl": {"method": "scl"},
                                      "scl-e": {"method": "scl", "epsilon": "proxy", "proxy_round": "epoch"}}))
    assert cc.run_inputs(cfg, "digits", "scl-p") == {"proxy": "centralised_update_norms/client"}
    assert cc.run_inputs(cfg, "digits", "scl-e") == {"proxy": "centralised_update_norms/epoch"}
    assert cc.run_inputs(cfg, "digits", "scl") == {}
    # validation stores what every variant declares, so building the jobs imports no plug-in
    assert cfg[cc.DECLARED_INPUTS_KEY]["digits/scl-e"] == {"proxy": "centralised_update_norms/epoch"}
    proxy = cc.centralised_settings(cfg, "digits", "client")
    assert proxy["training"]["rounds"] == 3 and proxy["round_size"] == "client"
    later = copy.deepcopy(cfg)
    later["datasets"]["digits"]["explain_samples"] = 99  # not the proxy's: its param does not move
    assert cc.centralised_settings(later, "digits", "client") == proxy


def test_the_workflow_runs_one_proxy_per_scenario_and_round_size(workflow_dir):
    """Two SCL variants on the client-sized proxy share one proxy job; the epoch-sized one gets its own; a
    variant with explicit values (and every other method) asks for none."""
    from test_workflow import planned_jobs, run_sm

    cfg = _tiny(**{"scl-p": {"method": "scl", "epsilon": "proxy"},
                   "scl-p10": {"method": "scl", "epsilon": "proxy", "proxy_factor": 10},
                   "scl-e": {"method": "scl", "epsilon": "proxy", "proxy_round": "epoch"},
                   "scl": {"method": "scl"}, "bnc": {"method": "bnc"}})
    path = Path(workflow_dir) / "config" / "proxy.yaml"
    path.write_text(yaml.safe_dump(cfg))
    p = run_sm(workflow_dir, "-n", "--cores", "2", "--configfile", str(path), "--quiet", "rules")
    jobs = planned_jobs(p.stdout + p.stderr)
    assert jobs.get("centralised_update_norms") == 2 and jobs.get("train") == 5
    p = run_sm(workflow_dir, "-n", "--cores", "2", "--configfile", str(path), "-p",
               "results/runs/digits/nonoverlap-balanced/n6/s0/scl-p10/status.json")
    assert "scl_proxy-client.parquet" in p.stdout and "scl_proxy-epoch.parquet" not in p.stdout
