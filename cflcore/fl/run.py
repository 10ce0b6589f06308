"""A run of the federated engine (docs/architecture.md §5): :func:`train_run` builds the engine of one scenario ×
algorithm (:func:`build_engine`) and runs every round (cflcore.fl.engine), with checkpoints, monitors and outputs.

Settings: the train job's plain run settings (cflcore.config.run_settings) become the typed
:class:`cflcore.settings.RunSettings` once, in :func:`build_engine`; their ``auto`` values are resolved for the
device there (cflcore.fl.spec.resolved_engine), and the local training's spec comes from cflcore.fl.spec.train_spec.

After each round (and its checkpoint) the round's scalars go to the run's monitors (cflcore.fl.progress): the live
record ``progress.jsonl`` always, TensorBoard and a progress bar when asked; they read the round and change nothing.

Determinism: the outputs are a function of (settings, seed, data); ``seconds`` is the only wall-clock
column. A resumed run gives bit-identical outputs except ``server.parquet``'s ``seconds``.

The state's checkpoint (de)serialisation and ``config_hash`` are cflcore/fl/checkpoint.py. ``KILL_ENV`` /
``FAIL_ENV`` are test hooks a run honours (a SIGKILL or a failure after a round), so they stay beside it.
"""
from __future__ import annotations

import logging
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..data.federated import FederatedData
from ..defaults import device_identity
from ..errors import ConfigError, TrainingDiverged
from ..models import build_model, check_compatible
from ..settings import RunSettings, block_values, plain_value
from .artifacts import write_outputs
from .device import device_kind, prepare_device, set_fc_tf32
from .checkpoint import config_hash, load_latest, save_checkpoint, state_from_checkpoint, state_to_checkpoint
from .state import EngineState
from .evaluation import Evaluator
from ..strategies.base import Strategy, StrategyContext
from .flat_params import ModelLayout, Partition
from .personal import Personalisation, PersonalTrainer
from .progress import Monitor, ProgressRecord, round_record
from .participation import ClientAvailability
from .server import ServerOptimizer
from .streams import STREAM_TRAIN as _STREAM_TRAIN, train_seed  # noqa: F401 - the tests' name
from .spec import resolved_engine, train_spec
from .trainers import bf16_warning, derive_seed, resolve_trainer
# the engine's names the tests and benchmarks read here
from .engine import (_STREAM_ADAPT, _STREAM_SAMPLE, Engine, gram_temperature, same_partition,  # noqa: F401
                     sample_clients, spec_key, temperature)

KILL_ENV = "CFL_TEST_KILL_AFTER_ROUND"  # test hook: SIGKILL this process after that round (tests/fl/test_resume.py)
# test hook: raise TrainingDiverged after that round, once per attempt (a recorded failure, tests/workflow/test_faults.py)
FAIL_ENV = "CFL_TEST_FAIL_AFTER_ROUND"
_STREAM_INIT = 0x1A  # the initial models' streams


def _init_model(name: str, kwargs: dict[str, Any], seed: int) -> torch.nn.Module:
    """A seeded initialisation. Module constructors draw from torch's default generator, so it is forked
    (saved and restored by ``fork_rng``) and seeded only for the construction: no global state leaks."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_model(name, **kwargs)


def job_device(settings: RunSettings, device: str | None) -> str:
    """The device a job runs on: ``device`` (the config's, e.g. ``cuda:1``) where given, else the run settings'. The run
    settings hold the device as the run's identity does (cflcore.defaults.device_identity: ``cuda:N`` -> ``cuda``); a
    concrete device of another identity is refused in one line."""
    identity = settings.device
    if device is None:
        return identity
    if device_identity(device) != device_identity(identity):
        raise ConfigError(f"device: {device!r} does not match the run settings' device {identity!r}; allowed: "
                          f"{identity!r} or, for cuda, any cuda:N")
    return str(device)


def run_groups(fed: FederatedData) -> np.ndarray:
    """Each client's ground-truth group (the split's clusters; everyone in group 0 where the split records none): what
    ``engine.availability``'s group mode reads, the simulation's fact, never a strategy's."""
    truth = np.asarray(fed.true_clusters, dtype=np.int64)
    return truth if len(truth) == fed.n_clients else np.zeros(fed.n_clients, dtype=np.int64)


def label_share(fed: FederatedData, classes: Sequence[int]) -> np.ndarray:
    """Each client's share of training samples whose label is in ``classes`` (``engine.availability`` mode label)."""
    wanted = torch.as_tensor(sorted(int(c) for c in classes), dtype=torch.long)
    return np.asarray([float(torch.isin(c.y_train.cpu().long(), wanted).double().mean()) if c.n_train else 0.0
                       for c in fed.clients])


def build_engine(fed: FederatedData, settings: Mapping[str, Any] | RunSettings, seed: int, log: logging.Logger, *,
                 strategy: Strategy, device: str | None = None) -> tuple[Engine, EngineState]:
    """The engine of one run and its state at round 0; ``settings``: the run's (cflcore.config.run_settings, or a
    partial dict built by hand, typed here with the schema's defaults: :meth:`cflcore.settings.RunSettings.of`);
    ``strategy`` is the run's method, built by the caller (cflcore.strategies.build_strategy), which the engine sets up
    for this federation; ``device``: :func:`job_device`. The typed blocks carry their schema types, so nothing here
    casts a setting again."""
    settings = RunSettings.of(settings)
    training = settings.training
    device = prepare_device(job_device(settings, device), settings.engine.deterministic)
    set_fc_tf32(device, settings.engine.fc_tf32)
    torch.set_num_threads(settings.engine.threads)
    eng = resolved_engine(settings.engine, device)
    spec = train_spec(training, settings.engine, device)
    model_name, given_kwargs = training.model, plain_value(training.model_kwargs or {})
    c, h, w = fed.shape
    check_compatible(model_name, (c, h, w), fed.n_classes, **given_kwargs)
    dtype = torch.float64 if spec.precision == "fp64" else torch.float32
    if spec.precision == "bf16" and (warning := bf16_warning(device)):
        log.warning(warning)
    model_kwargs = {"in_channels": c, "image_size": [h, w], "n_classes": fed.n_classes, **given_kwargs}
    make = lambda i: _init_model(model_name, model_kwargs, derive_seed(seed, _STREAM_INIT, i))  # noqa: E731
    template = make(0)
    model_layout = ModelLayout.of(template)
    bn_local = eng.bn_stats == "local"
    cut = model_layout.partition(eng.bn_buffers_in_delta, bn_local)
    part = Partition(cut.shared.to(device), cut.extra.to(device), cut.local.to(device))  # indexing stays on the device
    init_full = model_layout.flatten(template).to(device=device, dtype=dtype)
    personal = Personalisation(**block_values(eng.personalisation))
    if personal.active:  # the schema refuses these too; settings built by hand meet them here
        if eng.trainer == "vmap" or spec.proximal_mu:
            raise ConfigError(f"engine.personalisation.kind: {personal.kind} needs engine.trainer loop or auto and "
                              f"engine.proximal_mu 0 (got {eng.trainer}, {spec.proximal_mu})")
        trainer = PersonalTrainer(make(0), model_layout, spec, device, personal)
    else:
        trainer = resolve_trainer(eng.trainer, device)(make(0), model_layout, spec, device)
    if settings.training.optimizer_state == "kept" and not trainer.keeps_optimizer_state:
        raise ConfigError(f"datasets.*.optimizer_state: kept needs a trainer that keeps the clients' optimiser states "
                          f"(engine.trainer loop, vmap or auto) and no engine.personalisation; this run trains with "
                          f"{type(trainer).__name__}")
    if eng.stragglers.share is not None and not trainer.stops_early:
        raise ConfigError(f"engine.stragglers.share: {eng.stragglers.share} needs engine.trainer loop or vmap and no "
                          f"engine.personalisation; this run trains with {type(trainer).__name__}")
    evaluator = Evaluator(make(0), model_layout, device, dtype, bf16=spec.precision == "bf16", channels_last=spec.channels_last)
    strategy.setup(StrategyContext(n_clients=fed.n_clients, n_params=len(part.shared), seed=int(seed), device=device,
                                   participation=eng.participation, n_true_clusters=fed.n_true_clusters, dtype=dtype,
                                   layer_sizes=model_layout.layer_sizes(eng.bn_buffers_in_delta, bn_local),
                                   array_sizes=model_layout.array_sizes(eng.bn_buffers_in_delta, bn_local),
                                   true_groups=np.asarray(fed.true_clusters) if strategy.reads_true_groups else None))
    make_init = lambda i: model_layout.flatten(make(i)).to(device=device, dtype=dtype)[part.shared]  # noqa: E731
    models = {int(k): v.to(device=device, dtype=dtype).clone() for k, v in strategy.initial_models(init_full[part.shared].clone(), make_init).items()}
    state = EngineState(0, models, {k: init_full[part.extra].clone() for k in models}, {},
                        {i: init_full[part.local].clone() for i in range(fed.n_clients)} if len(part.local) else {},
                        np.asarray(strategy.assignment.labels, dtype=np.int64))
    server = ServerOptimizer(kind=eng.server_optimizer, lr=eng.server_lr, betas=eng.server_betas, eps=eng.server_eps,
                             momentum=eng.server_momentum)
    availability = None if eng.availability.mode == "uniform" else ClientAvailability(
        eng.availability, int(seed), run_groups(fed), label_share(fed, eng.availability.classes))
    engine = Engine(fed=fed.to(device), settings=replace(settings, engine=eng), seed=int(seed), device=device,
                    strategy=strategy, model_layout=model_layout, part=part, trainer=trainer, evaluator=evaluator,
                    server=server, model_name=model_name, model_kwargs=model_kwargs, template=template, dtype=dtype,
                    log=log, personal=personal if personal.active else None, availability=availability)
    return engine, state


def train_run(fed: FederatedData, settings: Mapping[str, Any] | RunSettings, seed: int, out_dir: str | os.PathLike,
              log: logging.Logger | None = None, *, strategy: Strategy, monitors: Sequence[Monitor] = (),
              device: str | None = None) -> dict[str, Any]:
    """Run all rounds of one scenario × algorithm and write history/server/gram(/divergence).parquet and
    models.pt into ``out_dir``; resumes from the newest matching checkpoint in ``out_dir/checkpoints`` written on the
    same device kind (cflcore.fl.checkpoint). ``device``: the concrete device (:func:`job_device`). Returns what the
    bytes can still depend on beyond the settings (cflcore.fl.device.device_report, the resolved memory budget and
    chunk size): status.json records it.

    Every finished round goes to ``out_dir/progress.jsonl`` (cflcore.fl.progress.ProgressRecord) and to the extra
    ``monitors`` (TensorBoard, a progress bar), after its checkpoint; they read the round, they never change it."""
    log = log or logging.getLogger("cflcore.fl")
    out_dir = Path(out_dir)
    settings = RunSettings.of(settings)
    engine, state = build_engine(fed, settings, seed, log, strategy=strategy, device=device)
    n_rounds = settings.training.rounds
    every = engine.settings.engine.checkpoint_every
    chash = config_hash(settings, seed, fed)
    kind = device_kind(engine.device)
    ck = load_latest(out_dir, chash, log, kind)
    if ck is not None and not all("traffic" in r for r in ck["server_rows"]):
        # written before traffic.parquet existed (the same settings hash): its rounds' bytes are unknown, start afresh
        log.info("checkpoint round %d predates traffic.parquet: starting from round 0", int(ck["round"]))
        ck = None
    if ck is not None:
        state = state_from_checkpoint(ck, engine.device, engine.dtype)
        engine.strategy.load_state_dict(ck["strategy"])
        log.info("resuming from checkpoint round %d", state.next_round - 1)
    kill_after, fail_after = os.environ.get(KILL_ENV), os.environ.get(FAIL_ENV)
    watchers = [ProgressRecord(out_dir), *monitors]
    has_truth = len(fed.true_clusters) == fed.n_clients
    try:
        for m in watchers:
            m.start(state.next_round, n_rounds)
        for rnd in range(state.next_round, n_rounds):
            engine.run_round(state, rnd, n_rounds)
            if (rnd + 1) % every == 0 and rnd + 1 < n_rounds:
                save_checkpoint(out_dir, rnd, state_to_checkpoint(state, engine.strategy, chash, kind))
            truth = np.asarray(engine.fed.true_clusters) if has_truth else None  # the round's (a drift schedule's)
            record = round_record(state.server_rows[-1], n_rounds, state.labels, truth)
            for m in watchers:
                m.round(record)
            if kill_after is not None and int(kill_after) == rnd:
                os.kill(os.getpid(), signal.SIGKILL)
            if fail_after is not None and int(fail_after) == rnd:
                raise TrainingDiverged(f"test hook {FAIL_ENV}={rnd}")
    finally:
        for m in watchers:
            m.close()
    write_outputs(engine, state, out_dir, n_rounds - 1)
    return engine.hardware()
