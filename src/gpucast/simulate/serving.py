"""Discrete-event simulation of inference serving with dynamic batching, fast and seeded.

Pure: numbers in, numbers out; no files, clock or terminal. The RNG belongs to the call.

The model
---------
* Each model's requests are spread over the servers that host it (round robin in arrival
  order, or uniformly at random), so every server (a GPU, a MIG slice or a CPU server) is
  simulated on its own: servers share nothing.
* A request first crosses its server's host path (:class:`~gpucast.domain.serving.ServerSpec`,
  :mod:`gpucast.simulate.stages`), each stage a queue with a capacity: the network link (FIFO,
  the request's bytes over the link), the shared host (client, server CPU, serving
  framework: processor sharing that carries at most ``host_capacity_rps``), the PCIe copy
  (FIFO). A server bound by a stage saturates at that stage's rate and holds it under
  overload; its queue grows instead.
* On a server, each model has one FIFO queue shared by its ``instances``. An idle instance
  takes a batch as the :class:`~gpucast.domain.serving.BatchingPolicy` says (Triton's dynamic
  batcher: at once when the queue holds a preferred batch, else when the oldest request has
  waited the maximum queue delay). Several idle instances are interchangeable, so the next
  batch goes to the instance that became free first. As load grows, batches fill before the
  delay runs out, so a request's latency can *fall* with load.
* A batch of ``b`` takes ``curve.latency(b)`` seconds on a device of its own. Where several
  instances (of one or more models) share a device, a batch of ``b`` first spends the curve's
  ``host_time_s(b)`` (``host_s`` plus ``host_per_sample_s * b``: host-side work that
  overlaps with other batches), then its device work, which
  the batches on the device share (processor sharing): with ``n`` of them, each advances at
  ``1 / slowdown(n)`` of its solo speed, ``slowdown(n) = n`` by default or the server's
  measured ``colocation_slowdown`` table.
* A request's latency is its batch's completion minus its arrival, plus the deployment's
  ``request_overhead_s`` (round trip, response: it occupies no stage).
* A bounded queue or a queue timeout (the batching policy's queue policy) rejects requests:
  they are *dropped* (``drop_reason``), never run, and are counted apart. Both bound the whole
  server: the queue counts the requests admitted and not yet in a batch, the timeout runs
  from arrival (:mod:`gpucast.simulate.serving_events`). Closed-loop clients
  (:class:`~gpucast.domain.serving.ClosedLoop`, :func:`simulate_closed_loop`) send their next
  request a think time after the previous one's response.

Accounting (every run): the measurement window is ``[warmup_s, horizon_s]`` (horizon: the
simulated duration, default the last arrival). Throughput is the completions inside the
window over its length, so it never exceeds what was offered and, under overload, is what the
server carries. Each request arriving in the window is *served* (completed by the horizon),
*dropped*, or *in flight* at the horizon; latency percentiles are over the requests that ran
(those in flight included: the simulation runs them to completion, so overload shows as
latency growing with the backlog, not as requests vanishing).

Why it is fast
--------------
Open-loop traffic through unbounded queues runs once per *batch* (a few events per batch where
a device is shared), not per request or per time step: the queue is the sorted arrival array
itself, and "how many requests are queued at time t" is a binary search (``bisect`` on a
Python list -- C speed); FIFO host-path stages are a cumulative maximum over the whole
stream. Instance free times live in a small heap. Per-request latencies are expanded from
per-batch completions with ``numpy.repeat`` after the loop. One million requests through four
GPUs with dynamic batching take well under a second on one core
(``benchmarks/serving_speed.py``). Closed-loop clients and bounded queues run on the
event-driven engine of :mod:`gpucast.simulate.serving_events` (one event per request and
stage), which gives the same latencies on the traffic both can run.

:func:`find_saturation` searches the highest offered rate a deployment holds (bounded queue
growth, no shedding) and reports its peak throughput; :func:`calibrate_host_path` fits the host
path to measured medians at one or two loads.

Serverless keep-alive (cold starts, warm-idle memory) is :mod:`gpucast.simulate.serverless`.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import (
    DYNAMIC_LOAD_BALANCING,
    ClosedLoop,
    Deployment,
    ModelDeployment,
    ServerSpec,
)
from gpucast.domain.units import usd_per_million
from gpucast.simulate.serving_events import (
    DROP_REASONS,
    DeviceRecord,
    RunRecord,
    run_closed_loop,
    run_dispatched,
    run_open_loop,
)
from gpucast.simulate.stages import (
    device_slowdown,
    fifo_busy_s,
    fifo_departures,
    shared_departures,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Percentiles every summary reports.
PERCENTILES = (50.0, 95.0, 99.0)

__all__ = [
    "DROP_REASONS",
    "PERCENTILES",
    "Saturation",
    "SaturationProbe",
    "ServerStats",
    "ServingResult",
    "analytic_capacity_rps",
    "calibrate_host_path",
    "device_slowdown",
    "find_saturation",
    "latency_summary",
    "probe_rate",
    "search_saturation",
    "simulate_closed_loop",
    "simulate_serving",
    "single_server",
    "with_host_path",
]


# -- results -------------------------------------------------------------------------------------


_A = TypeVar("_A", bound=npt.NDArray[Any])


def _frozen(values: npt.ArrayLike, dtype: type) -> npt.NDArray[np.generic]:
    """A read-only array of ``values``: copied, unless it already is a read-only array of
    ``dtype`` that owns its memory (what the engines hand over: a 10 M-request result is not
    held twice)."""
    if (
        isinstance(values, np.ndarray)
        and values.dtype == dtype
        and values.base is None
        and not values.flags.writeable
    ):
        return values
    arr: npt.NDArray[np.generic] = np.array(values, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


def _handed_over(arr: _A) -> _A:
    """``arr`` (owned by its creator, never shared) made read-only, so :func:`_frozen`
    keeps it without a copy."""
    if arr.base is not None:
        arr = arr.copy()
    arr.setflags(write=False)
    return arr


def latency_summary(latency_s: FloatArray) -> dict[str, float]:
    """p50 / p95 / p99 / mean / max of a latency sample (NaN when empty)."""
    if latency_s.size == 0:
        nan = math.nan
        return {"p50": nan, "p95": nan, "p99": nan, "mean": nan, "max": nan}
    p = np.percentile(latency_s, PERCENTILES)
    return {
        "p50": float(p[0]),
        "p95": float(p[1]),
        "p99": float(p[2]),
        "mean": float(latency_s.mean()),
        "max": float(latency_s.max()),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerStats:
    """One simulated device: what it hosted and how busy it was over ``[0, horizon]``.

    ``stages``: utilisation of each host-path stage it has (``network``, ``host``, ``pcie``):
    the link's and copy engine's busy fraction, the shared host's requests carried over its
    capacity; ``host_utilisation`` is ``stages["host"]`` (None without a host capacity).
    """

    name: str
    group: int
    replica: int
    kind: str
    price_usd_per_hour: float
    requests: int
    batches: int
    busy_fraction: float  # share of the horizon with >= 1 batch running
    instance_utilisation: float  # busy instance-seconds / (instances x horizon)
    mean_batch_size: float
    host_utilisation: float | None = None
    stages: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", MappingProxyType(dict(self.stages)))

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "group": self.group,
            "replica": self.replica,
            "kind": self.kind,
            "price_usd_per_hour": self.price_usd_per_hour,
            "requests": self.requests,
            "batches": self.batches,
            "busy_fraction": self.busy_fraction,
            "instance_utilisation": self.instance_utilisation,
            "mean_batch_size": self.mean_batch_size,
            "host_utilisation": self.host_utilisation,
            # each host-path stage's share of the run busy (QA 40 V #9: was "stages", unsuffixed)
            "stage_busy_fractions": dict(self.stages),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingResult:
    """Per-request arrays of one simulation, and the summaries computed from them.

    ``model_index[i]`` indexes ``models``; open-loop arrays are in arrival order per model,
    models concatenated (closed loop: in send order). ``latency_s`` is NaN and
    ``batch_size`` 0 for a dropped request (``drop_reason`` > 0, see :data:`DROP_REASONS`).
    The window is ``[warmup_s, horizon_s]`` (module docstring).
    """

    models: tuple[str, ...]
    arrival_s: FloatArray
    latency_s: FloatArray
    model_index: IntArray
    batch_size: IntArray  # size of the batch each request ran in
    servers: tuple[ServerStats, ...]
    price_usd_per_hour: float
    horizon_s: float
    drop_reason: IntArray | None = None
    slo_s: float | None = None
    warmup_s: float = 0.0
    seed: int | None = None
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "arrival_s", _frozen(self.arrival_s, np.float64))
        object.__setattr__(self, "latency_s", _frozen(self.latency_s, np.float64))
        object.__setattr__(self, "model_index", _frozen(self.model_index, np.int64))
        object.__setattr__(self, "batch_size", _frozen(self.batch_size, np.int64))
        reasons = (
            np.zeros(self.arrival_s.size, dtype=np.int64)
            if self.drop_reason is None
            else self.drop_reason
        )
        object.__setattr__(self, "drop_reason", _frozen(reasons, np.int64))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    @property
    def dropped(self) -> npt.NDArray[np.bool_]:
        """Which requests were rejected."""
        assert self.drop_reason is not None
        return np.asarray(self.drop_reason > 0)

    @property
    def window_s(self) -> float:
        return self.horizon_s - self.warmup_s

    def _model(self, model: str | None) -> npt.NDArray[np.bool_]:
        if model is None:
            return np.ones(self.arrival_s.size, dtype=bool)
        return np.asarray(self.model_index == self.models.index(model))

    def _window(self, model: str | None = None) -> npt.NDArray[np.bool_]:
        """Requests arriving in the window (of ``model``)."""
        keep = (self.arrival_s >= self.warmup_s) & (self.arrival_s <= self.horizon_s)
        return keep & self._model(model)

    def latencies(self, model: str | None = None) -> FloatArray:
        """Latencies of the window's requests that ran (dropped ones left out)."""
        return np.asarray(self.latency_s[self._window(model) & ~self.dropped])

    def counts(self, model: str | None = None) -> dict[str, int]:
        """The window's requests: ``requests`` = ``served`` (completed by the horizon) +
        ``dropped`` + ``in_flight`` (still queued or running at the horizon); ``dropped``
        split by reason."""
        win = self._window(model)
        dropped = win & self.dropped
        done = self.arrival_s + np.where(self.dropped, math.inf, self.latency_s)
        served = win & ~self.dropped & (done <= self.horizon_s)
        out = {
            "requests": int(win.sum()),
            "served": int(served.sum()),
            "dropped": int(dropped.sum()),
            "in_flight": int((win & ~self.dropped & (done > self.horizon_s)).sum()),
        }
        assert self.drop_reason is not None
        for code, reason in enumerate(DROP_REASONS):
            if code:
                out[reason] = int((dropped & (self.drop_reason == code)).sum())
        return out

    def offered_rps(self, model: str | None = None) -> float:
        """Arrivals in the window over its length."""
        w = self.window_s
        return float(self._window(model).sum()) / w if w > 0 else math.nan

    def throughput_rps(self, model: str | None = None) -> float:
        """Completions in the window over its length (what the server carried)."""
        w = self.window_s
        if not w > 0:
            return math.nan
        done = self.arrival_s + self.latency_s  # NaN where dropped: never counted
        inside = (done >= self.warmup_s) & (done <= self.horizon_s) & self._model(model)
        return float(inside.sum()) / w

    def slo_attainment(self, model: str | None = None) -> float | None:
        """Share of the window's requests answered within the SLO (dropped ones miss it)."""
        if self.slo_s is None:
            return None
        win = self._window(model)
        if not win.any():
            return math.nan
        lat = np.where(self.dropped, math.inf, self.latency_s)[win]
        return float(np.mean(lat <= self.slo_s))

    @property
    def cost_usd_per_million(self) -> float:
        """US$ per million requests served (completed in the window)."""
        return usd_per_million(self.price_usd_per_hour, self.throughput_rps())

    def timeline(self, bins: int = 60) -> dict[str, list[float]]:
        """Per arrival-time bin: request rate, p50 and p99 latency of the requests that ran,
        and the requests dropped (for plots)."""
        if self.requests == 0:
            return {"t_s": [], "rps": [], "p50_s": [], "p99_s": [], "dropped": []}
        t_end = max(float(self.arrival_s.max()), self.horizon_s)
        edges = np.linspace(0.0, t_end if t_end > 0 else 1.0, bins + 1)
        which = np.clip(np.searchsorted(edges, self.arrival_s, side="right") - 1, 0, bins - 1)
        order = np.argsort(which, kind="stable")
        counts = np.bincount(which, minlength=bins)
        lat = self.latency_s[order]
        splits = np.split(lat, np.cumsum(counts)[:-1])
        dropped = np.bincount(which[self.dropped], minlength=bins)
        width = edges[1] - edges[0]

        def pct(s: FloatArray, q: float) -> float:
            ran = s[np.isfinite(s)]
            return float(np.percentile(ran, q)) if ran.size else math.nan

        return {
            "t_s": [float(x) for x in edges[:-1]],
            "rps": [float(c / width) for c in counts],
            "p50_s": [pct(s, 50) for s in splits],
            "p99_s": [pct(s, 99) for s in splits],
            "dropped": [int(c) for c in dropped],
        }

    def to_dict(self, *, timeline_bins: int = 0) -> dict[str, object]:
        """The ``--json`` object of ``gpucast simulate serve``."""
        lat = self.latencies()
        per_model = {
            m: {
                **self.counts(m),
                "latency_s": latency_summary(self.latencies(m)),
                "offered_rps": self.offered_rps(m),
                "throughput_rps": self.throughput_rps(m),
                "slo_attainment": self.slo_attainment(m),
            }
            for m in self.models
        }
        ran = self.batch_size[self._window() & ~self.dropped]
        out: dict[str, object] = {
            **self.counts(),
            "latency_s": latency_summary(lat),
            "offered_rps": self.offered_rps(),
            "throughput_rps": self.throughput_rps(),
            "horizon_s": self.horizon_s,
            "warmup_s": self.warmup_s,
            "slo_s": self.slo_s,
            "slo_attainment": self.slo_attainment(),
            "cost_usd_per_hour": self.price_usd_per_hour,
            "cost_usd_per_million": self.cost_usd_per_million,
            # per batch, as each server's: n requests in batches of sizes b_i make sum(1/b_i)
            # batches (the mean over requests, which counts big batches more, reads higher)
            "mean_batch_size": float(ran.size / np.sum(1.0 / ran)) if ran.size else math.nan,
            "models": per_model,
            "servers": [s.to_dict() for s in self.servers],
            "seed": self.seed,
            "sources": dict(self.sources),
        }
        if timeline_bins:
            out["timeline"] = self.timeline(timeline_bins)
        return out


# -- the per-device loop ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Queue:
    """One model's queue and instances on one device, prepared for the hot loop."""

    arrivals: list[float]
    instances: int
    ready_s: float
    trigger: int  # queued requests that start a batch at once
    largest: int  # largest batch ever formed
    delay_s: float
    size_for_queue: list[int]  # index: queued requests (capped at largest)
    latency: list[float]  # index: batch size
    host: list[float]  # index: batch size; part of that batch's latency spent off the device
    # outputs
    sizes: list[int] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)


def _prepare(dep: ModelDeployment, arrivals: FloatArray, server: ServerSpec) -> _Queue:
    policy = dep.batching
    largest = policy.largest_batch
    size_for_queue = [0] + [policy.batch_for_queue(q) for q in range(1, largest + 1)]
    return _Queue(
        arrivals=arrivals.tolist(),
        instances=dep.instances,
        ready_s=dep.cold_start_s,
        trigger=policy.trigger_size,
        largest=largest,
        delay_s=policy.max_queue_delay_s,
        size_for_queue=size_for_queue,
        latency=list(dep.latency.table(largest)),
        host=[0.0, *(dep.latency.host_time_s(b) for b in range(1, largest + 1))],
    )


def _run_one_model(q: _Queue) -> None:
    """The hot loop for a device whose batches never slow each other down (one instance, or
    instances that share nothing): one iteration per batch."""
    arrivals = q.arrivals
    n = len(arrivals)
    free = [q.ready_s] * q.instances
    trigger_off = q.trigger - 1
    largest = q.largest
    delay = q.delay_s
    size_for_queue = q.size_for_queue
    latency = q.latency
    sizes, starts, ends = q.sizes, q.starts, q.ends
    bisect_right = bisect.bisect_right
    heapreplace = heapq.heapreplace
    h = 0
    while h < n:
        f = free[0]
        a0 = arrivals[h]
        if delay > 0.0:
            t = a0 + delay
            j = h + trigger_off
            if j < n and arrivals[j] < t:
                t = arrivals[j]
            if f > t:
                t = f
        else:
            t = f if f > a0 else a0
        hi = h + largest
        if hi > n:
            hi = n
        b = size_for_queue[bisect_right(arrivals, t, h, hi) - h]
        end = t + latency[b]
        heapreplace(free, end)
        sizes.append(b)
        starts.append(t)
        ends.append(end)
        h += b


def _trigger_time(q: _Queue, h: int, not_before: float) -> float:
    """When the batch at the head ``h`` of ``q``'s queue is due, given an idle instance."""
    arrivals = q.arrivals
    a0 = arrivals[h]
    if q.delay_s > 0.0:
        t = a0 + q.delay_s
        j = h + q.trigger - 1
        if j < len(arrivals) and arrivals[j] < t:
            t = arrivals[j]
    else:
        t = a0
    return t if t > not_before else not_before


def _run_shared(queues: list[_Queue], slowdown: list[float]) -> None:
    """Batches on one device: each spends its host part (``host_time_s(b)``, overlapping freely),
    then its device work, which running batches share: while ``n`` are in their device
    part, each advances at ``1 / slowdown[n]`` of its solo speed (processor sharing).

    All device batches advance at the same rate, so in *virtual time* (solo-seconds of
    progress) each finishes at its entry's virtual time plus its device work, and the next to
    finish is the smallest of those: a heap, as in fair-queueing schedulers. Events are batch
    starts, ends of host parts and completions, processed in time order.
    """
    inf = math.inf
    now = 0.0
    virtual = 0.0
    on_device = 0
    finishing: list[tuple[float, int, int, int]] = []  # (virtual finish, seq, model, batch)
    hosting: list[tuple[float, int, int, int, float]] = []  # (end, seq, model, batch, work)
    heads = [0] * len(queues)
    idle = [q.instances for q in queues]
    cand = [_trigger_time(q, 0, q.ready_s) if q.arrivals else inf for q in queues]
    seq = 0
    bisect_right = bisect.bisect_right
    heappush, heappop = heapq.heappush, heapq.heappop
    n_models = len(queues)
    while True:
        t_done = now + (finishing[0][0] - virtual) * slowdown[on_device] if finishing else inf
        t_host = hosting[0][0] if hosting else inf
        m = 0
        t_start = cand[0]
        for k in range(1, n_models):
            if cand[k] < t_start:
                t_start, m = cand[k], k
        if t_host <= t_done and t_host <= t_start:
            if t_host == inf:
                break
            _t, _s, mm, idx, work = heappop(hosting)
            if on_device:
                virtual += (t_host - now) / slowdown[on_device]
            now = t_host
            heappush(finishing, (virtual + work, seq, mm, idx))
            seq += 1
            on_device += 1
            continue
        if t_done <= t_start:
            vfin, _s, mm, idx = heappop(finishing)
            virtual = vfin
            now = t_done
            on_device -= 1
            q = queues[mm]
            q.ends[idx] = now
            idle[mm] += 1
            if idle[mm] == 1 and heads[mm] < len(q.arrivals):
                cand[mm] = _trigger_time(q, heads[mm], max(now, q.ready_s))
            continue
        if on_device:
            virtual += (t_start - now) / slowdown[on_device]
        now = t_start
        q = queues[m]
        h = heads[m]
        arrivals = q.arrivals
        hi = min(len(arrivals), h + q.largest)
        b = q.size_for_queue[bisect_right(arrivals, now, h, hi) - h]
        heads[m] = h + b
        idx = len(q.sizes)
        q.sizes.append(b)
        q.starts.append(now)
        q.ends.append(inf)
        host = q.host[b]
        heappush(hosting, (now + host, seq, m, idx, q.latency[b] - host))
        seq += 1
        idle[m] -= 1
        if idle[m] > 0 and heads[m] < len(arrivals):
            cand[m] = _trigger_time(q, heads[m], now)
        else:
            cand[m] = inf


def _union_length(starts: FloatArray, ends: FloatArray) -> float:
    """Total length of the union of intervals [start, end)."""
    if starts.size == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    gap_start = np.concatenate([[s[0]], np.maximum(s[1:], reach[:-1])])
    return float(np.sum(np.maximum(reach - gap_start, 0.0)))


def _split(arrivals: FloatArray, parts: int, how: str, rng: np.random.Generator) -> list[IntArray]:
    """Indices of the requests each of ``parts`` servers receives."""
    idx = np.arange(arrivals.size, dtype=np.int64)
    if parts == 1:
        return [idx]
    if how == "round_robin":
        return [idx[p::parts] for p in range(parts)]
    which = rng.integers(0, parts, size=arrivals.size)
    return [idx[which == p] for p in range(parts)]


def _check_arrivals(name: str, arrivals: FloatArray) -> FloatArray:
    a = np.asarray(arrivals, dtype=np.float64)
    if a.ndim != 1:
        raise InvalidSpecError(f"arrivals of {name}", "must be a 1-D array of seconds")
    if a.size and (not np.all(np.isfinite(a)) or a[0] < 0 or np.any(np.diff(a) < 0)):
        raise InvalidSpecError(f"arrivals of {name}", "must be finite, >= 0 and sorted")
    return a


def _check_run(slo_s: float | None, warmup_s: float, horizon_s: float | None) -> None:
    if slo_s is not None and not (math.isfinite(slo_s) and slo_s > 0):
        raise InvalidSpecError("slo", "must be > 0 seconds", got=slo_s, fix="e.g. --slo-ms 100")
    if not (math.isfinite(warmup_s) and warmup_s >= 0):
        raise InvalidSpecError("warmup_s", "must be >= 0", got=warmup_s)
    if horizon_s is not None and not (math.isfinite(horizon_s) and horizon_s > warmup_s):
        raise InvalidSpecError(
            "horizon_s", "must be finite and after the warm-up", got=horizon_s,
            fix="e.g. the simulated duration, --duration-s 60",
        )  # fmt: skip


def _host_path(
    server: ServerSpec,
    deps: Sequence[ModelDeployment],
    times: Sequence[FloatArray],
    horizon_s: float,
) -> tuple[list[FloatArray], dict[str, float]]:
    """When each model's requests (``times``, sorted per model) reach the batcher after the
    server's host path, and each stage's utilisation over ``[0, horizon_s]``."""
    has_net = server.network_gbps is not None and any(d.input_bytes > 0 for d in deps)
    has_pcie = server.pcie_gbps is not None and any(d.input_bytes > 0 for d in deps)
    if not (has_net or has_pcie or server.has_host_stage):
        return list(times), {}
    sizes = [t.size for t in times]
    merged = np.concatenate(times) if times else np.zeros(0)
    payload = np.concatenate(
        [np.full(n, d.input_bytes, dtype=np.float64) for n, d in zip(sizes, deps, strict=True)]
    )
    order = np.argsort(merged, kind="stable")
    t = merged[order]
    load = payload[order]
    util: dict[str, float] = {}
    h = horizon_s
    if has_net:
        assert server.network_gbps is not None
        service = load * 8.0 / (server.network_gbps * 1e9)
        out = fifo_departures(t, service)
        util["network"] = fifo_busy_s(t, out, service, h) / h if h > 0 else 0.0
        t = out
    if server.has_host_stage:
        t = shared_departures(t, server.host_s, server.host_capacity_rps, server.host_concurrency)
        if server.host_capacity_rps is not None:
            carried = float(np.searchsorted(t, h, side="right"))
            util["host"] = carried / (server.host_capacity_rps * h) if h > 0 else 0.0
    if has_pcie:
        assert server.pcie_gbps is not None
        service = load / (server.pcie_gbps * 1e9)
        out = fifo_departures(t, service)
        util["pcie"] = fifo_busy_s(t, out, service, h) / h if h > 0 else 0.0
        t = out
    at_batcher = np.empty_like(t)
    at_batcher[order] = t
    return np.split(at_batcher, np.cumsum(sizes)[:-1]), util


def _fast_open_loop(
    deployment: Deployment,
    checked: Mapping[str, FloatArray],
    per_device: Sequence[Mapping[str, IntArray]],
    devices: Sequence[tuple[int, int]],
    horizon_s: float,
) -> RunRecord:
    """Open-loop traffic through unbounded queues: the batch-level loops (module docstring)."""
    models = deployment.models
    done = {m: np.empty(checked[m].size) for m in models}
    batch_of = {m: np.empty(checked[m].size, dtype=np.int64) for m in models}
    records: list[DeviceRecord] = []
    for d, (g, r) in enumerate(devices):
        server = deployment.groups[g].server
        deps = server.models
        ids = [per_device[d][dep.model] for dep in deps]
        at_batcher, util = _host_path(
            server, deps, [checked[dep.model][i] for dep, i in zip(deps, ids, strict=True)],
            horizon_s,
        )  # fmt: skip
        queues = [_prepare(dep, a, server) for dep, a in zip(deps, at_batcher, strict=True)]
        if server.instances == 1:
            for q in queues:
                _run_one_model(q)
        else:
            _run_shared(queues, device_slowdown(server))
        record = DeviceRecord(group=g, replica=r, stage_utilisation=util)
        for dep, q, idx in zip(deps, queues, ids, strict=True):
            if idx.size:
                sizes = np.asarray(q.sizes, dtype=np.int64)
                done[dep.model][idx] = np.repeat(np.asarray(q.ends), sizes)
                batch_of[dep.model][idx] = np.repeat(sizes, sizes)
            record.starts.extend(q.starts)
            record.ends.extend(q.ends)
            record.requests += int(idx.size)
            record.ran += int(idx.size)
        records.append(record)
    return RunRecord(
        model_index=_joined([_filled(checked[m].size, i) for i, m in enumerate(models)]),
        arrival_s=_joined([checked[m] for m in models]),
        done_s=_joined([done[m] for m in models]),
        batch_size=_joined([batch_of[m] for m in models]),
        drop_reason=np.zeros(sum(checked[m].size for m in models), dtype=np.int64),
        devices=records,
    )


def _filled(n: int, value: int) -> IntArray:
    """``n`` copies of ``value``; zeros as pages the OS maps on first write (i.e. never)."""
    return np.full(n, value, dtype=np.int64) if value else np.zeros(n, dtype=np.int64)


def _joined(parts: Sequence[FloatArray] | Sequence[IntArray]) -> npt.NDArray[Any]:
    """The models' arrays end to end; one model's array as it is (no copy of 10 M rows)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _result(
    deployment: Deployment,
    record: RunRecord,
    *,
    horizon_s: float,
    slo_s: float | None,
    warmup_s: float,
    seed: int | None,
    sources: Mapping[str, str] | None,
) -> ServingResult:
    """A :class:`ServingResult` from either engine's record."""
    models = deployment.models
    overhead = {
        dep.model: dep.request_overhead_s for g in deployment.groups for dep in g.server.models
    }
    extra = np.asarray([overhead[m] for m in models], dtype=np.float64)
    latency = record.done_s - record.arrival_s  # in place from here: one array per request
    latency += extra[0] if len(models) == 1 else extra[record.model_index]
    latency[record.drop_reason > 0] = math.nan
    h = horizon_s
    stats = []
    for dev in record.devices:
        server = deployment.groups[dev.group].server
        starts = np.asarray(dev.starts, dtype=np.float64)
        ends = np.asarray(dev.ends, dtype=np.float64)
        inside = starts < h
        s_in, e_in = starts[inside], np.minimum(ends[inside], h)
        n_batches = int(starts.size)
        stats.append(
            ServerStats(
                name=server.name,
                group=dev.group,
                replica=dev.replica,
                kind=server.kind,
                price_usd_per_hour=server.price_usd_per_hour,
                requests=dev.requests,
                batches=n_batches,
                busy_fraction=_union_length(s_in, e_in) / h if h > 0 else 0.0,
                instance_utilisation=(
                    float(np.sum(e_in - s_in)) / (server.instances * h) if h > 0 else 0.0
                ),
                mean_batch_size=dev.ran / n_batches if n_batches else 0.0,
                host_utilisation=dev.stage_utilisation.get("host"),
                stages=dev.stage_utilisation,
            )
        )
    return ServingResult(
        models=models,
        arrival_s=record.arrival_s,  # may be the caller's: copied
        latency_s=_handed_over(latency),  # the engines' own arrays: kept, not copied
        model_index=_handed_over(record.model_index),
        batch_size=_handed_over(record.batch_size),
        drop_reason=_handed_over(record.drop_reason),
        servers=tuple(stats),
        price_usd_per_hour=deployment.price_usd_per_hour,
        horizon_s=horizon_s,
        slo_s=slo_s,
        warmup_s=warmup_s,
        seed=seed,
        sources=sources or {},
    )


def _default_horizon(arrivals: Mapping[str, FloatArray]) -> float:
    last = max((float(a[-1]) for a in arrivals.values() if len(a)), default=0.0)
    return last if last > 0 else 1.0


def simulate_serving(
    deployment: Deployment,
    arrivals: Mapping[str, FloatArray],
    *,
    seed: int | None = 0,
    rng: np.random.Generator | None = None,
    slo_s: float | None = None,
    warmup_s: float = 0.0,
    horizon_s: float | None = None,
    sources: Mapping[str, str] | None = None,
) -> ServingResult:
    """Run every model's open-loop ``arrivals`` (sorted seconds) through ``deployment``.

    ``rng`` (or ``seed``) only drives random load balancing; the same inputs and seed give
    the same result bit for bit. ``horizon_s`` (default: the last arrival) ends the
    measurement window (the simulated duration); every request still runs to completion.
    Deployments whose queues can reject requests run on the event-driven engine.
    """
    _check_run(slo_s, warmup_s, horizon_s)
    generator = rng if rng is not None else np.random.default_rng(seed)
    models = deployment.models
    missing = [m for m in models if m not in arrivals]
    if missing:
        raise InvalidSpecError("arrivals", f"none given for model(s) {', '.join(missing)}")
    extra = [m for m in arrivals if m not in models]
    if extra:
        raise InvalidSpecError(
            "arrivals",
            f"model(s) {', '.join(extra)} are not deployed on any server",
            fix="add a server that hosts them",
        )

    # every device (group, replica) and which of its deployments serve which model
    devices = [(g, r) for g, group in enumerate(deployment.groups) for r in range(group.count)]
    hosts: dict[str, list[int]] = {m: [] for m in models}
    for d, (g, _r) in enumerate(devices):
        for dep in deployment.groups[g].server.models:
            hosts[dep.model].append(d)
    per_device: list[dict[str, IntArray]] = [{} for _ in devices]
    checked: dict[str, FloatArray] = {}
    dynamic = deployment.load_balancing in DYNAMIC_LOAD_BALANCING
    for m in models:
        a = _check_arrivals(m, arrivals[m])
        checked[m] = a
        if dynamic:
            continue
        for d, idx in zip(
            hosts[m], _split(a, len(hosts[m]), deployment.load_balancing, generator), strict=True
        ):
            per_device[d][m] = idx
    horizon = horizon_s if horizon_s is not None else _default_horizon(checked)
    bounded = any(dep.batching.bounded for g in deployment.groups for dep in g.server.models)
    if dynamic:
        record = run_dispatched(deployment, checked, horizon)
    elif bounded or deployment.scheduling != "none":
        device_of: dict[str, IntArray] = {}
        for m in models:
            owner = np.empty(checked[m].size, dtype=np.int64)
            for d in hosts[m]:
                owner[per_device[d][m]] = d
            device_of[m] = owner
        record = run_open_loop(deployment, checked, device_of, horizon)
    else:
        record = _fast_open_loop(deployment, checked, per_device, devices, horizon)
    return _result(
        deployment,
        record,
        horizon_s=horizon,
        slo_s=slo_s,
        warmup_s=warmup_s,
        seed=seed if rng is None else None,
        sources=sources,
    )


def simulate_closed_loop(
    deployment: Deployment,
    clients: Mapping[str, ClosedLoop],
    duration_s: float,
    *,
    seed: int | None = 0,
    rng: np.random.Generator | None = None,
    slo_s: float | None = None,
    warmup_s: float = 0.0,
    sources: Mapping[str, str] | None = None,
) -> ServingResult:
    """Closed-loop ``clients`` per model (:class:`~gpucast.domain.serving.ClosedLoop`) for
    ``duration_s`` through ``deployment`` (the event-driven engine). ``rng`` (or ``seed``)
    drives think times and random load balancing: same seed, same result."""
    _check_run(slo_s, warmup_s, duration_s)
    unknown = [m for m in clients if m not in deployment.models]
    if unknown:
        raise InvalidSpecError(
            "clients",
            f"model(s) {', '.join(unknown)} are not deployed on any server",
            fix="add a server that hosts them",
        )
    if not clients:
        raise InvalidSpecError("clients", "none given", fix="e.g. --clients 16")
    generator = rng if rng is not None else np.random.default_rng(seed)
    record = run_closed_loop(deployment, clients, duration_s, generator)
    return _result(
        deployment,
        record,
        horizon_s=duration_s,
        slo_s=slo_s,
        warmup_s=warmup_s,
        seed=seed if rng is None else None,
        sources=sources,
    )


def with_host_path(
    deployment: Deployment,
    *,
    capacity_rps: float | None = None,
    host_s: float | None = None,
    keep_capacity: bool = False,
) -> Deployment:
    """``deployment`` with every server's shared host set: ``capacity_rps`` (None:
    unlimited; ``keep_capacity``: each server's own) and ``host_s`` (None: unchanged)."""
    groups = []
    for g in deployment.groups:
        server = g.server
        capacity = server.host_capacity_rps if keep_capacity else capacity_rps
        server = dataclasses.replace(server, host_capacity_rps=capacity)
        if host_s is not None:
            server = dataclasses.replace(server, host_s=host_s)
        groups.append(dataclasses.replace(g, server=server))
    return dataclasses.replace(deployment, groups=tuple(groups))


def analytic_capacity_rps(deployment: Deployment, model: str) -> float:
    """An upper bound on the requests/s of ``model`` the deployment carries alone: per
    server the slowest of its host-path stages, its device (device work per request at the
    best batch, where instances share it) and its instances, summed over the servers (a
    saturation search's starting point)."""
    total = 0.0
    for g in deployment.groups:
        server = g.server
        for dep in server.models:
            if dep.model != model:
                continue
            curve = dep.latency
            sizes = range(1, dep.batching.largest_batch + 1)
            instances = dep.instances * max(b / curve.latency(b) for b in sizes)
            device = max(
                (b / curve.device_s(b) if curve.device_s(b) > 0 else math.inf) for b in sizes
            )
            bound = min(instances, device if server.instances > 1 else instances)
            total += min(bound, *server.stage_capacity_rps(dep).values()) * g.count
    return total


# -- calibration ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPathFit:
    """The shared host fitted to measured medians (:func:`calibrate_host_path`)."""

    host_s: float
    capacity_rps: float | None
    points: int
    capacity_fitted: bool


def _median(deployment: Deployment, arrivals: Mapping[str, FloatArray], seed: int | None) -> float:
    return float(np.median(simulate_serving(deployment, arrivals, seed=seed).latencies()))


def calibrate_host_path(
    deployment: Deployment,
    points: Sequence[tuple[Mapping[str, FloatArray], float]],
    *,
    capacity_rps: float | None = None,
    fit_capacity: bool = True,
    seed: int | None = 0,
    field: str = "measured p50",
) -> HostPathFit:
    """Fit the shared host (``host_s``, and ``host_capacity_rps`` where two loads pin it)
    so the simulated median latency of each point's arrivals equals its measured median.

    ``points``: (arrivals, measured median seconds). One point, or a ``capacity_rps`` given,
    or ``fit_capacity=False``: only ``host_s`` is fitted (the time a request spends on the
    host path when alone), at that capacity (None: unlimited). Two or more points: the
    lowest and highest offered loads fit ``host_s`` and the capacity together (the rise of
    the median between them is the host filling up). Raises :class:`InvalidSpecError` when a
    measured median is below what the device alone takes, or the rise cannot be explained,
    under ``field`` (the flags the medians came from).
    """
    from scipy.optimize import brentq  # only calibration needs it

    if not points:
        raise InvalidSpecError("calibration", "needs at least one measured median")
    for _arr, p50 in points:
        if not (math.isfinite(p50) and p50 > 0):
            raise InvalidSpecError(field, "must be > 0", got=p50)

    def rate(arr: Mapping[str, FloatArray]) -> float:
        n = sum(len(a) for a in arr.values())
        span = max((float(a[-1]) for a in arr.values() if len(a)), default=0.0)
        return n / span if span > 0 else 0.0

    ordered = sorted(points, key=lambda p: rate(p[0]))
    low_arr, low_p50 = ordered[0]

    def host_for(capacity: float | None) -> float:
        def gap(h: float) -> float:
            dep = with_host_path(deployment, capacity_rps=capacity, host_s=h)
            return _median(dep, low_arr, seed) - low_p50

        floor = gap(0.0)
        if floor >= 0:
            raise InvalidSpecError(
                field,
                f"is not above the simulated {(floor + low_p50) * 1e3:.2f} ms without host "
                "time at this load, so no host path explains it",
                got=f"{low_p50 * 1e3:.2f} ms",
                fix="check the rate and latency curve, or leave the host path out",
            )
        return float(brentq(gap, 0.0, low_p50, xtol=1e-7))

    if len(ordered) == 1 or capacity_rps is not None or not fit_capacity:
        return HostPathFit(
            host_s=host_for(capacity_rps),
            capacity_rps=capacity_rps,
            points=len(points),
            capacity_fitted=False,
        )
    high_arr, high_p50 = ordered[-1]
    busiest = rate(high_arr)

    def rise(log_c: float) -> float:
        capacity = math.exp(log_c)
        h = host_for(capacity)
        dep = with_host_path(deployment, capacity_rps=capacity, host_s=h)
        return _median(dep, high_arr, seed) - high_p50

    lo, hi = math.log(busiest * 1.0005), math.log(busiest * 1e4)
    if rise(hi) >= 0:
        raise InvalidSpecError(
            field,
            f"{'rises' if high_p50 > low_p50 else 'falls'} from {low_p50 * 1e3:.2f} to "
            f"{high_p50 * 1e3:.2f} ms, no more than the "
            "simulated device alone, so no host capacity explains the rise",
            fix="fit the host time only (one point), or check the rates",
        )
    if rise(lo) <= 0:
        raise InvalidSpecError(
            field,
            f"at {busiest:.1f} req/s is higher than a host path saturating just above that "
            "rate gives",
            fix="check the rates; the server may be overloaded at that load",
        )
    capacity = math.exp(float(brentq(rise, lo, hi, xtol=1e-5)))
    return HostPathFit(
        host_s=host_for(capacity), capacity_rps=capacity, points=len(points), capacity_fitted=True
    )


# -- saturation ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SaturationProbe:
    """One offered rate tried by :func:`search_saturation`, measured over the second half of
    the run (after the queues settled). A language model's probe adds its TTFT / TPOT
    percentiles, output tokens/s and the share of its requests preempted (None for a CNN's)."""

    offered_rps: float
    served_rps: float
    dropped_fraction: float
    held: bool
    p50_s: float
    p99_s: float
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    tokens_per_s: float | None = None
    preempted_fraction: float | None = None
    #: seconds the probe simulated (its second half measured)
    run_s: float | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "offered_rps": self.offered_rps,
            "served_rps": self.served_rps,
            "dropped_fraction": self.dropped_fraction,
            "held": self.held,
            "p50_s": self.p50_s,
            "p99_s": self.p99_s,
        }
        for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "tokens_per_s",
                    "preempted_fraction", "run_s"):  # fmt: skip
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Saturation:
    """The highest rate held (``saturation_rps``: the highest offered rate the deployment
    kept up with, counted as what it served there) and the most it carried at any offered
    rate (``peak_throughput_rps``); ``probes`` in the order they ran; ``criterion``: what
    "held" meant, in words. ``counted_peak_rps``: the completions a probe counted over its
    window where they read above the deployment's capacity (the window's edge: its start
    finds requests already in service, whose completions it counts), the rates then clipped
    to that capacity (:meth:`within`); None otherwise."""

    saturation_rps: float
    peak_throughput_rps: float
    criterion: str
    probes: tuple[SaturationProbe, ...]
    counted_peak_rps: float | None = None
    #: what the rates were clipped to, in words (:attr:`edge_note`)
    bound: str = "the capacity of its slowest stage"

    def within(self, capacity_rps: float, bound: str | None = None) -> Saturation:
        """The rates clipped to ``capacity_rps``, an upper bound on what the deployment
        carries for long (:func:`analytic_capacity_rps`; a language model's:
        :func:`gpucast.simulate.llm_load.analytic_capacity_rps`, named by ``bound``), the
        count kept where it was over (QA 40 V #8: a host carrying 244 req/s read a peak of
        244.3)."""
        if self.peak_throughput_rps <= capacity_rps and self.saturation_rps <= capacity_rps:
            return self
        return dataclasses.replace(
            self,
            saturation_rps=min(self.saturation_rps, capacity_rps),
            peak_throughput_rps=min(self.peak_throughput_rps, capacity_rps),
            counted_peak_rps=self.peak_throughput_rps,
            bound=self.bound if bound is None else bound,
        )

    @property
    def edge_note(self) -> str:
        """The clipping in words ("" when none)."""
        if self.counted_peak_rps is None:
            return ""
        return (
            f" ({self.bound}; {self.counted_peak_rps:.1f} counted over a "
            "probe's window, whose start finds requests already in service)"
        )

    @property
    def at_saturation(self) -> SaturationProbe | None:
        """The held probe ``saturation_rps`` is read from (the most it both was offered and
        served; None when none held): its offered and served rates and its latencies are
        the ones reported together."""
        held = [p for p in self.probes if p.held]
        return max(held, key=lambda p: min(p.offered_rps, p.served_rps)) if held else None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "saturation_rps": self.saturation_rps,
            "peak_throughput_rps": self.peak_throughput_rps,
            "criterion": self.criterion,
        }
        if self.counted_peak_rps is not None:
            out["counted_peak_throughput_rps"] = self.counted_peak_rps
        top = self.at_saturation
        if top is not None:
            out["offered_rps_at_saturation"] = top.offered_rps
            out["served_rps_at_saturation"] = min(top.served_rps, self.peak_throughput_rps)
        if top is not None and top.tokens_per_s is not None:
            out["tokens_per_s_at_saturation"] = top.tokens_per_s
        out["probes"] = [p.to_dict() for p in self.probes]
        return out


def probe_rate(
    deployment: Deployment,
    arrivals: Mapping[str, FloatArray],
    duration_s: float,
    *,
    tolerance: float = 0.01,
    seed: int | None = 0,
) -> SaturationProbe:
    """Whether ``deployment`` holds ``arrivals`` over ``duration_s`` (the criterion of
    :func:`find_saturation`)."""
    half = 0.5 * duration_s
    run = simulate_serving(deployment, arrivals, seed=seed, warmup_s=half, horizon_s=duration_s)
    counts = run.counts()
    offered = run.offered_rps()
    served = run.throughput_rps()
    dropped = counts["dropped"] / counts["requests"] if counts["requests"] else 0.0
    lat = run.latencies()
    p50, p99 = (float(v) for v in np.percentile(lat, [50, 99])) if lat.size else (math.nan,) * 2
    held = served >= (1.0 - tolerance) * offered and dropped <= tolerance
    return SaturationProbe(
        offered_rps=offered, served_rps=served, dropped_fraction=dropped, held=held,
        p50_s=p50, p99_s=p99, run_s=duration_s,
    )  # fmt: skip


def search_saturation(
    probe: Callable[[float], SaturationProbe],
    *,
    start_rps: float,
    criterion: str,
    precision: float = 0.005,
    max_probes: int = 30,
) -> Saturation:
    """The highest offered rate ``probe(rate)`` holds: starting from ``start_rps`` (e.g. the
    analytic capacity) the rate doubles or halves until it brackets the edge, then bisects
    (geometrically) to ``precision``; at most ``max_probes`` probes. Any kind of server:
    ``probe`` runs its simulator at one rate and says whether it held (``criterion``)."""
    if not (math.isfinite(start_rps) and start_rps > 0):
        raise InvalidSpecError("saturation start rate", "must be > 0", got=start_rps)
    probes: list[SaturationProbe] = []

    def held(rate: float) -> bool:
        probes.append(probe(rate))
        return probes[-1].held

    lo, hi = 0.0, start_rps
    if held(hi):
        lo = hi
        while len(probes) < max_probes:
            hi = lo * 2.0
            if not held(hi):
                break
            lo = hi
        else:
            hi = math.inf
    else:
        while len(probes) < max_probes and hi > 1e-9:
            lo = hi / 2.0
            if held(lo):
                break
            hi = lo
            lo = 0.0
    while lo > 0 and math.isfinite(hi) and hi / lo - 1.0 > precision and len(probes) < max_probes:
        mid = math.sqrt(lo * hi)
        if held(mid):
            lo = mid
        else:
            hi = mid
    return Saturation(
        saturation_rps=max(
            (min(p.offered_rps, p.served_rps) for p in probes if p.held), default=0.0
        ),
        peak_throughput_rps=max((p.served_rps for p in probes), default=math.nan),
        criterion=criterion,
        probes=tuple(probes),
    )


def find_saturation(
    deployment: Deployment,
    arrivals_at: Callable[[float, float], Mapping[str, FloatArray]],
    *,
    duration_s: float,
    start_rps: float,
    tolerance: float = 0.01,
    precision: float = 0.005,
    max_probes: int = 30,
    max_requests: int = 100_000,
    seed: int | None = 0,
) -> Saturation:
    """Search the highest total offered rate ``deployment`` holds (:func:`search_saturation`
    with :func:`probe_rate`).

    ``arrivals_at(rate, duration)`` gives each model's arrivals over ``duration`` seconds at
    a total mean ``rate`` (the caller's process: Poisson, constant, a time-scaled trace; the
    models in their mix). Each probe runs ``duration_s``, shortened so it offers at most
    ``max_requests`` (fast servers settle in far less time than slow ones).
    """
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise InvalidSpecError("duration", "must be > 0 seconds", got=duration_s)

    def probe(rate: float) -> SaturationProbe:
        span = min(duration_s, max_requests / rate)
        return probe_rate(deployment, arrivals_at(rate, span), span, tolerance=tolerance, seed=seed)

    criterion = (
        f"held = over the second half of a {duration_s:g} s run (shorter where it "
        f"would offer over {max_requests:,} requests), at least "
        f"{1 - tolerance:.0%} of the offered requests completed and at most "
        f"{tolerance:.0%} were dropped (the queue stops growing)"
    )
    sat = search_saturation(
        probe, start_rps=start_rps, criterion=criterion, precision=precision,
        max_probes=max_probes,
    )  # fmt: skip
    models = {d.model for g in deployment.groups for d in g.server.models}
    return sat.within(sum(analytic_capacity_rps(deployment, m) for m in models))


def single_server(
    model: ModelDeployment,
    *,
    name: str,
    memory_gib: float,
    price_usd_per_hour: float,
    count: int = 1,
    kind: str = "gpu",
    colocation_slowdown: Sequence[float] = (),
) -> Deployment:
    """Convenience: ``count`` servers each hosting ``model``."""
    from gpucast.domain.serving import ServerGroup

    server = ServerSpec(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        memory_gib=memory_gib,
        price_usd_per_hour=price_usd_per_hour,
        models=(model,),
        colocation_slowdown=tuple(colocation_slowdown),
    )
    return Deployment(groups=(ServerGroup(server=server, count=count),))
