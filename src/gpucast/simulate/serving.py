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

The public names are here (``__all__``); the code lives in private parts: the result and its
summaries (``_serving_result``), the per-device loops of the fast open-loop path
(``_serving_loop``) and the saturation search and its results (``_serving_saturation``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import (
    DYNAMIC_LOAD_BALANCING,
    ClosedLoop,
    Deployment,
    ModelDeployment,
    ServerSpec,
)
from gpucast.simulate._serving_loop import _fast_open_loop
from gpucast.simulate._serving_result import (
    PERCENTILES,
    FloatArray,
    IntArray,
    ServerStats,
    ServingResult,
    _result,
    latency_summary,
)
from gpucast.simulate._serving_saturation import (
    Saturation,
    SaturationProbe,
    search_saturation,
)
from gpucast.simulate.serving_events import (
    DROP_REASONS,
    run_closed_loop,
    run_dispatched,
    run_open_loop,
)
from gpucast.simulate.stages import device_slowdown

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


# -- running a deployment ------------------------------------------------------------------------


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
