"""Queueing stages of a serving host path, and the device's sharing table. Pure.

A request crosses its server's host path before it reaches the batcher (see
:class:`gpucast.domain.serving.ServerSpec`): the network link, the shared host, the PCIe copy.
Each stage is a real queue with a capacity, so a server bound by one of them saturates at its
rate (and holds it under overload) instead of adding latency without bound.

* :func:`fifo_departures` -- one server, first come first served, service time per request
  (a link or a copy engine moving one request's bytes at a time). Vectorised: the Lindley
  recursion ``d_i = max(a_i, d_{i-1}) + s_i`` is ``S_i + max_{j <= i}(a_j - S_{j-1})`` with
  ``S`` the running sum of service times, a cumulative maximum.
* :func:`shared_departures` -- the shared host (client, server CPU, serving framework): up
  to ``K`` requests (its concurrency: threads, streams) are worked on at once and slow each
  other down; more wait their turn in a FIFO queue. A request needs ``x`` seconds when
  alone; with ``n`` in service each advances at ``1 / (1 + (n - 1) * kappa)``, so ``n`` of
  them complete at ``n / (x (1 + (n - 1) kappa))`` per second. ``kappa`` is set so that the
  stage carries exactly its capacity ``C`` when full (``n = K``): ``kappa = (K - C x) /
  (C x (K - 1))`` (0 when ``K`` alone bounds it below ``C``). With ``x = 1 / C`` it is plain
  processor sharing of a server of capacity ``C``. Below capacity a request spends about
  ``x / (1 - rate / C)``: the whole host time stretches as the host fills (what PERSEUS
  measures); under overload the stage carries ``C`` requests/s and the FIFO queue in front
  of it grows -- an unbounded processor-sharing server would instead spread its work over
  ever more unfinished requests and complete fewer and fewer. Exact event loop (virtual
  time and a heap, as processor-sharing schedulers do), one iteration per request in and
  out.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import numpy.typing as npt

from gpucast.domain.serving import ServerSpec

FloatArray = npt.NDArray[np.float64]


def gpus_needed(gpu_s: float, span_s: float) -> int:
    """The GPUs that ``gpu_s`` GPU-seconds of work keep busy over ``span_s`` seconds, each
    busy all of it (at least one): fewer and the work queues for as long as it keeps coming."""
    if not (span_s > 0 and math.isfinite(gpu_s)):
        return 1
    return max(1, math.ceil(gpu_s / span_s - 1e-9))


def fifo_departures(arrival_s: FloatArray, service_s: FloatArray | float) -> FloatArray:
    """Departure times of a single FIFO server for sorted ``arrival_s`` and per-request
    ``service_s`` (an array of the same length, or one number for all)."""
    a = np.asarray(arrival_s, dtype=np.float64)
    if a.size == 0:
        return np.zeros(0)
    s = np.broadcast_to(np.asarray(service_s, dtype=np.float64), a.shape)
    done = np.cumsum(s)
    before = done - s  # service of everyone ahead
    return np.asarray(done + np.maximum.accumulate(a - before), dtype=np.float64)


def fifo_busy_s(arrival_s: FloatArray, departure_s: FloatArray, service_s: FloatArray | float,
                horizon_s: float) -> float:  # fmt: skip
    """Seconds of ``[0, horizon_s]`` a FIFO server was busy (its service intervals end at the
    departures and do not overlap)."""
    d = np.asarray(departure_s, dtype=np.float64)
    if d.size == 0 or horizon_s <= 0:
        return 0.0
    s = np.broadcast_to(np.asarray(service_s, dtype=np.float64), d.shape)
    start = np.minimum(d - s, horizon_s)
    return float(np.sum(np.minimum(d, horizon_s) - start))


#: Requests the shared host works on at once, where the server does not say (a serving
#: framework's request threads or streams; beyond it requests wait in a FIFO queue). Only
#: matters near and beyond the host's capacity.
HOST_CONCURRENCY = 64


def shared_solo_s(host_s: float, capacity_rps: float | None) -> float:
    """Seconds a request spends on the shared host when alone: ``host_s``, at least the
    ``1 / capacity`` of work it brings."""
    return max(host_s, 1.0 / capacity_rps) if capacity_rps is not None else host_s


def fastest_to_batcher_s(server: ServerSpec, input_bytes: float) -> float:
    """The least time a request of ``input_bytes`` takes from arrival to the batcher's queue:
    on an idle server, its bytes over the link, the shared host alone and the PCIe copy."""
    link = input_bytes * 8.0 / (server.network_gbps * 1e9) if server.network_gbps else 0.0
    copy = input_bytes / (server.pcie_gbps * 1e9) if server.pcie_gbps else 0.0
    return link + shared_solo_s(server.host_s, server.host_capacity_rps) + copy


def shared_kappa(host_s: float, capacity_rps: float, concurrency: int) -> float:
    """The slowdown each extra request in service causes (module docstring)."""
    x = shared_solo_s(host_s, capacity_rps)
    full = capacity_rps * x
    if concurrency <= 1 or concurrency <= full:
        return 0.0
    return (concurrency - full) / (full * (concurrency - 1))


def shared_departures(
    arrival_s: FloatArray,
    host_s: float,
    capacity_rps: float | None,
    concurrency: int = HOST_CONCURRENCY,
) -> FloatArray:
    """Departure times of the shared host stage (module docstring) for sorted ``arrival_s``.

    ``capacity_rps`` None: unlimited, every request leaves ``host_s`` after it arrives.
    Requests leave in arrival order (they all need the same solo time).
    """
    a = np.asarray(arrival_s, dtype=np.float64)
    if capacity_rps is None:
        return a + host_s
    x = shared_solo_s(host_s, capacity_rps)
    kappa = shared_kappa(host_s, capacity_rps, concurrency)
    times = a.tolist()
    n_req = len(times)
    out = [0.0] * n_req
    inf = math.inf
    heap: list[tuple[float, int]] = []  # (virtual finish, request)
    heappush, heappop = heapq.heappush, heapq.heappop
    now = 0.0
    virtual = 0.0  # solo-seconds of progress every request in service has made since t = 0
    admitted = 0
    while admitted < n_req or heap:
        n = len(heap)
        if n:
            rate = 1.0 / (1.0 + (n - 1) * kappa)
            t_out = now + (heap[0][0] - virtual) / rate
        else:
            rate = 0.0
            t_out = inf
        t_in = times[admitted] if admitted < n_req and n < concurrency else inf
        if t_in <= t_out:
            if t_in > now:
                virtual += (t_in - now) * rate
                now = t_in
            heappush(heap, (virtual + x, admitted))
            admitted += 1
        else:
            v_done, j = heappop(heap)
            virtual = v_done
            now = t_out
            out[j] = now
    return np.maximum.accumulate(np.asarray(out, dtype=np.float64)) if n_req else np.zeros(0)


def device_slowdown(server: ServerSpec) -> list[float]:
    """``slowdown[n]`` for ``n`` = 0..instances batches sharing ``server``'s device (index 0
    unused): its measured table, else ``n`` (pure sharing of the device work)."""
    total = server.instances
    if server.colocation_slowdown:
        table = server.colocation_slowdown
        return [1.0] + [table[min(n, len(table)) - 1] for n in range(1, total + 1)]
    return [1.0] + [float(n) for n in range(1, total + 1)]
