"""The engine's entry points as the train stage calls them: the run's strategy built from its settings
(cflcore.stages.train), so that tests drive the engine with one settings dict."""
from __future__ import annotations

import logging
import os
from typing import Any, Mapping

from cflcore.data.federated import FederatedData
from cflcore.fl import run as engine
from cflcore.strategies import build_strategy


def train_run(fed: FederatedData, settings: dict, seed: int, out_dir: str | os.PathLike,
              log: logging.Logger | None = None) -> None:
    engine.train_run(fed, settings, seed, out_dir, log, strategy=build_strategy(settings["algorithm"]))


def build_engine(fed: FederatedData, settings: Mapping[str, Any], seed: int,
                 log: logging.Logger) -> tuple[engine.Engine, engine.EngineState]:
    return engine.build_engine(fed, settings, seed, log, strategy=build_strategy(settings["algorithm"]))


def copy_checkpoints_through(run_dir: str | os.PathLike, dest: str | os.PathLike, last_round: int) -> None:
    """Copy ``run_dir``'s checkpoints of rounds ≤ ``last_round`` into a fresh ``dest``/checkpoints: a run
    killed after that round, to resume with a tampered state loader."""
    from pathlib import Path

    target = Path(dest) / "checkpoints"
    target.mkdir(parents=True)
    for f in (Path(run_dir) / "checkpoints").glob("round_*.pt"):
        if f.name <= f"round_{last_round:05d}.pt":
            (target / f.name).write_bytes(f.read_bytes())


def cpu_train_spec(*, optimizer: Any, batch_size: int, local_epochs: int, **options: Any) -> Any:
    """A TrainSpec (cflcore.fl.trainers) built as the engine builds one on a CPU: ``options`` is a partial engine block
    (``precision="fp64"``, ``memory_budget_mb=64``...), the schema's defaults fill the rest and its ``auto`` values are
    resolved for the CPU (cflcore.fl.spec.resolved_engine), so a test restates no default."""
    import torch

    from cflcore.fl.trainers import TrainSpec
    from cflcore.fl.spec import resolved_engine
    from cflcore.settings import EngineSettings

    eng = resolved_engine(EngineSettings.of(options), torch.device("cpu"))
    return TrainSpec(optimizer=optimizer, batch_size=batch_size, local_epochs=local_epochs, precision=eng.precision,
                     channels_last=eng.channels_last, memory_budget_mb=eng.memory_budget_mb, compile=eng.compile,
                     proximal_mu=eng.proximal_mu, ragged_batches=eng.ragged_batches, conv_form=eng.conv_form)
