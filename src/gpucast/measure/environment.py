"""The environment fingerprint recorded with every measurement."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
from pathlib import Path

import torch

from gpucast.domain.measurement import EnvironmentFingerprint


def cpu_model() -> str:
    """The CPU's marketing name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "cpu model") and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def nvidia_driver_version() -> str | None:
    """The NVIDIA driver version from NVML, or ``None`` without NVML or a driver."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError: no driver / no GPU
        return None
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def fingerprint(device: torch.device) -> EnvironmentFingerprint:
    """Describe this machine and software stack; GPU fields only for a CUDA ``device``."""
    gpu_name: str | None = None
    gpu_memory: int | None = None
    driver: str | None = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        gpu_name = str(props.name)
        gpu_memory = int(props.total_memory)
        driver = nvidia_driver_version()
    return EnvironmentFingerprint(
        host=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        python_version=platform.python_version(),
        cpu_model=cpu_model(),
        cpu_cores=os.cpu_count() or 1,
        torch_threads=torch.get_num_threads(),
        torch_version=str(torch.__version__),
        cuda_version=torch.version.cuda,
        driver_version=driver,
        gpu_name=gpu_name,
        gpu_memory_bytes=gpu_memory,
    )


def host_load_average() -> float | None:
    """This host's 1-minute load average (runnable tasks), ``None`` where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def busy_host_warning(
    load: float | None, *, cores: int, threads: int, cpu_time: bool = False
) -> str | None:
    """A warning when other processes competed for the CPU a CPU step was timed on: the
    1-minute load average above the cores, at least one runnable task beyond this run's own
    ``threads``. On such a host torch's thread pool waits for cores and a step can take many
    times its idle time (QA session 36: an MLP step 170 ms at 2 threads, 4 ms at 1). The
    advice names only the flags not already in use (``cpu_time``: timed by CPU time)."""
    if load is None or load <= cores or load - threads < 1:
        return None
    missing = [f for f, used in (("--threads 1", threads == 1), ("--timer cpu", cpu_time))
               if not used]  # fmt: skip
    advice = (
        f"measure on an idle host, or with {' '.join(missing)}"
        if missing
        else "measure on an idle host (CPU time leaves out the waits, not the neighbours' "
        "share of caches and memory bandwidth)"
    )
    return (
        f"the host was busy: load average {load:.1f} on {cores} CPU cores while timing "
        f"({threads} of them this run's threads); other processes slow and scatter a CPU step "
        f"-- {advice}"
    )
