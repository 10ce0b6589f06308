"""The device in a run's identity: ``cuda:N`` picks a GPU without rerunning anything (the run params hold
``cuda``); a checkpoint records the device kind it was written on, and a job on another kind restarts the run with
one warning line instead of mixing; status.json records the hardware and the resolved chunking."""
from __future__ import annotations

import json
import logging

import pytest
import torch

from cflcore import config as cc
from cflcore.data.synthetic import synthetic_federated
from cflcore.defaults import device_identity
from cflcore.errors import ConfigError
from cflcore.fl import run as engine
from cflcore.fl.device import device_kind, device_report
from cflcore.io import canonical_json
from cflcore.settings import RunSettings
from cflcore.strategies import build_strategy
from conftest import REPO
from test_resume import _assert_same_outputs

SETTINGS = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "batch_size": 8, "local_epochs": 1,
                         "rounds": 3},
            "engine": {"trainer": "loop", "checkpoint_every": 1}, "algorithm": {"method": "bnc"}, "device": "cpu"}


def _train(out, settings=SETTINGS, device=None, log=None):
    fed = synthetic_federated(n_clients=4, n_train=[16, 12, 16, 20])
    return engine.train_run(fed, settings, 3, out, log, strategy=build_strategy(settings["algorithm"]), device=device)


def test_cuda_index_is_not_part_of_the_run_identity():
    cfg = cc.load_config(f"{REPO}/config/tiny.yaml")
    params = {}
    for device in ("cuda:0", "cuda:1", "cuda", "cpu", "auto"):
        cfg["device"] = device
        params[device] = canonical_json(cc.run_settings(cfg, "digits", "bnc", "nonoverlap-balanced"))
    assert params["cuda:0"] == params["cuda:1"] == params["cuda"]
    assert len({params["cuda"], params["cpu"], params["auto"]}) == 3  # a CPU run is not a GPU run
    assert device_identity("cuda:12") == "cuda" and device_identity("auto") == "auto"


def test_a_concrete_device_must_match_the_settings_identity():
    assert engine.job_device(RunSettings.of({**SETTINGS, "device": "cuda"}), "cuda:3") == "cuda:3"
    assert engine.job_device(RunSettings.of(SETTINGS), None) == "cpu"
    with pytest.raises(ConfigError, match="does not match"):
        engine.job_device(RunSettings.of(SETTINGS), "cuda:0")


def test_a_checkpoint_of_another_device_kind_restarts_the_run(tmp_path, caplog):
    """A checkpoint written on another kind (here relabelled as a GPU's) is not resumed: one warning line, the run
    restarts from round 0 and ends with the uninterrupted run's bytes; one of this kind resumes."""
    _train(tmp_path / "ref")
    ck_path = sorted((tmp_path / "ref" / "checkpoints").glob("round_*.pt"))[0]
    ck = torch.load(ck_path, weights_only=True)
    assert ck["device_kind"] == device_kind(torch.device("cpu")) == "cpu"
    for name, kind, resumes in (("same", "cpu", True), ("other", "cuda:NVIDIA H100 80GB HBM3", False)):
        folder = tmp_path / name / "checkpoints"
        folder.mkdir(parents=True)
        torch.save({**ck, "device_kind": kind}, folder / ck_path.name)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="cflcore.fl"):
            _train(tmp_path / name, log=logging.getLogger("cflcore.fl"))
        messages = [r.getMessage() for r in caplog.records]
        assert any(m.startswith("resuming from checkpoint") for m in messages) is resumes, messages
        refused = [m for m in messages if m.startswith("not resuming")]
        assert len(refused) == (0 if resumes else 1)
        if not resumes:
            assert f"written on {kind}, this job runs on cpu" in refused[0] and "\n" not in refused[0]
        _assert_same_outputs(tmp_path / "ref", tmp_path / name)


def test_status_records_the_hardware(tmp_path):
    hardware = _train(tmp_path / "run", {**SETTINGS, "engine": {**SETTINGS["engine"], "trainer": "vmap"}})
    assert {"device", "kind", "name", "driver", "cuda", "torch", "memory_budget_mb", "chunk_size"} <= set(hardware)
    assert hardware["kind"] == "cpu" and hardware["torch"] == torch.__version__ and hardware["chunk_size"] >= 1
    json.dumps(hardware)  # status.json holds it as it is
    assert device_report(torch.device("cpu"))["cuda"] == torch.version.cuda
