"""The token-level LLM serving simulator: agreement with predict infer, invariants, modes."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.catalog import load_catalog
from gpucast.catalog.engines import inference_engine
from gpucast.catalog.llm import llm_model
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm_serving import (
    Disaggregation,
    IterationCost,
    LlmRequests,
    SchedulerConfig,
    parse_token_lengths,
)
from gpucast.predict.llm_infer import iteration_cost, predict_inference
from gpucast.simulate.llm_serving import (
    DROPPED,
    FINISHED,
    RUNNING,
    UNARRIVED,
    mixture_quantiles,
    replica_share,
    simulate_llm_serving,
    summary,
    tail_percentiles,
)

SPEC = llm_model("llama-3-8b")
GPU = load_catalog().gpu("H100-SXM")
VLLM = inference_engine("vllm")
COST = iteration_cost(SPEC, GPU, VLLM, tp=1, max_tokens=8192)


def _requests(arrival, inp, out) -> LlmRequests:
    return LlmRequests(
        arrival_s=np.asarray(arrival, dtype=float),
        input_tokens=np.asarray(inp),
        output_tokens=np.asarray(out),
    )


# -- the simulator agrees with the analytic model -----------------------------------------
@pytest.mark.parametrize(
    ("model", "gpu", "tp", "batch", "n_in", "n_out"),
    [
        ("llama-3-8b", "H100-SXM", 1, 16, 512, 128),
        ("llama-2-7b", "A100-80GB", 1, 8, 1024, 64),
        ("mixtral-8x7b", "H100-SXM", 4, 32, 256, 200),
        ("llama-3-70b", "H200", 4, 4, 2000, 50),
    ],
)
def test_a_closed_batch_is_predict_infer(model, gpu, tp, batch, n_in, n_out) -> None:
    """B equal requests at t=0 that all fit: one prefill of the batch (predict infer's TTFT),
    then O - 1 decode steps; predict infer counts O steps after the prefill (contexts
    I+1..I+O), so the two differ by exactly the step at context I + O."""
    spec, g = llm_model(model), load_catalog().gpu(gpu)
    p = predict_inference(spec, g, VLLM, batch_size=batch, input_len=n_in, output_len=n_out, tp=tp)
    assert p.waves == pytest.approx(1.0)
    cost = iteration_cost(spec, g, VLLM, tp=tp, max_tokens=8192)
    sim = simulate_llm_serving(
        _requests(np.zeros(batch), [n_in] * batch, [n_out] * batch),
        cost,
        SchedulerConfig(max_batched_tokens=8192),  # the whole batch in one prefill
        max_context=spec.max_context,
    )
    assert np.all(sim.status == FINISHED)
    assert sim.first_token_s == pytest.approx(np.full(batch, p.ttft_s), rel=1e-12)
    ctx = batch * (n_in + n_out)
    last = cost.iteration_s(batch, batch, ctx, ctx)
    assert sim.finish_s.max() + last == pytest.approx(p.latency_s, rel=1e-9)
    # a decode step at the mean context is predict infer's time per output token
    s = n_in + (n_out + 1) / 2
    assert cost.iteration_s(batch, batch, batch * s, batch * s) == pytest.approx(p.tpot_s)


def test_one_request_alone_has_equal_gaps_growing_with_context() -> None:
    sim = simulate_llm_serving(
        _requests([0.0], [100], [50]), COST, SchedulerConfig(), max_context=SPEC.max_context
    )
    steps = [COST.iteration_s(1, 1, 100 + j, 100 + j) for j in range(1, 50)]
    assert sim.finish_s[0] - sim.first_token_s[0] == pytest.approx(sum(steps))
    itl = sim.itl_percentiles()
    assert steps[0] <= itl["p50"] <= steps[-1]
    assert itl["max"] == pytest.approx(steps[-1])


def test_a_swapped_sequence_comes_back_only_with_room_to_step() -> None:
    """A prompt half-prefilled holds the cache a swapped sequence needs for its next token:
    swapping it in without that room had it swapped out again before a step, forever (found
    by test_invariants). Now it waits, the prompt is recomputed later, and all finish."""
    sched = SchedulerConfig(
        max_num_seqs=7, max_batched_tokens=256, block_size=16, chunked_prefill=True,
        preemption="swap", swap_space_gib=4.0,
    )  # fmt: skip
    cost = dataclasses.replace(COST, kv_capacity_tokens=292)  # 18 blocks, watermark 0
    req = _requests(np.zeros(7), [1, 1, 1, 1, 1, 1, 275], [1, 1, 1, 1, 1, 94, 1])
    sim = simulate_llm_serving(req, cost, sched, max_context=SPEC.max_context)
    assert np.all(sim.status == FINISHED)
    assert sim.output_tokens_done == 100 and sim.instances[0].preemptions >= 1


# -- invariants ---------------------------------------------------------------------------
@st.composite
def _cases(draw):
    n = draw(st.integers(1, 30))
    gaps = draw(st.lists(st.floats(0.0, 0.3), min_size=n, max_size=n))
    inp = draw(st.lists(st.integers(1, 700), min_size=n, max_size=n))
    out = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    sched = SchedulerConfig(
        max_num_seqs=draw(st.integers(1, 8)),
        max_batched_tokens=draw(st.sampled_from([None, 256, 1024])),
        block_size=draw(st.sampled_from([1, 4, 16])),
        chunked_prefill=draw(st.booleans()),
        preemption=draw(st.sampled_from(["recompute", "swap"])),
        swap_space_gib=draw(st.sampled_from([0.0, 0.001, 4.0])),
    )
    capacity = draw(st.integers(200, 4000))  # small caches: preemptions
    disagg = draw(st.sampled_from([None, (1, 1), (2, 1), (1, 3)]))
    replicas = draw(st.integers(1, 3))
    until = draw(st.sampled_from([None, 0.5, 3.0]))
    return np.cumsum(gaps), inp, out, sched, capacity, disagg, replicas, until


@settings(max_examples=150, deadline=None)
@given(_cases())
def test_invariants(case) -> None:
    arrival, inp, out, sched, capacity, disagg, replicas, until = case
    cost = dataclasses.replace(COST, kv_capacity_tokens=capacity)
    req = _requests(arrival, inp, out)
    kwargs = dict(
        max_context=SPEC.max_context,
        replicas=replicas,
        disaggregation=None
        if disagg is None
        else Disaggregation(
            prefill_instances=disagg[0], decode_instances=disagg[1], kv_link_gbps=100.0
        ),
        until_s=until,
        slo_ttft_s=0.5,
        slo_tpot_s=0.05,
    )
    sim = simulate_llm_serving(req, cost, sched, **kwargs)
    n = req.count
    finished, dropped, running, late = (
        sim.count(s) for s in (FINISHED, DROPPED, RUNNING, UNARRIVED)
    )
    assert finished + dropped + running + late == n
    if until is None:
        assert running == late == 0
    else:  # running: arrived by the horizon; the rest were never queued
        assert np.all(req.arrival_s[sim.status == RUNNING] <= until)
        assert np.all(req.arrival_s[sim.status == UNARRIVED] > until)
        assert sim.in_flight == running
    summary = sim.to_dict()
    batch = summary["mean_batch_size"]
    decoded = [i for i in sim.instances if i.role != "prefill" and i.decode_steps]
    assert (batch is None) == (not decoded)  # None (n/a) exactly when no decode step ran
    done = sim.status == FINISHED
    emitted = sum(i.tokens for i in sim.instances)  # counted as the engine emits them
    if until is None:
        assert emitted == sim.output_tokens_done == int(np.sum(np.asarray(out)[done]))
    else:
        assert emitted >= sim.output_tokens_done
    # times are ordered: arrival <= first token <= finish
    assert np.all(sim.first_token_s[done] >= req.arrival_s[done] - 1e-12)
    assert np.all(sim.ttft_s[done] <= sim.latency_s[done] + 1e-12)
    assert np.all(np.isnan(sim.finish_s[~done]))
    assert np.all(np.isnan(sim.first_token_s[sim.status == DROPPED]))
    # the KV cache never holds more than it has
    for inst in sim.instances:
        assert 0.0 <= inst.peak_kv_utilisation <= 1.0 + 1e-12
        assert 0.0 <= inst.busy_fraction <= 1.0
        assert 0.0 <= inst.link_busy_fraction <= 1.0
    # an instance counts the requests that reached it by the horizon, never later ones
    arrived = np.ones(n, dtype=bool) if until is None else req.arrival_s <= until
    entry = sum(i.requests for i in sim.instances if i.role != "decode")
    assert entry == int(np.count_nonzero(arrived & (sim.status != DROPPED)))
    tpot = sim.tpot_s[done & (req.output_tokens > 1)]
    assert np.all(tpot > 0)
    attain = sim.slo_attainment
    assert attain is not None and 0.0 <= attain <= 1.0
    # same inputs, same result, bit for bit
    again = simulate_llm_serving(req, cost, sched, **kwargs)
    assert np.array_equal(sim.finish_s, again.finish_s, equal_nan=True)
    assert np.array_equal(sim.first_token_s, again.first_token_s, equal_nan=True)
    assert np.array_equal(sim.preemptions, again.preemptions)


@pytest.mark.parametrize("disagg", [None, (1, 1)])
def test_a_horizon_past_the_last_completion_changes_nothing(disagg) -> None:
    """Busy fractions divide by the time simulated, not by the horizon: any horizon after
    the last finish gives the run without one (the QA case: 99% with none, 82% at 25 s and
    0% at 1e9 s); a horizon inside the run counts only the requests that arrived by it."""
    rng = np.random.default_rng(5)
    arrival = np.cumsum(rng.exponential(0.1, 80))
    req = _requests(arrival, rng.integers(100, 1500, 80), rng.integers(20, 200, 80))
    link = (
        None
        if disagg is None
        else Disaggregation(prefill_instances=1, decode_instances=1, kv_link_gbps=100.0)
    )

    def run(until):
        return simulate_llm_serving(
            req, COST, SchedulerConfig(), max_context=SPEC.max_context,
            disaggregation=link, until_s=until,
        )  # fmt: skip

    free = run(None)
    last = float(np.nanmax(free.finish_s))
    busy = [i.busy_fraction for i in free.instances]
    assert max(busy) > 0.3  # a loaded server, so a wrong denominator shows
    for until in (last + 1e-6, last + 15.0, 1e9, 1e100):  # 1e100: hung in _steps_until
        sim = run(until)
        assert [i.busy_fraction for i in sim.instances] == pytest.approx(busy, rel=1e-9)
        assert [i.requests for i in sim.instances] == [i.requests for i in free.instances]
        assert sim.span_s == pytest.approx(free.span_s)
        assert sim.to_dict()["tokens_per_s"] == pytest.approx(free.to_dict()["tokens_per_s"])
    cut = float(arrival[40])
    early = run(cut)
    entry = [i for i in early.instances if i.role != "decode"]
    assert sum(i.requests for i in entry) == int(np.count_nonzero(arrival <= cut))
    assert all(0.0 <= i.busy_fraction <= 1.0 for i in early.instances)
    assert early.span_s == pytest.approx(cut - arrival[0])
    none_yet = run(float(arrival[0]) / 2)  # before the first arrival: nothing simulated
    assert none_yet.span_s == 0.0
    assert all(i.busy_fraction == 0.0 and i.requests == 0 for i in none_yet.instances)
    assert math.isinf(none_yet.to_dict()["cost_usd_per_million_tokens"])


def test_a_small_cache_preempts_and_still_finishes_everything() -> None:
    cost = dataclasses.replace(COST, kv_capacity_tokens=3000)
    req = _requests(np.zeros(12), [600] * 12, [400] * 12)
    for mode in ("recompute", "swap"):
        sim = simulate_llm_serving(
            req, cost, SchedulerConfig(preemption=mode), max_context=SPEC.max_context
        )
        assert np.all(sim.status == FINISHED)
        assert sim.preemptions.sum() > 0
        assert sim.instances[0].peak_kv_utilisation <= 1.0
    # with room for everyone nothing is preempted
    roomy = simulate_llm_serving(req, COST, SchedulerConfig(), max_context=SPEC.max_context)
    assert roomy.preemptions.sum() == 0


def test_drops_say_why() -> None:
    cost = dataclasses.replace(COST, kv_capacity_tokens=1000)
    req = _requests([0.0, 0.1, 0.2], [8000, 2000, 100], [500, 10, 10])
    sim = simulate_llm_serving(req, cost, SchedulerConfig(), max_context=SPEC.max_context)
    assert sim.status.tolist() == [DROPPED, DROPPED, FINISHED]
    assert set(sim.drop_reasons) == {
        "beyond the context window",
        "larger than the KV cache of one instance",
    }


def test_chunked_prefill_lets_decodes_run_through_long_prompts() -> None:
    """A long prompt arriving while others decode stalls them without chunked prefill (their
    largest inter-token gap is a whole prefill) and far less with it."""
    arrival = [0.0] * 8 + [0.5]
    req = _requests(arrival, [200] * 8 + [7000], [400] * 8 + [10])
    plain = simulate_llm_serving(req, COST, SchedulerConfig(), max_context=SPEC.max_context)
    chunked = simulate_llm_serving(
        req,
        COST,
        SchedulerConfig(chunked_prefill=True, max_batched_tokens=512),
        max_context=SPEC.max_context,
    )
    prefill = COST.iteration_s(7000, 1, 7000, 0.5 * 7000**2)
    assert plain.itl_percentiles()["max"] >= prefill
    assert chunked.itl_percentiles()["max"] < prefill / 3
    assert np.all(chunked.status == FINISHED)


def test_disaggregation_adds_the_kv_transfer() -> None:
    link = Disaggregation(prefill_instances=1, decode_instances=1, kv_link_gbps=10.0)
    req = _requests([0.0], [1000], [20])
    sim = simulate_llm_serving(
        req, COST, SchedulerConfig(), max_context=SPEC.max_context, disaggregation=link
    )
    prefill = COST.iteration_s(1000, 1, 1000, 0.5 * 1000**2)
    assert sim.first_token_s[0] == pytest.approx(prefill)
    transfer = link.transfer_s(1000 * COST.kv_bytes_per_token)
    decode = sum(COST.iteration_s(1, 1, 1000 + j, 1000 + j) for j in range(1, 20))
    assert sim.finish_s[0] == pytest.approx(prefill + transfer + decode)
    assert sim.gpus == 2
    assert [i.role for i in sim.instances] == ["decode", "prefill"]


def test_kv_transfers_queue_for_the_link_first_come_first_served() -> None:
    """Two prompts prefilled in one batch: the second transfer waits for the first, so its
    KV cache arrives one serialisation later (the link is a server, not a delay)."""
    link = Disaggregation(prefill_instances=1, decode_instances=1, kv_link_gbps=1.0)
    req = _requests([0.0, 0.0], [1000, 1000], [20, 20])
    sim = simulate_llm_serving(
        req, COST, SchedulerConfig(), max_context=SPEC.max_context, disaggregation=link
    )
    prefill = float(sim.first_token_s[0])
    one = link.serialise_s(1000 * COST.kv_bytes_per_token)
    assert sim.first_token_s[1] == prefill
    assert sim.decode_ready_s is not None
    assert sim.decode_ready_s.tolist() == pytest.approx(
        [prefill + one + link.transfer_latency_s, prefill + 2 * one + link.transfer_latency_s]
    )
    assert sim.finish_s[1] > sim.finish_s[0] + 0.9 * one


def _stream(rate_rps: float, n: int, seed: int = 11) -> LlmRequests:
    rng = np.random.default_rng(seed)
    return _requests(np.cumsum(rng.exponential(1.0 / rate_rps, n)), [512] * n, [128] * n)


def _split(gbps: float, req: LlmRequests, until: float | None = None):  # type: ignore[no-untyped-def]
    link = Disaggregation(prefill_instances=1, decode_instances=1, kv_link_gbps=gbps)
    return simulate_llm_serving(
        req, COST, SchedulerConfig(), max_context=SPEC.max_context, disaggregation=link,
        until_s=until,
    )  # fmt: skip


def test_a_slow_kv_link_bounds_the_throughput_and_says_so() -> None:
    """The QA case (5 req/s of 512-token prompts, ~67 MB of KV cache each): the link carries
    at most link rate / KV bytes per request; requests/s never exceed it, tokens/s never
    rise as the link slows, and past it the queue (and latency) grows with the run."""
    req = _stream(5.0, 300)
    size = 512 * COST.kv_bytes_per_token
    tokens = []
    for gbps in (400.0, 5.0, 1.0, 0.2, 0.05):
        sim = _split(gbps, req)
        out = sim.to_dict()
        link = sim.kv_link
        assert link is not None and sim.rate_window_s is not None
        capacity = gbps * 1e9 / 8.0 / size
        assert link.capacity_rps == pytest.approx(capacity)
        assert 0.0 <= link.utilisation <= 1.0
        # within a window of L s the link ends at most L x capacity + 1 transfers
        lo, hi = sim.rate_window_s
        most = capacity + 1.0 / (hi - lo)
        assert out["throughput_rps"] <= most
        # decoded tokens (all but each request's first, from the prefill) crossed the link
        firsts = np.count_nonzero((sim.first_token_s > lo) & (sim.first_token_s <= hi))
        assert out["tokens_per_s"] - firsts / (hi - lo) <= most * 127
        tokens.append(out["tokens_per_s"])
        overloaded = capacity < 5.0 * 0.9
        assert link.bound == overloaded
        if overloaded:  # the queue grows: later arrivals wait longer, without bound
            lat = sim.latency_s
            assert np.median(lat[-75:]) > 2.0 * np.median(lat[75:150])
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(tokens))
    assert tokens[-1] < tokens[0] / 10


def test_an_ample_kv_link_leaves_almost_no_queue() -> None:
    """At a link far faster than the arrivals a request's KV cache arrives one transfer after
    its prefill (as before the link queued transfers), but for the few prompts prefilled in
    one batch, which wait for their batch-mates' transfers (a few ms)."""
    req = _stream(5.0, 300)
    sim = _split(400.0, req)
    link = Disaggregation(prefill_instances=1, decode_instances=1, kv_link_gbps=400.0)
    one = link.serialise_s(512 * COST.kv_bytes_per_token)
    assert sim.decode_ready_s is not None
    extra = sim.decode_ready_s - sim.first_token_s - link.transfer_s(512 * COST.kv_bytes_per_token)
    assert np.all(extra >= -1e-12) and np.all(extra <= 3 * one)
    assert np.mean(np.abs(extra) < 1e-12) >= 0.95
    assert sim.kv_link is not None and not sim.kv_link.bound
    assert sim.kv_link.utilisation < 0.05


def test_more_replicas_never_raise_the_tail_of_a_steady_stream() -> None:
    rng = np.random.default_rng(3)
    arrival = np.cumsum(rng.exponential(0.05, 600))
    req = _requests(arrival, rng.integers(100, 2000, 600), rng.integers(10, 300, 600))
    p99 = []
    for r in (1, 2, 4):
        sim = simulate_llm_serving(
            req, COST, SchedulerConfig(), max_context=SPEC.max_context, replicas=r
        )
        p99.append(float(np.nanpercentile(sim.ttft_s, 99)))
    assert p99[0] >= p99[1] >= p99[2]


def test_mixture_quantiles_match_a_sample() -> None:
    rng = np.random.default_rng(0)
    lo = rng.uniform(0, 1, 50)
    hi = lo + rng.uniform(0, 1, 50) * (rng.random(50) > 0.3)
    w = rng.integers(1, 20, 50).astype(float)
    draws = np.concatenate(
        [rng.uniform(a, b, int(k) * 400) for a, b, k in zip(lo, hi, w, strict=True)]
    )
    got = mixture_quantiles(lo, hi, w, [0.1, 0.5, 0.9])
    assert got == pytest.approx(np.quantile(draws, [0.1, 0.5, 0.9]), abs=0.02)


def test_tail_percentiles_are_nearest_rank() -> None:
    """A percentile is one request's own value: 99 of 1..100 is 99 (interpolation gave 99.01,
    numpy's "higher" -- plan serve's before -- 100), the median of 1..4 is 2."""
    assert tail_percentiles(np.arange(1.0, 101.0), [99.0, 100.0, 1.0]) == [99.0, 100.0, 1.0]
    assert tail_percentiles(np.array([4.0, 1.0, 3.0, 2.0]), [50.0]) == [2.0]
    assert math.isnan(tail_percentiles(np.array([]), [50.0])[0])


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.floats(0.0, 10.0), st.just(math.nan)), min_size=1, max_size=300),
    q=st.sampled_from([50.0, 90.0, 95.0, 99.0, 99.9, 33.3]),
    limit=st.floats(0.0, 10.0),
)
def test_a_percentile_is_within_a_limit_exactly_when_the_attainment_is(values, q, limit) -> None:
    """pNN <= SLO iff at least NN% of the requests meet it, NaN (never reached) a miss: the
    figure a plan row shows agrees with the share it picks by (QA 35 N #10)."""
    v = np.asarray(values)
    share = np.count_nonzero(v <= limit) / v.size
    assert (tail_percentiles(v, [q])[0] <= limit) == (share >= q / 100.0 - 1e-12)


def test_unfinished_requests_stay_in_the_tail_and_say_so() -> None:
    """Requests still running when the horizon stopped the run count infinitely late: they
    used to vanish, the p99 being that of the few that finished (QA 35 N #10)."""
    n = 200
    out_tokens = np.where(np.arange(n) % 4 == 0, 2000, 20)  # a quarter far longer
    req = _requests(np.linspace(0.0, 2.0, n), np.full(n, 1000), out_tokens)
    full = simulate_llm_serving(req, COST, SchedulerConfig(), max_context=SPEC.max_context)
    cut = simulate_llm_serving(
        req, COST, SchedulerConfig(), max_context=SPEC.max_context, until_s=8.0
    )
    done = full.to_dict()
    assert done["unfinished_in_percentiles"] is None
    assert math.isfinite(done["latency_s"]["p99"]) and math.isfinite(done["tpot_s"]["max"])
    out = cut.to_dict()
    running = cut.count(RUNNING)
    assert 0 < running < n // 2  # most finished: the median is finite, the tail is not
    assert math.isfinite(out["latency_s"]["p50"])
    assert math.isinf(out["latency_s"]["p99"]) and math.isinf(out["tpot_s"]["p99"])
    assert out["latency_s"]["mean"] < out["latency_s"]["p99"]  # the mean: of those reached
    said = out["unfinished_in_percentiles"]
    assert f"the {running} requests still running at the horizon" in said
    assert "nearest rank" in out["percentiles"]
    # a request that got its first token has a TTFT, finished or not
    assert out["ttft_s"] == summary(cut.counted(cut.ttft_s))
    assert np.isfinite(cut.counted(cut.ttft_s)).all()


def test_bad_values_are_one_line() -> None:
    with pytest.raises(InvalidSpecError, match="replicas"):
        simulate_llm_serving(
            _requests([0.0], [1], [1]), COST, SchedulerConfig(), max_context=10, replicas=0
        )
    with pytest.raises(InvalidSpecError, match="max-batched-tokens"):
        simulate_llm_serving(
            _requests([0.0], [1], [1]),
            COST,
            SchedulerConfig(max_batched_tokens=10**6),
            max_context=10,
        )
    with pytest.raises(InvalidSpecError, match="preemption"):
        SchedulerConfig(preemption="drop")  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="sorted"):
        _requests([1.0, 0.0], [1, 1], [1, 1])
    with pytest.raises(InvalidSpecError, match="input-len"):
        parse_token_lengths("lognormal:0:1", "input-len")
    assert parse_token_lengths("uniform:2:9", "x").draw(np.random.default_rng(0), 50).max() <= 9


def test_iteration_cost_refuses_a_bad_split() -> None:
    with pytest.raises(InvalidSpecError, match="tp"):
        iteration_cost(SPEC, GPU, VLLM, tp=3)
    assert isinstance(COST, IterationCost) and COST.kv_capacity_tokens > 100_000
    assert math.isfinite(COST.iteration_s(10, 10, 1000, 1000))


# -- a share of a large deployment (the planner's sampling) ---------------------------------
def _mixed(n: int, rate_rps: float, seed: int = 5) -> LlmRequests:
    """A stream with some requests dropped (beyond the context window) among the served."""
    rng = np.random.default_rng(seed)
    inp = rng.integers(100, 1500, n)
    inp[::17] = SPEC.max_context + 10  # dropped: they are not dealt to any replica
    return _requests(np.cumsum(rng.exponential(1.0 / rate_rps, n)), inp, rng.integers(5, 200, n))


def _index_of(sub: LlmRequests, whole: LlmRequests) -> np.ndarray:
    i = np.searchsorted(whole.arrival_s, sub.arrival_s)
    assert np.array_equal(whole.arrival_s[i], sub.arrival_s)
    return i


@pytest.mark.parametrize(("replicas", "simulated"), [(6, 2), (5, 1), (4, 4)])
def test_a_share_of_the_replicas_serves_exactly_what_they_did(replicas, simulated) -> None:
    """Round robin over the served requests: the first k of r replicas, given their share of
    the stream (:func:`replica_share`), run exactly as they ran in the whole deployment; the
    dropped requests come at the same share."""
    req = _mixed(900, 40.0)
    sched = SchedulerConfig()
    whole = simulate_llm_serving(req, COST, sched, max_context=SPEC.max_context, replicas=replicas)
    share = replica_share(
        req, COST, sched, max_context=SPEC.max_context, replicas=replicas, simulated=simulated
    )
    part = simulate_llm_serving(share, COST, sched, max_context=SPEC.max_context,
                                replicas=simulated)  # fmt: skip
    i = _index_of(share, req)
    served = part.status != DROPPED
    assert served.any() and (~served).any()
    assert np.array_equal(whole.status[i], part.status)
    assert np.array_equal(whole.first_token_s[i][served], part.first_token_s[served])
    assert np.array_equal(whole.finish_s[i][served], part.finish_s[served])
    dropped_share = np.count_nonzero(~served) / share.count
    assert dropped_share == pytest.approx(np.count_nonzero(whole.status == DROPPED) / req.count,
                                          abs=0.02)  # fmt: skip
    with pytest.raises(InvalidSpecError, match="simulated"):
        replica_share(req, COST, sched, max_context=SPEC.max_context, replicas=3, simulated=4)


def test_one_pod_of_a_disaggregated_deployment_prefills_exactly_as_in_the_whole() -> None:
    """A deployment of m alike pods (m x p prefill + m x d decode) on every m-th request: the
    pod's prefill instances get exactly the requests theirs did, so first tokens agree."""
    req = _mixed(600, 30.0)
    sched = SchedulerConfig()
    link = 400.0
    m, p, d = 3, 1, 2
    whole = simulate_llm_serving(
        req, COST, sched, max_context=SPEC.max_context,
        disaggregation=Disaggregation(prefill_instances=m * p, decode_instances=m * d,
                                      kv_link_gbps=link),
    )  # fmt: skip
    share = replica_share(req, COST, sched, max_context=SPEC.max_context, replicas=m, simulated=1)
    pod = simulate_llm_serving(
        share, COST, sched, max_context=SPEC.max_context,
        disaggregation=Disaggregation(prefill_instances=p, decode_instances=d, kv_link_gbps=link),
    )  # fmt: skip
    i = _index_of(share, req)
    served = pod.status != DROPPED
    assert np.array_equal(whole.first_token_s[i][served], pod.first_token_s[served])
    assert np.array_equal(whole.decode_ready_s[i][served], pod.decode_ready_s[served])
