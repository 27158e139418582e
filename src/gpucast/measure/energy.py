"""Energy counters read around the measured steps, and the GPU power limit.

* GPU: NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, millijoules
  since the driver loaded; Volta and newer). Where the board lacks it, the measurement falls
  back to the sampled board power (telemetry) times the measured time.
* CPU: RAPL through Linux powercap (``/sys/class/powercap/intel-rapl:N/energy_uj`` of every
  package domain; the counter wraps at ``max_energy_range_uj``). Absent on most VMs and
  non-Intel/AMD hosts; unreadable without root on recent kernels (a warning says how to fix
  it). A counter that cannot be read never fails the measurement: the energy side is ``None``
  (and a measurement that records no energy at all says why in one warning).
* :class:`PowerLimitControl` sets the GPU's power limit through NVML for a sweep and puts the
  previous limit back, whatever happens; without permission it says so in one line.

Everything takes its NVML module and its sysfs root as arguments, so tests fake them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.measurement import EnergySummary

POWERCAP_ROOT = Path("/sys/class/powercap")
CounterJ = Callable[[], float]
#: Why a GPU's energy cannot be read though NVML is there (a pre-Volta board, or no permission).
NO_NVML_ENERGY_COUNTER = "no NVML energy counter on this GPU"


def no_rapl_reason(root: Path = POWERCAP_ROOT) -> str:
    """Why the CPU's energy cannot be read where :func:`open_rapl` finds no package domain."""
    return f"no readable RAPL powercap here ({root} has no intel-rapl package domain)"


def nvml_energy_counter(nvml: Any, handle: Any) -> CounterJ | None:
    """The GPU's cumulative energy in joules, or ``None`` when the board has no counter."""

    def read() -> float:
        return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1000.0

    try:
        read()
    except Exception:  # NVMLError_NotSupported on pre-Volta boards, or no permission
        return None
    return read


def nvml_power_limit_w(nvml: Any, handle: Any) -> float | None:
    """The enforced power limit (W), or ``None`` where NVML does not report it."""
    try:
        return float(nvml.nvmlDeviceGetEnforcedPowerLimit(handle)) / 1000.0
    except Exception:
        return None


@dataclass(frozen=True, slots=True)
class _RaplDomain:
    energy: Path
    wrap_uj: float


class RaplCounter:
    """The summed energy (J) of the CPU package domains under a powercap root, wrap-safe
    between consecutive reads. Use :func:`open_rapl`."""

    def __init__(self, domains: Sequence[_RaplDomain]) -> None:
        self._domains = tuple(domains)
        self._last = [self._raw(d) for d in self._domains]
        self._total_uj = 0.0

    @staticmethod
    def _raw(domain: _RaplDomain) -> float:
        return float(domain.energy.read_text().strip())

    def __call__(self) -> float:
        for i, domain in enumerate(self._domains):
            now = self._raw(domain)
            delta = now - self._last[i]
            if delta < 0:  # the counter wrapped
                delta += domain.wrap_uj
            self._total_uj += delta
            self._last[i] = now
        return self._total_uj / 1e6


def open_rapl(root: Path = POWERCAP_ROOT) -> tuple[RaplCounter | None, str | None]:
    """A counter over every RAPL package domain under ``root``, and a warning when they exist
    but cannot be read (``None`` and no warning where there is no RAPL at all)."""
    if not root.is_dir():
        return None, None
    domains = []
    for zone in sorted(root.glob("intel-rapl:*")):
        if zone.name.count(":") != 1:  # sub-zones (core, uncore, dram) are inside packages
            continue
        name = zone / "name"
        with contextlib.suppress(OSError):
            if not name.read_text().strip().startswith("package"):
                continue
        try:
            wrap = float((zone / "max_energy_range_uj").read_text().strip())
        except (OSError, ValueError):
            wrap = 2.0**32
        domains.append(_RaplDomain(energy=zone / "energy_uj", wrap_uj=wrap))
    if not domains:
        return None, None
    try:
        return RaplCounter(domains), None
    except PermissionError:
        return None, (
            f"CPU energy not recorded: {domains[0].energy} is not readable "
            "(run as root, or `sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj`)"
        )
    except (OSError, ValueError) as exc:
        return None, f"CPU energy not recorded: RAPL unreadable ({exc})"


class EnergyWindow:
    """Reads the counters at :meth:`start` and :meth:`stop` (the measured steps between)."""

    def __init__(
        self,
        *,
        gpu: CounterJ | None = None,
        cpu: CounterJ | None = None,
        clock: Callable[[], float],
        power_limit_w: float | None = None,
    ) -> None:
        self._gpu, self._cpu, self._clock = gpu, cpu, clock
        self.power_limit_w = power_limit_w
        self._start: tuple[float | None, float | None, float] | None = None
        self.warnings: list[str] = []

    @property
    def running(self) -> bool:
        return self._start is not None

    def _read(self, counter: CounterJ | None, side: str) -> float | None:
        if counter is None:
            return None
        try:
            return float(counter())
        except Exception as exc:  # a counter that fails mid-run: no energy, never an error
            self.warnings.append(f"{side} energy not recorded: the counter failed ({exc})")
            return None

    def start(self) -> None:
        self._start = (self._read(self._gpu, "GPU"), self._read(self._cpu, "CPU"), self._clock())

    def stop(self, steps: int, *, gpu_power_w: float | None = None) -> EnergySummary | None:
        """The energy of ``steps`` measured steps; ``gpu_power_w`` (sampled mean board power)
        stands in for a GPU without an energy counter. ``None`` if never started."""
        if self._start is None or steps < 1:
            return None
        gpu0, cpu0, t0 = self._start
        gpu1, cpu1 = self._read(self._gpu, "GPU"), self._read(self._cpu, "CPU")
        elapsed = self._clock() - t0
        self._start = None
        if not elapsed > 0:
            return None
        gpu_j: float | None = None
        gpu_method: str | None = None
        if gpu0 is not None and gpu1 is not None and gpu1 >= gpu0:
            gpu_j, gpu_method = gpu1 - gpu0, "nvml-counter"
        elif gpu_power_w is not None:
            gpu_j, gpu_method = gpu_power_w * elapsed, "power-sampling"
        cpu_j = None if cpu0 is None or cpu1 is None else max(0.0, cpu1 - cpu0)
        return EnergySummary(
            steps=steps,
            elapsed_s=elapsed,
            gpu_energy_j=gpu_j,
            gpu_method=gpu_method,
            cpu_energy_j=cpu_j,
            cpu_method=None if cpu_j is None else "rapl",
            power_limit_w=self.power_limit_w,
        )


class PowerLimitControl:
    """Set a GPU's power limit for a sweep; :meth:`restore` puts the first limit back."""

    def __init__(self, nvml: Any, handle: Any, device: str) -> None:
        self._nvml, self._handle, self.device = nvml, handle, device
        try:
            low, high = nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
            self.original_w = float(nvml.nvmlDeviceGetPowerManagementLimit(handle)) / 1000.0
        except Exception as exc:
            raise InvalidSpecError(
                "power-limits",
                f"{device} does not report its power-limit range through NVML ({exc})",
                fix="measure without --power-limits",
            ) from None
        self.min_w, self.max_w = float(low) / 1000.0, float(high) / 1000.0

    def check(self, limits_w: Sequence[float]) -> None:
        """Every limit within the board's range, before anything runs."""
        bad = [w for w in limits_w if not self.min_w - 1e-6 <= w <= self.max_w + 1e-6]
        if bad:
            raise InvalidSpecError(
                "power-limits",
                f"{bad[0]:g} W is outside {self.device}'s range "
                f"{self.min_w:g}-{self.max_w:g} W (NVML)",
                got=bad[0],
                fix=f"choose limits between {self.min_w:g} and {self.max_w:g}",
            )

    def set(self, watts: float) -> None:
        try:
            self._nvml.nvmlDeviceSetPowerManagementLimit(self._handle, round(watts * 1000))
        except Exception as exc:
            text = str(exc) or type(exc).__name__
            raise InvalidSpecError(
                "power-limits",
                f"cannot set {self.device}'s power limit to {watts:g} W ({text})",
                fix="setting a power limit needs root (or `sudo nvidia-smi -pm 1` and an "
                "admin-granted permission); run as root, or measure without --power-limits",
            ) from None

    def restore(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlDeviceSetPowerManagementLimit(
                self._handle, round(self.original_w * 1000)
            )

    @contextlib.contextmanager
    def at(self, watts: float) -> Iterator[None]:
        """Run the block at ``watts``; the original limit is back afterwards."""
        self.set(watts)
        try:
            yield
        finally:
            self.restore()


def open_power_limit_control(device: str) -> PowerLimitControl:
    """NVML's power-limit control of ``device`` (a CUDA device); one-line errors where there
    is no NVIDIA GPU or no NVML."""
    from gpucast.measure.devices import device_label, resolve_device
    from gpucast.measure.telemetry import open_nvml_reader

    torch_device = resolve_device(device)
    label = device_label(torch_device)
    if torch_device.type != "cuda":
        raise InvalidSpecError(
            "power-limits",
            f"needs an NVIDIA GPU; the device is {label}",
            fix="pass --device cuda, or measure without --power-limits",
        )
    reader = open_nvml_reader(torch_device)
    if reader is None:
        raise InvalidSpecError(
            "power-limits",
            f"NVML is not available for {label}",
            fix="pip install 'gpucast[nvml]' (nvidia-ml-py) and check the NVIDIA driver",
        )
    return PowerLimitControl(reader.nvml, reader.handle, label)
