"""The federated engine (docs/architecture.md §5): one round of one scenario × algorithm, :meth:`Engine.run_round`.

One round: sample clients (seeded by (seed, round) only) -> strategy.configure says each client's start
model -> the trainer trains all sampled clients -> strategy.aggregate returns the partition -> per-cluster
server-optimiser aggregation -> evaluation -> rows for history/server/gram/divergence.
Memory: one (N × P) round buffer, allocated once, holds the start rows and is trained in place.
The round's ONE Gram product (cflcore.clustering.divergence.update_gram, float64-accumulated, its tolerance
stated there) is taken in one pass over it and the cluster models; it is recorded (gram.parquet), gives the
temperature and is shared with the strategy (RoundUpdates.gram). The buffer becomes the deltas in place, and
then the trained vectors again bit for bit (cflcore.fl.deltas), only when the strategy reads the deltas.
FedAvg reads the trained vectors in place (cflcore.fl.server.rows_mean).

The engine reads the run's typed settings as attributes (``self.settings.engine.participation``; the schema's
``engine`` block, rendered in docs/configuration.md), its ``auto`` values resolved for its device. A run (building
the engine, the rounds, checkpoints, monitors and outputs) is cflcore/fl/run.py; the engine's state is
cflcore/fl/state.py, the run's tables and ``models.pt`` cflcore/fl/artifacts.py, the device cflcore/fl/device.py.

Determinism: the outputs are a function of (settings, seed, data); ``seconds`` is the only wall-clock
column.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..clustering.divergence import update_gram
from ..data.federated import FederatedData
from ..errors import CflError, TrainingDiverged
from ..io import canonical_json
from ..settings import RunSettings
from .artifacts import GLOBAL_COLUMNS
from .device import device_report
from .checkpoint import plain
from .state import EngineState
from .deltas import restore_, to_deltas_
from .evaluation import Evaluator, Scores
from ..strategies.base import ClusterAssignment, RoundUpdates, StartSpec, Strategy
from .flat_params import ModelLayout, Partition
from .optim import OptimizerState, round_lr
from .personal import Personalisation
from .server import ServerOptimizer, aggregate_cluster, rows_mean, weighted_mean
from .participation import _STREAM_SAMPLE, ClientAvailability, local_steps, sample_available, sample_clients  # noqa: F401
from .participation import straggler_steps
from .streams import train_seed
from .trainers import derive_seed

_STREAM_ADAPT = 0xAD  # Per-FedAvg adaptation; the round sample: cflcore.fl.participation; local training: cflcore.fl.streams



# ---------------------------------------------------------------------------------------------
# Small pure helpers
# ---------------------------------------------------------------------------------------------
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
    availability: ClientAvailability | None = None  # engine.availability (None: everyone, every round)

    @property
    def moving(self) -> bool:
        """Whether availability or stragglers are on: history.parquet then records ``present`` and ``steps``."""
        eng = self.settings.engine
        return (self.availability is not None and not self.availability.uniform) or eng.stragglers.share is not None

    @property
    def model_bytes(self) -> int:
        """The bytes of one model sent over the wire: its shared part and the BN buffers aggregated outside the deltas
        (a FedBN client's own tensors never leave it), at the run's dtype."""
        return (len(self.part.shared) + len(self.part.extra)) * (torch.finfo(self.dtype).bits // 8)

    def hardware(self) -> dict[str, Any]:
        """status.json's ``hardware``: cflcore.fl.device.device_report plus the resolved ``memory_budget_mb``, the
        vmap trainer's clients per chunk and round chunk plan (cflcore.fl.chunk_plan; None for the loop trainer), the
        convolution form (``engine.conv_form``, cflcore.fl.client_conv) and whether matrix products ran in TF32
        (``engine.fc_tf32``; false on a CPU, where it has no effect)."""
        chunk = getattr(self.trainer, "last_chunk_size", None)
        plan = getattr(self.trainer, "last_plan", None)
        return {**device_report(self.device), "memory_budget_mb": int(self.settings.engine.memory_budget_mb),
                "trainer": type(self.trainer).__name__, "chunk_size": chunk,
                "chunk_plan": plan.as_dict() if plan is not None else None,
                "conv_form": self.settings.engine.conv_form,
                "fc_tf32": self.device.type == "cuda" and self.settings.engine.fc_tf32}

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
        self.fed = self.fed.at_round(rnd)  # a drift schedule's round view (cflcore.data.federated); static: itself
        eng, fed = self.settings.engine, self.fed
        present = None if self.availability is None or self.availability.uniform else self.availability.present(rnd)
        sampled = (sample_clients(self.seed, rnd, fed.n_clients, eng.participation) if present is None
                   else sample_available(self.seed, rnd, present, eng.participation))
        sampled = np.asarray(self.strategy.select_clients(rnd, sampled), dtype=np.int64)
        if sampled.size == 0 or np.any(np.diff(sampled) <= 0) or sampled[0] < 0 or sampled[-1] >= fed.n_clients:
            raise CflError(f"strategy {self.strategy.registered_name!r}: select_clients() must return sorted, distinct "
                           f"client ids in 0..{fed.n_clients - 1}; got {sampled.tolist()}")
        evaluate = self.make_evaluate(state)
        n_offered = len(state.models)  # the models the server holds when the clients are configured
        specs = self.strategy.configure(rnd, sampled, evaluate, {c: m.clone() for c, m in state.models.items()})
        self.check_specs(specs, sampled, state, "configure")
        start_of = self.start_rows(state, [specs[int(c)] for c in sampled], sampled)
        buffer = self.round_buffer(len(sampled))
        for row in range(len(sampled)):
            buffer[row].copy_(start_of(row))
        training = self.settings.training
        if training.lr_decay != 1.0:  # the recipe's lr_decay (cflcore.fl.optim.round_lr)
            self.trainer.set_lr(round_lr(training.lr, training.lr_decay, rnd))
        kept = ({"optimizer_states": [state.client_optimizer.setdefault(int(c), OptimizerState()) for c in sampled]}
                if training.optimizer_state == "kept" else {})  # each client's own, continued in place
        steps = straggler_steps(eng.stragglers, self.seed, rnd, fed.n_clients, sampled,
                                [local_steps(fed.clients[int(c)].n_train, training.batch_size, training.local_epochs)
                                 for c in sampled])
        if steps is not None:  # engine.stragglers (cflcore.fl.participation): each client's steps this round
            kept["steps"] = steps
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
        traffic = self.strategy.traffic(updates, self.model_bytes, n_offered)  # what the round sent (bytes)
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
        do_eval = rnd % eng.eval_every == 0 or rnd == n_rounds - 1
        score_orchestrator = do_eval and (rnd == n_rounds - 1 or not self.strategy.orchestrator_last_round_only)
        rows = self.evaluate_round(state, rnd, sampled, result.step_losses, do_eval, labels, absent,
                                   score_orchestrator)
        if self.moving:  # who was available, and the steps each trained client made (the engine's, not the strategy's)
            done = {int(c): len(ls) for c, ls in zip(sampled, result.step_losses)}
            available = np.ones(fed.n_clients, dtype=bool) if present is None else present
            for r in rows:
                r["present"], r["steps"] = bool(available[r["client"]]), done.get(r["client"])
        state.history.extend(rows)
        train_losses = [r["train_loss"] for r in rows if r["train_loss"] is not None]
        f1s = [r["local_f1"] for r in rows if r["local_f1"] is not None]
        row = {"round": rnd, "n_clusters": int(len(np.unique(labels))),
               "clustered_now": not same_partition(labels, previous.labels), "temperature": temp,
               "mean_train_loss": float(np.mean(train_losses)), "mean_local_f1": float(np.mean(f1s)) if f1s else None,
               "seconds": time.perf_counter() - t0,
               "traffic": {"bytes_down": int(traffic.down), "bytes_up": int(traffic.up)},
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
                       do_eval: bool, labels: np.ndarray, absent: np.ndarray | None = None,
                       score_orchestrator: bool = True) -> list[dict[str, Any]]:
        """history rows of this round. Each client's personalised model on its local test set; each distinct
        model once on the orchestrator set (unless ``score_orchestrator`` is false:
        ``Strategy.orchestrator_last_round_only``). ``absent`` clients (not yet joined, 000 §6.2) are not evaluated:
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
                if score_orchestrator:
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

