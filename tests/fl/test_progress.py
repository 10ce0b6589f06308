"""A study you can watch: the live per-round record (cflcore.fl.progress), TensorBoard event files,
``cfl status`` (cflcore.status) and ``cfl train``'s progress bar.

The engine tests use the synthetic federation; the status tests train the tiny config's digits through ``cfl``
in a subprocess and read its results folder while it runs, after it is SIGKILLed and after its resume."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sklearn.metrics import adjusted_rand_score

from cflcore import config as cc
from cflcore import extras, layout
from cflcore.cli import main as cfl_main
from cflcore.errors import CflError, ConfigError
from cflcore.fl import progress
from cflcore.fl.run import KILL_ENV, train_run
from cflcore.data.synthetic import synthetic_federated
from cflcore.status import run_state, study_state, writer_alive
from cflcore.strategies import build_strategy
from conftest import REPO

SETTINGS = {"training": {"model": "tinyvgg", "optimizer": "sgd", "lr": 0.05, "momentum": 0.5, "batch_size": 8,
                         "local_epochs": 1, "rounds": 5},
            "engine": {"trainer": "loop", "checkpoint_every": 2, "participation": 0.8},
            "algorithm": {"method": "ocfl", "clusterer": "kmeans", "k": "oracle"}, "device": "cpu"}
FED_KW = {"n_clients": 5, "n_train": [24, 16, 24, 20, 24]}
RUN = "synth/s/n5/s3/ocfl-km"

SCRIPT = """
import json, sys
from cflcore.data.synthetic import synthetic_federated
from cflcore.fl.run import train_run
from cflcore.fl.progress import TensorBoardMonitor
from cflcore.strategies import build_strategy
settings = json.loads(sys.argv[3])
train_run(synthetic_federated(**json.loads(sys.argv[2])), settings, 3, sys.argv[1], strategy=build_strategy(settings["algorithm"]),
          monitors=[TensorBoardMonitor(sys.argv[4])])
"""


def _scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] as TensorBoard's own reader shows them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_record_and_tensorboard_every_round_outputs_unchanged(tmp_path):
    """Every round once in progress.jsonl and in the event file (read back with TensorBoard's reader), with the ARI
    of the round's partition; the Parquet outputs are the same bytes with or without TensorBoard."""
    pytest.importorskip("tensorboard")
    fed = synthetic_federated(**FED_KW)
    settings = {**SETTINGS, "engine": {**SETTINGS["engine"], "checkpoint_every": 100}}
    plain, watched = tmp_path / "plain", tmp_path / "watched"
    train_run(fed, settings, 3, plain, strategy=build_strategy(settings["algorithm"]))
    train_run(fed, settings, 3, watched, strategy=build_strategy(settings["algorithm"]),
              monitors=[progress.TensorBoardMonitor(tmp_path / "tb")])
    for name in ("history.parquet", "gram.parquet"):
        assert (plain / name).read_bytes() == (watched / name).read_bytes(), name
    a, b = (pq.read_table(d / "server.parquet").drop(["seconds"]) for d in (plain, watched))
    assert a.equals(b)

    record = progress.read_progress(watched / progress.PROGRESS)
    assert record["start"]["pid"] == os.getpid() and record["start"]["round"] == 0
    rounds = record["rounds"]
    assert [r["round"] for r in rounds] == list(range(5))
    history = pq.read_table(watched / "history.parquet").to_pandas()
    server = pq.read_table(watched / "server.parquet").to_pandas()
    for r in rounds:
        labels = history[history["round"] == r["round"]].sort_values("client")["cluster"].to_numpy()
        assert r["ari"] == pytest.approx(adjusted_rand_score(fed.true_clusters, labels))
        row = server[server["round"] == r["round"]].iloc[0]
        assert r["clusters"] == row["n_clusters"] and r["loss"] == row["mean_train_loss"]
        assert r["rounds"] == 5 and r["seconds"] > 0 and r["eta"] >= 0
    assert rounds[-1]["eta"] == 0

    scalars = _scalars(tmp_path / "tb")
    for name in ("loss", "local_f1", "clusters", "ari", "temperature"):
        assert [s for s, _ in scalars[f"run/{name}"]] == list(range(5)), name
    assert [v for _, v in scalars["run/loss"]] == pytest.approx([r["loss"] for r in rounds])
    assert [v for _, v in scalars["run/ari"]] == pytest.approx([r["ari"] for r in rounds])


def test_killed_run_is_resumable_and_resume_records_every_round_once(tmp_path):
    """SIGKILL after round 2 (checkpoint after round 1): the run shows as resumable; the resume truncates the record
    to the checkpoint's rounds and carries it on, and TensorBoard's reader shows every round once."""
    pytest.importorskip("tensorboard")
    results = tmp_path / "results"
    run_dir, tb = Path(layout.run_dir(str(results), RUN)), Path(layout.tensorboard_dir(str(results), RUN))

    def run(kill_after=None):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO}
        env.pop(KILL_ENV, None)
        if kill_after is not None:
            env[KILL_ENV] = str(kill_after)
        return subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir), json.dumps(FED_KW), json.dumps(SETTINGS),
                               str(tb)], env=env, capture_output=True, text=True, timeout=300)

    killed = run(kill_after=2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert [r["round"] for r in progress.read_progress(run_dir / progress.PROGRESS)["rounds"]] == [0, 1, 2]
    state = run_state(str(results), RUN, 5)
    assert (state.state, state.done_rounds) == ("resumable", 3)
    assert state.eta is not None and state.eta > 0

    resumed = run()
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    record = progress.read_progress(run_dir / progress.PROGRESS)
    assert [r["round"] for r in record["rounds"]] == [0, 1, 2, 3, 4]
    assert record["start"]["round"] == 2  # the resume's own start line: the checkpoint of round 1
    lines = (run_dir / progress.PROGRESS).read_text().splitlines()
    assert sum(json.loads(ln)["event"] == "start" for ln in lines) == 1
    for name, points in _scalars(tb).items():
        assert [s for s, _ in points] == [0, 1, 2, 3, 4], name
    (run_dir / "status.json").write_text(json.dumps({"status": "ok"}))
    assert run_state(str(results), RUN, 5).state == "done"


def test_writer_alive_checks_pid_process_start_and_freshness():
    me = {"pid": os.getpid(), "host": socket.gethostname(), "proc_start": progress.process_start(os.getpid())}
    now = time.time()
    assert writer_alive(me, now, 1.0, now)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not writer_alive({**me, "pid": child.pid}, now, 1.0, now)  # exited
    if me["proc_start"] is not None:  # a pid now held by another process than the one that wrote the record
        assert not writer_alive({**me, "proc_start": me["proc_start"] - 1}, now, 1.0, now)
    other = {**me, "host": "elsewhere", "pid": 1}
    assert writer_alive(other, now - 60, 1.0, now)
    assert not writer_alive(other, now - 3600, 1.0, now)
    assert writer_alive(other, now - 3600, 2000.0, now)  # three rounds of its own pace have not passed
    assert not writer_alive(None, now, None, now)


def test_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / progress.PROGRESS
    path.write_text('{"event": "round", "round": 0}\n{"event": "round", "rou')
    assert [r["round"] for r in progress.read_progress(path)["rounds"]] == [0]


def test_tensorboard_switch_without_the_extra_is_a_config_error(monkeypatch):
    monkeypatch.setattr(extras, "tensorboard_available", lambda: False)
    with pytest.raises(ConfigError) as e:
        cc.load_config(f"{REPO}/config/tiny.yaml", overrides={"monitor": {"tensorboard": True}})
    msg = str(e.value)
    assert "monitor.tensorboard" in msg and ".[tensorboard]" in msg and "\n" not in msg
    assert cc.load_config(f"{REPO}/config/tiny.yaml")["monitor"] == {"tensorboard": False}


def test_status_of_a_results_dir_that_does_not_match(tmp_path):
    cfg = cc.load_config(f"{REPO}/config/tiny.yaml", overrides={"results_dir": str(tmp_path / "nowhere")})
    with pytest.raises(CflError, match="does not exist"):
        study_state(cfg)
    other = tmp_path / "other"
    (Path(layout.run_dir(str(other), "mnist/iid/n9/s1/fedavg"))).mkdir(parents=True)
    cfg = cc.load_config(f"{REPO}/config/tiny.yaml", overrides={"results_dir": str(other)})
    with pytest.raises(CflError, match="none of the 3 this config plans") as e:
        study_state(cfg)
    assert "\n" not in str(e.value)
    assert cfl_main(["--config", f"{REPO}/config/tiny.yaml", "--set", f"results_dir={other}", "status"]) == 2


TINY_RUN = "digits/nonoverlap-balanced/n6/s0/ocfl-km"


def test_cfl_status_while_running_killed_and_resumed(tmp_path, capsys):
    """The tiny config's run trained by ``cfl train`` in a subprocess: ``cfl status`` shows it running with its round
    and an ETA; SIGKILLed it shows as resumable; resumed, it is done and its record has every round once."""
    results = tmp_path / "results"
    args = ["--config", f"{REPO}/config/tiny.yaml", "--set", f"results_dir={results}",
            "--set", "datasets.digits.rounds=40", "--set", "study.algorithms=[bnc,ocfl-km]"]
    scenario = ["--dataset", "digits", "--split", "nonoverlap-balanced", "--clients", "6", "--seed", "0"]
    assert cfl_main([*args, "data", "--dataset", "digits"]) == 0
    assert cfl_main([*args, "split", *scenario]) == 0
    cfg = cc.load_config(f"{REPO}/config/tiny.yaml", overrides=cc_overrides(results))
    assert {r.state for r in study_state(cfg).runs} == {"not started"}

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO, KILL_ENV: "30"}
    cmd = [sys.executable, "-m", "cflcore.cli", *args, "train", *scenario, "--algorithm", "ocfl-km"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = None
    deadline = time.time() + 240
    while proc.poll() is None and time.time() < deadline:
        study = study_state(cfg)
        state = {r.run: r for r in study.runs}[TINY_RUN]
        if state.state == "running" and state.done_rounds >= 2 and state.eta is not None:
            seen = (state, study)
            break
        time.sleep(0.02)
    assert seen is not None, "cfl status never showed the run running with an ETA"
    state, study = seen
    assert 2 <= state.done_rounds <= 40 and state.eta > 0 and state.seconds_per_round > 0
    assert study.counts["running"] == 1 and study.counts["not started"] == 1 and study.eta is not None
    proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL  # the kill hook after round 30

    state = run_state(str(results), TINY_RUN, 40)
    assert (state.state, state.done_rounds) == ("resumable", 31)
    capsys.readouterr()
    assert cfl_main([*args, "status"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if TINY_RUN in ln)
    assert "resumable" in line and "31/40" in line
    assert "2 runs: 1 resumable, 1 not started" in out

    env.pop(KILL_ENV)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming from checkpoint round 30" in done.stderr
    rounds = progress.read_progress(layout.progress_file(str(results), TINY_RUN))["rounds"]
    assert [r["round"] for r in rounds] == list(range(40))
    assert run_state(str(results), TINY_RUN, 40).state == "done"


def cc_overrides(results: Path) -> dict:
    return {"results_dir": str(results), "datasets": {"digits": {"rounds": 40}},
            "study": {"algorithms": ["bnc", "ocfl-km"]}}


def test_progress_bar_on_a_terminal_only(tmp_path):
    """``cfl train`` on a terminal (a pseudo-terminal here) draws rich's bar; with its output piped it logs lines only."""
    import pty

    results = tmp_path / "results"
    args = ["--config", f"{REPO}/config/tiny.yaml", "--set", f"results_dir={results}"]
    scenario = ["--dataset", "digits", "--split", "nonoverlap-balanced", "--clients", "6", "--seed", "0"]
    assert cfl_main([*args, "data", "--dataset", "digits"]) == 0
    assert cfl_main([*args, "split", *scenario]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO, "COLUMNS": "160", "TERM": "xterm"}
    cmd = [sys.executable, "-m", "cflcore.cli", *args, "train", *scenario, "--algorithm", "bnc"]
    piped = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0 and "round 2:" in piped.stderr and "━" not in piped.stderr + piped.stdout

    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=300) == 0
    text = b"".join(chunks).decode(errors="replace")
    assert "━" in text and "3/3" in text and "round 2:" in text


def test_status_watch_refreshes_until_interrupted(tmp_path, monkeypatch):
    from cflcore import status

    results = tmp_path / "results"
    results.mkdir()
    cfg = cc.load_config(f"{REPO}/config/tiny.yaml", overrides={"results_dir": str(results)})
    calls = []

    def sleep(seconds):
        calls.append(seconds)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(status.time, "sleep", sleep)
    assert status.show(cfg, watch=True, interval=0.5) == 0
    assert calls == [0.5, 0.5, 0.5]


def test_study_eta_from_records(tmp_path):
    """A run in its first round gets the pace of a finished run of its dataset; the study's ETA is the work left over
    the runs running now. Records written by hand (this test process plays the live writer)."""
    results = tmp_path / "results"
    cfg = cc.load_config(f"{REPO}/config/tiny.yaml", overrides={"results_dir": str(results)})
    done, first, waiting = (f"digits/nonoverlap-balanced/n6/s0/{a}" for a in ("bnc", "ocfl-km", "ocfl-hdb"))
    now = time.time()
    me = {"event": "start", "round": 0, "rounds": 3, "pid": os.getpid(), "host": socket.gethostname(),
          "proc_start": progress.process_start(os.getpid()), "time": now - 5}
    lines = [{"event": "round", "round": r, "rounds": 3, "seconds": 2.0, "eta": 2.0 * (2 - r), "time": now - 10 + r}
             for r in range(3)]
    for run, content in ((done, [{**me, "pid": 1, "host": "elsewhere", "time": now - 20}, *lines]), (first, [me])):
        Path(layout.run_dir(str(results), run)).mkdir(parents=True)
        Path(layout.progress_file(str(results), run)).write_text("".join(json.dumps(x) + "\n" for x in content))
    Path(layout.run_file(str(results), done, "status.json")).write_text(json.dumps({"status": "ok"}))
    study = study_state(cfg, now=now)
    states = {r.run: r for r in study.runs}
    assert (states[done].state, states[done].seconds_per_round) == ("done", 2.0)
    assert (states[first].state, states[first].done_rounds, states[first].eta) == ("running", 0, 6.0)
    assert "similar runs" in states[first].note
    assert states[waiting].state == "not started"
    assert study.eta == pytest.approx(6.0 + 6.0)  # both runs' 3 rounds at 2 s, one running
    assert study.counts == {"running": 1, "resumable": 0, "not started": 1, "failed": 0, "done": 1}


def test_record_of_another_rounds_count_is_noted(tmp_path):
    results = tmp_path / "results"
    Path(layout.run_dir(str(results), TINY_RUN)).mkdir(parents=True)
    start = {"event": "start", "round": 0, "rounds": 7, "pid": 1, "host": "elsewhere", "time": 0.0}
    Path(layout.progress_file(str(results), TINY_RUN)).write_text(json.dumps(start) + "\n")
    Path(layout.run_file(str(results), TINY_RUN, "status.json")).write_text(json.dumps({"status": "ok"}))
    assert "recorded with 7 rounds, this config plans 3" in run_state(str(results), TINY_RUN, 3).note
