"""No feasible training plan: the error naming the constraint that excludes the plans and
how to relax it (:func:`_no_plan`), and the fixes and messages ``plan llm-train`` shares.
Split from :mod:`gpucast.plan.train`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from gpucast.domain.errors import NoFeasiblePlanError
from gpucast.domain.options import is_default
from gpucast.domain.plan import TrainRequest
from gpucast.domain.units import GIB
from gpucast.plan._train_context import (
    R_BUDGET,
    R_DEADLINE,
    R_HOST_MEMORY,
    R_MEMORY,
    R_RISK,
    RELAX,
    PlanContext,
    SearchResult,
    Unkept,
    _host_extremes,
    _limits,
)
from gpucast.plan.infeasible import binding, budget_flag
from gpucast.plan.risk import SpotOutcome


def _batch_flag(request: TrainRequest) -> str:
    """The flag that set the batches searched."""
    if request.global_batch is not None:
        return "--global-batch"
    return "--batch-size" if request.batch_size is not None else "--batch-sizes"


def _no_plan(
    request: TrainRequest,
    ctx: PlanContext,
    res: SearchResult,
    counts: dict[str, int],
    spot_out: dict[int, SpotOutcome],
) -> NoFeasiblePlanError:
    worst = max(counts, key=lambda k: counts[k])
    ev, reason = res.evaluation, res.reason
    gone = res.unkept or Unkept()  # extremes over the rows a compact search let go
    fix = RELAX.get(worst, "relax the constraints")
    physical = np.isin(reason, ["", R_DEADLINE, R_BUDGET, R_RISK])
    # what stopped the rows searched: those never generated (--max-gpus) out-count them
    # easily, and their message would hide the memory that stopped every searched instance
    searched = {k: n - res.dropped.get(k, 0) for k, n in counts.items()}
    inner = max(searched, key=lambda k: searched[k]) if any(searched.values()) else worst
    if inner == R_MEMORY and not ((ev.fits & ev.has_market).any() or gone.any_fits_market):
        need = min(float(np.min(ev.mem_bytes, initial=math.inf)), gone.min_mem_bytes) / GIB
        most = float(np.max(res.gpus.usable_bytes)) / GIB
        return NoFeasiblePlanError(
            f"{request.workload} fits no GPU with any strategy: the smallest need is "
            f"{need:.1f} GiB per GPU, the largest usable is {most:.1f} GiB",
            # the flag the batch came from (QA 39 Y #17: --batch-sizes 65536 read "--batch-size")
            fix=f"use a smaller {_batch_flag(request)}, more GPUs for FSDP (--max-gpus) or "
            "larger GPUs",
        )
    if inner == R_HOST_MEMORY and not ((ev.fits & ev.has_market).any() or gone.any_fits_market):
        here = _host_extremes(res.space, ev, np.ones(len(res.space), dtype=bool))
        need = min(here[0], gone.min_host_need_bytes) / GIB
        have = max(here[1], gone.max_host_bytes) / GIB
        return NoFeasiblePlanError(
            f"{request.workload} fits in GPU memory only with its optimizer state (or also its "
            "parameters) in host memory (ZeRO-Offload / ZeRO-Infinity)"
            + ("" if request.nvme_gbps is None else ", or on NVMe with the gradients in it")
            + f", which needs at least {need:.1f} GiB per GPU; the offers "
            f"have at most {have:.1f} GiB per GPU",
            fix="raise --max-gpus (the host state is partitioned over the GPUs), pick "
            "instances with more memory per GPU"
            + (
                ""
                if request.nvme_gbps is not None
                else ", or give --nvme-gbps (the node's "
                "local NVMe holds the optimizer state, ZeRO-Infinity)"
            ),
        )
    everything = np.ones(len(res.space), dtype=bool)
    limits = _limits(request, ctx, res.space, ev, reason, everything, spot_out).merge(gone.limits)
    binds = binding(
        limits,
        deadline_s=request.deadline_s,
        budget_usd=request.budget_usd,
        min_p_meet=request.min_p_meet,
        deadline_default=is_default(request, "deadline_s"),
    )
    if binds is not None:
        return binding_error(binds, counts)
    fastest = limits.fastest_s
    if worst == R_DEADLINE and math.isfinite(fastest):
        fix = deadline_fix(fastest)
    elif worst == R_BUDGET:
        cheapest = limits.cheapest_on_time_usd
        if math.isfinite(cheapest):
            fix = budget_fix(cheapest)
    elif worst == R_RISK:
        p = [s.p_meet_deadline or 0.0 for s in spot_out.values()]
        od = physical & ~res.space.spot & np.isfinite(res.p_model)
        if od.any():
            p.append(float(np.max(res.p_model[od])))
        if math.isfinite(gone.best_p_on_demand):
            p.append(gone.best_p_on_demand)
        if p:
            fix = (
                f"the best plan meets the deadline with p={max(p):.2f} (revocations and the "
                f"step-time model's interval): lower --min-p-meet, relax --deadline or "
                "calibrate the model with a stored measurement (gpucast measure train)"
            )
    return no_plan_error(counts, fix=fix)


def deadline_fix(fastest_s: float, *, plan: str = "", more: str = "raise --max-gpus") -> str:
    """What a plan that no candidate meets the deadline of says to do: the fastest candidate's
    time (``plan``: which one it is) and the deadline that it would meet."""
    named = f" ({plan})" if plan else ""
    return (
        f"the fastest plan takes {fastest_s / 3600:.1f} h{named}: relax --deadline to at least "
        f"{math.ceil(fastest_s / 3600)}h or {more}"
    )


def budget_fix(cheapest_usd: float, *, plan: str = "") -> str:
    """What a plan that no candidate meets the budget of says to do: the cost of the cheapest
    candidate that meets the deadline (``plan``: which one it is), in cents, and a ``--budget``
    rounded up from it (whole dollars named a figure below the cost, QA 39 F8 #1)."""
    named = f" ({plan})" if plan else ""
    return (
        f"the cheapest plan costs ${cheapest_usd:,.2f}{named}: raise --budget to at least "
        f"{budget_flag(cheapest_usd)}"
    )


def binding_error(binds: tuple[str, str], counts: Mapping[str, int]) -> NoFeasiblePlanError:
    """No candidate is feasible and :func:`~gpucast.plan.infeasible.binding` told which limit
    excludes the plans (``binds``: what, how to relax it); ``counts``: candidates by reason."""
    what, fix = binds
    worst = max(counts, key=lambda k: counts[k])
    return NoFeasiblePlanError(
        f"no feasible plan: {what} ('{worst}' cut the most candidates: "
        f"{counts[worst]:,} of {sum(counts.values()):,})",
        fix=fix,
    )


def no_plan_error(counts: Mapping[str, int], *, fix: str) -> NoFeasiblePlanError:
    """No candidate is feasible: the reason that cut the most of them (``counts``: candidates
    by reason), and ``fix``."""
    worst = max(counts, key=lambda k: counts[k])
    return NoFeasiblePlanError(
        f"no feasible plan: '{worst}' cut the most candidates ({counts[worst]:,} of "
        f"{sum(counts.values()):,})",
        fix=fix,
    )
