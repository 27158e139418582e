"""simulate.kaas: kernel-level vs invocation-level sharing of a GPU pool, and dedicated GPUs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gpucast.simulate.kaas as kaas_module
from gpucast.domain.errors import InvalidSpecError
from gpucast.simulate.kaas import poisson_arrivals, simulate_kaas

LONG = np.full(100, 0.01)  # 1 s in 100 kernels
SHORT = np.full(2, 0.005)  # 10 ms in 2 kernels


def test_alone_every_sharing_gives_the_kernel_sum() -> None:
    for sharing in ("dedicated", "function", "kernel"):
        r = simulate_kaas([LONG], [0], [0.0], sharing=sharing, gpus=1)
        assert r.latency_s[0] == pytest.approx(1.0)


def test_a_short_function_does_not_wait_behind_a_long_one_under_kaas() -> None:
    func, arrival = [0, 1], [0.0, 0.001]
    whole = simulate_kaas([LONG, SHORT], func, arrival, sharing="function", gpus=1)
    kaas = simulate_kaas([LONG, SHORT], func, arrival, sharing="kernel", gpus=1)
    # per invocation: the short one waits for the whole second; per kernel: one kernel
    assert whole.latency_s[1] == pytest.approx(1.0 - 0.001 + 0.01)
    assert kaas.latency_s[1] < 0.05
    # the long one pays for the interleaved kernels: 10 ms more
    assert kaas.latency_s[0] == pytest.approx(1.01)
    dedicated = simulate_kaas([LONG, SHORT], func, arrival, sharing="dedicated")
    assert dedicated.gpus == 2 and dedicated.latency_s[1] == pytest.approx(0.01)


def test_dispatch_cost_is_paid_per_kernel_under_kaas() -> None:
    kaas = simulate_kaas([LONG], [0], [0.0], sharing="kernel", dispatch_s=1e-3)
    whole = simulate_kaas([LONG], [0], [0.0], sharing="function", dispatch_s=1e-3)
    assert kaas.latency_s[0] == pytest.approx(1.0 + 100e-3)
    assert whole.latency_s[0] == pytest.approx(1.0 + 1e-3)


def test_pool_throughput_under_overload_is_its_capacity() -> None:
    rng = np.random.default_rng(0)
    func, arrival = poisson_arrivals([30.0, 30.0], 5.0, rng)  # 60/s of 0.05 s on 2 GPUs: 1.5x
    seqs = [np.full(5, 0.01), np.full(5, 0.01)]
    for sharing in ("function", "kernel"):
        r = simulate_kaas(seqs, func, arrival, sharing=sharing, gpus=2)
        assert r.throughput_per_s == pytest.approx(40.0, rel=0.05)  # 2 / 0.05 s
        assert r.utilisation == pytest.approx(1.0, abs=0.05)


def test_results_follow_arrival_order_and_report_per_function() -> None:
    r = simulate_kaas([LONG, SHORT], [1, 0], [0.5, 0.0], sharing="kernel", gpus=2)
    d = r.to_dict(["long", "short"])
    assert d["invocations"] == 2 and set(d["per_function"]) == {"long", "short"}
    assert d["kernels"] == 102


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"sharing": "thread"}, "sharing"),
        ({"sharing": "kernel", "gpus": 0}, "pool-gpus"),
        ({"sharing": "kernel", "dispatch_s": -1.0}, "dispatch"),
    ],
)
def test_bad_options(kw: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        simulate_kaas([LONG], [0], [0.0], **kw)  # type: ignore[arg-type]


def test_bad_kernels_and_indices() -> None:
    with pytest.raises(InvalidSpecError, match="kernels"):
        simulate_kaas([np.array([-1.0])], [0], [0.0], sharing="kernel")
    with pytest.raises(InvalidSpecError, match="func"):
        simulate_kaas([LONG], [1], [0.0], sharing="kernel")


def test_too_many_kernels_is_refused_before_the_loop() -> None:
    many = np.full(1_000_000, 1e-6)
    with pytest.raises(InvalidSpecError, match="kernels"):
        simulate_kaas([many], [0] * 6, [0.0] * 6, sharing="kernel")
    # per invocation the same load is 6 units of work, of the same 6 million kernels
    whole = simulate_kaas([many], [0] * 6, [0.0] * 6, sharing="function")
    assert whole.dispatches == 6 and whole.kernels == 6_000_000


def test_too_many_invocations_are_called_invocations() -> None:
    calls = kaas_module.MAX_KERNELS + 1
    with pytest.raises(InvalidSpecError, match=r"invocations: 5,000,001 to schedule one by one "
                       r"on the pool \(function-level sharing\)"):  # fmt: skip
        simulate_kaas([SHORT], np.zeros(calls, dtype=np.int64), np.zeros(calls), sharing="function")


def test_overload_is_the_offered_work_against_the_gpus() -> None:
    rng = np.random.default_rng(0)
    seqs = [np.full(5, 0.01), np.full(5, 0.01)]  # 0.05 s a call
    for rate, over in ((30.0, True), (10.0, False)):  # 60/s x 0.05 s = 3 GPUs; 20/s = 1 GPU
        func, arrival = poisson_arrivals([rate, rate], 5.0, rng)
        r = simulate_kaas(seqs, func, arrival, sharing="kernel", gpus=2, window_s=5.0)
        assert r.overloaded is over
        assert r.offered_per_s == pytest.approx(func.size / 5.0)
        assert r.gpus_needed == math.ceil(func.size * 0.05 / 5.0 - 1e-9)
        d = r.to_dict()
        assert d["latency_steady"] is not over and d["gpus_needed"] == r.gpus_needed
    # one GPU per function: each function's calls against its own GPU
    func, arrival = poisson_arrivals([30.0, 5.0], 5.0, rng)
    dedicated = simulate_kaas(seqs, func, arrival, sharing="dedicated", window_s=5.0)
    assert dedicated.overloaded and dedicated.gpus_needed == 2 + 1


def test_kernels_are_counted_alike_and_dispatches_per_sharing() -> None:
    func, arrival = [0, 1, 0], [0.0, 0.1, 0.2]
    counts = {
        s: simulate_kaas([LONG, SHORT], func, arrival, sharing=s, gpus=1)
        for s in ("dedicated", "function", "kernel")
    }
    assert {r.kernels for r in counts.values()} == {202}
    assert counts["kernel"].dispatches == 202
    assert counts["function"].dispatches == counts["dedicated"].dispatches == 3


def test_served_calls_per_second_never_exceed_the_offered() -> None:
    """QA 33b #22: bursty arrivals read served/s 39.2 > offered/s 39.0 (the span from the
    first arrival to the last completion was shorter than the window offered over)."""
    rng = np.random.default_rng(3)
    func, arrival = poisson_arrivals([20.0], 10.0, rng)
    arrival = arrival + 0.5  # the first call well after the window opens
    for sharing in ("dedicated", "function", "kernel"):
        r = simulate_kaas([np.full(3, 1e-4)], func, arrival, sharing=sharing, gpus=1,
                          window_s=10.0)  # fmt: skip
        assert r.throughput_per_s <= r.offered_per_s
        assert r.throughput_per_s == pytest.approx(r.offered_per_s)
