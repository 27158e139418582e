"""Clocks and step timers, injectable so tests can drive the harness with a fake clock.

A *clock* is a zero-argument callable returning monotonic seconds (``time.perf_counter``).
A *step timer* runs one step and returns how long it took, in seconds, after the device has
finished the work the step queued.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import torch

Clock = Callable[[], float]
Step = Callable[[], object]


class StepTimer(Protocol):
    def __call__(self, step: Step) -> float:
        """Run ``step`` once and return its duration in seconds."""
        ...


class WallClockTimer:
    """Times a step with a (monotonic) clock, after synchronising the device.

    ``sync`` waits for queued device work (``torch.cuda.synchronize``); ``None`` on the CPU,
    where a step's work is done when the call returns.
    """

    __slots__ = ("_clock", "_sync")

    def __init__(self, clock: Clock = time.perf_counter, sync: Callable[[], None] | None = None):
        self._clock = clock
        self._sync = sync

    def __call__(self, step: Step) -> float:
        clock = self._clock
        if self._sync is None:
            start = clock()
            step()
            return clock() - start
        self._sync()
        start = clock()
        step()
        self._sync()
        return clock() - start


class CudaEventTimer:
    """Times a step with a pair of CUDA events on the current stream of ``device``.

    The events bracket exactly the work the step queues; ``end.synchronize()`` waits for it, so
    the next step starts on an idle device and samples are independent.
    """

    __slots__ = ("_device", "_end", "_start")

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def __call__(self, step: Step) -> float:
        stream = torch.cuda.current_stream(self._device)
        self._start.record(stream)
        step()
        self._end.record(stream)
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end)) / 1e3  # ms -> s


def timer_for(device: torch.device, clock: Clock | None = None) -> StepTimer:
    """The right timer for ``device``: CUDA events on a GPU, the clock on the CPU.

    An injected ``clock`` forces the wall-clock timer (with device sync) so tests stay exact.
    """
    if device.type == "cuda":
        if clock is None:
            return CudaEventTimer(device)
        return WallClockTimer(clock, sync=lambda: torch.cuda.synchronize(device))
    return WallClockTimer(clock or time.perf_counter)
