""" "What would help": each shown candidate re-evaluated with one thing changed.

Every hint is a what-if through the same vectorised model (:func:`gpucast.plan.evaluate.
evaluate` on a few rows), so its number is the model's, not a rule of thumb:

* parameter server bound: one more PS shard (step-time change);
* node NIC bound (PS): the same GPUs on more, smaller nodes or a faster network;
* all-reduce / FSDP bound across nodes: the same GPU on an NVLink instance with enough GPUs
  per node (or a larger-NIC instance) of the same provider;
* fits only with activation checkpointing: its cost (+33% compute) and the way out;
* a global batch above the critical batch: the extra epochs it costs, and what half the
  per-worker batch would save in GPU-hours;
* market: on demand -> "spot saves X% at Y% risk of missing the deadline" (from the
  simulated spot twin); spot -> what on demand would cost more, and its P(meet deadline)
  (both include the step-time model's own uncertainty).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from gpucast.domain.units import format_duration
from gpucast.plan.evaluate import BOTTLENECKS, evaluate_like
from gpucast.plan.space import PS, PS_SYNC
from gpucast.plan.uncertainty import SPOT_STRATA

if TYPE_CHECKING:
    from gpucast.domain.plan import TrainRequest
    from gpucast.plan.risk import SpotOutcome
    from gpucast.plan.train import PlanContext, SearchResult

#: Hints below this change are not worth a line.
MIN_GAIN = 0.05


def _pct(new: float, old: float) -> str:
    if old == 0.0:  # a cluster without a price costs nothing either way
        return "+0%" if new == 0.0 else f"{new - old:+,.2f} US$"
    return f"{100.0 * (new / old - 1.0):+.0f}%"


def spot_verdict(saving: float) -> str:
    """What spot does to an on-demand plan's cost: revocations (restarts, lost work, capacity
    gaps) and another cloud's prices can make it dearer, said as such, never "saves -43%";
    where some spot runs never finish it has no final cost to compare."""
    if not math.isfinite(saving):
        return "spot has no final cost (some runs never finish)"
    return f"spot saves {saving:.0%}" if saving >= 0 else f"spot costs {-saving:+.0%} more"


def explain(
    res: SearchResult,
    ctx: PlanContext,
    request: TrainRequest,
    i: int,
    spot: SpotOutcome | None,
    twins: dict[int, int | None],
    twin_out: dict[int, SpotOutcome],
) -> list[str]:
    space, ev = res.space, res.evaluation
    bottleneck = BOTTLENECKS[int(ev.bottleneck[i])]
    hints: list[str] = []

    def what_if(**cols: np.ndarray) -> tuple[float, float, float]:
        sub = space.take(np.array([i])).replace(**cols)
        e = evaluate_like(sub, res, ctx)
        ok = bool(e.fits[0] and e.valid_batch[0])
        return (float(e.step_s[0]) if ok else np.inf, float(e.time_s[0]), float(e.cost_usd[0]))

    step = float(ev.step_s[i])
    if space.strategy[i] in (PS, PS_SYNC) and bottleneck in ("ps_network", "ps_cpu"):
        shards = int(space.shards[i])
        new_step, _, new_cost = what_if(shards=np.array([shards + 1]))
        if new_step < step * (1 - MIN_GAIN):
            hints.append(
                f"add a PS shard ({shards + 1} shards): {_pct(new_step, step)} step time, "
                f"{_pct(new_cost, float(ev.cost_usd[i]))} cost"
            )
    if bottleneck == "worker_network":
        hints.append(
            "the node NIC carries every worker's gradients to the PS: spread the GPUs over "
            "more, smaller instances or use DDP"
        )
    if bottleneck in ("allreduce", "fsdp_comm") and space.nodes[i] > 1 and not space.mixed[i]:
        hints.extend(_better_node(res, ctx, i, step))
    if ev.checkpointing[i]:
        hints.append(
            "fits only with activation checkpointing (+33% compute): a GPU with more memory, "
            "FSDP or a smaller per-worker batch avoids it"
        )
    gb = float(ev.global_batch[i])
    crit = res.work.critical_batch
    if gb > crit / 4:
        ref = np.array([res.work.reference_batch, gb])
        at_ref, at_gb = (float(x) for x in res.work.samples_needed(ref))
        extra = at_gb / at_ref
        line = (
            f"global batch {gb:,.0f} needs {extra:.2f}x the reference epochs (B_crit {crit:,.0f})"
        )
        if request.batch_size is None and request.global_batch is None and ev.batch[i] > 1:
            half = np.array([max(int(ev.batch[i]) // 2, 1)])
            new_step, new_time, new_cost = what_if(batch=half)
            if np.isfinite(new_step) and new_cost < float(ev.cost_usd[i]) * (1 - MIN_GAIN):
                line += (
                    f"; per-worker batch {int(half[0])} would cost "
                    f"{_pct(new_cost, float(ev.cost_usd[i]))} and take "
                    f"{_pct(new_time, float(ev.time_s[i]))} time"
                )
        hints.append(line)
    twin = twins.get(i)
    if spot is None and twin is not None and twin in twin_out:
        out = twin_out[twin]
        od_usd = float(ev.cost_usd[i])
        saving = 1.0 - out.cost_mean_usd / od_usd if od_usd > 0 else 0.0
        verdict = spot_verdict(saving)
        if request.deadline_s is not None and out.p_meet_deadline is not None:
            risk = 1.0 - out.p_meet_deadline
            hints.append(
                f"{verdict} at {risk:.1%} risk of missing the deadline "
                f"(p90 {format_duration(out.time_p90_s)})"
            )
        else:
            hints.append(f"{verdict} (p90 {format_duration(out.time_p90_s)})")
    elif spot is not None and twin is not None:
        od_cost = float(ev.cost_usd[twin])
        extra_cost = od_cost / spot.cost_mean_usd - 1.0 if spot.cost_mean_usd > 0 else 0.0
        line = (
            f"on demand costs {extra_cost:+.0%}"
            if math.isfinite(spot.cost_mean_usd)
            else "on demand finishes, where some spot runs never do"
        )
        od_p = float(res.p_model[twin])
        if (
            spot.p_meet_deadline is not None
            and np.isfinite(od_p)
            and abs(od_p - spot.p_meet_deadline) >= 0.001
        ):
            line += (
                f" and meets the deadline with P {od_p:.1%} instead of "
                f"{spot.p_meet_deadline:.1%} (no revocations; over the step-time interval's "
                f"whole tail, where the spot figure and simulate train draw {SPOT_STRATA} "
                "equally likely strata of it)"
            )
        hints.append(line)
    return hints


def _better_node(res: SearchResult, ctx: PlanContext, i: int, step: float) -> list[str]:
    """Same GPU and worker count on other instance types of the same provider and region."""
    space, ev = res.space, res.evaluation
    off = space.offers
    o = int(space.offer[i])
    n = int(ev.workers[i])
    alt = [
        a
        for a in range(len(off))
        if a != o
        and off.gpu_name[a] == off.gpu_name[o]
        and off.provider[a] == off.provider[o]
        and off.region[a] == off.region[o]
        and n % int(off.gpus_per_node[a]) == 0
        and (off.max_nodes is None or n // int(off.gpus_per_node[a]) <= int(off.max_nodes[a]))
    ]
    if not alt:
        return []
    idx = np.full(len(alt), i)
    sub = space.take(idx).replace(
        offer=np.array(alt, dtype=np.int64),
        nodes=np.array([n // int(off.gpus_per_node[a]) for a in alt], dtype=np.int64),
    )
    e = evaluate_like(sub, res, ctx)
    steps = np.where(e.fits & e.valid_batch, e.step_s, np.inf)
    best = int(np.argmin(steps))
    if not steps[best] < step * (1 - MIN_GAIN):
        return []
    a = alt[best]
    nodes = n // int(off.gpus_per_node[a])
    link = (
        "NVLink"
        if res.gpus.nvlink[off.gpu[a]] and nodes == 1
        else f"{off.network_gbps[a]:g} Gbit/s"
    )
    return [
        f"move to {nodes} x {off.instance_type[a]} ({link}): {_pct(float(steps[best]), step)} "
        f"step time, {_pct(float(e.cost_usd[best]), float(ev.cost_usd[i]))} cost"
    ]
