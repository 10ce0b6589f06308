"""Client trainers behind one interface (docs/architecture.md §5 step 2): ``loop`` (CPU default) and ``vmap`` (GPU default).

Both train every sampled client for E local epochs of mini-batches of size B from the client's start
vector and return the new full vectors and every step's training loss. Randomness is per client and
epoch: a ``torch.Generator`` seeded from (client seed, epoch) draws the epoch's permutation, then the
dropout masks of each step in forward order, so the numbers do not depend on execution order,
vectorisation or resumption. The client seed itself is derived from (root seed, round, client).
"""
from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Callable, ClassVar, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data.federated import ClientData
from ..errors import ConfigError
from ..models._layers import dropout_modules
from ..registry import Registry
from .client_conv import CONV_FORMS, conv_form_context
from .chunk_plan import (CPU_MEMORY_BUDGET_MB, GPU_HEADROOM, REFERENCE_GPU_MB,  # noqa: F401 - re-exported
                         ChunkPlan, ModelCost, activation_probe, gpu_share_mb, plan_chunks)
from .flat_params import ModelLayout
from .optim import ClientOptimizer, OptimizerState, optimizer_step, stack_states, stacked_step, unstack_states
from .streams import (ClientStreams, derive_seed, epoch_generator, epoch_order,  # noqa: F401 - re-exported
                      train_seed, uniform_source)

PRECISIONS = {"fp32": torch.float32, "bf16": torch.float32, "fp64": torch.float64}
RAGGED_BATCHES = ("split", "pad")
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of native bf16 matrix / dot-product units


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The CPU feature flags the kernel reports (empty where /proc/cpuinfo does not exist)."""
    try:
        with open(cpuinfo) as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def bf16_warning(device: torch.device, flags: set[str] | None = None) -> str | None:
    """One line when ``engine.precision: bf16`` will run slower than fp32: on a CPU without native bf16 units
    (neither of BF16_CPU_FLAGS; torch.backends.cpu.get_cpu_capability() names the vector ISA oneDNN uses),
    oneDNN emulates bf16 matrix products (measured 8x slower than fp32 on an AVX2-only AMD EPYC).
    None on CUDA and on CPUs with the units. bf16 is not refused: the numbers are still valid."""
    if device.type != "cpu":
        return None
    flags = cpu_flags() if flags is None else flags
    if any(f in flags for f in BF16_CPU_FLAGS):
        return None
    return (f"engine.precision: bf16 on a CPU without native bf16 units ({' / '.join(BF16_CPU_FLAGS)} absent; "
            f"vector ISA {torch.backends.cpu.get_cpu_capability()}): emulated, expect it several times slower "
            f"than fp32; use precision: fp32 here")


@dataclass(frozen=True, kw_only=True)
class TrainSpec:
    """Local-training settings: the client optimiser, batch size, epochs and numeric options, built by keyword.

    The engine's options are the values of the run's ``engine`` block, its ``auto`` values resolved for the device
    (cflcore.fl.spec.train_spec); none has a default here: the schema is their one home
    (tests/config/test_settings_source.py)."""

    optimizer: ClientOptimizer
    batch_size: int
    local_epochs: int
    precision: str  # fp32 | bf16 (autocast, fp32 master weights) | fp64 (tests)
    channels_last: bool  # resolved: resolve_channels_last
    memory_budget_mb: int  # resolved: resolve_memory_budget
    compile: bool  # torch.compile the local step: loop trainer's forward/backward, vmap's gradient (compile_step)
    proximal_mu: float  # FedProx (Li et al. 2020, eq. 2): mu/2 ||w - w_start||^2 on the client objective
    ragged_batches: str  # resolved: resolve_ragged_batches; vmap trainer, unequal batch sizes at one step: split | pad
    conv_form: str  # vmap trainer's per-client convolutions: grouped (torch's rule) | loop | unfold (cflcore.fl.client_conv)
    planned_gpu_jobs: int | None = None  # where memory_budget_mb auto was resolved on CUDA: engine.gpu_jobs (the chunk
    # plan may take fewer); None elsewhere

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"engine.precision: {self.precision!r} is not allowed; allowed: {', '.join(PRECISIONS)}")
        if not self.proximal_mu >= 0:  # also rejects NaN
            raise ConfigError(f"engine.proximal_mu: {self.proximal_mu!r} is not allowed; allowed: a number >= 0")
        if self.conv_form not in CONV_FORMS:
            raise ConfigError(f"engine.conv_form: {self.conv_form!r} is not allowed; allowed: {', '.join(CONV_FORMS)}")
        if self.conv_form != "grouped" and (self.precision == "bf16" or self.compile):
            raise ConfigError(f"engine.conv_form: {self.conv_form} needs precision fp32 or fp64 and compile false "
                              f"(got {self.precision}, compile {self.compile})")
        if self.ragged_batches not in RAGGED_BATCHES:
            raise ConfigError(f"engine.ragged_batches: {self.ragged_batches!r} is not allowed; allowed: "
                              f"{', '.join(RAGGED_BATCHES)} (auto is resolved per device first)")

    @property
    def dtype(self) -> torch.dtype:
        return PRECISIONS[self.precision]


@dataclass
class TrainResult:
    params: torch.Tensor  # (n_clients, n_full) new full vectors
    step_losses: list[np.ndarray]  # per client, the loss of every local step in order


def autocast_context(spec: TrainSpec, device: torch.device) -> contextlib.AbstractContextManager:
    if spec.precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def proximal_grads(grads: list[torch.Tensor], params: list[torch.Tensor], anchors: list[torch.Tensor],
                   mu: float) -> list[torch.Tensor]:
    """FedProx's client gradient (Li et al. 2020, eq. 2): the gradient of F_k(w) + mu/2 ||w - w_start||^2 is
    grad F_k(w) + mu (w - w_start). ``mu == 0`` returns ``grads`` untouched (bit-identical to FedAvg's client).
    The recorded step losses stay the empirical loss F_k (what 004's Gaussian rewards are computed from)."""
    if mu == 0:
        return grads
    return torch._foreach_add(grads, torch._foreach_sub(params, anchors), alpha=mu)


# ATen's CPU capability -> inductor's vector width in bits (0 = scalar code)
_SIMD_BITS = {"AVX512": 512, "AVX2": 256, "DEFAULT": 0}


def pin_inductor_simd() -> None:
    """Make torch.compile's C++ kernels use ATen's instruction set (``torch.backends.cpu.get_cpu_capability``).

    Inductor picks its vector width from the CPU's flags, not from ``ATEN_CPU_CAPABILITY``. On a 2-core AMX
    Xeon with ATen held to AVX2 and one thread, that automatic pick gave NaN from the first local step
    (tests/fl/test_trainers.py's compiled-trainer test under ``ATEN_CPU_CAPABILITY=avx2``); an explicit width of
    256, 512 or 0 did not. An explicit width on an unrestricted CPU is the width inductor would pick itself.
    Leaves the setting alone when the user has set it or the capability is not an x86 one."""
    import torch._inductor.config as inductor_config

    bits = _SIMD_BITS.get(torch.backends.cpu.get_cpu_capability())
    if bits is not None and inductor_config.cpp.simdlen is None:
        inductor_config.cpp.simdlen = bits


def compile_step(grad_fn: Callable, grad_fn_weighted: Callable, device: torch.device) -> tuple[Callable, Callable]:
    """``engine.compile`` for the vmap trainer: the vmapped gradient (both forms, plain and padded) through
    ``torch.compile`` (inductor, default mode, ``dynamic=False``: each distinct shape, a chunk's clients x the batch,
    compiles once; ``ragged_batches: pad`` keeps the batch at B). The optimiser step stays the foreach step on
    contiguous tensors (its step count changes every step, which would recompile it). No CUDA graphs: the step's
    losses are kept across steps, and a graph's replay would overwrite them. Eager stays the default
    (``engine.compile: false``). Numbers differ from eager in the last bits (fused kernels round differently:
    tests/fl/test_trainers.py states the bound); a compiled run is deterministic and resumes bit for bit with the
    same setting."""
    if device.type == "cpu":
        pin_inductor_simd()
    return torch.compile(grad_fn, dynamic=False), torch.compile(grad_fn_weighted, dynamic=False)


def host_losses(losses: Sequence[torch.Tensor]) -> list[np.ndarray]:
    """Every client's step losses (device tensors) as float64 arrays, fetched from the device in one copy: one sync a
    round, not one a client or a chunk (docs/gpu.md, "No host traffic inside a round")."""
    if not losses:
        return []
    flat = torch.cat([ls.reshape(-1) for ls in losses]).to(torch.float64).cpu().numpy()
    return [part.copy() for part in np.split(flat, np.cumsum([ls.numel() for ls in losses])[:-1])]


class Trainer(ABC):
    """Trains a list of clients from given start vectors; owns one reusable module."""

    keeps_optimizer_state: ClassVar[bool] = False
    """Whether :meth:`train` takes the clients' kept optimiser states (a recipe's ``optimizer_state: kept``)."""
    stops_early: ClassVar[bool] = False
    """Whether :meth:`train` takes ``steps``, each client's number of local steps this round (``engine.stragglers``,
    cflcore.fl.participation): a straggler makes the first of the steps it would have made, then stops."""

    def __init__(self, model: nn.Module, model_layout: ModelLayout, spec: TrainSpec, device: torch.device):
        self.model = model.to(device=device, dtype=spec.dtype)
        self.model_layout = model_layout
        self.spec = spec
        self.device = device
        self.dropouts = dropout_modules(self.model)
        self._data_cache: dict[int, tuple[ClientData, torch.Tensor, torch.Tensor]] = {}
        self.streams = ClientStreams(device)  # the one source of batch orders and dropout masks (cflcore.fl.streams)

    def client_tensors(self, client: ClientData) -> tuple[torch.Tensor, torch.Tensor]:
        """The client's training tensors on the device in the training dtype (cached; pre-stacked)."""
        key = id(client)
        cached = self._data_cache.get(key)
        if cached is None or cached[0] is not client:  # the client object is kept, so its id cannot be reused
            x = client.x_train.to(device=self.device, dtype=self.spec.dtype)
            if self.spec.channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            cached = self._data_cache[key] = (client, x, client.y_train.to(self.device))
        return cached[1], cached[2]

    def set_lr(self, lr: float) -> None:
        """The clients' learning rate from now on (a recipe's ``lr_decay``: cflcore.fl.optim.round_lr)."""
        self.spec = replace(self.spec, optimizer=replace(self.spec.optimizer, lr=float(lr)))

    def epoch_generator(self, client_seed: int, epoch: int) -> torch.Generator:
        return self.streams.generator(client_seed, epoch)

    def epoch_order(self, client_seed: int, epoch: int, n: int) -> tuple[torch.Generator, torch.Tensor]:
        """The epoch's generator (it draws the dropout masks next) and its permutation, both on the device."""
        return self.streams.order(client_seed, epoch, n)

    @abstractmethod
    def train(self, starts: torch.Tensor, clients: Sequence[ClientData], client_seeds: Sequence[int],
              out: torch.Tensor | None = None) -> TrainResult:
        """Train ``clients[i]`` from ``starts[i]`` (full vectors). The new vectors go into ``out`` when given
        (it may be ``starts`` itself: the engine's round buffer is trained in place, cflcore.fl.deltas) and
        ``TrainResult.params`` is then ``out``; without ``out``, ``starts`` is never modified."""


TRAINERS: Registry[type[Trainer]] = Registry("trainer")


@TRAINERS.register("loop")
class LoopTrainer(Trainer):
    """The sequential path: one reused module, data pre-stacked on the device, index batches from a seeded
    permutation, and the fused foreach optimiser step (same numbers as torch.optim.SGD/Adam). Given the clients'
    kept optimiser states (``optimizer_states``), each client's steps continue its own state, updated in place.

    ``TrainSpec.compile`` runs the forward and backward through ``torch.compile`` (inductor fuses the
    element-wise work around the convolutions). It costs a one-off compilation per process (tens of
    seconds cold, a few seconds from inductor's on-disk cache), so it pays only for long runs;
    benchmarks/round_speed.py measures both. Numbers differ from eager in the last bits (fused kernels
    round differently); a run is still deterministic and resumes bit for bit with the same setting.
    """

    keeps_optimizer_state = True
    stops_early = True

    def __init__(self, model: nn.Module, model_layout: ModelLayout, spec: TrainSpec, device: torch.device):
        super().__init__(model, model_layout, spec, device)
        if spec.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        names = {e.name for e in model_layout.params}
        self.params = [p for n, p in self.model.named_parameters() if n in names]
        self.forward: Callable[[torch.Tensor], torch.Tensor] = self.model
        if spec.compile:
            pin_inductor_simd()
            self.forward = torch.compile(self.model, dynamic=False)  # type: ignore[assignment]

    def epoch_batches(self, client: ClientData, seed: int, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The epoch's mini-batches: rows of the pre-stacked tensors in the order of a seeded permutation;
        the same generator then draws the dropout masks."""
        x, y = self.client_tensors(client)
        gen, perm = self.epoch_order(seed, epoch, len(y))
        for m in self.dropouts:
            m.mask_source = self.streams.masks(gen)
        B = self.spec.batch_size
        for lo in range(0, len(y), B):
            idx = perm[lo:lo + B]
            yield x[idx], y[idx]

    def train_client(self, start: torch.Tensor, client: ClientData, seed: int) -> tuple[torch.Tensor, np.ndarray]:
        """E local epochs of one client from the full vector ``start``: (new full vector, every step's loss)."""
        vector, losses = self._train_client(start, client, seed)
        return vector, host_losses([losses])[0]

    def _train_client(self, start: torch.Tensor, client: ClientData, seed: int,
                      state: OptimizerState | None = None, steps: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`train_client` with the losses left on the device (a round fetches them once, :func:`host_losses`);
        what :meth:`train` calls, so a subclass that trains a client its own way overrides this. ``state``: the
        client's kept optimiser state, continued and updated in place (None: a fresh one); ``steps``: stop after that
        many local steps (a straggler; None: all of them)."""
        model, spec = self.model, self.spec
        self.model_layout.load(model, start)
        state = OptimizerState() if state is None else state
        anchors = [p.detach().clone() for p in self.params] if spec.proximal_mu else []
        losses: list[torch.Tensor] = []
        for epoch in range(spec.local_epochs):
            for xb, yb in self.epoch_batches(client, seed, epoch):
                with autocast_context(spec, self.device):
                    loss = F.cross_entropy(self.forward(xb), yb)
                grads = proximal_grads(list(torch.autograd.grad(loss, self.params)), self.params, anchors, spec.proximal_mu)
                optimizer_step(spec.optimizer, self.params, grads, state)
                losses.append(loss.detach())
                if len(losses) == steps:
                    break
            if len(losses) == steps:
                break
        for m in self.dropouts:
            m.mask_source = None
        return self.model_layout.flatten(model), torch.stack(losses)

    def train(self, starts: torch.Tensor, clients: Sequence[ClientData], client_seeds: Sequence[int],
              out: torch.Tensor | None = None, optimizer_states: Sequence[OptimizerState] | None = None,
              steps: Sequence[int] | None = None) -> TrainResult:
        self.model.train()
        if out is None:
            out = torch.empty(starts.shape, dtype=self.spec.dtype, device=self.device)
        all_losses: list[torch.Tensor] = []
        for i, (client, seed) in enumerate(zip(clients, client_seeds)):
            # a subclass that trains a client its own way (its _train_client takes no state) keeps no state either
            kwargs = {} if optimizer_states is None else {"state": optimizer_states[i]}
            if steps is not None:  # stragglers (cflcore.fl.participation)
                kwargs["steps"] = steps[i]
            out[i], losses = self._train_client(starts[i], client, seed, **kwargs)
            all_losses.append(losses)
        return TrainResult(out, host_losses(all_losses))


@TRAINERS.register("vmap")
class VmapTrainer(Trainer):
    """All clients' parameters stacked (n, ...) and trained together with ``torch.func``
    (``functional_call`` + ``vmap`` + ``grad``), docs/architecture.md §5 step 2.

    * Unequal client sizes: at global step t the *active set* is the clients that still have a t-th step. Where
      their batch sizes differ (an epoch's last batch may be short), ``ragged_batches: split`` splits the set by batch
      size (one vmapped call per size, each copying its rows' parameters out and back; the bytes of earlier versions),
      ``pad`` trains it in one call: every batch padded to the largest with copies of its first row, and each
      client's loss the mean over its own samples only (a per-sample weight of 1 or 0), so the gradient is the
      split's up to summation order (tests/fl/test_trainers.py states the tolerance). BatchNorm models always split:
      padded rows would enter the batch statistics.
    * BatchNorm: per-client stacked running statistics, updated functionally (returned as aux output).
    * Dropout: masks are drawn outside ``vmap`` from each client's generator in the loop trainer's order
      and passed in, so both trainers use identical masks.
    * Clients are processed in chunks of the round's chunk plan (cflcore.fl.chunk_plan: the budget, the round buffer
      counted once), each chunk's parameters in contiguous per-tensor copies for the foreach optimiser step.
    * ``TrainSpec.compile``: the vmapped gradient through ``torch.compile`` (:func:`compile_step`)
    * ``TrainSpec.conv_form``: the per-client convolutions as torch's grouped convolution or, through a convolution with
      its own vmap rule, a loop of plain ones or unfold + a batched product (cflcore.fl.client_conv)
    * Kept optimiser states (``optimizer_states``, a recipe's ``optimizer_state: kept``): each chunk stacks its clients'
      momenta / Adam moments row by row, trains them with the parameters and hands each client its row back
      (cflcore.fl.optim.stack_states / stacked_step / unstack_states): the loop trainer's numbers per client.
    """

    keeps_optimizer_state = True
    stops_early = True

    def __init__(self, model: nn.Module, model_layout: ModelLayout, spec: TrainSpec, device: torch.device):
        super().__init__(model, model_layout, spec, device)
        from torch.func import functional_call, grad, vmap

        self.model.train()
        self._functional_call = functional_call
        self._grad_fn = vmap(grad(self._loss, has_aux=True), in_dims=(0, 0, 0, 0, 0), randomness="error")
        self._grad_fn_weighted = vmap(grad(self._loss, has_aux=True), in_dims=(0, 0, 0, 0, 0, 0), randomness="error")
        if spec.compile:  # engine.compile: the vmapped gradient through torch.compile
            self._grad_fn, self._grad_fn_weighted = compile_step(self._grad_fn, self._grad_fn_weighted, device)
        self.pad = spec.ragged_batches == "pad" and not model_layout.has_bn
        self.calls = 0  # vmapped calls so far (benchmarks/device_speed.py prints them)
        self._feature_shapes: list[tuple[int, ...]] | None = None
        self._activation_numel = 0
        self._notes: set[str] = set()
        self.last_plan: ChunkPlan | None = None  # the last round's (status.json's hardware.chunk_plan)
        # integer buffers (BN num_batches_tracked) are passed as throw-away per-client copies: BN increments
        # them in place, which grad() refuses on captured tensors; with fixed momentum they are unused.
        self._int_buffers = {n: b for n, b in self.model.named_buffers() if b is not None and not b.is_floating_point()}

    def _loss(self, params, buffers, x, y, masks, weights=None):
        buffers = {k: v.clone() for k, v in buffers.items()}  # BN updates these in place: keep it functional
        for m, u in zip(self.dropouts, masks):
            m.mask = u
        try:
            with autocast_context(self.spec, self.device), conv_form_context(self.spec.conv_form):
                logits = self._functional_call(self.model, (params, buffers), (x,))
            if weights is None:
                loss = F.cross_entropy(logits, y)
            else:  # a padded batch: the mean over the client's own samples (weight 1; padding 0)
                loss = (F.cross_entropy(logits, y, reduction="none") * weights).sum() / weights.sum()
        finally:
            for m in self.dropouts:
                m.mask = None
        return loss, (loss.detach(), buffers)

    def _probe(self, x: torch.Tensor) -> None:
        """Record dropout input shapes and activation sizes per sample (one forward of 2 samples)."""
        self._feature_shapes, self._activation_numel = activation_probe(self.model, x, self.dropouts)

    def chunk_plan(self, n_clients: int = 1, steps: int = 0) -> ChunkPlan:
        """The round's chunk plan (cflcore.fl.chunk_plan) from the model's size and activations, the budget and, under
        ``memory_budget_mb: auto`` on CUDA, the jobs a GPU; never from the card's memory, so the chunking, and with
        it the bytes, is the same on every card. A plan that departs from the settings is logged once."""
        cost = ModelCost(self.model_layout.n_full, self._activation_numel, torch.finfo(self.spec.dtype).bits // 8,
                         self.spec.batch_size)
        plan = plan_chunks(cost, n_clients, steps, self.spec.memory_budget_mb, self.spec.planned_gpu_jobs)
        if plan.note and plan.note not in self._notes:
            self._notes.add(plan.note)
            logging.getLogger(__name__).warning("vmap trainer chunk plan: %s", plan.line())
        return plan

    def chunk_size(self, n_clients: int = 1) -> int:
        """Clients per vmapped chunk (:meth:`chunk_plan`): 15 clients at 13 a chunk -> 8 + 7."""
        return self.chunk_plan(n_clients).clients_per_chunk

    def train(self, starts: torch.Tensor, clients: Sequence[ClientData], client_seeds: Sequence[int],
              out: torch.Tensor | None = None, optimizer_states: Sequence[OptimizerState] | None = None,
              steps: Sequence[int] | None = None) -> TrainResult:
        if out is None:
            out = starts.to(device=self.device, dtype=self.spec.dtype).clone()
        elif out is not starts:
            out.copy_(starts)
        if self._feature_shapes is None:
            self._probe(self.client_tensors(clients[0])[0])
        losses: list[torch.Tensor] = []
        most = max(self.spec.local_epochs * -(-c.n_train // self.spec.batch_size) for c in clients)
        self.last_plan = self.chunk_plan(len(clients), most)
        size = self.last_chunk_size = self.last_plan.clients_per_chunk
        for lo in range(0, len(clients), size):
            hi = min(lo + size, len(clients))
            kept = None if optimizer_states is None else optimizer_states[lo:hi]
            losses += self._train_chunk(out[lo:hi], clients[lo:hi], client_seeds[lo:hi], kept,
                                        None if steps is None else steps[lo:hi])
        return TrainResult(out, host_losses(losses))

    def _schedule(self, client: ClientData, seed: int) -> list[tuple[torch.Generator, torch.Tensor]]:
        """Per step: (the epoch's generator, the batch's row indices), in the loop trainer's order."""
        steps = []
        n, B = client.n_train, self.spec.batch_size
        for epoch in range(self.spec.local_epochs):
            gen, perm = self.epoch_order(seed, epoch, n)
            steps += [(gen, perm[lo:lo + B]) for lo in range(0, n, B)]
        return steps

    def _train_chunk(self, mat: torch.Tensor, clients: Sequence[ClientData], seeds: Sequence[int],
                     kept: Sequence[OptimizerState] | None = None,
                     steps: Sequence[int] | None = None) -> list[torch.Tensor]:
        k = len(clients)
        rows, buffers = self.model_layout.split_rows(mat)
        self._rows_on_device: dict[tuple[int, ...], torch.Tensor] = {}
        # each parameter trains in a contiguous (k, *shape) copy, written back once after the chunk: the foreach
        # optimiser step then runs on dense tensors (one multi-tensor kernel on CUDA, not one per strided view)
        params = {n: v.clone(memory_format=torch.contiguous_format) for n, v in rows.items()}
        names = list(params)
        state = stack_states(self.spec.optimizer, params, kept)
        schedules = [self._schedule(c, s) for c, s in zip(clients, seeds)]
        if steps is not None:  # stragglers: the first steps of each schedule (its later clients leave the active set)
            schedules = [sched[:n] for sched, n in zip(schedules, steps)]
        data = [self.client_tensors(c) for c in clients]
        anchors = {n: params[n].clone() for n in names} if self.spec.proximal_mu else {}  # FedProx's w_start
        losses: list[list[torch.Tensor]] = [[] for _ in range(k)]
        for t in range(max(len(s) for s in schedules)):
            active = [i for i in range(k) if len(schedules[i]) > t]
            groups: dict[int, list[int]] = {}
            for i in active:
                groups.setdefault(len(schedules[i][t][1]), []).append(i)
            if self.pad and len(groups) > 1:
                self._step(t, active, k, params, buffers, names, state, schedules, data, losses, anchors, padded=True)
                continue
            for rows_list in groups.values():
                self._step(t, rows_list, k, params, buffers, names, state, schedules, data, losses, anchors)
        with torch.no_grad():
            for n, v in params.items():
                rows[n].copy_(v)
        if kept is not None:
            unstack_states(state, kept, [len(s) for s in schedules])
        return [torch.stack(ls) for ls in losses]  # left on the device: the round fetches them once (host_losses)

    def _step(self, t, rows_list, k, params, buffers, names, state, schedules, data, losses, anchors,
              padded: bool = False) -> None:
        self.calls += 1
        full = rows_list == list(range(k))
        rows = None if full else self._rows_on_device.get(tuple(rows_list))
        if not full and rows is None:  # one upload per distinct active set a chunk, not one a step
            rows = self._rows_on_device[tuple(rows_list)] = torch.tensor(rows_list, device=self.device)
        sizes = [len(schedules[i][t][1]) for i in rows_list]
        b = max(sizes)
        # the batch's rows; padded: filled up to b with copies of its first row (weight 0 below)
        index = [schedules[i][t][1] if n == b else torch.cat([schedules[i][t][1], schedules[i][t][1][:1].expand(b - n)])
                 for i, n in zip(rows_list, sizes)]
        x = torch.stack([data[i][0][idx] for i, idx in zip(rows_list, index)])
        y = torch.stack([data[i][1][idx] for i, idx in zip(rows_list, index)])

        def mask(i: int, n: int, shape) -> torch.Tensor:  # drawn for the client's own n samples, as the loop trainer
            u = self.streams.masks(schedules[i][t][0])((n, *shape), x.dtype, self.device)
            return u if n == b else torch.cat([u, u.new_ones(b - n, *shape)])

        masks = [torch.stack([mask(i, n, shape) for i, n in zip(rows_list, sizes)]) for shape in (self._feature_shapes or [])]
        if full:
            p_sub, b_sub, s_sub, a_sub = params, buffers, state, anchors
        else:
            p_sub = {n: v.index_select(0, rows) for n, v in params.items()}
            b_sub = {n: v.index_select(0, rows) for n, v in buffers.items()}
            s_sub = state.select(rows)
            a_sub = {n: v.index_select(0, rows) for n, v in anchors.items()}
        b_all = dict(b_sub)
        b_all.update({n: v.expand(len(rows_list), *v.shape).clone() for n, v in self._int_buffers.items()})
        if padded:
            weights = torch.stack([torch.arange(b, device=self.device) < n for n in sizes]).to(x.dtype)
            grads, (loss, new_buffers) = self._grad_fn_weighted(p_sub, b_all, x, y, masks, weights)
        else:
            grads, (loss, new_buffers) = self._grad_fn(p_sub, b_all, x, y, masks)
        new_buffers = {n: v for n, v in new_buffers.items() if n not in self._int_buffers}
        with torch.no_grad():
            p_list = [p_sub[n] for n in names]
            g_list = proximal_grads([grads[n] for n in names], p_list, [a_sub[n] for n in names] if a_sub else [],
                                    self.spec.proximal_mu)
            stacked_step(self.spec.optimizer, p_list, g_list, s_sub, t, rows_list)
            if full:
                for n, v in new_buffers.items():
                    buffers[n].copy_(v)
            else:
                for n in names:
                    params[n].index_copy_(0, rows, p_sub[n])
                for n, v in new_buffers.items():
                    buffers[n].index_copy_(0, rows, v)
                state.scatter(rows, s_sub)
        for j, i in enumerate(rows_list):
            losses[i].append(loss[j])


def resolve_memory_budget(value: int | str, device: torch.device, gpu_jobs: int = 1) -> int:
    """``engine.memory_budget_mb`` in MB: a number as given; ``auto`` = :data:`CPU_MEMORY_BUDGET_MB` on a CPU, and on
    CUDA this job's share of :data:`REFERENCE_GPU_MB` × :data:`GPU_HEADROOM` among the ``engine.gpu_jobs`` jobs that
    share one GPU (7,680 MB at 4 jobs). The chunking then follows from the model, the clients and this figure
    (cflcore.fl.chunk_plan: the round buffer counted once; where the share cannot hold it, fewer jobs a GPU), never
    from the card."""
    if value != "auto":
        return int(value)
    if device.type != "cuda":
        return CPU_MEMORY_BUDGET_MB
    return gpu_share_mb(gpu_jobs)


def resolve_channels_last(value: bool | str, device: torch.device) -> bool:
    """``engine.channels_last``: a boolean as given; ``auto`` = on for a CPU (1.5-1.8x faster convolutions there) and
    off on CUDA (vmap turns a chunk's convolutions into one grouped convolution and reshapes channels-last away: on an
    H100 the fastest rounds with and without it were equal, docs/gpu.md)."""
    if value == "auto":
        return device.type != "cuda"
    return bool(value)


def resolve_ragged_batches(value: str, device: torch.device) -> str:
    """``engine.ragged_batches``: ``split`` or ``pad`` as given; ``auto`` = pad on CUDA (one vmapped call a step instead
    of one per batch size, each copying parameters out and back: up to about 57 calls a round instead of 18 for
    paper-mnist5k's 162-175 samples a client) and split on a CPU (the bytes of earlier versions; padding computes
    rows that are thrown away, which a CPU pays for in full)."""
    if value == "auto":
        return "pad" if device.type == "cuda" else "split"
    return str(value)


def resolve_trainer(name: str, device: torch.device) -> type[Trainer]:
    """``auto`` = loop on CPU, vmap on CUDA (docs/architecture.md §5)."""
    if name == "auto":
        name = "vmap" if device.type == "cuda" else "loop"
    return TRAINERS.get(name, field="engine.trainer")
