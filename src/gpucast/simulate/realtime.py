"""Real-time serving: request classes with priorities and deadlines, and how each fared.

A request class is a :class:`~gpucast.domain.serving.ModelDeployment` with a ``priority``
and a ``deadline_s`` (two classes of one network are two deployments of the same latency
curve under two names). ``Deployment.scheduling`` picks the next batch at every batch
boundary -- ``fifo`` (oldest head first), ``edf`` (earliest head deadline first) or
``priority`` (most urgent class first, FIFO within it) -- in the event-driven engine
(:mod:`gpucast.simulate.serving_events`); a running batch is never interrupted, so a late
urgent request waits at most one batch of another class (preemption at batch boundaries).

:func:`deadline_outcomes` gives each class its deadline-miss rate (a dropped request
misses) and its worst-case and p99 latency; :func:`check_deadlines` rejects a deadline that
no schedule can meet -- shorter than the class's fastest possible service, a batch of one
on an idle server plus the request's round trip. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import Deployment, ModelDeployment
from gpucast.simulate.serving import ServingResult
from gpucast.simulate.stages import fastest_to_batcher_s


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassOutcome:
    """How one request class fared: deadline misses and latency."""

    model: str
    priority: int
    deadline_s: float | None
    requests: int
    missed: int  # late or dropped (0 without a deadline)
    deadline_miss_rate: float
    worst_latency_s: float  # NaN when every request was dropped
    p99_latency_s: float


def fastest_service_s(dep: ModelDeployment) -> float:
    """The least latency a request of ``dep`` can see: batch of one, idle server, round trip."""
    return dep.latency.latency(1) + dep.request_overhead_s


def _deployments(deployment: Deployment) -> dict[str, ModelDeployment]:
    out: dict[str, ModelDeployment] = {}
    for group in deployment.groups:
        for dep in group.server.models:
            out.setdefault(dep.model, dep)
    return out


def check_deadlines(deployment: Deployment, field: str = "deadline") -> None:
    """One :class:`InvalidSpecError` for the first class whose deadline is shorter than its
    fastest possible service (no scheduler could meet it), under ``field`` (the flag the
    deadlines came from)."""
    for name, dep in _deployments(deployment).items():
        if dep.deadline_s is None:
            continue
        floor = fastest_service_s(dep)
        if dep.deadline_s < floor:
            raise InvalidSpecError(
                field,
                f"{name}: {dep.deadline_s * 1e3:.3g} ms is shorter than its fastest possible "
                f"service, {floor * 1e3:.3g} ms (a batch of one on an idle server)",
                fix=f"give {name} a deadline >= {floor * 1e3:.3g} ms or a faster server",
            )


def check_queue_timeouts(deployment: Deployment, field: str = "queue-timeout-ms") -> None:
    """One :class:`InvalidSpecError` for the first model whose queue timeout is shorter than
    the way to its batcher on an idle server (:func:`fastest_to_batcher_s`): the timeout runs
    from arrival, so every request would time out at any load (QA 40 V #2)."""
    for group in deployment.groups:
        for dep in group.server.models:
            timeout_s = dep.batching.queue_timeout_s
            floor = fastest_to_batcher_s(group.server, dep.input_bytes)
            if timeout_s is not None and timeout_s < floor:
                raise InvalidSpecError(
                    field,
                    f"{dep.model}: {timeout_s * 1e3:.3g} ms is shorter than the "
                    f"{floor * 1e3:.3g} ms a request needs to reach the batcher on an idle "
                    "server (network link, host path alone, PCIe copy): every request would "
                    "time out",
                    fix=f"e.g. --queue-timeout-ms {max(100.0, 10 * floor * 1e3):.3g}",
                )


def deadline_outcomes(result: ServingResult, deployment: Deployment) -> tuple[ClassOutcome, ...]:
    """Per request class (model), in the deployment's order: misses, worst and p99 latency of
    the requests that arrived after the warm-up."""
    deps = _deployments(deployment)
    keep = result.arrival_s >= result.warmup_s
    dropped = (
        result.drop_reason > 0
        if result.drop_reason is not None
        else np.zeros(result.latency_s.size, bool)
    )
    out = []
    for m, name in enumerate(result.models):
        dep = deps[name]
        mine = keep & (result.model_index == m)
        lat = result.latency_s[mine]
        lost = dropped[mine]
        ran = lat[~lost]
        n = int(mine.sum())
        if dep.deadline_s is None:
            missed = 0
        else:
            missed = int(lost.sum()) + int(np.sum(ran > dep.deadline_s))
        out.append(
            ClassOutcome(
                model=name,
                priority=dep.priority,
                deadline_s=dep.deadline_s,
                requests=n,
                missed=missed,
                deadline_miss_rate=missed / n if n else 0.0,
                worst_latency_s=float(ran.max()) if ran.size else math.nan,
                p99_latency_s=float(np.percentile(ran, 99)) if ran.size else math.nan,
            )
        )
    return tuple(out)
