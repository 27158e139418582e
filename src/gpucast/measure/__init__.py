"""Timing harness: warm-up, device-synchronised step timing, adaptive stopping, NVML telemetry.

Nothing runs at import; :func:`measure` does the work when called.
"""

from __future__ import annotations

from gpucast.measure.api import StepRunner, measure, measure_kernels, measure_runner
from gpucast.measure.devices import device_label, resolve_device
from gpucast.measure.harness import Progress, RawRun, StoppingRule, run_adaptive

__all__ = [
    "Progress",
    "RawRun",
    "StepRunner",
    "StoppingRule",
    "device_label",
    "measure",
    "measure_kernels",
    "measure_runner",
    "resolve_device",
    "run_adaptive",
]
