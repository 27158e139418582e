"""Host contention: a shared host path adds ``x * rho / (1 - rho)`` to every request."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import (
    BatchingPolicy,
    Deployment,
    LatencyCurve,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.simulate import arrivals as arr
from gpucast.simulate.serving import (
    HOST_RHO_CAP,
    host_queueing,
    simulate_serving,
    windowed_rate,
)


def _deployment(capacity: float | None, *, count: int = 1, models: int = 1) -> Deployment:
    curve = LatencyCurve.affine(0.002, 0.001, max_batch=8)
    deps = tuple(
        ModelDeployment(
            model=f"m{k}",
            latency=curve,
            batching=BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.002),
            instances=2,
            request_overhead_s=0.001,
        )
        for k in range(models)
    )
    server = ServerSpec(
        name="G", memory_gib=16, price_usd_per_hour=1.0, models=deps, host_capacity_rps=capacity
    )
    return Deployment(groups=(ServerGroup(server=server, count=count),))


def test_windowed_rate_of_constant_arrivals_is_the_rate_even_at_the_edges() -> None:
    t = arr.constant_count(100.0, 1000)  # 10 s at 100 req/s
    rate = windowed_rate(t)
    assert rate.shape == t.shape
    assert np.all(np.abs(rate / 100.0 - 1.0) < 0.03)
    assert windowed_rate(np.array([5.0])).tolist() == [0.0]
    assert windowed_rate(np.zeros(0)).size == 0


def test_windowed_rate_follows_a_burst() -> None:
    t = np.concatenate([arr.constant_count(50.0, 250), 5.0 + arr.constant_count(400.0, 2000)])
    rate = windowed_rate(t)
    assert np.median(rate[:200]) == pytest.approx(50.0, rel=0.05)
    assert np.median(rate[-1500:]) == pytest.approx(400.0, rel=0.05)


def test_delay_is_the_processor_sharing_wait_and_is_capped() -> None:
    busy, rho = host_queueing(np.array([0.0, 50.0, 75.0, 200.0]), 100.0)
    np.testing.assert_allclose(busy[:3], [0.0, 1.0, 3.0])
    assert busy[3] == pytest.approx(HOST_RHO_CAP / (1.0 - HOST_RHO_CAP))
    np.testing.assert_allclose(rho, [0.0, 0.5, 0.75, 2.0])  # utilisation itself not capped


def test_unlimited_host_changes_nothing() -> None:
    a = arr.poisson(80.0, 20.0, np.random.default_rng(3))
    base = simulate_serving(_deployment(None), {"m0": a})
    assert base.servers[0].host_utilisation is None
    assert base.to_dict()["servers"][0]["host_utilisation"] is None  # type: ignore[index]


def test_every_request_waits_the_same_host_delay() -> None:
    a = arr.constant_count(150.0, 3000) + 0.001 * np.random.default_rng(1).random(3000)
    base = simulate_serving(_deployment(None), {"m0": a}).latencies()
    hit = simulate_serving(_deployment(300.0), {"m0": a})
    extra = hit.latencies() - base
    # rate 150 against 300: rho = 0.5, so a job of work x waits x more; x = median latency
    assert hit.servers[0].host_utilisation == pytest.approx(0.5, rel=0.02)
    inner = extra[300:-300]  # away from the edges of the rate window
    np.testing.assert_allclose(inner, np.median(base), rtol=0.03)
    assert np.all(extra >= 0)


def test_more_load_more_stretch_and_overload_is_reported() -> None:
    lows, highs = [], []
    for rate, out in ((100.0, lows), (250.0, highs)):
        a = arr.constant_count(rate, 2000)
        out.append(np.median(simulate_serving(_deployment(300.0), {"m0": a}).latencies()))
    assert highs[0] > 2.0 * lows[0]
    a = arr.constant_count(400.0, 2000)
    over = simulate_serving(_deployment(300.0), {"m0": a})
    assert over.servers[0].host_utilisation is not None
    assert over.servers[0].host_utilisation > 1.0


def test_rate_is_per_server_and_counts_every_model_on_it() -> None:
    a = arr.constant_count(150.0, 3000)
    # two servers split the load: each sees 75 of its 300 -> stretch 4/3
    two = simulate_serving(_deployment(300.0, count=2), {"m0": a})
    assert [s.host_utilisation for s in two.servers] == pytest.approx([0.25, 0.25], rel=0.03)
    # two models on one server: each at 150 -> the host sees 300 of 400
    both = simulate_serving(_deployment(400.0, models=2), {"m0": a, "m1": a})
    assert both.servers[0].host_utilisation == pytest.approx(0.75, rel=0.03)


def test_capacity_must_be_positive() -> None:
    good = _deployment(100.0).groups[0].server
    for bad in (0.0, -5.0, float("nan"), float("inf")):
        with pytest.raises(InvalidSpecError, match="host_capacity_rps"):
            dataclasses.replace(good, host_capacity_rps=bad)
