"""Frozen values of inference serving: latency curves, batching, deployments, keep-alive.

A :class:`LatencyCurve` is the time one model instance takes to run a batch of ``b``
requests on one device when it has the device to itself (measured or predicted). A
:class:`ModelDeployment` puts ``instances`` copies of a model on a :class:`ServerSpec` (a whole
GPU, a MIG slice or a CPU server) with a :class:`BatchingPolicy`; a :class:`Deployment` is
groups of identical servers. In front of each device a request crosses its server's *host
path*: the network link (``ServerSpec.network_gbps``), the shared host (CPU, serving framework
and client: ``host_s`` and ``host_capacity_rps``) and the PCIe copy (``pcie_gbps``), each a
queueing stage with a capacity. :class:`ClosedLoop` describes clients that wait for each
response before sending again. The simulator (:mod:`gpucast.simulate.serving`) runs traffic
through them; the planner (:mod:`gpucast.plan.serve`) searches over them.

Units are in the names: seconds (``_s``), GiB, US$ per hour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import ClassVar, Literal, get_args

from gpucast.domain.catalog import VendorBound
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.gpu_memory import usable_gib

ServerKind = Literal["gpu", "mig", "cpu"]
SERVER_KINDS: tuple[str, ...] = get_args(ServerKind)


def room_gib(kind: str, memory_gib: float) -> float:
    """GiB the models of a server of ``kind`` with ``memory_gib`` can fill: a GPU's or MIG
    slice's usable memory under the one rule (:func:`gpucast.domain.gpu_memory.usable_gib`:
    less the CUDA context and fragmentation, which a slice loses as a whole GPU does); a CPU
    server's memory as given (host memory: the GPU rule does not apply)."""
    return memory_gib if kind == "cpu" else usable_gib(memory_gib)


#: How a model's requests are spread over the servers that host it: ``round_robin`` and
#: ``random`` decide before the run (each server a FIFO of its own); ``least_loaded`` sends a
#: request, when it arrives, to the server with the fewest of that model's requests
#: outstanding (join the shortest queue); ``elsa`` (ELSA, Kim et al. 2022) to the *smallest*
#: server (lowest throughput at its largest batch) whose predicted latency for it -- the
#: running batch's rest, the batches queued ahead and its own, from the server's latency
#: curve -- meets the model's ``deadline_s`` (its SLO), else to the one predicted fastest.
LoadBalancing = Literal["round_robin", "random", "least_loaded", "elsa"]
LOAD_BALANCING: tuple[str, ...] = get_args(LoadBalancing)
#: The policies that choose the server when a request arrives (event-driven engine).
DYNAMIC_LOAD_BALANCING: tuple[str, ...] = ("least_loaded", "elsa")
#: How a server picks the next batch among its models' queues (request classes): ``none``
#: gives every model its own instances (batches of different models share the device);
#: ``fifo`` / ``edf`` / ``priority`` make the models share one pool of instances and, at
#: every batch boundary, serve the queue whose head arrived first / has the earliest
#: deadline / has the most urgent priority (0 first). A running batch is never interrupted:
#: preemption happens at batch boundaries.
Scheduling = Literal["none", "fifo", "edf", "priority"]
SCHEDULING: tuple[str, ...] = get_args(Scheduling)


def _finite(field: str, value: float, *, low: float = 0.0, strict: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSpecError(field, "must be a number", got=value)
    ok = math.isfinite(value) and (value > low if strict else value >= low)
    if not ok:
        raise InvalidSpecError(
            field, f"must be a finite number {'>' if strict else '>='} {low:g}", got=value
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyCurve:
    """Seconds to run one batch, by batch size, on one device used by this instance alone.

    ``batch_sizes`` are strictly increasing; between them the latency is interpolated
    linearly and beyond them along the last segment's slope (flat if it falls; a single point
    extrapolates proportionally). ``host_s`` is the part of every batch's time spent off the
    device (host-side dispatch, framework and copy overheads): batches running at the same
    time on one device overlap it, while the rest of a batch's time, its device work, is
    shared with them (see :mod:`gpucast.simulate.serving`). 0 means all of it is device work.
    ``host_per_sample_s`` adds host time in proportion to the batch size (input
    deserialisation and copies): a batch of ``b`` spends ``host_time_s(b) = host_s +
    host_per_sample_s * b`` off the device (capped at its latency). It is part of
    ``latency_s`` like ``host_s``, not added to it; 0 (the default) keeps the host part fixed.
    """

    batch_sizes: tuple[int, ...]
    latency_s: tuple[float, ...]
    host_s: float = 0.0
    host_per_sample_s: float = 0.0
    source: str = "given"

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_sizes", tuple(int(b) for b in self.batch_sizes))
        object.__setattr__(self, "latency_s", tuple(float(t) for t in self.latency_s))
        if not self.batch_sizes or len(self.batch_sizes) != len(self.latency_s):
            raise InvalidSpecError(
                "latency curve",
                "needs one latency per batch size and at least one point",
                fix="give rows batch_size,latency_s",
            )
        if self.batch_sizes[0] < 1 or any(
            b >= c for b, c in zip(self.batch_sizes, self.batch_sizes[1:], strict=False)
        ):
            raise InvalidSpecError(
                "latency curve batch_size",
                "must be >= 1 and strictly increasing",
                got=list(self.batch_sizes),
            )
        for t in self.latency_s:
            _finite("latency curve latency_s", t, strict=True)
        _finite("host_s", self.host_s)
        _finite("host_per_sample_s", self.host_per_sample_s)
        host_1 = self.host_s + self.host_per_sample_s
        if host_1 > self.latency_s[0] * (1 + 1e-9) and self.batch_sizes[0] == 1:
            raise InvalidSpecError(
                "host_s" if self.host_per_sample_s == 0 else "host_s + host_per_sample_s",
                "must not exceed the latency of a batch of 1",
                got=host_1,
            )

    @staticmethod
    def affine(
        fixed_s: float,
        per_sample_s: float,
        *,
        max_batch: int = 128,
        host_s: float = 0.0,
        source: str = "a + b*batch",
    ) -> LatencyCurve:
        """``fixed_s + per_sample_s * batch`` for batch sizes 1..max_batch."""
        _finite("fixed_s", fixed_s)
        _finite("per_sample_s", per_sample_s)
        if fixed_s + per_sample_s <= 0:
            raise InvalidSpecError("latency curve", "must give a batch of 1 a positive time")
        sizes = (1, max(2, max_batch))
        return LatencyCurve(
            batch_sizes=sizes,
            latency_s=tuple(fixed_s + per_sample_s * b for b in sizes),
            host_s=host_s,
            source=source,
        )

    def latency(self, batch_size: int) -> float:
        """Seconds for a batch of ``batch_size`` (>= 1)."""
        if batch_size < 1:
            raise InvalidSpecError("batch_size", "must be >= 1", got=batch_size)
        xs, ys = self.batch_sizes, self.latency_s
        if len(xs) == 1:
            return ys[0] * batch_size / xs[0]
        if batch_size <= xs[0]:
            slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
            return max(ys[0] + slope * (batch_size - xs[0]), ys[0] * batch_size / xs[0], 1e-12)
        for i in range(1, len(xs)):
            if batch_size <= xs[i]:
                w = (batch_size - xs[i - 1]) / (xs[i] - xs[i - 1])
                return ys[i - 1] + w * (ys[i] - ys[i - 1])
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return ys[-1] + max(slope, 0.0) * (batch_size - xs[-1])

    def host_time_s(self, batch_size: int) -> float:
        """Host seconds of a batch: ``host_s + host_per_sample_s * batch_size``, at most its
        latency."""
        return min(self.host_s + self.host_per_sample_s * batch_size, self.latency(batch_size))

    def device_s(self, batch_size: int) -> float:
        """Device-work seconds of a batch (its latency less its host time, at least 0)."""
        return max(self.latency(batch_size) - self.host_time_s(batch_size), 0.0)

    def table(self, max_batch: int) -> tuple[float, ...]:
        """``(0.0, latency(1), ..., latency(max_batch))``: index by batch size."""
        return (0.0, *(self.latency(b) for b in range(1, max_batch + 1)))

    def scaled(self, factor: float, *, source: str | None = None) -> LatencyCurve:
        _finite("scale", factor, strict=True)
        return LatencyCurve(
            batch_sizes=self.batch_sizes,
            latency_s=tuple(t * factor for t in self.latency_s),
            host_s=self.host_s * factor,
            host_per_sample_s=self.host_per_sample_s * factor,
            source=source or f"{self.source} x{factor:.3g}",
        )

    def throughput_rps(self, batch_size: int) -> float:
        """Requests/s of one instance running back-to-back batches of ``batch_size``."""
        return batch_size / self.latency(batch_size)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "batch_sizes": list(self.batch_sizes),
            "latency_s": list(self.latency_s),
            "host_s": self.host_s,
            "source": self.source,
        }
        if self.host_per_sample_s:
            out["host_per_sample_s"] = self.host_per_sample_s
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchingPolicy:
    """Dynamic batching as in Triton / TensorRT Inference Server.

    An idle instance takes a batch as soon as the queue holds the smallest preferred batch
    size (or ``max_batch_size`` when none is preferred), or when the oldest queued request has
    waited ``max_queue_delay_s``; the batch is then the largest preferred size the queue can
    fill (at most the largest preferred size), else every queued request up to
    ``max_batch_size``. ``max_queue_delay_s = 0`` sends whatever is queued at once.

    The queue policy (Triton's ``default_queue_policy`` with ``timeout_action: REJECT``),
    applied to the whole server so it holds where a host-path stage is the bottleneck:
    ``max_queue_size`` (None: unbounded) rejects a request that reaches the server while that
    many of its model's requests are there and not yet in a batch (on the host path or
    queued); ``queue_timeout_s`` (None: never) rejects a request found still waiting (for a
    host-path stage or in the queue) that long after it arrived. Rejected requests are
    *dropped*: they never run and the simulator counts them apart (load shedding).
    """

    max_batch_size: int = 1
    max_queue_delay_s: float = 0.0
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_size: int | None = None
    queue_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max_batch_size, bool) or not isinstance(self.max_batch_size, int):
            raise InvalidSpecError("max-batch", "must be an integer", got=self.max_batch_size)
        if self.max_batch_size < 1:
            raise InvalidSpecError(
                "max-batch", "must be >= 1", got=self.max_batch_size, fix="e.g. --max-batch 8"
            )
        _finite("max-delay", self.max_queue_delay_s)
        prefs = tuple(sorted(set(int(p) for p in self.preferred_batch_sizes)))
        if prefs and (prefs[0] < 1 or prefs[-1] > self.max_batch_size):
            raise InvalidSpecError(
                "preferred batch sizes",
                f"must be between 1 and max-batch {self.max_batch_size}",
                got=list(prefs),
            )
        object.__setattr__(self, "preferred_batch_sizes", prefs)
        if self.max_queue_size is not None and (
            isinstance(self.max_queue_size, bool)
            or not isinstance(self.max_queue_size, int)
            or self.max_queue_size < 1
        ):
            raise InvalidSpecError(
                "max-queue", "must be an integer >= 1 (or left out: unbounded)",
                got=self.max_queue_size, fix="e.g. --max-queue 64",
            )  # fmt: skip
        if self.queue_timeout_s is not None:
            _finite("queue-timeout", self.queue_timeout_s, strict=True)

    @property
    def bounded(self) -> bool:
        """Whether requests can be rejected (a bounded queue or a queue timeout)."""
        return self.max_queue_size is not None or self.queue_timeout_s is not None

    @property
    def largest_batch(self) -> int:
        """The largest batch this policy ever forms."""
        return (
            self.preferred_batch_sizes[-1] if self.preferred_batch_sizes else (self.max_batch_size)
        )

    @property
    def trigger_size(self) -> int:
        """Queued requests that make an idle instance start a batch without waiting."""
        if self.max_queue_delay_s == 0:
            return 1
        return (
            self.preferred_batch_sizes[0] if self.preferred_batch_sizes else (self.max_batch_size)
        )

    def batch_for_queue(self, queued: int) -> int:
        """Batch size taken from a queue of ``queued`` (>= 1) requests once a batch is due."""
        q = min(queued, self.largest_batch)
        best = 0
        for p in self.preferred_batch_sizes:
            if p <= q:
                best = p
        return best or q

    def describe(self) -> str:
        pref = (
            "/".join(str(p) for p in self.preferred_batch_sizes)
            if self.preferred_batch_sizes
            else "-"
        )
        text = (
            f"max batch {self.max_batch_size}, delay {self.max_queue_delay_s * 1e3:g} ms, "
            f"preferred {pref}"
        )
        if self.max_queue_size is not None:
            text += f", queue <= {self.max_queue_size}"
        if self.queue_timeout_s is not None:
            text += f", queue timeout {self.queue_timeout_s * 1e3:g} ms"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "max_batch_size": self.max_batch_size,
            "max_queue_delay_s": self.max_queue_delay_s,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
            "max_queue_size": self.max_queue_size,
            "queue_timeout_s": self.queue_timeout_s,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDeployment:
    """``instances`` copies of one model on a server, sharing one queue.

    ``request_overhead_s`` is added to every request's latency (round trip, response,
    anything that occupies no stage) and does not occupy the instance. ``input_bytes`` is
    what one request carries to the device: it holds the server's network link and PCIe
    copy for ``input_bytes`` over their bandwidth (0: neither is used).
    ``cold_start_s``: instances become ready that long after the simulation starts (model
    load, framework warm-up); 0 means already warm.
    """

    model: str
    latency: LatencyCurve
    batching: BatchingPolicy = BatchingPolicy()
    instances: int = 1
    memory_gib: float = 0.0
    request_overhead_s: float = 0.0
    cold_start_s: float = 0.0
    input_bytes: float = 0.0
    #: the request class's urgency under ``priority`` scheduling (0 = most urgent)
    priority: int = 0
    #: the class's deadline from arrival (EDF orders by it; None: no deadline)
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if not self.model:
            raise InvalidSpecError("model", "must not be empty", fix="e.g. --model resnet50")
        if not 0 <= self.priority <= 1000:
            raise InvalidSpecError(
                "priority", "must be 0..1000 (0 = most urgent)", got=self.priority
            )
        if self.deadline_s is not None and not (
            math.isfinite(self.deadline_s) and 0 < self.deadline_s <= 86400.0
        ):
            raise InvalidSpecError("deadline", "must be > 0 and <= 1 day", got=self.deadline_s)
        if self.instances < 1:
            raise InvalidSpecError(
                "instances", "must be >= 1", got=self.instances, fix="e.g. --instances 2"
            )
        _finite("memory_gib", self.memory_gib)
        _finite("request_overhead_s", self.request_overhead_s)
        _finite("cold_start_s", self.cold_start_s)
        _finite("input_bytes", self.input_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSpec:
    """One device that runs model instances: a whole GPU, one MIG slice, or a CPU server.

    ``colocation_slowdown[n - 1]`` is how much slower each of ``n`` batches runs while they
    share the device (measured by running ``n`` copies at once); ``()`` means pure sharing of
    the device work (``n``), the host part overlapping (see :class:`LatencyCurve`). Beyond
    the table the last step repeats.
    ``price_usd_per_hour`` is this device's share of what the server costs.

    The host path, in the order a request crosses it (each stage is optional):

    * ``network_gbps``: the link that carries requests to the server (Gbit/s), a FIFO queue
      that holds each request for its ``input_bytes`` over the link: it saturates at
      ``network_gbps / (8 * input_bytes)`` requests/s;
    * the shared host (client, server CPU, serving framework): a request spends ``host_s``
      on it when alone; ``host_capacity_rps`` is the most it carries: up to
      ``host_concurrency`` requests share it (processor sharing that slows each as more are
      in it, tuned so it carries exactly the capacity when full), more wait in a FIFO queue
      (see :mod:`gpucast.simulate.stages`). ``None``: unlimited (``host_s`` is then a plain
      delay);
    * ``pcie_gbps``: the host-to-device copy (GB/s), a FIFO queue like the link.
    """

    name: str
    kind: ServerKind = "gpu"
    memory_gib: float
    price_usd_per_hour: float
    models: tuple[ModelDeployment, ...]
    colocation_slowdown: tuple[float, ...] = ()
    host_capacity_rps: float | None = None
    host_s: float = 0.0
    host_concurrency: int = 64
    network_gbps: float | None = None
    pcie_gbps: float | None = None

    def __post_init__(self) -> None:
        if self.host_capacity_rps is not None:
            _finite(f"server {self.name} host_capacity_rps", self.host_capacity_rps, strict=True)
        _finite(f"server {self.name} host_s", self.host_s)
        if (
            isinstance(self.host_concurrency, bool)
            or not isinstance(self.host_concurrency, int)
            or self.host_concurrency < 1
        ):
            raise InvalidSpecError(
                f"server {self.name} host_concurrency", "must be an integer >= 1",
                got=self.host_concurrency, fix="e.g. --host-concurrency 64",
            )  # fmt: skip
        for attr in ("network_gbps", "pcie_gbps"):
            value = getattr(self, attr)
            if value is not None:
                _finite(f"server {self.name} {attr}", value, strict=True)
        if self.kind not in SERVER_KINDS:
            raise InvalidSpecError(
                "server kind", f"must be one of {', '.join(SERVER_KINDS)}", got=self.kind
            )
        _finite(f"server {self.name} memory_gib", self.memory_gib, strict=True)
        _finite(f"server {self.name} price_usd_per_hour", self.price_usd_per_hour)
        if not self.models:
            raise InvalidSpecError(
                f"server {self.name}", "hosts no model", fix="give at least one model"
            )
        names = [m.model for m in self.models]
        if len(set(names)) != len(names):
            raise InvalidSpecError(
                f"server {self.name}",
                "lists a model twice",
                fix="raise that model's instances instead",
            )
        slow = tuple(float(s) for s in self.colocation_slowdown)
        if any(not math.isfinite(s) or s < 1.0 for s in slow):
            raise InvalidSpecError("colocation_slowdown", "factors must be >= 1", got=list(slow))
        object.__setattr__(self, "colocation_slowdown", slow)
        need = sum(m.memory_gib * m.instances for m in self.models)
        room = room_gib(self.kind, self.memory_gib)
        if need > room + 1e-9:
            detail = ", ".join(
                f"{m.instances}x {m.model} {m.memory_gib:.2f} GiB" for m in self.models
            )
            usable = "" if self.kind == "cpu" else f"{room:.2f} GiB usable of "
            raise InvalidSpecError(
                f"server {self.name} memory",
                f"models need {need:.2f} GiB ({detail}) but it has {usable}{self.memory_gib:g} GiB",
                fix="use fewer instances, a smaller largest batch (its inputs and activations "
                "count: --max-batch), a bigger GPU or MIG slice, or spread the models",
            )

    @property
    def instances(self) -> int:
        return sum(m.instances for m in self.models)

    @property
    def has_host_stage(self) -> bool:
        """Whether requests cross a shared host stage (a capacity or a host time)."""
        return self.host_capacity_rps is not None or self.host_s > 0

    def stage_capacity_rps(self, model: ModelDeployment) -> dict[str, float]:
        """Requests/s of ``model`` each host-path stage carries at most, alone (infinite
        where a stage is absent or the model's requests carry no bytes)."""
        out = {"network": math.inf, "host": math.inf, "pcie": math.inf}
        if self.network_gbps is not None and model.input_bytes > 0:
            out["network"] = self.network_gbps * 1e9 / (8.0 * model.input_bytes)
        if self.host_capacity_rps is not None:
            out["host"] = self.host_capacity_rps
        if self.pcie_gbps is not None and model.input_bytes > 0:
            out["pcie"] = self.pcie_gbps * 1e9 / model.input_bytes
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerGroup:
    """``count`` identical servers."""

    server: ServerSpec
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1:
            raise InvalidSpecError("server count", "must be >= 1", got=self.count)


@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """Groups of servers; each model's requests are spread over every server that hosts it."""

    groups: tuple[ServerGroup, ...]
    load_balancing: LoadBalancing = "round_robin"
    scheduling: Scheduling = "none"

    def __post_init__(self) -> None:
        if not self.groups:
            raise InvalidSpecError("deployment", "has no servers")
        if self.scheduling not in SCHEDULING:
            raise InvalidSpecError(
                "scheduler", f"must be one of {', '.join(SCHEDULING)}", got=self.scheduling
            )
        if self.load_balancing not in LOAD_BALANCING:
            raise InvalidSpecError(
                "load balancing",
                f"must be one of {', '.join(LOAD_BALANCING)}",
                got=self.load_balancing,
            )

    @property
    def models(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for g in self.groups:
            for m in g.server.models:
                seen.setdefault(m.model, None)
        return tuple(seen)

    @property
    def price_usd_per_hour(self) -> float:
        return sum(g.server.price_usd_per_hour * g.count for g in self.groups)

    def describe(self) -> str:
        parts = []
        for g in self.groups:
            models = "+".join(f"{m.model}x{m.instances}" for m in g.server.models)
            parts.append(f"{g.count}x {g.server.name} [{models}]")
        return ", ".join(parts)


#: Precisions a served model can run at (the engine says which it supports).
SERVING_PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingEngineProfile(VendorBound):
    """A request-level inference engine (``catalog/data/serving_engines.csv``): which
    precisions it runs and where its efficiency figures come from -- ``gemm_efficiency_from``
    (``steptime``: the step-time model's fitted tensor-core efficiency; or
    ``inference_engines:NAME``: the fitted ``compute_efficiency`` of that LLM engine row) and
    ``stack`` (the step-time model's software stack for fp32 efficiency, memory traffic and
    per-kernel and per-batch costs). The figures themselves live in those fitted sets only."""

    name: str
    display_name: str
    aliases: tuple[str, ...] = ()
    precisions: tuple[str, ...]
    default_precision: str
    gemm_efficiency_from: str
    stack: str
    source_url: str
    as_of: date
    note: str = ""
    #: the GPU vendors it runs on (empty: any -- PyTorch's CUDA, ROCm and Gaudi builds)
    vendors: tuple[str, ...] = ()
    VENDOR_FIX: ClassVar[str] = "use --engine eager-pytorch there, or an NVIDIA GPU"

    def __post_init__(self) -> None:
        bad = [p for p in self.precisions if p not in SERVING_PRECISIONS]
        if bad or not self.precisions:
            raise InvalidSpecError(
                f"engine {self.name} precisions",
                f"must be among {', '.join(SERVING_PRECISIONS)}",
                got=list(self.precisions),
            )
        if self.default_precision not in self.precisions:
            raise InvalidSpecError(
                f"engine {self.name} default_precision",
                f"must be one of its precisions ({', '.join(self.precisions)})",
                got=self.default_precision,
            )
        source = self.gemm_efficiency_from
        if source != "steptime" and not (
            source.startswith("inference_engines:") and len(source) > len("inference_engines:")
        ):
            raise InvalidSpecError(
                f"engine {self.name} gemm_efficiency_from",
                "must be steptime or inference_engines:NAME",
                got=source,
            )

    def check_precision(self, precision: str) -> None:
        """One clear error when this engine cannot run ``precision``."""
        if precision not in self.precisions:
            raise InvalidSpecError(
                "precision",
                f"{precision} is not run by {self.display_name} (it runs "
                f"{', '.join(self.precisions)})",
                got=precision,
                fix="pick one of those, or --engine tensorrt for int8/fp8",
            )


ThinkTime = Literal["exponential", "constant"]
THINK_TIMES: tuple[str, ...] = get_args(ThinkTime)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedLoop:
    """``clients`` clients of one model, each with one request outstanding at a time: it
    sends, waits for the response (or the rejection), thinks ``think_s`` (exponential with
    that mean, or constant) and sends again, until the horizon. Throughput then follows the
    latency: ``clients / (latency + think)`` by Little's law."""

    clients: int
    think_s: float = 0.0
    think: ThinkTime = "exponential"

    def __post_init__(self) -> None:
        if isinstance(self.clients, bool) or not isinstance(self.clients, int) or self.clients < 1:
            raise InvalidSpecError(
                "clients", "must be an integer >= 1", got=self.clients, fix="e.g. --clients 16"
            )
        _finite("think-ms", self.think_s)
        if self.think not in THINK_TIMES:
            raise InvalidSpecError(
                "think", f"must be one of {', '.join(THINK_TIMES)}", got=self.think
            )

    def describe(self) -> str:
        return (
            f"closed loop: {self.clients} client{'s' if self.clients != 1 else ''}, think "
            f"{self.think_s * 1e3:g} ms ({self.think})"
        )
