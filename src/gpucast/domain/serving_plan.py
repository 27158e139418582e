"""What a serving plan is, as frozen values: the request, the server types, the candidates.

:class:`ServeRequest` is what the user asks (models with their rates, a latency SLO at a
percentile, limits); :class:`ServerOption` is one kind of device the planner may rent (a whole
catalog GPU, a MIG slice of one, a CPU server) with its price; :class:`ModelProfile` is what
the planner knows of one model on one server option (its latency curve, memory and per-request
overhead); :class:`ServeCandidate` is one evaluated deployment and :class:`ServePlan` the
planner's answer. Everything round-trips to plain JSON types via ``to_dict``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import SERVER_KINDS, LatencyCurve, room_gib

SERVE_PLAN_SCHEMA_VERSION = 1
PLACEMENTS: tuple[str, ...] = ("dedicated", "shared")
#: Seconds of a trace ``plan serve`` replays when no ``--duration-s`` is given: its busiest
#: hour. A capacity plan sizes for the peak, where the SLO is hardest to meet (the quiet hours
#: of a day only dilute the percentile the SLO is stated on), and replaying a whole day for
#: every candidate deployment takes minutes.
PLAN_TRACE_WINDOW_S = 3600.0


def _positive(field_name: str, value: float, *, fix: str | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpecError(field_name, "must be a number", got=value, fix=fix)
    if not (math.isfinite(value) and value > 0):
        raise InvalidSpecError(field_name, "must be a finite number > 0", got=value, fix=fix)


def check_model_rate(name: str, rate: float | None, *, example: float = 150) -> None:
    """The rate of ``--model NAME:RATE`` (requests per second): a finite number > 0, the
    error naming ``model`` for a CNN and a language model alike (``model: the rate in
    llama-3-8b:0 must be > 0 ...``); None: no rate was given; ``example``: the fix's rate."""
    if rate is None:
        raise InvalidSpecError(
            "model", f"{name} has no rate", fix=f"write --model {name}:{example:g} or add --rate"
        )
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise InvalidSpecError(
            "model", f"the rate of {name} must be a number (requests per second)", got=rate,
            fix=f"e.g. --model {name}:{example:g}",
        )  # fmt: skip
    if not (math.isfinite(rate) and rate > 0):
        raise InvalidSpecError(
            "model",
            f"the rate in {name}:{rate:g} must be "
            + ("> 0 requests per second" if math.isfinite(rate)
               else "a finite number (requests per second)"),
            got=rate, fix=f"e.g. --model {name}:{example:g}",
        )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelLoad:
    """One model to serve at a mean ``rate_rps`` (requests per second)."""

    name: str
    rate_rps: float

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("model", "must not be empty", fix="e.g. --model resnet50:150")
        check_model_rate(self.name, self.rate_rps)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeRequest:
    """Models, an SLO and the search grid.

    The SLO holds when, for *every* model, the ``slo_percentile``-th percentile of its
    simulated request latency is at most ``slo_s``. ``max_batch_sizes`` x
    ``max_delays_s`` x ``instances`` is the batching grid; ``max_servers`` caps the servers
    of one deployment; ``budget_usd_per_hour`` (None: no cap) drops dearer deployments.
    ``duration_s`` of traffic is simulated per candidate (Poisson at each model's rate unless
    arrivals are given), ``max_extra_servers`` more than the analytic minimum are tried.
    """

    models: tuple[ModelLoad, ...]
    slo_s: float
    slo_percentile: float = 99.0
    max_batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    max_delays_s: tuple[float, ...] = (0.0, 0.002, 0.005, 0.010)
    instances: tuple[int, ...] = (1, 2)
    max_servers: int = 64
    budget_usd_per_hour: float | None = None
    placements: tuple[str, ...] = PLACEMENTS
    duration_s: float = 60.0
    max_extra_servers: int = 3
    max_simulations: int = 400
    pareto_extra: int = 12
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.models:
            raise InvalidSpecError(
                "models", "none given", fix="e.g. --model resnet50:150 or --trace FILE"
            )
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise InvalidSpecError(  # the flag the user typed (QA 38 I #15)
                "model", "lists a model twice", got=names,
                fix="give each model once with its total rate, e.g. --model resnet50:500",
            )  # fmt: skip
        _positive("slo", self.slo_s, fix="e.g. --slo 'p99<50ms'")
        if not (isinstance(self.slo_percentile, int | float) and 0 < self.slo_percentile <= 100):
            raise InvalidSpecError(
                "slo percentile", "must be in (0, 100]", got=self.slo_percentile, fix="e.g. 99"
            )
        if not self.max_batch_sizes or any(
            isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in self.max_batch_sizes
        ):
            raise InvalidSpecError(
                "max batch sizes", "must be integers >= 1", got=list(self.max_batch_sizes)
            )
        if not self.max_delays_s or any(
            not (math.isfinite(d) and d >= 0) for d in self.max_delays_s
        ):
            raise InvalidSpecError(
                "max delays", "must be seconds >= 0", got=list(self.max_delays_s)
            )
        if not self.instances or any(
            isinstance(i, bool) or not isinstance(i, int) or i < 1 for i in self.instances
        ):
            raise InvalidSpecError("instances", "must be integers >= 1", got=list(self.instances))
        if isinstance(self.max_servers, bool) or self.max_servers < 1:
            raise InvalidSpecError("max-servers", "must be >= 1", got=self.max_servers)
        if self.budget_usd_per_hour is not None:
            _positive("budget", self.budget_usd_per_hour, fix="e.g. --budget-usd-per-hour 5")
        bad = [p for p in self.placements if p not in PLACEMENTS]
        if bad or not self.placements:
            raise InvalidSpecError(
                "placements", f"must be among {', '.join(PLACEMENTS)}", got=list(self.placements)
            )
        _positive("duration", self.duration_s, fix="e.g. --duration-s 60")
        for name in ("max_extra_servers", "pareto_extra"):
            if getattr(self, name) < 0:
                raise InvalidSpecError(name, "must be >= 0", got=getattr(self, name))
        if self.max_simulations < 1:
            raise InvalidSpecError("max_simulations", "must be >= 1", got=self.max_simulations)
        object.__setattr__(self, "max_batch_sizes", tuple(sorted(set(self.max_batch_sizes))))
        object.__setattr__(
            self, "max_delays_s", tuple(sorted(set(float(d) for d in self.max_delays_s)))
        )
        object.__setattr__(self, "instances", tuple(sorted(set(self.instances))))

    @property
    def total_rate_rps(self) -> float:
        return float(sum(m.rate_rps for m in self.models))

    def to_dict(self) -> dict[str, Any]:
        return {
            "models": [{"name": m.name, "rate_rps": m.rate_rps} for m in self.models],
            "slo_s": self.slo_s,
            "slo_percentile": self.slo_percentile,
            "max_batch_sizes": list(self.max_batch_sizes),
            "max_delays_s": list(self.max_delays_s),
            "instances": list(self.instances),
            "max_servers": self.max_servers,
            "budget_usd_per_hour": self.budget_usd_per_hour,
            "placements": list(self.placements),
            "duration_s": self.duration_s,
            "seed": self.seed,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerOption:
    """One rentable device type: a whole GPU (its share of an offer's price), a MIG slice,
    or a CPU server.

    ``price_usd_per_hour`` is one device's share; devices are rented ``per_unit`` at a time
    (a MIG layout of ``per_unit`` equal slices on one GPU), so ``count`` devices cost
    ``ceil(count / per_unit)`` units (:meth:`cost_usd_per_hour`): unused slices are paid for.
    """

    name: str  # e.g. "T4 (gcp us-central1 n1-standard-4)", "A100-40GB/1g.5gb"
    kind: str
    memory_gib: float
    price_usd_per_hour: float
    colocation_slowdown: tuple[float, ...] = ()
    provider: str = ""
    region: str = ""
    instance_type: str = ""
    gpu: str | None = None
    mig_profile: str | None = None
    per_unit: int = 1
    # the host path (see ServerSpec): shared host capacity (None: unlimited) and time alone,
    # network link (Gbit/s) and PCIe copy (GB/s), None where absent
    host_capacity_rps: float | None = None
    host_s: float = 0.0
    host_concurrency: int = 64
    network_gbps: float | None = None
    pcie_gbps: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidSpecError("server option", "needs a name")
        if self.host_capacity_rps is not None:
            _positive("host capacity", self.host_capacity_rps, fix="e.g. --host-capacity-rps 330")
        for attr in ("network_gbps", "pcie_gbps"):
            value = getattr(self, attr)
            if value is not None:
                _positive(attr, value)
        if not (math.isfinite(self.host_s) and self.host_s >= 0):
            raise InvalidSpecError("host time", "must be >= 0 seconds", got=self.host_s)
        if isinstance(self.per_unit, bool) or self.per_unit < 1:
            raise InvalidSpecError("per_unit", "must be >= 1", got=self.per_unit)
        if self.kind not in SERVER_KINDS:
            raise InvalidSpecError(
                "server kind", f"must be one of {', '.join(SERVER_KINDS)}", got=self.kind
            )
        _positive(f"{self.name} memory_gib", self.memory_gib)
        _positive(f"{self.name} price_usd_per_hour", self.price_usd_per_hour)
        object.__setattr__(
            self, "colocation_slowdown", tuple(float(s) for s in self.colocation_slowdown)
        )

    @property
    def room_gib(self) -> float:
        """GiB its models can fill (:func:`gpucast.domain.serving.room_gib`: a GPU's or MIG
        slice's usable memory, a CPU server's whole memory)."""
        return room_gib(self.kind, self.memory_gib)

    def cost_usd_per_hour(self, count: int) -> float:
        """What ``count`` devices cost: whole units (GPUs for MIG slices) are rented."""
        units = -(-count // self.per_unit)
        return units * self.per_unit * self.price_usd_per_hour

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "per_unit": self.per_unit,
            "memory_gib": self.memory_gib,
            "price_usd_per_hour": self.price_usd_per_hour,
            "provider": self.provider,
            "region": self.region,
            "instance_type": self.instance_type,
            "gpu": self.gpu,
            "mig_profile": self.mig_profile,
            "host_capacity_rps": self.host_capacity_rps,
            "host_s": self.host_s,
            "network_gbps": self.network_gbps,
            "pcie_gbps": self.pcie_gbps,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfile:
    """One model on one server option: its batch latency curve (device to itself),
    the memory one instance needs at ``max_batch`` (``memory_gib_at(b)``: fixed + per-sample
    * b), the per-request overhead (round trip) that occupies nothing, the bytes a request
    carries over the host path's links and the seconds they take there alone
    (``transfer_s``)."""

    model: str
    server: str
    curve: LatencyCurve
    memory_fixed_gib: float = 0.0
    memory_per_sample_gib: float = 0.0
    request_overhead_s: float = 0.0
    input_bytes: float = 0.0
    transfer_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("memory_fixed_gib", "memory_per_sample_gib", "request_overhead_s",
                     "input_bytes", "transfer_s"):  # fmt: skip
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSpecError(name, "must be >= 0", got=value)

    def memory_gib(self, max_batch: int) -> float:
        return self.memory_fixed_gib + self.memory_per_sample_gib * max_batch

    def single_request_s(self) -> float:
        """The fastest a request can be served: a batch of one, its transfer and the round
        trip."""
        return self.curve.latency(1) + self.request_overhead_s + self.transfer_s


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelChoice:
    """How one model runs on one server type in a candidate."""

    model: str
    max_batch_size: int
    max_queue_delay_s: float
    instances: int
    latency_s: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    slo_attainment: float = math.nan
    capacity_rps: float = math.nan

    def __post_init__(self) -> None:
        object.__setattr__(self, "latency_s", MappingProxyType(dict(self.latency_s)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_batch_size": self.max_batch_size,
            "max_queue_delay_s": self.max_queue_delay_s,
            "instances": self.instances,
            "latency_s": dict(self.latency_s),
            "slo_attainment": self.slo_attainment,
            "capacity_rps": self.capacity_rps,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerGroupChoice:
    """``count`` servers of one option, each hosting ``models`` (two or more: co-located)."""

    server: ServerOption
    count: int
    models: tuple[ModelChoice, ...]
    utilisation: float = math.nan  # mean busy fraction of the simulated devices

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server.to_dict(),
            "count": self.count,
            "models": [m.to_dict() for m in self.models],
            "utilisation": self.utilisation,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeCandidate:
    """One evaluated deployment.

    ``tail_latency_s`` is the worst model's latency at the SLO percentile (simulated);
    ``meets_slo`` whether every model met it. ``headroom`` is spare capacity: capacity over
    offered load, minus 1 (0.25 = 25% more traffic fits before saturation), the measured
    peak throughput where a saturation search ran, else the analytic bound;
    ``latency_headroom`` is ``slo / tail_latency - 1``. ``requests_in`` arrivals simulated,
    ``requests_out`` requests completed (equal by construction; the tests check it).
    ``cost_usd_per_million``: per million requests *served* (completed in the simulated
    window), as ``simulate serve`` states it (:func:`gpucast.domain.units.usd_per_million`).
    """

    placement: str
    groups: tuple[ServerGroupChoice, ...]
    cost_usd_per_hour: float
    cost_usd_per_million: float
    tail_latency_s: float
    latency_s: Mapping[str, float]
    meets_slo: bool
    headroom: float
    latency_headroom: float
    requests_in: int
    requests_out: int
    bound: str  # what limits it: "latency", "capacity", "memory"
    #: measured by a saturation search (the recommended candidate only): the highest total
    #: offered rate it held and the most it carried; None where not searched
    saturation_rps: float | None = None
    peak_throughput_rps: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "latency_s", MappingProxyType(dict(self.latency_s)))

    @property
    def servers(self) -> int:
        return sum(g.count for g in self.groups)

    def describe(self) -> str:
        parts = []
        for g in self.groups:
            models = "+".join(
                f"{m.model}(b{m.max_batch_size},{m.max_queue_delay_s * 1e3:g}ms,x{m.instances})"
                for m in g.models
            )
            parts.append(f"{g.count}x {g.server.name} [{models}]")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "placement": self.placement,
            "description": self.describe(),
            "servers": self.servers,
            "groups": [g.to_dict() for g in self.groups],
            "cost_usd_per_hour": self.cost_usd_per_hour,
            "cost_usd_per_million": self.cost_usd_per_million,
            "tail_latency_s": self.tail_latency_s,
            "latency_s": dict(self.latency_s),
            "meets_slo": self.meets_slo,
            "headroom": self.headroom,
            "latency_headroom": self.latency_headroom,
            "requests_in": self.requests_in,
            "requests_out": self.requests_out,
            "bound": self.bound,
            "saturation_rps": self.saturation_rps,
            "peak_throughput_rps": self.peak_throughput_rps,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServePlan:
    """The planner's answer: candidates sorted by cost; ``pareto`` (cost per million vs tail
    latency, among the SLO-meeting ones) and ``recommended`` (the cheapest that meets the
    SLO) index into it; ``infeasible`` counts dropped configurations by reason."""

    request: ServeRequest
    candidates: tuple[ServeCandidate, ...]
    pareto: tuple[int, ...]
    recommended: int | None
    infeasible: Mapping[str, int]
    evaluated: int
    simulated: int
    assumptions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    schema_version: int = SERVE_PLAN_SCHEMA_VERSION

    def __post_init__(self) -> None:
        n = len(self.candidates)
        if any(not 0 <= i < n for i in self.pareto):
            raise InvalidSpecError("pareto", "indices must point into candidates")
        if self.recommended is not None and not 0 <= self.recommended < n:
            raise InvalidSpecError("recommended", "index must point into candidates")
        object.__setattr__(self, "infeasible", MappingProxyType(dict(self.infeasible)))
        object.__setattr__(self, "assumptions", MappingProxyType(dict(self.assumptions)))

    @property
    def best(self) -> ServeCandidate | None:
        return None if self.recommended is None else self.candidates[self.recommended]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "kind": "serve-plan",
            "request": self.request.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
            "pareto": list(self.pareto),
            "recommended": self.recommended,
            "infeasible": dict(self.infeasible),
            "evaluated": self.evaluated,
            "simulated": self.simulated,
            "assumptions": dict(self.assumptions),
        }
