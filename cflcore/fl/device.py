"""The device a job runs on, and the GPU settings applied before any tensor reaches it (docs/architecture.md §5):
``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``), a GPU slot per job where several are visible
(cflcore/fl/gpu_slots.py), and ``engine.deterministic``'s flags on CUDA."""
from __future__ import annotations

import os

import torch

from ..errors import CflError, ConfigError


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda if available else cpu; ``cuda`` / ``cuda:N`` without a GPU (or without GPU N) is an error.

    ``cuda:N`` binds the process to one of several visible GPUs (docs/cluster.md: the gpu-workstation profile's
    jobs each take one). Resolving does no CUDA work beyond counting the devices, so :func:`prepare_device` can
    still set the determinism flags before the first kernel."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    index = name[len("cuda:"):] if name.startswith("cuda:") else None
    if name != "cuda" and not (index is not None and index.isdigit() and str(int(index)) == index):
        raise ConfigError(f"device: {name!r} is not allowed; allowed: auto, cpu, cuda, cuda:N (N = 0, 1, ...)")
    if not torch.cuda.is_available():
        raise CflError(f"device: {name!r} requested but no CUDA GPU is available; use device: auto or cpu")
    if index is not None and int(index) >= torch.cuda.device_count():
        raise CflError(f"device: {name!r} requested but only {torch.cuda.device_count()} CUDA GPU(s) are visible "
                       f"(cuda:0 to cuda:{torch.cuda.device_count() - 1}); allowed: auto, cpu, cuda, or one of those")
    return torch.device(name)


CUBLAS_WORKSPACE = ":4096:8"
"""``CUBLAS_WORKSPACE_CONFIG`` for deterministic cuBLAS (CUDA >= 10.2; torch's reproducibility notes): a fixed
workspace per stream, so that cuBLAS picks the same reduction order in every process."""


def set_deterministic(device: torch.device, deterministic: bool = True) -> bool:
    """``engine.deterministic``: on a CUDA device, before the process's first CUDA kernel, make every kernel
    deterministic, so that one run gives the same bytes in every process and on resume (on one GPU model,
    driver and torch build): ``CUBLAS_WORKSPACE_CONFIG`` (set only if unset, and read by cuBLAS when its first
    handle is made), cuDNN's deterministic algorithms with autotuning off, and
    ``torch.use_deterministic_algorithms(True)``, under which an op with no deterministic CUDA kernel raises
    instead of silently varying (the engine has none: docs/architecture.md, "Determinism on CUDA").

    A CPU device changes nothing (returns False): the CPU kernels the engine runs are deterministic already, and
    the global mode could change which kernels torch picks there, so CPU results stay those of earlier versions.
    The settings are process-wide and stay on; a job runs one device, so nothing else in the process sees them.
    Returns whether the flags were set."""
    if device.type != "cuda" or not deterministic:
        return False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    return True


def set_fc_tf32(device: torch.device, enabled: bool) -> bool:
    """``engine.fc_tf32``: on a CUDA device, the process's float32 matrix products (the Linear layers, in training and
    evaluation) in TF32 or in IEEE fp32 (``torch.backends.cuda.matmul.allow_tf32``, set either way, so the run's setting
    and not an earlier global decides; torch's default is off). cuDNN's convolutions keep their own flag. A CPU device
    changes nothing (the flag touches no CPU kernel). Returns the flag as the job runs with it (False on a CPU)."""
    if device.type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    return bool(enabled)


def prepare_device(name: str, deterministic: bool = True) -> torch.device:
    """The job's device (:func:`resolve_device`) with ``engine.deterministic`` applied (:func:`set_deterministic`);
    train and explain jobs call this before any tensor reaches the device.

    ``auto`` / ``cuda`` on a machine with several visible GPUs takes one GPU for the job (a slot,
    cflcore.fl.gpu_slots: jobs spread over the GPUs); ``cuda:N`` is GPU N. Either way the GPU becomes the process's
    current device, so that library calls that take no device (captum, cuDNN handles) use it."""
    device = resolve_device(name)
    if device.type == "cuda" and device.index is None and torch.cuda.device_count() > 1:
        from .gpu_slots import job_gpu

        index = job_gpu(torch.cuda.device_count())
        if index is not None:  # None: no slot could be taken (logged); the current CUDA device
            device = torch.device("cuda", index)
    set_deterministic(device, deterministic)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    return device


def device_kind(device: torch.device) -> str:
    """The kind of hardware a run's bytes belong to: ``cpu``, or ``cuda:<GPU model>`` (any index of one model is
    the same kind). A checkpoint records it; a job on another kind does not resume from it (cflcore.fl.checkpoint)."""
    if device.type != "cuda":
        return device.type
    return f"cuda:{torch.cuda.get_device_name(device)}"


def nvidia_driver() -> str | None:
    """The NVIDIA driver version (``nvidia-smi``), or None where there is none."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=False).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def device_report(device: torch.device) -> dict[str, object]:
    """What a result can still depend on besides the settings: the device, its model, the NVIDIA driver, CUDA,
    cuDNN and torch (status.json's ``hardware``, ``cfl doctor``)."""
    import platform

    info: dict[str, object] = {"device": str(device), "kind": device_kind(device), "torch": torch.__version__,
                               "cuda": torch.version.cuda, "cudnn": None, "driver": None,
                               "cpu": platform.processor() or platform.machine(),
                               "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if device.type == "cuda":
        info.update(name=torch.cuda.get_device_name(device), driver=nvidia_driver(),
                    cudnn=torch.backends.cudnn.version())
    else:
        info["name"] = _cpu_model()
    return info


def _cpu_model() -> str | None:
    """``lscpu``'s model name, from /proc/cpuinfo (None where it has none)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return None
