"""Device strings from the user (``cpu``, ``cuda``, ``cuda:N``, ``auto``) to ``torch.device``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import torch

from gpucast.domain.errors import DeviceUnavailableError, InvalidSpecError
from gpucast.domain.limits import format_bytes

if TYPE_CHECKING:
    from gpucast.workloads.base import Workload

_DEVICE = re.compile(r"^(cpu|cuda|auto)(?::(\d+))?$")
NO_CUDA_FIX = "use --device cpu or install a CUDA build of torch"


def resolve_device(text: str) -> torch.device:
    """Parse and check a device string; returns a device with an explicit index for CUDA.

    ``auto`` picks ``cuda:0`` when CUDA is available, else ``cpu``. ``cuda`` means
    ``cuda:0``. Raises :class:`InvalidSpecError` for a string that is not a device and
    :class:`DeviceUnavailableError` for a device this machine does not have.
    """
    cleaned = text.strip().lower() if isinstance(text, str) else ""
    match = _DEVICE.match(cleaned)
    if match is None or (match.group(1) != "cuda" and match.group(2) is not None):
        raise InvalidSpecError(
            "device", "must be cpu, cuda, cuda:N or auto", got=text, fix="e.g. --device cuda:0"
        )
    kind, index_text = match.group(1), match.group(2)
    if kind == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if kind == "auto":
        return torch.device("cuda", 0) if available else torch.device("cpu")
    if not available:
        raise DeviceUnavailableError(f"device {text!r}: no CUDA device", fix=NO_CUDA_FIX)
    index = int(index_text) if index_text is not None else 0
    count = torch.cuda.device_count()
    if index >= count:
        have = ", ".join(f"cuda:{i}" for i in range(count))
        raise DeviceUnavailableError(
            f"device {text!r}: this machine has {count} CUDA device(s) ({have})",
            fix="pick one of those with --device",
        )
    return torch.device("cuda", index)


def has_bf16_units(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 natively: a CUDA GPU of compute capability 8.0 or
    later (Ampere on; what the catalog's bf16 peaks say) or a ROCm one. Not the CPU, and
    not an older GPU that only emulates bf16 (``torch.cuda.is_bf16_supported``'s default
    counts emulation)."""
    if device.type != "cuda":
        return False
    if torch.version.hip:
        return True
    return bool(torch.cuda.get_device_properties(device).major >= 8)


def device_label(device: torch.device) -> str:
    """The canonical string stored with a measurement: ``cpu`` or ``cuda:N``."""
    if device.type == "cuda":
        return f"cuda:{0 if device.index is None else device.index}"
    return device.type


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device`` (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_memory_bytes(device: torch.device) -> float:
    """All the memory ``device`` has: a GPU's total memory, the host's physical memory."""
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    import psutil

    return float(psutil.virtual_memory().total)


def check_batch_fits(
    workload: Workload,
    batch_size: int,
    device: torch.device,
    *,
    flag: str,
    step: tuple[str, str] | None = None,
) -> None:
    """Refuse a batch size whose synthetic batch alone exceeds ``device``'s memory (QA 38 I
    #21: ``--batch-sizes 100000000`` tried to allocate 313 GB and failed as a runtime error).
    The batch is made on ``meta`` (shapes only), so nothing is allocated to find out; the model,
    its activations and gradients come on top, so a batch that passes may still not fit; a
    batch maker that cannot run on meta is not checked. With ``step`` (mode, precision) on the
    CPU, the whole step is checked too (:func:`_check_step_fits`)."""
    from torch.utils._pytree import tree_flatten

    try:
        batch = workload.make_batch(batch_size, torch.device("meta"))
    except Exception:  # a batch maker meta cannot run (a CPU constant in it): cannot tell
        return
    leaves, _ = tree_flatten(batch)
    batch_bytes = sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))
    capacity = device_memory_bytes(device)
    if batch_bytes > capacity:
        raise InvalidSpecError(
            flag,
            f"batch size {batch_size:,} of {workload.name} needs {format_bytes(batch_bytes)} "
            f"for its synthetic batch alone, more than the {format_bytes(capacity)} of memory "
            f"on {device_label(device)}",
            fix=f"lower --{flag}",
        )
    if step is not None and device.type == "cpu":
        _check_step_fits(workload, batch_size, capacity, flag=flag, mode=step[0], precision=step[1])


def _step_peak_bytes(workload: Workload, batch_size: int, precision: str, train: bool) -> int:
    from gpucast.domain.workload import WorkloadSpec
    from gpucast.profile.profiler import profile

    spec = WorkloadSpec(name=workload.name, batch_size=batch_size, precision=precision)
    memory = profile(workload, spec).memory
    return memory.train_peak_bytes if train else memory.inference_peak_bytes


def _check_step_fits(
    workload: Workload, batch_size: int, capacity: float, *, flag: str, mode: str, precision: str
) -> None:
    """Refuse a CPU step whose estimated peak (``gpucast profile``'s memory estimate: weights,
    gradients, optimizer state, activations and the batch, on fake tensors) exceeds the host's
    memory. QA 40 C2: ``measure train mlp --batch-size 3000000`` passed the batch check (8.8 GiB
    of 23.5) and was SIGKILLed by the kernel's OOM killer 3 minutes later, exit 137 and no word;
    a GPU's out-of-memory is an error torch raises, so only the CPU is checked. A workload the
    profiler cannot trace is not checked. The batch said to fit is on the line through the
    peaks at batch 1 and this one: the peak is convex in the batch (the largest of linear
    terms), so every batch under that line fits."""
    train = mode == "train"
    try:
        need = _step_peak_bytes(workload, batch_size, precision, train)
    except Exception:  # a model fake tensors cannot run: cannot tell
        return
    if need <= capacity:
        return
    one = _step_peak_bytes(workload, 1, precision, train) if batch_size > 1 else need
    fits = (
        1 + int((capacity - one) * (batch_size - 1) / max(need - one, 1)) if one <= capacity else 0
    )
    raise InvalidSpecError(
        flag,
        f"batch size {batch_size:,} of {workload.name} needs about {format_bytes(need)} for "
        f"{'a training step' if train else 'an inference step'} (gpucast profile's estimate), "
        f"more than the {format_bytes(capacity)} of memory on cpu",
        fix=f"lower --{flag} (about {fits:,} fits)"
        if fits >= 1
        # QA 41: a 128 GiB model was told to lower a batch of 2
        else f"no batch fits: at {flag} 1 it needs about {format_bytes(one)}; measure it on "
        "a machine with more memory, or size it without running it (gpucast profile)",
    )
