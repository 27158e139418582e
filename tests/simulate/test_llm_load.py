"""LLM serving under load: the closed loop inside the token-level simulator, the analytic
capacity and the saturation search (shared with the CNN path)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpucast.catalog import load_catalog
from gpucast.catalog.engines import inference_engine
from gpucast.catalog.llm import llm_model
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm_serving import LlmRequests, SchedulerConfig
from gpucast.domain.serving import ClosedLoop
from gpucast.predict.llm_infer import iteration_cost, predict_inference
from gpucast.simulate.llm_closed_loop import simulate_llm_closed_loop
from gpucast.simulate.llm_load import (
    analytic_capacity_rps,
    find_llm_saturation,
    probe_llm_rate,
    work_s,
)
from gpucast.simulate.llm_serving import FINISHED, simulate_llm_serving

SPEC = llm_model("llama-3-8b")
GPU = load_catalog().gpu("H100-SXM")
VLLM = inference_engine("vllm")
COST = iteration_cost(SPEC, GPU, VLLM, tp=1, max_tokens=8192)
SCHED = SchedulerConfig(max_num_seqs=64)


def _pool(n: int, inp: int = 512, out: int = 128, seed: int = 3) -> LlmRequests:
    rng = np.random.default_rng(seed)
    return LlmRequests(
        arrival_s=np.zeros(n),
        input_tokens=rng.integers(inp // 2, inp * 3 // 2, n),
        output_tokens=rng.integers(out // 2, out * 3 // 2, n),
    )


def _loop(clients: int, think_s: float, *, replicas: int = 1, duration_s: float = 120.0, pool=None):  # type: ignore[no-untyped-def]
    return simulate_llm_closed_loop(
        _pool(20_000) if pool is None else pool, COST, SCHED,
        loop=ClosedLoop(clients=clients, think_s=think_s, think="constant"),
        duration_s=duration_s, max_context=SPEC.max_context, replicas=replicas,
    )  # fmt: skip


# -- the closed loop ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("clients", "think_s", "replicas"), [(8, 0.0, 1), (32, 2.0, 1), (24, 0.5, 2)]
)
def test_the_closed_loop_obeys_littles_law(clients, think_s, replicas) -> None:
    """N = throughput x (latency + think) over the steady part of the run, within 3%."""
    result, spent = _loop(clients, think_s, replicas=replicas)
    assert not spent
    out = result.to_dict()
    window = result.rate_window_s
    assert window is not None
    lo, hi = window
    arrival = result.requests.arrival_s
    mid = (arrival >= lo) & (arrival <= hi) & (result.status == FINISHED)
    latency = float(np.mean(result.latency_s[mid]))
    assert clients == pytest.approx(out["throughput_rps"] * (latency + think_s), rel=0.03)
    # one request outstanding per user: never more in the system than users
    done = result.finish_s[np.isfinite(result.finish_s)]
    events = np.concatenate([arrival, done])
    steps = np.concatenate([np.ones(arrival.size), -np.ones(done.size)])
    order = np.lexsort((steps, events))  # finishes first at a tie: the next request follows
    assert np.cumsum(steps[order]).max() <= clients


def test_one_client_is_the_single_request_latency_of_predict_infer() -> None:
    """One user, fixed lengths: every request runs alone, its latency predict infer's batch-1
    latency less the one decode step predict infer counts past the last token (as the
    open-loop agreement test shows), and the next is sent as the last finishes."""
    n_in, n_out = 1024, 256
    pool = LlmRequests(
        arrival_s=np.zeros(50), input_tokens=np.full(50, n_in), output_tokens=np.full(50, n_out)
    )
    result, _ = _loop(1, 0.0, pool=pool, duration_s=30.0)
    p = predict_inference(SPEC, GPU, VLLM, batch_size=1, input_len=n_in, output_len=n_out, tp=1)
    last = COST.iteration_s(1, 1, n_in + n_out, n_in + n_out)
    lat = result.latency_s
    assert lat == pytest.approx(np.full(lat.size, p.latency_s - last), rel=1e-9)
    assert result.ttft_s == pytest.approx(np.full(lat.size, p.ttft_s), rel=1e-12)
    assert np.diff(result.requests.arrival_s) == pytest.approx(lat[:-1], rel=1e-9)
    assert result.requests.arrival_s[-1] <= 30.0


def test_think_time_spaces_the_requests_and_the_pool_can_run_out() -> None:
    result, spent = _loop(1, 1.5, duration_s=60.0)
    gaps = np.diff(result.requests.arrival_s)
    assert gaps == pytest.approx(result.latency_s[:-1] + 1.5, rel=1e-9)
    short, spent = _loop(4, 0.0, pool=_pool(10), duration_s=60.0)
    assert spent and short.requests.count == 10 and np.all(short.status == FINISHED)


def test_the_closed_loop_is_the_open_loop_given_its_own_arrivals() -> None:
    """Replaying the arrival times the loop made through the open-loop simulator gives the
    same run, request for request: the loop only decides when requests arrive."""
    result, _ = _loop(16, 0.2, duration_s=40.0)
    again = simulate_llm_serving(result.requests, COST, SCHED, max_context=SPEC.max_context)
    assert again.finish_s == pytest.approx(result.finish_s, rel=1e-12)
    assert again.first_token_s == pytest.approx(result.first_token_s, rel=1e-12)


def test_requests_that_cannot_run_are_rejected_and_the_user_goes_on() -> None:
    pool = LlmRequests(
        arrival_s=np.zeros(6), input_tokens=np.array([100, 9000, 100, 100, 9000, 100]),
        output_tokens=np.full(6, 20),
    )  # fmt: skip
    result, spent = _loop(1, 0.0, pool=pool, duration_s=60.0)
    assert spent and result.requests.count == 6
    assert result.count(FINISHED) == 4 and sum(result.drop_reasons.values()) == 2


def test_a_closed_loop_refuses_random_think_times() -> None:
    with pytest.raises(InvalidSpecError, match="think"):
        simulate_llm_closed_loop(
            _pool(10), COST, SCHED, loop=ClosedLoop(clients=2, think_s=0.1),
            duration_s=10.0, max_context=SPEC.max_context,
        )  # fmt: skip


# -- capacity and saturation -----------------------------------------------------------------
def _runner(replicas: int):  # type: ignore[no-untyped-def]
    def run(rate: float, span: float):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng(7)
        n = int(rng.poisson(rate * span))
        arrival = np.sort(rng.uniform(0.0, span, n))
        req = LlmRequests(
            arrival_s=arrival, input_tokens=rng.integers(256, 768, n),
            output_tokens=rng.integers(64, 192, n),
        )  # fmt: skip
        return simulate_llm_serving(
            req, COST, SCHED, max_context=SPEC.max_context, replicas=replicas, until_s=span
        )

    return run


def test_the_analytic_capacity_is_the_work_per_request() -> None:
    req = _pool(1000)
    prefill, decode = work_s(req, COST, 64)
    assert prefill > 0 and decode > prefill
    one = analytic_capacity_rps(req, COST, 64)
    assert one == pytest.approx(1000 / (prefill + decode))
    assert analytic_capacity_rps(req, COST, 64, instances=3) == pytest.approx(3 * one)
    split = analytic_capacity_rps(req, COST, 64, prefill_instances=1, decode_instances=1)
    assert split == pytest.approx(1000 / decode)


@pytest.fixture(scope="module")
def one_replica():  # type: ignore[no-untyped-def]
    start = analytic_capacity_rps(_pool(2000, 512, 128), COST, 64)
    return find_llm_saturation(_runner(1), start_rps=start, duration_s=30.0, precision=0.02)


def test_saturation_is_found_within_the_search_precision(one_replica) -> None:
    sat = one_replica
    assert sat.saturation_rps > 0 and "median request latencies" in sat.criterion
    held = [p for p in sat.probes if p.held]
    missed = [p for p in sat.probes if not p.held]
    assert held and missed
    # direct probes either side of the edge: held below, not held above
    below = probe_llm_rate(_runner(1), sat.saturation_rps * 0.97, duration_s=30.0)
    above = probe_llm_rate(_runner(1), sat.saturation_rps * 1.06, duration_s=30.0)
    assert below.held and not above.held
    top = sat.at_saturation
    assert top is not None and top.tokens_per_s and top.ttft_p99_s >= top.ttft_p50_s
    assert top.run_s >= 20 * top.p50_s  # the run spans many request latencies
    out = sat.to_dict()
    assert out["tokens_per_s_at_saturation"] == top.tokens_per_s
    assert {"offered_rps", "served_rps", "ttft_p50_s", "tpot_p99_s"} <= set(out["probes"][0])


def test_two_replicas_hold_at_least_1_8_times_one(one_replica) -> None:
    start = analytic_capacity_rps(_pool(2000, 512, 128), COST, 64, instances=2)
    two = find_llm_saturation(_runner(2), start_rps=start, duration_s=30.0, precision=0.02)
    assert two.saturation_rps >= 1.8 * one_replica.saturation_rps


def test_a_preemption_storm_whose_throughput_falls_is_not_held() -> None:
    """A probe that served fewer requests/s than a lower offered rate did, with preemptions,
    does not hold even if it kept pace with what arrived."""
    small = SchedulerConfig(max_num_seqs=64)
    tiny = COST.__class__(**{**{f: getattr(COST, f) for f in COST.__dataclass_fields__},
                            "kv_capacity_tokens": 6000})  # fmt: skip

    def run(rate: float, span: float):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng(1)
        n = int(rate * span)
        req = LlmRequests(
            arrival_s=np.sort(rng.uniform(0, span, n)), input_tokens=np.full(n, 500),
            output_tokens=np.full(n, 400),
        )  # fmt: skip
        return simulate_llm_serving(req, tiny, small, max_context=SPEC.max_context, until_s=span)

    calm = probe_llm_rate(run, 0.5, duration_s=60.0)
    busy = probe_llm_rate(run, 1.5, duration_s=60.0)
    assert calm.held and calm.preempted_fraction == 0.0
    assert busy.held and busy.preempted_fraction > 0.1  # the small cache preempts
    fell = probe_llm_rate(run, 1.5, duration_s=60.0, best_below_rps=busy.served_rps * 1.2)
    assert not fell.held and fell.served_rps == busy.served_rps
    no_storm = probe_llm_rate(run, 0.5, duration_s=60.0, best_below_rps=calm.served_rps * 1.2)
    assert no_storm.held  # a fall without preemptions is noise, not a storm
    with pytest.raises(InvalidSpecError, match="duration-s"):
        find_llm_saturation(run, start_rps=1.0, duration_s=math.nan)


def test_the_rates_are_clipped_to_the_analytic_capacity_of_the_probes_requests() -> None:
    """As the CNN search (QA 40 V #8, :meth:`Saturation.within`): the LLM search clipped
    nothing to its analytic capacity (QA 40 I, left alone). A bound below what the probes
    counted (0.8 x the capacity) bites: the rates are clipped to the largest bound over the
    probes' runnable requests, the count kept and said; the true bound does not bite here."""
    bounds: list[float] = []

    def tight(requests: LlmRequests) -> float:
        bounds.append(0.8 * analytic_capacity_rps(requests, COST, 64))
        return bounds[-1]

    start = analytic_capacity_rps(_pool(2000, 512, 128), COST, 64)
    sat = find_llm_saturation(
        _runner(1), start_rps=start, duration_s=30.0, precision=0.02, capacity_of=tight
    )
    counted = max(p.served_rps for p in sat.probes)
    assert len(bounds) >= len(sat.probes) and counted > max(bounds)
    assert sat.peak_throughput_rps == max(bounds) and sat.saturation_rps <= max(bounds)
    assert sat.counted_peak_rps == counted
    assert sat.edge_note.startswith(" (the analytic capacity: every instance busy")
    assert f"{counted:.1f} counted over a probe's window" in sat.edge_note
    out = sat.to_dict()
    assert out["counted_peak_throughput_rps"] == counted
    assert out["served_rps_at_saturation"] <= max(bounds)  # type: ignore[operator]

    def true(requests: LlmRequests) -> float:
        return analytic_capacity_rps(requests, COST, 64)

    real = find_llm_saturation(
        _runner(1), start_rps=start, duration_s=30.0, precision=0.02, capacity_of=true
    )
    assert real.counted_peak_rps is None and real.peak_throughput_rps == counted
