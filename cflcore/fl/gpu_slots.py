"""One GPU per job on a workstation with several GPUs (docs/cluster.md, "Several GPUs on one workstation").

Snakemake's local executor counts a resource (the gpu-workstation profile's ``gpu_slots``) but does not say which
GPU a job should take, so without this every job's ``device: cuda`` lands on GPU 0. A train or explain job whose
device is ``auto`` or ``cuda`` (no index) on a machine with more than one visible GPU takes a *slot* instead: an
exclusive ``fcntl.flock`` on a file ``gpu<i>.slot<j>`` in a lock directory shared by every job of the machine, held
until the process ends. Slots are tried column by column (slot 0 of every GPU, then slot 1 of every GPU, ...), so
jobs spread evenly over the GPUs; the kernel drops the lock when the process exits, is killed (SIGKILL included) or
its node reboots, so a crashed job never leaves a GPU marked busy and no clean-up is needed. How many jobs run at
once stays the profile's business (``gpu_slots``); ``device: cuda:N`` pins a job to GPU N and takes no slot.

The lock directory: ``$CFL_GPU_LOCK_DIR`` if set, else ``<tmp>/cflcore-gpu-locks-<uid>`` (one per user and machine:
the GPUs are the machine's, so two studies run side by side share them fairly too).
"""
from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

LOCK_DIR_ENV = "CFL_GPU_LOCK_DIR"
MAX_SLOTS_PER_GPU = 256  # a bound on the search, far above any sensible number of jobs sharing one GPU


@dataclass
class GpuSlot:
    """A held slot: GPU ``index``; the lock is released when ``fd`` is closed (:meth:`release`) or the process ends."""

    index: int
    slot: int
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops its flock
            self.fd = None


def lock_dir() -> Path:
    """The machine's slot directory (see the module doc)."""
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / f"cflcore-gpu-locks-{os.getuid()}")


def acquire_gpu_slot(n_devices: int, directory: str | os.PathLike | None = None) -> GpuSlot:
    """Take the first free slot in the order slot 0 of GPU 0..n-1, slot 1 of GPU 0..n-1, ... (non-blocking locks)."""
    if n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    root = Path(directory) if directory is not None else lock_dir()
    root.mkdir(parents=True, exist_ok=True)
    for slot in range(MAX_SLOTS_PER_GPU):
        for index in range(n_devices):
            fd = os.open(root / f"gpu{index}.slot{slot}", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return GpuSlot(index, slot, fd)
    raise RuntimeError(f"{root}: all {MAX_SLOTS_PER_GPU} slots of {n_devices} GPUs are held")


_HELD: list[GpuSlot] = []  # this process's slot, kept open for its lifetime


def job_gpu(n_devices: int) -> int:
    """The GPU this process trains on: its held slot's, taking one on first call (a job calls this once; a second
    call, e.g. explain after train in one ``cfl`` process, keeps the same GPU)."""
    if not _HELD:
        _HELD.append(acquire_gpu_slot(n_devices))
    return _HELD[0].index
