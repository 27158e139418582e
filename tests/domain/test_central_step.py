"""Spot outcomes at the central step time: the plan's spot and on-demand rows compare alike."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import RunStatistics, at_central_step
from gpucast.plan.uncertainty import strata


def test_a_time_linear_in_the_step_is_read_at_factor_one() -> None:
    # 11 strata of an uncalibrated band: the plain mean sits well above the central value
    factors = np.repeat(strata(0.33, 3.90), 40)
    rng = np.random.default_rng(0)
    hours = 0.5 + 4.0 * factors  # start-up plus work that scales with the step time
    assert float(np.mean(hours)) > 1.5 * 4.5
    assert at_central_step(hours, factors) == pytest.approx(4.5, rel=1e-9)
    noisy = hours + rng.normal(0.0, 0.3, hours.size)  # revocation noise around the line
    assert at_central_step(noisy, factors) == pytest.approx(4.5, abs=0.1)


def test_no_strata_unbounded_runs_and_empty_samples() -> None:
    assert at_central_step([1.0, 3.0], None) == 2.0
    assert at_central_step([1.0, 3.0], [1.0, 1.0]) == 2.0  # one stratum: the mean
    assert at_central_step([1.0, math.inf], [0.5, 2.0]) == math.inf  # a run never ends
    assert math.isnan(at_central_step([], None))


def test_the_central_mean_stays_within_the_runs() -> None:
    """QA session 39: ``make run`` printed ``optimistic scenario ... -0.000190 revocations``.
    Revocations are ~0 except in the slowest strata (convex in the factor): the line through
    the runs, read at 1, fell below every run. A mean lies within its runs' range."""
    factors = np.repeat(strata(0.33, 3.90), 40)
    revocations = np.where(factors > 5.0, 1.0, 0.0)  # the slowest stratum only
    slope, intercept = np.polyfit(factors, revocations, 1)
    assert intercept + slope < 0.0  # the line alone
    assert at_central_step(revocations, factors) == 0.0
    assert at_central_step(-revocations, factors) == 0.0  # and from above


def test_run_statistics_carry_their_strata() -> None:
    f = np.array([0.5, 1.0, 2.0, 0.5, 1.0, 2.0])
    runs = RunStatistics(duration_s=3600.0 * f, cost_usd=10.0 * f, revocations=np.zeros(6))
    assert not runs.stratified and "central" not in runs.summary()
    runs = RunStatistics(
        duration_s=3600.0 * f, cost_usd=10.0 * f, revocations=np.zeros(6), speed_factor=f
    )
    assert runs.stratified
    central = runs.summary()["central"]
    assert central == {"duration_s": pytest.approx(3600.0), "cost_usd": pytest.approx(10.0),
                       "duration_s_ci95_half": 0.0, "cost_usd_ci95_half": 0.0}  # fmt: skip
    with pytest.raises(InvalidSpecError, match="speed_factor"):
        RunStatistics(duration_s=f, cost_usd=f, revocations=np.zeros(6), speed_factor=f[:3])


def test_a_run_that_never_finishes_has_no_final_cost() -> None:
    """QA session 35: 8 V100 spot under the pessimistic scenario, 22.5% of runs never done:
    ``simulate train`` printed ``hours mean never`` beside ``cost US$ mean 967.45`` and a
    central ``US$ 775.72`` -- the bill up to the 30-day horizon, a lower bound, not a cost."""
    f = np.array([0.5, 1.0, 2.0, 0.5, 1.0, 2.0])
    runs = RunStatistics(
        duration_s=np.array([1.0, 2.0, math.inf, 1.0, 2.0, 4.0]) * 3600.0,
        cost_usd=10.0 * f,
        revocations=np.zeros(6),
        speed_factor=f,
    )
    assert runs.final_cost_usd.tolist() == [5.0, 10.0, math.inf, 5.0, 10.0, 20.0]
    out = runs.summary()
    assert out["cost_usd"]["mean"] == math.inf and out["cost_usd"]["p10"] == 5.0
    assert {k: out["central"][k] for k in ("duration_s", "cost_usd")} == {
        "duration_s": math.inf,
        "cost_usd": math.inf,
    }
    assert math.isnan(out["central"]["duration_s_ci95_half"])
    done = RunStatistics(duration_s=3600.0 * f, cost_usd=10.0 * f, revocations=np.zeros(6))
    assert done.final_cost_usd.tolist() == (10.0 * f).tolist()


def test_a_run_that_never_finishes_has_no_final_gpu_hours() -> None:
    """QA 35 E #17: 'GPU-hours mean 2,014' beside 'hours mean never' was the bill to the
    30-day horizon, as the cost was before (#3)."""
    d = np.array([1.0, math.inf, 2.0]) * 3600.0
    runs = RunStatistics(
        duration_s=d, cost_usd=np.ones(3), revocations=np.zeros(3), gpu_s=[7200.0, 9e6, 14400.0]
    )
    assert runs.final_gpu_s is not None
    assert runs.final_gpu_s.tolist() == [7200.0, math.inf, 14400.0]
    gpu_hours = dict(runs.summary()["gpu_hours"])
    assert math.isnan(gpu_hours.pop("mean_ci95_half"))  # no CI of an unbounded mean
    assert gpu_hours == {"mean": math.inf, "median": 4.0, "p10": 2.4, "p90": math.inf}
    untracked = RunStatistics(duration_s=d, cost_usd=np.ones(3), revocations=np.zeros(3))
    assert untracked.final_gpu_s is None and "gpu_hours" not in untracked.summary()
