"""The per-device loops of open-loop traffic through unbounded queues: each server's host path
(:mod:`gpucast.simulate.stages`), then one iteration per batch (:func:`_run_one_model`) or, where
instances share a device, one per batch event (:func:`_run_shared`); "Why it is fast" in
:mod:`gpucast.simulate.serving` tells how.

Private part of :mod:`gpucast.simulate.serving`.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.serving import Deployment, ModelDeployment, ServerSpec
from gpucast.simulate._serving_result import FloatArray, IntArray
from gpucast.simulate.serving_events import DeviceRecord, RunRecord
from gpucast.simulate.stages import (
    device_slowdown,
    fifo_busy_s,
    fifo_departures,
    shared_departures,
)


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
