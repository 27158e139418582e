"""The synthetic FaaS workload reproduces the published characteristics it is built from."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.simulate.faas_workload import generate_faas_workload


def test_invocation_frequency_mix_and_triggers() -> None:
    w = generate_faas_workload(4000, np.random.default_rng(0))
    per_day = w.counts.sum(axis=1)
    # Shahrad et al.: 45% of functions at most hourly, 81% at most once a minute
    assert np.mean(per_day <= 24) == pytest.approx(0.45, abs=0.04)
    assert np.mean(per_day <= 1440) == pytest.approx(0.81, abs=0.04)
    assert np.mean(w.trigger == "http") == pytest.approx(0.55, abs=0.03)
    assert np.mean(w.trigger == "timer") == pytest.approx(0.156, abs=0.02)
    # durations: log-normal mu -0.38, sigma 2.36 -> median exp(-0.38) = 0.68 s
    assert np.median(w.duration_s) == pytest.approx(np.exp(-0.38), rel=0.15)


def test_timers_are_periodic_and_counts_follow_the_rates() -> None:
    w = generate_faas_workload(3000, np.random.default_rng(1), minutes=2880)
    sparse_timer = np.flatnonzero((w.trigger == "timer") & (w.rate_per_day < 100))
    for f in sparse_timer[:20]:
        busy = np.flatnonzero(w.counts[f])
        if busy.size > 3:
            gaps = np.diff(busy)
            assert gaps.max() - gaps.min() <= 1  # constant period, up to minute rounding
    expected = w.rate_per_day * 2
    big = expected > 50
    ratio = w.counts.sum(axis=1)[big] / expected[big]
    assert np.median(ratio) == pytest.approx(1.0, abs=0.1)


def test_same_seed_same_workload() -> None:
    a = generate_faas_workload(200, np.random.default_rng(7), minutes=300)
    b = generate_faas_workload(200, np.random.default_rng(7), minutes=300)
    np.testing.assert_array_equal(a.counts, b.counts)


@pytest.mark.parametrize(("n", "minutes"), [(0, 10), (10, 0), (10, 14 * 1440 + 1)])
def test_bad_sizes(n: int, minutes: int) -> None:
    with pytest.raises(InvalidSpecError):
        generate_faas_workload(n, np.random.default_rng(0), minutes=minutes)
