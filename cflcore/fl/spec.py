"""A run's local training on its device, from its typed settings: the engine block with its ``auto`` values resolved
(:func:`resolved_engine`) and the :class:`~cflcore.fl.trainers.TrainSpec` the trainers take (:func:`train_spec`).

The engine (cflcore.fl.run.build_engine) and the centralised proxy (cflcore.fl.centralised) take theirs from here, so
neither restates an engine default and neither imports the other (an edit to the engine reruns no proxy job).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..settings import EngineSettings, TrainingSettings
from .optim import ClientOptimizer
from .trainers import TrainSpec, resolve_channels_last, resolve_memory_budget, resolve_ragged_batches

if TYPE_CHECKING:
    import torch


def resolved_engine(eng: EngineSettings, device: torch.device) -> EngineSettings:
    """The engine block with its ``auto`` values resolved for ``device`` (memory budget, channels-last, ragged
    batches): what the engine reads; the run's settings and its checkpoints' config hash keep ``auto``."""
    return replace(eng, memory_budget_mb=resolve_memory_budget(eng.memory_budget_mb, device, eng.gpu_jobs),
                   channels_last=resolve_channels_last(eng.channels_last, device),
                   ragged_batches=resolve_ragged_batches(eng.ragged_batches, device))


def train_spec(training: TrainingSettings, eng: EngineSettings, device: torch.device) -> TrainSpec:
    """The local training of a run on ``device``: the dataset's recipe and the engine block (its ``auto`` values
    resolved here, :func:`resolved_engine`)."""
    resolved = resolved_engine(eng, device)
    return TrainSpec(optimizer=ClientOptimizer.from_training(training), batch_size=training.batch_size,
                     local_epochs=training.local_epochs, precision=resolved.precision,
                     channels_last=resolved.channels_last, memory_budget_mb=resolved.memory_budget_mb,
                     compile=resolved.compile, proximal_mu=resolved.proximal_mu, ragged_batches=resolved.ragged_batches,
                     conv_form=resolved.conv_form,
                     planned_gpu_jobs=eng.gpu_jobs if eng.memory_budget_mb == "auto" and device.type == "cuda" else None)
