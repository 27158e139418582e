"""The Monte Carlo mean's 95% CI (QA 39 K #6): stratified over the step-time factor."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from gpucast.domain.simulation import (
    ClusterScenario,
    PriceTable,
    RunStatistics,
    WorkerGroup,
    mean_ci95_half,
)
from gpucast.plan.uncertainty import strata
from gpucast.predict.revocation import ExponentialLifetime
from gpucast.simulate.transient import SpeedTable, simulate_scenario

FACTORS = strata(0.5, 2.0, 5)
PRICES = PriceTable(
    usd_per_hour={("K80", "spot"): 0.25, ("K80", "on-demand"): 0.75, ("cpu-ps", "on-demand"): 0.15}
)


#: 4 spot K80 workers revoked at 1.5/h, replaced, over 5 strata of the step time
SCENARIO = ClusterScenario(
    workers=(WorkerGroup(gpu="K80", count=4, region="us-east1", spot=True),),
    steps=20_000,
    checkpoint_every_steps=2_000,
    replace_revoked=True,
)
JOB: dict[str, Any] = {
    "speed": SpeedTable.linear([2.0], [4]),
    "prices": PRICES,
    "lifetimes": [ExponentialLifetime(hazard_per_hour=1.5)],
    "startup_spot_s": 80.0,
    "startup_on_demand_s": 60.0,
    "checkpoint_s": 3.0,
    "restart_penalty_s": 100.0,
    "speed_factors": FACTORS,
}


def _runs(runs: int, seed: int) -> RunStatistics:
    return simulate_scenario(SCENARIO, runs=runs, seed=seed, **JOB).transient


def test_the_ci_shrinks_as_one_over_root_runs_and_covers_a_long_runs_mean() -> None:
    long = _runs(4000, seed=1000)
    truth = {"plain": float(np.mean(long.duration_s)), "central": long.central(long.duration_s)}
    covered = {"plain": 0, "central": 0}
    widths: dict[int, list[float]] = {40: [], 160: []}
    for seed in range(60):
        short = _runs(40, seed)
        plain = short.summary_of(short.duration_s)
        central_half = short.central_ci95_half(short.duration_s)
        widths[40].append(plain.mean_ci95_half)
        covered["plain"] += abs(plain.mean - truth["plain"]) <= plain.mean_ci95_half
        covered["central"] += abs(short.central(short.duration_s) - truth["central"]) <= (
            central_half
        )
    for seed in range(5):
        more = _runs(160, 100 + seed)
        widths[160].append(more.summary_of(more.duration_s).mean_ci95_half)
    # 4x the runs: half the width (the estimate's own noise allows +-25%)
    assert float(np.mean(widths[40])) / float(np.mean(widths[160])) == pytest.approx(2.0, rel=0.25)
    # a 95% CI of the long run's mean (itself noisy by ~1/10 of the short CI): 92-93% of
    # 100 seeds (8 skewed runs a stratum: a little under 95%); >= 51 of these 60
    assert covered["plain"] >= 51 and covered["central"] >= 51
    # the strata's spread is design, not noise: the naive s / sqrt(n) overstates the CI
    short = _runs(40, 0)
    naive = 1.96 * float(np.std(short.duration_s, ddof=1)) / math.sqrt(40)
    assert short.summary_of(short.duration_s).mean_ci95_half < 0.5 * naive


def test_the_formulae_without_strata_with_one_run_per_stratum_and_never_ending_runs() -> None:
    x = np.array([1.0, 2.0, 3.0, 6.0])
    assert mean_ci95_half(x) == pytest.approx(1.959964 * np.std(x, ddof=1) / 2.0, rel=1e-6)
    # stratified, plain mean: sqrt(sum (n_h / n)^2 s_h^2 / n_h)
    f = np.array([0.5, 0.5, 2.0, 2.0])
    want = 1.959964 * math.sqrt(0.25 * 0.5 / 2 + 0.25 * 4.5 / 2)
    assert mean_ci95_half(x, f) == pytest.approx(want, rel=1e-6)
    # the central read: the line through both strata at 1 weighs them 2/3 and 1/3
    want = 1.959964 * math.sqrt((2 / 3) ** 2 * 0.5 / 2 + (1 / 3) ** 2 * 4.5 / 2)
    assert mean_ci95_half(x, f, central=True) == pytest.approx(want, rel=1e-6)
    assert math.isnan(mean_ci95_half(x, [0.5, 1.0, 2.0, 2.0]))  # a stratum of one run
    assert math.isnan(mean_ci95_half([1.0, math.inf]))
    assert math.isnan(mean_ci95_half([1.0]))
