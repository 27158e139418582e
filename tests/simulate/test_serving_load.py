"""The serving core under load: conservation, bounds, overload, drops, closed loops, the
event engine against the batch-level loops, the saturation search and the host calibration."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import (
    BatchingPolicy,
    ClosedLoop,
    Deployment,
    LatencyCurve,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.simulate import arrivals as arr
from gpucast.simulate import serving as sim
from gpucast.simulate._serving_result import _result
from gpucast.simulate.serving_events import run_open_loop

CURVE = LatencyCurve(
    batch_sizes=(1, 2, 4, 8), latency_s=(0.006, 0.010, 0.018, 0.034), host_s=0.0017
)


def _deploy(
    *,
    instances: int = 4,
    count: int = 1,
    policy: BatchingPolicy | None = None,
    input_bytes: float = 0.0,
    lb: str = "round_robin",
    **server: object,
) -> Deployment:
    model = ModelDeployment(
        model="m",
        latency=CURVE,
        batching=policy
        or BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.010, preferred_batch_sizes=(4, 8)),
        instances=instances,
        request_overhead_s=0.0002,
        input_bytes=input_bytes,
    )
    spec = ServerSpec(name="G", memory_gib=16, price_usd_per_hour=1.0, models=(model,), **server)  # type: ignore[arg-type]
    return Deployment(groups=(ServerGroup(server=spec, count=count),), load_balancing=lb)  # type: ignore[arg-type]


def _events(dep: Deployment, a: np.ndarray, horizon: float) -> sim.ServingResult:
    """The event-driven engine on open-loop traffic (what bounded queues run on)."""
    owner = np.arange(a.size, dtype=np.int64) % sum(g.count for g in dep.groups)
    record = run_open_loop(dep, {"m": a}, {"m": owner}, horizon)
    return _result(dep, record, horizon_s=horizon, slo_s=None, warmup_s=0.0, seed=0,
                   sources=None)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(
    rate=st.floats(20.0, 600.0),
    instances=st.integers(1, 4),
    count=st.integers(1, 2),
    delay_ms=st.sampled_from([0.0, 2.0, 10.0]),
    host=st.sampled_from([None, (0.004, 300.0), (0.0, 150.0)]),
    link=st.sampled_from([None, 10.0, 1.0]),
    seed=st.integers(0, 5),
)
def test_event_engine_matches_the_batch_loops(
    rate: float, instances: int, count: int, delay_ms: float,
    host: tuple[float, float] | None, link: float | None, seed: int,
) -> None:  # fmt: skip
    policy = BatchingPolicy(max_batch_size=8, max_queue_delay_s=delay_ms / 1e3)
    extra = {} if host is None else {"host_s": host[0], "host_capacity_rps": host[1]}
    dep = _deploy(instances=instances, count=count, policy=policy, input_bytes=150_528,
                  network_gbps=link, pcie_gbps=16.0, **extra)  # fmt: skip
    a = arr.poisson(rate, 4.0, np.random.default_rng(seed))
    fast = sim.simulate_serving(dep, {"m": a}, horizon_s=4.0)
    slow = _events(dep, a, 4.0)
    np.testing.assert_allclose(fast.latency_s, slow.latency_s, rtol=0, atol=1e-9)
    assert fast.batch_size.tolist() == slow.batch_size.tolist()
    for f, s in zip(fast.servers, slow.servers, strict=True):
        assert f.batches == s.batches
        assert f.busy_fraction == pytest.approx(s.busy_fraction, abs=1e-9)
        assert dict(f.stages) == pytest.approx(dict(s.stages), abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(
    rate=st.floats(50.0, 1500.0),
    max_queue=st.sampled_from([None, 1, 4, 32]),
    timeout_ms=st.sampled_from([None, 5.0, 50.0]),
    host_capacity=st.sampled_from([None, 200.0]),
    closed=st.sampled_from([None, 3, 40]),
    seed=st.integers(0, 3),
)
def test_requests_in_equal_served_plus_dropped_plus_in_flight(
    rate: float, max_queue: int | None, timeout_ms: float | None,
    host_capacity: float | None, closed: int | None, seed: int,
) -> None:  # fmt: skip
    policy = BatchingPolicy(
        max_batch_size=8, max_queue_delay_s=0.005, max_queue_size=max_queue,
        queue_timeout_s=None if timeout_ms is None else timeout_ms / 1e3,
    )  # fmt: skip
    dep = _deploy(policy=policy, host_capacity_rps=host_capacity, host_s=0.002)
    if closed is None:
        a = arr.poisson(rate, 5.0, np.random.default_rng(seed))
        run = sim.simulate_serving(dep, {"m": a}, horizon_s=5.0, seed=seed)
        # throughput never exceeds what was offered (warm-up 0: every completion arrived)
        assert run.throughput_rps() <= run.offered_rps() + 1e-9
    else:
        run = sim.simulate_closed_loop(dep, {"m": ClosedLoop(clients=closed, think_s=0.002)},
                                       5.0, seed=seed)  # fmt: skip
        assert run.counts()["in_flight"] <= closed  # one outstanding request per client
    c = run.counts()
    assert c["requests"] == run.requests == c["served"] + c["dropped"] + c["in_flight"]
    assert c["dropped"] == c["queue_full"] + c["timeout"]
    if max_queue is None and timeout_ms is None:
        assert c["dropped"] == 0
    dropped = run.dropped
    assert np.all(np.isnan(run.latency_s[dropped])) and np.all(run.batch_size[dropped] == 0)
    assert np.all(run.latency_s[~dropped] > 0)
    for s in run.servers:  # utilisation <= 1
        assert 0.0 <= s.busy_fraction <= 1.0 + 1e-9
        assert 0.0 <= s.instance_utilisation <= 1.0 + 1e-9
        for u in s.stages.values():
            assert 0.0 <= u <= 1.0 + 1e-9


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), clients=st.integers(1, 30))
def test_same_seed_same_result(seed: int, clients: int) -> None:
    policy = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.002, max_queue_size=8)
    dep = _deploy(policy=policy, count=3, lb="random")
    loop = ClosedLoop(clients=clients, think_s=0.01)
    one = sim.simulate_closed_loop(dep, {"m": loop}, 3.0, seed=seed)
    two = sim.simulate_closed_loop(dep, {"m": loop}, 3.0, seed=seed)
    assert one.arrival_s.tobytes() == two.arrival_s.tobytes()
    assert np.array_equal(one.latency_s, two.latency_s, equal_nan=True)
    a = arr.poisson(400.0, 3.0, np.random.default_rng(seed))
    r1, r2 = (sim.simulate_serving(dep, {"m": a}, seed=seed) for _ in range(2))
    assert np.array_equal(r1.latency_s, r2.latency_s, equal_nan=True)


@pytest.mark.parametrize(
    "server, capacity",
    [
        ({}, None),  # the device: 4 instances sharing it, batches of 8
        ({"host_capacity_rps": 150.0, "host_s": 0.010}, 150.0),  # the shared host
        ({"network_gbps": 146 * 8 * 150_528 / 1e9}, 146.0),  # a link that moves 146 req/s
    ],
)
def test_overload_holds_the_peak_throughput(
    server: dict[str, float], capacity: float | None
) -> None:
    dep = _deploy(input_bytes=150_528, **server)
    peaks = []
    for rate in (1.5, 3.0):
        offered = rate * (capacity or 250.0)
        a = arr.constant(offered, 60.0)
        run = sim.simulate_serving(dep, {"m": a}, horizon_s=60.0)
        peaks.append(run.throughput_rps())
        c = run.counts()
        assert c["in_flight"] > 0.2 * c["requests"]  # the queue grew instead
        assert np.median(run.latencies()) > 1.0  # and so did the latency
    assert peaks[1] == pytest.approx(peaks[0], rel=0.02)  # 3x carries what 1.5x carried
    if capacity is not None:
        assert peaks[0] == pytest.approx(capacity, rel=0.02)
    else:
        assert peaks[0] == pytest.approx(8 / CURVE.device_s(8), rel=0.02)


def test_bounded_queue_sheds_load_and_keeps_latency_bounded() -> None:
    bounded = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.005, max_queue_size=16)
    a = arr.poisson(600.0, 30.0, np.random.default_rng(2))
    run = sim.simulate_serving(_deploy(policy=bounded), {"m": a}, horizon_s=30.0)
    c = run.counts()
    assert c["queue_full"] > 0.4 * c["requests"] and c["timeout"] == 0
    assert run.throughput_rps() == pytest.approx(8 / CURVE.device_s(8), rel=0.03)
    assert np.percentile(run.latencies(), 99) < 0.3  # bounded: no ever-growing wait
    timed = dataclasses.replace(bounded, max_queue_size=None, queue_timeout_s=0.05)
    late = sim.simulate_serving(_deploy(policy=timed), {"m": a}, horizon_s=30.0)
    assert late.counts()["timeout"] > 0.4 * c["requests"]
    assert np.percentile(late.latencies(), 99) < 0.05 + 0.2


def test_queue_bound_and_timeout_hold_where_the_host_is_the_bottleneck() -> None:
    # the shared host carries 150 req/s, the device ~250: the requests pile up on the host,
    # where a bound or timeout applied only at the batcher never sees them (issue #13)
    host = {"host_s": 0.002, "host_capacity_rps": 150.0}
    a = arr.poisson(400.0, 30.0, np.random.default_rng(3))
    bounded = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.005, max_queue_size=16)
    run = sim.simulate_serving(_deploy(policy=bounded, **host), {"m": a}, horizon_s=30.0)
    c = run.counts()
    assert c["queue_full"] > 0.4 * c["requests"] and c["in_flight"] <= 16
    assert run.throughput_rps() == pytest.approx(150.0, rel=0.03)
    # 16 admitted share the host: ~16 / 150 s on it, then a batch on the device
    assert np.percentile(run.latencies(), 99) < 16 / 150.0 + 0.06
    # a timeout from arrival drops those still waiting for a place on the host
    timed = dataclasses.replace(bounded, max_queue_size=None, queue_timeout_s=0.05)
    late = sim.simulate_serving(_deploy(policy=timed, host_concurrency=4, **host), {"m": a},
                                horizon_s=30.0)  # fmt: skip
    lc = late.counts()
    assert lc["timeout"] > 0.4 * lc["requests"] and lc["in_flight"] < 50
    assert np.percentile(late.latencies(), 99) < 0.05 + 4 / 150.0 + 0.06


def test_latency_falls_as_load_fills_the_batches() -> None:
    # the batcher waits up to 60 ms for a preferred batch of 8: at 100 req/s a batch fills
    # in ~70 ms (the delay runs out first), at 220 req/s in 32 ms (the device carries 247)
    policy = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.060, preferred_batch_sizes=(8,))
    dep = _deploy(policy=policy, instances=2)
    p50 = []
    for rate in (100.0, 160.0, 220.0):
        a = arr.constant(rate, 30.0, jitter_s=1 / rate, rng=np.random.default_rng(0))
        p50.append(float(np.median(sim.simulate_serving(dep, {"m": a}).latencies())))
    assert p50[0] > p50[1] > p50[2]
    assert p50[0] - p50[2] > 0.010


def test_closed_loop_throughput_follows_littles_law() -> None:
    dep = _deploy()
    for clients, think in ((1, 0.0), (4, 0.02), (16, 0.005)):
        run = sim.simulate_closed_loop(dep, {"m": ClosedLoop(clients=clients, think_s=think)},
                                       30.0, warmup_s=5.0)  # fmt: skip
        lat = float(np.mean(run.latencies()))
        assert run.throughput_rps() == pytest.approx(clients / (lat + think), rel=0.05)
    with pytest.raises(InvalidSpecError, match="clients: must be an integer >= 1"):
        ClosedLoop(clients=0)
    with pytest.raises(InvalidSpecError, match="not deployed"):
        sim.simulate_closed_loop(dep, {"x": ClosedLoop(clients=1)}, 1.0)


@pytest.mark.parametrize("kind", ["constant", "poisson"])
def test_saturation_search_finds_the_bottleneck_rate(kind: str) -> None:
    dep = _deploy(input_bytes=150_528, network_gbps=146 * 8 * 150_528 / 1e9)

    def at(rate: float, span: float) -> dict[str, np.ndarray]:
        if kind == "constant":
            return {"m": arr.constant(rate, span)}
        return {"m": arr.poisson(rate, span, np.random.default_rng(1))}

    start = sim.analytic_capacity_rps(dep, "m")
    assert start == pytest.approx(146.0)
    found = sim.find_saturation(dep, at, duration_s=60.0, start_rps=2 * start)
    assert found.peak_throughput_rps == pytest.approx(146.0, rel=0.01)
    assert found.saturation_rps == pytest.approx(146.0, rel=0.02)
    assert found.saturation_rps <= found.peak_throughput_rps + 1e-9
    assert any(not p.held for p in found.probes) and any(p.held for p in found.probes)
    assert "held" in found.criterion and found.to_dict()["probes"]


def test_the_peak_never_reads_above_the_slowest_stage() -> None:
    # QA 40 V #8: a probe's window counts the completions of requests already in service at
    # its start, so a peak read 244.3 req/s on a host carrying 244; the figures are clipped to
    # the analytic capacity (an upper bound) and the count is kept, in words
    dep = _deploy(host_s=0.002, host_capacity_rps=300.0)
    cap = sim.analytic_capacity_rps(dep, "m")  # the device, below the host's 300

    def at(rate: float, span: float) -> dict[str, np.ndarray]:
        return {"m": arr.constant(rate, span)}

    found = sim.find_saturation(dep, at, duration_s=30.0, start_rps=cap)
    counted = max(p.served_rps for p in found.probes)
    assert counted > cap  # the window's edge
    assert found.peak_throughput_rps == cap and found.saturation_rps <= cap
    assert found.counted_peak_rps == counted
    assert f"{counted:.1f} counted over a probe's window" in found.edge_note
    out = found.to_dict()
    assert out["counted_peak_throughput_rps"] == counted
    assert out["served_rps_at_saturation"] <= cap  # type: ignore[operator]
    assert found.within(counted) is found and found.within(counted).edge_note


def test_host_calibration_recovers_a_known_host_path() -> None:
    truth = _deploy(host_s=0.008, host_capacity_rps=260.0)
    points = []
    for rate in (120.0, 230.0):
        a = arr.constant(rate, 30.0, jitter_s=1 / rate, rng=np.random.default_rng(0))
        p50 = float(np.median(sim.simulate_serving(truth, {"m": a}).latencies()))
        points.append(({"m": a}, p50))
    base = _deploy()
    fit = sim.calibrate_host_path(base, points)
    assert fit.capacity_fitted and fit.points == 2
    assert fit.host_s == pytest.approx(0.008, rel=0.03)
    assert fit.capacity_rps == pytest.approx(260.0, rel=0.03)
    one = sim.calibrate_host_path(base, points[:1], capacity_rps=260.0)
    assert one.host_s == pytest.approx(0.008, rel=0.03) and not one.capacity_fitted
    with pytest.raises(InvalidSpecError, match="no host path explains it"):
        sim.calibrate_host_path(base, [(points[0][0], 0.001)])
    with pytest.raises(InvalidSpecError, match="no host capacity explains the rise"):
        sim.calibrate_host_path(base, [points[0], (points[1][0], points[0][1])])


def test_the_saturation_figures_come_from_one_probe() -> None:
    # QA 38 N #5: "holds 30.4 req/s" was one probe's served rate, the "at saturation:" figures
    # another's (the held probe of the highest offered rate)
    def probe(offered: float, served: float, tokens: float) -> sim.SaturationProbe:
        return sim.SaturationProbe(
            offered_rps=offered, served_rps=served, dropped_fraction=0.0, held=True,
            p50_s=0.1, p99_s=0.2, tokens_per_s=tokens,
        )  # fmt: skip

    a, b = probe(30.54, 30.40, 7000.0), probe(30.81, 30.35, 6900.0)
    sat = sim.Saturation(
        saturation_rps=30.40, peak_throughput_rps=30.40, criterion="held", probes=(a, b)
    )
    assert sat.at_saturation is a
    out = sat.to_dict()
    assert (out["offered_rps_at_saturation"], out["served_rps_at_saturation"]) == (30.54, 30.40)
    assert out["tokens_per_s_at_saturation"] == 7000.0
