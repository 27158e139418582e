"""Arrival generators."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.simulate import arrivals as arr


def test_poisson_rate_and_order() -> None:
    a = arr.poisson(500.0, 100.0, np.random.default_rng(0))
    assert a.size == pytest.approx(50_000, rel=0.03)
    assert np.all(np.diff(a) >= 0) and a[-1] < 100.0
    gaps = np.diff(a)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.05)


def test_constant_and_count() -> None:
    a = arr.constant(4.0, 2.0)
    np.testing.assert_allclose(a, [0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75])
    assert arr.constant_count(203.0, 5394).size == 5394


def test_bursty_mean_rate_and_burstiness() -> None:
    rates, sojourn = (50.0, 400.0), (8.0, 2.0)
    a = arr.bursty(rates, sojourn, 2000.0, np.random.default_rng(1))
    assert a.size / 2000.0 == pytest.approx(arr.bursty_mean_rate(rates, sojourn), rel=0.1)
    counts = np.bincount(a.astype(int))
    assert counts.var() / counts.mean() > 5  # far burstier than Poisson (ratio 1)


def test_counts_and_timestamps() -> None:
    a = arr.from_counts([3, 0, 5], 60.0, np.random.default_rng(2))
    assert a.size == 8 and np.sum(a < 60) == 3 and np.sum(a >= 120) == 5
    t = arr.from_timestamps([10.0, 12.0, 11.0, 14.0], target_rate_rps=3.0)
    np.testing.assert_allclose(t, [0, 0.25, 0.5, 1.0])


@pytest.mark.parametrize("rate", [0.0, -5.0, float("nan")])
def test_bad_rate_is_one_clear_error(rate: float) -> None:
    with pytest.raises(InvalidSpecError, match="rate: must be a request rate > 0"):
        arr.poisson(rate, 10.0, np.random.default_rng(0))


def test_busiest_window_holds_the_most_arrivals_and_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    # calm 1 req/s for 100 s, a 10 s burst at 20 req/s from t=40, calm again
    times = np.sort(np.concatenate([rng.uniform(0, 100, 100), rng.uniform(40, 50, 200)]))
    lo, hi = arr.busiest_window(times, 10.0)
    start = times[lo]
    assert 30.0 < start <= 50.0 and hi - lo > 150
    assert np.all(times[lo:hi] < start + 10.0) and (hi == times.size or times[hi] >= start + 10)
    best = max(int(np.count_nonzero((times >= t) & (times < t + 10.0))) for t in times)
    assert hi - lo == best
    # a window longer than the trace holds all of it; ties go to the earliest window
    assert arr.busiest_window(times, 1e6) == (0, times.size)
    assert arr.busiest_window(np.arange(10.0), 2.0) == (0, 2)
    with pytest.raises(InvalidSpecError, match="duration"):
        arr.busiest_window(times, 0.0)
