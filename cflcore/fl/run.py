"""The federated engine (docs/architecture.md §5): ``train_run`` runs every round of one scenario × algorithm.

One round: sample clients (seeded by (seed, round) only) -> strategy.configure says each client's start
model -> the trainer trains all sampled clients -> strategy.aggregate returns the partition -> per-cluster
server-optimiser aggregation -> evaluation -> rows for history/server/gram/divergence -> checkpoint.
Memory: one (N × P) round buffer, allocated once, holds the start rows and is trained in place.
The round's ONE Gram product (cflcore.clustering.divergence.update_gram, float64-accumulated, its tolerance
stated there) is taken in one pass over it and the cluster models; it is recorded (gram.parquet), gives the
temperature and is shared with the strategy (RoundUpdates.gram). The buffer becomes the deltas in place, and
then the trained vectors again bit for bit (cflcore.fl.deltas), only when the strategy reads the deltas.
FedAvg reads the trained vectors in place (cflcore.fl.server.rows_mean).

Settings: the train job's plain run settings (cflcore.config.run_settings) become the typed
:class:`cflcore.settings.RunSettings` once, in :func:`build_engine`; the engine reads attributes
(``self.settings.engine.participation``; the schema's ``engine`` block, rendered in docs/configuration.md).

After each round (and its checkpoint) the round's scalars go to the run's monitors (cflcore.fl.progress): the live
record ``progress.jsonl`` always, TensorBoard and a progress bar when asked; they read the round and change nothing.

Determinism: the outputs are a function of (settings, seed, data); ``seconds`` is the only wall-clock
column. A resumed run gives bit-identical outputs except ``server.parquet``'s ``seconds``.

This module is the engine only: its state is cflcore/fl/state.py, the state's checkpoint (de)serialisation and
``config_hash`` are cflcore/fl/checkpoint.py, the run's tables and ``models.pt`` cflcore/fl/artifacts.py, the device
cflcore/fl/device.py. ``KILL_ENV`` / ``FAIL_ENV`` are test hooks the engine itself honours (a SIGKILL or a failure
after a round), so they stay beside it.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..clustering.divergence import update_gram
from ..data.federated import FederatedData
from ..defaults import device_identity
from ..errors import CflError, ConfigError, TrainingDiverged
from ..io import canonical_json
from ..models import build_model, check_compatible
from ..settings import RunSettings, block_values, plain_value
from .artifacts import GLOBAL_COLUMNS, write_outputs
from .device import device_kind, device_report, prepare_device
from .checkpoint import config_hash, load_latest, plain, save_checkpoint, state_from_checkpoint, state_to_checkpoint
from .state import EngineState
from .deltas import restore_, to_deltas_
from .evaluation import Evaluator, Scores
from ..strategies.base import ClusterAssignment, RoundUpdates, StartSpec, Strategy, StrategyContext
from .flat_params import ModelLayout, Partition
from .optim import ClientOptimizer, OptimizerState, round_lr
from .personal import Personalisation, PersonalTrainer
from .progress import Monitor, ProgressRecord, round_record
from .server import ServerOptimizer, aggregate_cluster, rows_mean, weighted_mean
from .streams import STREAM_TRAIN as _STREAM_TRAIN, train_seed  # noqa: F401 - the tests' name
from .trainers import (TrainSpec, bf16_warning, derive_seed, resolve_channels_last, resolve_memory_budget,
                       resolve_ragged_batches, resolve_trainer)

KILL_ENV = "CFL_TEST_KILL_AFTER_ROUND"  # test hook: SIGKILL this process after that round (tests/fl/test_resume.py)
# test hook: raise TrainingDiverged after that round, once per attempt (a recorded failure, tests/workflow/test_faults.py)
FAIL_ENV = "CFL_TEST_FAIL_AFTER_ROUND"
_STREAM_SAMPLE, _STREAM_INIT, _STREAM_ADAPT = 0x5A, 0x1A, 0xAD  # local training's: cflcore.fl.streams.train_seed



# ---------------------------------------------------------------------------------------------
# Small pure helpers
# ---------------------------------------------------------------------------------------------
def sample_clients(seed: int, rnd: int, n_clients: int, participation: float) -> np.ndarray:
    """Sorted ids of the clients taking part in round ``rnd``: depends only on (seed, round)."""
    if participation >= 1.0:
        return np.arange(n_clients)
    m = max(1, int(round(participation * n_clients)))
    rng = np.random.default_rng([seed, _STREAM_SAMPLE, rnd])
    return np.sort(rng.choice(n_clients, size=m, replace=False))


def gram_temperature(gram: torch.Tensor, p: float = 2.0) -> float | None:
    """Clustering temperature T = ||Gamma||_p / lambda (000 Def. 7, eq. 9) from the round's one Gram product
    (cflcore.clustering.divergence, the single implementation the strategies and the what-if replay use too);
    None when n < 2 and nothing can diverge."""
    from ..clustering.divergence import cosine_divergence_from_gram
    from ..clustering.divergence import temperature as divergence_temperature

    if gram.shape[0] < 2:
        return None
    return divergence_temperature(cosine_divergence_from_gram(gram), p)


def temperature(deltas: torch.Tensor, p: float = 2.0) -> tuple[float | None, torch.Tensor]:
    """(:func:`gram_temperature`, Gram matrix) of the rows of ``deltas``: the engine's computation on a given
    matrix (benchmarks, tests)."""
    gram = update_gram(deltas)
    return gram_temperature(gram, p), gram


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two label vectors describe the same partition (cluster ids may differ)."""
    def canon(x: np.ndarray) -> np.ndarray:
        _, first, inv = np.unique(x, return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first))
        return order[inv]
    return bool(np.array_equal(canon(np.asarray(a)), canon(np.asarray(b))))


def spec_key(spec: StartSpec) -> str:
    """A string naming a distinct model: ``c3`` or ``mix:{"1":0.5,"2":0.5}``."""
    if isinstance(spec, Mapping):
        return "mix:" + canonical_json({str(int(k)): float(v) for k, v in sorted(spec.items())})
    return f"c{int(spec)}"


# ---------------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class Engine:
    """One run's engine; its parts by name (:func:`build_engine` builds them). ``settings``: the run's typed settings
    with the engine's ``auto`` values resolved for its device."""

    fed: FederatedData
    settings: RunSettings
    seed: int
    device: torch.device
    strategy: Strategy
    model_layout: ModelLayout
    part: Partition
    trainer: Any
    evaluator: Evaluator
    server: ServerOptimizer
    model_name: str
    model_kwargs: dict[str, Any]
    template: torch.nn.Module
    dtype: torch.dtype
    log: logging.Logger
    buffer: torch.Tensor | None = None  # the round buffer (round_buffer), reused across rounds
    personal: Personalisation | None = None  # engine.personalisation (None: the method's own local training)

    def hardware(self) -> dict[str, Any]:
        """status.json's ``hardware``: cflcore.fl.device.device_report plus the resolved ``memory_budget_mb`` and the
        vmap trainer's clients per chunk and round chunk plan (cflcore.fl.chunk_plan; None for the loop trainer)."""
        chunk = getattr(self.trainer, "last_chunk_size", None)
        plan = getattr(self.trainer, "last_plan", None)
        return {**device_report(self.device), "memory_budget_mb": int(self.settings.engine.memory_budget_mb),
                "trainer": type(self.trainer).__name__, "chunk_size": chunk,
                "chunk_plan": plan.as_dict() if plan is not None else None}

    # ----- vectors ----------------------------------------------------------------------------
    def shared_part(self, matrix: torch.Tensor) -> torch.Tensor:
        """Columns of the shared part; the matrix itself (no copy) when everything is shared (the usual case:
        large models x many clients would otherwise hold extra gigabytes)."""
        if len(self.part.shared) == self.model_layout.n_full:
            return matrix
        return matrix[:, self.part.shared]

    def full_vector(self, state: EngineState, spec: StartSpec, client: int | None, local: torch.Tensor | None = None) -> torch.Tensor:
        """The full vector of a (possibly mixed) StartSpec; the FedBN part is the client's own (or ``local``). Where
        every position is shared, a plain copy (no indexing, which deterministic mode sends down a sort-based path);
        otherwise the partition's indices live on the device (:func:`build_engine`), so nothing comes from the host."""
        if len(self.part.shared) == self.model_layout.n_full:
            if isinstance(spec, Mapping):  # convex mix (002 eq. 4), the same sum as below
                return sum(float(w) * state.models[int(c)] for c, w in spec.items()).to(self.dtype)  # type: ignore[union-attr]
            return state.models[int(spec)].clone()
        full = torch.empty(self.model_layout.n_full, dtype=self.dtype, device=self.device)
        if isinstance(spec, Mapping):
            weights = {int(c): float(w) for c, w in spec.items()}
            full[self.part.shared] = sum(w * state.models[c] for c, w in weights.items())  # convex mix (002 eq. 4)
            if len(self.part.extra):
                full[self.part.extra] = sum(w * state.extra[c] for c, w in weights.items())
        else:
            full[self.part.shared] = state.models[int(spec)]
            if len(self.part.extra):
                full[self.part.extra] = state.extra[int(spec)]
        if len(self.part.local):
            full[self.part.local] = local if local is not None else state.client_local[int(client)]  # type: ignore[arg-type]
        return full

    def start_rows(self, state: EngineState, specs: Sequence[StartSpec], clients: np.ndarray):
        """``start_of(row)``: the full start vector of the row's client, rebuilt on demand (no N × P start matrix).
        A cluster's model itself (no copy) when everything is shared, else :meth:`full_vector`."""
        plain = len(self.part.shared) == self.model_layout.n_full

        def start_of(row: int) -> torch.Tensor:
            spec = specs[row]
            if plain and not isinstance(spec, Mapping):
                return state.models[int(spec)]
            return self.full_vector(state, spec, int(clients[row]))

        return start_of

    def round_buffer(self, n: int) -> torch.Tensor:
        """The (n, n_full) round buffer: one allocation reused by every round (rows of the largest n so far),
        so no round pays for fresh pages; the trainer writes into it and the deltas live in it."""
        if self.buffer is None or self.buffer.shape[0] < n:
            self.buffer = None  # free the old one first
            self.buffer = torch.empty(n, self.model_layout.n_full, dtype=self.dtype, device=self.device)
        return self.buffer[:n]

    def mean_local(self, state: EngineState, clients: Sequence[int]) -> torch.Tensor | None:
        """FedBN: mean BN tensors of ``clients`` (used for a cluster's orchestrator evaluation and models.pt)."""
        if not len(self.part.local):
            return None
        clients = list(clients) or list(state.client_local)
        return torch.stack([state.client_local[int(c)] for c in clients]).mean(dim=0)

    # ----- the evaluate() function handed to strategies ----------------------------------------
    def make_evaluate(self, state: EngineState):
        fed = self.fed

        def evaluate(models: Mapping[int, torch.Tensor], clients: Sequence[int]) -> np.ndarray:
            """(len(clients), len(models)) mean training loss; one batched pass per model (FedBN: per client)."""
            clients = [int(c) for c in clients]
            out = np.zeros((len(clients), len(models)))
            xs = [fed.clients[c].x_train for c in clients]
            ys = [fed.clients[c].y_train for c in clients]
            owner = torch.cat([torch.full((len(y),), j, dtype=torch.long) for j, y in enumerate(ys)])
            x, y = torch.cat(xs), torch.cat(ys)
            for k, (key, vec) in enumerate(models.items()):
                ref = int(key) if int(key) in state.models else None
                if len(self.part.local):
                    for j, c in enumerate(clients):
                        full = self._full_from_shared(state, vec, ref, c)
                        out[j, k] = self.evaluator.mean_losses(full, xs[j], ys[j], torch.zeros(len(ys[j]), dtype=torch.long), 1)[0]
                else:
                    full = self._full_from_shared(state, vec, ref, None)
                    out[:, k] = self.evaluator.mean_losses(full, x, y, owner, len(clients))
            return out

        return evaluate

    def _full_from_shared(self, state: EngineState, vec: torch.Tensor, ref: int | None, client: int | None) -> torch.Tensor:
        """A full vector from a strategy-supplied shared vector. BN buffers kept out of the deltas come from
        cluster ``ref`` when the key names one, else their mean over clusters; FedBN parts from ``client``."""
        if len(self.part.shared) == self.model_layout.n_full:
            return vec.to(device=self.device, dtype=self.dtype).clone()
        full = torch.empty(self.model_layout.n_full, dtype=self.dtype, device=self.device)
        full[self.part.shared] = vec.to(device=self.device, dtype=self.dtype)
        if len(self.part.extra):
            full[self.part.extra] = state.extra[ref] if ref is not None else torch.stack(list(state.extra.values())).mean(0)
        if len(self.part.local):
            full[self.part.local] = state.client_local[client] if client is not None else self.mean_local(state, [])
        return full

    # ----- one round ----------------------------------------------------------------------------
    def run_round(self, state: EngineState, rnd: int, n_rounds: int) -> None:
        t0 = time.perf_counter()
        eng, fed = self.settings.engine, self.fed
        sampled = sample_clients(self.seed, rnd, fed.n_clients, float(eng.participation))
        sampled = np.asarray(self.strategy.select_clients(rnd, sampled), dtype=np.int64)
        if sampled.size == 0 or np.any(np.diff(sampled) <= 0) or sampled[0] < 0 or sampled[-1] >= fed.n_clients:
            raise CflError(f"strategy {self.strategy.registered_name!r}: select_clients() must return sorted, distinct "
                           f"client ids in 0..{fed.n_clients - 1}; got {sampled.tolist()}")
        evaluate = self.make_evaluate(state)
        specs = self.strategy.configure(rnd, sampled, evaluate, {c: m.clone() for c, m in state.models.items()})
        self.check_specs(specs, sampled, state, "configure")
        start_of = self.start_rows(state, [specs[int(c)] for c in sampled], sampled)
        buffer = self.round_buffer(len(sampled))
        for row in range(len(sampled)):
            buffer[row].copy_(start_of(row))
        training = self.settings.training
        if training.lr_decay != 1.0:  # the recipe's lr_decay (cflcore.fl.optim.round_lr)
            self.trainer.set_lr(round_lr(float(training.lr), float(training.lr_decay), rnd))
        kept = ({"optimizer_states": [state.client_optimizer.setdefault(int(c), OptimizerState()) for c in sampled]}
                if training.optimizer_state == "kept" else {})  # each client's own, continued in place
        result = self.trainer.train(buffer, [fed.clients[int(c)] for c in sampled],
                                    [train_seed(self.seed, rnd, int(c)) for c in sampled], buffer, **kept)
        for c, losses in zip(sampled, result.step_losses):
            bad = ~np.isfinite(losses)
            if bad.any():
                raise TrainingDiverged(f"round {rnd}: client {int(c)} training loss became {losses[bad][0]} at local step "
                                       f"{int(np.flatnonzero(bad)[0])}; lower datasets.*.lr or check that client's data")
        if result.params is not buffer:  # a trainer that does not write in place (tests, plug-ins)
            buffer.copy_(result.params.to(self.dtype))
        personal = getattr(result, "personal", None)  # pFedMe's personal models (cflcore.fl.personal.PersonalResult)
        if personal is not None:
            for row, c in enumerate(sampled):
                state.personal[int(c)] = personal[row].clone()
            if self.personal.all_clients:  # type: ignore[union-attr]
                self.train_unsampled_personal(state, rnd, sampled)
        news = buffer  # the trained vectors; the deltas only while a strategy that reads them holds them
        n_samples = np.array([fed.clients[int(c)].n_train for c in sampled])
        shared_start = lambda row: self.shared_part(start_of(row)[None])[0]  # noqa: E731
        keep_start = (self.strategy.needs_start_vectors and len(sampled) * len(self.part.shared) * buffer.element_size()
                      <= int(eng.memory_budget_mb) * 2 ** 20)
        starts = torch.stack([shared_start(r) for r in range(len(sampled))]) if keep_start else None
        deltas, gram, fixes, materialise = self.round_deltas(state, buffer, [specs[int(c)] for c in sampled], start_of, shared_start)
        previous = ClusterAssignment(state.labels)
        updates = RoundUpdates(rnd, sampled, deltas, starts, list(result.step_losses), n_samples, evaluate, previous,
                               shared_gram=gram, materialise=materialise)
        res = self.strategy.aggregate(updates)
        updates.materialise = None  # a strategy that kept ``updates`` cannot turn the buffer into deltas later
        temp = gram_temperature(gram)  # the round's one Gram product (000 eq. 9), as recorded
        del updates, deltas, starts
        if fixes:
            restore_(buffer, start_of, fixes[0])  # bit for bit the trained vectors again
        labels = np.asarray(res.assignment.labels, dtype=np.int64)
        if labels.shape != (fed.n_clients,):
            raise CflError(f"strategy {self.strategy.registered_name!r}: assignment has shape {labels.shape}, expected ({fed.n_clients},)")
        absent = np.asarray(self.strategy.absent_clients(rnd), dtype=np.int64)
        if np.isin(sampled, absent).any():
            raise CflError(f"strategy {self.strategy.registered_name!r}: clients {sampled[np.isin(sampled, absent)].tolist()} "
                           f"trained in round {rnd} but absent_clients() says they are not in the federation")
        self.aggregate(state, res.inherit, labels, sampled, shared_start, news, n_samples, res.aggregate_as,
                       res.keep_models)
        for c, vec in res.models.items():  # a strategy's own cluster models (StrategyResult.models)
            if int(c) in state.models:
                state.models[int(c)] = vec.to(device=self.device, dtype=self.dtype)
        if len(self.part.local):
            for row, c in enumerate(sampled):
                state.client_local[int(c)] = news[row, self.part.local].clone()
        self.record_matrices(state, rnd, sampled, gram, res.divergence)
        do_eval = rnd % int(eng.eval_every) == 0 or rnd == n_rounds - 1
        rows = self.evaluate_round(state, rnd, sampled, result.step_losses, do_eval, labels, absent)
        state.history.extend(rows)
        train_losses = [r["train_loss"] for r in rows if r["train_loss"] is not None]
        f1s = [r["local_f1"] for r in rows if r["local_f1"] is not None]
        row = {"round": rnd, "n_clusters": int(len(np.unique(labels))),
               "clustered_now": not same_partition(labels, previous.labels), "temperature": temp,
               "mean_train_loss": float(np.mean(train_losses)), "mean_local_f1": float(np.mean(f1s)) if f1s else None,
               "seconds": time.perf_counter() - t0,
               "diagnostics": {str(k): plain(v) if np.isscalar(v) or v is None else canonical_json(v) for k, v in res.diagnostics.items()}}
        state.server_rows.append(row)
        state.labels = labels
        state.next_round = rnd + 1
        f1_text = f"{row['mean_local_f1']:.4f}" if row["mean_local_f1"] is not None else "-"
        self.log.info("round %d: %d clusters, mean loss %.4f, mean local F1 %s, %.2f s", rnd, row["n_clusters"],
                      row["mean_train_loss"], f1_text, row["seconds"])

    def round_deltas(self, state: EngineState, buffer: torch.Tensor, specs: Sequence[StartSpec], start_of, shared_start):
        """The round's deltas and its ONE Gram product (cflcore.clustering.divergence.update_gram).

        Returns (deltas or None, Gram, fixes, materialise). Usual case (every parameter shared, each client starting
        from a cluster model): the Gram product is taken in one pass over the trained vectors and the cluster models,
        the buffer stays the trained vectors, and ``materialise`` turns it into the deltas in place (cflcore.fl.deltas;
        its exact fix-ups appended to ``fixes`` for the restore) only if the strategy reads them. Mixed starts
        (002 eq. 4): the buffer becomes the deltas in place first. BN tensors outside the deltas: a copy of the
        shared columns' deltas. The Gram product is the same bits in every case."""
        fixes: list = []
        if len(self.part.shared) != self.model_layout.n_full:  # the shared columns are a copy anyway
            deltas = self.shared_part(buffer) - torch.stack([shared_start(r) for r in range(len(specs))])
            return deltas, update_gram(deltas), fixes, None

        def materialise() -> torch.Tensor:
            fixes.append(to_deltas_(buffer, start_of))
            return buffer

        if any(isinstance(spec, Mapping) for spec in specs):
            deltas = materialise()
            return deltas, update_gram(deltas), fixes, None
        clusters = sorted({int(spec) for spec in specs})  # type: ignore[arg-type]
        group = [clusters.index(int(spec)) for spec in specs]  # type: ignore[arg-type]
        return None, update_gram(buffer, [state.models[c] for c in clusters], group), fixes, materialise

    def check_specs(self, specs: Mapping[int, StartSpec], clients: np.ndarray, state: EngineState, where: str) -> None:
        """A strategy's StartSpecs must cover the clients and name existing clusters (one-line CflError)."""
        name = getattr(self.strategy, "registered_name", type(self.strategy).__name__)
        for c in clients:
            spec = specs.get(int(c)) if hasattr(specs, "get") else None
            if spec is None:
                raise CflError(f"strategy {name!r}: {where}() gave no model for client {int(c)}")
            ids = [int(k) for k in spec] if isinstance(spec, Mapping) else [int(spec)]
            unknown = [k for k in ids if k not in state.models]
            if unknown:
                raise CflError(f"strategy {name!r}: {where}() names cluster {unknown[0]} for client {int(c)}; "
                               f"existing clusters: {sorted(state.models)}")

    def aggregate(self, state: EngineState, inherit: Mapping[int, int], labels: np.ndarray, sampled: np.ndarray,
                  shared_start, news: torch.Tensor, n_samples: np.ndarray,
                  aggregate_as: Mapping[int, int] | None = None, keep_models: Sequence[int] = ()) -> None:
        """Per-cluster FedOpt aggregation (docs/architecture.md §5 step 4). Clusters without sampled members keep (or inherit)
        their model; clusters absent from ``labels`` are dropped, except those in ``keep_models`` that the state
        holds (StrategyResult.keep_models), which keep theirs. ``aggregate_as`` (client -> cluster) overrides
        the cluster whose aggregation a client's update joins this round (StrategyResult.aggregate_as).
        ``news`` is the round buffer of trained vectors, read in place when a cluster holds every row;
        ``shared_start(row)`` gives a row's start vector (only server optimisers other than FedAvg read it)."""
        weighted = self.settings.engine.aggregation == "weighted"
        member_of = labels.copy()
        for client, cluster in (aggregate_as or {}).items():
            member_of[int(client)] = int(cluster)
        models, extra, server_state = {}, {}, {}
        kept = {int(c) for c in keep_models if int(c) in state.models}
        for c in sorted({int(c) for c in np.unique(labels)} | kept):
            src = int(inherit.get(c, c))
            if src not in state.models:
                src = self._fallback_source(state, labels, c)
            members = [row for row, cl in enumerate(sampled) if member_of[cl] == c]
            sstate = {k: v.clone() for k, v in state.server_state.get(src, {}).items()}
            if members:
                every = len(members) == len(sampled)
                # sent from the host only where used (a FedAvg round of shared vectors over all rows needs neither)
                rows = None if every and not len(self.part.extra) else torch.tensor(members, device=self.device)
                w = torch.tensor(n_samples[members], dtype=self.dtype, device=self.device) if weighted else None
                if self.server.is_fedavg and len(self.part.shared) == self.model_layout.n_full:
                    # FedAvg: the members' rows read in place (a subset column block by column block), no copy
                    models[c], server_state[c] = rows_mean(news, None if every else members, w), {}
                else:
                    members_new = news if every else news.index_select(0, rows)  # type: ignore[arg-type]
                    member_starts = None if self.server.is_fedavg else torch.stack([shared_start(r) for r in members])
                    models[c], server_state[c] = aggregate_cluster(self.server, member_starts,
                                                                   self.shared_part(members_new), w, sstate)
                extra[c] = (weighted_mean(news[:, self.part.extra].index_select(0, rows), w) if rows is not None
                            else news.new_empty(0))
            else:
                models[c], server_state[c] = state.models[src].clone(), sstate
                extra[c] = state.extra[src].clone()
        state.models, state.extra, state.server_state = models, extra, server_state

    def _fallback_source(self, state: EngineState, labels: np.ndarray, cluster: int) -> int:
        """A new cluster that names no existing source starts from the previous cluster most of its members were in."""
        prev = state.labels[labels == cluster]
        prev = prev[np.isin(prev, list(state.models))]
        if len(prev):
            vals, counts = np.unique(prev, return_counts=True)
            return int(vals[np.argmax(counts)])
        return int(min(state.models))

    def record_matrices(self, state: EngineState, rnd: int, sampled: np.ndarray, gram: torch.Tensor,
                        divergence: np.ndarray | None) -> None:
        g = gram.cpu().numpy()
        for a, i in enumerate(sampled):
            for b, j in enumerate(sampled):
                state.gram_rows.append([rnd, int(i), int(j), float(g[a, b])])
        if divergence is not None:
            d = np.asarray(divergence, dtype=np.float64)
            ids = sampled if d.shape[0] == len(sampled) else np.arange(d.shape[0])
            for a, i in enumerate(ids):
                for b, j in enumerate(ids):
                    state.divergence_rows.append([rnd, int(i), int(j), float(d[a, b])])

    def evaluate_round(self, state: EngineState, rnd: int, sampled: np.ndarray, step_losses: list[np.ndarray],
                       do_eval: bool, labels: np.ndarray, absent: np.ndarray | None = None) -> list[dict[str, Any]]:
        """history rows of this round. Each client's personalised model on its local test set; each distinct
        model once on the orchestrator set. ``absent`` clients (not yet joined, 000 §6.2) are not evaluated:
        their metrics and ``model_key`` are null."""
        gone = set() if absent is None else {int(c) for c in absent}
        fed = self.fed
        train_loss = {int(c): float(np.mean(ls)) for c, ls in zip(sampled, step_losses)}
        specs = self.strategy.personalised(state.models)
        self.check_specs(specs, np.arange(fed.n_clients), state, "personalised")
        keys = {i: spec_key(specs[i]) for i in range(fed.n_clients)}
        local: dict[int, Scores] = {}
        orch: dict[str, Scores] = {}
        if do_eval:
            groups: dict[str, list[int]] = {}
            for i, k in keys.items():
                if i not in gone:
                    groups.setdefault(k, []).append(i)
            for key, members in groups.items():
                spec = specs[members[0]]
                group_local = self.mean_local(state, members)
                if len(self.part.local):
                    for i in members:
                        full = self.full_vector(state, spec, i)
                        local[i] = self.evaluator.scores(full, fed.clients[i].x_test, fed.clients[i].y_test, fed.n_classes)
                else:
                    full = self.full_vector(state, spec, None)
                    scores = self.evaluator.grouped_scores(full, [fed.clients[i].x_test for i in members],
                                                           [fed.clients[i].y_test for i in members], fed.n_classes)
                    local.update(dict(zip(members, scores)))
                orch_full = self.full_vector(state, spec, None, local=group_local)
                orch[key] = self.evaluator.orchestrator_scores(orch_full, fed.x_orch, fed.y_orch, fed.n_classes)
        if do_eval and self.personal is not None:
            local.update(self.personal_scores(state, rnd, specs, gone))
        global_scores = self.evaluate_global(state, keys, local, orch, gone) if do_eval else {}
        rows = []
        for i in range(fed.n_clients):
            ls, os_ = local.get(i), None if i in gone else orch.get(keys[i])
            rows.append({"round": rnd, "client": i, "cluster": int(labels[i]),
                         "sampled": i in train_loss, "train_loss": train_loss.get(i),
                         "local_loss": ls.loss if ls else None, "local_acc": ls.acc if ls else None,
                         "local_f1": ls.f1 if ls else None, "local_bacc": ls.bacc if ls else None,
                         "orch_loss": os_.loss if os_ else None, "orch_acc": os_.acc if os_ else None,
                         "orch_f1": os_.f1 if os_ else None, "orch_bacc": os_.bacc if os_ else None,
                         "model_key": None if i in gone else keys[i], **global_scores.get(i, dict.fromkeys(GLOBAL_COLUMNS))})
        return rows

    def train_unsampled_personal(self, state: EngineState, rnd: int, sampled: np.ndarray) -> None:
        """pFedMe with ``all_clients``: every present client that was not sampled also trains this round from its
        model (pFedMe Alg. 1 l. 4; the authors' server trains every user and aggregates the sampled ones); only its
        personal model is kept. One client at a time, with the seed it would have had if sampled."""
        fed, skip = self.fed, {int(c) for c in sampled} | {int(c) for c in self.strategy.absent_clients(rnd)}
        specs = self.strategy.personalised(state.models)
        for c in range(fed.n_clients):
            if c in skip:
                continue
            start = self.full_vector(state, specs[c], c)[None]
            result = self.trainer.train(start, [fed.clients[c]], [train_seed(self.seed, rnd, c)])
            state.personal[c] = result.personal[0].clone()

    def personal_scores(self, state: EngineState, rnd: int, specs: Mapping[int, StartSpec], gone: set[int]) -> dict[int, Scores]:
        """client -> scores on its local test set of its personalised model: pFedMe's personal model (clients that
        have not trained yet keep their cluster model's scores), Per-FedAvg's model after one adaptation step
        (cflcore.fl.personal.PersonalTrainer.adapt) on a training mini-batch drawn by (seed, round, client)."""
        fed, out = self.fed, {}
        for i in range(fed.n_clients):
            if i in gone:
                continue
            if self.personal.keeps_personal_models:  # type: ignore[union-attr]
                if i not in state.personal:
                    continue
                vector = state.personal[i]
            else:
                vector = self.trainer.adapt(self.full_vector(state, specs[i], i), fed.clients[i],
                                            derive_seed(self.seed, _STREAM_ADAPT, rnd, i))
            out[i] = self.evaluator.scores(vector, fed.clients[i].x_test, fed.clients[i].y_test, fed.n_classes)
        return out

    def evaluate_global(self, state: EngineState, keys: Mapping[int, str], local: Mapping[int, Scores],
                        orch: Mapping[str, Scores], gone: set[int]) -> dict[int, dict[str, float]]:
        """client -> the ``global_*`` columns: the strategy's global model (``Strategy.global_model``) on each
        present client's local test set and on the orchestrator set; {} when the strategy has none. Scores of
        a client whose personalised model is the global one (same ``model_key``) are reused, not recomputed."""
        spec = self.strategy.global_model(state.models)
        if spec is None:
            return {}
        self.check_specs({i: spec for i in range(self.fed.n_clients)}, np.arange(self.fed.n_clients), state, "global_model")
        fed, key = self.fed, spec_key(spec)
        present = [i for i in range(fed.n_clients) if i not in gone]
        scores = {i: local[i] for i in present if keys[i] == key and i in local and self.personal is None}
        todo = [i for i in present if i not in scores]
        if len(self.part.local):  # FedBN: the global shared part with each client's own BN tensors
            for i in todo:
                scores[i] = self.evaluator.scores(self.full_vector(state, spec, i), fed.clients[i].x_test,
                                                  fed.clients[i].y_test, fed.n_classes)
        elif todo:
            full = self.full_vector(state, spec, None)
            scores.update(zip(todo, self.evaluator.grouped_scores(full, [fed.clients[i].x_test for i in todo],
                                                                  [fed.clients[i].y_test for i in todo], fed.n_classes)))
        on_orch = orch.get(key)
        if on_orch is None:
            full = self.full_vector(state, spec, None, local=self.mean_local(state, present))
            on_orch = self.evaluator.orchestrator_scores(full, fed.x_orch, fed.y_orch, fed.n_classes)
        return {i: {"global_loss": s.loss, "global_acc": s.acc, "global_f1": s.f1, "global_bacc": s.bacc,
                    "global_orch_acc": on_orch.acc, "global_orch_f1": on_orch.f1} for i, s in scores.items()}


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------
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


def build_engine(fed: FederatedData, settings: Mapping[str, Any] | RunSettings, seed: int, log: logging.Logger, *,
                 strategy: Strategy, device: str | None = None) -> tuple[Engine, EngineState]:
    """The engine of one run and its state at round 0; ``settings``: the run's (cflcore.config.run_settings, or a
    partial dict built by hand, typed here with the schema's defaults: :meth:`cflcore.settings.RunSettings.of`);
    ``strategy`` is the run's method, built by the caller (cflcore.strategies.build_strategy), which the engine sets up
    for this federation; ``device``: :func:`job_device`."""
    settings = RunSettings.of(settings)
    training, eng = settings.training, settings.engine
    device = prepare_device(job_device(settings, device), bool(eng.deterministic))
    torch.set_num_threads(int(eng.threads))
    # `auto` values resolved for this device once; the engine reads the resolved ones (the run's settings and its
    # checkpoints' config hash keep `auto`)
    planned_jobs = int(eng.gpu_jobs) if eng.memory_budget_mb == "auto" and device.type == "cuda" else None
    eng = replace(eng, memory_budget_mb=resolve_memory_budget(eng.memory_budget_mb, device, int(eng.gpu_jobs)),
                  channels_last=resolve_channels_last(eng.channels_last, device),
                  ragged_batches=resolve_ragged_batches(eng.ragged_batches, device))
    model_name, given_kwargs = training.model, plain_value(training.model_kwargs or {})
    c, h, w = fed.shape
    check_compatible(model_name, (c, h, w), fed.n_classes, **given_kwargs)
    spec = TrainSpec(ClientOptimizer.from_training(training), int(training.batch_size), int(training.local_epochs),
                     str(eng.precision), bool(eng.channels_last), int(eng.memory_budget_mb), bool(eng.compile),
                     float(eng.proximal_mu), str(eng.ragged_batches), planned_jobs)
    dtype = torch.float64 if spec.precision == "fp64" else torch.float32
    if spec.precision == "bf16" and (warning := bf16_warning(device)):
        log.warning(warning)
    model_kwargs = {"in_channels": c, "image_size": [h, w], "n_classes": fed.n_classes, **given_kwargs}
    make = lambda i: _init_model(model_name, model_kwargs, derive_seed(seed, _STREAM_INIT, i))  # noqa: E731
    template = make(0)
    model_layout = ModelLayout.of(template)
    bn_local = eng.bn_stats == "local"
    cut = model_layout.partition(bool(eng.bn_buffers_in_delta), bn_local)
    part = Partition(cut.shared.to(device), cut.extra.to(device), cut.local.to(device))  # indexing stays on the device
    init_full = model_layout.flatten(template).to(device=device, dtype=dtype)
    personal = Personalisation(**block_values(eng.personalisation))
    if personal.active:  # the schema refuses these too; settings built by hand meet them here
        if str(eng.trainer) == "vmap" or spec.proximal_mu:
            raise ConfigError(f"engine.personalisation.kind: {personal.kind} needs engine.trainer loop or auto and "
                              f"engine.proximal_mu 0 (got {eng.trainer}, {spec.proximal_mu})")
        trainer = PersonalTrainer(make(0), model_layout, spec, device, personal)
    else:
        trainer = resolve_trainer(str(eng.trainer), device)(make(0), model_layout, spec, device)
    if training.optimizer_state == "kept" and not trainer.keeps_optimizer_state:
        raise ConfigError(f"datasets.*.optimizer_state: kept needs engine.trainer loop (auto on a CPU) and no "
                          f"engine.personalisation; this run trains with {type(trainer).__name__}")
    evaluator = Evaluator(make(0), model_layout, device, dtype, bf16=spec.precision == "bf16", channels_last=spec.channels_last)
    strategy.setup(StrategyContext(fed.n_clients, int(len(part.shared)), int(seed), device,
                                   float(eng.participation), fed.n_true_clusters, dtype,
                                   model_layout.layer_sizes(bool(eng.bn_buffers_in_delta), bn_local),
                                   model_layout.array_sizes(bool(eng.bn_buffers_in_delta), bn_local)))
    make_init = lambda i: model_layout.flatten(make(i)).to(device=device, dtype=dtype)[part.shared]  # noqa: E731
    models = {int(k): v.to(device=device, dtype=dtype).clone() for k, v in strategy.initial_models(init_full[part.shared].clone(), make_init).items()}
    state = EngineState(0, models, {k: init_full[part.extra].clone() for k in models}, {},
                        {i: init_full[part.local].clone() for i in range(fed.n_clients)} if len(part.local) else {},
                        np.asarray(strategy.assignment.labels, dtype=np.int64))
    server = ServerOptimizer(kind=str(eng.server_optimizer), lr=float(eng.server_lr),
                             betas=tuple(float(b) for b in eng.server_betas),  # type: ignore[arg-type]
                             eps=float(eng.server_eps), momentum=float(eng.server_momentum))
    engine = Engine(fed=fed.to(device), settings=replace(settings, engine=eng), seed=int(seed), device=device,
                    strategy=strategy, model_layout=model_layout, part=part, trainer=trainer, evaluator=evaluator,
                    server=server, model_name=model_name, model_kwargs=model_kwargs, template=template, dtype=dtype,
                    log=log, personal=personal if personal.active else None)
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
    n_rounds = int(settings.training.rounds)
    every = int(engine.settings.engine.checkpoint_every)
    chash = config_hash(settings, seed, fed)
    kind = device_kind(engine.device)
    ck = load_latest(out_dir, chash, log, kind)
    if ck is not None:
        state = state_from_checkpoint(ck, engine.device, engine.dtype)
        engine.strategy.load_state_dict(ck["strategy"])
        log.info("resuming from checkpoint round %d", state.next_round - 1)
    kill_after, fail_after = os.environ.get(KILL_ENV), os.environ.get(FAIL_ENV)
    watchers = [ProgressRecord(out_dir), *monitors]
    truth = np.asarray(fed.true_clusters) if len(fed.true_clusters) == fed.n_clients else None
    try:
        for m in watchers:
            m.start(state.next_round, n_rounds)
        for rnd in range(state.next_round, n_rounds):
            engine.run_round(state, rnd, n_rounds)
            if (rnd + 1) % every == 0 and rnd + 1 < n_rounds:
                save_checkpoint(out_dir, rnd, state_to_checkpoint(state, engine.strategy, chash, kind))
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
