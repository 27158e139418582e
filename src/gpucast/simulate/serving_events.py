"""The event-driven serving engine: closed-loop clients, bounded queues, queue timeouts. Pure.

:func:`gpucast.simulate.serving.simulate_serving` runs open-loop traffic through unbounded
queues with batch-level loops over the arrival array (fast: no event per request). Where
arrivals depend on completions (clients that wait for their response before sending again)
or requests can be rejected (a bounded queue, a queue timeout), the queue is no longer a
slice of the arrival array, and this engine runs instead: one heap of timed events, the
same model of every part (:mod:`gpucast.simulate.stages` for the host path, Triton's dynamic
batcher, processor sharing of the device by the batches on it), so on open-loop traffic with
unbounded queues both engines give the same latencies (``tests/simulate`` checks it).

Events at equal times run in this order: a request reaching a stage, a request reaching the
batcher, a batch ending its host part, a batch completing, an instance taking a batch, a
response reaching its client -- so a batch formed at ``t`` holds every request queued at
``t``, as the batch-level loops count arrivals up to and including ``t``.

The queue policy bounds the whole server, not only its batcher, so it holds where a host-path
stage is the bottleneck: ``max_queue_size`` is checked when a request reaches the server's
first stage, against the requests of its model admitted there and not yet in a batch
(anywhere on the host path or in the batcher's queue); ``queue_timeout_s`` counts from the
request's arrival, and a request found still waiting after it -- for the link, for a place on
the shared host, for the PCIe copy, or in the batcher's queue -- is dropped as timed out (a
stage already working on a request finishes it).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpucast.domain.serving import (
    DYNAMIC_LOAD_BALANCING,
    ClosedLoop,
    Deployment,
    ModelDeployment,
    ServerSpec,
)
from gpucast.simulate.stages import (
    HOST_CONCURRENCY,
    device_slowdown,
    shared_kappa,
    shared_solo_s,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Drop reasons (``drop_reason`` codes; 0 = not dropped).
DROP_REASONS: tuple[str, ...] = ("", "queue_full", "timeout")
QUEUE_FULL = 1
TIMEOUT = 2

# event kinds, in their order at equal times (the kind is the priority)
_AT_STAGE = 0  # a request reaches host-path stage k (k = 0 network, 1 host, 2 pcie)
_HOST_OUT = 1  # the shared host's next departure (versioned)
_AT_BATCHER = 2  # a request reaches its model's queue
_BATCH_HOST_DONE = 3  # a batch ends its host part and joins the device
_DEVICE_DONE = 4  # the device's next completion (versioned)
_TRY = 5  # an instance may take a batch
_RESPONSE = 6  # a response (or a rejection) reaches a closed-loop client
_DISPATCH = -1  # the _AT_STAGE "stage" of a request whose device is picked when it arrives


@dataclass(slots=True)
class DeviceRecord:
    """What one device did: its batches (start, end), requests, and host-path stage use."""

    group: int
    replica: int
    #: batch start and end times, 8 bytes each (a Python list of floats takes 32)
    starts: array[float] = field(default_factory=lambda: array("d"))
    ends: array[float] = field(default_factory=lambda: array("d"))
    requests: int = 0
    ran: int = 0  # requests that ran (not dropped)
    #: per stage: busy seconds in [0, horizon] (network, pcie) or requests through it by the
    #: horizon over its capacity x horizon (host)
    stage_utilisation: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class RunRecord:
    """Per-request outcome of a run, in request order (models in deployment order for open
    loop; send order for closed loop), and per-device records."""

    model_index: IntArray
    arrival_s: FloatArray
    done_s: FloatArray  # batch completion on the device; NaN where dropped
    batch_size: IntArray  # 0 where dropped
    drop_reason: IntArray
    devices: list[DeviceRecord]


@dataclass(slots=True)
class _ModelQueue:
    dep: ModelDeployment
    index: int  # model index in the deployment
    instances: int
    idle: int
    ready_s: float
    trigger: int
    largest: int
    delay_s: float
    size_for_queue: list[int]
    latency: list[float]
    host: list[float]
    max_queue: int | None
    timeout_s: float | None
    queue: deque[int] = field(default_factory=deque)  # request ids
    timer_at: float = math.nan  # pending timer (head + delay) already scheduled
    # what a dispatcher at arrival (least_loaded, elsa) reads: requests sent here and not
    # yet completed or dropped, those of them in running batches, and the running batches'
    # expected ends (start + the curve's latency)
    pending: int = 0
    in_batches: int = 0
    running_ends: list[float] = field(default_factory=list)
    # what the queue bound counts: requests admitted to the server, not yet in a batch
    admitted: int = 0


@dataclass(slots=True)
class _Device:
    server: ServerSpec
    record: DeviceRecord
    slowdown: list[float]
    queues: dict[str, _ModelQueue]
    # host path
    net_free: float = 0.0
    pcie_free: float = 0.0
    net_busy: list[tuple[float, float]] = field(default_factory=list)
    pcie_busy: list[tuple[float, float]] = field(default_factory=list)
    host_x: float = 0.0
    host_kappa: float = 0.0
    host_heap: list[tuple[float, int]] = field(default_factory=list)
    host_waiting: deque[int] = field(default_factory=deque)
    host_concurrency: int = HOST_CONCURRENCY
    host_virtual: float = 0.0
    host_last: float = 0.0
    host_version: int = 0
    host_out: list[float] = field(default_factory=list)
    # device processor sharing
    on_device: int = 0
    virtual: float = 0.0
    last: float = 0.0
    finishing: list[tuple[float, int, int]] = field(default_factory=list)  # (v, seq, batch)
    version: int = 0
    # shared instance pool of the models when the deployment schedules across them
    pool_idle: int = 0


class _Engine:
    def __init__(self, deployment: Deployment, horizon_s: float) -> None:
        self.deployment = deployment
        self.horizon_s = horizon_s
        self.models = deployment.models
        self.scheduling = deployment.scheduling
        self.events: list[tuple[float, int, int, int, int]] = []  # (t, kind, seq, a, b)
        self.seq = 0
        # per request
        self.model_of: list[int] = []
        self.arrival: list[float] = []
        self.queued_at: list[float] = []
        self.done: list[float] = []
        self.batch: list[int] = []
        self.reason: list[int] = []
        self.device_of: list[int] = []
        self.client_of: list[int] = []
        # per batch
        self.batch_members: list[list[int]] = []
        self.batch_device: list[int] = []
        self.batch_model: list[str] = []
        self.batch_work: list[float] = []
        self.batch_expected: list[float] = []
        self.devices: list[_Device] = []
        self.hosts: dict[str, list[int]] = {m: [] for m in self.models}
        self.overhead: dict[str, float] = {}
        for g, group in enumerate(deployment.groups):
            server = group.server
            for r in range(group.count):
                d = len(self.devices)
                queues = {}
                for dep in server.models:
                    policy = dep.batching
                    largest = policy.largest_batch
                    queues[dep.model] = _ModelQueue(
                        dep=dep,
                        index=self.models.index(dep.model),
                        instances=dep.instances,
                        idle=dep.instances,
                        ready_s=dep.cold_start_s,
                        trigger=policy.trigger_size,
                        largest=largest,
                        delay_s=policy.max_queue_delay_s,
                        size_for_queue=[0]
                        + [policy.batch_for_queue(q) for q in range(1, largest + 1)],
                        latency=list(dep.latency.table(largest)),
                        host=[0.0, *(dep.latency.host_time_s(b) for b in range(1, largest + 1))],
                        max_queue=policy.max_queue_size,
                        timeout_s=policy.queue_timeout_s,
                    )
                    self.hosts[dep.model].append(d)
                    self.overhead[dep.model] = dep.request_overhead_s
                dev = _Device(
                    server=server,
                    record=DeviceRecord(group=g, replica=r),
                    slowdown=device_slowdown(server),
                    queues=queues,
                    pool_idle=max(dep.instances for dep in server.models),
                )
                if server.host_capacity_rps is not None:
                    dev.host_concurrency = server.host_concurrency
                    dev.host_x = shared_solo_s(server.host_s, server.host_capacity_rps)
                    dev.host_kappa = shared_kappa(
                        server.host_s, server.host_capacity_rps, server.host_concurrency
                    )
                self.devices.append(dev)
        # ELSA tries the smallest server first: least throughput at its largest batch
        self.by_size: dict[str, list[int]] = {}
        for m, hosts in self.hosts.items():
            caps = [self._capacity_rps(self.devices[d].queues[m]) for d in hosts]
            self.by_size[m] = [d for _, d in sorted(zip(caps, hosts, strict=True))]

    @staticmethod
    def _capacity_rps(q: _ModelQueue) -> float:
        return q.instances * q.largest / q.latency[q.largest]

    # -- events ---------------------------------------------------------------------------------
    def push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        heapq.heappush(self.events, (t, kind, self.seq, a, b))
        self.seq += 1

    def new_request(self, model: int, t: float, device: int, client: int = -1) -> int:
        """Request ``i`` of ``model`` arriving at ``t`` for ``device`` (-1: the load balancer
        picks it when the request arrives, :meth:`pick_device`)."""
        i = len(self.model_of)
        self.model_of.append(model)
        self.arrival.append(t)
        self.queued_at.append(math.nan)
        self.done.append(math.nan)
        self.batch.append(0)
        self.reason.append(0)
        self.device_of.append(device)
        self.client_of.append(client)
        if device >= 0:
            self.assign(i, device)
        self.push(t, _AT_STAGE, i, 0 if device >= 0 else _DISPATCH)
        return i

    def assign(self, i: int, d: int) -> None:
        dev = self.devices[d]
        self.device_of[i] = d
        dev.record.requests += 1
        dev.queues[self.models[self.model_of[i]]].pending += 1

    # -- load balancing at arrival ----------------------------------------------------------------
    def predicted_latency(self, t: float, q: _ModelQueue) -> float:
        """ELSA's estimate of a new request's latency on queue ``q``: the rest of the running
        batch it must wait for (when every instance is busy), then the batches queued ahead of
        it and its own, each at the curve's latency of the batch the queue would form, and
        the round trip."""
        ahead = q.pending - q.in_batches
        n = ahead + 1
        wait = 0.0
        if q.idle == 0 and q.running_ends:
            wait = max(0.0, min(q.running_ends) - t)
        rounds = -(-n // (q.largest * q.instances))
        return wait + rounds * q.latency[min(n, q.largest)] + q.dep.request_overhead_s

    def pick_device(self, t: float, model: int) -> int:
        """The device for a request of ``model`` arriving at ``t`` under ``least_loaded`` or
        ``elsa`` (see :data:`gpucast.domain.serving.LoadBalancing`); ties go to the first
        device."""
        name = self.models[model]
        hosts = self.hosts[name]
        if self.deployment.load_balancing == "least_loaded":
            return min(hosts, key=lambda d: self.devices[d].queues[name].pending)
        best_d, best_s = hosts[0], math.inf
        for d in self.by_size[name]:
            q = self.devices[d].queues[name]
            est = self.predicted_latency(t, q)
            # it joins the batch of the requests queued before it: they finish with it, so
            # the oldest of them must meet the deadline too
            oldest = self.arrival[q.queue[0]] if q.queue else t
            if q.dep.deadline_s is not None and t + est - oldest <= q.dep.deadline_s:
                return d
            if est < best_s:
                best_d, best_s = d, est
        return best_d

    # -- host path --------------------------------------------------------------------------------
    def deadline(self, i: int, q: _ModelQueue) -> float:
        """When request ``i`` times out (its arrival + the queue timeout; inf: never)."""
        return math.inf if q.timeout_s is None else self.arrival[i] + q.timeout_s

    def at_stage(self, t: float, i: int, stage: int) -> None:
        if stage == _DISPATCH:
            self.assign(i, self.pick_device(t, self.model_of[i]))
            stage = 0
        dev = self.devices[self.device_of[i]]
        server = dev.server
        q = dev.queues[self.models[self.model_of[i]]]
        dep = q.dep
        if stage == 0:
            if q.max_queue is not None and q.admitted >= q.max_queue:
                self.drop(t, i, QUEUE_FULL)
                return
            q.admitted += 1
            if server.network_gbps is not None and dep.input_bytes > 0:
                s = dep.input_bytes * 8.0 / (server.network_gbps * 1e9)
                start = t if t > dev.net_free else dev.net_free
                if start > self.deadline(i, q):  # would still wait for the link: not sent
                    self.drop(self.deadline(i, q), i, TIMEOUT)
                    return
                dev.net_free = start + s
                dev.net_busy.append((start, dev.net_free))
                self.push(dev.net_free, _AT_STAGE, i, 1)
                return
            stage = 1
        if stage == 1:
            if server.host_capacity_rps is not None:
                if len(dev.host_heap) >= dev.host_concurrency:
                    dev.host_waiting.append(i)
                    return
                self.host_advance(dev, t)
                heapq.heappush(dev.host_heap, (dev.host_virtual + dev.host_x, i))
                self.host_schedule(dev, self.device_of[i])
                return
            if server.host_s > 0:
                self.push(t + server.host_s, _AT_STAGE, i, 2)
                return
            stage = 2
        if server.pcie_gbps is not None and dep.input_bytes > 0:
            s = dep.input_bytes / (server.pcie_gbps * 1e9)
            start = t if t > dev.pcie_free else dev.pcie_free
            if start > self.deadline(i, q):  # would still wait for the copy: not copied
                self.drop(self.deadline(i, q), i, TIMEOUT)
                return
            dev.pcie_free = start + s
            dev.pcie_busy.append((start, dev.pcie_free))
            self.push(dev.pcie_free, _AT_BATCHER, i, 0)
            return
        self.at_batcher(t, i)

    def host_rate(self, dev: _Device) -> float:
        n = len(dev.host_heap)
        return 1.0 / (1.0 + (n - 1) * dev.host_kappa) if n else 0.0

    def host_advance(self, dev: _Device, t: float) -> None:
        if dev.host_heap:
            dev.host_virtual += (t - dev.host_last) * self.host_rate(dev)
        dev.host_last = t

    def host_schedule(self, dev: _Device, d: int) -> None:
        dev.host_version += 1
        if dev.host_heap:
            rate = self.host_rate(dev)
            t = dev.host_last + (dev.host_heap[0][0] - dev.host_virtual) / rate
            self.push(t, _HOST_OUT, d, dev.host_version)

    def host_out(self, t: float, d: int, version: int) -> None:
        dev = self.devices[d]
        if version != dev.host_version:
            return
        v_done, i = heapq.heappop(dev.host_heap)
        dev.host_virtual = v_done
        dev.host_last = t
        dev.host_out.append(t)
        while dev.host_waiting:
            j = dev.host_waiting.popleft()
            if t > self.deadline(j, dev.queues[self.models[self.model_of[j]]]):
                self.drop(t, j, TIMEOUT)  # still waiting for a place on the host
                continue
            heapq.heappush(dev.host_heap, (dev.host_virtual + dev.host_x, j))
            break
        self.host_schedule(dev, d)
        self.at_stage(t, i, 2)

    # -- batcher and device -----------------------------------------------------------------------
    def at_batcher(self, t: float, i: int) -> None:
        d = self.device_of[i]
        q = self.devices[d].queues[self.models[self.model_of[i]]]
        self.queued_at[i] = t
        q.queue.append(i)
        if q.idle > 0:
            self.push(t, _TRY, d, q.index)

    def drop(self, t: float, i: int, reason: int) -> None:
        self.reason[i] = reason
        q = self.devices[self.device_of[i]].queues[self.models[self.model_of[i]]]
        q.pending -= 1
        if reason == TIMEOUT:  # timed out after it was admitted
            q.admitted -= 1
        c = self.client_of[i]
        if c >= 0:
            self.push(t + self.overhead[self.models[self.model_of[i]]], _RESPONSE, c, i)

    def try_batch(self, t: float, d: int, model: int) -> None:
        if self.scheduling != "none":
            self.try_scheduled(t, d)
            return
        dev = self.devices[d]
        q = dev.queues[self.models[model]]
        if q.idle == 0 or not q.queue:
            return
        if t < q.ready_s:
            if q.timer_at != q.ready_s:
                q.timer_at = q.ready_s
                self.push(q.ready_s, _TRY, d, model)
            return
        if q.timeout_s is not None:
            while q.queue and self.deadline(q.queue[0], q) < t:
                self.drop(t, q.queue.popleft(), TIMEOUT)
            if not q.queue:
                return
        if self.holding(t, d, q):
            return
        q.idle -= 1
        self.start_batch(t, d, q)
        if q.idle > 0 and q.queue:
            self.push(t, _TRY, d, model)

    def holding(self, t: float, d: int, q: _ModelQueue) -> bool:
        """Whether the queue waits for more requests (its batching delay: shorter than the
        trigger size and its head queued less than ``delay_s`` ago), with a wake-up set."""
        head = self.queued_at[q.queue[0]]
        if q.delay_s > 0.0 and len(q.queue) < q.trigger and t < head + q.delay_s:
            due = head + q.delay_s
            if q.timer_at != due:
                q.timer_at = due
                self.push(due, _TRY, d, q.index)
            return True
        return False

    def try_scheduled(self, t: float, d: int) -> None:
        """The device's next batch when its models share one pool (``Deployment.scheduling``):
        of the queues ready (their batching delay over or their trigger size reached, as
        :meth:`try_batch`), the one whose head comes first by FIFO, EDF or priority; a running
        batch is never interrupted."""
        dev = self.devices[d]
        while dev.pool_idle > 0:
            best: tuple[float, float, float, int] | None = None
            chosen: _ModelQueue | None = None
            for q in dev.queues.values():
                if q.timeout_s is not None:
                    while q.queue and self.deadline(q.queue[0], q) < t:
                        self.drop(t, q.queue.popleft(), TIMEOUT)
                if not q.queue:
                    continue
                if t < q.ready_s:
                    if q.timer_at != q.ready_s:
                        q.timer_at = q.ready_s
                        self.push(q.ready_s, _TRY, d, q.index)
                    continue
                if self.holding(t, d, q):
                    continue
                head = q.queue[0]
                due = self.arrival[head] + (
                    q.dep.deadline_s if q.dep.deadline_s is not None else math.inf
                )
                first = (
                    due
                    if self.scheduling == "edf"
                    else float(q.dep.priority)
                    if self.scheduling == "priority"
                    else self.queued_at[head]
                )
                key = (first, self.queued_at[head], self.arrival[head], q.index)
                if best is None or key < best:
                    best, chosen = key, q
            if chosen is None:
                return
            dev.pool_idle -= 1
            self.start_batch(t, d, chosen)

    def start_batch(self, t: float, d: int, q: _ModelQueue) -> None:
        """Take the batch its policy gives the queue's length and start its host part."""
        dev = self.devices[d]
        b = q.size_for_queue[min(len(q.queue), q.largest)]
        members = [q.queue.popleft() for _ in range(b)]
        k = len(self.batch_members)
        self.batch_members.append(members)
        self.batch_device.append(d)
        self.batch_model.append(q.dep.model)
        host = q.host[b]
        self.batch_work.append(q.latency[b] - host)
        self.batch_expected.append(t + q.latency[b])
        q.in_batches += b
        q.admitted -= b
        q.running_ends.append(t + q.latency[b])
        for i in members:
            self.batch[i] = b
        dev.record.starts.append(t)
        dev.record.ends.append(math.nan)
        dev.record.ran += b
        self.push(t + host, _BATCH_HOST_DONE, k, len(dev.record.starts) - 1)

    def device_advance(self, dev: _Device, t: float) -> None:
        if dev.on_device:
            dev.virtual += (t - dev.last) / dev.slowdown[dev.on_device]
        dev.last = t

    def device_schedule(self, dev: _Device, d: int) -> None:
        dev.version += 1
        if dev.finishing:
            t = dev.last + (dev.finishing[0][0] - dev.virtual) * dev.slowdown[dev.on_device]
            self.push(t, _DEVICE_DONE, d, dev.version)

    def batch_host_done(self, t: float, k: int, slot: int) -> None:
        d = self.batch_device[k]
        dev = self.devices[d]
        self.device_advance(dev, t)
        heapq.heappush(dev.finishing, (dev.virtual + self.batch_work[k], k, slot))
        dev.on_device += 1
        self.device_schedule(dev, d)

    def device_done(self, t: float, d: int, version: int) -> None:
        dev = self.devices[d]
        if version != dev.version:
            return
        v_done, k, slot = heapq.heappop(dev.finishing)
        dev.virtual = v_done
        dev.last = t
        dev.on_device -= 1
        dev.record.ends[slot] = t
        q = dev.queues[self.batch_model[k]]
        q.pending -= len(self.batch_members[k])
        q.in_batches -= len(self.batch_members[k])
        q.running_ends.remove(self.batch_expected[k])
        if self.scheduling != "none":
            dev.pool_idle += 1
        else:
            q.idle += 1
        for i in self.batch_members[k]:
            self.done[i] = t
            c = self.client_of[i]
            if c >= 0:
                self.push(t + self.overhead[self.batch_model[k]], _RESPONSE, c, i)
        self.device_schedule(dev, d)
        if self.scheduling != "none":
            if any(other.queue for other in dev.queues.values()):
                self.push(t, _TRY, d, q.index)
        elif q.queue:
            self.push(t, _TRY, d, q.index)

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, on_response: Callable[[float, int, int], None] | None = None) -> None:
        events = self.events
        pop = heapq.heappop
        while events:
            t, kind, _seq, a, b = pop(events)
            if kind == _AT_STAGE:
                self.at_stage(t, a, b)
            elif kind == _HOST_OUT:
                self.host_out(t, a, b)
            elif kind == _AT_BATCHER:
                self.at_batcher(t, a)
            elif kind == _BATCH_HOST_DONE:
                self.batch_host_done(t, a, b)
            elif kind == _DEVICE_DONE:
                self.device_done(t, a, b)
            elif kind == _TRY:
                self.try_batch(t, a, b)
            elif on_response is not None:
                on_response(t, a, b)

    def record(self) -> RunRecord:
        h = self.horizon_s
        for dev in self.devices:
            util: dict[str, float] = {}
            if dev.net_busy:
                util["network"] = _busy_fraction(dev.net_busy, h)
            if dev.server.host_capacity_rps is not None:
                out = sum(1 for x in dev.host_out if x <= h)
                util["host"] = out / (dev.server.host_capacity_rps * h) if h > 0 else 0.0
            if dev.pcie_busy:
                util["pcie"] = _busy_fraction(dev.pcie_busy, h)
            dev.record.stage_utilisation = util
        return RunRecord(
            model_index=np.asarray(self.model_of, dtype=np.int64),
            arrival_s=np.asarray(self.arrival, dtype=np.float64),
            done_s=np.asarray(self.done, dtype=np.float64),
            batch_size=np.asarray(self.batch, dtype=np.int64),
            drop_reason=np.asarray(self.reason, dtype=np.int64),
            devices=[dev.record for dev in self.devices],
        )


def _busy_fraction(intervals: Sequence[tuple[float, float]], horizon_s: float) -> float:
    if horizon_s <= 0:
        return 0.0
    busy = sum(max(0.0, min(e, horizon_s) - s) for s, e in intervals if s < horizon_s)
    return busy / horizon_s


def run_open_loop(
    deployment: Deployment,
    arrivals: Mapping[str, FloatArray],
    device_of: Mapping[str, IntArray],
    horizon_s: float,
) -> RunRecord:
    """Open-loop ``arrivals`` (sorted, checked), each request sent to the device
    ``device_of[model][i]`` (an index into the deployment's devices, groups in order)."""
    engine = _Engine(deployment, horizon_s)
    for m in engine.models:
        model = engine.models.index(m)
        for t, d in zip(arrivals[m].tolist(), device_of[m].tolist(), strict=True):
            engine.new_request(model, t, d)
    engine.run()
    return engine.record()


def run_dispatched(
    deployment: Deployment, arrivals: Mapping[str, FloatArray], horizon_s: float
) -> RunRecord:
    """Open-loop ``arrivals`` (sorted, checked) whose server is picked when each request
    arrives, by the deployment's ``least_loaded`` or ``elsa`` load balancing."""
    engine = _Engine(deployment, horizon_s)
    for model, m in enumerate(engine.models):
        for t in arrivals[m].tolist():
            engine.new_request(model, t, -1)
    engine.run()
    return engine.record()


def run_closed_loop(
    deployment: Deployment,
    clients: Mapping[str, ClosedLoop],
    horizon_s: float,
    rng: np.random.Generator,
) -> RunRecord:
    """Closed-loop clients of each model until ``horizon_s`` (see
    :class:`~gpucast.domain.serving.ClosedLoop`); requests in flight at the horizon run to
    completion, no client sends after it. Load balancing is round robin over the devices
    that host the model, or uniformly random (drawn per request from ``rng``)."""
    engine = _Engine(deployment, horizon_s)
    random_lb = deployment.load_balancing == "random"
    dynamic_lb = deployment.load_balancing in DYNAMIC_LOAD_BALANCING
    owners: list[tuple[int, ClosedLoop]] = []  # client -> (model, spec)
    next_device = {m: 0 for m in engine.models}

    def think(spec: ClosedLoop) -> float:
        if spec.think_s == 0.0:
            return 0.0
        if spec.think == "constant":
            return spec.think_s
        return float(rng.exponential(spec.think_s))

    def send(t: float, client: int) -> None:
        if t >= horizon_s:
            return
        model, _spec = owners[client]
        name = engine.models[model]
        hosts = engine.hosts[name]
        if dynamic_lb:
            d = -1  # picked when it arrives
        elif random_lb:
            d = hosts[int(rng.integers(0, len(hosts)))]
        else:
            d = hosts[next_device[name] % len(hosts)]
            next_device[name] += 1
        engine.new_request(model, t, d, client)

    for name in engine.models:
        spec = clients.get(name)
        if spec is None:
            continue
        model = engine.models.index(name)
        for k in range(spec.clients):
            owners.append((model, spec))
            stagger = spec.think_s * k / spec.clients
            first = stagger if spec.think == "constant" else think(spec)
            send(first, len(owners) - 1)

    def on_response(t: float, client: int, _request: int) -> None:
        send(t + think(owners[client][1]), client)

    engine.run(on_response)
    return engine.record()
