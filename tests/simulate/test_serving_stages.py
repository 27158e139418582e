"""Host-path stages: the FIFO link (Lindley recursion, vectorised) and the shared host."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.simulate import arrivals as arr
from gpucast.simulate.stages import (
    fifo_busy_s,
    fifo_departures,
    shared_departures,
    shared_kappa,
    shared_solo_s,
)


def _fifo_loop(a: list[float], s: list[float]) -> list[float]:
    out, free = [], 0.0
    for t, x in zip(a, s, strict=True):
        free = max(t, free) + x
        out.append(free)
    return out


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 0.01, allow_nan=False), min_size=1, max_size=60),
    service=st.lists(st.floats(0.0, 0.02, allow_nan=False), min_size=60, max_size=60),
)
def test_fifo_is_the_lindley_recursion(gaps: list[float], service: list[float]) -> None:
    a = np.cumsum(gaps)
    s = np.asarray(service[: a.size])
    got = fifo_departures(a, s)
    np.testing.assert_allclose(got, _fifo_loop(a.tolist(), s.tolist()), atol=1e-12)
    assert np.all(np.diff(got) >= 0) and np.all(got >= a + s - 1e-12)
    horizon = float(got[-1])
    assert 0.0 <= fifo_busy_s(a, got, s, horizon) <= horizon + 1e-12


def test_fifo_link_carries_its_rate_under_overload() -> None:
    a = arr.constant_count(300.0, 3000)  # 10 s at 300 req/s
    out = fifo_departures(a, 1.0 / 146.0)  # a link that moves 146 requests/s
    assert np.diff(out)[-100:] == pytest.approx(1.0 / 146.0)
    assert (out <= 10.0).sum() / 10.0 == pytest.approx(146.0, rel=0.01)


def test_shared_host_alone_takes_its_solo_time() -> None:
    a = np.arange(10) * 1.0  # far apart: never share
    np.testing.assert_allclose(shared_departures(a, 0.01, 50.0) - a, 0.02)  # max(x, 1/C)
    np.testing.assert_allclose(shared_departures(a, 0.03, 50.0) - a, 0.03)
    np.testing.assert_allclose(shared_departures(a, 0.03, None) - a, 0.03)  # unlimited: delay
    assert shared_solo_s(0.0, None) == 0.0


def test_kappa_makes_the_full_host_carry_its_capacity() -> None:
    x, c, k = 0.01, 250.0, 64
    kappa = shared_kappa(x, c, k)
    assert k / (x * (1 + (k - 1) * kappa)) == pytest.approx(c)
    assert shared_kappa(1 / c, c, k) == pytest.approx(1.0)  # plain processor sharing
    assert shared_kappa(0.1, 250.0, 8) == 0.0  # 8 at once already carry less than 250


def test_two_simultaneous_requests_share_the_host() -> None:
    # solo 10 ms, capacity 150: x C = 1.5, kappa (2 - 1.5) / (1.5 * 1) = 1/3 with K = 2
    out = shared_departures(np.array([0.0, 0.0]), 0.010, 150.0, concurrency=2)
    np.testing.assert_allclose(out, [0.010 * (1 + 1 / 3)] * 2)


@pytest.mark.parametrize("capacity", [80.0, 200.0])
def test_shared_host_holds_its_capacity_under_overload(capacity: float) -> None:
    a = arr.constant_count(3 * capacity, int(3 * capacity * 60))  # 3x overload, 60 s
    out = shared_departures(a, 0.010, capacity)
    late = out[(out > 30.0) & (out <= 60.0)]
    assert late.size / 30.0 == pytest.approx(capacity, rel=0.01)
    assert np.all(np.diff(out) >= 0)  # first in, first out


def test_shared_host_stretches_every_request_as_it_fills() -> None:
    a = arr.constant_count(150.0, 3000)
    x = 0.010
    out = shared_departures(a, x, 250.0) - a
    # fluid steady state: n = rate L, L = x (1 + (n - 1) kappa)
    kappa = shared_kappa(x, 250.0, 64)
    fluid = x * (1 - kappa) / (1 - 150.0 * kappa * x)
    assert np.median(out) == pytest.approx(fluid, rel=0.05)
    assert np.percentile(out, 95) - np.percentile(out, 5) < 0.2 * np.median(out)  # a shift
    assert math.isfinite(float(out.max()))
