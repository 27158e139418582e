"""Device strings from the user (``cpu``, ``cuda``, ``cuda:N``, ``auto``) to ``torch.device``."""

from __future__ import annotations

import re

import torch

from gpucast.domain.errors import DeviceUnavailableError, InvalidSpecError

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
