"""Spot markets as they are: correlated revocations, capacity gaps and fallback to on demand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import ClusterScenario, PriceTable, RunStatistics, WorkerGroup
from gpucast.predict.revocation import CorrelatedLifetime, ExponentialLifetime
from gpucast.simulate.transient import SpeedTable, simulate_runs, simulate_scenario

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PRICES = PriceTable(
    usd_per_hour={
        ("K80", "spot"): 0.25,
        ("K80", "on-demand"): 0.75,
        ("cpu-ps", "on-demand"): 0.15,
        ("cpu-ps", "spot"): 0.05,
    }
)
#: one US$ per node-hour on spot, a free PS: the cost of a run is its spot node-hours
NODE_HOURS = PriceTable(
    usd_per_hour={("K80", "spot"): 1.0, ("K80", "on-demand"): 3.0, ("cpu-ps", "on-demand"): 0.0}
)
NEVER = ExponentialLifetime(hazard_per_hour=0.0)


# -- test-only correlated lifetimes ------------------------------------------------------------


class _KnownStorms:
    """Storms at known times per run (``times_s[run]``, seconds on the run's environment clock):
    a node requested at ``s`` is revoked by the first storm after ``s`` (never without one)."""

    source = "test: storms at known times"

    def __init__(self, times_s: FloatArray) -> None:
        self.times_s = np.asarray(times_s, dtype=np.float64)
        self.environments = 0

    def environment(self, rng: np.random.Generator, runs: int, horizon_s: float) -> FloatArray:
        self.environments += 1
        assert runs == self.times_s.shape[0]
        return self.times_s

    def sample_at(
        self, rng: np.random.Generator, start_s: FloatArray, run: IntArray, env: Any
    ) -> FloatArray:
        storms = env[run]
        start = np.asarray(start_s, dtype=np.float64)[:, None]
        return np.asarray(np.where(storms > start, storms, np.inf).min(axis=1) - start[:, 0])

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        return np.full(n, np.inf)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        return np.ones(np.shape(t_s))


class _Storms:
    """A two-level hazard switched by a calm/storm Markov chain, one path per run.

    Calm and storm spells last exponential times (means ``calm_s``, ``storm_s``) and the chain
    starts in its stationary state, so the hazard at any time has the mean
    :attr:`mean_per_hour`. The path is a piecewise-constant hazard: breakpoints, the rate after
    each and the cumulative hazard at each; a lifetime inverts the cumulative hazard from the
    node's request time.
    """

    source = "test: calm/storm Markov-modulated hazard"

    def __init__(
        self,
        *,
        calm_per_hour: float,
        storm_per_hour: float,
        calm_s: float,
        storm_s: float,
        horizon_s: float,
    ) -> None:
        self.calm = calm_per_hour / 3600.0
        self.storm = storm_per_hour / 3600.0
        self.calm_s, self.storm_s, self.horizon_s = calm_s, storm_s, horizon_s
        self.p_storm = storm_s / (calm_s + storm_s)
        self.mean_per_hour = self.p_storm * storm_per_hour + (1 - self.p_storm) * calm_per_hour

    def environment(
        self, rng: np.random.Generator, runs: int, horizon_s: float
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        state = rng.random(runs) < self.p_storm
        t = np.zeros(runs)
        times, states = [t], [state]
        while t.min() <= horizon_s:
            t = t + rng.exponential(1.0, runs) * np.where(state, self.storm_s, self.calm_s)
            state = ~state
            times.append(t)
            states.append(state)
        b = np.stack(times, axis=1)
        rate = np.where(np.stack(states, axis=1), self.storm, self.calm)
        steps = np.cumsum(rate[:, :-1] * np.diff(b, axis=1), axis=1)
        cum = np.concatenate([np.zeros((runs, 1)), steps], axis=1)
        return b, rate, cum

    def sample_at(
        self, rng: np.random.Generator, start_s: FloatArray, run: IntArray, env: Any
    ) -> FloatArray:
        b, rate, cum = (a[run] for a in env)
        start = np.asarray(start_s, dtype=np.float64)
        rows = np.arange(start.size)
        i = np.count_nonzero(b <= start[:, None], axis=1) - 1
        level = cum[rows, i] + rate[rows, i] * (start - b[rows, i])
        level = level + rng.exponential(1.0, start.size)
        j = np.count_nonzero(cum <= level[:, None], axis=1) - 1
        return np.asarray(b[rows, j] + (level - cum[rows, j]) / rate[rows, j] - start)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        env = self.environment(rng, n, self.horizon_s)
        return self.sample_at(rng, np.zeros(n), np.arange(n), env)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:  # not used by the simulator
        return np.exp(-self.mean_per_hour / 3600.0 * np.asarray(t_s, dtype=np.float64))


class _Counting(_Storms):
    def __init__(self, **kwargs: float) -> None:
        super().__init__(**kwargs)
        self.environments = 0

    def environment(
        self, rng: np.random.Generator, runs: int, horizon_s: float
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        self.environments += 1
        return super().environment(rng, runs, horizon_s)


def _storms(horizon_s: float, **kw: float) -> _Storms:
    args = {"calm_per_hour": 0.02, "storm_per_hour": 3.0, "calm_s": 20 * 3600.0, "storm_s": 3600.0}
    args.update(kw)
    return _Storms(horizon_s=horizon_s, **args)


def _k80(n: int, *, spot: bool = True, region: str = "us-east1") -> WorkerGroup:
    return WorkerGroup(gpu="K80", count=n, region=region, spot=spot)


def test_the_test_lifetimes_are_correlated_lifetimes() -> None:
    assert isinstance(_storms(3600.0), CorrelatedLifetime)
    assert isinstance(_KnownStorms(np.zeros((1, 1))), CorrelatedLifetime)
    assert not isinstance(NEVER, CorrelatedLifetime)


# -- correlated revocations: exact cases ---------------------------------------------------------


def _known_storm_times(runs: int) -> FloatArray:
    r = np.arange(runs, dtype=np.float64)
    first = 100.0 + 100.0 * r
    return np.stack([first, first + 100.0 + 30.0 * r], axis=1)


@pytest.mark.parametrize("include_startup", [True, False])
def test_a_storm_revokes_every_node_of_its_run_at_once(include_startup: bool) -> None:
    # 2 workers at 1 step/s each, 2000 steps, no checkpoint: each storm revokes both workers and
    # sends the job back to step 0; the replacements are up 50 s later. Run r's storms come at
    # T1 = 100 + 100 r and T2 = T1 + 100 + 30 r, so run 0 ends (and the rows are compacted)
    # before run 9's second storm: the lifetimes must follow the run, not the row.
    runs = 10
    storms = _KnownStorms(_known_storm_times(runs))
    sc = ClusterScenario(
        workers=(_k80(2),), steps=2000, replace_revoked=True, include_startup=include_startup
    )
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [2]),
        prices=PRICES,
        lifetimes=[storms],
        startup_spot_s=50.0,
        startup_on_demand_s=50.0,
        runs=runs,
        rng=0,
    )
    t2 = storms.times_s[:, 1]
    # include_startup=False: the run clock starts at the first servers' readiness, 50 s into
    # the environment clock, so a storm at T comes at T - 50 on the run clock
    expected = t2 + 50.0 + 1000.0 if include_startup else t2 - 50.0 + 50.0 + 1000.0
    assert np.allclose(res.duration_s, expected)
    assert np.all(res.revocations == 4)
    billed_h = res.duration_s / 3600.0  # every column always has one billed incarnation
    assert np.allclose(res.cost_usd, billed_h * (2 * 0.25 + 0.15))
    assert storms.environments == 1


def test_groups_with_one_distribution_share_one_environment() -> None:
    kw = {"calm_per_hour": 0.1, "storm_per_hour": 5.0, "calm_s": 3600.0, "storm_s": 600.0}
    shared = _Counting(horizon_s=86400.0, **kw)
    sc = ClusterScenario(
        workers=(_k80(2), _k80(2, region="us-west1")),
        ps_spot=True,
        steps=2000,
        replace_revoked=True,
        horizon_s=86400.0,
    )
    args: dict[str, Any] = {
        "speed": SpeedTable.linear([1.0, 1.0], [2, 2]),
        "prices": PRICES,
        "startup_spot_s": 30.0,
        "runs": 20,
        "rng": 1,
    }
    simulate_runs(sc, lifetimes=[shared, shared], ps_lifetime=shared, **args)
    assert shared.environments == 1  # one market: workers of both groups and the PS
    a, b = _Counting(horizon_s=86400.0, **kw), _Counting(horizon_s=86400.0, **kw)
    simulate_runs(sc, lifetimes=[a, b], ps_lifetime=NEVER, **args)
    assert (a.environments, b.environments) == (1, 1)  # equal but distinct: two markets
    simulate_runs(sc, lifetimes=[a, b], ps_lifetime=NEVER, transient=False, **args)
    assert (a.environments, b.environments) == (1, 1)  # on demand: no market at all


# -- correlated vs independent: the same mean hazard -----------------------------------------------


def _rate_and_se(stats: RunStatistics) -> tuple[float, float]:
    """Revocations per spot node-hour (the cost under NODE_HOURS) and its standard error."""
    revs = np.asarray(stats.revocations, dtype=np.float64)
    hours = np.asarray(stats.cost_usd)
    rate = revs.sum() / hours.sum()
    return float(rate), float(np.sqrt(((revs - rate * hours) ** 2).sum()) / hours.sum())


def test_correlated_revocations_same_rate_per_node_hour_larger_variance() -> None:
    # a job that cannot finish within the 12 h horizon: every run exposes 16 nodes for 12 h, so
    # both markets must average the same revocations per node-hour (the mean hazard), while the
    # correlated one concentrates them in the runs that meet a storm
    window_s = 12 * 3600.0
    storms = _storms(window_s)
    sc = ClusterScenario(workers=(_k80(16),), steps=10**9, replace_revoked=True, horizon_s=window_s)

    def run(dist: Any) -> RunStatistics:
        return simulate_runs(
            sc,
            speed=SpeedTable.linear([1.0], [16]),
            prices=NODE_HOURS,
            lifetimes=[dist],
            startup_spot_s=120.0,
            startup_on_demand_s=120.0,
            runs=1500,
            rng=3,
        )

    corr = run(storms)
    indep = run(ExponentialLifetime(hazard_per_hour=storms.mean_per_hour))
    assert np.allclose(corr.cost_usd, 16 * 12.0) and np.allclose(indep.cost_usd, 16 * 12.0)
    for stats in (corr, indep):
        rate, se = _rate_and_se(stats)
        assert abs(rate - storms.mean_per_hour) < 4 * se
    assert corr.revocations.var() > 10 * indep.revocations.var()


def test_storms_widen_the_spread_of_asynchronous_durations() -> None:
    horizon_s = 2 * 86400.0
    storms = _storms(horizon_s)

    def run(dist: Any) -> FloatArray:
        sc = ClusterScenario(
            workers=(_k80(16),),
            steps=16 * 6 * 3600,
            checkpoint_every_steps=16 * 1800,
            replace_revoked=True,
            horizon_s=horizon_s,
        )
        res = simulate_runs(
            sc,
            speed=SpeedTable.linear([1.0], [16]),
            prices=NODE_HOURS,
            lifetimes=[dist],
            startup_spot_s=120.0,
            startup_on_demand_s=120.0,
            checkpoint_s=10.0,
            restart_penalty_s=60.0,
            runs=2000,
            rng=4,
        )
        assert np.all(np.isfinite(res.duration_s))
        return np.asarray(res.duration_s)

    corr = run(storms)
    indep = run(ExponentialLifetime(hazard_per_hour=storms.mean_per_hour))
    assert corr.std() > 1.3 * indep.std()
    assert np.percentile(corr, 95) > np.percentile(indep, 95)


def test_bursts_cost_synchronous_training_fewer_rollbacks() -> None:
    # the flip side: with synchronous training every revocation is a rollback, and a storm's
    # revocations come together (one rollback) while the calm between storms is calmer than the
    # mean -- the same mean hazard in bursts finishes much sooner than spread out evenly
    horizon_s = 3 * 86400.0
    storms = _storms(horizon_s)

    def run(dist: Any) -> FloatArray:
        sc = ClusterScenario(
            workers=(_k80(16),),
            ps_count=0,
            steps=16 * 6 * 3600,
            checkpoint_every_steps=16 * 1800,
            replace_revoked=True,
            worker_loss_restarts=True,
            horizon_s=horizon_s,
        )
        res = simulate_runs(
            sc,
            speed=SpeedTable.linear([1.0], [16]),
            prices=NODE_HOURS,
            lifetimes=[dist],
            startup_spot_s=120.0,
            startup_on_demand_s=120.0,
            checkpoint_s=10.0,
            restart_penalty_s=60.0,
            runs=500,
            rng=5,
        )
        return np.asarray(res.duration_s)

    corr = run(storms)
    indep = run(ExponentialLifetime(hazard_per_hour=storms.mean_per_hour))
    assert np.median(corr) < 0.8 * np.median(indep)


# -- capacity gaps -------------------------------------------------------------------------------


def test_capacity_gaps_lengthen_runs_by_the_expected_time() -> None:
    # one spot worker (also the chief), no PS, checkpoints every tau = 0.5 h of work at no cost,
    # no start-up or restart penalty, hazard h = 1/h: each of the m = 4 segments takes
    # (1/h + G) (e^(h tau) - 1) on average when a revocation costs a capacity gap G (no server
    # exists, hence no revocation, during the gap)
    h, tau, m = 1.0 / 3600.0, 1800.0, 4
    sc = ClusterScenario(
        workers=(_k80(1),),
        ps_count=0,
        steps=int(m * tau),
        checkpoint_every_steps=int(tau),
        replace_revoked=True,
    )

    def run(gap_s: float) -> RunStatistics:
        return simulate_runs(
            sc,
            speed=SpeedTable.linear([1.0], [1]),
            prices=NODE_HOURS,
            lifetimes=[ExponentialLifetime(hazard_per_hour=1.0)],
            capacity_gap_s=gap_s,
            runs=4000,
            rng=6,
        )

    for gap_s in (0.0, 600.0):
        res = run(gap_s)
        d = np.asarray(res.duration_s)
        expected = m * (1 / h + gap_s) * math.expm1(h * tau)
        assert abs(d.mean() - expected) < 4 * d.std() / math.sqrt(d.size)
        # billing starts at launch: the worker is billed all the time but the gaps
        assert np.allclose(np.asarray(res.cost_usd) * 3600.0, d - gap_s * res.revocations)
        # and so is its GPU-time (one GPU per server by default): the gaps are not GPU-hours
        assert res.gpu_s is not None
        assert np.allclose(res.gpu_s, d - gap_s * res.revocations)
        assert res.summary()["gpu_hours"]["mean"] == pytest.approx(res.gpu_s.mean() / 3600)


def test_billed_gpu_time_counts_each_servers_gpus_and_no_parameter_server() -> None:
    """Two groups of 8- and 4-GPU servers and a parameter server, nothing revoked: the billed
    GPU-seconds are the run's time (start-up included) times the 2 x 8 + 3 x 4 GPUs; the PS's
    billed time costs money but holds no GPU."""
    sc = ClusterScenario(
        workers=(
            WorkerGroup(gpu="K80", count=2, region="us-central1", spot=True, gpus=8),
            WorkerGroup(gpu="K80", count=3, region="us-central1", spot=True, gpus=4),
        ),
        ps_count=1,
        steps=5000,
    )
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0, 1.0], [2, 3]),
        prices=PRICES,
        lifetimes=[NEVER, NEVER],
        startup_spot_s=30.0,
        runs=3,
        rng=1,
    )
    d = np.asarray(res.duration_s)
    assert res.gpu_s is not None and np.allclose(res.gpu_s, d * 28)
    assert np.allclose(np.asarray(res.cost_usd), d / 3600 * (5 * 0.25 + 0.15))
    with pytest.raises(InvalidSpecError, match="gpus per worker"):
        WorkerGroup(gpu="K80", count=1, region="r", spot=True, gpus=0)


def test_initial_launches_do_not_wait_for_capacity() -> None:
    sc = ClusterScenario(workers=(_k80(3),), steps=3000, replace_revoked=True)
    args: dict[str, Any] = {
        "speed": SpeedTable.linear([1.0], [3]),
        "prices": PRICES,
        "lifetimes": [NEVER],
        "startup_spot_s": 40.0,
        "runs": 5,
    }
    plain = simulate_runs(sc, **args)
    gapped = simulate_runs(sc, capacity_gap_s=[1e6, 0.0], **args)
    assert np.array_equal(plain.duration_s, gapped.duration_s)
    assert np.allclose(plain.duration_s, 40.0 + 1000.0)
    with pytest.raises(InvalidSpecError, match="one delay per worker group"):
        simulate_runs(sc, capacity_gap_s=[1.0, 2.0, 3.0], **args)
    with pytest.raises(InvalidSpecError, match="capacity_gap_s"):
        simulate_runs(sc, capacity_gap_s=-5.0, **args)


# -- fallback to on demand -----------------------------------------------------------------------


class _SecondDiesAt100:
    """Worker 1 of a 2-worker single run lives 100 s; every later incarnation lives forever."""

    source = "test: worker 1 dies at 100 s"

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        out = np.full(n, np.inf)
        out[1::2] = 100.0
        return out

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        return np.ones(np.shape(t_s))


@pytest.mark.parametrize(
    ("fallback_after_s", "gap_s", "duration_s", "launch_s", "on_demand"),
    [
        # falls back at once: launched at 100 s on demand, up at 150 s (on-demand start-up)
        (0.0, 60.0, 575.0, 100.0, True),
        # waits 30 s for spot, then on demand: launched at 130 s, up at 180 s
        (30.0, 60.0, 590.0, 130.0, True),
        # spot comes within 30 s: a spot replacement launched at 120 s, up at 140 s
        (30.0, 20.0, 570.0, 120.0, False),
        # no fallback: waits the whole gap, spot, launched at 160 s, up at 180 s
        (None, 60.0, 590.0, 160.0, False),
    ],
)
def test_fallback_launches_on_demand_after_waiting(
    fallback_after_s: float | None,
    gap_s: float,
    duration_s: float,
    launch_s: float,
    on_demand: bool,
) -> None:
    # 2 workers at 1 step/s each, 1000 steps; spot start-up 20 s, on-demand 50 s (the PS too):
    # the job starts at 50 s, worker 1 is revoked at 100 s (100 steps done)
    sc = ClusterScenario(
        workers=(_k80(2),), steps=1000, replace_revoked=True, fallback_after_s=fallback_after_s
    )
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [2]),
        prices=PRICES,
        lifetimes=[_SecondDiesAt100()],
        startup_spot_s=20.0,
        startup_on_demand_s=50.0,
        capacity_gap_s=gap_s,
        runs=1,
    )
    assert res.duration_s[0] == pytest.approx(duration_s)
    assert res.revocations[0] == 1
    second = 0.75 if on_demand else 0.25
    usd = duration_s * 0.25 + 100.0 * 0.25 + (duration_s - launch_s) * second + duration_s * 0.15
    assert res.cost_usd[0] == pytest.approx(usd / 3600.0)
    if fallback_after_s is None:
        assert res.fallbacks is None
    else:
        assert res.fallbacks is not None and res.fallbacks[0] == int(on_demand)


def test_fallback_at_once_puts_every_replacement_on_demand() -> None:
    sc = ClusterScenario(
        workers=(_k80(4),),
        steps=40_000,
        checkpoint_every_steps=4_000,
        replace_revoked=True,
        fallback_after_s=0.0,
    )
    args: dict[str, Any] = {
        "speed": SpeedTable.linear([1.0], [4]),
        "lifetimes": [ExponentialLifetime(hazard_per_hour=1.0)],
        "startup_spot_s": 60.0,
        "startup_on_demand_s": 60.0,
        "capacity_gap_s": 300.0,
        "restart_penalty_s": 30.0,
        "runs": 400,
        "rng": 8,
    }
    res = simulate_runs(sc, prices=PRICES, **args)
    assert res.fallbacks is not None
    assert np.array_equal(res.fallbacks, res.revocations)  # every replacement fell back...
    assert res.revocations.max() <= 4 and res.revocations.sum() > 0  # ...and is never revoked
    # the on-demand price of the fallbacks is what they cost: raise it, and only runs with a
    # fallback cost more
    dearer = PriceTable(usd_per_hour={**PRICES.usd_per_hour, ("K80", "on-demand"): 2.0})
    res2 = simulate_runs(sc, prices=dearer, **args)
    assert np.array_equal(res.duration_s, res2.duration_s)
    with_fb = res.fallbacks > 0
    assert np.all(res2.cost_usd[with_fb] > res.cost_usd[with_fb])
    assert np.array_equal(res2.cost_usd[~with_fb], res.cost_usd[~with_fb])


def test_fallbacks_are_reported_only_when_enabled() -> None:
    def result(fallback_after_s: float | None) -> Any:
        sc = ClusterScenario(
            workers=(_k80(2),),
            steps=20_000,
            replace_revoked=True,
            fallback_after_s=fallback_after_s,
        )
        return simulate_scenario(
            sc,
            speed=SpeedTable.linear([2.0], [2]),
            prices=PRICES,
            lifetimes=[ExponentialLifetime(hazard_per_hour=2.0)],
            capacity_gap_s=120.0,
            runs=100,
            speed_factors=(0.9, 1.1),
        )

    plain = result(None)
    assert "fallbacks" not in plain.to_dict()
    assert "fallbacks" not in plain.to_frame().columns
    fb = result(60.0)
    out = fb.to_dict()
    assert set(out["fallbacks"]) == {"mean", "mean_ci95_half", "median", "p10", "p90"}
    assert out["fallbacks"]["mean"] > 0
    assert out["on_demand"]["fallbacks"]["mean"] == 0.0
    frame = fb.to_frame()
    assert frame["fallbacks"].sum() == fb.transient.fallbacks.sum()
    with pytest.raises(InvalidSpecError, match="fallback_after_s"):
        ClusterScenario(workers=(_k80(1),), steps=10, fallback_after_s=-1.0)


# -- invariants ------------------------------------------------------------------------------------


def test_same_seed_same_result_with_markets_gaps_and_fallbacks() -> None:
    sc = ClusterScenario(
        workers=(_k80(6),),
        ps_spot=True,
        steps=30_000,
        checkpoint_every_steps=3_000,
        replace_revoked=True,
        fallback_after_s=200.0,
        horizon_s=86400.0,
    )
    storms = _storms(86400.0, storm_per_hour=6.0, calm_s=3 * 3600.0, storm_s=1800.0)

    def run() -> RunStatistics:
        return simulate_runs(
            sc,
            speed=SpeedTable.linear([1.0], [6]),
            prices=PRICES,
            lifetimes=[storms],
            ps_lifetime=storms,
            startup_spot_s=60.0,
            capacity_gap_s=lambda rng, n: rng.exponential(150.0, n),
            restart_penalty_s=30.0,
            runs=300,
            rng=9,
        )

    a, b = run(), run()
    assert a.duration_s.tobytes() == b.duration_s.tobytes()
    assert a.cost_usd.tobytes() == b.cost_usd.tobytes()
    assert a.fallbacks is not None and b.fallbacks is not None
    assert np.array_equal(a.fallbacks, b.fallbacks) and a.fallbacks.sum() > 0


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 4),
    replace=st.booleans(),
    sync=st.booleans(),
    correlated=st.booleans(),
    include_startup=st.booleans(),
    hazard=st.floats(0.0, 6.0),
    gap_s=st.sampled_from([0.0, 45.0, 900.0]),
    fallback_after_s=st.sampled_from([None, 0.0, 300.0]),
    seed=st.integers(0, 2**16),
)
def test_bookkeeping_invariants(
    n: int,
    replace: bool,
    sync: bool,
    correlated: bool,
    include_startup: bool,
    hazard: float,
    gap_s: float,
    fallback_after_s: float | None,
    seed: int,
) -> None:
    horizon_s = 86400.0
    sc = ClusterScenario(
        workers=(_k80(n),),
        steps=4000,
        checkpoint_every_steps=500,
        replace_revoked=replace,
        worker_loss_restarts=sync,
        include_startup=include_startup,
        fallback_after_s=fallback_after_s,
        horizon_s=horizon_s,
    )
    dist: Any = (
        _storms(horizon_s, calm_per_hour=hazard / 4 + 1e-3, storm_per_hour=4 * hazard + 1e-3)
        if correlated
        else ExponentialLifetime(hazard_per_hour=hazard)
    )
    startup_s = 30.0
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([2.0], [n]),
        prices=PRICES,
        lifetimes=[dist],
        startup_spot_s=startup_s,
        startup_on_demand_s=startup_s,
        capacity_gap_s=gap_s,
        checkpoint_s=1.0,
        restart_penalty_s=20.0,
        runs=24,
        rng=seed,
        max_rounds=5000,
    )
    d, cost, revs = res.duration_s, res.cost_usd, res.revocations
    assert np.all(np.isfinite(cost)) and np.all(cost >= 0) and np.all(revs >= 0)
    # no revocation can make a job faster than running undisturbed from the start
    fastest = 4000 / (2.0 * n) + (startup_s if include_startup else 0.0)
    assert np.all(d[np.isfinite(d)] >= fastest * (1 - 1e-12))
    # one billed incarnation per server at a time, at most at the dearer of its two prices
    end = np.where(np.isfinite(d), d, horizon_s)
    assert np.all(cost <= end / 3600.0 * (n * 0.75 + 0.15) * (1 + 1e-9))
    if fallback_after_s is None:
        assert res.fallbacks is None
    else:
        assert res.fallbacks is not None
        assert np.all(res.fallbacks <= revs)
        if not replace or (fallback_after_s == 0.0 and gap_s > 0):
            assert np.all(revs <= n)  # a server is revoked once: then gone, or on demand
    if not replace:
        assert np.all(revs <= n)
