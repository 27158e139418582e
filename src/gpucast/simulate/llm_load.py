"""How much load a language-model deployment holds: the work its requests cost, the analytic
capacity that follows, and one probe of the saturation search.

Pure, as :mod:`gpucast.simulate.llm_serving`: requests, iteration costs and a run function
in, numbers out. The search itself is the CNN path's
(:func:`gpucast.simulate.serving.search_saturation`); this module gives it a probe that
knows LLM requests take seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm_serving import IterationCost, LlmRequests
from gpucast.simulate.llm_serving import DROPPED, FINISHED, FloatArray, LlmServingResult
from gpucast.simulate.serving import Saturation, SaturationProbe, search_saturation

#: A probe runs at least this many median request latencies (its second half, measured, at
#: least half as many): a request that takes seconds must be seen arriving and leaving many
#: times over before a trend of the waiting requests says whether their queue grows.
LATENCIES_PER_PROBE = 40
#: Held: the requests waiting for a first token grow by at most this share of the arrival
#: rate over the measured half (:func:`waiting_trend`).
LLM_TOLERANCE = 0.02
#: Most requests one probe offers (its run is shortened to this): bounded work per probe.
LLM_MAX_REQUESTS = 20_000
#: Fewest requests one probe offers (its first run is lengthened to this, a short
#: ``duration_s`` at a low rate would offer none).
LLM_MIN_REQUESTS = 200
#: What a language model's saturation rates are clipped to, in words (:meth:`Saturation.within`)
LLM_BOUND = "the analytic capacity: every instance busy, decoding at its largest batch"


def work_s(requests: LlmRequests, cost: IterationCost, max_num_seqs: int) -> tuple[float, float]:
    """Instance-seconds ``requests`` need at best, as (prefill, decode): prompts batched
    (their token, KV and attention terms), decodes at the largest batch ``max_num_seqs``
    (the per-pass cost shared by the batch, each sequence's own token and context terms at
    its mean context). A lower bound on the work, so an upper bound on the capacity."""
    inp = requests.input_tokens.astype(np.float64)
    out = requests.output_tokens.astype(np.float64)
    prefill = (
        cost.token_s * inp + cost.kv_s_per_token * inp + cost.attention_s_per_unit * inp * inp / 2.0
    )
    n = max_num_seqs
    per_seq = (
        float(cost.pass_s[min(n, cost.max_tokens)]) + (cost.token_s + cost.sequence_s) * n
    ) / n
    ctx = inp + out / 2.0
    decode = (out - 1.0) * (per_seq + (cost.kv_s_per_token + cost.attention_s_per_unit) * ctx)
    return float(prefill.sum()), float(decode.sum())


def analytic_capacity_rps(
    requests: LlmRequests,
    cost: IterationCost,
    max_num_seqs: int,
    *,
    instances: int = 1,
    prefill_instances: int = 0,
    decode_instances: int = 0,
) -> float:
    """Requests/s the deployment could serve if every instance were busy with no waste:
    ``instances`` colocated ones split the whole work; disaggregated pools each their part
    (the slower pool bounds it). An upper bound: the saturation search starts here."""
    count = requests.count
    prefill, decode = work_s(requests, cost, max_num_seqs)
    if count == 0 or prefill + decode <= 0:
        return math.inf
    if prefill_instances:
        per_req_p, per_req_d = prefill / count, decode / count
        return min(
            prefill_instances / per_req_p if per_req_p > 0 else math.inf,
            decode_instances / per_req_d if per_req_d > 0 else math.inf,
        )
    return instances * count / (prefill + decode)


def llm_criterion(
    duration_s: float, tolerance: float, max_requests: int, *, pools: bool = False
) -> str:
    """What :func:`probe_llm_rate` calls held, in words (``pools``: prefill/decode pools)."""
    waiting = (
        "not yet finished (the prefill pool gives the first token at once: a queue for a "
        "decode slot shows only there)"
        if pools
        else "waiting for their first token"
    )
    return (
        f"held = over the second half of a run of at least {duration_s:g} s, "
        f"{LLM_MIN_REQUESTS} requests and {LATENCIES_PER_PROBE} median request latencies "
        f"(shorter where it would offer over {max_requests:,} requests), the requests "
        f"{waiting} grow by at most {tolerance:.0%} of the arrival rate "
        f"(their least-squares trend over {TREND_POINTS} instants: the queue stops "
        f"growing), at least {1 - COMPLETED_FLOOR:.0%} as many requests completed as "
        "arrived there, and, when requests were preempted for KV-cache blocks, the "
        "requests/s served did not fall below a lower rate's (a preemption storm)"
    )


def probe_llm_rate(
    run: Callable[[float, float], LlmServingResult],
    rate_rps: float,
    *,
    duration_s: float,
    tolerance: float = LLM_TOLERANCE,
    max_requests: int = LLM_MAX_REQUESTS,
    best_below_rps: float = 0.0,
) -> SaturationProbe:
    """Whether the deployment ``run(rate, seconds)`` simulates (arrivals at ``rate`` over
    ``seconds``, stopped there) holds ``rate`` (:func:`llm_criterion`). The run lasts
    ``duration_s`` (or long enough to offer :data:`LLM_MIN_REQUESTS`), longer when that is
    under :data:`LATENCIES_PER_PROBE` median latencies
    of its finished requests (one rerun), shorter when it would offer over ``max_requests``.
    ``best_below_rps``: the most requests/s a lower offered rate served (a throughput that
    falls under it, with preemptions, is a storm: not held)."""
    cap_s = max_requests / rate_rps
    span = min(max(duration_s, LLM_MIN_REQUESTS / rate_rps), cap_s)
    result = run(rate_rps, span)
    latency = result.latency_s
    done = latency[np.isfinite(latency)]
    if done.size:
        want = LATENCIES_PER_PROBE * float(np.median(done))
        if want > span and span < cap_s:
            span = min(want, cap_s)
            result = run(rate_rps, span)
    return _measure(result, span, tolerance, best_below_rps)


#: Instants over the second half of a probe at which the requests waiting are counted
#: for their trend (:func:`waiting_trend`).
TREND_POINTS = 41

#: A probe whose completions fall this far under its arrivals is not held whatever the trend
#: (a guard; the trend decides: completions - arrivals over the half is the change in the
#: requests in the system, which swings by tens of requests where they take seconds).
COMPLETED_FLOOR = 0.10


def waiting_trend(
    result: LlmServingResult, start_s: float, end_s: float, *, unfinished: bool = False
) -> float:
    """Requests/s by which the requests waiting for their first token (arrived, not yet
    prefilled; dropped ones never wait) grow over ``[start_s, end_s]``: the least-squares slope
    of their count at :data:`TREND_POINTS` instants (``unfinished``: the requests not yet
    finished instead -- with prefill/decode pools the prefill pool gives the first token at
    once, and a queue for a decode slot never shows in it: QA 40 I #7, 23.3 req/s "held" on
    one decode H100 that served 21.2 at every rate above 21.9). Colocated, the requests in
    the system (waiting and decoding) swing with the running batch, and completions minus
    arrivals over the half -- the criterion before -- read those swings as a queue (QA 35 N
    #9: llama-3-70b at 13.4 req/s held over 1,800 s, yet a probe read 134 -> 193 in the
    system as growth and called the deployment saturated at 11.2; llama-3-8b's search gave
    18.3 or 21.4 req/s by --duration-s, both 21.4 now, its peak throughput 21.5)."""
    runs = result.status != DROPPED
    arrival = np.sort(result.requests.arrival_s[runs])
    left = result.finish_s if unfinished else result.first_token_s
    gone = np.sort(np.where(np.isfinite(left[runs]), left[runs], np.inf))
    t = np.linspace(start_s, end_s, TREND_POINTS)
    count = np.searchsorted(arrival, t, side="right") - np.searchsorted(gone, t, side="right")
    return float(np.polyfit(t, count.astype(np.float64), 1)[0])


def _measure(
    result: LlmServingResult, span_s: float, tolerance: float, best_below: float
) -> SaturationProbe:
    """The second half of ``result`` (a run stopped at ``span_s``) as one probe. Requests
    that cannot run at all (beyond the context window or the KV cache: dropped whatever the
    load) count in the offered rate and the dropped share, not against holding."""
    half = 0.5 * span_s
    length = span_s - half
    arrival, finish, status = result.requests.arrival_s, result.finish_s, result.status
    with np.errstate(invalid="ignore"):
        arrived = (arrival >= half) & (arrival < span_s)
        completed = (status == FINISHED) & (finish >= half) & (finish <= span_s)
    n_arrived = int(np.count_nonzero(arrived))
    n_dropped = int(np.count_nonzero(arrived & (status == DROPPED)))
    runnable = (n_arrived - n_dropped) / length
    served = int(np.count_nonzero(completed)) / length
    preempted = float(np.mean(result.preemptions[arrived] > 0)) if n_arrived else 0.0
    mine = arrived & (status == FINISHED)

    def pct(values: FloatArray, q: float) -> float:
        v = values[mine & np.isfinite(values)]
        return float(np.percentile(v, q)) if v.size else math.nan

    storm = preempted > 0 and served < (1.0 - tolerance) * best_below
    growth = waiting_trend(result, half, span_s, unfinished=result.decode_ready_s is not None)
    held = (
        runnable > 0
        and growth <= tolerance * runnable
        and served >= (1.0 - COMPLETED_FLOOR) * runnable
        and not storm
    )
    latency, ttft, tpot = result.latency_s, result.ttft_s, result.tpot_s
    return SaturationProbe(
        offered_rps=n_arrived / length, served_rps=served,
        dropped_fraction=n_dropped / n_arrived if n_arrived else 0.0, held=held,
        p50_s=pct(latency, 50), p99_s=pct(latency, 99),
        ttft_p50_s=pct(ttft, 50), ttft_p99_s=pct(ttft, 99),
        tpot_p50_s=pct(tpot, 50), tpot_p99_s=pct(tpot, 99),
        tokens_per_s=float(result.requests.output_tokens[completed].sum()) / length,
        preempted_fraction=preempted, run_s=span_s,
    )  # fmt: skip


def find_llm_saturation(
    run: Callable[[float, float], LlmServingResult],
    *,
    start_rps: float,
    duration_s: float,
    tolerance: float = LLM_TOLERANCE,
    precision: float = 0.01,
    max_probes: int = 30,
    max_requests: int = LLM_MAX_REQUESTS,
    pools: bool = False,
    capacity_of: Callable[[LlmRequests], float] | None = None,
) -> Saturation:
    """The highest request rate the deployment ``run`` simulates holds: the CNN path's search
    (:func:`gpucast.simulate.serving.search_saturation`) over :func:`probe_llm_rate`, each
    probe knowing the most requests/s any lower offered rate served (a preemption storm's
    fall). ``pools``: ``run`` simulates prefill/decode pools (the criterion's words).
    ``capacity_of``: the deployment's :func:`analytic_capacity_rps` of a set of requests;
    the rates are then clipped to the largest of it over the probes' runnable requests, as
    the CNN search clips to its analytic capacity (a probe's window counts the completions
    of requests already in service at its start)."""
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise InvalidSpecError("duration-s", "must be > 0 seconds", got=duration_s)
    done: list[SaturationProbe] = []
    bounds: list[float] = []

    def measured(rate: float, span: float) -> LlmServingResult:
        result = run(rate, span)
        if capacity_of is not None:
            bounds.append(capacity_of(result.requests.take(result.status != DROPPED)))
        return result

    def probe(rate: float) -> SaturationProbe:
        below = max((p.served_rps for p in done if p.offered_rps < rate), default=0.0)
        found = probe_llm_rate(
            measured, rate, duration_s=duration_s, tolerance=tolerance,
            max_requests=max_requests, best_below_rps=below,
        )  # fmt: skip
        done.append(found)
        return found

    sat = search_saturation(
        probe, start_rps=start_rps,
        criterion=llm_criterion(duration_s, tolerance, max_requests, pools=pools),
        precision=precision, max_probes=max_probes,
    )  # fmt: skip
    return sat.within(max(bounds), LLM_BOUND) if bounds else sat
