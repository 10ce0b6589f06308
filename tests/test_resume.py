"""Kill-and-resume: a run SIGKILLed after round k and restarted gives the outputs of an uninterrupted run."""
import json
import logging
import os
import signal
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from cflcore.fl.run import KILL_ENV, train_run
from cflcore.fl.synthetic import synthetic_federated

SETTINGS = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "momentum": 0.5, "batch_size": 8,
                         "local_epochs": 1, "rounds": 5},
            "engine": {"trainer": "loop", "checkpoint_every": 2, "participation": 0.8}, "algorithm": {"method": "bnc"},
            "device": "cpu"}
FED_KW = {"n_clients": 5, "n_train": [24, 16, 24, 20, 24]}

SCRIPT = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
from cflcore.fl.synthetic import synthetic_federated
from cflcore.fl.run import train_run
train_run(synthetic_federated(**json.loads(sys.argv[2])), json.loads(sys.argv[3]), 3, sys.argv[1])
"""


def _run(out_dir, kill_after=None, settings=SETTINGS):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(KILL_ENV, None)
    if kill_after is not None:
        env[KILL_ENV] = str(kill_after)
    return subprocess.run([sys.executable, "-c", SCRIPT, str(out_dir), json.dumps(FED_KW), json.dumps(settings)],
                          env=env, capture_output=True, text=True, timeout=300)


def _assert_same_outputs(a, b):
    for name in ("history.parquet", "gram.parquet"):
        assert pq.read_table(a / name).equals(pq.read_table(b / name)), name
    sa, sb = (pd.read_parquet(d / "server.parquet").drop(columns="seconds") for d in (a, b))
    pd.testing.assert_frame_equal(sa, sb)
    ma, mb = (torch.load(d / "models.pt", weights_only=True) for d in (a, b))
    assert ma.keys() == mb.keys() and torch.equal(ma["labels"], mb["labels"])
    for c in ma["cluster_models"]:
        for k, v in ma["cluster_models"][c].items():
            assert torch.equal(v, mb["cluster_models"][c][k]), k


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
