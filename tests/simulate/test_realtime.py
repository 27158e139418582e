"""Real-time serving: FIFO, EDF and fixed priority in the event engine, deadline misses."""

from __future__ import annotations

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
from gpucast.simulate.realtime import (
    check_deadlines,
    check_queue_timeouts,
    deadline_outcomes,
    fastest_service_s,
)
from gpucast.simulate.serving import simulate_serving

#: 10 ms for a batch of one, +1 ms per extra request (batches up to 8)
CURVE = LatencyCurve(batch_sizes=(1, 8), latency_s=(0.010, 0.017))


def two_classes(
    scheduling: str, *, urgent_deadline_s: float = 0.030, lax_deadline_s: float = 1.0
) -> Deployment:
    policy = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.0)
    urgent = ModelDeployment(
        model="urgent", latency=CURVE, batching=policy, priority=0, deadline_s=urgent_deadline_s
    )
    lax = ModelDeployment(
        model="bulk", latency=CURVE, batching=policy, priority=1, deadline_s=lax_deadline_s
    )
    server = ServerSpec(name="gpu", memory_gib=16, price_usd_per_hour=1.0, models=(urgent, lax))
    return Deployment(groups=(ServerGroup(server=server),), scheduling=scheduling)  # type: ignore[arg-type]


def arrivals(rng: np.random.Generator, urgent_rate: float, bulk_rate: float, t: float):  # type: ignore[no-untyped-def]
    def poisson(rate: float) -> np.ndarray:
        n = rng.poisson(rate * t)
        return np.sort(rng.uniform(0.0, t, n))

    return {"urgent": poisson(urgent_rate), "bulk": poisson(bulk_rate)}


def run(scheduling: str, arr, **kw):  # type: ignore[no-untyped-def]
    dep = two_classes(scheduling, **kw)
    result = simulate_serving(dep, arr, seed=0)
    return {o.model: o for o in deadline_outcomes(result, dep)}, result


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31))
def test_edf_and_priority_meet_the_urgent_class_where_fifo_misses(seed: int) -> None:
    # a backlog of bulk requests (a burst at t=0) with a trickle of urgent ones: FIFO makes
    # the urgent requests wait behind the backlog; EDF and priority serve them at the next
    # batch boundary (at most one 17 ms bulk batch + their own small batch < 30 ms)
    rng = np.random.default_rng(seed)
    arr = arrivals(rng, 5.0, 300.0, 4.0)
    arr["bulk"] = np.sort(np.concatenate([np.zeros(400), arr["bulk"]]))
    fifo, _ = run("fifo", arr)
    edf, _ = run("edf", arr)
    prio, _ = run("priority", arr)
    if fifo["urgent"].requests == 0:
        return
    assert fifo["urgent"].deadline_miss_rate > 0.0
    for out in (edf, prio):
        assert out["urgent"].deadline_miss_rate == 0.0
        assert out["urgent"].worst_latency_s <= 0.030


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(["fifo", "edf", "priority", "none"]))
def test_every_request_is_served_once_whatever_the_scheduler(seed: int, scheduling: str) -> None:
    rng = np.random.default_rng(seed)
    arr = arrivals(rng, 20.0, 100.0, 2.0)
    outcomes, result = run(scheduling, arr)
    assert result.latency_s.size == arr["urgent"].size + arr["bulk"].size
    assert np.all(np.isfinite(result.latency_s))
    assert np.all(result.latency_s >= 0.010 - 1e-12)
    assert sum(o.requests for o in outcomes.values()) == result.latency_s.size


def test_one_batch_at_a_time_under_a_scheduler() -> None:
    arr = {"urgent": np.array([0.0]), "bulk": np.array([0.0])}
    _, result = run("fifo", arr)
    # the two classes share one instance: the second batch starts when the first ends
    assert sorted(result.latency_s.tolist()) == pytest.approx([0.010, 0.020])


def test_a_deadline_shorter_than_the_fastest_service_is_rejected() -> None:
    dep = two_classes("edf", urgent_deadline_s=0.005)
    assert fastest_service_s(dep.groups[0].server.models[0]) == pytest.approx(0.010)
    with pytest.raises(InvalidSpecError) as caught:
        check_deadlines(dep)
    message = str(caught.value)
    assert "urgent: 5 ms is shorter than its fastest possible service, 10 ms" in message
    check_deadlines(two_classes("edf"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"priority": -1}, "priority"), ({"deadline_s": 0.0}, "deadline"),
     ({"deadline_s": float("nan")}, "deadline")],
)  # fmt: skip
def test_bad_class_settings(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        ModelDeployment(model="m", latency=CURVE, **kwargs)  # type: ignore[arg-type]


def test_unknown_scheduler() -> None:
    with pytest.raises(InvalidSpecError, match="scheduler"):
        two_classes("lifo")


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31))
def test_a_scheduler_keeps_the_batching_delay(seed: int) -> None:
    """QA 34 #1: with a deadline (a scheduler) requests were batched at once, the delay
    dropped while the header still said "delay 10 ms". One model with a lax deadline now
    batches exactly as without one; the delay still matters (0 ms gives other batches)."""
    arr = {"m": np.sort(np.random.default_rng(seed).uniform(0.0, 2.0, 300))}

    def result(scheduling: str, delay_s: float):  # type: ignore[no-untyped-def]
        policy = BatchingPolicy(max_batch_size=8, max_queue_delay_s=delay_s)
        dep = ModelDeployment(model="m", latency=CURVE, batching=policy, deadline_s=1.0)
        server = ServerSpec(name="gpu", memory_gib=16, price_usd_per_hour=1.0, models=(dep,))
        groups = (ServerGroup(server=server),)
        return simulate_serving(Deployment(groups=groups, scheduling=scheduling), arr, seed=0)  # type: ignore[arg-type]

    plain = result("none", 0.010)
    for scheduling in ("fifo", "edf", "priority"):
        scheduled = result(scheduling, 0.010)
        assert np.array_equal(scheduled.batch_size, plain.batch_size)
        np.testing.assert_allclose(scheduled.latency_s, plain.latency_s, rtol=0, atol=1e-12)
    assert not np.array_equal(result("fifo", 0.0).batch_size, plain.batch_size)


def test_a_queue_timeout_shorter_than_the_way_to_the_batcher_is_rejected() -> None:
    # QA 40 V #2: 1 MB over a 8 Gbit/s link (1 ms), 2 ms on the host alone, 1 ms of PCIe copy:
    # a request reaches the batcher 4 ms after it arrives, so a 3 ms timeout drops every one
    def with_timeout(timeout_s: float) -> Deployment:
        dep = ModelDeployment(
            model="m",
            latency=LatencyCurve.affine(0.002, 0.001),
            batching=BatchingPolicy(queue_timeout_s=timeout_s),
            input_bytes=1e6,
        )
        server = ServerSpec(
            name="g", models=(dep,), memory_gib=16.0, price_usd_per_hour=1.0,
            host_s=0.002, network_gbps=8.0, pcie_gbps=1.0,
        )  # fmt: skip
        return Deployment(groups=(ServerGroup(server=server),))

    with pytest.raises(InvalidSpecError) as caught:
        check_queue_timeouts(with_timeout(0.003))
    message = str(caught.value)
    assert message.startswith("queue-timeout-ms: m: 3 ms is shorter than the 4 ms")
    check_queue_timeouts(with_timeout(0.004))
