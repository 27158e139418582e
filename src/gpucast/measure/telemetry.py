"""GPU telemetry (NVML) sampled in a background thread while steps are timed.

Optional by design: without ``nvidia-ml-py``, without a driver, or on the CPU,
:func:`open_nvml_reader` returns ``None`` and the measurement carries no telemetry. A signal
the board does not report (power on some GPUs) is ``None`` in every sample.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import torch

from gpucast.domain.measurement import TelemetrySummary


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySample:
    gpu_util_pct: float | None = None
    memory_used_bytes: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None


Reader = Callable[[], TelemetrySample]


def _call(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # NVMLError_NotSupported and friends: the signal is absent
        return None


class NvmlReader:
    """Reads one :class:`TelemetrySample` from NVML for one GPU. Use :func:`open_nvml_reader`."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle

    def __call__(self) -> TelemetrySample:
        nvml, handle = self._nvml, self._handle
        util = _call(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        memory = _call(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        power_mw = _call(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        clock = _call(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        return TelemetrySample(
            gpu_util_pct=None if util is None else float(util.gpu),
            memory_used_bytes=None if memory is None else float(memory.used),
            power_w=None if power_mw is None else float(power_mw) / 1000.0,
            sm_clock_mhz=None if clock is None else float(clock),
        )

    @property
    def nvml(self) -> Any:
        """The initialised NVML module (for the energy counter and the power limit)."""
        return self._nvml

    @property
    def handle(self) -> Any:
        """NVML's handle of the measured GPU."""
        return self._handle

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def _nvml_handle(nvml: Any, device: torch.device) -> Any:
    """NVML's handle for torch's ``device``: by UUID (robust to CUDA_VISIBLE_DEVICES)."""
    index = 0 if device.index is None else device.index
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    if uuid is not None:
        text = str(uuid)
        for candidate in (text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}", text):
            with contextlib.suppress(Exception):
                return nvml.nvmlDeviceGetHandleByUUID(candidate)
    return nvml.nvmlDeviceGetHandleByIndex(index)


def open_nvml_reader(device: torch.device) -> NvmlReader | None:
    """An NVML reader for ``device``, or ``None`` where telemetry is not available."""
    if device.type != "cuda":
        return None
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        handle = _nvml_handle(pynvml, device)
    except Exception:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
        return None
    return NvmlReader(pynvml, handle)


def nvml_unavailable_reason(device: torch.device) -> str:
    """Why :func:`open_nvml_reader` gives no reader for ``device``, in a phrase."""
    if device.type != "cuda":
        return f"NVML reads NVIDIA GPUs, not {device.type}"
    try:
        import pynvml
    except ImportError:
        return "pynvml is not installed (pip install 'gpucast[nvml]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML did not start ({str(exc) or type(exc).__name__}; check the NVIDIA driver)"
    try:
        _nvml_handle(pynvml, device)
    except Exception as exc:
        return f"NVML does not see {device} ({str(exc) or type(exc).__name__})"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return "NVML was not available when the measurement began"


class TelemetrySampler:
    """Calls ``read`` every ``interval_s`` in a daemon thread between ``start`` and ``stop``.

    One sample is taken at start and one at stop, so even a short run has a summary.
    """

    def __init__(self, read: Reader, *, interval_s: float = 0.1) -> None:
        self._read = read
        self.interval_s = interval_s
        self._samples: list[TelemetrySample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def _take(self) -> None:
        try:
            self._samples.append(self._read())
        except Exception:  # a failing read must never break the measurement
            return

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._take()
        self._thread = threading.Thread(target=self._loop, name="gpucast-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> TelemetrySummary | None:
        """Stop the thread (taking one last sample) and summarise; ``None`` if never started."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self._take()
        return summarize(self._samples, self.interval_s)

    def __enter__(self) -> TelemetrySampler:
        """Leaving the block stops the thread; entering starts nothing (call :meth:`start`)."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread is not None:
            self.stop()

    @property
    def samples(self) -> tuple[TelemetrySample, ...]:
        return tuple(self._samples)


def summarize(samples: list[TelemetrySample], interval_s: float) -> TelemetrySummary | None:
    """Mean and max of each signal over ``samples``; ``None`` for no samples."""
    if not samples:
        return None
    table = np.array(
        [
            [
                np.nan if value is None else value
                for value in (s.gpu_util_pct, s.memory_used_bytes, s.power_w, s.sm_clock_mhz)
            ]
            for s in samples
        ],
        dtype=np.float64,
    )
    present = ~np.all(np.isnan(table), axis=0)
    with np.errstate(all="ignore"):
        means = np.where(present, np.nanmean(np.where(present, table, 0.0), axis=0), np.nan)
        maxes = np.where(present, np.nanmax(np.where(present, table, 0.0), axis=0), np.nan)

    def pick(values: np.ndarray, column: int) -> float | None:
        return float(values[column]) if present[column] else None

    return TelemetrySummary(
        n_samples=len(samples),
        interval_s=interval_s,
        gpu_util_mean_pct=pick(means, 0),
        gpu_util_max_pct=pick(maxes, 0),
        memory_used_mean_bytes=pick(means, 1),
        memory_used_max_bytes=pick(maxes, 1),
        power_mean_w=pick(means, 2),
        power_max_w=pick(maxes, 2),
        sm_clock_mean_mhz=pick(means, 3),
        sm_clock_max_mhz=pick(maxes, 3),
    )
