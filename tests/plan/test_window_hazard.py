"""Young's interval takes the hazard the spot lifetimes give over the job's run
(``plan.risk.window_hazard_per_s``), not the long-run ``1 / mean lifetime``: with a Weibull
shape below 1 (GCE's K80 fit: 0.49) young nodes go first, and a one-hour job on them was
given no checkpoint while a quarter of its runs lost a node (QA 37 T #5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpucast.plan.risk import mean_lifetime_s, window_hazard_per_s, young_interval_s
from gpucast.predict.revocation import ExponentialLifetime, WeibullLifetime

HOUR = 3600.0


def _weibull_expected_renewals(scale_s: float, shape: float, horizon_s: float) -> float:
    """E[N(horizon)] of the renewal process, by a direct simulation independent of the code
    under test (a loop of fresh lifetimes)."""
    rng = np.random.default_rng(7)
    total = 0
    for _ in range(20_000):
        t = scale_s * rng.weibull(shape)
        while t <= horizon_s:
            total += 1
            t += scale_s * rng.weibull(shape)
    return total / 20_000


def test_a_constant_hazard_is_its_own_window_rate() -> None:
    life = ExponentialLifetime(hazard_per_hour=0.5)
    assert window_hazard_per_s(life, 2 * HOUR) == pytest.approx(0.5 / HOUR, rel=0.05)
    assert window_hazard_per_s(ExponentialLifetime(hazard_per_hour=0.0), HOUR) == 0.0


@pytest.mark.parametrize(("shape", "above"), [(0.49, True), (3.0, False)])
def test_a_weibull_window_rate_is_the_renewal_count_over_the_run(shape: float, above: bool) -> None:
    scale = 260.2 * HOUR if shape < 1 else 10 * HOUR
    life = WeibullLifetime(scale_s=scale, shape=shape, cap_s=None)
    horizon = HOUR if shape < 1 else 5 * HOUR
    rate = window_hazard_per_s(life, horizon)
    expected = _weibull_expected_renewals(scale, shape, horizon) / horizon
    assert rate == pytest.approx(expected, rel=0.15)
    long_run = 1.0 / mean_lifetime_s(life)
    assert (rate > 10 * long_run) if above else (rate < long_run)


def test_the_k80_fit_checkpoints_a_one_hour_job_every_few_minutes_not_never() -> None:
    life = WeibullLifetime(scale_s=260.2 * HOUR, shape=0.49, cap_s=None)
    long_run = young_interval_s(3.72, 1.0 / mean_lifetime_s(life))
    windowed = young_interval_s(3.72, window_hazard_per_s(life, HOUR))
    assert long_run > HOUR > 5 * windowed  # ~62 min (no checkpoint in a 60 min job) vs ~11
    assert window_hazard_per_s(life, math.inf) == pytest.approx(1.0 / mean_lifetime_s(life))


def test_a_busy_cluster_is_counted_past_64_revocations() -> None:
    """A draw held 64 lifetimes at most: a cluster revoked ~100 times over its run (8 nodes
    of the pessimistic market over 15 h) was counted 64 times, a longer interval than due."""
    scale, shape, horizon = 0.1 * HOUR, 0.8, 10 * HOUR  # ~110 renewals over the run
    life = WeibullLifetime(scale_s=scale, shape=shape, cap_s=None)
    expected = _weibull_expected_renewals(scale, shape, horizon) / horizon
    assert expected * horizon > 64
    assert window_hazard_per_s(life, horizon) == pytest.approx(expected, rel=0.05)


def test_a_synchronous_spot_cluster_replaces_a_revoked_node_alone() -> None:
    """`plan train`'s Monte Carlo simulated a synchronous cluster as one server whose lifetime
    was the first of its nodes', so each replacement restarted every node's clock: with the
    K80 fit (young nodes go first) a 16-node job saw several times the revocations its nodes
    give when each revoked node is replaced alone and its survivors keep their age."""
    from gpucast.plan.risk import SpotDelays, SpotJob, SpotPart, simulate_spots

    scale, shape, nodes, run_s = 260.2 * HOUR, 0.49, 16, 4 * HOUR
    life = WeibullLifetime(scale_s=scale, shape=shape, cap_s=None)
    part = SpotPart(
        instance_type="n1-standard-8+4xK80", nodes=nodes, spot_usd_per_hour=1.0,
        on_demand_usd_per_hour=3.0, lifetime=life, gpus_per_node=4,
    )  # fmt: skip
    job = SpotJob(
        key="k80x16", region="us-east1", parts=(part,), synchronous=True, steps=14_400,
        speed=np.array([0.0, 1.0]), ps_shards=0, cpu_usd_per_hour=0.0, deadline_s=None,
        expected_time_s=run_s,
    )  # fmt: skip
    delays = SpotDelays(startup_spot_s=0.0, startup_on_demand_s=0.0)
    (out,) = simulate_spots(
        [(job, delays)], runs=2000, seed=3, checkpoint_s=10.0, restart_penalty_s=0.0
    )
    per_node = _weibull_expected_renewals(scale, shape, out.time_mean_s)
    assert out.revocations_mean == pytest.approx(nodes * per_node, rel=0.2)  # ~2.3; was ~4x


def test_the_pruning_table_follows_the_window_rate() -> None:
    from gpucast.plan.risk import WindowHazards

    life = WeibullLifetime(scale_s=260.2 * HOUR, shape=0.49, cap_s=None)
    table = WindowHazards.of(life)
    for shape, scale in ((0.49, 260.2 * HOUR), (0.8, 0.5 * HOUR), (3.0, 10 * HOUR)):
        other = WeibullLifetime(scale_s=scale, shape=shape, cap_s=None)
        other_table = WindowHazards.of(other)
        for horizon in np.geomspace(120.0, 5e6, 9):
            direct = window_hazard_per_s(other, float(horizon), draws=4000)
            assert float(other_table(horizon)) == pytest.approx(direct, rel=0.1)
    assert float(table(HOUR)) > 10 * float(table(1e9))  # a short job's young nodes go first
    flat = WindowHazards.of(ExponentialLifetime(hazard_per_hour=0.5))
    assert np.allclose(flat(np.array([60.0, HOUR, 1e8])), 0.5 / HOUR, rtol=0.05)
