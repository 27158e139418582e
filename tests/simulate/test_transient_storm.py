"""A storm of rollbacks is played in one round (the engine jumps to its last rollback): the
runs must be exactly those of the round-by-round loop, which a drawn checkpoint cost keeps."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from gpucast.domain.simulation import ClusterScenario, PriceTable, RunStatistics, WorkerGroup
from gpucast.predict.bursty import MarkovModulatedLifetime
from gpucast.predict.revocation import ExponentialLifetime, LifetimeDistribution
from gpucast.simulate.transient import SpeedTable, simulate_runs

PRICES = PriceTable(
    usd_per_hour={
        ("K80", "spot"): 0.2556,
        ("K80", "on-demand"): 0.722988,
        ("cpu-ps", "spot"): 0.05,
        ("cpu-ps", "on-demand"): 0.14292,
    }
)
CHECKPOINT_S = 4.0


def _drawn(rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
    """The same cost as a callable: the engine then plays every rollback in its own round."""
    return np.full(n, CHECKPOINT_S)


def _run(sc: ClusterScenario, life: LifetimeDistribution, jump: bool) -> RunStatistics:
    counts = [w.count for w in sc.workers]
    return simulate_runs(
        sc,
        speed=SpeedTable.linear([2.0] * len(counts), counts),
        prices=PRICES,
        lifetimes=[life if w.spot else None for w in sc.workers],
        ps_lifetime=life if sc.ps_spot else None,
        startup_spot_s=60.0,
        startup_on_demand_s=90.0,
        checkpoint_s=CHECKPOINT_S if jump else _drawn,
        restart_penalty_s=100.0,
        runs=24,
        rng=7,
    )


HAZARDS = {
    "storm": ExponentialLifetime(hazard_per_hour=8.0),
    "calm": ExponentialLifetime(hazard_per_hour=0.05),
    "bursty": MarkovModulatedLifetime(
        hazard_calm_per_hour=0.2,
        hazard_storm_per_hour=30.0,
        calm_mean_h=6.0,
        storm_mean_h=0.5,
        source="test",
    ),
}
SCENARIOS = {
    "allreduce": {"ps_count": 0, "worker_loss_restarts": True},
    "sync-ps": {"ps_count": 1, "worker_loss_restarts": True, "ps_spot": True},
    "async-ps": {"ps_count": 2, "ps_spot": True},
    "elastic": {"ps_count": 0, "elastic": True, "reshard_s": 30.0},
    "two-groups": {"ps_count": 0, "worker_loss_restarts": True, "groups": 2},
}


@pytest.mark.parametrize("hazard", sorted(HAZARDS))
@pytest.mark.parametrize("kind", sorted(SCENARIOS))
def test_a_storm_in_one_round_gives_the_round_by_round_runs(hazard: str, kind: str) -> None:
    kw = dict(SCENARIOS[kind])
    groups = int(kw.pop("groups", 1))  # type: ignore[call-overload]
    sc = ClusterScenario(
        workers=tuple(
            WorkerGroup(gpu="K80", count=6, region="r", spot=g == 0) for g in range(groups)
        ),
        steps=40_000,
        checkpoint_every_steps=900,
        replace_revoked=True,
        horizon_s=5 * 86400.0,
        **kw,  # type: ignore[arg-type]
    )
    jumped, played = _run(sc, HAZARDS[hazard], True), _run(sc, HAZARDS[hazard], False)
    np.testing.assert_array_equal(jumped.duration_s, played.duration_s)
    np.testing.assert_array_equal(jumped.cost_usd, played.cost_usd)
    np.testing.assert_array_equal(jumped.revocations, played.revocations)
    if hazard == "storm":  # (the case this is for: rollbacks, some runs never finishing)
        assert played.revocations.min() > 50
