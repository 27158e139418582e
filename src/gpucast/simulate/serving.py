"""Discrete-event simulation of inference serving with dynamic batching, fast and seeded.

Pure: numbers in, numbers out; no files, clock or terminal. The RNG belongs to the call.

The model
---------
* Each model's requests are spread over the servers that host it (round robin in arrival
  order, or uniformly at random), so every server (a GPU, a MIG slice or a CPU server) is
  simulated on its own: servers share nothing.
* On a server, each model has one FIFO queue shared by its ``instances``. An idle instance
  takes a batch as the :class:`~gpucast.domain.serving.BatchingPolicy` says (Triton's dynamic
  batcher: at once when the queue holds a preferred batch, else when the oldest request has
  waited the maximum queue delay). Several idle instances are interchangeable, so the next
  batch goes to the instance that became free first.
* A batch of ``b`` takes ``curve.latency(b)`` seconds on a device of its own. Where several
  instances (of one or more models) share a device, a batch of ``b`` first spends the curve's
  ``host_time_s(b)`` (``host_s`` plus ``host_per_sample_s * b``: host-side work that
  overlaps with other batches), then its device work, which
  the batches on the device share (processor sharing): with ``n`` of them, each advances at
  ``1 / slowdown(n)`` of its solo speed, ``slowdown(n) = n`` by default or the server's
  measured ``colocation_slowdown`` table.
* A request's latency is its batch's completion minus its arrival, plus the deployment's
  ``request_overhead_s`` (network and (de)serialisation, which occupy no instance).
* Host contention (optional, ``ServerSpec.host_capacity_rps``): the CPUs, NIC, serving
  framework and client threads in front of a device are shared by every request in flight.
  Modelled as a processor-sharing queue, where a job of work ``x`` spends ``x / (1 - rho)``:
  every request waits an extra ``x * rho / (1 - rho)``, ``rho`` = the offered rate around its
  arrival (a :data:`HOST_RATE_WINDOW_S` window) over the host capacity. All requests carry the
  same input, so they share one ``x``: the host path holds a request for its whole life
  (client thread, RPC, batcher), so ``x`` is the device's median latency without contention.
  The delay is the same for every request at a given load: it shifts the latency
  distribution rather than widening it. This is what makes measured latency climb smoothly
  with load long before the device saturates (PERSEUS, ``benchmarks/serving_validation.py``).
  At ``rho >= 1`` the host path cannot keep up; ``rho`` is capped at :data:`HOST_RHO_CAP` in
  the delay and the server's ``host_utilisation`` (>= 1) says it is overloaded.

Why it is fast
--------------
The loop runs once per *batch* (a few events per batch where a device is shared), not per
request or per time step: the queue is the sorted
arrival array itself, and "how many requests are queued at time t" is a binary search
(``bisect`` on a Python list — C speed). Instance free times live in a small heap. Per-request
latencies are expanded from per-batch completions with ``numpy.repeat`` after the loop.
One million requests through four GPUs with dynamic batching take about a second on one core
(``benchmarks/serving_speed.py``).

Serverless (:func:`simulate_serverless`) is a separate, per-request model of cold starts and
keep-alive (fixed or the hybrid histogram policy of Shahrad et al., ATC'20).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import (
    Deployment,
    KeepAlivePolicy,
    ModelDeployment,
    ServerSpec,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Percentiles every summary reports.
PERCENTILES = (50.0, 95.0, 99.0)
#: Span (s) over which the offered rate seen by a host path is measured, centred on each
#: arrival: long enough to average a constant-rate client's pacing, short enough to follow a
#: trace's bursts.
HOST_RATE_WINDOW_S = 1.0
#: Largest host utilisation the delay uses (x99 the work); beyond it the server is overloaded.
HOST_RHO_CAP = 0.99


# -- results -------------------------------------------------------------------------------------


def _frozen(values: npt.ArrayLike, dtype: type) -> npt.NDArray[np.generic]:
    arr: npt.NDArray[np.generic] = np.array(values, dtype=dtype, copy=True)
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
    """One simulated device: what it hosted and how busy it was."""

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
    host_utilisation: float | None = None  # mean offered rate / host capacity; None: unlimited

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
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingResult:
    """Per-request arrays of one simulation, and the summaries computed from them.

    ``model_index[i]`` indexes ``models``; arrays are in arrival order per model, models
    concatenated. ``warmup_s``: requests arriving earlier are left out of the summaries.
    """

    models: tuple[str, ...]
    arrival_s: FloatArray
    latency_s: FloatArray
    model_index: IntArray
    batch_size: IntArray  # size of the batch each request ran in
    servers: tuple[ServerStats, ...]
    price_usd_per_hour: float
    slo_s: float | None = None
    warmup_s: float = 0.0
    seed: int | None = None
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "arrival_s", _frozen(self.arrival_s, np.float64))
        object.__setattr__(self, "latency_s", _frozen(self.latency_s, np.float64))
        object.__setattr__(self, "model_index", _frozen(self.model_index, np.int64))
        object.__setattr__(self, "batch_size", _frozen(self.batch_size, np.int64))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def requests(self) -> int:
        return int(self.arrival_s.size)

    def _window(self, model: str | None = None) -> npt.NDArray[np.bool_]:
        keep = self.arrival_s >= self.warmup_s
        if model is not None:
            keep &= self.model_index == self.models.index(model)
        return keep

    def latencies(self, model: str | None = None) -> FloatArray:
        return np.asarray(self.latency_s[self._window(model)])

    def throughput_rps(self, model: str | None = None) -> float:
        """Completed requests over the span from the first arrival to the last completion."""
        keep = self._window(model)
        if not np.any(keep):
            return 0.0
        arrivals = self.arrival_s[keep]
        done = arrivals + self.latency_s[keep]
        span = float(done.max() - arrivals.min())
        return float(keep.sum()) / span if span > 0 else math.inf

    def slo_attainment(self, model: str | None = None) -> float | None:
        if self.slo_s is None:
            return None
        lat = self.latencies(model)
        return float(np.mean(lat <= self.slo_s)) if lat.size else math.nan

    @property
    def cost_usd_per_million(self) -> float:
        rps = self.throughput_rps()
        return self.price_usd_per_hour / (rps * 3600.0) * 1e6 if rps > 0 else math.inf

    def timeline(self, bins: int = 60) -> dict[str, list[float]]:
        """Per arrival-time bin: request rate, p50 and p99 latency (for plots)."""
        if self.requests == 0:
            return {"t_s": [], "rps": [], "p50_s": [], "p99_s": []}
        t_end = float(self.arrival_s.max())
        edges = np.linspace(0.0, t_end if t_end > 0 else 1.0, bins + 1)
        which = np.clip(np.searchsorted(edges, self.arrival_s, side="right") - 1, 0, bins - 1)
        order = np.argsort(which, kind="stable")
        counts = np.bincount(which, minlength=bins)
        splits = np.split(self.latency_s[order], np.cumsum(counts)[:-1])
        width = edges[1] - edges[0]
        p50 = [float(np.percentile(s, 50)) if s.size else math.nan for s in splits]
        p99 = [float(np.percentile(s, 99)) if s.size else math.nan for s in splits]
        return {
            "t_s": [float(x) for x in edges[:-1]],
            "rps": [float(c / width) for c in counts],
            "p50_s": p50,
            "p99_s": p99,
        }

    def to_dict(self, *, timeline_bins: int = 0) -> dict[str, object]:
        """The ``--json`` object of ``gpucast simulate serve``."""
        lat = self.latencies()
        per_model = {
            m: {
                "requests": int(self._window(m).sum()),
                "latency_s": latency_summary(self.latencies(m)),
                "throughput_rps": self.throughput_rps(m),
                "slo_attainment": self.slo_attainment(m),
            }
            for m in self.models
        }
        out: dict[str, object] = {
            "requests": int(lat.size),
            "latency_s": latency_summary(lat),
            "throughput_rps": self.throughput_rps(),
            "slo_s": self.slo_s,
            "slo_attainment": self.slo_attainment(),
            "cost_usd_per_hour": self.price_usd_per_hour,
            "cost_usd_per_million": self.cost_usd_per_million,
            "mean_batch_size": float(self.batch_size.mean()) if self.requests else math.nan,
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


def device_slowdown(server: ServerSpec) -> list[float]:
    """``slowdown[n]`` for ``n`` = 0..instances batches sharing ``server``'s device (index 0
    unused): its measured table, else ``n`` (pure sharing of the device work)."""
    total = server.instances
    if server.colocation_slowdown:
        table = server.colocation_slowdown
        return [1.0] + [table[min(n, len(table)) - 1] for n in range(1, total + 1)]
    return [1.0] + [float(n) for n in range(1, total + 1)]


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


def _add_host_queueing(
    capacity_rps: float,
    idx_by_model: Mapping[str, IntArray],
    arrivals: Mapping[str, FloatArray],
    latency: dict[str, FloatArray],
) -> float:
    """Add the host-contention delay to one device's requests in ``latency`` (in place; see
    the module docstring); return the device's mean host utilisation."""
    names = list(idx_by_model)
    times = np.concatenate([arrivals[m][idx_by_model[m]] for m in names])
    if times.size == 0:
        return 0.0
    order = np.argsort(times, kind="stable")
    rate = np.empty(times.size)
    rate[order] = windowed_rate(times[order])
    busy, rho = host_queueing(rate, capacity_rps)
    work = float(np.median(np.concatenate([latency[m][idx_by_model[m]] for m in names])))
    start = 0
    for m in names:
        idx = idx_by_model[m]
        latency[m][idx] += work * busy[start : start + idx.size]
        start += idx.size
    return float(rho.mean())


def _union_length(starts: FloatArray, ends: FloatArray) -> float:
    """Total length of the union of intervals [start, end)."""
    if starts.size == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    gap_start = np.concatenate([[s[0]], np.maximum(s[1:], reach[:-1])])
    return float(np.sum(np.maximum(reach - gap_start, 0.0)))


def windowed_rate(times_s: FloatArray, window_s: float = HOST_RATE_WINDOW_S) -> FloatArray:
    """Requests per second around each of the sorted ``times_s``: the count in a ``window_s``
    window centred on it, over that window's overlap with ``[first, last]`` arrival (so the
    first and last requests are not seen at half the rate). One request: rate 0."""
    t = np.asarray(times_s, dtype=np.float64)
    if t.size < 2:
        return np.zeros(t.size)
    half = 0.5 * window_s
    count = np.searchsorted(t, t + half, side="right") - np.searchsorted(t, t - half, "left")
    span = np.minimum(t + half, t[-1]) - np.maximum(t - half, t[0])
    full = min(window_s, float(t[-1] - t[0]))
    span = np.maximum(span, 0.5 * full) if full > 0 else np.full(t.size, window_s)
    return np.asarray(count / span, dtype=np.float64)


def host_queueing(rate_rps: FloatArray, capacity_rps: float) -> tuple[FloatArray, FloatArray]:
    """(extra delay per unit of host work ``rho / (1 - rho)``, utilisation ``rho``) of requests
    offered at ``rate_rps`` to a host path that carries ``capacity_rps``; ``rho`` is capped at
    :data:`HOST_RHO_CAP` in the delay (the returned utilisation is not capped)."""
    rho = np.asarray(rate_rps, dtype=np.float64) / capacity_rps
    capped = np.minimum(rho, HOST_RHO_CAP)
    return capped / (1.0 - capped), rho


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
    """Run every model's ``arrivals`` (sorted seconds) through ``deployment``.

    ``rng`` (or ``seed``) only drives random load balancing; the same inputs and seed give
    the same result bit for bit. ``horizon_s`` (default: the last completion) is the span
    utilisation is measured over.
    """
    if slo_s is not None and not (math.isfinite(slo_s) and slo_s > 0):
        raise InvalidSpecError("slo", "must be > 0 seconds", got=slo_s, fix="e.g. --slo-ms 100")
    if not (math.isfinite(warmup_s) and warmup_s >= 0):
        raise InvalidSpecError("warmup_s", "must be >= 0", got=warmup_s)
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
    for m in models:
        a = _check_arrivals(m, arrivals[m])
        checked[m] = a
        for d, idx in zip(
            hosts[m], _split(a, len(hosts[m]), deployment.load_balancing, generator), strict=True
        ):
            per_device[d][m] = idx

    completion: dict[str, FloatArray] = {m: np.empty(checked[m].size) for m in models}
    host_util: dict[int, float] = {}
    batch_of: dict[str, IntArray] = {m: np.empty(checked[m].size, dtype=np.int64) for m in models}
    overhead = {
        dep.model: dep.request_overhead_s for g in deployment.groups for dep in g.server.models
    }
    device_out: list[tuple[int, int, list[_Queue], dict[str, IntArray]]] = []
    for d, (g, r) in enumerate(devices):
        server = deployment.groups[g].server
        queues = [
            _prepare(dep, checked[dep.model][per_device[d][dep.model]], server)
            for dep in server.models
        ]
        slowdown = device_slowdown(server)
        if server.instances == 1:
            for q in queues:
                _run_one_model(q)
        else:
            _run_shared(queues, slowdown)
        for dep, q in zip(server.models, queues, strict=True):
            idx = per_device[d][dep.model]
            if idx.size:
                sizes = np.asarray(q.sizes, dtype=np.int64)
                completion[dep.model][idx] = np.repeat(np.asarray(q.ends), sizes)
                batch_of[dep.model][idx] = np.repeat(sizes, sizes)
        device_out.append((g, r, queues, per_device[d]))

    latency = {m: completion[m] - checked[m] + overhead[m] for m in models}
    for d, (g, _r) in enumerate(devices):
        capacity = deployment.groups[g].server.host_capacity_rps
        if capacity is not None:
            host_util[d] = _add_host_queueing(capacity, per_device[d], checked, latency)
    arrival_all = np.concatenate([checked[m] for m in models]) if models else np.zeros(0)
    latency_all = np.concatenate([latency[m] for m in models]) if models else np.zeros(0)
    model_index = np.concatenate(
        [np.full(checked[m].size, i, dtype=np.int64) for i, m in enumerate(models)]
    )
    batch_all = np.concatenate([batch_of[m] for m in models])

    last_end = max(
        (max(q.ends) for _g, _r, qs, _i in device_out for q in qs if q.ends), default=0.0
    )
    horizon = horizon_s if horizon_s is not None else last_end
    stats = []
    for d, (g, r, queues, idx_by_model) in enumerate(device_out):
        server = deployment.groups[g].server
        starts = np.concatenate([np.asarray(q.starts) for q in queues])
        ends = np.concatenate([np.asarray(q.ends) for q in queues])
        n_req = int(sum(i.size for i in idx_by_model.values()))
        n_batches = int(starts.size)
        busy = _union_length(starts, ends)
        stats.append(
            ServerStats(
                name=server.name,
                group=g,
                replica=r,
                kind=server.kind,
                price_usd_per_hour=server.price_usd_per_hour,
                requests=n_req,
                batches=n_batches,
                busy_fraction=min(1.0, busy / horizon) if horizon > 0 else 0.0,
                instance_utilisation=(
                    min(1.0, float(np.sum(ends - starts)) / (server.instances * horizon))
                    if horizon > 0
                    else 0.0
                ),
                mean_batch_size=n_req / n_batches if n_batches else 0.0,
                host_utilisation=host_util.get(d),
            )
        )
    return ServingResult(
        models=models,
        arrival_s=arrival_all,
        latency_s=latency_all,
        model_index=model_index,
        batch_size=batch_all,
        servers=tuple(stats),
        price_usd_per_hour=deployment.price_usd_per_hour,
        slo_s=slo_s,
        warmup_s=warmup_s,
        seed=seed if rng is None else None,
        sources=sources or {},
    )


def with_host_capacity(deployment: Deployment, capacity_rps: float | None) -> Deployment:
    """``deployment`` with every server's ``host_capacity_rps`` set to ``capacity_rps``."""
    groups = tuple(
        dataclasses.replace(g, server=dataclasses.replace(g.server, host_capacity_rps=capacity_rps))
        for g in deployment.groups
    )
    return dataclasses.replace(deployment, groups=groups)


def calibrate_host_capacity(
    deployment: Deployment,
    arrivals: Mapping[str, FloatArray],
    measured_p50_s: float,
    *,
    seed: int | None = 0,
) -> float:
    """The host capacity (requests/s, the same on every server) at which the simulated median
    latency of ``arrivals`` equals ``measured_p50_s``: one measured load level pins the host
    path (``benchmarks/serving_validation.py`` validates this on PERSEUS).

    Raises :class:`InvalidSpecError` when the measured median is not above the simulated one
    without contention (the device model alone is already as slow: nothing to calibrate).
    """
    if not (math.isfinite(measured_p50_s) and measured_p50_s > 0):
        raise InvalidSpecError("measured p50", "must be > 0", got=measured_p50_s)

    def p50(capacity: float | None) -> float:
        dep = with_host_capacity(deployment, capacity)
        return float(np.median(simulate_serving(dep, arrivals, seed=seed).latencies()))

    free = p50(None)
    if measured_p50_s <= free * (1.0 + 1e-6):
        raise InvalidSpecError(
            "measured p50",
            f"is not above the simulated {free * 1e3:.2f} ms without host contention, so no "
            "host capacity explains it",
            got=f"{measured_p50_s * 1e3:.2f} ms",
            fix="check the rate and latency curve, or leave the host capacity unlimited",
        )
    from scipy.optimize import brentq  # only calibration needs it

    busiest = max(float(windowed_rate(np.sort(a)).max()) for a in arrivals.values() if len(a))
    # the median falls as the capacity grows: far below the load it is ~100x the work (the
    # utilisation cap), far above it the uncontended median, which is below the target
    log_c = brentq(
        lambda x: p50(math.exp(x)) - measured_p50_s,
        math.log(busiest * 1e-3),
        math.log(busiest * 1e6),
        xtol=1e-6,
    )
    return math.exp(float(log_c))


# -- serverless ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessResult:
    """Cold starts and memory kept loaded while idle, per function and in total."""

    functions: tuple[str, ...]
    invocations: IntArray
    cold_starts: IntArray
    wasted_memory_gib_s: FloatArray  # loaded-but-idle memory-time per function
    latency_s: FloatArray  # every invocation, functions concatenated
    policy: KeepAlivePolicy

    @property
    def cold_start_rate(self) -> float:
        total = int(self.invocations.sum())
        return float(self.cold_starts.sum()) / total if total else math.nan

    def to_dict(self) -> dict[str, object]:
        return {
            "policy": self.policy.kind,
            "invocations": int(self.invocations.sum()),
            "cold_starts": int(self.cold_starts.sum()),
            "cold_start_rate": self.cold_start_rate,
            "wasted_memory_gib_s": float(self.wasted_memory_gib_s.sum()),
            "latency_s": latency_summary(self.latency_s),
            "functions": {
                f: {
                    "invocations": int(self.invocations[i]),
                    "cold_starts": int(self.cold_starts[i]),
                    "wasted_memory_gib_s": float(self.wasted_memory_gib_s[i]),
                }
                for i, f in enumerate(self.functions)
            },
        }


def _windows(idle_s: list[float], policy: KeepAlivePolicy) -> tuple[float, float]:
    """(pre-warm, keep-until) after an execution ends, from the idle times seen so far."""
    if policy.kind == "fixed":
        return 0.0, policy.keep_alive_s
    if len(idle_s) < policy.min_samples:
        return 0.0, policy.range_s
    arr = np.asarray(idle_s)
    if np.mean(arr > policy.range_s) > policy.max_out_of_range_fraction:
        return 0.0, policy.range_s
    binned = np.floor(np.minimum(arr, policy.range_s) / policy.bin_s) * policy.bin_s
    head = float(np.percentile(binned, policy.head_percentile)) * (1.0 - policy.margin)
    tail = (float(np.percentile(binned, policy.tail_percentile)) + policy.bin_s) * (
        1.0 + policy.margin
    )
    return head, max(tail, head)


def simulate_serverless(
    arrivals: Mapping[str, FloatArray],
    *,
    exec_time_s: Mapping[str, float],
    cold_start_s: Mapping[str, float],
    memory_gib: Mapping[str, float],
    policy: KeepAlivePolicy,
    horizon_s: float | None = None,
) -> ServerlessResult:
    """Cold starts under a keep-alive ``policy``, one warm unit per function (as the Azure
    Functions characterisation models applications).

    An invocation is warm when its function is loaded at its arrival; otherwise it pays
    ``cold_start_s``. After each execution the policy unloads the function, pre-warms it and
    keeps it loaded for a window; loaded time without an execution is wasted memory-time.
    Memory-time after the last execution counts up to ``horizon_s`` (default: the last
    arrival of any function).
    """
    names = tuple(arrivals)
    horizon = (
        horizon_s
        if horizon_s is not None
        else max((float(a[-1]) for a in arrivals.values() if len(a)), default=0.0)
    )
    inv, cold, wasted, lat_parts = [], [], [], []
    for name in names:
        a = _check_arrivals(name, arrivals[name])
        for label, table in (
            ("exec_time_s", exec_time_s),
            ("cold_start_s", cold_start_s),
            ("memory_gib", memory_gib),
        ):
            if name not in table or not (math.isfinite(table[name]) and table[name] >= 0):
                raise InvalidSpecError(f"{label} of {name}", "must be given and >= 0")
        run_s, cold_s, mem = exec_time_s[name], cold_start_s[name], memory_gib[name]
        times = a.tolist()
        is_cold = np.zeros(len(times), dtype=bool)
        idle_seen: list[float] = []
        waste_s = 0.0
        last_end: float | None = None
        warm_from, warm_until = 0.0, -1.0
        for i, t in enumerate(times):
            if last_end is None:
                is_cold[i] = True
            else:
                idle = t - last_end
                if idle > 0:
                    idle_seen.append(idle)
                if t < last_end:  # still executing: warm
                    pass
                elif warm_from <= t <= warm_until:
                    waste_s += t - warm_from
                else:
                    is_cold[i] = True
                    if t > warm_until:
                        waste_s += max(0.0, warm_until - warm_from)
            start = t + (cold_s if is_cold[i] else 0.0)
            end = start + run_s
            if last_end is None or end > last_end:
                last_end = end
            pre, keep = _windows(idle_seen, policy)
            warm_from, warm_until = last_end + pre, last_end + keep
        if last_end is not None and horizon > warm_from:
            waste_s += min(horizon, warm_until) - warm_from
        inv.append(len(times))
        cold.append(int(is_cold.sum()))
        wasted.append(waste_s * mem)
        lat_parts.append(np.where(is_cold, cold_s + run_s, run_s))
    return ServerlessResult(
        functions=names,
        invocations=np.asarray(inv, dtype=np.int64),
        cold_starts=np.asarray(cold, dtype=np.int64),
        wasted_memory_gib_s=np.asarray(wasted, dtype=np.float64),
        latency_s=np.concatenate(lat_parts) if lat_parts else np.zeros(0),
        policy=policy,
    )


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
