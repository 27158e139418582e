"""Timing harness: warm-up, device-synchronised step timing, adaptive stopping, NVML telemetry.

Nothing runs at import; :func:`measure` does the work when called. The names below load their
modules on first use, so a process that only drives others (a campaign's driver, a Ray task
that starts a point's child) imports ``gpucast.measure.campaign`` without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucast.measure.api import StepRunner, measure, measure_kernels, measure_runner
    from gpucast.measure.devices import device_label, has_bf16_units, resolve_device
    from gpucast.measure.harness import Progress, RawRun, StoppingRule, run_adaptive

#: Where each public name lives.
_HOME = {
    "StepRunner": "api",
    "measure": "api",
    "measure_kernels": "api",
    "measure_runner": "api",
    "device_label": "devices",
    "resolve_device": "devices",
    "has_bf16_units": "devices",
    "Progress": "harness",
    "RawRun": "harness",
    "StoppingRule": "harness",
    "run_adaptive": "harness",
}

__all__ = [
    "Progress",
    "RawRun",
    "StepRunner",
    "StoppingRule",
    "device_label",
    "has_bf16_units",
    "measure",
    "measure_kernels",
    "measure_runner",
    "resolve_device",
    "run_adaptive",
]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"gpucast.measure.{_HOME[name]}"), name)
    raise AttributeError(f"module 'gpucast.measure' has no attribute {name!r}")
