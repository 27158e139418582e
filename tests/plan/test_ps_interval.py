"""A parameter-server row's interval is its model run at the ends of the step-time interval.

The planner reads each row's interval as the 10th-90th percentiles of the run's speed factor
(:mod:`gpucast.plan.uncertainty`). A PS row's step is a queueing network around the worker's
compute, so the interval is that network solved with the compute at the roofline interval's
ends and the PS stations at the PS model's residual quantiles -- the same evaluation with
slower (faster) GPUs and a slower (faster) PS, which these tests run as the oracle.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from plan_factories import context, request

from gpucast.plan.evaluate import Evaluation, evaluate
from gpucast.plan.inputs import GpuTable, PerfParams
from gpucast.plan.space import PS
from gpucast.plan.train import PlanContext, SearchResult, search

#: an uncalibrated roofline's interval on a new code base (x0.33-3.90)
WIDE = (0.33, 3.9)


def _ps_search(*, mixed: bool) -> tuple[PlanContext, SearchResult, GpuTable, Evaluation]:
    """PS rows on the synthetic catalog (half of them bound by its small CPU server), and
    their evaluation with the :data:`WIDE` step-time interval."""
    ctx = context()
    req = request(
        strategies=("ps",), allow_spot=False, providers=("aws",), max_ps_shards=2,
        deadline_s=None, allow_mixed=mixed,
    )  # fmt: skip
    res = search(req, ctx)
    ones = np.ones(len(res.gpus.names))
    gpus = replace(res.gpus, lower_ratio=WIDE[0] * ones, upper_ratio=WIDE[1] * ones)
    return ctx, res, gpus, _evaluate(ctx, res, gpus, ctx.perf)


def _evaluate(ctx: PlanContext, res: SearchResult, gpus: GpuTable, perf: PerfParams) -> Evaluation:
    return evaluate(
        res.space, facts=ctx.facts, gpus=gpus, params=perf, work=res.work,
        startup_s=ctx.risk.startup_mean_s,
    )  # fmt: skip


def _at_end(ctx: PlanContext, res: SearchResult, gpus: GpuTable, *, slow: bool) -> Evaluation:
    """The whole space evaluated with every GPU at its interval's end and the PS's stations
    and NICs at the PS model's residual quantile on the same side."""
    perf = ctx.perf
    ratio = gpus.upper_ratio if slow else gpus.lower_ratio
    ps = math.exp(-(perf.ps_log_residual_q10 if slow else perf.ps_log_residual_q90))
    scaled = replace(
        gpus, fixed_s=gpus.fixed_s * ratio[:, None], per_sample_s=gpus.per_sample_s * ratio[:, None]
    )
    params = replace(
        perf,
        ps_network_efficiency=perf.ps_network_efficiency / ps,
        ps_per_tensor_cost_s=perf.ps_per_tensor_cost_s * ps,
    )
    return _evaluate(ctx, res, scaled, params)


@pytest.mark.parametrize("mixed", [False, True])
def test_a_ps_rows_interval_is_the_model_at_the_intervals_ends(mixed: bool) -> None:
    ctx, res, gpus, ev = _ps_search(mixed=mixed)
    space = res.space
    rows = (space.strategy == PS) & ev.fits & ev.has_cpu & np.isfinite(ev.train_s)
    if mixed:
        rows &= space.mixed
    assert rows.sum() > 20
    slow, fast = _at_end(ctx, res, gpus, slow=True), _at_end(ctx, res, gpus, slow=False)
    np.testing.assert_allclose(
        ev.train_ratio_upper[rows], slow.train_s[rows] / ev.train_s[rows], rtol=1e-9
    )
    np.testing.assert_allclose(
        ev.train_ratio_lower[rows], fast.train_s[rows] / ev.train_s[rows], rtol=1e-9
    )
    # PS-bound rows: a faster GPU gains them little, a slower one costs them much (the PS
    # no longer hides it) -- not the PS model's +-8% alone
    bound = rows & (ev.ps_utilization >= ctx.perf.ps_bottleneck_utilization)
    assert bound.sum() > 10
    assert np.all(ev.train_ratio_lower[bound] > 0.75)  # far from the GPU's x0.33
    assert np.all(ev.train_ratio_upper[bound] <= WIDE[1] * 1.01)
    assert np.median(ev.train_ratio_upper[bound]) > 1.2
    assert np.max(ev.train_ratio_upper[bound]) > 2.0


def test_exposed_communication_never_exceeds_the_communication() -> None:
    ctx = context(gradient_bytes=2e9, weights_bytes=2e8)
    res = search(request(allow_spot=False, deadline_s=None, max_ps_shards=2, allow_mixed=True), ctx)
    ev = res.evaluation
    rows = ev.fits & np.isfinite(ev.step_s)
    assert (res.space.strategy[rows] == PS).any() and (res.space.strategy[rows] != PS).any()
    assert np.all(ev.exposed_s[rows] <= ev.comm_s[rows] * (1 + 1e-12))
    # an asynchronous PS hides nothing under compute: its step is compute + communication
    ps = rows & (res.space.strategy == PS) & ~res.space.mixed
    np.testing.assert_allclose(ev.compute_s[ps] + ev.comm_s[ps], ev.step_s[ps], rtol=1e-12)
