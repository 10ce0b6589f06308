"""Centralised training on a scenario's pooled client data: the update norm of the model in every round.

A file kind the workflow builds beside the split for any strategy that declares it among its inputs
(``Strategy.inputs``, docs/architecture.md §12; kind :data:`cflcore.strategies.base.CENTRALISED_UPDATE_NORMS`, file :data:`cflcore.filenames.CENTRALISED_UPDATE_NORMS_FILE`); this module knows no
method. :func:`centralised_update_norms` trains the dataset's model centrally on the scenario's pooled client
training data for the study's rounds, with the clients' own recipe (optimiser, learning rate, batch size, local
epochs), and returns ‖Δθ̂ᵗ‖ = ‖SGD(θᵗ, D) − θᵗ‖ per round over the shared parameters (the vector the engine
aggregates). A round is ``round_size``:

- ``client`` (default): a client's round: each round draws, without replacement, as many pooled rows as a client
  holds on average and runs the local epochs on them, so that Δθ̂ᵗ has the step count, and so the scale, of a
  client's update;
- ``epoch``: the local epochs over the whole pooled set (SGD(θ, D) read literally): N times the steps of a client's
  round.

Its one user today is SCL's ``epsilon: proxy`` (000 App. A.2; cflcore/strategies/scl.py derives ε₁, ε₂ and the
cool-down from these norms).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

ROUND_SIZES = ("client", "epoch")
UPDATE_NORM_COLUMN = "update_norm"
METADATA_KEY = "centralised_update_norms"
_STREAM_CENTRALISED = 0x5C  # this training's own random streams: initial model, rows per round, batch order


def centralised_update_norms(fed: Any, training: Mapping[str, Any], engine: Mapping[str, Any], seed: int,
                             round_size: str = "client") -> np.ndarray:
    """Δθ̂ᵗ of a centralised training on ``fed``'s pooled client training data, one per round of
    ``training["rounds"]`` (see the module docstring for ``round_size``)."""
    import torch

    from .flat_params import ModelLayout
    from .spec import train_spec
    from .trainers import LoopTrainer, derive_seed
    from ..models import build_model
    from ..settings import EngineSettings, TrainingSettings, plain_value
    from ..data.federated import ClientData

    if round_size not in ROUND_SIZES:
        raise ValueError(f"round_size {round_size!r}: allowed {', '.join(ROUND_SIZES)}")
    recipe = TrainingSettings.of(training)  # typed once, with the schema's defaults
    c, h, w = fed.shape
    kwargs = {"in_channels": c, "image_size": [h, w], "n_classes": fed.n_classes, **plain_value(recipe.model_kwargs or {})}
    with torch.random.fork_rng(devices=[]):  # constructors draw from the default generator: fork it, seed it
        torch.manual_seed(derive_seed(seed, _STREAM_CENTRALISED, 0))
        model = build_model(recipe.model, **kwargs)
    model_layout = ModelLayout.of(model)
    eng = EngineSettings.of(engine)  # config.centralised_settings gives its two shared-vector keys; the rest: the schema's
    shared = model_layout.partition(eng.bn_buffers_in_delta, eng.bn_stats == "local").shared
    cpu = torch.device("cpu")
    trainer = LoopTrainer(model, model_layout, train_spec(recipe, eng, cpu), cpu)  # the engine's recipe, on a CPU
    x = torch.cat([cl.x_train for cl in fed.clients])
    y = torch.cat([cl.y_train for cl in fed.clients])
    empty = np.zeros(0, dtype=np.int64)
    per_client = max(1, round(len(y) / len(fed.clients)))
    theta = model_layout.flatten(model).to(torch.float32)
    norms = []
    for rnd in range(int(recipe.rounds)):
        if round_size == "client":
            rows = torch.randperm(len(y), generator=torch.Generator().manual_seed(derive_seed(seed, _STREAM_CENTRALISED, 1, rnd)))[:per_client]
            data = ClientData(x[rows], y[rows], x[:0], y[:0], empty, empty)
        else:
            data = ClientData(x, y, x[:0], y[:0], empty, empty)
        new, _ = trainer.train_client(theta, data, derive_seed(seed, _STREAM_CENTRALISED, 2, rnd))
        norms.append(float(torch.linalg.vector_norm((new[shared] - theta[shared]).to(torch.float64))))
        theta = new.clone()
    return np.asarray(norms, dtype=np.float64)


def write_update_norms(norms: np.ndarray, out_path: Any, meta: Mapping[str, Any]) -> None:
    """The file: ``round`` (0-based), ``update_norm``; ``meta`` (round size, rounds, seed) in the schema metadata
    under :data:`METADATA_KEY`."""
    import pyarrow as pa

    from ..io import write_parquet

    table = pa.table({"round": pa.array(np.arange(len(norms)), pa.int64()), UPDATE_NORM_COLUMN: pa.array(norms, pa.float64())})
    write_parquet(table, out_path, metadata={METADATA_KEY: dict(meta)})
