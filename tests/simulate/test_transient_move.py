"""Managed recovery across regions in the spot Monte Carlo (``Job.move``, SkyPilot's failover)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import ClusterScenario, PriceTable, WorkerGroup
from gpucast.predict.revocation import ExponentialLifetime
from gpucast.simulate.transient import Job, Move, SpeedTable, simulate_batch, simulate_runs

#: home spot 1 US$/h, on demand 3; the other region: spot 2, on demand 5 (set in Move)
PRICES = PriceTable(
    usd_per_hour={("K80", "spot"): 1.0, ("K80", "on-demand"): 3.0, ("cpu-ps", "on-demand"): 0.0}
)
NEVER = ExponentialLifetime(hazard_per_hour=0.0)


class _At1000:
    """Every home incarnation is revoked 1,000 s after its launch."""

    source = "test: 1,000 s"

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, 1000.0)

    def survival(self, t_s: object) -> np.ndarray:
        return np.where(np.asarray(t_s, dtype=float) < 1000.0, 1.0, 0.0)


def _scenario(fallback_after_s: float | None = None, steps: int = 3000) -> ClusterScenario:
    return ClusterScenario(
        workers=(WorkerGroup(gpu="K80", count=1, region="us-east1", spot=True),),
        ps_count=0,
        steps=steps,
        checkpoint_every_steps=500,
        replace_revoked=True,
        fallback_after_s=fallback_after_s,
    )


def _move(after_s: float = 600.0, gap_s: float = 0.0, life: object = NEVER) -> Move:
    return Move(
        region="us-west1",
        after_s=after_s,
        lifetimes=[life],  # type: ignore[list-item]
        spot_usd_per_hour=[2.0],
        on_demand_usd_per_hour=[5.0],
        capacity_gap_s=gap_s,
    )


def _run(move: Move | None, *, fallback_after_s: float | None = None, steps: int = 3000) -> object:
    job = Job(
        scenario=_scenario(fallback_after_s, steps),
        speed=SpeedTable.linear([1.0], [1]),
        prices=PRICES,
        lifetimes=[_At1000()],  # type: ignore[list-item]
        capacity_gap_s=3600.0,  # home capacity comes back after an hour
        runs=3,
        move=move,
    )
    (stats,) = simulate_batch([job], rng=0)
    return stats


def test_a_replacement_that_waited_moves_to_the_other_region() -> None:
    # t=1000: revoked at 1,000 steps (checkpointed); home capacity would take 3,600 s, so
    # after 600 s the replacement launches in us-west1 (no gap, never revoked there): 2,000
    # more steps from t=1600
    stats = _run(_move())
    assert np.allclose(stats.duration_s, 3600.0)  # type: ignore[attr-defined]
    assert np.all(stats.moves == 1)  # type: ignore[attr-defined]
    assert np.all(stats.revocations == 1)  # type: ignore[attr-defined]
    # billed at home for 1,000 s, then at the other region's spot price from its launch
    expected = 1000.0 / 3600.0 * 1.0 + 2000.0 / 3600.0 * 2.0
    assert np.allclose(stats.cost_usd, expected)  # type: ignore[attr-defined]


def test_without_a_move_the_replacement_waits_for_home_capacity() -> None:
    stats = _run(None)
    # every incarnation lives 1,000 s after an hour's wait: 3 launches for 3,000 steps
    assert np.allclose(stats.duration_s, 1000.0 + 2 * (3600.0 + 1000.0))  # type: ignore[attr-defined]
    assert stats.moves is None  # type: ignore[attr-defined]


def test_a_move_that_would_wait_too_falls_back_on_demand_there() -> None:
    # the other region is short too (1 h): the whole wait passes fallback_after_s = 1,200 s,
    # so the replacement is launched on demand (in us-west1, at its on-demand price)
    stats = _run(_move(gap_s=3600.0), fallback_after_s=1200.0)
    assert np.allclose(stats.duration_s, 1000.0 + 1200.0 + 2000.0)  # type: ignore[attr-defined]
    assert np.all(stats.moves == 1) and np.all(stats.fallbacks == 1)  # type: ignore[attr-defined]
    expected = 1000.0 / 3600.0 * 1.0 + 2000.0 / 3600.0 * 5.0
    assert np.allclose(stats.cost_usd, expected)  # type: ignore[attr-defined]


def test_a_server_moves_back_when_the_other_region_runs_short() -> None:
    # both regions revoke after 1,000 s and are short for an hour: each replacement gives up
    # after 600 s and moves (us-west1, then home again), waiting the other region's hour:
    # 1,000 + (600 + 3,600 + 1,000) + (600 + 3,600 + 500) s for 2,500 steps, 2 moves
    stats = _run(_move(gap_s=3600.0, life=_At1000()), steps=2500)
    assert np.all(stats.moves == 2)  # type: ignore[attr-defined]
    assert np.allclose(stats.duration_s, 10_900.0)  # type: ignore[attr-defined]


def test_moving_beats_waiting_in_expectation_on_a_random_market() -> None:
    sc = ClusterScenario(
        workers=(WorkerGroup(gpu="K80", count=4, region="us-east1", spot=True),),
        steps=40_000,
        checkpoint_every_steps=4_000,
        replace_revoked=True,
    )
    common = dict(
        scenario=sc,
        speed=SpeedTable.linear([2.0], [4]),
        prices=PriceTable(
            usd_per_hour={
                ("K80", "spot"): 1.0,
                ("K80", "on-demand"): 3.0,
                ("cpu-ps", "on-demand"): 0.1,
            }
        ),
        lifetimes=[ExponentialLifetime(hazard_per_hour=1.0)],
        startup_spot_s=60.0,
        startup_on_demand_s=60.0,
        runs=3000,
    )

    def gaps(scale_s: float) -> object:
        return lambda rng, n: rng.exponential(scale_s, n)

    home = Job(capacity_gap_s=gaps(3 * 3600.0), **common)  # type: ignore[arg-type]
    moving = Job(
        capacity_gap_s=gaps(3 * 3600.0),
        move=Move(
            region="us-west1",
            after_s=900.0,
            lifetimes=[ExponentialLifetime(hazard_per_hour=1.0)],
            spot_usd_per_hour=[1.0],
            on_demand_usd_per_hour=[3.0],
            capacity_gap_s=gaps(300.0),
        ),
        **common,  # type: ignore[arg-type]
    )
    stay, move = simulate_batch([home], rng=1)[0], simulate_batch([moving], rng=1)[0]
    assert np.mean(move.duration_s) < 0.8 * np.mean(stay.duration_s)
    assert np.mean(move.moves) > 0  # type: ignore[arg-type]


def test_bad_moves_are_one_line_errors() -> None:
    base = dict(
        scenario=_scenario(),
        speed=SpeedTable.linear([1.0], [1]),
        prices=PRICES,
        lifetimes=[_At1000()],
        capacity_gap_s=3600.0,
        runs=2,
    )
    with pytest.raises(InvalidSpecError, match="lifetimes in us-west1"):
        simulate_batch([Job(move=_move(life=None), **base)])  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="move after"):
        simulate_batch([Job(move=_move(after_s=-1.0), **base)])  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="move after"):
        simulate_batch([Job(move=_move(after_s=math.nan), **base)])  # type: ignore[arg-type]
    bad_price = Move(
        region="us-west1", after_s=60.0, lifetimes=[NEVER], spot_usd_per_hour=[-1.0],
        on_demand_usd_per_hour=[5.0],
    )  # fmt: skip
    with pytest.raises(InvalidSpecError, match="spot price in us-west1"):
        simulate_batch([Job(move=bad_price, **base)])  # type: ignore[arg-type]
    two = Move(
        region="us-west1", after_s=60.0, lifetimes=[NEVER, NEVER], spot_usd_per_hour=[1.0],
        on_demand_usd_per_hour=[5.0],
    )  # fmt: skip
    with pytest.raises(InvalidSpecError, match="one lifetime and one price per worker group"):
        simulate_batch([Job(move=two, **base)])  # type: ignore[arg-type]


def test_simulate_runs_without_a_move_reports_no_moves() -> None:
    stats = simulate_runs(
        _scenario(),
        speed=SpeedTable.linear([1.0], [1]),
        prices=PRICES,
        lifetimes=[NEVER],
        runs=2,
    )
    assert stats.moves is None
