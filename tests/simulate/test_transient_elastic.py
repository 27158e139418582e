"""Elastic synchronous training on spot servers: no waiting for lost workers, a re-shard
pause per change in ready workers, growing back as replacements arrive."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import ClusterScenario, PriceTable, WorkerGroup
from gpucast.predict.revocation import ExponentialLifetime
from gpucast.simulate.transient import SpeedTable, simulate_runs

FloatArray = npt.NDArray[np.float64]
PRICES = PriceTable(
    usd_per_hour={
        ("K80", "spot"): 1.0,
        ("K80", "on-demand"): 3.0,
        ("cpu-ps", "on-demand"): 0.0,
    }
)


class _Fixed:
    """Every server lives exactly ``life_s`` from its request."""

    source = "test: fixed lifetime"

    def __init__(self, life_s: float) -> None:
        self.life_s = life_s

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        return np.full(n, self.life_s)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        return np.asarray(np.asarray(t_s) < self.life_s, dtype=np.float64)


def _two_workers(**kw: object) -> ClusterScenario:
    """One spot worker (group 0) and one on-demand worker (group 1), no PS."""
    base: dict[str, object] = {
        "workers": (
            WorkerGroup(gpu="K80", count=1, region="r", spot=True),
            WorkerGroup(gpu="K80", count=1, region="r", spot=False),
        ),
        "ps_count": 0,
        "steps": 3800,
        "replace_revoked": True,
    }
    base.update(kw)
    return ClusterScenario(**base)  # type: ignore[arg-type]


#: progress (steps/s) by ready workers (spot, on-demand): one worker 1, both 2
SPEED = SpeedTable(np.array([[0.0, 1.0], [1.0, 2.0]]))


def _run(sc: ClusterScenario, runs: int = 3) -> FloatArray:
    res = simulate_runs(
        sc,
        speed=SPEED,
        prices=PRICES,
        lifetimes=[_Fixed(1000.0), None],
        startup_spot_s=50.0,
        startup_on_demand_s=50.0,
        runs=runs,
        rng=0,
    )
    return np.asarray(res.duration_s)


def test_elastic_job_goes_on_with_fewer_workers_and_pays_each_reshard() -> None:
    # both up at 50; 2 steps/s to 1000 (1,900 steps); the spot worker is revoked: one worker,
    # 1 step/s after a 20 s re-shard (1020-1050: 30 steps); its replacement is up at 1050:
    # 2 steps/s after a re-shard (1070-2000: 1,860 steps, 3,790 in all); revoked again at
    # 2000: the last 10 steps at 1 step/s from 2020
    got = _run(_two_workers(elastic=True, reshard_s=20.0))
    np.testing.assert_allclose(got, 2030.0)
    # without a re-shard cost: 1,900 + 50 + 1,900 = 3,850 steps by 2000 (done at 1975)
    np.testing.assert_allclose(_run(_two_workers(elastic=True)), 1050.0 + 1850.0 / 2.0)


def test_waiting_synchronous_job_rolls_back_instead() -> None:
    # the same cluster synchronous and waiting: every revocation of the spot worker rolls the
    # job back to step 0 (no checkpoint) and the 3,800 steps never fit in one lifetime
    sc = _two_workers(worker_loss_restarts=True, horizon_s=20_000.0)
    assert np.isinf(_run(sc)).all()
    every = _two_workers(worker_loss_restarts=True, checkpoint_every_steps=500, horizon_s=20_000.0)
    waiting = _run(every)
    assert (waiting > 2030.0).all() and np.isfinite(waiting).all()


def test_elastic_beats_waiting_on_a_spot_cluster() -> None:
    sc = dict(
        workers=(WorkerGroup(gpu="K80", count=8, region="r", spot=True),),
        ps_count=0,
        steps=20_000,
        replace_revoked=True,
        checkpoint_every_steps=2_000,
    )
    speed = SpeedTable(np.array([0.0, *[k / 8.0 for k in range(1, 9)]]) * 2.0)
    args = dict(
        speed=speed, prices=PRICES, lifetimes=[ExponentialLifetime(hazard_per_hour=0.5)],
        startup_spot_s=120.0, startup_on_demand_s=120.0, runs=400, rng=1,
    )  # fmt: skip
    wait = simulate_runs(ClusterScenario(**sc, worker_loss_restarts=True), **args)  # type: ignore[arg-type]
    el = simulate_runs(ClusterScenario(**sc, elastic=True, reshard_s=30.0), **args)  # type: ignore[arg-type]
    assert np.mean(el.duration_s) < 0.8 * np.mean(wait.duration_s)
    assert np.mean(el.cost_usd) < np.mean(wait.cost_usd)
    # never faster than the whole cluster without revocations
    assert np.min(el.duration_s) >= 20_000 / 2.0


def test_elastic_and_restarting_exclude_each_other() -> None:
    with pytest.raises(InvalidSpecError, match="elastic"):
        _two_workers(elastic=True, worker_loss_restarts=True)
    with pytest.raises(InvalidSpecError, match="reshard-s"):
        _two_workers(elastic=True, reshard_s=-1.0)


def test_losing_every_worker_at_once_rolls_back_to_the_checkpoint() -> None:
    # two spot workers revoked together every 1000 s (replacements up 50 s later, then a
    # 20 s re-shard): the state in their memory is gone, back to the last checkpoint (every
    # 1000 steps). 1,900 steps by 1000 -> 1000; 1070-2000 at 2/s -> 2,860 -> 2000;
    # 2070-3000 -> 3,860 -> 3000; the last 1,000 steps from 3070: done at 3570
    sc = ClusterScenario(
        workers=(WorkerGroup(gpu="K80", count=2, region="r", spot=True),),
        ps_count=0,
        steps=4000,
        replace_revoked=True,
        checkpoint_every_steps=1000,
        elastic=True,
        reshard_s=20.0,
    )
    res = simulate_runs(
        sc,
        speed=SpeedTable(np.array([0.0, 1.0, 2.0])),
        prices=PRICES,
        lifetimes=[_Fixed(1000.0)],
        startup_spot_s=50.0,
        startup_on_demand_s=50.0,
        runs=3,
        rng=0,
    )
    np.testing.assert_allclose(res.duration_s, 3570.0)
