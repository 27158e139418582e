"""Per-sample host time in latency curves and the simulator; jittered constant arrivals."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serving import BatchingPolicy, LatencyCurve, ModelDeployment
from gpucast.simulate import arrivals as arr
from gpucast.simulate.serving import simulate_serving, single_server


def _curve(host_s: float, per_sample_s: float) -> LatencyCurve:
    # device work 2 ms + 1 ms per sample, plus the host terms
    sizes = (1, 2, 4, 8)
    return LatencyCurve(
        batch_sizes=sizes,
        latency_s=tuple(0.002 + 0.001 * b + host_s + per_sample_s * b for b in sizes),
        host_s=host_s,
        host_per_sample_s=per_sample_s,
    )


def test_host_time_grows_with_batch_and_device_time_excludes_it() -> None:
    c = _curve(0.001, 0.002)
    assert c.host_time_s(1) == pytest.approx(0.003)
    assert c.host_time_s(4) == pytest.approx(0.009)
    assert c.device_s(4) == pytest.approx(0.006)
    assert c.scaled(2.0).host_per_sample_s == pytest.approx(0.004)
    assert c.to_dict()["host_per_sample_s"] == pytest.approx(0.002)
    assert "host_per_sample_s" not in _curve(0.001, 0.0).to_dict()  # old shape kept


def test_host_per_sample_above_batch_of_one_is_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="host_per_sample_s"):
        LatencyCurve(batch_sizes=(1, 2), latency_s=(0.004, 0.006), host_per_sample_s=0.005)
    with pytest.raises(InvalidSpecError, match="host_per_sample_s"):
        LatencyCurve(batch_sizes=(1,), latency_s=(0.004,), host_per_sample_s=-1.0)


def _run(curve: LatencyCurve, arrivals: np.ndarray, instances: int = 4) -> np.ndarray:
    model = ModelDeployment(
        model="m",
        latency=curve,
        batching=BatchingPolicy(max_batch_size=8, preferred_batch_sizes=(4, 8)),
        instances=instances,
    )
    dep = single_server(model, name="g", memory_gib=16, price_usd_per_hour=1.0)
    return simulate_serving(dep, {"m": arrivals}).latencies()


def test_per_sample_host_overlaps_across_instances() -> None:
    """Same batch latencies, but host work overlaps while device work is shared: moving
    time from device to per-sample host makes a loaded shared device faster."""
    a = arr.constant_count(400.0, 2000)
    sizes = (1, 2, 4, 8)
    total = tuple(0.002 + 0.004 * b for b in sizes)
    all_device = LatencyCurve(batch_sizes=sizes, latency_s=total)
    mostly_host = LatencyCurve(batch_sizes=sizes, latency_s=total, host_per_sample_s=0.003)
    assert np.median(_run(mostly_host, a)) < 0.8 * np.median(_run(all_device, a))


def test_zero_per_sample_host_matches_old_behaviour() -> None:
    a = arr.constant_count(300.0, 1000)
    c = _curve(0.001, 0.0)
    same = LatencyCurve(batch_sizes=c.batch_sizes, latency_s=c.latency_s, host_s=0.001)
    np.testing.assert_array_equal(_run(c, a), _run(same, a))


def test_constant_jitter_default_unchanged_and_bounded() -> None:
    np.testing.assert_array_equal(arr.constant(10.0, 1.0, jitter_s=0.0), arr.constant(10.0, 1.0))
    base = arr.constant_count(100.0, 500)
    j = arr.constant_count(100.0, 500, jitter_s=0.01, rng=np.random.default_rng(3))
    assert j.size == 500 and np.all(np.diff(j) >= 0)
    shift = np.sort(j) - base  # one gap of jitter: each request stays within its slot
    assert np.all(shift >= 0) and np.all(shift < 0.01)
    assert np.std(np.diff(j)) > 0.001
    again = arr.constant_count(100.0, 500, jitter_s=0.01, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(j, again)
    k = arr.constant(10.0, 1.0, jitter_s=0.5, rng=np.random.default_rng(0))
    assert np.all(k < 1.0)


def test_jitter_needs_rng_and_non_negative() -> None:
    with pytest.raises(InvalidSpecError, match="rng"):
        arr.constant(10.0, 1.0, jitter_s=0.01)
    with pytest.raises(InvalidSpecError, match="jitter_s"):
        arr.constant_count(10.0, 5, jitter_s=-0.1, rng=np.random.default_rng(0))
