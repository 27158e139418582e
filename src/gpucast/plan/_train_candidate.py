"""One shown training plan (:func:`_candidate`): its parts, breakdown, notes and hints, the
other market's twin, the other spot scenario's outcome and the probe nodes it bills.
Split from :mod:`gpucast.plan.train`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from gpucast.domain.plan import PlanCandidate, TrainRequest, WorkerPart
from gpucast.plan._train_context import FloatArray, IntArray, PlanContext, SearchResult
from gpucast.plan.evaluate import BOTTLENECKS, memory_plan_name
from gpucast.plan.explain import explain
from gpucast.plan.hetero import SPLIT_EQUAL, SPLIT_LABELS
from gpucast.plan.risk import SpotOutcome
from gpucast.plan.space import PS, PS_SYNC, STRATEGY_LABELS
from gpucast.plan.spot_rows import part_offers, simulate_rows
from gpucast.predict.variability import PROBE_S


def _mc_noise(spot: SpotOutcome) -> str:
    """The Monte Carlo's own noise of a spot row's mean time and cost (95% CI half-widths,
    relative), or nothing where it is unknown."""
    t, c = spot.time_ci95_half_s, spot.cost_ci95_half_usd
    if not (math.isfinite(t) and math.isfinite(c) and spot.time_mean_s > 0 < spot.cost_mean_usd):
        return ""
    return (
        f"; the Monte Carlo's 95% CI +-{t / spot.time_mean_s:.1%} time, "
        f"+-{c / spot.cost_mean_usd:.1%} cost"
    )


def _probe_gpus(ctx: PlanContext, res: SearchResult, rows: IntArray) -> FloatArray:
    """GPUs of the nodes started beside each of ``rows`` to find and release the slowest
    (``exclude_slowest``; 0 elsewhere): billed, as their cost says, for the start-up and
    :data:`~gpucast.predict.variability.PROBE_S` (simulate train's on-demand GPU-seconds
    count them so)."""
    nodes = np.maximum(res.space.nodes[rows].astype(np.float64), 1.0)
    extra = ctx.perf.probe_nodes(nodes, res.space.strategy[rows] != PS)
    return np.asarray(extra * res.evaluation.workers[rows] / nodes, dtype=np.float64)


def _outcome(out: SpotOutcome) -> dict[str, float | None]:
    return {
        "time_s": out.time_mean_s,
        "time_p90_s": out.time_p90_s,
        "cost_usd": out.cost_mean_usd,
        "p_meet_deadline": out.p_meet_deadline,
        "revocations": out.revocations_mean,
        "moves": out.moves_mean,
    }


def _other_scenario(
    res: SearchResult,
    ctx: PlanContext,
    request: TrainRequest,
    shown: list[int],
    spot_out: dict[int, SpotOutcome],
) -> dict[int, dict[str, dict[str, float | None]]]:
    """For shown spot plans whose nodes rest on a documented scenario (no lifetime data),
    their outcome under the ranking scenario and under the other one (simulated here)."""
    risk = ctx.risk
    if risk.alternative is None or risk.on_scenario is None:
        return {}
    off = res.space.offers
    rows = []
    for i in shown:
        if i not in spot_out:
            continue
        parts = part_offers(res.space, i)
        if any(risk.on_scenario(off.gpu_name[o], off.region[o], off.provider[o]) for o, _ in parts):
            rows.append(i)
    if not rows:
        return {}
    name, other = risk.alternative
    alt_ctx = replace(ctx, risk=replace(risk, lifetime=other, alternative=None))
    # shown beside the ranking scenario, not ranked by: a quarter of the runs is enough
    alt_request = replace(request, mc_runs=max(200, request.mc_runs // 4))
    alt_out = simulate_rows(res, alt_ctx, alt_request, rows, {})
    return {i: {risk.scenario: _outcome(spot_out[i]), name: _outcome(alt_out[i])} for i in rows}


def _od_twins(res: SearchResult, rows: list[int]) -> dict[int, int | None]:
    """For each of ``rows``, the index of the same configuration in the other market."""
    space = res.space
    out: dict[int, int | None] = {}
    for r in rows:
        pool = np.flatnonzero((space.offer == space.offer[r]) & (space.nodes == space.nodes[r]))
        same = pool[
            (space.strategy[pool] == space.strategy[r])
            & (space.shards[pool] == space.shards[r])
            & (space.batch[pool] == space.batch[r])
            & (space.part2[pool] == space.part2[r])
            & (space.count2[pool] == space.count2[r])
            & (space.spot[pool] != space.spot[r])
        ]
        out[r] = int(same[0]) if same.size else None
    return out


def _candidate(
    res: SearchResult,
    ctx: PlanContext,
    request: TrainRequest,
    i: int,
    spot: SpotOutcome | None,
    twins: dict[int, int | None],
    twin_out: dict[int, SpotOutcome],
) -> PlanCandidate:
    space, ev = res.space, res.evaluation
    off = space.offers
    o = int(space.offer[i])
    gpus = int(ev.workers[i])
    time_s = float(ev.time_s[i])
    cost = float(ev.cost_usd[i])
    notes: list[str] = []
    p_meet = None if not math.isfinite(res.p_model[i]) else float(res.p_model[i])
    if spot is not None:
        time_s, cost = spot.time_mean_s, spot.cost_mean_usd
        p_meet = spot.p_meet_deadline
        notes.append(
            f"spot: {spot.runs} simulated runs, {spot.revocations_mean:.2f} revocations on "
            f"average, checkpoint every {spot.checkpoint_every_steps:,} steps; time and cost "
            f"are their mean at the central step time (as on demand{_mc_noise(spot)}), p90 and "
            "P(meet deadline) span the step time's interval too"
        )
        if spot.moved_to is not None:
            notes.append(
                f"managed recovery: a replacement that waited "
                f"{ctx.risk.move_after_s / 60:g} min for spot capacity is launched in "
                f"{spot.moved_to} ({spot.moves_mean or 0.0:.2f} moves per run on average)"
            )
    parts = []
    for k, (po, nodes) in enumerate(part_offers(space, i)):
        parts.append(
            WorkerPart(
                gpu=off.gpu_name[po],
                instance_type=off.instance_type[po],
                nodes=nodes,
                gpus=nodes * int(off.gpus_per_node[po]),
                per_worker_batch=int(ev.part_batch[i, k]),
                workers_with_one_more=int(ev.part_extra[i, k]),
                compute_s=float(ev.part_compute_s[i, k]),
            )
        )
    strategy = STRATEGY_LABELS[int(space.strategy[i])]
    if len(parts) > 1:
        if strategy == "ps":
            notes.append(
                f"asynchronous PS: every worker trains on {int(ev.batch[i])} samples per step"
            )
        else:
            split = ", ".join(
                f"{p.gpu} {p.per_worker_batch}"
                + (
                    f" ({p.workers_with_one_more} of them {p.per_worker_batch + 1})"
                    if p.workers_with_one_more
                    else ""
                )
                for p in parts
            )
            idle = 1.0 - min(p.compute_s for p in parts) / max(p.compute_s for p in parts)
            how = int(ev.batch_split[i])
            note = (
                f"per-worker batches {SPLIT_LABELS[how]}: {split}; global batch "
                f"{int(ev.global_batch[i]):,}; the worker done first waits {idle:.1%} of the "
                "step's compute"
            )
            if how != SPLIT_EQUAL:
                slow = max(parts, key=lambda p: p.compute_s / max(p.per_worker_batch, 1))
                note += (
                    f"; equal batches of {int(ev.batch[i])} would take "
                    f"{float(ev.equal_compute_s[i]) / float(ev.compute_s[i]):.2f}x the step "
                    f"compute (paced by the {slow.gpu} workers)"
                )
            notes.append(note)
    if ctx.cluster is not None and not ctx.cluster.priced:
        notes.append("no price given: cost shown as $0")
    # without a dataset size the work is samples (--steps, Nsamples@B): no epoch count exists
    size = res.work.dataset_size
    epochs = float(ev.samples_needed[i]) / size if size else None
    offload_s = float(ev.offload_s[i])  # the host side's own key, not compute (QA 39 O #15)
    breakdown = {
        "compute_s": float(ev.compute_s[i]) - offload_s,
        "offload_s": offload_s,
        "communication_s": float(ev.comm_s[i]),
        "exposed_communication_s": float(ev.exposed_s[i]),
        "step_s": float(ev.step_s[i]),
        "startup_s": float(ev.time_s[i] - ev.train_s[i]),
        "train_s": float(ev.train_s[i]),
        "evaluation_s": float(ev.eval_s[i]),
    }
    if space.strategy[i] in (PS, PS_SYNC):
        breakdown["ps_utilization"] = float(ev.ps_utilization[i])
    helps = explain(res, ctx, request, i, spot, twins, twin_out)
    return PlanCandidate(
        provider=off.provider[o],
        region=off.region[o],
        instance_type="+".join(p.instance_type for p in parts),
        gpu="+".join(p.gpu for p in parts),
        gpus=gpus,
        nodes=sum(p.nodes for p in parts),
        market="spot" if space.spot[i] else "on-demand",
        strategy=strategy,
        ps_shards=int(space.shards[i]) if space.strategy[i] in (PS, PS_SYNC) else 0,
        per_worker_batch=int(ev.batch[i]),
        global_batch=int(ev.global_batch[i]),
        epochs=epochs,
        steps=int(ev.steps[i]),
        step_time_s=float(ev.step_s[i]),
        time_s=time_s,
        time_lower_s=float(ev.time_lower_s[i]),
        # a spot row's interval reaches its p90 and its mean: a few very long runs (waits for
        # capacity) pull the mean above p90, and "4m [2m, 3m]" hid it (QA 39 O #12)
        time_upper_s=float(ev.time_upper_s[i])
        if spot is None
        else max(float(ev.time_upper_s[i]), spot.time_p90_s, time_s),
        cost_usd=cost,
        usd_per_hour=float(ev.usd_per_hour[i]),
        gpu_hours=(
            spot.gpu_hours_mean
            if spot is not None and spot.gpu_hours_mean is not None
            else (
                gpus * time_s
                + float(_probe_gpus(ctx, res, np.array([i]))[0])
                * (ctx.risk.startup_mean_s + PROBE_S)
            )
            / 3600.0
        ),
        bottleneck=BOTTLENECKS[int(ev.bottleneck[i])],
        breakdown_s=breakdown,
        time_p90_s=None if spot is None else spot.time_p90_s,
        cost_p90_usd=None if spot is None else spot.cost_p90_usd,
        p_meet_deadline=p_meet,
        mc_runs=0 if spot is None else spot.runs,
        activation_checkpointing=bool(ev.checkpointing[i]),
        memory_plan=memory_plan_name(
            int(space.strategy[i]),
            bool(ev.checkpointing[i]),
            bool(ev.offload[i]),
            bool(ev.params_offload[i]),
            bool(ev.nvme_offload[i]),
        ),
        host_memory_bytes=float(ev.host_bytes[i]) if ev.offload[i] else 0.0,
        parts=tuple(parts),
        help=tuple(helps),
        notes=tuple(notes),
        precision="+".join(dict.fromkeys(res.gpus.precision[res.gpus.index(p.gpu)] for p in parts)),
    )
