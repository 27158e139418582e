"""Serverless GPU inference: cold-start facts, phases and measurements (issue #19).

A cold start is a chain of phases: the runtime/container start, the CUDA context, reading the
weights from where they are stored (``bytes / min(storage, network, PCIe)``: the slowest link
of the path bounds the copy) and the first call (kernel selection, allocator warm-up, lazy
compilation) on top of one steady-state inference. The facts behind the defaults (storage
classes, PCIe links, phase durations) are rows of ``catalog/data/coldstart.csv``, each with
its source and date; a measured phase (``gpucast measure coldstart``) replaces its default.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import format_duration

FactKind = Literal["storage", "link", "phase"]
FACT_KINDS: tuple[str, ...] = ("storage", "link", "phase")

#: schema of ColdStartMeasurement.to_dict()
COLDSTART_SCHEMA_VERSION = 1


def _check(name: str, value: float, *, strict: bool = False) -> None:
    ok = math.isfinite(value) and (value > 0 if strict else value >= 0)
    if not ok:
        raise InvalidSpecError(name, "must be > 0" if strict else "must be >= 0", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ColdStartFact:
    """One row of ``coldstart.csv``: a storage class's or link's read bandwidth (GB/s) or a
    phase's duration (s), with its source."""

    name: str
    kind: FactKind
    value: float
    source_url: str
    as_of: date
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FACT_KINDS:
            raise InvalidSpecError("kind", f"must be one of {', '.join(FACT_KINDS)}", got=self.kind)
        _check(self.name, self.value, strict=self.kind != "phase")

    @property
    def unit(self) -> str:
        return "s" if self.kind == "phase" else "GB/s"

    @property
    def description(self) -> str:
        """The note without the unit it opens with (``s: starting a container ...`` ->
        ``starting a container ...``), for text that gives the value with its unit."""
        return self.note.removeprefix(f"{self.unit}:").strip()

    def source(self) -> str:
        return f"catalog/data/coldstart.csv {self.name} ({self.source_url}, as of {self.as_of})"


#: Mbit/s in one GB/s (a link in Mbps / 8,000 = GB/s)
MBPS_PER_GBS = 8000.0
#: how long an EBS-optimized instance that bursts holds its maximum EBS bandwidth, at least
#: once every 24 hours (AWS, "Amazon EBS specifications" footnote)
EBS_BURST_S = 30 * 60


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceEbs:
    """One row of ``ebs_bandwidth.csv``: an instance type's dedicated bandwidth to Amazon EBS
    (Mbit/s). ``baseline_mbps < maximum_mbps`` for the sizes that burst: they hold the maximum
    for :data:`EBS_BURST_S` at least once a day, then fall back to the baseline; the others
    sustain one figure (baseline = maximum)."""

    provider: str
    instance_type: str
    baseline_mbps: float
    maximum_mbps: float
    source: str

    def __post_init__(self) -> None:
        _check("baseline_mbps", self.baseline_mbps, strict=True)
        _check("maximum_mbps", self.maximum_mbps, strict=True)
        if self.maximum_mbps < self.baseline_mbps:
            raise InvalidSpecError(
                "maximum_mbps", f"must be >= baseline_mbps {self.baseline_mbps:g}",
                got=self.maximum_mbps,
            )  # fmt: skip

    @property
    def bursts(self) -> bool:
        return self.baseline_mbps < self.maximum_mbps


#: what a published cold-start figure timed: the weights into GPU memory, or a serving engine
#: until it is ready for requests
PUBLISHED_MEASURES = ("weights", "engine-ready")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedColdStart:
    """One row of ``coldstart_published.csv``: a published load time of a catalog language
    model with its testbed (GPU, instance type, storage class, instance network, loader), to
    check
    ``predict coldstart`` against -- never to fit it. ``expressible``: whether the model
    can price that testbed and measure (the note says why not)."""

    source: str
    model: str
    gpu: str
    instance: str | None
    storage: str
    network_gbps: float | None
    loader: str
    concurrency: int | None
    measured: str
    published_s: float
    expressible: bool
    source_url: str
    as_of: date
    note: str = ""

    def __post_init__(self) -> None:
        if self.measured not in PUBLISHED_MEASURES:
            raise InvalidSpecError(
                "measured", f"must be one of {', '.join(PUBLISHED_MEASURES)}", got=self.measured
            )
        _check("published_s", self.published_s, strict=True)
        if self.network_gbps is not None:
            _check("network_gbps", self.network_gbps, strict=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ColdStartFacts:
    """Every row of ``coldstart.csv``, by kind and name."""

    rows: tuple[ColdStartFact, ...]

    def names(self, kind: str) -> list[str]:
        return [r.name for r in self.rows if r.kind == kind]

    def get(self, kind: str, name: str) -> ColdStartFact:
        for r in self.rows:
            if r.kind == kind and r.name == name.strip().lower():
                return r
        known = ", ".join(self.names(kind))
        raise InvalidSpecError(
            kind, f"unknown {kind} {name!r}", fix=f"use one of {known} (catalog/data/coldstart.csv)"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HostRates:
    """What a machine moves and computes per second, measured apart from any model's load:
    ``read_gbs`` (a raw file read with the page cache dropped), ``memory_gbs`` (one sample through a
    256 MiB weight matrix, as a batch-1 forward streams its weights),
    ``flops`` (64 rows through 16 distinct fp32 1024x4096 linear layers, weights read once),
    ``per_tensor_s`` (deserialising one small tensor of a state dict) and ``first_call_s``
    (first minus steady forward of a small model)."""

    read_gbs: float
    memory_gbs: float
    flops: float
    per_tensor_s: float
    first_call_s: float
    source: str = "measured on this machine"

    def __post_init__(self) -> None:
        for name in ("read_gbs", "memory_gbs", "flops"):
            _check(name, getattr(self, name), strict=True)
        _check("per_tensor_s", self.per_tensor_s)
        _check("first_call_s", self.first_call_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "read_gbs": self.read_gbs,
            "memory_gbs": self.memory_gbs,
            "flops": self.flops,
            "per_tensor_s": self.per_tensor_s,
            "first_call_s": self.first_call_s,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostRates:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


#: the phases of a cold start, in order (the ``*_s`` fields of :class:`ColdStartPrediction`)
COLDSTART_PHASES: tuple[str, ...] = ("container", "cuda_context", "weight_load", "first_inference")
#: how the phases read in text
PHASE_LABELS: dict[str, str] = {
    "container": "container",
    "cuda_context": "CUDA context",
    "weight_load": "weights",
    "first_inference": "first inference",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ColdStartPrediction:
    """A cold start, phase by phase (seconds), and what bounds the weight copy.

    Predicted, or partly measured (:func:`gpucast.predict.coldstart.with_measured`):
    ``measured_phases`` names the phases of :data:`COLDSTART_PHASES` that a stored
    ``measure coldstart`` run gave (their ``sources`` name the run); the others are predicted.
    The planner and the simulators do not care which they got. ``load_gb_per_s``: the weight
    copy's rate, GB/s (the JSON key was ``load_gbs`` before session 33).
    """

    container_s: float
    cuda_context_s: float
    weight_load_s: float
    first_inference_s: float
    weight_bytes: int
    load_gb_per_s: float
    bound_by: str
    sources: dict[str, str] = field(default_factory=dict)
    measured_phases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.measured_phases) - set(COLDSTART_PHASES))
        if unknown:
            raise InvalidSpecError(
                "measured_phases", f"must be among {', '.join(COLDSTART_PHASES)}", got=unknown
            )

    @property
    def total_s(self) -> float:
        return self.container_s + self.cuda_context_s + self.weight_load_s + self.first_inference_s

    @property
    def predicted_phases(self) -> tuple[str, ...]:
        return tuple(p for p in COLDSTART_PHASES if p not in self.measured_phases)

    def phase_s(self, phase: str) -> float:
        """Seconds of one phase of :data:`COLDSTART_PHASES`."""
        if phase not in COLDSTART_PHASES:
            raise InvalidSpecError("phase", f"must be one of {', '.join(COLDSTART_PHASES)}")
        return float(getattr(self, f"{phase}_s"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "container_s": self.container_s,
            "cuda_context_s": self.cuda_context_s,
            "weight_load_s": self.weight_load_s,
            "first_inference_s": self.first_inference_s,
            "total_s": self.total_s,
            "weight_bytes": self.weight_bytes,
            "load_gb_per_s": self.load_gb_per_s,
            "bound_by": self.bound_by,
            "measured_phases": list(self.measured_phases),
            "predicted_phases": list(self.predicted_phases),
            "sources": dict(self.sources),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ColdStartMeasurement:
    """One measured cold start of a workload on this machine (``gpucast measure coldstart``).

    ``weight_read_s``: ``torch.load`` of the saved state dict (page cache dropped when
    ``cache_dropped``); ``to_device_s``: copying the loaded tensors to ``device`` (0 on the
    CPU); ``cuda_context_s``: creating the CUDA context (None without a GPU);
    ``first_inference_s`` / ``steady_inference_s``: the first forward pass after the load and
    the median of the following ones.
    """

    workload: str
    options: dict[str, Any]
    device: str
    batch_size: int
    weight_bytes: int
    parameter_tensors: int
    cuda_context_s: float | None
    weight_read_s: float
    to_device_s: float
    first_inference_s: float
    steady_inference_s: float
    cache_dropped: bool
    host: str
    created_at: str
    gpu_name: str | None = None
    schema_version: int = COLDSTART_SCHEMA_VERSION

    @property
    def first_call_overhead_s(self) -> float:
        return max(0.0, self.first_inference_s - self.steady_inference_s)

    @property
    def total_s(self) -> float:
        return (
            (self.cuda_context_s or 0.0)
            + self.weight_read_s
            + self.to_device_s
            + self.first_inference_s
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "workload": self.workload,
            "options": dict(self.options),
            "device": self.device,
            "batch_size": self.batch_size,
            "weight_bytes": self.weight_bytes,
            "parameter_tensors": self.parameter_tensors,
            "cuda_context_s": self.cuda_context_s,
            "weight_read_s": self.weight_read_s,
            "to_device_s": self.to_device_s,
            "first_inference_s": self.first_inference_s,
            "steady_inference_s": self.steady_inference_s,
            "first_call_overhead_s": self.first_call_overhead_s,
            "total_s": self.total_s,
            "cache_dropped": self.cache_dropped,
            "host": self.host,
            "gpu_name": self.gpu_name,
            "created_at": self.created_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ColdStartMeasurement:
        if data.get("schema_version") != COLDSTART_SCHEMA_VERSION:
            raise InvalidSpecError(
                "coldstart schema_version",
                f"must be {COLDSTART_SCHEMA_VERSION}",
                got=data.get("schema_version"),
            )
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


# -- keep-alive policies --------------------------------------------------------------------

PolicyKind = Literal["fixed", "histogram", "prewarm"]
POLICY_KINDS: tuple[str, ...] = ("fixed", "histogram", "prewarm")
#: ceiling of a keep-alive or histogram range: a week
MAX_KEEP_ALIVE_S = 7 * 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepAlivePolicy:
    """How long an idle function instance stays loaded (its GPU memory held) after it ran.

    ``fixed``: ``keep_alive_s`` after each execution (AWS Lambda and Azure Functions use 10 and
    20 minutes).
    ``histogram``: the hybrid histogram policy of Shahrad et al. (USENIX ATC'20): per function,
    a histogram of idle times in ``bin_s`` bins up to ``range_s``; after an execution the
    instance is unloaded, pre-warmed at the ``head_percentile`` of the idle times (times
    ``1 - margin``) and kept until the ``tail_percentile`` (its bin's upper edge, times
    ``1 + margin``) -- when the histogram is representative: the coefficient of variation of
    its bin counts is at least ``cv_threshold`` (idle times concentrated in few bins) and it
    holds ``min_samples`` idle times. Otherwise the instance is kept for ``range_s`` (the
    paper's conservative fallback). When at least ``max_out_of_range_fraction`` of the idle
    times exceed the range, the paper forecasts the next one with ARIMA; here it is the mean of
    the last ``history`` idle times, loaded from 0.85x to 1.15x it. The histograms are updated
    every ``update_s`` from the idle times seen before (what makes the simulator vectorised).
    ``prewarm``: pre-warming from predicted arrivals: the next idle time is forecast as the
    mean of the function's last ``history`` idle times; the instance is unloaded, loaded again
    at ``(1 - margin)`` x the forecast and kept until ``(1 + margin)`` x it (plus one bin);
    until ``history`` idle times are seen it keeps ``keep_alive_s``.
    """

    kind: PolicyKind = "fixed"
    keep_alive_s: float = 600.0
    bin_s: float = 60.0
    range_s: float = 4 * 3600.0
    head_percentile: float = 5.0
    tail_percentile: float = 99.0
    margin: float = 0.10
    min_samples: int = 1
    max_out_of_range_fraction: float = 0.5
    cv_threshold: float = 2.0
    update_s: float = 3600.0
    history: int = 3

    def __post_init__(self) -> None:
        if self.kind not in POLICY_KINDS:
            raise InvalidSpecError(
                "policy", "must be fixed:DURATION, histogram or prewarm", got=self.kind,
                fix="e.g. --policy fixed:10m",
            )  # fmt: skip
        for name in ("keep_alive_s", "bin_s", "range_s", "update_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= MAX_KEEP_ALIVE_S):
                flag = "keep-alive" if name == "keep_alive_s" else name
                raise InvalidSpecError(
                    flag, f"must be > 0 and <= {MAX_KEEP_ALIVE_S / 86400:g} days", got=value,
                    fix="e.g. --policy fixed:10m",
                )  # fmt: skip
        if self.range_s < self.bin_s:
            raise InvalidSpecError("range_s", "must be >= bin_s", got=self.range_s)
        if not 0 <= self.head_percentile < self.tail_percentile <= 100:
            raise InvalidSpecError("keep-alive percentiles", "need 0 <= head < tail <= 100")
        if not 0 <= self.margin < 1:
            raise InvalidSpecError("keep-alive margin", "must be in [0, 1)", got=self.margin)
        if not 0 <= self.max_out_of_range_fraction <= 1:
            raise InvalidSpecError(
                "max_out_of_range_fraction", "must be in [0, 1]", got=self.max_out_of_range_fraction
            )
        if not (math.isfinite(self.cv_threshold) and self.cv_threshold >= 0):
            raise InvalidSpecError("cv_threshold", "must be >= 0", got=self.cv_threshold)
        for name in ("min_samples", "history"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSpecError(name, "must be an integer >= 1", got=value)

    def describe(self) -> str:
        if self.kind == "fixed":
            text = f"fixed keep-alive {format_duration(self.keep_alive_s)}"
            bins = max(1, math.ceil(self.keep_alive_s / self.bin_s - 1e-9))
            if bins * self.bin_s != self.keep_alive_s:  # the simulator counts whole bins
                text += (
                    f", simulated as {format_duration(bins * self.bin_s)} (whole "
                    f"{format_duration(self.bin_s)} bins, the trace's granularity)"
                )
            return text
        if self.kind == "histogram":
            return (
                f"hybrid histogram (Shahrad et al. ATC'20): {self.bin_s:g} s bins up to "
                f"{self.range_s / 3600:g} h, pre-warm at p{self.head_percentile:g}, keep to "
                f"p{self.tail_percentile:g}, margin {self.margin:.0%}"
            )
        return (
            f"pre-warm from the mean of the last {self.history} idle times "
            f"(±{self.margin:.0%}), fixed {self.keep_alive_s / 60:g} min until then"
        )


def _plain_number(text: str) -> str | None:
    """``1e3`` -> ``1000``: a number Python reads but a duration does not (an exponent), as a
    duration would write it; ``""`` for one out of range (``1e400``); None for no number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return f"{value:.6g}" if math.isfinite(value) and value > 0 else ""


def parse_policy(text: str, *, flag: str = "policy") -> KeepAlivePolicy:
    """``fixed:10m`` (a duration with its unit: 90s, 10m, 1h, 1d), ``fixed`` (10 min),
    ``histogram``, ``prewarm``; one :class:`InvalidSpecError` naming ``flag`` (the option
    the text came from: ``policy``, or ``policies`` in plan serverless) otherwise
    (``fixed:`` without a duration, or ``fixed:10`` without a unit, too: seconds or minutes
    would be a guess; a keep-alive of 0 or beyond :data:`MAX_KEEP_ALIVE_S`)."""
    from gpucast.domain.units import parse_duration_s

    raw = str(text).strip().lower()
    kind, colon, arg = raw.partition(":")
    arg = arg.strip()
    if kind == "fixed":
        if not colon:
            return KeepAlivePolicy(kind="fixed")
        if not arg or arg[-1].isdigit() or arg[-1] == ".":
            # the example keeps the number given unless it is no keep-alive (fixed:0 -> 10)
            n = arg.rstrip(".")
            n = n if n.replace(".", "", 1).isdigit() and float(n) > 0 else "10"
            raise InvalidSpecError(
                flag, "fixed:DURATION needs a number and its unit (s, m, h or d)", got=text,
                fix=f"e.g. --{flag} fixed:{n}m for minutes or fixed:{n}s for seconds",
            )  # fmt: skip
        try:
            keep_alive_s = parse_duration_s(arg, field=flag, allow_zero=True)
        except InvalidSpecError:
            parts = re.findall(r"\d+(?:\.\d+)?[smhd]", arg)  # fixed:1h30m (QA 41 QF)
            total_s = sum(parse_duration_s(p, field=flag, allow_zero=True) for p in parts)
            if len(parts) > 1 and "".join(parts) == arg and total_s > 0:
                size, suffix = next(
                    (u for u in ((3600, "h"), (60, "m")) if total_s % u[0] == 0), (1, "s")
                )
                one = f"{total_s / size:g}{suffix}"
                raise InvalidSpecError(
                    flag, "fixed:DURATION takes one number and one unit", got=text,
                    fix=f"e.g. --{flag} fixed:{one}",
                ) from None  # fmt: skip
            number = re.match(r"\d+(?:\.\d+)?", arg)  # fixed:10x: the unit is what is wrong
            unit = re.search(r"(s|sec|m|min|h|hr|d)$", arg)
            plain = _plain_number(arg[: unit.start()]) if unit else None
            if number is None or float(number[0]) <= 0 or plain == "":
                keep_alive_s = math.nan  # one message for every bad duration, below
            elif plain is not None:  # fixed:1e3s: the unit is fine, the number is not plain
                raise InvalidSpecError(
                    flag, "fixed:DURATION needs a plain decimal number before its unit",
                    got=text, fix=f"e.g. --{flag} fixed:{plain}{unit[0]}",  # type: ignore[index]
                ) from None  # fmt: skip
            else:
                raise InvalidSpecError(
                    flag, "fixed:DURATION's unit must be s, m, h or d", got=text,
                    fix=f"e.g. --{flag} fixed:{number[0]}m for minutes",
                ) from None  # fmt: skip
        if not 0 < keep_alive_s <= MAX_KEEP_ALIVE_S:
            raise InvalidSpecError(
                flag, f"fixed:DURATION needs a keep-alive > 0 and <= "
                f"{MAX_KEEP_ALIVE_S / 86400:g} days, like 90s, 10m or 1h", got=text,
                fix=f"e.g. --{flag} fixed:10m",
            )  # fmt: skip
        return KeepAlivePolicy(kind="fixed", keep_alive_s=keep_alive_s)
    if kind in ("histogram", "prewarm") and not arg:
        return KeepAlivePolicy(kind=kind)  # type: ignore[arg-type]
    raise InvalidSpecError(
        flag, "must be fixed:DURATION, histogram or prewarm", got=text,
        fix=f"e.g. --{flag} fixed:10m",
    )  # fmt: skip


# -- the published characteristics a synthetic FaaS workload is drawn from -------------------

#: trigger groups of the Azure Functions trace (Shahrad et al. ATC'20)
TRIGGERS: tuple[str, ...] = (
    "http", "queue", "event", "orchestration", "timer", "storage", "others",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class FaasMix:
    """What :func:`gpucast.simulate.faas_workload.generate_faas_workload` draws from: the rows
    of ``catalog/data/faas_workload.csv`` (each with its source).

    Invocation rates: ``share_at_most_hourly`` of functions at most 24 a day,
    ``share_at_most_per_minute`` at most 1,440 a day, the rest up to ``max_per_day``
    (log-uniform inside each band, 1 a day the floor). Triggers in ``trigger_shares``. Timer
    functions fire on a schedule (inter-arrival CV 0) with a normal start jitter of
    ``timer_jitter_s``; of the other functions ``periodic_share`` are near-periodic (jitter
    ``periodic_jitter_cv`` x the period), ``bursty_share`` renewal processes with CV
    log-uniform in ``[1, bursty_cv_max]``, the rest Poisson (CV 1). Average execution times
    log-normal (``duration_mu``, ``duration_sigma``, seconds)."""

    share_at_most_hourly: float
    share_at_most_per_minute: float
    max_per_day: float
    trigger_shares: dict[str, float]
    timer_invocation_share: float
    timer_jitter_s: float
    periodic_share: float
    periodic_jitter_cv: float
    bursty_share: float
    bursty_cv_max: float
    duration_mu: float
    duration_sigma: float
    sources: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.share_at_most_hourly <= self.share_at_most_per_minute <= 1:
            raise InvalidSpecError(
                "share_at_most_hourly/share_at_most_per_minute", "need 0 < hourly <= minute <= 1"
            )
        if not (math.isfinite(self.max_per_day) and self.max_per_day > 1440):
            raise InvalidSpecError("max_per_day", "must be > 1440", got=self.max_per_day)
        unknown = sorted(set(self.trigger_shares) - set(TRIGGERS))
        if unknown or not self.trigger_shares:
            raise InvalidSpecError(
                "trigger shares", f"must name triggers among {', '.join(TRIGGERS)}", got=unknown
            )
        for name, share in self.trigger_shares.items():
            if not (math.isfinite(share) and share >= 0):
                raise InvalidSpecError(f"trigger.{name}", "must be >= 0", got=share)
        if sum(self.trigger_shares.values()) <= 0:
            raise InvalidSpecError("trigger shares", "must not all be 0")
        for name in ("periodic_share", "bursty_share", "timer_invocation_share"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise InvalidSpecError(name, "must be in [0, 1]", got=value)
        if self.periodic_share + self.bursty_share > 1:
            raise InvalidSpecError(
                "periodic_share_nontimer + bursty_share_nontimer", "must be <= 1"
            )
        _check("timer_jitter_s", self.timer_jitter_s)
        if not 0 <= self.periodic_jitter_cv < 1:
            raise InvalidSpecError("periodic_jitter_cv", "must be in [0, 1)")
        if not (math.isfinite(self.bursty_cv_max) and self.bursty_cv_max >= 1):
            raise InvalidSpecError("bursty_cv_max", "must be >= 1", got=self.bursty_cv_max)
        _check("duration_sigma", self.duration_sigma)
        if not math.isfinite(self.duration_mu):
            raise InvalidSpecError("duration_lognormal_mu", "must be finite")
