"""Kill-and-resume: a run SIGKILLed after round k and restarted gives the outputs of an uninterrupted run.

The first tests use the synthetic federation (BNC: the engine's own state; fresh interpreters). Then every
algorithm of the default study (config/config.yaml ``study.algorithms``) on real MNIST-5k, through
``stages.train`` as the Snakemake rule calls it, killed after a round at which that method's state decides
what follows (``kill_round``); the uninterrupted reference is the run tests/workflow/test_end_to_end.py scores (the
session fixture ``mnist_study`` trains each method once). Last, partial participation on the synthetic
federation, for the Louvain and IFCA state that the MNIST runs' full participation rebuilds every round.
Together they fail when a strategy's ``load_state_dict`` forgets any field that the outputs depend on (FedGWC's
Gaussian weights γ are reported in server.parquet's diagnostics for that reason; the write-only split
histories of SCL and FedGWC were removed from their state); the fields they cannot see are recomputed by
``setup`` (BNC's labels, IFCA's ``k``, OCFL's ``late``, which is only checked).
"""
import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from cflcore import config as cc
from cflcore.fl.run import KILL_ENV
from engine_runs import train_run
from cflcore.data.synthetic import synthetic_federated
from conftest import REPO

SETTINGS = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "momentum": 0.5, "batch_size": 8,
                         "local_epochs": 1, "rounds": 5},
            "engine": {"trainer": "loop", "checkpoint_every": 2, "participation": 0.8}, "algorithm": {"method": "bnc"},
            "device": "cpu"}
FED_KW = {"n_clients": 5, "n_train": [24, 16, 24, 20, 24]}

SCRIPT = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.run import train_run
from cflcore.strategies import build_strategy
settings = json.loads(sys.argv[3])
train_run(synthetic_federated(**json.loads(sys.argv[2])), settings, 3, sys.argv[1], strategy=build_strategy(settings["algorithm"]))
"""


def _run(out_dir, kill_after=None, settings=SETTINGS, fed=FED_KW):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(KILL_ENV, None)
    if kill_after is not None:
        env[KILL_ENV] = str(kill_after)
    return subprocess.run([sys.executable, "-c", SCRIPT, str(out_dir), json.dumps(fed), json.dumps(settings)],
                          env=env, capture_output=True, text=True, timeout=300)


def _assert_same(a, b, where: str) -> None:
    """Bit for bit: tensors (dtype and values), dicts (keys), lists, scalars."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _assert_same_outputs(a, b):
    """history, gram and divergence.parquet bit for bit, server.parquet but its wall-clock ``seconds``, and
    everything in models.pt (cluster models, labels, client mixes)."""
    for name in ("history.parquet", "gram.parquet", "divergence.parquet"):
        assert (a / name).exists() == (b / name).exists(), name
        if (a / name).exists():
            assert pq.read_table(a / name).equals(pq.read_table(b / name)), name
    sa, sb = (pd.read_parquet(d / "server.parquet").drop(columns="seconds") for d in (a, b))
    pd.testing.assert_frame_equal(sa, sb, check_exact=True)
    ma, mb = (torch.load(d / "models.pt", weights_only=True) for d in (a, b))
    _assert_same(ma, mb, "models.pt")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    train_run(synthetic_federated(**FED_KW), SETTINGS, 3, out, logging.getLogger("ref"))
    return out


@pytest.mark.parametrize("kill_after,resume_round", [(0, None), (2, 1)])
def test_kill_and_resume_is_bit_identical(tmp_path, reference, kill_after, resume_round):
    killed = _run(tmp_path, kill_after)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (tmp_path / "history.parquet").exists()
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    if resume_round is None:
        assert "resuming" not in done.stdout
    else:
        assert f"resuming from checkpoint round {resume_round}" in done.stdout
    _assert_same_outputs(reference, tmp_path)
    assert len(list((tmp_path / "checkpoints").glob("round_*.pt"))) <= 2


def test_bad_checkpoints_are_skipped(tmp_path, reference, caplog):
    settings = json.loads(json.dumps(SETTINGS))
    train_run(synthetic_federated(**FED_KW), settings, 3, tmp_path, logging.getLogger("full"))
    for name in ("history.parquet", "server.parquet", "gram.parquet", "models.pt"):
        (tmp_path / name).unlink()  # keep only the checkpoints (after rounds 1 and 3)
    files = sorted((tmp_path / "checkpoints").glob("round_*.pt"))
    assert [f.name for f in files] == ["round_00001.pt", "round_00003.pt"]
    files[1].write_bytes(b"not a checkpoint")  # corrupt newest -> fall back to round 1
    with caplog.at_level(logging.INFO):
        train_run(synthetic_federated(**FED_KW), settings, 3, tmp_path, logging.getLogger("resume"))
    assert "skipping corrupt checkpoint" in caplog.text and "resuming from checkpoint round 1" in caplog.text
    _assert_same_outputs(reference, tmp_path)
    caplog.clear()
    other = json.loads(json.dumps(SETTINGS))
    other["training"]["lr"] = 0.01  # another config hash: no resume
    with caplog.at_level(logging.INFO):
        train_run(synthetic_federated(**FED_KW), other, 3, tmp_path / "x", logging.getLogger("resume"))
    (tmp_path / "x" / "checkpoints").mkdir(exist_ok=True)
    for f in (tmp_path / "checkpoints").glob("round_*.pt"):
        (tmp_path / "x" / "checkpoints" / f.name).write_bytes(f.read_bytes())
    caplog.clear()
    with caplog.at_level(logging.INFO):
        train_run(synthetic_federated(**FED_KW), other, 3, tmp_path / "x", logging.getLogger("resume"))
    assert "config hash" in caplog.text and "resuming" not in caplog.text


# ---------------------------------------------------------------------------------------------
# Every method of the default study, on real MNIST-5k
# ---------------------------------------------------------------------------------------------
ALGORITHMS = cc.load_config(Path(REPO) / "config" / "config.yaml")["study"]["algorithms"]


def _die_after(train, kill_after: int) -> None:
    """The forked child: train with the KILL_ENV hook, which SIGKILLs the process after round ``kill_after``."""
    os.environ[KILL_ENV] = str(kill_after)
    try:
        train()
    except BaseException:  # noqa: BLE001 - report, then leave with a code the parent can tell apart
        traceback.print_exc()
        os._exit(2)
    os._exit(3)  # the hook never fired


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def kill(train, run_dir: Path, kill_after: int) -> None:
    """Run ``train`` in a forked child process that is SIGKILLed after round ``kill_after`` (the engine's
    KILL_ENV hook, as in the subprocess tests above, without paying a fresh interpreter and its imports),
    and check that it died leaving only checkpoints, the newest of that round."""
    assert KILL_ENV not in os.environ
    child = multiprocessing.get_context("fork").Process(target=_die_after, args=(train, kill_after))
    child.start()
    child.join(timeout=900)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"the run to be killed after round {kill_after} was still running after 900 s")
    assert child.exitcode == -signal.SIGKILL, f"the killed run ended with {child.exitcode}, not SIGKILL"
    assert not (run_dir / "history.parquet").exists()
    checkpoints = sorted((run_dir / "checkpoints").glob("round_*.pt"))
    assert checkpoints and checkpoints[-1].name == f"round_{kill_after:05d}.pt", checkpoints


def restart(train) -> list[str]:
    """Run ``train`` again in this process (nothing is killed); returns its log messages (logger ``cflcore``)."""
    assert KILL_ENV not in os.environ
    handler, logger = _Messages(), logging.getLogger("cflcore")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        train()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return handler.messages


def kill_and_resume(train, run_dir: Path, kill_after: int) -> list[str]:
    kill(train, run_dir, kill_after)
    return restart(train)


TEMPERATURE_CASE = "ocfl-km"


def kill_round(study, algorithm: str) -> int:
    """The round after which ``algorithm``'s run is killed, read from its uninterrupted run: one after which
    the method's state (not only the models) decides what the next rounds do.

    * OCFL: its clustering round (the partition, ``clustered``; with late clients the clustering round, the
      found clusters and their centroids decide the join in the next round), except ``TEMPERATURE_CASE``,
      killed the round BEFORE it: the temperature history decides whether the trigger fires next round
      (after clustering the temperatures are never read again; the OCFL variants share one strategy class);
    * SCL: its first split (the partition, and ``next_id`` names the children of the later split);
    * BCL: its clustering round (``clustered`` stops a second clustering);
    * FedGWC: between its first two splits, mid-way through the children's MSE decline (MSE, interaction
      matrix, sampling counts, ``next_id`` of the next split);
    * BNC, Louvain, IFCA: mid-run. BNC has no state of its own; Louvain's partition (cluster ids are matched
      to it) and client-to-community distances (1NN picks each client's start model) matter here, while its
      distance graph, ``seen``, ``communities`` and ``next_id`` and IFCA's choices are rebuilt every round at
      full participation: test_partial_participation_state_survives_a_kill covers those."""
    settings = study.settings(algorithm)
    method, n_rounds = settings["algorithm"]["method"], settings["training"]["rounds"]
    server = study.table(algorithm, "server").set_index("round")
    changes = server.index[server["clustered_now"]].tolist()
    if method == "ocfl":
        assert changes, "OCFL never clustered"
        return changes[0] - 1 if algorithm == TEMPERATURE_CASE else changes[0]
    if method == "scl":
        assert len(changes) >= 2, "SCL split once only: nothing after the kill would use next_id"
        return changes[0]
    if method == "bcl":
        return changes[0]
    if method == "fedgwc":
        assert len(changes) >= 2, "FedGWC split once only"
        k = (changes[0] + changes[1]) // 2
        assert changes[0] < k < changes[1]
        assert settings["algorithm"]["epsilon"] < server.loc[k, "min_mse"] < 1.0  # still declining
        return k
    return n_rounds // 2 - 1


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_method_resumes_bit_identically_on_mnist(mnist_study, algorithm, tmp_path, monkeypatch):
    """Killed after ``kill_round`` and restarted, with checkpoints every round: history, server, gram,
    divergence and models are those of the uninterrupted run of tests/workflow/test_end_to_end.py (default settings,
    checkpoints every 4 rounds: checkpointing changes nothing either)."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    reference = mnist_study.run(algorithm)
    k = kill_round(mnist_study, algorithm)
    settings = mnist_study.settings(algorithm)
    settings["engine"]["checkpoint_every"] = 1
    run = tmp_path / "run"
    log = kill_and_resume(lambda: mnist_study.train(algorithm, run, settings), run, k)
    assert f"resuming from checkpoint round {k}" in log, log[:3]
    _assert_same_outputs(reference, run)


@pytest.mark.parametrize("method,kill_after", [("louvain", 0), ("ifca", 2)])
def test_partial_participation_state_survives_a_kill(tmp_path, monkeypatch, method, kill_after):
    """Partial participation (engine.participation 0.8, synthetic federation): state that the full
    participation of the MNIST runs above rebuilds every round must be restored too.

    * Louvain, killed after round 0: the next round leaves out a client seen in round 0, whose graph edges
      and ``seen`` flag must survive, and finds a second community, named from ``next_id``; the client left
      out is evaluated with its 1NN community, among ``communities``;
    * IFCA, killed after round 2: the client not sampled in round 3 keeps its last choice (a model other
      than 0), which only the checkpointed partition knows."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    settings = json.loads(json.dumps(SETTINGS))
    settings["algorithm"] = {"method": method}
    settings["engine"]["checkpoint_every"] = 1
    fed = synthetic_federated(**FED_KW)
    reference = tmp_path / "ref"
    train_run(fed, settings, 3, reference, logging.getLogger("ref"))
    history = pd.read_parquet(reference / "history.parquet")
    sampled, cluster = (history.pivot(index="round", columns="client", values=v) for v in ("sampled", "cluster"))
    left_out = ~sampled.loc[kill_after + 1]
    if method == "louvain":
        server = pd.read_parquet(reference / "server.parquet").set_index("round")
        assert (left_out & sampled.loc[:kill_after].any()).any()
        assert server.loc[kill_after + 1, "n_communities"] > server.loc[kill_after, "n_communities"]
    else:
        assert (cluster.loc[kill_after, left_out] != 0).any()
    run = tmp_path / "run"
    log = kill_and_resume(lambda: train_run(fed, settings, 3, run, logging.getLogger("cflcore.fl")), run, kill_after)
    assert f"resuming from checkpoint round {kill_after}" in log
    _assert_same_outputs(reference, run)


KEPT_SGD = {**SETTINGS, "training": {**SETTINGS["training"], "momentum": 0.9, "optimizer_state": "kept", "lr_decay": 0.99},
        "engine": {**SETTINGS["engine"], "checkpoint_every": 1}}
"""A recipe that keeps each client's optimiser (momentum) across rounds and decays its lr (Sattler et al.'s demo,
config/home-scl-offline.yaml), at participation 0.8: a client left out of a round keeps its state for the next."""


@pytest.mark.parametrize("trainer, optimizer, kill_after", [("loop", "sgd", 1), ("loop", "sgd", 2), ("vmap", "sgd", 1),
                                                            ("vmap", "sgd", 2), ("vmap", "adam", 2)])
def test_kept_optimizer_state_resumes_bit_identically(tmp_path, monkeypatch, trainer, optimizer, kill_after):
    """``optimizer_state: kept``: killed after round k and resumed from its checkpoint, the run's outputs are those of
    the run straight through, bit for bit; so the checkpoint carries every client's momentum (Adam: both moments and
    the step count of its bias correction), on either trainer (the vmap trainer stacks them a chunk). The kept state
    is live: the same run with ``per_round`` gives other numbers, so a resume that started them afresh would differ."""
    monkeypatch.delenv(KILL_ENV, raising=False)
    fed = synthetic_federated(**FED_KW)
    recipe = {"optimizer": optimizer, **({"lr": 1e-3} if optimizer == "adam" else {})}
    kept = {**KEPT_SGD, "training": {**KEPT_SGD["training"], **recipe},
            "engine": {**KEPT_SGD["engine"], "trainer": trainer}}
    straight = tmp_path / "straight"
    train_run(fed, kept, 3, straight, logging.getLogger("ref"))
    fresh = tmp_path / "per_round"
    train_run(fed, {**kept, "training": {**kept["training"], "optimizer_state": "per_round"}}, 3, fresh,
              logging.getLogger("ref"))
    assert not pq.read_table(straight / "history.parquet").equals(pq.read_table(fresh / "history.parquet"))
    run = tmp_path / "run"
    log = kill_and_resume(lambda: train_run(fed, kept, 3, run, logging.getLogger("cflcore.fl")), run, kill_after)
    assert f"resuming from checkpoint round {kill_after}" in log
    _assert_same_outputs(straight, run)
    ck = torch.load(sorted((run / "checkpoints").glob("round_*.pt"))[-1], weights_only=True)
    states = ck["client_optimizer"]  # the clients sampled so far (4 of 5 a round), each with its momentum buffers
    buffers = "momentum" if optimizer == "sgd" else "exp_avg_sq"
    assert len(states) >= 4 and all(s["step"] > 0 and len(s[buffers]) > 0 for s in states.values())
