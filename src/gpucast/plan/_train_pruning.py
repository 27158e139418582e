"""What a training search keeps of the passing rows (:func:`_worth_keeping`): the rows a
plan can still show, pick or simulate, with the first-order spot estimate that ranks
the spot rows (:func:`_spot_estimates`) and its caches. Split from
:mod:`gpucast.plan.train`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpucast.plan._train_context import BoolArray, FloatArray, IntArray, PlanContext
from gpucast.plan.evaluate import Evaluation, Work
from gpucast.plan.pareto import first_least, pareto_front_2d
from gpucast.plan.risk import WindowHazards, approx_spot_time_s
from gpucast.plan.space import PS, Space, market_twins
from gpucast.plan.spot_rows import hazards, mean_gaps


@dataclass
class _Pruning:
    """Per-offer caches of the spot pruning estimate (lifetimes, their window hazards,
    capacity gaps)."""

    lifetimes: dict[tuple[str, str, str], object] = field(default_factory=dict)
    windows: dict[int, WindowHazards] = field(default_factory=dict)
    gaps: dict[int, float] = field(default_factory=dict)


def _spot_estimates(
    space: Space,
    ev: Evaluation,
    ctx: PlanContext,
    rows: IntArray,
    cache: _Pruning,
    *,
    elastic: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """First-order (time, cost) of spot ``rows`` with revocations (the pruning estimate). An
    elastic synchronous row loses no work to a revocation: it pays the restart penalty and
    runs without the node for its capacity gap and start-up (``1 / nodes`` of its progress)."""
    hz = hazards(space, ctx, rows, ev.train_s[rows], cache.lifetimes, cache.windows)
    gaps = mean_gaps(space, ctx, rows, cache.gaps)
    approx_t = approx_spot_time_s(
        ev.train_s[rows],
        hz,
        checkpoint_s=ctx.risk.checkpoint_s(ctx.facts),
        restart_s=ctx.risk.restart_penalty_s + gaps,
        startup_s=ctx.risk.startup_mean_s,
    )
    if elastic:
        nodes = space.nodes[rows] + space.count2[rows]
        lost = ctx.risk.restart_penalty_s + (gaps + ctx.risk.startup_mean_s) / nodes
        flowing = ctx.risk.startup_mean_s + ev.train_s[rows] * (1.0 + hz * lost)
        approx_t = np.where(space.strategy[rows] != PS, flowing, approx_t)
    return approx_t, approx_t / 3600.0 * ev.usd_per_hour[rows]


def _worth_keeping(
    space: Space,
    ev: Evaluation,
    ok: BoolArray,
    ctx: PlanContext,
    work: Work,
    cache: _Pruning,
    *,
    elastic: bool = False,
    twin: IntArray | None = None,
) -> BoolArray:
    """The rows a plan can still show, pick or simulate, whatever the other chunks hold
    (see :func:`plan_training`): of the passing on-demand rows, the (time, cost) front, the
    cheapest of each GPU type (mixed: one type), the most goodput, the least energy and
    carbon; of the passing spot rows, the front of the pruning estimate. Then their twins in
    the other market (what "spot saves ..." compares with) and their siblings at every
    batch on the same hardware (what the batch choice lists)."""
    keep = np.zeros(len(space), dtype=bool)
    od = np.flatnonzero(ok & ~space.spot)
    if od.size:
        t = ev.time_s[od]
        c = _cost_or_gpu_hours(ctx, ev.cost_usd[od], ev.workers[od] * t)
        keep[od[pareto_front_2d(t, c)]] = True
        gpu_of = np.where(space.mixed[od], -1, space.offers.gpu[space.offer[od]])
        order = np.lexsort((c, gpu_of))  # stable: the first cheapest per type
        first = np.r_[True, gpu_of[order][1:] != gpu_of[order][:-1]]
        keep[od[order[first]]] = True
        good = ev.samples_per_s[od] * (work.samples_at_reference / ev.samples_needed[od])
        keep[od[first_least(-good, t, c)]] = True
        kwh = ev.workers[od] * ev.gpu_power_w[od] * ev.train_s[od] * ctx.pue / 3.6e6
        off = space.offers
        per_offer = np.array(
            [ctx.grid_gco2e_per_kwh.get(pr, np.nan)
             for pr in zip(off.provider, off.region, strict=True)],
            dtype=np.float64,
        )  # fmt: skip
        intensity = per_offer[space.offer[od]]
        for values in (kwh, kwh * intensity):
            known = np.flatnonzero(np.isfinite(values))
            if known.size:
                keep[od[known[first_least(values[known], c[known], t[known])]]] = True
    sp = np.flatnonzero(ok & space.spot)
    if sp.size:
        t, c = _spot_estimates(space, ev, ctx, sp, cache, elastic=elastic)
        keep[sp[pareto_front_2d(t, c)]] = True
    twin = market_twins(space) if twin is None else twin
    keep |= (twin >= 0) & keep[np.maximum(twin, 0)]
    if keep.any():  # every batch on a kept row's hardware, strategy and market
        key = np.stack([space.offer, space.nodes, space.part2, space.count2], axis=1)
        block = np.cumsum(np.r_[True, np.any(key[1:] != key[:-1], axis=1)])
        code = ((block * 8 + space.strategy) * (int(space.shards.max()) + 1) + space.shards) * 2
        code = code + space.spot
        hit = np.zeros(int(code.max()) + 1, dtype=bool)  # codes are small: a lookup table
        hit[code[keep]] = True
        keep |= hit[code]
    return keep


def _cost_or_gpu_hours(ctx: PlanContext, cost_usd: FloatArray, gpu_s: FloatArray) -> FloatArray:
    """What the front and 'cheapest' rank by: US$, or on a cluster without a price (every
    plan $0, where the $ front is one point and would drop the single-node layouts) the
    GPU-hours billed (``gpu_s`` / 3600), in the pruning and in the plan alike."""
    if ctx.cluster is not None and not ctx.cluster.priced:
        return gpu_s / 3600.0
    return cost_usd
