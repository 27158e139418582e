"""Managed recovery in plans (issue #14): a spot replacement that waited for capacity is
launched in another region (``--move-region``), priced and revoked as that region's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpucast.plan.risk import SpotDelays, SpotJob, SpotMove, SpotPart, simulate_spots
from gpucast.predict.revocation import ExponentialLifetime


def _part(usd: float) -> SpotPart:
    return SpotPart(
        instance_type="x",
        nodes=4,
        spot_usd_per_hour=usd,
        on_demand_usd_per_hour=3 * usd,
        lifetime=ExponentialLifetime(hazard_per_hour=0.05, source="test"),
    )


def _job() -> SpotJob:
    return SpotJob(
        key="k",
        region="home",
        parts=(_part(1.0),),
        synchronous=True,
        steps=36_000,
        speed=np.array([0.0, 2.0]),  # 5 h while the cluster is up
        ps_shards=0,
        cpu_usd_per_hour=0.0,
        deadline_s=None,
        expected_time_s=5 * 3600.0,
        speed_factors=(1.0,),
    )


def _run(move: SpotMove | None) -> tuple[float, float, float | None, str | None]:
    delays = SpotDelays(
        startup_spot_s=60.0, startup_on_demand_s=60.0, capacity_gap_s=3 * 3600.0, move=move
    )
    (out,) = simulate_spots(
        [(_job(), delays)], runs=400, seed=1, checkpoint_s=5.0, restart_penalty_s=30.0
    )
    return out.time_mean_s, out.cost_mean_usd, out.moves_mean, out.moved_to


def test_moving_pays_where_the_other_region_has_capacity_and_is_counted() -> None:
    stay_t, _, stay_moves, stay_to = _run(None)
    move = SpotMove(
        region="there", after_s=600.0, parts=(_part(1.0),), startup_spot_s=60.0, capacity_gap_s=0
    )
    move_t, _, moves, to = _run(move)
    assert stay_moves is None and stay_to is None
    assert to == "there" and moves is not None and moves > 0
    assert move_t < 0.8 * stay_t  # 3 h gaps at home, none there


def test_the_other_regions_prices_are_billed() -> None:
    cheap = SpotMove(region="a", after_s=0.0, parts=(_part(1.0),), startup_spot_s=60.0)
    dear = SpotMove(region="b", after_s=0.0, parts=(_part(10.0),), startup_spot_s=60.0)
    _, cheap_cost, _, _ = _run(cheap)
    _, dear_cost, _, _ = _run(dear)
    assert dear_cost > 1.5 * cheap_cost


def test_moves_and_revocations_are_counted_on_one_basis() -> None:
    """Every replacement moves (after 0 s): a run's moves cannot outnumber its revocations.
    The revocations were read at the central step time and the moves averaged over every
    stratum of a wide step-time interval, so a plan printed more moves than revocations
    (QA 39 L: '32.4 revocations ... (34.8 a run)')."""
    wide = replace(_job(), speed_factors=(0.4, 1.0, 3.0))
    move = SpotMove(region="there", after_s=0.0, parts=(_part(1.0),), startup_spot_s=60.0)
    delays = SpotDelays(
        startup_spot_s=60.0, startup_on_demand_s=60.0, capacity_gap_s=3 * 3600.0, move=move
    )
    (out,) = simulate_spots(
        [(wide, delays)], runs=600, seed=2, checkpoint_s=5.0, restart_penalty_s=30.0
    )
    assert out.moves_mean is not None and out.moves_mean > 0.5
    assert out.moves_mean <= out.revocations_mean * 1.001


def test_a_spot_rows_mean_states_its_monte_carlo_noise() -> None:
    """A plan's spot row states its mean time and cost with the Monte Carlo's 95% CI (only
    `simulate train` did), and the CI narrows as 1 / sqrt(runs)."""
    wide = replace(_job(), speed_factors=(0.6, 1.0, 1.6))
    delays = SpotDelays(startup_spot_s=60.0, startup_on_demand_s=60.0, capacity_gap_s=1800.0)

    def ci(runs: int) -> tuple[float, float]:
        (out,) = simulate_spots(
            [(wide, delays)], runs=runs, seed=4, checkpoint_s=5.0, restart_penalty_s=30.0
        )
        return out.time_ci95_half_s, out.cost_ci95_half_usd

    small, large = ci(300), ci(1200)
    assert all(v > 0 for v in (*small, *large))
    assert 1.5 < small[0] / large[0] < 2.7  # ~2 for 4x the runs
