"""One GPU per job on a workstation with several GPUs (docs/cluster.md, "Several GPUs on one workstation").

Snakemake's local executor counts a resource (the gpu-workstation profile's ``gpu_slots``) but does not say which
GPU a job should take, so without this every job's ``device: cuda`` lands on GPU 0. A train or explain job whose
device is ``auto`` or ``cuda`` (no index) on a machine with more than one visible GPU takes a *slot* instead: an
exclusive ``fcntl.flock`` on a file ``<GPU UUID>.slot<j>`` in a lock directory shared by every job of the machine,
held until the process ends. Slots are keyed by the GPU's UUID, not by its visible index, so jobs that see the GPUs in
different orders or subsets (``CUDA_VISIBLE_DEVICES``, SLURM's per-job GPU sets) still coordinate. Slots are tried
column by column (slot 0 of every GPU, then slot 1 of every GPU, ...), so jobs spread evenly over the GPUs; the
kernel drops the lock when the process exits, is killed (SIGKILL included) or its node reboots, so a crashed job never
leaves a GPU marked busy and no clean-up is needed. How many jobs run at once stays the profile's business
(``gpu_slots``); ``device: cuda:N`` pins a job to GPU N and takes no slot.

The lock directory: ``$CFL_GPU_LOCK_DIR`` if set, else :data:`DEFAULT_LOCK_DIR`, one folder for every user of the
machine (``/var/tmp`` is node-local and, unlike ``$TMPDIR``, not made per user or per SLURM job), created
world-writable with the sticky bit; slot files are opened read-only, which ``flock`` allows, so a file another user
created is still lockable. A lock error of any kind other than "held by another job" (permissions, NFS or Lustre
without lock support, a full disk) gives no slot: the job logs one warning and trains on the current CUDA device,
never crashes.
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

LOCK_DIR_ENV = "CFL_GPU_LOCK_DIR"
DEFAULT_LOCK_DIR = "/var/tmp/cflcore-gpu-locks"
MAX_SLOTS_PER_GPU = 256  # a bound on the search, far above any sensible number of jobs sharing one GPU
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
log = logging.getLogger("cflcore.fl")


@dataclass
class GpuSlot:
    """A held slot: visible GPU ``index`` (``key`` its UUID); the lock is released when ``fd`` is closed
    (:meth:`release`) or the process ends."""

    index: int
    slot: int
    fd: int | None
    key: str = ""

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops its flock
            self.fd = None


def lock_dir() -> Path:
    """The machine's slot directory (see the module doc)."""
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


def gpu_keys(n_devices: int) -> list[str]:
    """The visible GPUs' UUIDs in visible order (``torch.cuda.get_device_properties(i).uuid``); ``index<i>`` for a GPU
    whose UUID torch cannot give."""
    import torch

    keys = []
    for i in range(n_devices):
        try:
            uuid = getattr(torch.cuda.get_device_properties(i), "uuid", None)
        except (RuntimeError, AssertionError):  # no CUDA runtime behind the count (tests fake it)
            uuid = None
        keys.append(f"GPU-{uuid}" if uuid is not None else f"index{i}")
    return keys


def _shared_dir(root: Path) -> None:
    """Create ``root`` world-writable with the sticky bit (like /tmp), so every user's jobs lock in it."""
    if root.is_dir():
        return
    root.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(root, 0o1777)
    except OSError:
        pass  # made by another user meanwhile: theirs to open up


def acquire_gpu_slot(gpus: int | Sequence[str], directory: str | os.PathLike | None = None) -> GpuSlot:
    """Take the first free slot in the order slot 0 of GPU 0..n-1, slot 1 of GPU 0..n-1, ... (non-blocking locks).

    ``gpus``: the visible GPUs' keys (UUIDs, :func:`gpu_keys`), or their number (keys ``index<i>``). Raises
    OSError when the directory or a slot file cannot be made or locked (:func:`job_gpu` turns that into no slot)."""
    keys = [f"index{i}" for i in range(gpus)] if isinstance(gpus, int) else [str(k) for k in gpus]
    if len(keys) < 1:
        raise ValueError(f"n_devices must be >= 1, got {len(keys)}")
    root = Path(directory) if directory is not None else lock_dir()
    _shared_dir(root)
    for slot in range(MAX_SLOTS_PER_GPU):
        for index, key in enumerate(keys):
            path = root / f"{_SAFE.sub('_', key)}.slot{slot}"
            fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            return GpuSlot(index, slot, fd, key)
    raise OSError(f"{root}: all {MAX_SLOTS_PER_GPU} slots of {len(keys)} GPUs are held")


_HELD: list[GpuSlot] = []  # this process's slot, kept open for its lifetime


def job_gpu(n_devices: int, keys: Sequence[str] | None = None) -> int | None:
    """The GPU this process trains on: its held slot's, taking one on first call (a job calls this once; a second
    call, e.g. explain after train in one ``cfl`` process, keeps the same GPU). None, with one warning in the job's
    log, when no slot can be taken for any reason but "all held" (see the module doc)."""
    if not _HELD:
        try:
            _HELD.append(acquire_gpu_slot(list(keys) if keys is not None else gpu_keys(n_devices)))
        except Exception as e:  # noqa: BLE001 - a lock problem must never crash a job: it only loses the spreading
            log.warning("GPU slot: no slot taken (%s: %s); training on the current CUDA device; set %s to a "
                        "folder every job of this machine can lock in", type(e).__name__, e, LOCK_DIR_ENV)
            return None
    return _HELD[0].index
