"""The vectorised transient-training simulator: exact small cases, invariants, loop agreement."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.simulation import ClusterScenario, PriceTable, Summary, WorkerGroup
from gpucast.predict.revocation import ExponentialLifetime, WeibullLifetime
from gpucast.simulate.transient import (
    SpeedTable,
    empirical_sampler,
    simulate_runs,
    simulate_scenario,
)

PRICES = PriceTable(
    usd_per_hour={
        ("K80", "spot"): 0.25,
        ("K80", "on-demand"): 0.75,
        ("cpu-ps", "on-demand"): 0.15,
        ("cpu-ps", "spot"): 0.05,
    }
)
NEVER = ExponentialLifetime(hazard_per_hour=0.0)


def _scenario(
    n: int = 4,
    *,
    spot: bool = True,
    replace: bool = False,
    every: int | None = None,
    steps: int = 10_000,
    ps: int = 1,
    deadline: float | None = None,
) -> ClusterScenario:
    return ClusterScenario(
        workers=(WorkerGroup(gpu="K80", count=n, region="us-east1", spot=spot),),
        ps_count=ps,
        steps=steps,
        checkpoint_every_steps=every,
        replace_revoked=replace,
        deadline_s=deadline,
    )


class _Always:
    """A lifetime distribution that revokes every server at once."""

    source = "test: revoked at once"

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.zeros(n)

    def survival(self, t_s: object) -> np.ndarray:
        return np.zeros(np.shape(t_s))


def test_no_revocations_gives_exact_duration_and_cost() -> None:
    sc = _scenario(4, steps=10_000)
    res = simulate_runs(
        sc, speed=SpeedTable.linear([5.0], [4]), prices=PRICES, lifetimes=[NEVER], runs=50, rng=1
    )
    expected_s = 10_000 / 20.0
    assert np.all(res.duration_s == expected_s)
    uptime_h = expected_s / 3600
    assert np.allclose(res.cost_usd, uptime_h * (4 * 0.25 + 0.15))
    assert np.all(res.revocations == 0)


def test_checkpoints_and_startup_add_their_time() -> None:
    sc = _scenario(2, steps=1000, every=250)
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [2]),
        prices=PRICES,
        lifetimes=[NEVER],
        startup_spot_s=30.0,
        startup_on_demand_s=10.0,
        checkpoint_s=2.0,
        runs=3,
    )
    # 30 s start-up (spot workers) + 500 s of steps + 3 checkpoints (250, 500, 750) of 2 s
    assert np.allclose(res.duration_s, 30 + 500 + 3 * 2)


def test_always_revoked_never_finishes() -> None:
    sc = _scenario(3, steps=1000)
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [3]),
        prices=PRICES,
        lifetimes=[_Always()],
        runs=20,
        rng=0,
    )
    assert np.all(np.isinf(res.duration_s))
    assert res.p_unfinished == 1.0
    assert np.all(res.revocations == 3)
    summary = Summary.of(res.duration_s)
    assert math.isinf(summary.median) and math.isinf(summary.mean)


def test_always_revoked_with_replacement_stops_at_the_round_cap() -> None:
    sc = _scenario(2, steps=1000, replace=True)
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [2]),
        prices=PRICES,
        lifetimes=[_Always()],
        startup_spot_s=5.0,
        runs=4,
        rng=0,
        max_rounds=50,
    )
    assert np.all(np.isinf(res.duration_s))
    assert np.all(res.revocations > 0)


def test_losing_a_worker_slows_the_job_without_rollback() -> None:
    class _SecondDiesAt100:
        source = "test"

        def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
            out = np.full(n, np.inf)
            out[1::2] = 100.0  # worker 1 of each 2-worker run (not the chief)
            return out

        def survival(self, t_s: object) -> np.ndarray:
            return np.ones(np.shape(t_s))

    sc = _scenario(2, steps=1000)
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [2]),
        prices=PRICES,
        lifetimes=[_SecondDiesAt100()],
        runs=2,
        rng=0,
    )
    # 100 s at 2 steps/s, then 800 steps at 1 step/s
    assert np.allclose(res.duration_s, 900.0)
    assert np.all(res.revocations == 1)
    assert np.allclose(res.cost_usd, (900 + 100) / 3600 * 0.25 + 900 / 3600 * 0.15)


def test_chief_loss_rolls_back_to_the_checkpoint() -> None:
    class _ChiefDiesAt150:
        source = "test"

        def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
            out = np.full(n, np.inf)
            out[0::2] = 150.0
            return out

        def survival(self, t_s: object) -> np.ndarray:
            return np.ones(np.shape(t_s))

    sc = _scenario(2, steps=1000, every=200)
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [2]),
        prices=PRICES,
        lifetimes=[_ChiefDiesAt150()],
        restart_penalty_s=50.0,
        runs=1,
        rng=0,
    )
    # t=100: checkpoint at 200 steps; t=150: chief lost at 300 steps -> back to 200,
    # restart at 200 s on one worker: 800 steps at 1 step/s (checkpoints at 400, 600, 800)
    assert res.duration_s[0] == pytest.approx(200 + 800)


def test_same_seed_same_result_bit_for_bit() -> None:
    sc = _scenario(4, replace=True, every=1000)
    kwargs = dict(
        speed=SpeedTable.linear([5.0], [4]),
        prices=PRICES,
        lifetimes=[WeibullLifetime(scale_s=3000.0, shape=0.7, cap_s=86400.0)],
        startup_spot_s=empirical_sampler([60.0, 80.0, 90.0]),
        checkpoint_s=3.0,
        restart_penalty_s=100.0,
        runs=500,
    )
    a = simulate_scenario(sc, seed=7, **kwargs)  # type: ignore[arg-type]
    b = simulate_scenario(sc, seed=7, **kwargs)  # type: ignore[arg-type]
    assert a.transient.duration_s.tobytes() == b.transient.duration_s.tobytes()
    assert a.transient.cost_usd.tobytes() == b.transient.cost_usd.tobytes()
    assert np.array_equal(a.transient.revocations, b.transient.revocations)
    c = simulate_scenario(sc, seed=8, **kwargs)  # type: ignore[arg-type]
    assert c.transient.duration_s.tobytes() != a.transient.duration_s.tobytes()


def test_result_json_shape_with_deadline() -> None:
    sc = _scenario(2, deadline=1000.0)
    res = simulate_scenario(
        sc,
        speed=SpeedTable.linear([5.0], [2]),
        prices=PRICES,
        lifetimes=[ExponentialLifetime(hazard_per_hour=1.0)],
        runs=200,
    )
    out = res.to_dict()
    for key in ("duration_s", "cost_usd", "revocations"):
        assert set(out[key]) == {"mean", "mean_ci95_half", "median", "p10", "p90"}  # type: ignore[arg-type]
        assert set(out["on_demand"][key]) == {"mean", "mean_ci95_half", "median", "p10", "p90"}  # type: ignore[index]
    assert 0.0 <= out["p_miss_deadline"] <= 1.0  # type: ignore[operator]
    assert out["on_demand"]["revocations"]["mean"] == 0.0  # type: ignore[index]


def test_mixed_gpu_groups_use_the_alive_vector() -> None:
    sc = ClusterScenario(
        workers=(
            WorkerGroup(gpu="K80", count=2, region="us-east1", spot=True),
            WorkerGroup(gpu="P100", count=1, region="us-west1", spot=False),
        ),
        ps_count=1,
        steps=1200,
    )
    prices = PriceTable(usd_per_hour={**PRICES.usd_per_hour, ("P100", "on-demand"): 1.5})
    table = SpeedTable.linear([1.0, 4.0], [2, 1])
    assert table.table.shape == (3, 2)
    res = simulate_runs(sc, speed=table, prices=prices, lifetimes=[NEVER, None], runs=2)
    assert np.allclose(res.duration_s, 1200 / 6.0)


def test_spot_group_without_lifetimes_is_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="spot group needs"):
        simulate_runs(
            _scenario(2),
            speed=SpeedTable.linear([1.0], [2]),
            prices=PRICES,
            lifetimes=[None],
            runs=2,
        )


def test_bad_scenarios_raise_one_line_errors() -> None:
    with pytest.raises(InvalidSpecError, match="workers"):
        WorkerGroup(gpu="K80", count=0, region="us-east1", spot=True)
    with pytest.raises(InvalidSpecError, match="checkpoint-every"):
        _scenario(2, steps=100, every=200)
    with pytest.raises(InvalidSpecError, match="deadline"):
        _scenario(2, deadline=-1.0)
    with pytest.raises(InvalidSpecError, match="no spot price for P100"):
        PRICES.price("P100", spot=True)


@settings(max_examples=25, deadline=None)
@given(scale=st.floats(1.01, 5.0), seed=st.integers(0, 2**16))
def test_cost_is_monotone_in_price(scale: float, seed: int) -> None:
    sc = _scenario(3, every=2000)
    dist = WeibullLifetime(scale_s=5000.0, shape=0.8, cap_s=86400.0)
    cheap = simulate_runs(
        sc, speed=SpeedTable.linear([5.0], [3]), prices=PRICES, lifetimes=[dist], runs=64, rng=seed
    )
    dear_prices = PriceTable(usd_per_hour={k: v * scale for k, v in PRICES.usd_per_hour.items()})
    dear = simulate_runs(
        sc,
        speed=SpeedTable.linear([5.0], [3]),
        prices=dear_prices,
        lifetimes=[dist],
        runs=64,
        rng=seed,
    )
    assert np.array_equal(cheap.duration_s, dear.duration_s)
    assert np.all(dear.cost_usd >= cheap.cost_usd)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 7), per_worker=st.floats(0.1, 50.0), steps=st.integers(1, 100_000))
def test_more_workers_never_slower_without_revocations(
    n: int, per_worker: float, steps: int
) -> None:
    def duration(k: int) -> float:
        res = simulate_runs(
            _scenario(k, steps=steps),
            speed=SpeedTable.linear([per_worker], [k]),
            prices=PRICES,
            lifetimes=[NEVER],
            runs=2,
        )
        return float(res.duration_s[0])

    assert duration(n + 1) <= duration(n) * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(hazard=st.floats(0.0, 20.0), replace=st.booleans(), seed=st.integers(0, 1000))
def test_revocations_are_non_negative_and_costs_finite(
    hazard: float, replace: bool, seed: int
) -> None:
    res = simulate_runs(
        _scenario(3, replace=replace, every=500, steps=3000),
        speed=SpeedTable.linear([2.0], [3]),
        prices=PRICES,
        lifetimes=[ExponentialLifetime(hazard_per_hour=hazard)],
        startup_spot_s=30.0,
        runs=32,
        rng=seed,
        max_rounds=5000,
    )
    assert np.all(res.revocations >= 0)
    assert np.all(np.isfinite(res.cost_usd)) and np.all(res.cost_usd >= 0)
    finished = np.isfinite(res.duration_s)
    assert np.all(res.duration_s[finished] >= 3000 / 6.0)


@pytest.mark.parametrize("replace", [False, True])
def test_vectorised_agrees_with_the_python_loop(
    replace: bool, load_benchmark: Callable[[str], Any]
) -> None:
    bench = load_benchmark("transient_speed")
    sc = bench.scenario(4, replace=replace)  # type: ignore[attr-defined]
    speed = SpeedTable.linear([4.5], [4])
    d_v, c_v, r_v = bench.vector_simulate(sc, speed, 3000, 11)  # type: ignore[attr-defined]
    d_l, c_l, r_l = bench.loop_simulate(sc, speed, 1500, 12)  # type: ignore[attr-defined]
    # same model, independent streams: revocation means within 5 standard errors
    se = math.sqrt(r_v.var() / r_v.size + r_l.var() / r_l.size) + 1e-9
    assert abs(r_v.mean() - r_l.mean()) < 5 * se
    fin_v, fin_l = np.isfinite(d_v), np.isfinite(d_l)
    assert abs(np.median(d_v[fin_v]) - np.median(d_l[fin_l])) < 0.01 * np.median(d_l[fin_l])
    assert abs(c_v.mean() - c_l.mean()) < 0.03 * c_l.mean()


@pytest.mark.parametrize("replace", [False, True])
def test_agrees_with_the_python_loop_across_windows_and_chunks(
    replace: bool, monkeypatch: pytest.MonkeyPatch, load_benchmark: Callable[[str], Any]
) -> None:
    """Lifetimes of ~1 h against a ~1 h job, first windows of 10 minutes (each next one sized
    from the pace so far) and chunks of a few runs: the law of the outcome is still the
    per-event loop's."""
    import gpucast.simulate._transient_engine as engine

    bench = load_benchmark("transient_speed")
    monkeypatch.setattr(bench, "LIFETIME", WeibullLifetime(scale_s=3600.0, shape=0.8))
    monkeypatch.setattr(engine, "_CHUNK_INCARNATIONS", 500)
    monkeypatch.setattr(engine._Engine, "_first_span", lambda self: np.full(self.runs, 600.0))
    sc = bench.scenario(4, replace=replace)  # type: ignore[attr-defined]
    speed = SpeedTable.linear([4.5], [4])
    d_v, c_v, r_v = bench.vector_simulate(sc, speed, 2000, 21)  # type: ignore[attr-defined]
    d_l, c_l, r_l = bench.loop_simulate(sc, speed, 1000, 22)  # type: ignore[attr-defined]
    se = math.sqrt(r_v.var() / r_v.size + r_l.var() / r_l.size) + 1e-9
    assert abs(r_v.mean() - r_l.mean()) < 5 * se
    fin_v, fin_l = np.isfinite(d_v), np.isfinite(d_l)
    assert abs(fin_v.mean() - fin_l.mean()) < 0.05
    if fin_l.any():
        d_se = math.sqrt(d_v[fin_v].var() / fin_v.sum() + d_l[fin_l].var() / fin_l.sum())
        assert abs(d_v[fin_v].mean() - d_l[fin_l].mean()) < 5 * d_se
    c_se = math.sqrt(c_v.var() / c_v.size + c_l.var() / c_l.size)
    assert abs(c_v.mean() - c_l.mean()) < 5 * c_se
    assert np.all(d_v > 600.0)  # every run went on past its first window


# -- synchronous training, per-group start-up, start-up survival, markets ----------------------


class _ShortOrLong:
    """Half the draws end after 1 s, the rest never (within the test)."""

    source = "test: 1 s or never"

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.where(rng.random(n) < 0.5, 1.0, 1e12)

    def survival(self, t_s: object) -> np.ndarray:
        t = np.asarray(t_s, dtype=float)
        return np.where(t < 1.0, 1.0, 0.5)


def test_per_group_startup_delays_apply_to_their_group() -> None:
    sc = ClusterScenario(
        workers=(
            WorkerGroup(gpu="K80", count=1, region="us-east1", spot=False),
            WorkerGroup(gpu="K80", count=1, region="us-west1", spot=False),
        ),
        ps_count=1,
        steps=100,
    )
    speed = SpeedTable(np.array([[0.0, 1.0], [1.0, 2.0]]))
    # chief (group 0) up at 10 s, group 1 at 50 s, PS at 0 s: 40 steps alone, then 2 steps/s
    res = simulate_runs(
        sc,
        speed=speed,
        prices=PRICES,
        lifetimes=[None, None],
        startup_on_demand_s=[10.0, 50.0, 0.0],
        runs=3,
        transient=False,
    )
    assert np.allclose(res.duration_s, 50.0 + 60.0 / 2.0)
    with pytest.raises(InvalidSpecError, match="one delay per worker group"):
        simulate_runs(
            sc,
            speed=speed,
            prices=PRICES,
            lifetimes=[None, None],
            startup_on_demand_s=[10.0, 50.0],
            runs=3,
        )


def test_servers_up_at_clock_start_outlived_their_startup() -> None:
    sc = ClusterScenario(
        workers=(WorkerGroup(gpu="K80", count=4, region="us-east1", spot=True),),
        ps_count=1,
        steps=1000,
        include_startup=False,
    )
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([1.0], [4]),
        prices=PRICES,
        lifetimes=[_ShortOrLong()],
        startup_spot_s=60.0,
        startup_on_demand_s=60.0,
        runs=200,
        rng=1,
    )
    # without conditioning on the start-up, half of the workers would die at t = 0
    assert res.revocations.sum() == 0
    assert np.allclose(res.duration_s, 250.0)


def test_synchronous_training_rolls_back_on_any_worker_loss() -> None:
    def run(sync: bool) -> np.ndarray:
        sc = ClusterScenario(
            workers=(WorkerGroup(gpu="K80", count=4, region="us-east1", spot=True),),
            ps_count=1,
            steps=20_000,
            checkpoint_every_steps=2_000,
            replace_revoked=True,
            worker_loss_restarts=sync,
        )
        res = simulate_runs(
            sc,
            speed=SpeedTable.linear([1.0], [4]),
            prices=PRICES,
            lifetimes=[ExponentialLifetime(hazard_per_hour=0.5)],
            startup_spot_s=60.0,
            startup_on_demand_s=60.0,
            restart_penalty_s=30.0,
            runs=400,
            rng=7,
        )
        return np.asarray(res.duration_s)

    async_d, sync_d = run(False), run(True)
    assert np.all(np.isfinite(async_d)) and np.all(np.isfinite(sync_d))
    assert np.median(sync_d) > 1.1 * np.median(async_d)
    assert (
        ClusterScenario(
            workers=(WorkerGroup(gpu="K80", count=1, region="r", spot=True),),
            steps=10,
            worker_loss_restarts=True,
        )
        .on_demand()
        .worker_loss_restarts
    )


def test_market_spellings_normalise_to_the_domain_names() -> None:
    from gpucast.domain.simulation import normalise_market

    assert normalise_market("on_demand") == normalise_market("On-Demand") == "on-demand"
    assert normalise_market("preemptible") == "spot"
    with pytest.raises(InvalidSpecError, match="market"):
        normalise_market("reserved")
    table = PriceTable(usd_per_hour={("K80", "on_demand"): 1.0, ("K80@us-west1", "spot"): 0.2})
    assert table.price("K80", spot=False, region="us-east1") == 1.0
    assert table.price("K80", spot=True, region="us-west1") == 0.2
    with pytest.raises(InvalidSpecError, match="no spot price for K80 in us-east1"):
        table.price("K80", spot=True, region="us-east1")


# -- pinned outputs: the same seed gives these numbers, bit for bit ------------------------------
# Recorded from the windowed engine (servers' incarnation chains drawn window by window, the job
# advanced from checkpoint to critical revocation). It replaced the per-event round engine of
# 8d97cbe, whose draws came in another order: on these cases at 10x the runs the two agree
# within 0.7 standard errors in mean duration, cost and revocations (and on bursty markets,
# capacity gaps, fallbacks and spot PS); `python benchmarks/transient_speed.py` compares them.

_PIN_PRICES = PriceTable(
    usd_per_hour={
        **PRICES.usd_per_hour,
        ("P100", "on-demand"): 1.5,
        ("P100", "spot"): 0.45,
    }
)


def _pinned_cases() -> dict[str, object]:
    weib = WeibullLifetime(scale_s=4000.0, shape=0.7, cap_s=86400.0)
    expo = ExponentialLifetime(hazard_per_hour=0.8)
    k80 = WorkerGroup(gpu="K80", count=6, region="us-east1", spot=True)
    out: dict[str, object] = {}
    out["async-replace"] = simulate_runs(
        ClusterScenario(
            workers=(k80,), steps=20_000, checkpoint_every_steps=2_000, replace_revoked=True
        ),
        speed=SpeedTable.linear([2.0], [6]),
        prices=_PIN_PRICES,
        lifetimes=[weib],
        startup_spot_s=empirical_sampler([60.0, 80.0, 95.0]),
        startup_on_demand_s=40.0,
        checkpoint_s=3.0,
        restart_penalty_s=90.0,
        runs=300,
        rng=11,
    )
    out["sync-allreduce"] = simulate_runs(
        ClusterScenario(
            workers=(WorkerGroup(gpu="K80", count=8, region="us-east1", spot=True),),
            ps_count=0,
            steps=30_000,
            checkpoint_every_steps=3_000,
            replace_revoked=True,
            worker_loss_restarts=True,
        ),
        speed=SpeedTable.linear([1.5], [8]),
        prices=_PIN_PRICES,
        lifetimes=[expo],
        startup_spot_s=70.0,
        startup_on_demand_s=50.0,
        checkpoint_s=5.0,
        restart_penalty_s=45.0,
        runs=300,
        rng=12,
    )
    out["no-replace-spot-ps-clock-at-up"] = simulate_runs(
        ClusterScenario(
            workers=(WorkerGroup(gpu="K80", count=5, region="us-east1", spot=True),),
            ps_count=2,
            ps_spot=True,
            steps=15_000,
            checkpoint_every_steps=1_500,
            include_startup=False,
        ),
        speed=SpeedTable.linear([1.0], [5]),
        prices=_PIN_PRICES,
        lifetimes=[weib],
        ps_lifetime=ExponentialLifetime(hazard_per_hour=0.3),
        startup_spot_s=empirical_sampler([30.0, 200.0]),
        startup_on_demand_s=20.0,
        checkpoint_s=2.0,
        restart_penalty_s=30.0,
        runs=300,
        rng=13,
    )
    out["mixed-groups"] = simulate_runs(
        ClusterScenario(
            workers=(
                WorkerGroup(gpu="K80", count=3, region="us-east1", spot=True),
                WorkerGroup(gpu="P100", count=2, region="us-west1", spot=True),
                WorkerGroup(gpu="K80", count=1, region="us-west1", spot=False),
            ),
            steps=25_000,
            checkpoint_every_steps=2_500,
            replace_revoked=True,
        ),
        speed=SpeedTable.linear([1.0, 3.0, 1.0], [3, 2, 1]),
        prices=_PIN_PRICES,
        lifetimes=[weib, expo, None],
        startup_spot_s=[60.0, empirical_sampler([40.0, 120.0]), 10.0, 20.0],
        startup_on_demand_s=[30.0, 30.0, 15.0, 25.0],
        checkpoint_s=empirical_sampler([2.0, 4.0]),
        restart_penalty_s=60.0,
        runs=300,
        rng=14,
    )
    res = simulate_scenario(
        ClusterScenario(
            workers=(WorkerGroup(gpu="K80", count=4, region="us-east1", spot=True),),
            steps=40_000,
            checkpoint_every_steps=4_000,
            replace_revoked=True,
            deadline_s=3 * 3600.0,
            horizon_s=5 * 3600.0,
        ),
        speed=SpeedTable.linear([1.2], [4]),
        prices=_PIN_PRICES,
        lifetimes=[ExponentialLifetime(hazard_per_hour=1.5)],
        startup_spot_s=80.0,
        startup_on_demand_s=60.0,
        checkpoint_s=3.0,
        restart_penalty_s=100.0,
        runs=301,
        seed=5,
        speed_factors=(0.9, 1.0, 1.15),
    )
    out["scenario-strata"] = res.transient
    out["scenario-on-demand"] = res.on_demand
    for sync in (False, True):
        out[f"256-nodes-{'sync' if sync else 'async'}"] = simulate_runs(
            ClusterScenario(
                workers=(WorkerGroup(gpu="K80", count=256, region="us-east1", spot=True),),
                ps_count=0 if sync else 1,
                steps=100_000,
                checkpoint_every_steps=5_000,
                replace_revoked=True,
                worker_loss_restarts=sync,
            ),
            speed=SpeedTable(np.concatenate([[0.0], np.arange(1, 257) * 0.5])),
            prices=_PIN_PRICES,
            lifetimes=[ExponentialLifetime(hazard_per_hour=0.05)],
            startup_spot_s=100.0,
            startup_on_demand_s=100.0,
            checkpoint_s=10.0,
            restart_penalty_s=60.0,
            runs=200,
            rng=np.random.default_rng(0),
        )
    return out


_INF = math.inf
#: finished runs, sum of finished durations, sum of costs, revocations, first durations and costs
_PINNED: dict[str, tuple[object, ...]] = {
    "async-replace": (
        300, 592127.3725355072, 271.3917124121075, 1195,
        [1869.51968616049, 1788.6666666666667, 2032.8506139283195],
        [0.8568631894902244, 0.8198055555555555, 0.9317231980504797],
    ),
    "sync-allreduce": (
        300, 1198805.4286970017, 666.0030159427788, 2102,
        [3964.2239408015485, 5169.46517567499, 3160.994830335309],
        [2.202346633778638, 2.8719250975972166, 1.7561082390751719],
    ),
    "no-replace-spot-ps-clock-at-up": (
        200, 1184292.3504650327, 359.0198259364882, 1325,
        [_INF, _INF, 3405.4730621666536],
        [0.7426175051796179, 1.2463576420853315, 1.142096473949074],
    ),
    "mixed-groups": (
        300, 846762.1552918355, 599.7898599983835, 1138,
        [2616.0, 2896.7419204553735, 2625.4],
        [1.853, 2.0518588603225565, 1.8596583333333336],
    ),
    "scenario-strata": (
        301, 3400553.62946263, 1086.287964967229, 5607,
        [10151.37156703928, 7706.250000000001, 9055.969110546273],
        [3.2427992505819923, 2.4617187500000006, 2.892879021424505],
    ),
    "scenario-on-demand": (
        301, 2575353.6666667257, 2253.434458333385, 0,
        [7587.0, 7587.0, 7587.0],
        [6.638625000000001, 6.638625000000001, 6.638625000000001],
    ),
    "256-nodes-async": (
        200, 214915.5308809367, 3829.6753627811377, 759,
        [1072.8030609487118, 1167.2669097065989, 1072.8125000000018],
        [19.116754544405627, 20.800047849354954, 19.116922743055508],
    ),
    "256-nodes-sync": (
        200, 392874.0006818132, 6984.426678787791, 1400,
        [2182.6606138808384, 2117.7967828923174, 2202.531139790749],
        [38.802855357881676, 37.64972058475237, 39.15610915183548],
    ),
}  # fmt: skip


def _fingerprint(stats: object) -> tuple[object, ...]:
    d = np.asarray(stats.duration_s)  # type: ignore[attr-defined]
    c = np.asarray(stats.cost_usd)  # type: ignore[attr-defined]
    r = np.asarray(stats.revocations)  # type: ignore[attr-defined]
    fin = np.isfinite(d)
    return (
        int(fin.sum()),
        float(d[fin].sum()),
        float(c.sum()),
        int(r.sum()),
        [float(x) for x in d[:3]],
        [float(x) for x in c[:3]],
    )


def test_pinned_outputs_are_unchanged() -> None:
    # counts exactly; sums and the first runs to 1e-12 relative: numpy releases may change
    # the last bit of a reduction (2.4 moved two of these by one ulp), no logic change can
    # stay that close
    got = {name: _fingerprint(stats) for name, stats in _pinned_cases().items()}
    assert got.keys() == _PINNED.keys()
    for name, (finished, dur, cost, revs, first_d, first_c) in _PINNED.items():
        g = got[name]
        assert (g[0], g[3]) == (finished, revs), name
        assert g[1] == pytest.approx(dur, rel=1e-12) and g[2] == pytest.approx(cost, rel=1e-12)
        assert g[4] == pytest.approx(first_d, rel=1e-12), name
        assert g[5] == pytest.approx(first_c, rel=1e-12), name


def test_a_run_slowdown_divides_that_runs_speed() -> None:
    sc = _scenario(4, steps=10_000)
    slow = np.array([1.0, 1.5, 2.0])
    res = simulate_runs(
        sc,
        speed=SpeedTable.linear([5.0], [4]),
        prices=PRICES,
        lifetimes=[NEVER],
        runs=3,
        rng=1,
        run_slowdown=slow,
    )
    np.testing.assert_allclose(res.duration_s, 500.0 * slow)
    with pytest.raises(InvalidSpecError, match="run_slowdown"):
        simulate_runs(
            sc, speed=SpeedTable.linear([5.0], [4]), prices=PRICES, lifetimes=[NEVER], runs=3,
            run_slowdown=np.array([1.0, -1.0, 1.0]),
        )  # fmt: skip


def test_gpu_variability_slows_synchronous_jobs_by_their_slowest_gpu() -> None:
    from gpucast.predict.variability import SpeedVariability

    spread = SpeedVariability(sigma_log=0.03, outlier_share=0.02, outlier_max_factor=1.5)
    sync = ClusterScenario(
        workers=(WorkerGroup(gpu="K80", count=16, region="us-east1", spot=False),),
        ps_count=0,
        steps=1000,
        worker_loss_restarts=True,
    )
    kwargs = {"speed": SpeedTable.linear([1.0], [16]), "prices": PRICES, "lifetimes": [None]}
    base = simulate_scenario(sync, runs=2000, seed=4, **kwargs)  # type: ignore[arg-type]
    varied = simulate_scenario(sync, runs=2000, seed=4, variability=spread, **kwargs)  # type: ignore[arg-type]
    ratio = varied.on_demand.duration_s.mean() / base.on_demand.duration_s.mean()
    assert ratio == pytest.approx(float(spread.expected_max([16])[0]), rel=0.01)
    assert np.all(varied.on_demand.duration_s >= base.on_demand.duration_s - 1e-9)
    # without variability nothing changes: the third stream is only drawn from when asked
    again = simulate_scenario(sync, runs=2000, seed=4, **kwargs)  # type: ignore[arg-type]
    assert np.array_equal(again.on_demand.duration_s, base.on_demand.duration_s)
    dropped = simulate_scenario(
        sync,
        runs=2000,
        seed=4,
        variability=spread,
        exclude_slowest=0.2,
        **kwargs,  # type: ignore[arg-type]
    )
    assert dropped.on_demand.duration_s.mean() < varied.on_demand.duration_s.mean()


def test_a_batch_of_jobs_matches_each_job_alone() -> None:
    """simulate_batch runs several scenarios in one event loop: a batch of one job is
    simulate_runs exactly, and each job of a bigger batch keeps its own outcome (checked on
    on-demand jobs, where nothing is random but the start-up, which is constant here)."""
    from gpucast.simulate.transient import Job, simulate_batch

    def job(workers: int, steps: int, rate: float) -> Job:
        scenario = ClusterScenario(
            workers=(WorkerGroup(gpu="K80", count=workers, region="us-east1", spot=False),),
            ps_count=1,
            steps=steps,
        )
        table = SpeedTable(np.array([0.0, *(rate * k for k in range(1, workers + 1))]))
        return Job(scenario=scenario, speed=table, prices=PRICES, lifetimes=[None], runs=5,
                   startup_on_demand_s=60.0)  # fmt: skip

    jobs = [job(2, 1000, 2.0), job(4, 5000, 1.5), job(1, 300, 3.0)]
    batch = simulate_batch(jobs, rng=0)
    for j, stats in zip(jobs, batch, strict=True):
        alone = simulate_runs(
            j.scenario, speed=j.speed, prices=j.prices, lifetimes=[None], runs=5,
            startup_on_demand_s=60.0, rng=0,
        )  # fmt: skip
        np.testing.assert_allclose(stats.duration_s, alone.duration_s)
        np.testing.assert_allclose(stats.cost_usd, alone.cost_usd)
    (one,) = simulate_batch([jobs[1]], rng=7)
    same = simulate_runs(
        jobs[1].scenario, speed=jobs[1].speed, prices=PRICES, lifetimes=[None], runs=5,
        startup_on_demand_s=60.0, rng=7,
    )  # fmt: skip
    assert np.array_equal(one.duration_s, same.duration_s)


def test_a_job_may_carry_its_own_checkpoint_cost_and_restart_penalty() -> None:
    """A job of a batch with its own checkpoint cost and restart penalty (LLM spot plans:
    each candidate's sharded checkpoint) runs exactly as a batch whose shared figures are
    those; another job of the batch keeps the shared ones."""
    import dataclasses

    from gpucast.predict.revocation import ExponentialLifetime
    from gpucast.simulate.transient import Job, simulate_batch

    scenario = ClusterScenario(
        workers=(WorkerGroup(gpu="K80", count=1, region="us-east1", spot=True, gpus=8),),
        ps_count=0, steps=20_000, checkpoint_every_steps=500, replace_revoked=True,
        include_startup=True,
    )  # fmt: skip
    base = Job(
        scenario=scenario, speed=SpeedTable(np.array([0.0, 2.0])), prices=PRICES,
        lifetimes=[ExponentialLifetime(hazard_per_hour=0.5)], runs=200, startup_spot_s=60.0,
    )  # fmt: skip
    own = dataclasses.replace(base, checkpoint_s=40.0, restart_penalty_s=300.0)
    (shared,) = simulate_batch([base], checkpoint_s=40.0, restart_penalty_s=300.0, rng=3)
    (carried,) = simulate_batch([own], checkpoint_s=1.0, restart_penalty_s=5.0, rng=3)
    assert shared.revocations.sum() > 50  # the penalty is paid many times
    np.testing.assert_array_equal(carried.duration_s, shared.duration_s)
    (cheap,) = simulate_batch([base], checkpoint_s=1.0, restart_penalty_s=5.0, rng=3)
    assert cheap.duration_s.mean() < carried.duration_s.mean()
    with pytest.raises(InvalidSpecError, match="must be >= 0"):
        simulate_batch([dataclasses.replace(base, restart_penalty_s=-1.0)])
