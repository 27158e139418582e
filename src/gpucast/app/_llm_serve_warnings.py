"""The warnings an LLM serving run earns: a run too short for its latencies
(:func:`short_run_warning`), rates not yet steady (:func:`unsteady_warning`), a queue that
grows (overload) or is still full at the horizon, and the plan's pick judged by the same
rules. Re-exported by :mod:`gpucast.app.llm_serve`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucast.domain.llm_serving import LlmRequests
    from gpucast.plan.llm_serve import LlmServePlan
    from gpucast.simulate.llm_serving import LlmServingResult


#: A queue grows when each second of arrivals adds at least this many seconds of wait: fewer
#: than about 98% of the offered requests are served, the saturation search's tolerance
#: (QA 35 N #12: 0.1 before, so llama-3-8b offered 15 req/s where it serves 14.5 ran 1,200 s to
#: a TTFT p50 of 93 s without a warning).
OVERLOAD_WAIT_GROWTH = 0.02


def longer_run(seconds: float, trace: bool) -> str:
    """The run that measures it: a --duration-s that long, or -- ``trace``, where
    --duration-s only cuts the trace, never lengthens it -- a longer trace's replay."""
    if trace:
        return f"a replay of at least {math.ceil(seconds):,} s of a longer trace"
    return f"a --duration-s of at least {math.ceil(seconds):,} s"


def short_run_warning(
    span_s: float, latency_p50_s: float | None, what: str, *, trace: bool = False
) -> list[str]:
    """One line when the arrivals span less than two median request latencies: the batch
    never filled, and the rates (over :attr:`LlmServingResult.rate_window_s`, which then
    cannot leave the warm-up out) and latencies are a warm-up's, not a steady server's.
    ``trace``: the arrivals are a trace's (:func:`longer_run`)."""
    if latency_p50_s is None or not math.isfinite(latency_p50_s) or span_s <= 0:
        return []
    if span_s >= 2.0 * latency_p50_s:
        return []
    return [
        f"the arrivals span {span_s:.3g} s, less than two of {what} median request latencies "
        f"({latency_p50_s:.3g} s): the batches never filled, so its rates and latencies are a "
        f"warm-up's, not a steady server's; {longer_run(8 * latency_p50_s, trace)} "
        "(8 latencies) measures them"
    ]


#: A steady server serves what arrives: served requests/s this share off the requests
#: arriving over the rates' window means the requests in flight grew or shrank over it
#: (:func:`unsteady_warning`).
STEADY_GAP = 0.02
#: Median latencies a run spans for its rates to be steady within :data:`STEADY_GAP`: near
#: capacity a batch fills over several latencies and the requests in flight swing by tens
#: (llama-3-8b on an H100 at 13 req/s: 2-4% off at 120 s, within 1.4% from 240 s, seeds 0-2,
#: latency ~15 s).
STEADY_LATENCIES = 20


def unsteady_warning(
    result: LlmServingResult, what: str = "the run", *, trace: bool = False
) -> list[str]:
    """One line when the run is too short to tell its steady rates: the requests/s served
    over :attr:`LlmServingResult.rate_window_s` is :data:`STEADY_GAP` or more off the
    requests arriving there (dropped ones left out) and the arrivals span fewer than
    :data:`STEADY_LATENCIES` median latencies of the window's requests. It says what a
    server that keeps up would read, and the --duration-s that measures it (QA 35 N #11:
    ``--rate 13`` read 11.86 of 12.35 req/s at 60 s, 13.06 of 13.12 at 600 s, US$ per
    million tokens a few % high, without a word)."""
    import numpy as np

    window, arriving = result.rate_window_s, result.window_arrival_rps()
    if window is None or not arriving:
        return []
    out = result.to_dict()
    served = float(out["throughput_rps"])  # type: ignore[arg-type]
    gap = served / arriving - 1.0
    lo, hi = window
    arrival = result.requests.arrival_s
    latency = result.latency_s[(arrival > lo) & (arrival <= hi) & result.finished]
    if abs(gap) < STEADY_GAP or latency.size == 0:
        return []
    typical = float(np.median(latency))
    need_s = STEADY_LATENCIES * typical
    if _arrival_span_s(result.requests) >= need_s:
        return []
    cost = float(out["cost_usd_per_million_tokens"])  # type: ignore[arg-type]
    advice = longer_run(need_s, trace)
    return [
        f"{what} is too short to tell its steady rates: over its steady window "
        f"({lo:.1f}-{hi:.1f} s) it served {served:.2f} req/s of the {arriving:.2f} arriving "
        f"({abs(gap):.1%} {'under' if gap < 0 else 'over'}; {result.in_flight_at(lo):,} "
        f"requests in flight at the window's start, {result.in_flight_at(hi):,} at its end: "
        f"{'the batch still filling, or a queue' if gap < 0 else 'a burst draining'}), so "
        f"the throughput and the {cost:.3f} US$ per million output tokens are off by about as "
        f"much; a server that keeps up serves what arrives ({arriving:.2f} req/s: "
        f"{cost * served / arriving:.3f} US$ per million output tokens). "
        f"{advice[0].upper()}{advice[1:]} ({STEADY_LATENCIES} "
        f"median latencies of the window's requests, {typical:.3g} s) measures them"
    ]


def _overload_warning(result: LlmServingResult) -> list[str]:
    """A queue that grew while requests arrived, in words. The wait of a request is its TTFT
    (disaggregated: its end-to-end latency, which holds the wait for a decode slot too); the
    run is overloaded when the median wait of the last quarter of the arrivals exceeds that
    of the second quarter (after the warm-up) by at least :data:`OVERLOAD_WAIT_GROWTH` s per
    second between them, and is beyond what 90% of the second quarter waited: a drift of
    milliseconds on a loaded but stable server is not a growing queue, however many requests
    are in flight when the last arrives. Only the requests that could run count (dropped ones
    are warned about apart), and only those that arrived before ``--horizon-s`` stopped the
    run (one without a first token or a finish by then waited at least until it)."""
    import numpy as np

    from gpucast.simulate.llm_serving import DROPPED

    keep = result.status != DROPPED
    if result.until_s is not None:
        keep &= result.requests.arrival_s <= result.until_s
    arrival = result.requests.arrival_s[keep]
    if arrival.size < 20:
        return []
    disaggregated = any(s.role == "prefill" for s in result.instances)
    stop = (result.finish_s if disaggregated else result.first_token_s)[keep]
    if result.until_s is not None:
        stop = np.where(np.isnan(stop), result.until_s, stop)
    if np.isnan(stop).any():  # pragma: no cover - every request runs to its end otherwise
        return []
    wait = stop - arrival
    q = arrival.size // 4
    second, last = wait[q : 2 * q], wait[arrival.size - q :]
    early, late = float(np.median(second)), float(np.median(last))
    between = float(np.median(arrival[arrival.size - q :]) - np.median(arrival[q : 2 * q]))
    growth = late - early
    if between <= 0 or growth < OVERLOAD_WAIT_GROWTH * between:
        return _horizon_queue_warning(result, float(np.median(arrival[q : 2 * q])))
    if late <= float(np.percentile(second, 90)):
        return _horizon_queue_warning(result, float(np.median(arrival[q : 2 * q])))
    end = float(arrival.max())
    left = int(np.count_nonzero(~(result.finish_s[keep] <= end)))
    summary = result.to_dict()
    what = "end-to-end latency" if disaggregated else "TTFT"
    return [
        f"overloaded: the queue grows with the run: {what} p50 {early:.2f} s for the second "
        f"quarter of the arrivals, {late:.2f} s for the last ({growth / between:.2f} s more "
        f"per second of arrivals); {summary['throughput_rps']:.2f} req/s served of "
        f"{summary['offered_rps']:.2f} offered, {left} requests still queued or running when "
        "the last arrived. Add --replicas, a faster GPU or tensor parallelism, or see plan "
        "serve."
    ]


def _horizon_queue_warning(result: LlmServingResult, start_s: float) -> list[str]:
    """A queue that grows up to ``--horizon-s``, in words: there the waits of the requests
    without a first token are cut at the horizon (the later one arrived, the less it shows),
    so the median-TTFT test cannot see the queue; the requests waiting for their first token
    are counted instead, as the saturation search counts them
    (:func:`gpucast.simulate.llm_load.waiting_trend`), from ``start_s`` to the horizon."""
    import numpy as np

    from gpucast.simulate.llm_load import LLM_TOLERANCE, waiting_trend

    until = result.until_s
    if until is None or until <= start_s:
        return []
    arrived = result.requests.arrival_s <= until
    rate = float(np.count_nonzero(arrived)) / until
    growth = waiting_trend(result, start_s, until)
    if growth <= LLM_TOLERANCE * rate:
        return []
    waiting = int(np.count_nonzero(arrived & ~(result.first_token_s <= until)))
    return [
        f"overloaded: the queue grows with the run: the requests waiting for their first "
        f"token grow by {growth:.2f} a second from {start_s:.1f} s to --horizon-s {until:g} "
        f"({waiting} waiting then, of {rate:.2f} req/s arriving). Add --replicas, a faster GPU "
        "or tensor parallelism, or see plan serve."
    ]


def _pick_warnings(plan: LlmServePlan, requests: LlmRequests, *, trace: bool = False) -> list[str]:
    """The pick's run too short to tell: a warm-up's latencies, or rates not yet steady
    (``trace``: the arrivals are a trace's)."""
    best = plan.best
    if best is None:
        return []
    span = _arrival_span_s(requests)
    short = short_run_warning(span, best.latency_p50_s, "the pick's", trace=trace)
    if short or plan.best_result is None:
        return short
    return unsteady_warning(plan.best_result, "the pick's run", trace=trace)


def _arrival_span_s(requests: LlmRequests) -> float:
    arrival = requests.arrival_s
    return float(arrival[-1] - arrival[0]) if arrival.size else 0.0
