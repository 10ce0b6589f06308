"""Late-joining clients of OCFL (000 §6.2): who is late, when they join, where they attach,
how they are evaluated, config errors, and exact resumption."""
import io
import json
import logging
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from cflcore.config import run_settings, study_run_ids, study_runs, validate_config
from cflcore.errors import ConfigError
from cflcore.evaluate.clustering import GroundTruth
from cflcore.evaluate.late_clients import late_clients_frame, late_summary
from cflcore.fl.run import KILL_ENV
from engine_runs import train_run
from cflcore.strategies.base import StrategyContext, build_strategy
from cflcore.data.synthetic import synthetic_federated
from cflcore.report.runs import run_specs
from cflcore.strategies._late import choose_late_clients, mean_cosine_distance, mean_unit_updates, resolve_late_count
from synthetic_clusters import planted_deltas, planted_labels, round_updates

LOG = logging.getLogger("test")
N = 12
TRUTH = np.arange(N) % 3  # synthetic_federated deals clients round-robin to 3 clusters


def make(variant, n=15, seed=7):
    strategy = build_strategy({"method": "ocfl", **variant})
    strategy.setup(StrategyContext(n_clients=n, n_params=300, seed=seed, device=torch.device("cpu"), n_true_clusters=3))
    return strategy


# ----- pure helpers ---------------------------------------------------------------------------------------
def test_late_count_fraction_and_integer():
    assert resolve_late_count(0.2, 15) == 3 and resolve_late_count(3, 15) == 3 and resolve_late_count(0, 15) == 0
    assert resolve_late_count(0.01, 15) == 1  # a positive fraction means at least one client
    assert resolve_late_count(13, 15) == 13


@pytest.mark.parametrize("value", [14, 15, 1.5, -1, True, 0.99])
def test_late_count_errors_name_field_and_allowed(value):
    with pytest.raises(ConfigError) as err:
        resolve_late_count(value, 15, "algorithms.x.late_clients")
    msg = str(err.value)
    assert msg.startswith("algorithms.x.late_clients:") and "allowed:" in msg and "\n" not in msg


def test_late_choice_is_seeded_and_uniform():
    a = choose_late_clients(15, 3, np.random.default_rng(1))
    assert np.array_equal(a, choose_late_clients(15, 3, np.random.default_rng(1))) and len(set(a)) == 3
    counts = np.bincount(np.concatenate([choose_late_clients(15, 3, np.random.default_rng(s)) for s in range(3000)]), minlength=15)
    assert counts.min() > 0.8 * counts.mean()  # no client (hence no true cluster) is favoured


def test_mean_cosine_distance_is_the_mean_of_gamma_rows():
    deltas = planted_deltas([4, 4], 50, seed=1, noise=0.5).double()
    late = planted_deltas([2], 50, seed=2, noise=0.5).double()
    ids, centroids = mean_unit_updates(deltas, planted_labels([4, 4]) + 10)
    got = mean_cosine_distance(late, centroids)
    cos = torch.nn.functional.cosine_similarity(late[:, None, :], deltas[None, :, :], dim=2).numpy()
    want = np.stack([(1 - cos[:, :4]).mean(1), (1 - cos[:, 4:]).mean(1)], axis=1)
    assert ids == [10, 11] and np.allclose(got, want)


# ----- the strategy on synthetic rounds ------------------------------------------------------------------
SIZES = [5, 5, 5]


def drive(strategy, rounds, n=15):
    """Feed planted rounds through select_clients/aggregate; returns (selected per round, results)."""
    selected, results = [], []
    for rnd, deltas_all in enumerate(rounds):
        chosen = strategy.select_clients(rnd, np.arange(n))
        selected.append(chosen)
        results.append(strategy.aggregate(round_updates(rnd, deltas_all[chosen], clients=chosen, n_clients=n)))
    return selected, results


def planted_rounds(n_rounds):
    """Two aligned rounds (T falls), then groups with the same directions every round plus fresh noise."""
    aligned = [planted_deltas([15], 300, seed=100, noise=0.1), planted_deltas([15], 300, seed=101, noise=0.02)]
    centres = planted_deltas(SIZES, 300, seed=200, noise=0.0)
    noisy = [centres + torch.randn(15, 300, generator=torch.Generator().manual_seed(300 + r)) * 0.3 / 300 ** 0.5
             for r in range(n_rounds - 2)]
    return aligned + noisy


@pytest.mark.parametrize("join_after", [1, 2])
def test_late_clients_wait_then_join_after_clustering_and_attach_to_their_group(join_after):
    strategy = make({"clusterer": "kmeans", "late_clients": 3, "join_after": join_after})
    late = strategy.late
    selected, results = drive(strategy, planted_rounds(6))
    assert strategy.clustering_round == 2 and strategy.join_round == 2 + join_after
    for rnd, chosen in enumerate(selected):
        assert np.isin(late, chosen).all() == (rnd >= strategy.join_round)
        assert np.array_equal(strategy.absent_clients(rnd), late if rnd < strategy.join_round else late[:0])
    joined = results[strategy.join_round]
    assert set(json.loads(json.dumps(joined.diagnostics["late_joined"]))) == {str(c) for c in late}
    assert joined.aggregate_as == {int(c): 0 for c in late}  # their joining update goes to the cohort they trained from
    labels = results[-1].assignment.labels
    truth = planted_labels(SIZES)
    for c in late:  # attached to the cluster of their planted group's founding members
        mates = [m for m in np.flatnonzero(truth == truth[c]) if m not in late]
        assert labels[c] == labels[mates[0]]
    assert len(np.unique(labels)) == 3
    assert results[0].diagnostics["late_clients"] == [int(c) for c in late]


def test_no_late_clients_changes_nothing():
    a, b = make({"clusterer": "kmeans"}), make({"clusterer": "kmeans", "late_clients": 0})
    for strategy in (a, b):
        assert np.array_equal(strategy.select_clients(0, np.arange(15)), np.arange(15))
    ra, rb = drive(a, planted_rounds(4))[1], drive(b, planted_rounds(4))[1]
    for x, y in zip(ra, rb):
        assert np.array_equal(x.assignment.labels, y.assignment.labels) and x.diagnostics == y.diagnostics
        assert "n_absent" not in x.diagnostics


def test_state_dict_round_trip_with_pending_join():
    variant = {"clusterer": "kmeans", "late_clients": 3}
    strategy = make(variant)
    rounds = planted_rounds(5)
    drive(strategy, rounds[:3])  # clustered at round 2, late clients join at round 3
    buf = io.BytesIO()
    torch.save(strategy.state_dict(), buf)
    buf.seek(0)
    restored = make(variant)
    restored.load_state_dict(torch.load(buf, weights_only=True))
    for rnd in (3, 4):
        outs = []
        for s in (strategy, restored):
            chosen = s.select_clients(rnd, np.arange(15))
            outs.append(s.aggregate(round_updates(rnd, rounds[rnd][chosen], clients=chosen, n_clients=15)))
        assert np.array_equal(outs[0].assignment.labels, outs[1].assignment.labels)
        assert outs[0].diagnostics == outs[1].diagnostics


# ----- config -------------------------------------------------------------------------------------------
def config_with(variant, clients=15):
    return {
        "study": {"datasets": ["digits"], "splits": ["nob", "ob"], "clients": [clients], "seeds": [0]},
        "datasets": {"digits": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.01, "batch_size": 32,
                                "local_epochs": 1, "rounds": 2}},
        "splits": {"nob": {"generator": "ocfl", "overlap": False, "imbalanced": False},
                   "ob": {"generator": "ocfl", "overlap": True, "imbalanced": False}},
        "algorithms": {"algo": variant},
    }


@pytest.mark.parametrize("variant, field, allowed", [
    ({"method": "ocfl", "late_clients": 15}, "algorithms.algo.late_clients", "integer count from 1 to 13"),
    ({"method": "ocfl", "late_clients": 14}, "algorithms.algo.late_clients", "integer count from 1 to 13"),
    ({"method": "ocfl", "late_clients": 2.5}, "algorithms.algo.late_clients", "a fraction in (0, 1)"),
    ({"method": "ocfl", "late_clients": -0.2}, "algorithms.algo.late_clients", ""),
    ({"method": "ocfl", "late_clients": 0.2, "attach": "nearest"}, "algorithms.algo.attach", "divergence, loss"),
    ({"method": "ocfl", "join_after": 0}, "algorithms.algo.join_after", ""),
    ({"method": "ocfl", "splits": ["nob", "nope"]}, "algorithms.algo.splits[1]", "defined: nob, ob"),
    ({"method": "ocfl", "splits": []}, "algorithms.algo.splits", ""),
])
def test_config_errors_name_field_and_allowed_values(variant, field, allowed):
    with pytest.raises(ConfigError) as err:
        validate_config(config_with(variant))
    msg = str(err.value)
    assert msg.startswith(field) and allowed in msg and "\n" not in msg


def test_splits_key_restricts_runs_and_never_reaches_the_strategy():
    cfg = validate_config(config_with({"method": "ocfl", "late_clients": 0.2, "splits": ["nob"]}))
    assert [(s["split"], a) for s, a in study_runs(cfg)] == [("nob", "algo")]
    settings = run_settings(cfg, "digits", "algo")
    assert "splits" not in settings["algorithm"]
    build_strategy(settings["algorithm"])  # the strategy's params_schema does not see `splits`
    assert [s.split for s in run_specs("r", study_run_ids(cfg))] == ["nob"]


# ----- the engine on a synthetic task with well-separated groups ----------------------------------------
def settings_for(attach, rounds=5, **engine):
    return {"training": {"model": "tinyvgg", "model_kwargs": {}, "optimizer": "sgd", "lr": 0.05, "momentum": 0.0,
                         "weight_decay": 0.0, "batch_size": 8, "local_epochs": 1, "rounds": rounds},
            "engine": {"trainer": "loop", "checkpoint_every": 100, **engine},
            "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": "oracle", "late_clients": 3, "attach": attach},
            "device": "cpu"}


@pytest.fixture(scope="module", params=["divergence", "loss"])
def late_run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"late_{request.param}")
    train_run(synthetic_federated(n_clients=N, n_train=40), settings_for(request.param), 0, out, LOG)
    return out


def test_engine_late_clients_do_not_train_before_joining(late_run):
    history = pd.read_parquet(late_run / "history.parquet")
    server = pd.read_parquet(late_run / "server.parquet")
    late = json.loads(server.loc[server["round"] == 0, "late_clients"].iloc[0])
    clustering_round = int(server.loc[server["late_join_round"].notna(), "round"].iloc[0])
    join = int(server.loc[server["late_join_round"].notna(), "late_join_round"].iloc[0])
    assert join == clustering_round + 1 and json.loads(server.loc[server["round"] == join, "late_joined"].iloc[0])
    rows = history[history["client"].isin(late)]
    before, after = rows[rows["round"] < join], rows[rows["round"] >= join]
    assert not before["sampled"].any() and before["local_f1"].isna().all() and before["model_key"].isna().all()
    assert after["sampled"].all() and after["local_f1"].notna().all()
    assert (server.loc[server["round"] < join, "n_absent"] == 3).all() and (server.loc[server["round"] >= join, "n_absent"] == 0).all()


def test_engine_attaches_late_clients_to_their_true_cluster(late_run):
    history = pd.read_parquet(late_run / "history.parquet")
    server = pd.read_parquet(late_run / "server.parquet")
    truth = GroundTruth(TRUTH, np.ones((N, 6)))
    frame = late_clients_frame(history, server, truth)
    summary = late_summary(frame)
    assert summary["n_late"] == summary["n_joined"] == 3 and summary["attach_accuracy"] == 1.0
    clients = frame[frame["kind"] == "client"]
    assert clients.loc[clients["role"] == "late", "n_evaluations"].gt(0).all()
    rounds = frame[(frame["kind"] == "round") & (frame["role"] == "late")]
    assert (rounds.loc[rounds["round"] < summary["join_round"], "n_evaluations"] == 0).all()


def test_unfounded_true_cluster_is_flagged_and_counted_wrong():
    n = 6
    truth = GroundTruth(np.array([0, 0, 1, 1, 2, 2]), np.ones((n, 3)))
    labels = {0: [0] * n, 1: [5, 5, 6, 6, 5, 6], 2: [5, 5, 6, 6, 6, 6]}  # clients 4, 5 (true cluster 2) are late
    history = pd.DataFrame([{"round": r, "client": c, "cluster": labels[r][c], "sampled": True, "local_f1": 0.5,
                             "orch_f1": 0.1} for r in range(3) for c in range(n)])
    server = pd.DataFrame({"round": [0, 1, 2], "late_clients": ["[4,5]", None, None],
                           "late_joined": [None, None, '{"4":6,"5":6}']})
    clients = late_clients_frame(history, server, truth).query("kind == 'client'").set_index("client")
    assert not clients.loc[[4, 5], "true_cluster_founded"].any() and not clients.loc[[4, 5], "attached_to_true"].any()
    assert clients.loc[[0, 1, 2, 3], "attached_to_true"].isna().all()


# ----- resume ------------------------------------------------------------------------------------------
SCRIPT = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.run import train_run
from cflcore.strategies import build_strategy
settings = json.loads(sys.argv[2])
train_run(synthetic_federated(n_clients=12, n_train=40), settings, 0, sys.argv[1], strategy=build_strategy(settings["algorithm"]))
"""


def _run(out_dir, settings, kill_after=None):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(KILL_ENV, None)
    if kill_after is not None:
        env[KILL_ENV] = str(kill_after)
    return subprocess.run([sys.executable, "-c", SCRIPT, str(out_dir), json.dumps(settings)], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("attach", ["divergence", "loss"])
def test_kill_between_clustering_and_joining_resumes_exactly(tmp_path, attach):
    """Checkpoint after round 1 (clustered, late clients not joined: the centroids come from the checkpoint),
    killed after round 2 (the joining round); the resumed run equals an uninterrupted one."""
    settings = settings_for(attach, checkpoint_every=2)
    reference = tmp_path / "ref"
    train_run(synthetic_federated(n_clients=N, n_train=40), settings, 0, reference, LOG)
    server = pd.read_parquet(reference / "server.parquet")
    assert int(server.loc[server["late_join_round"].notna(), "round"].iloc[0]) == 1  # the scenario tested
    killed = _run(tmp_path / "run", settings, kill_after=2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    done = _run(tmp_path / "run", settings)
    assert done.returncode == 0 and "resuming from checkpoint round 1" in done.stdout, done.stderr[-2000:]
    for name in ("history.parquet", "gram.parquet"):
        assert pd.read_parquet(reference / name).equals(pd.read_parquet(tmp_path / "run" / name)), name
    pd.testing.assert_frame_equal(server.drop(columns="seconds"),
                                  pd.read_parquet(tmp_path / "run" / "server.parquet").drop(columns="seconds"))
    a, b = (torch.load(d / "models.pt", weights_only=True) for d in (reference, tmp_path / "run"))
    assert torch.equal(a["labels"], b["labels"])
    for c in a["cluster_models"]:
        assert all(torch.equal(v, b["cluster_models"][c][k]) for k, v in a["cluster_models"][c].items())


def test_a_late_client_attached_by_loss_receives_every_found_model(late_run):
    """traffic.parquet (Strategy.traffic): one model each way per trained client; in the joining round of ``attach:
    loss`` each of the 3 late clients also receives every found cluster's model and sends a float32 loss for each."""
    history = pd.read_parquet(late_run / "history.parquet")
    server = pd.read_parquet(late_run / "server.parquet")
    traffic = pd.read_parquet(late_run / "traffic.parquet").set_index("round")
    trained = history.groupby("round")["sampled"].sum()
    model_bytes = int(traffic.loc[0, "bytes_down"]) // int(trained[0])
    join = int(server.loc[server["late_join_round"].notna(), "late_join_round"].iloc[0])
    k = len(json.loads(server.loc[server["round"] == join, "late_candidates"].iloc[0]))
    assert k >= 2
    extra = 3 * k if late_run.name.startswith("late_loss") else 0  # the fixture's folder names its attach
    for rnd, row in traffic.iterrows():
        here = extra if rnd == join else 0
        assert row["bytes_down"] == (trained[rnd] + here) * model_bytes and row["bytes_up"] == trained[rnd] * model_bytes + here * 4
