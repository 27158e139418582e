"""The Monte Carlo inputs of a plan's spot rows: each candidate as the simulator's job (its
parts, lifetimes, prices, delays, managed recovery), its progress by live nodes (full cluster;
PS workers; elastic jobs re-planning their batch) and the first-order hazards and capacity
gaps the pruning estimate uses. Split from :mod:`gpucast.plan.train`, which searches and
explains; pure: arrays in, values out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpucast.plan.evaluate import Evaluation, evaluate_like
from gpucast.plan.risk import (
    SpotDelays,
    SpotJob,
    SpotMove,
    SpotOutcome,
    SpotPart,
    WindowHazards,
    simulate_spots,
    spot_move,
)
from gpucast.plan.space import PS, PS_SYNC, STRATEGY_LABELS, Space
from gpucast.plan.uncertainty import strata

if TYPE_CHECKING:
    from gpucast.domain.plan import TrainRequest
    from gpucast.plan.train import PlanContext, SearchResult
    from gpucast.predict.revocation import LifetimeDistribution

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def row_key(space: Space, i: int, ev: Evaluation) -> str:
    off = space.offers
    o = int(space.offer[i])
    o2 = int(space.part2[i])
    second = "" if o2 < 0 else f"+{off.instance_type[o2]}|{int(space.count2[i])}"
    return (
        f"{off.provider[o]}|{off.region[o]}|{off.instance_type[o]}|{int(space.nodes[i])}"
        f"{second}|{'spot' if space.spot[i] else 'od'}|"
        f"{STRATEGY_LABELS[int(space.strategy[i])]}|{int(space.shards[i])}|{int(ev.batch[i])}"
    )


def speed_by_live_nodes(
    res: SearchResult, ctx: PlanContext, i: int, *, elastic: bool = False
) -> FloatArray:
    """Progress rate by live nodes, from the same vectorised model: synchronous plans
    ``[0, global steps/s]`` (full cluster only); asynchronous PS worker steps/s with 0..nodes
    live nodes (of each part for a mixed cluster: shape ``(nodes + 1, nodes2 + 1)``);
    synchronous ``elastic`` plans steps *of the planned job* per second with 0..nodes ready
    (:func:`_elastic_speed`)."""
    space, ev = res.space, res.evaluation
    if space.strategy[i] != PS and not elastic:
        return np.array([0.0, float(1.0 / ev.step_s[i])])
    nodes = int(space.nodes[i])
    nodes2 = int(space.count2[i])
    grid = np.array(
        [(a, b) for a in range(nodes + 1) for b in range(nodes2 + 1) if a + b > 0],
        dtype=np.int64,
    )
    a, b = grid[:, 0], grid[:, 1]
    o, o2 = int(space.offer[i]), int(space.part2[i])
    only_b = a == 0
    sub = space.take(np.full(grid.shape[0], i, dtype=np.int64)).replace(
        offer=np.where(only_b, o2, o).astype(np.int64),
        nodes=np.where(only_b, b, a).astype(np.int64),
        offer2=np.where((a > 0) & (b > 0), o2, -1).astype(np.int64),
        nodes2=np.where((a > 0) & (b > 0), b, 0).astype(np.int64),
    )

    def run(part: Space) -> Evaluation:
        return evaluate_like(part, res, ctx)

    table = np.zeros((nodes + 1, nodes2 + 1))
    if space.strategy[i] == PS:
        sub_ev = run(sub)
        table[a, b] = sub_ev.samples_per_s / np.maximum(sub_ev.batch, 1)
    else:
        table[a, b] = _elastic_speed(res, i, run(sub), run(_same_global(sub, ev, i)))
    return table if nodes2 else table[:, 0]


def _same_global(sub: Space, ev: Evaluation, i: int) -> Space:
    """``sub`` with the planned global batch split over its GPUs (per-worker batch 0)."""
    return Space(
        offers=sub.offers,
        offer=sub.offer,
        nodes=sub.nodes,
        spot=sub.spot,
        strategy=sub.strategy,
        shards=sub.shards,
        batch=np.zeros_like(sub.batch),
        global_batch=int(ev.global_batch[i]),
        offer2=sub.offer2,
        nodes2=sub.nodes2,
    )


def _elastic_speed(res: SearchResult, i: int, keep: Evaluation, same: Evaluation) -> FloatArray:
    """Per count of ready nodes, the progress of an elastic synchronous job in steps of the
    planned job per second (:mod:`gpucast.plan.elastic`, Pollux-style): the better of the
    planned per-GPU batch (global batch ``k b``) and the planned global batch split over the
    ready GPUs (where it fits), each at its samples to target."""
    planned = float(res.evaluation.samples_needed[i]) / float(res.evaluation.global_batch[i])

    def rate(e: Evaluation) -> FloatArray:
        ok = e.fits & e.valid_batch & (e.samples_per_s > 0) & (e.train_s > 0)
        r = planned / np.where(ok, e.train_s, 1.0)  # the whole run's pace, evaluations in
        return np.asarray(np.where(ok, r, 0.0), dtype=np.float64)

    return np.maximum(rate(keep), rate(same))


def lifetime_of(
    ctx: PlanContext, lifetimes: dict[tuple[str, str, str], object], key3: tuple[str, str, str]
) -> object:
    dist = lifetimes.get(key3)
    if dist is None:
        dist = ctx.risk.lifetime(*key3)
        lifetimes[key3] = dist
    return dist


def part_offers(space: Space, i: int) -> list[tuple[int, int]]:
    """(offer, nodes) of each part of row ``i``."""
    out = [(int(space.offer[i]), int(space.nodes[i]))]
    if space.part2[i] >= 0:
        out.append((int(space.part2[i]), int(space.count2[i])))
    return out


def _spot_job(
    res: SearchResult,
    ctx: PlanContext,
    request: TrainRequest,
    i: int,
    lifetimes: dict[tuple[str, str, str], object],
) -> SpotJob:
    space, ev = res.space, res.evaluation
    elastic = request.elastic and space.strategy[i] != PS
    off = space.offers
    o = int(space.offer[i])
    parts = []
    split = part_offers(space, i)
    for po, nodes in split:
        # one part: the job's GPUs over its nodes (a partial node uses fewer than it holds)
        gpn = int(ev.workers[i]) // nodes if len(split) == 1 else int(off.gpus_per_node[po])
        parts.append(
            SpotPart(
                instance_type=off.instance_type[po],
                nodes=nodes,
                gpus_per_node=max(gpn, 1),
                spot_usd_per_hour=float(off.spot_usd_per_hour[po]),
                on_demand_usd_per_hour=float(off.on_demand_usd_per_hour[po]),
                lifetime=lifetime_of(  # type: ignore[arg-type]
                    ctx, lifetimes, (off.gpu_name[po], off.region[po], off.provider[po])
                ),
            )
        )
    is_ps = space.strategy[i] in (PS, PS_SYNC)
    return SpotJob(
        key=row_key(space, i, ev),
        region=off.region[o],
        parts=tuple(parts),
        synchronous=bool(space.strategy[i] != PS),
        steps=int(ev.steps[i]),
        speed=speed_by_live_nodes(res, ctx, i, elastic=elastic),
        ps_shards=int(space.shards[i]) if is_ps else 0,
        cpu_usd_per_hour=float(np.nan_to_num(off.cpu_usd_per_hour[o])),
        deadline_s=request.deadline_s,
        expected_time_s=float(ev.time_s[i]),
        speed_factors=strata(float(ev.train_ratio_lower[i]), float(ev.train_ratio_upper[i])),
        elastic=elastic,
    )


def simulate_rows(
    res: SearchResult,
    ctx: PlanContext,
    request: TrainRequest,
    rows: Sequence[int],
    lifetimes: dict[tuple[str, str, str], object],
) -> dict[int, SpotOutcome]:
    """The Monte Carlo of spot ``rows``, all in one batch (:func:`simulate_spots`)."""
    off = res.space.offers
    candidates = []
    for i in rows:
        job = _spot_job(res, ctx, request, int(i), lifetimes)
        o = int(res.space.offer[int(i)])
        gpu, region, provider = off.gpu_name[o], off.region[o], off.provider[o]
        delays = SpotDelays(
            startup_spot_s=ctx.risk.startup_delay(gpu, "spot", region),
            startup_on_demand_s=ctx.risk.startup_delay(gpu, "on-demand", region),
            capacity_gap_s=ctx.risk.gap(gpu, region, provider),
            fallback_after_s=ctx.risk.fallback_after_s,
            move=_spot_move(ctx, job, gpu, region, provider, lifetimes),
        )
        candidates.append((job, delays))
    outcomes = simulate_spots(
        candidates,
        runs=request.mc_runs,
        seed=request.seed,
        checkpoint_s=ctx.risk.checkpoint_s(ctx.facts),
        restart_penalty_s=ctx.risk.restart_penalty_s,
    )
    probe = res.evaluation.probe_usd
    return {
        int(i): _with_probe(out, float(probe[int(i)]))
        for i, out in zip(rows, outcomes, strict=True)
    }


def _with_probe(out: SpotOutcome, probe_usd: float) -> SpotOutcome:
    """``out`` with the nodes started to drop the slowest billed (a fixed sum per run)."""
    if probe_usd <= 0:
        return out
    return replace(
        out,
        cost_mean_usd=out.cost_mean_usd + probe_usd,
        cost_p90_usd=out.cost_p90_usd + probe_usd,
    )


def _spot_move(
    ctx: PlanContext,
    job: SpotJob,
    gpu: str,
    region: str,
    provider: str,
    lifetimes: dict[tuple[str, str, str], object],
) -> SpotMove | None:
    """Where a single-instance-type candidate's replacements move (:func:`spot_move`);
    None: they stay (and a mixed cluster's always stay)."""
    if len(job.parts) != 1:
        return None

    def lifetime(*key3: str) -> LifetimeDistribution:
        return lifetime_of(ctx, lifetimes, key3)  # type: ignore[return-value,arg-type]

    return spot_move(ctx.risk, job.parts[0], gpu, region, provider, lifetime)


def hazards(
    space: Space,
    ctx: PlanContext,
    rows: IntArray,
    train_s: FloatArray,
    lifetimes: dict[tuple[str, str, str], object],
    windows: dict[int, WindowHazards],
) -> FloatArray:
    """Revocations per second of what rolls a job back over its run of ``train_s`` (the
    hazard its young nodes see: :class:`~gpucast.plan.risk.WindowHazards`): any node (sync;
    each replaced alone), the chief (PS). ``windows`` caches the table per offer."""
    off = space.offers
    offers_used = np.unique(np.concatenate([space.offer[rows], space.part2[rows]]))
    for o in offers_used[offers_used >= 0]:
        if int(o) not in windows:
            dist = lifetime_of(ctx, lifetimes, (off.gpu_name[o], off.region[o], off.provider[o]))
            windows[int(o)] = WindowHazards.of(dist)  # type: ignore[arg-type]

    def rate(offer: IntArray) -> FloatArray:
        out = np.zeros(offer.size)
        for o in np.unique(offer[offer >= 0]):
            at = offer == o
            out[at] = windows[int(o)](train_s[at])
        return out

    node_h = rate(space.offer[rows])
    node_h2 = rate(space.part2[rows])
    sync = space.strategy[rows] != PS
    return np.where(sync, node_h * space.nodes[rows] + node_h2 * space.count2[rows], node_h)


def mean_gaps(space: Space, ctx: PlanContext, rows: IntArray, gaps: dict[int, float]) -> FloatArray:
    """Mean capacity gap (s) a replacement of each row's nodes waits (for pruning only);
    ``gaps`` caches it per offer."""
    off = space.offers
    per_offer = np.zeros(len(off))
    for o in np.unique(space.offer[rows]):
        if int(o) in gaps:
            per_offer[int(o)] = gaps[int(o)]
            continue
        gap = ctx.risk.gap(off.gpu_name[o], off.region[o], off.provider[o])
        if callable(gap):
            per_offer[int(o)] = float(np.mean(gap(np.random.default_rng(0), 1000)))
        else:
            per_offer[int(o)] = float(gap)
        gaps[int(o)] = float(per_offer[int(o)])
    return np.asarray(per_offer[space.offer[rows]], dtype=np.float64)
