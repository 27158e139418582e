"""A measurement of a workload's step time, as a frozen value that keeps its raw samples.

:class:`Measurement` holds every timed step; its statistics (median, mean, percentiles, IQR,
the Student-t confidence interval of the mean, throughput) are computed from those samples in
``__post_init__``, so they can never disagree with them. Noise is flagged in ``warnings``
("IQR is 14% of the median") rather than hidden. The harness that produces it lives in
:mod:`gpucast.measure`; this module does no I/O and reads no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, cast, get_args

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.prediction import Estimate
from gpucast.domain.units import percent_text
from gpucast.domain.workload import (
    PRECISIONS,
    Mode,
    Precision,
    WorkloadSpec,
    options_from_json,
    options_to_json,
)

StopReason = Literal["ci_reached", "time_budget", "sample_cap"]
STOP_REASONS: tuple[str, ...] = get_args(StopReason)
MODES: tuple[str, ...] = get_args(Mode)

#: Bump when the dict form of a measurement changes shape.
MEASUREMENT_SCHEMA_VERSION = 1

#: An IQR above this share of the median is flagged as noisy.
NOISY_IQR_FRACTION = 0.10
#: Fewer measured steps than this are flagged as too few to trust the interval.
FEW_SAMPLES = 10


def _require_finite_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpecError(name, "must be a number", got=value)
    if not math.isfinite(value) or value <= 0:
        raise InvalidSpecError(name, "must be a finite number > 0", got=value)


def _opt_float(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentFingerprint:
    """Where a measurement ran: enough to tell two machines (and two software stacks) apart.

    GPU fields are ``None`` for a CPU measurement or where the value cannot be read.
    """

    host: str
    os: str
    python_version: str
    cpu_model: str
    cpu_cores: int  # logical CPUs the OS reports
    torch_threads: int  # torch.get_num_threads() during the run
    torch_version: str
    cuda_version: str | None = None  # CUDA runtime torch was built with
    driver_version: str | None = None  # NVIDIA driver, from NVML
    gpu_name: str | None = None
    gpu_memory_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "os": self.os,
            "python_version": self.python_version,
            "cpu_model": self.cpu_model,
            "cpu_cores": self.cpu_cores,
            "torch_threads": self.torch_threads,
            "torch_version": self.torch_version,
            "cuda_version": self.cuda_version,
            "driver_version": self.driver_version,
            "gpu_name": self.gpu_name,
            "gpu_memory_bytes": self.gpu_memory_bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvironmentFingerprint:
        memory = data.get("gpu_memory_bytes")
        return cls(
            host=str(data["host"]),
            os=str(data.get("os", "")),
            python_version=str(data.get("python_version", "")),
            cpu_model=str(data.get("cpu_model", "")),
            cpu_cores=int(data.get("cpu_cores", 0)),
            torch_threads=int(data.get("torch_threads", 0)),
            torch_version=str(data.get("torch_version", "")),
            cuda_version=data.get("cuda_version"),
            driver_version=data.get("driver_version"),
            gpu_name=data.get("gpu_name"),
            gpu_memory_bytes=None if memory is None else int(memory),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySummary:
    """GPU telemetry sampled (NVML) while the measured steps ran: mean and max of each signal.

    A signal the GPU does not report (e.g. power on some boards) is ``None``.
    """

    n_samples: int
    interval_s: float
    gpu_util_mean_pct: float | None = None
    gpu_util_max_pct: float | None = None
    memory_used_mean_bytes: float | None = None
    memory_used_max_bytes: float | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    sm_clock_mean_mhz: float | None = None
    sm_clock_max_mhz: float | None = None

    def __post_init__(self) -> None:
        if self.n_samples < 1:
            raise InvalidSpecError("telemetry.n_samples", "must be >= 1", got=self.n_samples)
        _require_finite_positive("telemetry.interval_s", self.interval_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_samples": self.n_samples,
            "interval_s": self.interval_s,
            "gpu_util_mean_pct": self.gpu_util_mean_pct,
            "gpu_util_max_pct": self.gpu_util_max_pct,
            "memory_used_mean_bytes": self.memory_used_mean_bytes,
            "memory_used_max_bytes": self.memory_used_max_bytes,
            "power_mean_w": self.power_mean_w,
            "power_max_w": self.power_max_w,
            "sm_clock_mean_mhz": self.sm_clock_mean_mhz,
            "sm_clock_max_mhz": self.sm_clock_max_mhz,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TelemetrySummary:
        return cls(
            n_samples=int(data["n_samples"]),
            interval_s=float(data["interval_s"]),
            gpu_util_mean_pct=_opt_float(data, "gpu_util_mean_pct"),
            gpu_util_max_pct=_opt_float(data, "gpu_util_max_pct"),
            memory_used_mean_bytes=_opt_float(data, "memory_used_mean_bytes"),
            memory_used_max_bytes=_opt_float(data, "memory_used_max_bytes"),
            power_mean_w=_opt_float(data, "power_mean_w"),
            power_max_w=_opt_float(data, "power_max_w"),
            sm_clock_mean_mhz=_opt_float(data, "sm_clock_mean_mhz"),
            sm_clock_max_mhz=_opt_float(data, "sm_clock_max_mhz"),
        )


#: How an energy figure was obtained: a hardware energy counter read before and after the
#: measured steps (NVML's total-energy counter on the GPU, RAPL on the CPU package), or the
#: mean of sampled board power times the measured time (a GPU without the counter).
ENERGY_METHODS: tuple[str, ...] = ("nvml-counter", "power-sampling", "rapl")


@dataclass(frozen=True, slots=True, kw_only=True)
class EnergySummary:
    """Energy over the measured steps (warm-up excluded): GPU board and CPU packages.

    A side that could not be read is ``None`` (its method too); ``power_limit_w`` is the GPU's
    enforced power limit while the steps ran (``None`` off NVIDIA GPUs).
    """

    steps: int
    elapsed_s: float
    gpu_energy_j: float | None = None
    gpu_method: str | None = None
    cpu_energy_j: float | None = None
    cpu_method: str | None = None
    power_limit_w: float | None = None

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise InvalidSpecError("energy.steps", "must be >= 1", got=self.steps)
        _require_finite_positive("energy.elapsed_s", self.elapsed_s)
        for side in ("gpu", "cpu"):
            joules, method = getattr(self, f"{side}_energy_j"), getattr(self, f"{side}_method")
            if (joules is None) != (method is None):
                raise InvalidSpecError(f"energy.{side}_method", "goes with an energy figure")
            if joules is not None and not (math.isfinite(joules) and joules >= 0):
                raise InvalidSpecError(f"energy.{side}_energy_j", "must be >= 0", got=joules)
            if method is not None and method not in ENERGY_METHODS:
                raise InvalidSpecError(
                    f"energy.{side}_method", f"must be one of {', '.join(ENERGY_METHODS)}"
                )
        if self.power_limit_w is not None:
            _require_finite_positive("energy.power_limit_w", self.power_limit_w)

    @property
    def gpu_energy_j_per_step(self) -> float | None:
        return None if self.gpu_energy_j is None else self.gpu_energy_j / self.steps

    @property
    def cpu_energy_j_per_step(self) -> float | None:
        return None if self.cpu_energy_j is None else self.cpu_energy_j / self.steps

    @property
    def gpu_avg_power_w(self) -> float | None:
        return None if self.gpu_energy_j is None else self.gpu_energy_j / self.elapsed_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "elapsed_s": self.elapsed_s,
            "gpu_energy_j": self.gpu_energy_j,
            "gpu_energy_j_per_step": self.gpu_energy_j_per_step,
            "gpu_avg_power_w": self.gpu_avg_power_w,
            "gpu_method": self.gpu_method,
            "cpu_energy_j": self.cpu_energy_j,
            "cpu_energy_j_per_step": self.cpu_energy_j_per_step,
            "cpu_method": self.cpu_method,
            "power_limit_w": self.power_limit_w,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnergySummary:
        gpu_method, cpu_method = data.get("gpu_method"), data.get("cpu_method")
        return cls(
            steps=int(data["steps"]),
            elapsed_s=float(data["elapsed_s"]),
            gpu_energy_j=_opt_float(data, "gpu_energy_j"),
            gpu_method=None if gpu_method is None else str(gpu_method),
            cpu_energy_j=_opt_float(data, "cpu_energy_j"),
            cpu_method=None if cpu_method is None else str(cpu_method),
            power_limit_w=_opt_float(data, "power_limit_w"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientNoise:
    """The gradient noise scale measured during a short run (``measure train --noise-scale``).

    Each of ``steps`` steps splits its batch into ``micro_batches`` micro-batches of
    ``micro_batch`` samples and takes one gradient per micro-batch (as Pollux's replicas and
    accumulation steps do); from the mean of their squared norms and the squared norm of
    their mean come unbiased estimates of ``|G|^2`` (``grad_sqr``, the squared norm of the
    true gradient) and ``tr(Sigma)`` (``trace_sigma``, the per-sample gradient variance), each
    averaged over the steps. ``noise_scale`` = ``trace_sigma / grad_sqr`` (McCandlish et al.'s
    B_simple, samples), with an interval from a jackknife over the steps
    (``noise_scale_lower`` .. ``noise_scale_upper``, ``confidence``). ``data`` says what was
    measured on (the workload's synthetic batches or the user's, at initialisation or a
    checkpoint): the noise scale grows as training proceeds.
    """

    micro_batch: int
    micro_batches: int
    steps: int
    grad_sqr: float
    trace_sigma: float
    noise_scale_lower: float
    noise_scale_upper: float
    confidence: float = 0.8
    data: str = ""

    def __post_init__(self) -> None:
        for name in ("micro_batch", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSpecError(f"gradient_noise.{name}", "must be an integer >= 1")
        if self.micro_batches < 2:
            raise InvalidSpecError("gradient_noise.micro_batches", "must be >= 2")
        for name in ("grad_sqr", "trace_sigma", "noise_scale_lower", "noise_scale_upper"):
            _require_finite_positive(f"gradient_noise.{name}", getattr(self, name))
        if not self.noise_scale_lower <= self.noise_scale <= self.noise_scale_upper:
            raise InvalidSpecError(
                "gradient_noise.noise_scale", "must lie within its interval", got=self.noise_scale
            )
        if not 0 < self.confidence < 1:
            raise InvalidSpecError("gradient_noise.confidence", "must be in (0, 1)")

    @property
    def noise_scale(self) -> float:
        """B_simple = tr(Sigma) / |G|^2, in samples."""
        return self.trace_sigma / self.grad_sqr

    @property
    def at_initialisation(self) -> bool:
        """Whether it was measured on freshly initialised weights (``data`` says so)."""
        return "initialis" in self.data

    def text(self) -> str:
        return (
            f"B_simple {self.noise_scale:,.0f} samples ({self.confidence:.0%}: "
            f"{self.noise_scale_lower:,.0f}-{self.noise_scale_upper:,.0f}) from {self.steps} "
            f"steps of {self.micro_batches} micro-batches of {self.micro_batch}"
            + (f", {self.data}" if self.data else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "micro_batch": self.micro_batch,
            "micro_batches": self.micro_batches,
            "steps": self.steps,
            "grad_sqr": self.grad_sqr,
            "trace_sigma": self.trace_sigma,
            "noise_scale": self.noise_scale,
            "noise_scale_lower": self.noise_scale_lower,
            "noise_scale_upper": self.noise_scale_upper,
            "confidence": self.confidence,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GradientNoise:
        return cls(
            micro_batch=int(data["micro_batch"]),
            micro_batches=int(data["micro_batches"]),
            steps=int(data["steps"]),
            grad_sqr=float(data["grad_sqr"]),
            trace_sigma=float(data["trace_sigma"]),
            noise_scale_lower=float(data["noise_scale_lower"]),
            noise_scale_upper=float(data["noise_scale_upper"]),
            confidence=float(data.get("confidence", 0.8)),
            data=str(data.get("data", "")),
        )


def t_critical(n_samples: int, confidence: float) -> float:
    """Two-sided Student-t critical value for the mean of ``n_samples`` (``n - 1`` d.o.f.)."""
    if n_samples < 2:
        return math.inf
    from scipy import stats  # scipy.stats costs ~0.9 s to import; only needed here

    return float(stats.t.ppf(0.5 + confidence / 2.0, n_samples - 1))


def ci_relative_halfwidth(mean_s: float, std_s: float, n_samples: int, confidence: float) -> float:
    """Half-width of the ``confidence`` Student-t interval of the mean, relative to the mean."""
    if n_samples < 2 or mean_s <= 0:
        return math.inf
    return t_critical(n_samples, confidence) * std_s / math.sqrt(n_samples) / mean_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """Timed steps of one workload on one device, with statistics derived from the raw samples.

    Inputs (set by the harness): ``spec``, ``mode``, ``device`` (canonical: ``cpu``,
    ``cuda:0``...), ``step_times_s`` (every measured step, in order), ``warmup_step_times_s``
    (the discarded warm-up steps), ``samples_per_step`` (the batch size the step processes),
    ``stop_reason``, ``target_ci`` and ``confidence`` (the stopping rule), ``environment``,
    ``telemetry``, ``energy``, ``gradient_noise`` (``measure train --noise-scale``), ``created_at``
    (timezone-aware) and ``warnings`` from the harness.

    Derived in ``__post_init__`` from the samples (never passed in): ``n_samples``,
    ``median_s``, ``mean_s``, ``std_s``, ``min_s``, ``max_s``, ``p5_s``, ``p25_s``,
    ``p75_s``, ``p95_s``, ``iqr_s``, ``ci_low_s``/``ci_high_s`` (Student-t interval of the
    mean), ``ci_halfwidth_rel``, ``samples_per_s`` (``samples_per_step / mean_s``) and
    ``n_warmup``. ``warnings`` gains the noise flags the samples call for (IQR over 10% of the
    median, fewer than 10 samples, an unmet CI target), after any the harness gave.
    """

    spec: WorkloadSpec
    mode: Mode
    device: str
    step_times_s: tuple[float, ...]
    samples_per_step: int
    stop_reason: StopReason
    target_ci: float
    environment: EnvironmentFingerprint
    created_at: datetime
    confidence: float = 0.95
    warmup_step_times_s: tuple[float, ...] = ()
    telemetry: TelemetrySummary | None = None
    energy: EnergySummary | None = None
    gradient_noise: GradientNoise | None = None
    warnings: tuple[str, ...] = ()

    n_samples: int = field(init=False)
    median_s: float = field(init=False)
    mean_s: float = field(init=False)
    std_s: float = field(init=False)
    min_s: float = field(init=False)
    max_s: float = field(init=False)
    p5_s: float = field(init=False)
    p25_s: float = field(init=False)
    p75_s: float = field(init=False)
    p95_s: float = field(init=False)
    iqr_s: float = field(init=False)
    ci_low_s: float = field(init=False)
    ci_high_s: float = field(init=False)
    ci_halfwidth_rel: float = field(init=False)
    samples_per_s: float = field(init=False)
    n_warmup: int = field(init=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidSpecError("mode", f"must be one of {', '.join(MODES)}", got=self.mode)
        if self.stop_reason not in STOP_REASONS:
            raise InvalidSpecError(
                "stop_reason", f"must be one of {', '.join(STOP_REASONS)}", got=self.stop_reason
            )
        if not self.device:
            raise InvalidSpecError("device", "must not be empty", fix="e.g. cpu or cuda:0")
        _require_finite_positive("target_ci", self.target_ci)
        if not 0 < self.confidence < 1:
            raise InvalidSpecError("confidence", "must be in (0, 1)", got=self.confidence)
        if self.samples_per_step < 1:
            raise InvalidSpecError("samples_per_step", "must be >= 1", got=self.samples_per_step)
        if self.created_at.tzinfo is None:
            raise InvalidSpecError(
                "created_at", "must be timezone-aware", fix="use datetime.now(UTC)"
            )

        times = np.asarray(self.step_times_s, dtype=np.float64)
        warmup = np.asarray(self.warmup_step_times_s, dtype=np.float64)
        if times.ndim != 1 or times.size < 2:
            raise InvalidSpecError(
                "step_times_s",
                "needs at least 2 measured steps",
                got=int(times.size),
                fix="raise --max-time-s or measure a smaller batch",
            )
        for name, array in (("step_times_s", times), ("warmup_step_times_s", warmup)):
            if array.size and not (np.all(np.isfinite(array)) and np.all(array > 0)):
                raise InvalidSpecError(name, "every step time must be a finite number > 0")
        # Keep plain Python floats (exact JSON round trip, hashable, comparable).
        set_ = object.__setattr__
        set_(self, "step_times_s", tuple(float(t) for t in times))
        set_(self, "warmup_step_times_s", tuple(float(t) for t in warmup))

        n = int(times.size)
        p5, p25, p50, p75, p95 = (float(v) for v in np.percentile(times, [5, 25, 50, 75, 95]))
        mean = float(times.mean())
        std = float(times.std(ddof=1))
        rel = ci_relative_halfwidth(mean, std, n, self.confidence)
        half = rel * mean
        set_(self, "n_samples", n)
        set_(self, "median_s", p50)
        set_(self, "mean_s", mean)
        set_(self, "std_s", std)
        set_(self, "min_s", float(times.min()))
        set_(self, "max_s", float(times.max()))
        set_(self, "p5_s", p5)
        set_(self, "p25_s", p25)
        set_(self, "p75_s", p75)
        set_(self, "p95_s", p95)
        set_(self, "iqr_s", p75 - p25)
        # A step time cannot be negative, whatever a wide interval says.
        set_(self, "ci_low_s", max(mean - half, 0.0))
        set_(self, "ci_high_s", mean + half)
        set_(self, "ci_halfwidth_rel", rel)
        set_(self, "samples_per_s", self.samples_per_step / mean)
        set_(self, "n_warmup", int(warmup.size))
        set_(self, "warnings", _merge(self.warnings, self._derived_warnings()))

    def _derived_warnings(self) -> tuple[str, ...]:
        found: list[str] = []
        iqr_fraction = self.iqr_s / self.median_s
        if iqr_fraction > NOISY_IQR_FRACTION:
            found.append(
                f"IQR is {iqr_fraction:.0%} of the median: step times are noisy "
                "(other load on the machine, thermal or clock changes?)"
            )
        if self.stop_reason == "time_budget":
            found.append(
                f"time budget ran out before the CI target: ±{self.ci_halfwidth_rel:.1%} "
                f"reached, ±{percent_text(self.target_ci)} asked (raise --max-time-s)"
            )
        elif self.stop_reason == "sample_cap":
            found.append(
                f"sample cap reached before the CI target: ±{self.ci_halfwidth_rel:.1%} "
                f"reached, ±{self.target_ci:.1%} asked"
            )
        if self.n_samples < FEW_SAMPLES:
            found.append(f"only {self.n_samples} samples: the interval is wide and fragile")
        return tuple(found)

    @property
    def workload(self) -> str:
        return self.spec.name

    @property
    def measured_time_s(self) -> float:
        """Total time of the measured steps (warm-up excluded)."""
        return math.fsum(self.step_times_s)

    def as_estimate(self) -> Estimate:
        """The mean step time with its confidence interval, as predictions are shaped."""
        return Estimate(
            value=self.mean_s,
            lower=self.ci_low_s,
            upper=self.ci_high_s,
            unit="s",
            bottleneck="measured",
            source="measured",
            breakdown={"measured": self.mean_s},
            notes=self.warnings,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: the inputs, then the derived statistics for readers."""
        return {
            "schema_version": MEASUREMENT_SCHEMA_VERSION,
            "workload": self.spec.name,
            "workload_options": options_to_json(self.spec.options),
            "batch_size": self.spec.batch_size,
            "precision": self.spec.precision,
            "mode": self.mode,
            "device": self.device,
            "created_at": self.created_at.isoformat(),
            "stop_reason": self.stop_reason,
            "target_ci": self.target_ci,
            "confidence": self.confidence,
            "samples_per_step": self.samples_per_step,
            "n_samples": self.n_samples,
            "n_warmup": self.n_warmup,
            "median_s": self.median_s,
            "mean_s": self.mean_s,
            "std_s": self.std_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "p5_s": self.p5_s,
            "p25_s": self.p25_s,
            "p75_s": self.p75_s,
            "p95_s": self.p95_s,
            "iqr_s": self.iqr_s,
            "ci_low_s": self.ci_low_s,
            "ci_high_s": self.ci_high_s,
            "ci_halfwidth_rel": self.ci_halfwidth_rel,
            "samples_per_s": self.samples_per_s,
            "warnings": list(self.warnings),
            "environment": self.environment.to_dict(),
            "telemetry": None if self.telemetry is None else self.telemetry.to_dict(),
            "energy": None if self.energy is None else self.energy.to_dict(),
            "gradient_noise": None
            if self.gradient_noise is None
            else self.gradient_noise.to_dict(),
            "step_times_s": list(self.step_times_s),
            "warmup_step_times_s": list(self.warmup_step_times_s),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        """Rebuild from :meth:`to_dict`'s output; statistics are recomputed from the samples."""
        version = data.get("schema_version")
        if version != MEASUREMENT_SCHEMA_VERSION:
            raise InvalidSpecError(
                "measurement.schema_version",
                f"must be {MEASUREMENT_SCHEMA_VERSION}",
                got=version,
                fix="re-measure with this version of gpucast",
            )
        try:
            precision = str(data["precision"])
            if precision not in PRECISIONS:
                raise InvalidSpecError(
                    "precision", f"must be one of {', '.join(PRECISIONS)}", got=precision
                )
            created_at = datetime.fromisoformat(str(data["created_at"]))
            if created_at.tzinfo is None:
                created_at = created_at.replace(tzinfo=UTC)
            telemetry = data.get("telemetry")
            energy = data.get("energy")
            noise = data.get("gradient_noise")
            return cls(
                spec=WorkloadSpec(
                    name=str(data["workload"]),
                    batch_size=int(data["batch_size"]),
                    precision=cast(Precision, precision),
                    options=options_from_json(data.get("workload_options")),
                ),
                mode=data["mode"],
                device=str(data["device"]),
                step_times_s=tuple(float(t) for t in data["step_times_s"]),
                warmup_step_times_s=tuple(float(t) for t in data.get("warmup_step_times_s", ())),
                samples_per_step=int(data["samples_per_step"]),
                stop_reason=data["stop_reason"],
                target_ci=float(data["target_ci"]),
                confidence=float(data.get("confidence", 0.95)),
                environment=EnvironmentFingerprint.from_dict(data["environment"]),
                telemetry=None if telemetry is None else TelemetrySummary.from_dict(telemetry),
                energy=None if energy is None else EnergySummary.from_dict(energy),
                gradient_noise=None if noise is None else GradientNoise.from_dict(noise),
                created_at=created_at,
                warnings=tuple(str(w) for w in data.get("warnings", ())),
            )
        except KeyError as exc:
            raise InvalidSpecError(
                f"measurement.{exc.args[0]}", "is missing", fix="pass a dict from to_dict()"
            ) from None
        except (TypeError, ValueError) as exc:
            raise InvalidSpecError("measurement", f"malformed ({exc})") from None


def _merge(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    """Concatenate, dropping repeats, keeping first-seen order (so round trips are stable)."""
    return tuple(dict.fromkeys((*first, *second)))
