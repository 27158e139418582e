"""The refusals ``simulate train`` makes before and while it builds a simulation: a cluster or
run count whose Monte Carlo would not fit in memory, spot servers launched too many times
(see :mod:`gpucast.app._launches`), and a job that cannot finish within the simulated
horizon even at full speed. Each names the input to change. Used by
:mod:`gpucast.app._simulation_run`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import check_work
from gpucast.domain.units import format_duration

if TYPE_CHECKING:  # numpy: loaded when a simulation runs
    from collections.abc import Sequence

    from gpucast.app.simulation import SimulateTrainRequest
    from gpucast.domain.simulation import WorkerGroup


#: Estimated bytes of the Monte Carlo per (run, server) cell and per entry of the speed table.
_BYTES_PER_CELL = 64
_BYTES_PER_SPEED_ENTRY = 8


def _check_size(request: SimulateTrainRequest, groups: Sequence[WorkerGroup], ps: int) -> None:
    """Refuse a cluster or a run count whose simulation would not fit in memory, before the
    speed table (one entry per count of ready workers per group) or the runs are allocated."""
    entries = math.prod(g.count + 1 for g in groups)
    check_work(
        "workers",
        entries,
        what="speed-table entries (ready workers per GPU group)",
        bytes_per_item=_BYTES_PER_SPEED_ENTRY,
        allow_large=request.allow_large,
        fix="lower --workers (or the counts in --gpu)",
    )
    servers = sum(g.count for g in groups) + ps
    check_work(
        "runs",
        float(request.runs) * (servers + 2),
        what=f"Monte Carlo cells ({request.runs:,} runs x ({servers:,} servers + 2))",
        bytes_per_item=_BYTES_PER_CELL,
        allow_large=request.allow_large,
        fix="lower --runs (2000 gives percentiles within ~1%) or the cluster size",
    )


def _check_launches(
    request: SimulateTrainRequest,
    groups: Sequence[WorkerGroup],
    dists: Sequence[Any],
    lost_s: float,
    *,
    steps: int = 1,
    every_steps: int | None = None,
    steps_per_s: float = math.inf,
) -> None:
    """Refuse a run count and cluster whose spot servers would be launched too many times
    (see :mod:`gpucast.app._launches`); ``lost_s``: the time a rollback costs besides the
    lost steps. Before the step time is known (the default ``steps_per_s``) the estimate is
    a lower bound: one segment of no steps."""
    from gpucast.app._launches import check_launches, expected_run_s
    from gpucast.domain.simulation import HORIZON_S
    from gpucast.plan.risk import mean_lifetime_s

    hazards = [0.0 if d is None else 1.0 / max(mean_lifetime_s(d), 1.0) for d in dists]
    if not any(hazards):
        return
    counts = [g.count for g in groups]
    rollback = sum(c * h for c, h in zip(counts, hazards, strict=True))
    if request.strategy == "ps-async" or request.elastic:
        rollback = next(h for h in hazards if h > 0)  # the chief's node, as for Young's
    every = every_steps or steps
    horizon_s = HORIZON_S
    run_s = expected_run_s(
        segments=steps / every, segment_s=every / steps_per_s, lost_per_rollback_s=lost_s,
        rollback_per_s=rollback, horizon_s=horizon_s,
    )  # fmt: skip
    check_launches(
        runs=request.runs, counts=counts, hazards_per_s=hazards, rollback_per_s=rollback,
        run_s=run_s, horizon_s=horizon_s, allow_large=request.allow_large,
    )  # fmt: skip


def _check_finishes(
    steps: int,
    fastest_steps_per_s: float,
    steps_per_s: float,
    horizon_s: float,
    nodes: int,
) -> None:
    """Refuse a job that cannot finish within the simulated horizon even at the cluster's
    full speed, nothing revoked (every run would report "never"): name the input."""
    best_s = steps / fastest_steps_per_s if fastest_steps_per_s > 0 else math.inf
    if best_s <= horizon_s:
        return
    raise InvalidSpecError(
        "steps",
        f"{steps:,} steps at {steps_per_s:.3g} steps/s (all {nodes} nodes up, nothing "
        f"revoked) take {format_duration(best_s)}, beyond the {horizon_s / 86400:g}-day "
        "horizon the simulation runs to",
        fix="lower --steps or --target (or --batch-size), or use more or faster GPUs",
    )
