"""The serving simulator: exact small cases, invariants, determinism, SimPy equivalence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
from gpucast.simulate.serving import simulate_serving


def _deploy(
    curve: LatencyCurve,
    policy: BatchingPolicy,
    *,
    instances: int = 1,
    count: int = 1,
    lb: str = "round_robin",
    slowdown: tuple[float, ...] = (),
    overhead_s: float = 0.0,
) -> Deployment:
    model = ModelDeployment(
        model="m",
        latency=curve,
        batching=policy,
        instances=instances,
        request_overhead_s=overhead_s,
    )
    server = ServerSpec(
        name="G",
        memory_gib=16,
        price_usd_per_hour=2.0,
        models=(model,),
        colocation_slowdown=slowdown,
    )
    return Deployment(groups=(ServerGroup(server=server, count=count),), load_balancing=lb)  # type: ignore[arg-type]


def test_batch_waits_for_delay_then_takes_queue() -> None:
    # arrivals 0, 2, 4, 20 ms; batch latency 1 ms per request + 0; delay 5 ms, max batch 8
    curve = LatencyCurve.affine(0.0, 0.001, max_batch=8)
    policy = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.005)
    a = np.array([0.0, 0.002, 0.004, 0.020])
    r = simulate_serving(_deploy(curve, policy), {"m": a})
    # first batch due at 5 ms with 3 requests, runs 3 ms -> done at 8 ms
    np.testing.assert_allclose(r.latency_s[:3], [0.008, 0.006, 0.004])
    # the last one waits its 5 ms alone, runs 1 ms
    np.testing.assert_allclose(r.latency_s[3], 0.006)
    assert list(r.batch_size) == [3, 3, 3, 1]


def test_preferred_batch_sizes_trigger_and_shape_batches() -> None:
    policy = BatchingPolicy(
        max_batch_size=128, max_queue_delay_s=0.010, preferred_batch_sizes=(4, 8)
    )
    assert policy.trigger_size == 4 and policy.largest_batch == 8
    assert [policy.batch_for_queue(q) for q in (1, 3, 4, 5, 7, 8, 50)] == [1, 3, 4, 4, 4, 8, 8]
    curve = LatencyCurve.affine(0.0, 0.001, max_batch=8)
    a = np.arange(6) * 0.001  # 6 requests 1 ms apart
    r = simulate_serving(_deploy(curve, policy), {"m": a})
    # the 4th request arrives at 3 ms and fills a preferred batch of 4 at once
    assert list(r.batch_size[:4]) == [4, 4, 4, 4]
    np.testing.assert_allclose(r.latency_s[0], 0.003 + 0.004)


def test_shared_device_is_processor_sharing() -> None:
    # two instances, two simultaneous requests, no batching: device work 10 ms each, shared
    curve = LatencyCurve(batch_sizes=(1, 2), latency_s=(0.012, 0.024), host_s=0.002)
    policy = BatchingPolicy(max_batch_size=1)
    r = simulate_serving(_deploy(curve, policy, instances=2), {"m": np.array([0.0, 0.0])})
    # 2 ms host overlap, then 10 ms + 10 ms of work shared: both finish at 2 + 20 ms
    np.testing.assert_allclose(r.latency_s, [0.022, 0.022])
    r2 = simulate_serving(
        _deploy(curve, policy, instances=2, slowdown=(1.0, 1.5)), {"m": np.array([0.0, 0.0])}
    )
    np.testing.assert_allclose(r2.latency_s, [0.017, 0.017])


def test_memory_limit_rejects_a_model_set_that_does_not_fit() -> None:
    curve = LatencyCurve.affine(0.001, 0.001)
    model = ModelDeployment(model="m", latency=curve, instances=3, memory_gib=6.0)
    with pytest.raises(InvalidSpecError, match=r"need 18\.00 GiB"):
        ServerSpec(name="P4", memory_gib=8, price_usd_per_hour=1.0, models=(model,))


def test_two_models_share_a_gpu_and_are_reported_separately() -> None:
    c1 = LatencyCurve.affine(0.002, 0.001, max_batch=8)
    c2 = LatencyCurve.affine(0.004, 0.002, max_batch=8)
    pol = BatchingPolicy(max_batch_size=4, max_queue_delay_s=0.002)
    server = ServerSpec(
        name="T4",
        memory_gib=16,
        price_usd_per_hour=0.5,
        models=(
            ModelDeployment(model="a", latency=c1, batching=pol),
            ModelDeployment(model="b", latency=c2, batching=pol),
        ),
    )
    dep = Deployment(groups=(ServerGroup(server=server, count=2),))
    rng = np.random.default_rng(3)
    a, b = arr.poisson(100, 20, rng), arr.poisson(50, 20, rng)
    r = simulate_serving(dep, {"a": a, "b": b}, slo_s=0.05)
    alone = simulate_serving(
        Deployment(
            groups=(
                ServerGroup(
                    server=ServerSpec(
                        name="T4",
                        memory_gib=16,
                        price_usd_per_hour=0.5,
                        models=(ModelDeployment(model="a", latency=c1, batching=pol),),
                    ),
                    count=2,
                ),
            )
        ),
        {"a": a},
    )
    d = r.to_dict()
    assert set(d["models"]) == {"a", "b"}  # type: ignore[arg-type]
    assert r.requests == a.size + b.size
    # sharing the GPU with b makes a slower than alone
    assert np.mean(r.latencies("a")) > np.mean(alone.latencies("a"))


def test_same_seed_same_result_bit_for_bit() -> None:
    curve = LatencyCurve.affine(0.003, 0.001, max_batch=16)
    pol = BatchingPolicy(max_batch_size=16, max_queue_delay_s=0.004)
    a = arr.poisson(800, 10, np.random.default_rng(1))
    dep = _deploy(curve, pol, count=3, lb="random", instances=2)
    r1 = simulate_serving(dep, {"m": a}, seed=5)
    r2 = simulate_serving(dep, {"m": a}, seed=5)
    r3 = simulate_serving(dep, {"m": a}, seed=6)
    assert r1.latency_s.tobytes() == r2.latency_s.tobytes()
    assert r1.latency_s.tobytes() != r3.latency_s.tobytes()


@settings(max_examples=40, deadline=None)
@given(
    rate=st.floats(10, 2000),
    max_batch=st.integers(1, 16),
    delay_ms=st.floats(0, 20),
    instances=st.integers(1, 3),
    servers=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_invariants(
    rate: float, max_batch: int, delay_ms: float, instances: int, servers: int, seed: int
) -> None:
    curve = LatencyCurve.affine(0.002, 0.0005, max_batch=max_batch, host_s=0.001)
    pol = BatchingPolicy(max_batch_size=max_batch, max_queue_delay_s=delay_ms / 1e3)
    a = arr.poisson(rate, 2.0, np.random.default_rng(seed))
    if a.size == 0:
        return
    r = simulate_serving(
        _deploy(curve, pol, instances=instances, count=servers), {"m": a}, slo_s=0.05
    )
    assert r.requests == a.size  # requests in = requests out
    assert np.all(r.latency_s >= curve.latency(1) - 1e-12)
    assert np.all((r.batch_size >= 1) & (r.batch_size <= max_batch))
    assert sum(s.requests for s in r.servers) == a.size
    for s in r.servers:
        assert 0.0 <= s.busy_fraction <= 1.0 and 0.0 <= s.instance_utilisation <= 1.0
    att = r.slo_attainment()
    assert att is not None and 0.0 <= att <= 1.0
    d = r.to_dict()
    assert d["cost_usd_per_hour"] == pytest.approx(2.0 * servers)


def test_matches_an_equivalent_simpy_model(load_benchmark: Callable[[str], Any]) -> None:
    pytest.importorskip("simpy")
    bench = load_benchmark("serving_speed")
    a = arr.poisson(1200.0, 5.0, np.random.default_rng(2))
    ours = simulate_serving(bench.deployment(), {"m": a}).latencies()
    np.testing.assert_allclose(ours, bench.simpy_latencies(a), rtol=0, atol=1e-12)


def test_cold_start_delays_the_first_requests() -> None:
    curve = LatencyCurve.affine(0.001, 0.001, max_batch=8)
    model = ModelDeployment(
        model="m",
        latency=curve,
        cold_start_s=2.0,
        batching=BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.001),
    )
    dep = Deployment(
        groups=(
            ServerGroup(
                server=ServerSpec(name="G", memory_gib=8, price_usd_per_hour=1, models=(model,))
            ),
        )
    )
    r = simulate_serving(dep, {"m": arr.constant(100, 5)})
    assert r.latency_s[0] > 2.0 and r.latency_s[-1] < 0.05


def test_rejects_unknown_or_missing_models() -> None:
    dep = _deploy(LatencyCurve.affine(0.001, 0.001), BatchingPolicy())
    with pytest.raises(InvalidSpecError, match="not deployed"):
        simulate_serving(dep, {"m": np.zeros(1), "x": np.zeros(1)})
    with pytest.raises(InvalidSpecError, match="none given"):
        simulate_serving(dep, {})
    with pytest.raises(InvalidSpecError, match="sorted"):
        simulate_serving(dep, {"m": np.array([1.0, 0.5])})


def test_a_replayed_trace_is_held_once_and_never_changed() -> None:
    # #21: a 10 M-request replay must not hold its per-request arrays twice
    raw = np.array([5.0, 5.5, 6.0, 9.0, 12.0])
    times = arr.from_timestamps(raw, duration_s=6.5)
    np.testing.assert_allclose(times, [0.0, 0.5, 1.0, 4.0])
    np.testing.assert_allclose(raw, [5.0, 5.5, 6.0, 9.0, 12.0])  # the caller's array untouched
    assert not times.flags.writeable and times.base is None
    curve = LatencyCurve.affine(0.0, 0.001, max_batch=8)
    r = simulate_serving(_deploy(curve, BatchingPolicy(max_batch_size=8)), {"m": times})
    assert r.arrival_s is times  # kept, not copied
    mine = np.array([0.0, 1.0])  # a caller's writeable array is copied, then frozen
    r2 = simulate_serving(_deploy(curve, BatchingPolicy(max_batch_size=8)), {"m": mine})
    assert not np.shares_memory(r2.arrival_s, mine) and not r2.arrival_s.flags.writeable
    mine[0] = 0.5
    assert r2.arrival_s[0] == 0.0
    with pytest.raises(ValueError):
        r.latency_s[0] = 1.0
