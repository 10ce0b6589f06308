"""The vmap trainer's chunk plan (docs/gpu.md, "The chunk plan"): how many clients one vmapped call trains, how many
calls a round makes and the memory it takes, computed from the model, the number of clients N and the job's memory
budget only, never from the card at hand (so the chunking, and with it the bytes, is the same on every card).

The round's (N × P) buffer is held once per job and counted once: each chunk's room is the budget less that buffer,
and a chunk's clients share it. Under ``engine.memory_budget_mb: auto`` on CUDA the budget is this job's share of a
fixed reference card among ``engine.gpu_jobs`` jobs; where that share cannot hold the buffer beside a chunk of
:data:`MIN_CLIENTS_PER_CHUNK` clients, the plan takes the share of fewer jobs a GPU and says so
(:attr:`ChunkPlan.note`: logged by the trainer, in status.json and ``cfl doctor``), never one client per chunk in
silence. A fixed budget is used as given; a plan of one client per chunk then carries a note too.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

CPU_MEMORY_BUDGET_MB = 2048
"""``engine.memory_budget_mb: auto`` on a CPU: the figure the CPU studies were measured and run with."""
REFERENCE_GPU_MB = 40 * 1024
"""``engine.memory_budget_mb: auto`` on CUDA: a share of a *reference* card of 40 GiB (an A100 40GB, the smallest
data-centre card in common use), never of the card at hand, so that the chunking, which decides the vmapped kernels'
batch shapes and with them the bytes (cuDNN and cuBLAS pick per shape), is the same on an 80 GB card, a 40 GB one, a
MIG slice or with ECC on. A design choice, not a measured optimum."""
GPU_HEADROOM = 0.75
"""The share of the reference card the jobs' budgets add up to; the rest is for the CUDA context, cuDNN's workspace
and the allocator's slack."""
MIN_CLIENTS_PER_CHUNK = 4
"""Under ``auto`` on CUDA, the smallest chunk a plan accepts before it takes fewer jobs a GPU: below it the vmapped
calls are too small to fill a GPU (a design choice, not a measured optimum)."""
PLAN_CLIENTS = (15, 30, 100)
"""The client counts ``cfl doctor`` prints a plan for."""


def gpu_share_mb(gpu_jobs: int) -> int:
    """One job's share of :data:`REFERENCE_GPU_MB` × :data:`GPU_HEADROOM` among ``gpu_jobs`` jobs (7,680 MB at 4)."""
    return max(64, int(REFERENCE_GPU_MB * GPU_HEADROOM) // max(1, int(gpu_jobs)))


@dataclass(frozen=True)
class ModelCost:
    """What the plan needs of a model: its full vector's length P, its activations' elements per sample (every leaf
    module's output, one forward), and the training's element size and batch size."""

    n_full: int
    activation_numel: int
    element_size: int
    batch_size: int

    @property
    def per_client_bytes(self) -> int:
        """A chunk's memory per client beyond its buffer row: parameters' working copies, gradients and optimiser
        temporaries (6 P) and the batch's activations kept for the backward pass (4 × the forward's)."""
        return self.n_full * self.element_size * 6 + self.activation_numel * self.batch_size * self.element_size * 4


def activation_probe(model: nn.Module, x: torch.Tensor,
                     dropouts: list[nn.Module] = ()) -> tuple[list[tuple[int, ...]], int]:  # type: ignore[assignment]
    """(the input shapes of ``dropouts`` per sample, activation elements per sample) from one forward of 2 samples."""
    shapes: dict[int, tuple[int, ...]] = {}
    total = [0]
    hooks = [m.register_forward_pre_hook(lambda mod, inp: shapes.__setitem__(id(mod), tuple(inp[0].shape[1:])))
             for m in dropouts]
    for m in model.modules():
        if not list(m.children()):
            hooks.append(m.register_forward_hook(lambda mod, inp, out: total.__setitem__(0, total[0] + out[0].numel())))
    was = model.training
    model.eval()
    with torch.no_grad():
        model(x[:2])
    model.train(was)
    for h in hooks:
        h.remove()
    return [shapes[id(m)] for m in dropouts], total[0]


def model_cost(model_name: str, shape: tuple[int, int, int], n_classes: int, batch_size: int,
               dtype: torch.dtype = torch.float32) -> ModelCost:
    """:class:`ModelCost` of a registered model (cflcore.models) on images of ``shape`` (C, H, W)."""
    from ..models import build_model
    from .flat_params import ModelLayout

    model = build_model(model_name, shape[0], shape[1:], n_classes)
    _, numel = activation_probe(model, torch.zeros(2, *shape))
    return ModelCost(ModelLayout.of(model).n_full, numel, torch.finfo(dtype).bits // 8, batch_size)


def clients_per_chunk(n_clients: int, budget_mb: int, cost: ModelCost) -> int:
    """What fits ``budget_mb`` beside the round's (n_clients × P) buffer, evened out (15 at 13 a chunk -> 8 + 7)."""
    room = budget_mb * 2 ** 20 - n_clients * cost.n_full * cost.element_size  # the round buffer, counted once
    size = max(1, int(room // max(cost.per_client_bytes, 1)))
    if n_clients > size:
        chunks = -(-n_clients // size)
        size = -(-n_clients // chunks)
    return size


@dataclass(frozen=True)
class ChunkPlan:
    """One round's chunking: clients per chunk, chunks, vmapped calls (``steps`` a chunk: equal batches or
    ``ragged_batches: pad``), memory in MB (the buffer once, plus one chunk), the budget it was planned in and, under
    ``auto`` on CUDA, the jobs a GPU that budget assumes; ``note`` says where the plan departs from the settings."""

    n_clients: int
    clients_per_chunk: int
    chunks: int
    calls_per_round: int
    buffer_mb: float
    peak_mb: float
    budget_mb: int
    jobs_per_gpu: int | None
    note: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self, short: bool = False) -> str:
        """One line; ``short``: the departure from the settings as "gpu_jobs 4 -> 2" instead of the whole note."""
        jobs = f", {self.jobs_per_gpu} job(s) a GPU" if self.jobs_per_gpu else ""
        note = self.note
        if short and note:
            note = "departs from the settings: " + ", ".join(
                part.split(" (")[0] if "planned as" not in part else part[part.index("planned as"):].split(":")[0]
                for part in note.split("; ") if "planned as" in part or "client(s) a chunk" in part)
        return (f"N = {self.n_clients}: {self.chunks} chunk(s) of <= {min(self.clients_per_chunk, self.n_clients)}, "
                f"{self.calls_per_round} vmapped calls a round, buffer {self.buffer_mb:,.0f} MB, peak "
                f"{self.peak_mb:,.0f} MB of {self.budget_mb:,} MB{jobs}" + (f"; {note}" if note else ""))


def plan_chunks(cost: ModelCost, n_clients: int, steps: int, budget_mb: int, gpu_jobs: int | None = None) -> ChunkPlan:
    """The chunk plan of a round of ``n_clients`` clients of ``steps`` local steps each. ``gpu_jobs`` given (memory
    budget ``auto`` on CUDA): ``budget_mb`` is ignored and the budget is :func:`gpu_share_mb` of the most jobs a GPU,
    up to ``gpu_jobs``, whose share holds a chunk of min(N, :data:`MIN_CLIENTS_PER_CHUNK`) clients beside the
    buffer; ``None``: ``budget_mb`` as given."""
    want = min(n_clients, MIN_CLIENTS_PER_CHUNK)
    note = None
    jobs = None
    if gpu_jobs is not None:
        for jobs in range(int(gpu_jobs), 0, -1):
            budget_mb = gpu_share_mb(jobs)
            if clients_per_chunk(n_clients, budget_mb, cost) >= want:
                break
        if jobs != gpu_jobs:
            note = (f"engine.gpu_jobs: {gpu_jobs} gives a job {gpu_share_mb(gpu_jobs):,} MB, too little beside the round "
                    f"buffer of N = {n_clients}; planned as {jobs} job(s) a GPU ({budget_mb:,} MB): run at most {jobs} "
                    f"such job(s) on one GPU (engine.gpu_jobs: {jobs})")
    size = clients_per_chunk(n_clients, budget_mb, cost)
    if size < want:
        note = ((note + "; ") if note else "") + (
            f"{size} client(s) a chunk: the round buffer ({n_clients} x {cost.n_full:,} parameters, "
            f"{n_clients * cost.n_full * cost.element_size / 2 ** 20:,.0f} MB) and {cost.per_client_bytes / 2 ** 20:,.0f} MB "
            f"a client leave room for no more in {budget_mb:,} MB; raise engine.memory_budget_mb or lower the clients "
            f"a round or the batch size")
    chunks = -(-n_clients // size)
    buffer = n_clients * cost.n_full * cost.element_size
    return ChunkPlan(n_clients, size, chunks, chunks * steps, buffer / 2 ** 20,
                     (buffer + min(size, n_clients) * cost.per_client_bytes) / 2 ** 20, int(budget_mb), jobs, note)
