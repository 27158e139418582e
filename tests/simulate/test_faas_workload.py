"""The synthetic FaaS workload reproduces the published characteristics it is drawn from
(catalog/data/faas_workload.csv: Shahrad et al. ATC'20)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpucast.catalog.faas import load_faas_mix
from gpucast.domain.errors import InvalidSpecError
from gpucast.simulate.faas_workload import arrival_cv, generate_faas_workload

MIX = load_faas_mix()


def test_invocation_frequency_mix_and_triggers() -> None:
    w = generate_faas_workload(4000, np.random.default_rng(0), mix=MIX)
    per_day = w.counts.sum(axis=1)
    # 45% of functions at most hourly, 81% at most once a minute
    assert np.mean(per_day <= 24) == pytest.approx(MIX.share_at_most_hourly, abs=0.04)
    assert np.mean(per_day <= 1440) == pytest.approx(MIX.share_at_most_per_minute, abs=0.04)
    assert np.mean(w.trigger == "http") == pytest.approx(0.55, abs=0.03)
    assert np.mean(w.trigger == "timer") == pytest.approx(0.156, abs=0.02)
    # durations: log-normal mu -0.38, sigma 2.36 -> median exp(-0.38) = 0.68 s
    assert np.median(w.duration_s) == pytest.approx(np.exp(-0.38), rel=0.15)


def test_arrival_patterns_follow_the_published_cv_mix() -> None:
    w = generate_faas_workload(4000, np.random.default_rng(3), mix=MIX, minutes=3 * 1440)
    timer = w.trigger == "timer"
    assert np.all(w.pattern[timer] == "periodic")
    other = ~timer
    assert np.mean(w.pattern[other] == "periodic") == pytest.approx(MIX.periodic_share, abs=0.03)
    assert np.mean(w.pattern[other] == "bursty") == pytest.approx(MIX.bursty_share, abs=0.03)
    # measured at the trace's minute resolution, on functions with enough arrivals
    cv = arrival_cv(w.counts)
    seen = np.isfinite(cv) & (w.rate_per_day < 1440) & (w.rate_per_day > 4)
    assert np.mean(cv[seen & timer] < 0.1) > 0.85  # near-periodic
    assert np.median(cv[seen & (w.pattern == "poisson")]) == pytest.approx(1.0, abs=0.2)
    assert np.median(cv[seen & (w.pattern == "bursty")]) > 1.2


def test_timers_fire_on_whole_minute_schedules_and_counts_follow_the_rates() -> None:
    w = generate_faas_workload(3000, np.random.default_rng(1), mix=MIX, minutes=2880)
    sparse_timer = np.flatnonzero((w.trigger == "timer") & (w.rate_per_day < 100))
    assert sparse_timer.size > 20
    for f in sparse_timer[:20]:
        busy = np.flatnonzero(w.counts[f])
        period = 1440 / w.rate_per_day[f]
        assert period == pytest.approx(round(period))
        if busy.size > 3:
            # a jitter of seconds moves an arrival across a minute edge at most
            assert np.all(np.abs(np.diff(busy) - round(period)) <= 1)
    expected = w.rate_per_day * 2
    for pattern in ("periodic", "poisson", "bursty"):
        big = (expected > 50) & (w.pattern == pattern)
        ratio = w.counts.sum(axis=1)[big] / expected[big]
        assert np.median(ratio) == pytest.approx(1.0, abs=0.1), pattern


def test_arrival_cv_of_known_series() -> None:
    counts = np.zeros((3, 100), dtype=np.int64)
    counts[0, ::10] = 1  # periodic
    counts[1, [0, 1, 2, 50, 51, 99]] = 1  # bursty
    counts[2, 5] = 1  # one arrival: no CV
    cv = arrival_cv(counts)
    assert cv[0] == 0.0
    assert cv[1] > 1.0
    assert np.isnan(cv[2])


def test_same_seed_same_workload() -> None:
    a = generate_faas_workload(200, np.random.default_rng(7), mix=MIX, minutes=300)
    b = generate_faas_workload(200, np.random.default_rng(7), mix=MIX, minutes=300)
    np.testing.assert_array_equal(a.counts, b.counts)


def test_all_periodic_mix_draws_no_bursts() -> None:
    mix = dataclasses.replace(MIX, periodic_share=1.0, bursty_share=0.0)
    w = generate_faas_workload(300, np.random.default_rng(2), mix=mix, minutes=600)
    assert set(w.pattern.tolist()) == {"periodic"}


@pytest.mark.parametrize(("n", "minutes"), [(0, 10), (10, 0), (10, 14 * 1440 + 1)])
def test_bad_sizes(n: int, minutes: int) -> None:
    with pytest.raises(InvalidSpecError):
        generate_faas_workload(n, np.random.default_rng(0), mix=MIX, minutes=minutes)


def test_timers_carry_their_published_share_of_invocations() -> None:
    from gpucast.simulate.faas_workload import timer_propensity

    w = generate_faas_workload(4000, np.random.default_rng(5), mix=MIX)
    timer = w.trigger == "timer"
    assert np.mean(timer) == pytest.approx(0.156, abs=0.02)
    # expected 2.0% (Fig. 2); a draw of 4,000 functions lands near it
    share = w.counts[timer].sum() / w.counts.sum()
    assert share == pytest.approx(MIX.timer_invocation_share, abs=0.015)
    rate = np.array([1.0, 10.0, 100.0, 1000.0])
    p = timer_propensity(rate, 0.25, 0.01)
    assert p.mean() == pytest.approx(0.25)
    assert (p * rate).sum() / rate.sum() == pytest.approx(0.01, rel=1e-3)
    assert np.all(np.diff(p) <= 0)  # rarer functions are likelier timers
    # a target already met by independent triggers keeps them independent
    assert timer_propensity(rate, 0.25, 0.5) == pytest.approx(np.full(4, 0.25))
