"""Token-level LLM serving: continuous batching as vLLM does it, seeded and fast.

Pure: requests (:class:`~gpucast.domain.llm_serving.LlmRequests`), the cost of one engine
iteration (:class:`~gpucast.domain.llm_serving.IterationCost`, from
:func:`gpucast.predict.llm_infer.iteration_cost`) and a scheduler in; per-request times out.
No RNG: routing is round robin in arrival order, so the same requests give the same result
bit for bit (the randomness of synthetic requests belongs to whoever draws them).

The model
---------
* **Replicas.** Requests are dealt round robin in arrival order to ``replicas`` identical
  instances (each ``tp`` GPUs); instances share nothing and are simulated one after another.
* **An instance** runs iterations back to back while it has work. Each iteration the running
  sequences decode one token. Without chunked prefill (vLLM V0's default) an iteration that
  admits waiting requests runs only their prompts (the decodes wait: their next token is
  late by the whole prefill); requests are admitted first come, first served while
  ``max_num_seqs`` sequences, the token budget and the paged KV cache allow (``block_size``-
  token blocks, the watermark kept free). The prefill emits the first token (TTFT); a request
  of ``O`` output tokens then needs ``O - 1`` decode iterations. With chunked prefill every
  iteration runs all decodes first and fills the rest of the token budget with prompt chunks
  (Sarathi-Serve / vLLM V1).
* **KV cache.** A sequence holding ``c`` tokens holds ``ceil(c / block_size)`` blocks; a
  decode appends one token. When a decode finds no free block the latest-arrived running
  sequence is preempted: *recompute* frees its blocks and puts it at the head of the queue
  to prefill prompt + generated tokens again; *swap* copies its blocks to CPU memory over
  PCIe (both ways: time added to the instance) and swaps it back in, before any new prompt,
  when blocks are free again (falling back to recompute when the swap space is full).
  Requests that cannot fit even alone (prompt + output beyond the context window, the KV
  capacity, or -- without chunked prefill -- the token budget) are dropped at arrival.
* **Disaggregation** (Splitwise): prefill instances run batches of prompts only; each
  request's KV cache then crosses the prefill instance's link to a decode instance (round
  robin in order of readiness), which admits it without a prefill and decodes it with
  continuous batching (a request it preempts is recomputed there). The link is a FIFO
  server: a transfer waits for the one before it, then holds the link for
  :meth:`Disaggregation.serialise_s` (plus the link's latency), so a slow link bounds the
  requests/s and its queue grows without bound under overload (:attr:`LlmServingResult.kv_link`
  says when the run is link-bound). The KV cache a queued transfer holds on the prefill
  instance is not charged to its blocks.

Why it is fast
--------------
Between two events (an arrival the scheduler could admit, a sequence finishing, the KV
cache running out of blocks) every iteration decodes the same sequences, and the time of a
decode step is linear in their total context, which grows by ``n`` per step. The loop
therefore jumps a whole stretch of ``k`` steps at once: the stretch time is an arithmetic
series, the step at which an arrival is seen solves a quadratic, the first finish is the top
of a heap, and the blocks ``k`` steps need are read off a histogram of the sequences' offsets
within their last block (all advance in lock step). One loop pass per event, a few events
per request: a million requests in seconds (``benchmarks/llm_serving_speed.py``).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm_serving import (
    Disaggregation,
    IterationCost,
    LlmRequests,
    SchedulerConfig,
)
from gpucast.domain.units import GIB, count_of, usd_per_million

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Status of a request at the end of a run.
FINISHED, DROPPED, RUNNING, UNARRIVED = 0, 1, 2, 3
#: A KV link busy this share of the time simulated bounds the run (transfers queue).
LINK_BOUND_UTILISATION = 0.9
#: Percentiles every summary reports.
PERCENTILES = (50.0, 90.0, 95.0, 99.0)
#: How a TTFT / TPOT / latency percentile is taken (:func:`tail_percentiles`), in words.
PERCENTILE_RULE = (
    "nearest rank over the requests that arrived (TPOT: those of at least 2 output tokens), "
    "a request that never reached the figure counting as infinitely late: pNN <= an SLO "
    "exactly when NN% of the requests meet it"
)
#: Default host-to-GPU bandwidth for swapping KV blocks (Gbit/s; PCIe Gen4 x16 ~ 25 GB/s).
DEFAULT_SWAP_GBPS = 200.0

_WAITING, _RUN, _SWAPPED, _DONE, _DROP = 0, 1, 2, 3, 4


# -- results ---------------------------------------------------------------------------------
def offered_rps(arrival_s: FloatArray, horizon_s: float = math.inf) -> float:
    """Requests arriving per second, as a CNN run's ``offered_rps``: those arriving in the
    window over its length, the window from 0 to the last arrival plus one mean gap (how a
    replayed trace's span counts) or to ``horizon_s`` when that comes first."""
    n = arrival_s.size
    if n == 0:
        return math.nan
    own = float(arrival_s[-1]) * n / (n - 1) if n > 1 else float(arrival_s[-1])
    window = min(own, horizon_s)
    return int(np.count_nonzero(arrival_s <= window)) / window if window > 0 else math.nan


def run_end_s(
    arrival_s: FloatArray, finish_s: FloatArray, running: bool, until_s: float | None
) -> float:
    """Where the simulated time ends (s from 0): the last finish (the last arrival when none
    finished); with a horizon ``until_s``, the horizon while a request still ran at it, else
    the sooner of the two. Busy fractions and whole-run rates divide by the time up to here,
    not by a horizon set past the last completion (where nothing was simulated)."""
    done = finish_s[np.isfinite(finish_s)]
    last = float(done.max()) if done.size else (float(arrival_s[-1]) if arrival_s.size else 0.0)
    if until_s is None:
        return last
    return float(until_s) if running else min(last, float(until_s))


def tail_percentiles(values: FloatArray, qs: Sequence[float]) -> list[float]:
    """Percentiles (``qs`` in 0-100) of one latency over the requests it counts, NaN -- a
    request that never reached it (no first token; not finished: dropped, or still running
    when the run stopped) -- counted infinitely late. Nearest rank: the ``q``-th is the
    smallest value with at least ``q``% of the requests at or under it, one request's own
    value, never an interpolation, so it is within a limit exactly when at least ``q``% of
    the requests are (the SLO attainment), and requests that never finished stay in the tail
    (an overloaded run's p99 is ``inf``, not the p99 of the few it finished). ``plan serve``'s
    rows and ``simulate serve``'s summaries both take it."""
    n = values.size
    if n == 0:
        return [math.nan for _ in qs]
    ordered = np.sort(np.where(np.isnan(values), np.inf, values))
    # the rank ceil(n q / 100), less a hair of float error (99% of 100 is rank 99, not 100)
    return [float(ordered[max(math.ceil(n * q / 100.0 - 1e-9), 1) - 1]) for q in qs]


def summary(values: FloatArray) -> dict[str, float]:
    """p50 / p90 / p95 / p99 by :func:`tail_percentiles` (NaN counts infinitely late), the
    mean of the values reached and the max (``inf`` when a request never reached it); NaN
    when no request counts."""
    *p, most = tail_percentiles(values, (*PERCENTILES, 100.0))
    reached = values[np.isfinite(values)]
    return {
        **{f"p{q:g}": x for q, x in zip(PERCENTILES, p, strict=True)},
        "mean": float(reached.mean()) if reached.size else math.nan,
        "max": most,
    }


def mixture_quantiles(
    lo: FloatArray, hi: FloatArray, weight: FloatArray, q: Sequence[float]
) -> list[float]:
    """Quantiles (``q`` in [0, 1]) of a mixture of uniform distributions on ``[lo, hi]`` with
    ``weight`` each (``lo == hi``: a point mass). Exact: the CDF is piecewise linear with
    slope changes at the ends, sorted once."""
    keep = weight > 0
    lo, hi, w = lo[keep], hi[keep], weight[keep]
    if w.size == 0:
        return [math.nan for _ in q]
    total = float(w.sum())
    wide = hi > lo
    slope = np.where(wide, w / np.where(wide, hi - lo, 1.0), 0.0)
    x = np.concatenate([lo, hi, lo[~wide]])
    d_slope = np.concatenate([slope, -slope, np.zeros(int((~wide).sum()))])
    jump = np.concatenate([np.zeros(lo.size), np.zeros(hi.size), w[~wide]])
    order = np.argsort(x, kind="stable")
    x, d_slope, jump = x[order], d_slope[order], jump[order]
    slope_after = np.cumsum(d_slope)
    gaps = np.diff(x)
    ramp = np.concatenate([[0.0], np.cumsum(slope_after[:-1] * gaps)])
    cdf = ramp + np.cumsum(jump)  # CDF at each breakpoint (right-continuous)
    out = []
    for quant in q:
        target = quant * total
        j = int(np.searchsorted(cdf, target, side="left"))
        if j >= x.size:
            out.append(float(x[-1]))
            continue
        if j == 0:
            out.append(float(x[0]))
            continue
        s = slope_after[j - 1]
        base = cdf[j - 1]
        if s > 0 and target - base <= s * (x[j] - x[j - 1]):
            out.append(float(x[j - 1] + (target - base) / s))
        else:
            out.append(float(x[j]))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceStats:
    """One simulated instance (``gpus`` GPUs): its role, load and KV cache."""

    role: str  # "colocated", "prefill" or "decode"
    replica: int
    gpus: int
    requests: int  # routed to it and arrived by the horizon (``until_s``)
    iterations: int
    busy_s: float
    busy_fraction: float  # busy_s / the time simulated (first arrival to the run's end)
    preemptions: int
    peak_kv_utilisation: float
    mean_running: float  # sequences per decode iteration (0 when none ran)
    max_waiting: int
    tokens: int = 0  # tokens emitted: one per prefill completion, one per sequence per decode
    decode_steps: int = 0  # iterations that decoded (none: every output was one token)
    # a prefill instance's KV link: transfers sent, their bytes (per GPU), seconds it was
    # busy serialising them (within the horizon) and that over the time simulated
    link_transfers: int = 0
    link_bytes: float = 0.0
    link_busy_s: float = 0.0
    link_busy_fraction: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "name": f"{self.role} #{self.replica}",
            "role": self.role,
            "replica": self.replica,
            "gpus": self.gpus,
            "requests": self.requests,
            "iterations": self.iterations,
            "busy_s": self.busy_s,
            "busy_fraction": self.busy_fraction,
            "preemptions": self.preemptions,
            "peak_kv_utilisation": self.peak_kv_utilisation,
            "mean_running": self.mean_running if self.decode_steps else math.nan,
            "decode_steps": self.decode_steps,
            "max_waiting": self.max_waiting,
            "tokens": self.tokens,
            **(
                {
                    "link_transfers": self.link_transfers,
                    "link_bytes": self.link_bytes,
                    "link_busy_s": self.link_busy_s,
                    "link_busy_fraction": self.link_busy_fraction,
                }
                if self.role == "prefill"
                else {}
            ),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class KvLinkLoad:
    """The prefill->decode KV links of a disaggregated run (:attr:`LlmServingResult.kv_link`)."""

    gbps: float  # each prefill instance's link, Gbit/s per GPU
    transfers: int
    bytes_per_request: float  # mean KV cache of a transfer, bytes per GPU
    capacity_rps: float  # the most requests/s the links carry (all prefill instances)
    utilisation: float  # the busiest link's share of the time simulated
    bound: bool  # busy >= LINK_BOUND_UTILISATION: the link limits the requests/s


def _frozen(values: npt.ArrayLike, dtype: type) -> npt.NDArray[Any]:
    arr: npt.NDArray[Any] = np.array(values, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmServingResult:
    """Per-request arrays of one run (in arrival order) and the summaries made from them.

    ``first_token_s`` / ``finish_s`` are absolute times (NaN when the request got no token /
    did not finish); ``status`` is :data:`FINISHED`, :data:`DROPPED` (it cannot fit),
    :data:`RUNNING` (arrived, unfinished when ``until_s`` stopped the run) or
    :data:`UNARRIVED` (it would arrive after ``until_s``: never queued, never running).
    ``itl_*`` describe the gaps between consecutive tokens of one sequence as a mixture of
    uniforms (a decode stretch's steps grow linearly), for :meth:`itl_percentiles`.
    """

    requests: LlmRequests
    first_token_s: FloatArray
    finish_s: FloatArray
    status: IntArray
    preemptions: IntArray
    instances: tuple[InstanceStats, ...]
    price_usd_per_hour: float
    gpus: int
    itl_lo_s: FloatArray
    itl_hi_s: FloatArray
    itl_weight: FloatArray
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    until_s: float | None = None
    kv_link_gbps: float | None = None  # disaggregated: each prefill instance's KV link
    # disaggregated: when each request's KV cache reached its decode instance (NaN: never)
    decode_ready_s: FloatArray | None = None
    drop_reasons: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for name in ("first_token_s", "finish_s", "itl_lo_s", "itl_hi_s", "itl_weight"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.float64))
        object.__setattr__(self, "status", _frozen(self.status, np.int64))
        if self.decode_ready_s is not None:
            object.__setattr__(self, "decode_ready_s", _frozen(self.decode_ready_s, np.float64))
        object.__setattr__(self, "preemptions", _frozen(self.preemptions, np.int64))
        object.__setattr__(self, "drop_reasons", MappingProxyType(dict(self.drop_reasons)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    # -- counts ------------------------------------------------------------------------------
    @property
    def finished(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.status == FINISHED)

    def count(self, status: int) -> int:
        return int(np.count_nonzero(self.status == status))

    # -- latencies ---------------------------------------------------------------------------
    @property
    def ttft_s(self) -> FloatArray:
        """Time to first token of every request that got one (NaN otherwise)."""
        return np.asarray(self.first_token_s - self.requests.arrival_s)

    @property
    def latency_s(self) -> FloatArray:
        """End-to-end latency of every finished request (NaN otherwise)."""
        return np.asarray(self.finish_s - self.requests.arrival_s)

    @property
    def tpot_s(self) -> FloatArray:
        """Mean time per output token after the first, per finished request of >= 2 tokens."""
        out = self.requests.output_tokens
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = (self.finish_s - self.first_token_s) / (out - 1)
        return np.asarray(np.where(out > 1, tpot, np.nan))

    def counted(self, values: FloatArray, *, per_output_token: bool = False) -> FloatArray:
        """``values`` (:attr:`ttft_s`, :attr:`tpot_s`, :attr:`latency_s`) of the requests a
        latency percentile is over (:func:`tail_percentiles`): every request that arrived (by
        ``until_s``), or with ``per_output_token`` those of them with at least two output
        tokens (the others have no time per output token); NaN stays where the request never
        reached the value (no first token; not finished), to count infinitely late."""
        keep = self.status != UNARRIVED
        if per_output_token:
            keep &= self.requests.output_tokens > 1
        return np.asarray(values[keep])

    def unfinished_text(self) -> str | None:
        """How the percentiles count the requests that arrived and did not finish (dropped,
        or running when ``until_s`` stopped the run), in words; None when every one finished."""
        dropped, running = self.count(DROPPED), self.count(RUNNING)
        parts = ([f"the {count_of(dropped, 'dropped request')}"] if dropped else []) + (
            [f"the {count_of(running, 'request')} still running at the horizon"] if running else []
        )
        if not parts:
            return None
        return (
            f"{' and '.join(parts)} count{'s' if dropped + running == 1 else ''} as infinitely "
            "late (inf) in the TPOT and latency percentiles, and in TTFT those without a first "
            "token, as in the SLO attainment"
        )

    def itl_percentiles(self) -> dict[str, float]:
        """Inter-token latency over every token gap of every sequence."""
        qs = mixture_quantiles(
            self.itl_lo_s, self.itl_hi_s, self.itl_weight, [p / 100 for p in PERCENTILES]
        )
        w = self.itl_weight
        mean = (
            float(np.sum(w * (self.itl_lo_s + self.itl_hi_s) / 2.0) / w.sum())
            if w.size and w.sum() > 0
            else math.nan
        )
        out = {f"p{p:g}": v for p, v in zip(PERCENTILES, qs, strict=True)}
        out["mean"] = mean
        out["max"] = float(self.itl_hi_s.max()) if self.itl_hi_s.size else math.nan
        return out

    # -- rates -------------------------------------------------------------------------------
    @property
    def span_s(self) -> float:
        """The time simulated: from the first arrival to :func:`run_end_s` (the last finish,
        or ``until_s`` while a request still ran at it) -- never past the last event, so a
        horizon beyond the last completion changes nothing."""
        arrival = self.requests.arrival_s
        if arrival.size == 0:
            return 0.0
        end = run_end_s(arrival, self.finish_s, self.count(RUNNING) > 0, self.until_s)
        return float(max(end - arrival[0], 0.0))

    @property
    def rate_window_s(self) -> tuple[float, float] | None:
        """The steady part of the run that tokens/s, requests/s, goodput and the cost per
        token are measured over (s from 0): from when the batch has filled to the last
        arrival (``until_s`` when sooner). Filled: at the first arrival that finds as many
        requests in flight as the median arrival of the window's second half finds
        (:meth:`_filled_at_s`), and no sooner than one median latency of the finished
        requests after the first arrival; at most half the arrival span. Near its capacity a
        server's batch fills over several latencies -- each request it admits slows the
        others' steps -- and a window from one latency on read the served rate a few %
        under the offered with no queue (QA 35 N #11: 11.86 of 12.35 req/s at 60 s). The
        warm-up and the drain after the last arrival -- the last requests finishing on an
        emptying server, as long as a request takes however short the run -- are left out:
        the rates are those of a server that keeps receiving the stream. None (the rates
        then run over :attr:`span_s`) when the arrivals span no time or none finished."""
        arrival = self.requests.arrival_s
        fin = self.finished
        if arrival.size < 2 or not fin.any():
            return None
        start = float(arrival[0])
        end = float(arrival[-1]) if self.until_s is None else min(float(arrival[-1]), self.until_s)
        if end <= start:
            return None
        warm = float(np.median(self.finish_s[fin] - arrival[fin]))
        filled = self._filled_at_s(start, end) - start
        return start + min(max(warm, filled), (end - start) / 2.0), end

    def _filled_at_s(self, start_s: float, end_s: float) -> float:
        """The first arrival (by ``end_s``) that finds at least the median of the requests in
        flight (that could run) found by the arrivals after the middle of ``[start_s,
        end_s]``: the batch has grown to the size it keeps."""
        arrival = self.requests.arrival_s
        keep = (self.status != DROPPED) & (arrival <= end_s)
        at, finish = arrival[keep], self.finish_s[keep]
        done = np.sort(finish[np.isfinite(finish)])
        found = np.arange(1, at.size + 1) - np.searchsorted(done, at, side="right")
        later = found[at > (start_s + end_s) / 2.0]
        if later.size == 0:
            return start_s
        return float(at[np.argmax(found >= np.median(later))])

    def in_flight_at(self, t_s: float) -> int:
        """Requests that could run (not dropped) arrived by ``t_s`` and unfinished at it."""
        with np.errstate(invalid="ignore"):
            unfinished = ~(self.finish_s <= t_s)
        keep = (self.status != DROPPED) & (self.requests.arrival_s <= t_s) & unfinished
        return int(np.count_nonzero(keep))

    def window_arrival_rps(self) -> float | None:
        """Requests that could run (not dropped) arriving per second of :attr:`rate_window_s`
        (None without one): what a server that keeps up serves there, so the served
        requests/s falls under it only while the requests in flight grow -- a batch still
        filling, or a queue."""
        window = self.rate_window_s
        if window is None:
            return None
        lo, hi = window
        arrival = self.requests.arrival_s
        inside = (arrival > lo) & (arrival <= hi) & (self.status != DROPPED)
        return int(np.count_nonzero(inside)) / (hi - lo)

    def _steady_rates(self) -> dict[str, float]:
        """Per second of :attr:`rate_window_s` (over :attr:`span_s` without one): requests
        served (each finished request counts the share of its arrival-to-finish time inside
        the window: in a steady run, the requests finishing per second), those within the
        SLOs, output tokens (the first at its TTFT, the others spread evenly to the finish)
        and prompt tokens (at the first token). Disaggregated, a request's stretch and its
        later tokens start when its KV cache reached the decode instance: a queue for the
        KV link spreads no request or token over time it waited rather than was served."""
        fin = self.finished
        window = self.rate_window_s
        if window is None:
            length = self.span_s
            served = fin.astype(np.float64)
            out_tokens = float(self.output_tokens_done)
            in_tokens = float(self.requests.input_tokens[fin].sum())
        else:
            lo, hi = window
            length = hi - lo
            first, finish = self.first_token_s, self.finish_s
            with np.errstate(invalid="ignore"):
                started = (first > lo) & (first <= hi)
            begin, decoding = self.requests.arrival_s, first
            if self.decode_ready_s is not None:
                ready = self.decode_ready_s
                begin = np.where(np.isfinite(ready), ready, begin)
                decoding = np.where(np.isfinite(ready), ready, first)
            served = _share_inside(begin, finish, fin, lo, hi)
            decode = (self.requests.output_tokens - 1) * _share_inside(
                decoding, finish, fin, lo, hi
            )
            out_tokens = float(np.count_nonzero(started) + decode.sum())
            in_tokens = float(self.requests.input_tokens[started].sum())
        per_s = 1.0 / length if length > 0 else 0.0
        return {
            "requests": float(served.sum()) * per_s,
            "good": float(served[self.meets_slo].sum()) * per_s,
            "output": out_tokens * per_s,
            "total": (out_tokens + in_tokens) * per_s,
        }

    @property
    def horizon_s(self) -> float:
        """Where the run's accounting ends (s from 0), as ``horizon_s`` of a CNN's
        :class:`~gpucast.simulate.serving.ServingResult`: ``until_s``, else the last finish
        (the run goes on until every request is done), else the last arrival."""
        arrival = self.requests.arrival_s
        if self.until_s is not None:
            return float(self.until_s)
        if np.any(self.finished):
            return float(np.nanmax(self.finish_s))
        return float(arrival[-1]) if arrival.size else 0.0

    @property
    def kv_link(self) -> KvLinkLoad | None:
        """The prefill->decode KV links of a disaggregated run (None when colocated): the
        transfers, the mean KV bytes (per GPU) of one, the requests/s the links carry at
        most (``kv_link_gbps`` x 1e9 / 8 / those bytes, per prefill instance), the busiest
        link's share of the time simulated, and ``bound``: True when that share is at least
        :data:`LINK_BOUND_UTILISATION` -- transfers queue, and the link limits the requests/s
        (a decode GPU busy all along may still have room: continuous batching)."""
        links = [s for s in self.instances if s.role == "prefill"]
        if not links or self.kv_link_gbps is None:
            return None
        sent = sum(s.link_transfers for s in links)
        size = sum(s.link_bytes for s in links) / sent if sent else 0.0
        per_link = self.kv_link_gbps * 1e9 / 8.0 / size if size > 0 else math.inf
        busiest = max(s.link_busy_fraction for s in links)
        return KvLinkLoad(
            gbps=self.kv_link_gbps,
            transfers=sent,
            bytes_per_request=size,
            capacity_rps=per_link * len(links),
            utilisation=busiest,
            bound=busiest >= LINK_BOUND_UTILISATION,
        )

    @property
    def in_flight(self) -> int:
        """Requests that arrived by the horizon and were still queued or running at it (the
        CNN result's ``in_flight``; 0 unless ``until_s`` stopped the run)."""
        return self.count(RUNNING)

    def offered_rps(self) -> float:
        """Requests arriving per second, as a CNN run's ``offered_rps`` (:func:`offered_rps`)."""
        return offered_rps(self.requests.arrival_s, self.horizon_s)

    @property
    def output_tokens_done(self) -> int:
        """Generated tokens of the finished requests."""
        return int(self.requests.output_tokens[self.finished].sum())

    @property
    def meets_slo(self) -> npt.NDArray[np.bool_]:
        """Finished requests within both SLOs (all finished ones when none is set)."""
        ok = self.finished.copy()
        with np.errstate(invalid="ignore"):
            if self.slo_ttft_s is not None:
                ok &= self.ttft_s <= self.slo_ttft_s
            if self.slo_tpot_s is not None:
                tpot = self.tpot_s
                ok &= np.isnan(tpot) | (tpot <= self.slo_tpot_s)
        return np.asarray(ok)

    @property
    def slo_attainment(self) -> float | None:
        """Share of all requests (dropped and unfinished ones count as misses) within SLO."""
        if self.slo_ttft_s is None and self.slo_tpot_s is None:
            return None
        n = self.requests.count
        return float(self.meets_slo.sum()) / n if n else math.nan

    def to_dict(self, *, timeline_bins: int = 0) -> dict[str, object]:
        fin = self.finished
        out_tokens = self.output_tokens_done
        in_tokens = int(self.requests.input_tokens[fin].sum())
        rates = self._steady_rates()
        tokens_per_s, total_per_s, rps = rates["output"], rates["total"], rates["requests"]
        window = self.rate_window_s
        price = self.price_usd_per_hour

        def per_million(rate: float) -> float:
            return usd_per_million(price, rate)

        slo = None
        if self.slo_ttft_s is not None or self.slo_tpot_s is not None:
            slo = {"ttft_s": self.slo_ttft_s, "tpot_s": self.slo_tpot_s}
        # the decode batch of the instances that decoded (none: every output one token)
        runs = [s.mean_running for s in self.instances if s.role != "prefill" and s.decode_steps]
        result: dict[str, object] = {
            "requests": self.requests.count,
            "finished": int(fin.sum()),
            "dropped": self.count(DROPPED),
            "running": self.count(RUNNING),
            # finished + dropped + running + not_arrived = requests
            "not_arrived": self.count(UNARRIVED),
            # the CNN result's names: served + dropped + in_flight = requests (less those
            # arriving after --horizon-s, which were never in flight)
            "served": int(fin.sum()),
            "in_flight": self.in_flight,
            "offered_rps": self.offered_rps(),
            "horizon_s": self.horizon_s,
            "warmup_s": 0.0,
            "drop_reasons": dict(self.drop_reasons),
            "ttft_s": summary(self.counted(self.ttft_s)),
            "tpot_s": summary(self.counted(self.tpot_s, per_output_token=True)),
            "itl_s": self.itl_percentiles(),
            "latency_s": summary(self.counted(self.latency_s)),
            # how ttft_s / tpot_s / latency_s count: nearest rank over the requests that
            # arrived; the unfinished ones (when any) infinitely late, null in JSON
            "percentiles": PERCENTILE_RULE,
            "unfinished_in_percentiles": self.unfinished_text(),
            "throughput_rps": rps,
            "tokens_per_s": tokens_per_s,
            "total_tokens_per_s": total_per_s,
            "output_tokens": out_tokens,
            "input_tokens": in_tokens,
            "slo_s": slo,
            "slo_attainment": self.slo_attainment,
            "goodput_rps": rates["good"],
            "cost_usd_per_hour": price,
            "cost_usd_per_million": per_million(rps),
            "cost_usd_per_million_tokens": per_million(tokens_per_s),
            "cost_usd_per_million_total_tokens": per_million(total_per_s),
            "gpus": self.gpus,
            "preemptions": int(self.preemptions.sum()),
            "mean_batch_size": float(np.mean(runs)) if runs else math.nan,
            "span_s": self.span_s,
            # the steady window the rates and costs are over (None: over span_s)
            "rate_window_s": None if window is None else list(window),
            "servers": [s.to_dict() for s in self.instances],
            "kv_link": None if (link := self.kv_link) is None else dataclasses.asdict(link),
            "sources": dict(self.sources),
        }
        if timeline_bins:
            result["timeline"] = self.timeline(timeline_bins)
        return result

    def timeline(self, bins: int = 30) -> dict[str, list[float]]:
        """Per arrival-time bin: request rate, p50 TTFT and p50 end-to-end latency."""
        arrival = self.requests.arrival_s
        if arrival.size == 0:
            return {"t_s": [], "rps": [], "ttft_p50_s": [], "latency_p50_s": []}
        t_end = float(arrival[-1])
        edges = np.linspace(0.0, t_end if t_end > 0 else 1.0, bins + 1)
        which = np.clip(np.searchsorted(edges, arrival, side="right") - 1, 0, bins - 1)
        counts = np.bincount(which, minlength=bins)
        width = edges[1] - edges[0]
        ttft, lat = self.ttft_s, self.latency_s

        def med(values: FloatArray, b: int) -> float:
            v = values[(which == b) & np.isfinite(values)]
            return float(np.median(v)) if v.size else math.nan

        return {
            "t_s": [float(x) for x in edges[:-1]],
            "rps": [float(c / width) for c in counts],
            "ttft_p50_s": [med(ttft, b) for b in range(bins)],
            "latency_p50_s": [med(lat, b) for b in range(bins)],
        }


def _share_inside(
    start: FloatArray, end: FloatArray, keep: npt.NDArray[np.bool_], lo: float, hi: float
) -> FloatArray:
    """Per request, the share of ``(start, end]`` inside ``(lo, hi]`` (0 where not ``keep``;
    an empty stretch: 1 when its end is inside)."""
    with np.errstate(invalid="ignore"):
        length = np.where(keep, end - start, 0.0)
        inside = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None)
        point = keep & (end > lo) & (end <= hi)
        share = np.where(length > 0, inside / np.where(length > 0, length, 1.0), point)
    return np.asarray(np.where(keep, share, 0.0), dtype=np.float64)


# -- one instance ----------------------------------------------------------------------------
class ClientLoop(Protocol):
    """A closed loop's source of requests (:mod:`gpucast.simulate.llm_closed_loop`)."""

    def finished(self, t: float, count: int) -> None:
        """``count`` requests finished at ``t``: their clients' next requests are queued."""


@dataclass(slots=True)
class _Shared:
    """Per-request state shared by the instance loops (Python lists: fast scalar access)."""

    inp: list[int]
    out: list[int]
    gen: list[int]
    first: list[float]
    finish: list[float]
    state: list[int]
    preempted: list[int]
    itl_lo: list[float]
    itl_hi: list[float]
    itl_w: list[float]


@dataclass(slots=True)
class _Outcome:
    iterations: int = 0
    busy_s: float = 0.0
    preemptions: int = 0
    peak_blocks: int = 0
    decode_seq_steps: float = 0.0
    decode_steps: int = 0
    max_waiting: int = 0
    tokens: int = 0
    ready_out: list[float] = field(default_factory=list)  # prefill pool: ready time per id
    link_transfers: int = 0  # prefill pool: its KV link (InstanceStats.link_*)
    link_bytes: float = 0.0
    link_busy_s: float = 0.0


def _window(hist: list[int], end: int, length: int, bs: int) -> int:
    """Sum of ``hist`` over the ``length`` residues ending at ``end`` (cyclic, mod ``bs``)."""
    if length <= 0:
        return 0
    start = end - length + 1
    if start >= 0:
        return sum(hist[start : end + 1])
    return sum(hist[: end + 1]) + sum(hist[start + bs :])


def _run_instance(
    ids: Sequence[int],
    ready: Sequence[float],
    st: _Shared,
    cost: IterationCost,
    sched: SchedulerConfig,
    *,
    budget: int,
    total_blocks: int,
    prefilled: bool,
    until: float,
    swap_s_per_block: float,
    swap_blocks: int,
    clients: ClientLoop | None = None,
) -> _Outcome:
    """Continuous batching on one instance (module docstring). ``prefilled``: the requests
    arrive with their KV cache (a decode instance) and join without a prefill. ``clients``
    (a closed loop): each finish may append the next request to ``ids`` / ``ready`` (lists,
    in time order), which the loop reads as they grow."""
    inp, out, gen, first, finish = st.inp, st.out, st.gen, st.first, st.finish
    state, preempted = st.state, st.preempted
    itl_lo, itl_hi, itl_w = st.itl_lo, st.itl_hi, st.itl_w
    bs = sched.block_size
    max_seqs = sched.max_num_seqs
    chunked = sched.chunked_prefill
    watermark = int(sched.watermark * total_blocks)
    swap_mode = sched.preemption == "swap"
    table = cost.pass_s
    table_max = table.size - 1
    tok_s, seq_s = cost.token_s, cost.sequence_s
    kv_s, att_s = cost.kv_s_per_token, cost.attention_s_per_unit
    ctx_s = kv_s + att_s  # a decode token at context c costs ctx_s * c
    decode_base = [
        float(table[min(n, table_max)]) + (tok_s + seq_s) * n for n in range(max_seqs + 1)
    ]
    iteration_s = cost.iteration_s
    passes_of = cost.passes

    res = _Outcome()
    m = len(ids)
    nxt = 0
    t = 0.0
    G = 0  # decode steps so far: a running sequence holds base + G tokens
    waiting: deque[int] = deque()
    swapped: deque[int] = deque()
    fresh: set[int] = set(ids) if prefilled else set()  # KV present, no prefill needed
    base: dict[int, int] = {}
    fin_step: dict[int, int] = {}
    fin_heap: list[tuple[int, int]] = []
    victims: list[int] = []  # max-heap of running ids (latest arrival first) as -id
    partial: dict[int, int] = {}  # chunked prefill: tokens of the prompt done so far
    partial_order: deque[int] = deque()
    hist = [0] * bs
    n = 0
    S = 0  # sum of base over running
    used = 0
    swap_used = 0
    stall = 0.0
    stalled = 0
    preempt_time: dict[int, float] = {}
    block_cap = total_blocks
    hold = False  # after a preemption the next iteration decodes (no thrashing re-prefill)

    def length_of(r: int) -> int:
        # tokens a (re)prefill computes: prompt + generated tokens so far
        return inp[r] + gen[r]

    def prefill_done(r: int, stored: int, now: float, at: int) -> None:
        """The prefill of ``r`` (``stored`` tokens) ended at ``now``: its next token is out;
        it finishes or joins the decodes from step ``at``."""
        nonlocal used, m
        res.tokens += 1
        g = gen[r] + 1
        gen[r] = g
        if first[r] != first[r]:
            first[r] = now
        elif r in preempt_time:  # a recomputed sequence: its gap since preemption
            gap = now - preempt_time.pop(r)
            itl_lo.append(gap)
            itl_hi.append(gap)
            itl_w.append(1.0)
        if g >= out[r]:
            finish[r] = now
            state[r] = _DONE
            used -= -(-stored // bs)
            if clients is not None:
                clients.finished(now, 1)
                m = len(ids)
        else:
            join(r, stored, at)

    def join(r: int, stored: int, at: int) -> None:
        """Sequence ``r``, holding ``stored`` tokens, decodes from step ``at`` on."""
        nonlocal n, S
        b = stored - at
        base[r] = b
        fs = at + out[r] - gen[r]
        fin_step[r] = fs
        heapq.heappush(fin_heap, (fs, r))
        heapq.heappush(victims, -r)
        state[r] = _RUN
        hist[b % bs] += 1
        S += b
        n += 1

    progress = (-1, -1)
    stuck = 0
    while True:
        # every pass emits a token, admits an arrival or ends; a scheduler that loops without
        # either is a bug, said rather than hung on
        mark = (res.tokens, nxt)
        stuck = stuck + 1 if mark == progress else 0
        progress = mark
        if stuck > _STUCK_PASSES:
            raise RuntimeError(
                f"LLM serving simulation made no progress in {_STUCK_PASSES:,} scheduler passes "
                f"(running {n}, waiting {len(waiting)}, swapped {len(swapped)}, "
                f"prefilling {len(partial)}, KV blocks {used}/{block_cap})"
            )
        while nxt < m and ready[nxt] <= t:
            waiting.append(ids[nxt])
            nxt += 1
        if len(waiting) > res.max_waiting:
            res.max_waiting = len(waiting)
        if t >= until:
            break
        if n == 0 and not waiting and not swapped and not partial:
            if nxt >= m:
                break
            t = ready[nxt]
            continue
        held = hold and n > 0  # a preemption just happened: decode once before re-admitting
        hold = False
        # -- swap in (before any new prompt)
        if swapped and not held:
            while swapped and n < max_seqs:
                r = swapped[0]
                stored = inp[r] + gen[r] - 1
                need = -(-stored // bs)
                # back in only with room for its next token too (a new block when the stored
                # tokens fill theirs): else it is swapped out again before a step -- a livelock
                # when prompts half-prefilled hold the rest of the cache
                if block_cap - used - need - (stored % bs == 0) < watermark:
                    break
                swapped.popleft()
                used += need
                swap_used -= need
                dt = need * swap_s_per_block
                t += dt
                res.busy_s += dt
                join(r, stored, G)
                gap = t - preempt_time.pop(r, t)
                itl_lo.append(gap)
                itl_hi.append(gap)
                itl_w.append(1.0)
        # -- admissions
        if held:
            prefill_work = False
        elif chunked:
            prefill_work = bool(partial) or bool(waiting)
        else:
            prefill_work = bool(waiting) and not swapped
        if prefill_work and not chunked:
            batch: list[int] = []
            tokens = 0
            att = 0.0
            longest = 0
            while waiting:
                r = waiting[0]
                if n + len(batch) >= max_seqs:
                    break
                if r in fresh:
                    need = -(-inp[r] // bs)
                    if block_cap - used - need < watermark:
                        break
                    waiting.popleft()
                    fresh.discard(r)
                    used += need
                    join(r, inp[r], G)
                    continue
                L = length_of(r)
                if tokens + L > budget:
                    break
                need = -(-L // bs)
                if block_cap - used - need < watermark:
                    break
                waiting.popleft()
                used += need
                batch.append(r)
                tokens += L
                att += 0.5 * L * L
                if longest < L:
                    longest = L
            if used > res.peak_blocks:
                res.peak_blocks = used
            if batch:
                dt = iteration_s(tokens, len(batch), tokens, att, passes_of(longest))
                t += dt
                res.busy_s += dt
                res.iterations += 1
                if n:
                    stall += dt
                    stalled = n
                for r in batch:
                    prefill_done(r, inp[r] + gen[r], t, G)
                continue
        if chunked and prefill_work:
            # one mixed iteration: every decode, then prompt chunks in the leftover budget
            while waiting and waiting[0] in fresh and n + len(partial_order) < max_seqs:
                r = waiting[0]
                need = -(-inp[r] // bs)
                if block_cap - used - need < watermark:
                    break
                waiting.popleft()
                fresh.discard(r)
                used += need
                join(r, inp[r], G)
            end = (-G) % bs
            need_dec = _window(hist, end, 1, bs) if n else 0
            if need_dec > block_cap - used:
                n, S, used, swap_used, t = _preempt(
                    need_dec, bs, hist, end, block_cap, n, S, used, swap_used, swap_mode,
                    swap_blocks, swap_s_per_block, t, G, victims, state, base, inp, out, gen,
                    fin_step, waiting, swapped, preempted, preempt_time, res,
                )  # fmt: skip
                hold = True
                continue
            room = budget - n
            chunks: list[tuple[int, int, int]] = []  # (id, done before, tokens now)
            for r in partial_order:
                if room <= 0:
                    break
                L = length_of(r)
                done = partial[r]
                take = min(L - done, room)
                extra = -(-(done + take) // bs) - (-(-done // bs))
                if block_cap - used - need_dec - extra < 0:
                    break
                used += extra
                chunks.append((r, done, take))
                room -= take
            while waiting and room > 0 and n + len(partial_order) < max_seqs:
                r = waiting[0]
                if r in fresh:
                    break  # joins at the start of a later iteration
                L = length_of(r)
                take = min(L, room)
                need = -(-take // bs)
                if block_cap - used - need_dec - need < watermark:
                    break
                waiting.popleft()
                used += need
                partial[r] = 0
                partial_order.append(r)
                chunks.append((r, 0, take))
                room -= take
            if not chunks and n == 0:
                if partial_order:
                    # prompts half-prefilled hold the cache: recompute the latest later
                    r = partial_order.pop()
                    used -= -(-partial.pop(r) // bs)
                    waiting.appendleft(r)
                    preempted[r] += 1
                    res.preemptions += 1
                    continue
                if nxt >= m:  # pragma: no cover - guarded by the up-front checks
                    break
                t = max(t, ready[nxt])
                continue
            if chunks:
                ctx_dec = S + n * (G + 1)
                tokens = n
                kv_tok = float(ctx_dec)
                att = float(ctx_dec)
                for _r, done, take in chunks:
                    tokens += take
                    kv_tok += done + take
                    att += take * done + 0.5 * take * take
                dt = iteration_s(tokens, n + len(chunks), kv_tok, att)
                if n:
                    itl_lo.append(dt)
                    itl_hi.append(dt)
                    itl_w.append(float(n))
                    res.decode_seq_steps += n
                    res.tokens += n
                    res.decode_steps += 1
                t += dt
                res.busy_s += dt
                res.iterations += 1
                if n:
                    used += need_dec
                    G += 1
                if used > res.peak_blocks:
                    res.peak_blocks = used
                for r, done, take in chunks:
                    L = length_of(r)
                    if done + take < L:
                        partial[r] = done + take
                        continue
                    del partial[r]
                    partial_order.remove(r)
                    prefill_done(r, L, t, G)
                before = n
                n, S, used = _finish_due(
                    G, t, fin_heap, fin_step, base, state, finish, inp, out, gen, hist, bs, n,
                    S, used,
                )  # fmt: skip
                if clients is not None and n < before:
                    clients.finished(t, before - n)
                    m = len(ids)
                continue
        if n == 0:
            if nxt >= m:
                break
            t = max(t, ready[nxt])
            continue
        # -- a stretch of decode steps
        while fin_heap:
            fs, r = fin_heap[0]
            if state[r] == _RUN and fin_step[r] == fs:
                break
            heapq.heappop(fin_heap)
        k = fin_heap[0][0] - G
        step0 = decode_base[n] + ctx_s * (S + n * (G + 1))
        d_step = ctx_s * n
        if waiting or swapped:
            if held:
                k = 1
        elif not partial and nxt < m:
            k = min(k, _steps_until(ready[nxt] - t, step0, d_step))
        # a horizon past these k steps cannot shorten them (and 1e100 s would spin the search)
        if until < math.inf and until - t <= k * step0 + d_step * (k * (k - 1) / 2.0):
            k = min(k, _steps_until(until - t, step0, d_step))
        free = block_cap - used
        end = (-G) % bs
        if n * (k // bs + 1) > free:
            per_round = free // n
            left = free - n * per_round
            r_max = 0
            acc = 0
            while r_max < bs - 1:
                acc += hist[(end - r_max) % bs]
                if acc > left:
                    break
                r_max += 1
            k2 = per_round * bs + r_max
            if k2 == 0:
                n, S, used, swap_used, t = _preempt(
                    _window(hist, end, 1, bs), bs, hist, end, block_cap, n, S, used,
                    swap_used, swap_mode, swap_blocks, swap_s_per_block, t, G, victims, state,
                    base, inp, out, gen, fin_step, waiting, swapped, preempted, preempt_time,
                    res,
                )  # fmt: skip
                stall = 0.0
                stalled = 0
                hold = True
                continue
            if k2 < k:
                k = k2
        need = n * (k // bs) + _window(hist, end, k % bs, bs)
        dt = k * step0 + d_step * (k * (k - 1) / 2.0)
        if stalled:
            w = float(min(stalled, n))
            itl_lo.append(step0 + stall)
            itl_hi.append(step0 + stall)
            itl_w.append(w)
            itl_lo.append(step0)
            itl_hi.append(step0 + d_step * (k - 1))
            itl_w.append(n * k - w)
            stall = 0.0
            stalled = 0
        else:
            itl_lo.append(step0)
            itl_hi.append(step0 + d_step * (k - 1))
            itl_w.append(float(n * k))
        res.decode_seq_steps += n * k
        res.tokens += n * k
        res.decode_steps += k
        res.iterations += k
        t += dt
        res.busy_s += dt
        G += k
        used += need
        if used > res.peak_blocks:
            res.peak_blocks = used
        before = n
        n, S, used = _finish_due(
            G, t, fin_heap, fin_step, base, state, finish, inp, out, gen, hist, bs, n, S, used
        )
        if clients is not None and n < before:
            clients.finished(t, before - n)
            m = len(ids)
    # every block handed out comes back: what is left is held by the sequences still in
    assert used >= 0 and (used > 0) == (n > 0 or bool(partial)), (used, n, len(partial))
    return res


#: Scheduler passes without a token or an arrival before :func:`_run_instance` gives up
_STUCK_PASSES = 100_000


def _steps_until(delta_s: float, step0: float, d_step: float) -> int:
    """Fewest decode steps whose cumulative time (``step0``, ``step0 + d_step``, ...) reaches
    ``delta_s`` (at least one)."""
    if delta_s <= step0:
        return 1
    if d_step > 0:
        b = step0 - d_step / 2.0
        k = math.ceil((-b + math.sqrt(b * b + 2.0 * d_step * delta_s)) / d_step)
    else:
        k = math.ceil(delta_s / step0)
    k = max(k, 1)
    while k > 1 and (k - 1) * step0 + d_step * ((k - 1) * (k - 2) / 2.0) >= delta_s:
        k -= 1
    while k * step0 + d_step * (k * (k - 1) / 2.0) < delta_s:
        k += 1
    return k


def _finish_due(
    G: int,
    t: float,
    fin_heap: list[tuple[int, int]],
    fin_step: dict[int, int],
    base: dict[int, int],
    state: list[int],
    finish: list[float],
    inp: list[int],
    out: list[int],
    gen: list[int],
    hist: list[int],
    bs: int,
    n: int,
    S: int,
    used: int,
) -> tuple[int, int, int]:
    """Retire the running sequences whose last token came at step ``G`` (time ``t``)."""
    while fin_heap and fin_heap[0][0] <= G:
        fs, r = heapq.heappop(fin_heap)
        if state[r] != _RUN or fin_step[r] != fs:
            continue
        b = base[r]
        finish[r] = t
        gen[r] = out[r]
        state[r] = _DONE
        used -= -(-(b + G) // bs)
        hist[b % bs] -= 1
        S -= b
        n -= 1
    return n, S, used


def _preempt(
    need: int,
    bs: int,
    hist: list[int],
    end: int,
    block_cap: int,
    n: int,
    S: int,
    used: int,
    swap_used: int,
    swap_mode: bool,
    swap_blocks: int,
    swap_s_per_block: float,
    t: float,
    G: int,
    victims: list[int],
    state: list[int],
    base: dict[int, int],
    inp: list[int],
    out: list[int],
    gen: list[int],
    fin_step: dict[int, int],
    waiting: deque[int],
    swapped: deque[int],
    preempted: list[int],
    preempt_time: dict[int, float],
    res: _Outcome,
) -> tuple[int, int, int, int, float]:
    """Preempt the latest-arrived running sequences until the next decode step fits."""
    while n and need > block_cap - used:
        r = -heapq.heappop(victims)
        if state[r] != _RUN:
            continue
        b = base[r]
        stored = b + G
        blocks = -(-stored // bs)
        gen[r] = out[r] - (fin_step[r] - G)
        used -= blocks
        hist[b % bs] -= 1
        S -= b
        n -= 1
        if stored % bs == 0:
            need -= 1  # it no longer needs its next block
        preempted[r] += 1
        res.preemptions += 1
        preempt_time[r] = t
        if swap_mode and swap_used + blocks <= swap_blocks:
            state[r] = _SWAPPED
            swapped.append(r)
            swap_used += blocks
            dt = blocks * swap_s_per_block
            t += dt
            res.busy_s += dt
        else:
            state[r] = _WAITING
            waiting.appendleft(r)
    return n, S, used, swap_used, t


def _run_prefill_pool(
    ids: Sequence[int],
    ready: Sequence[float],
    st: _Shared,
    cost: IterationCost,
    sched: SchedulerConfig,
    *,
    budget: int,
    total_blocks: int,
    until: float,
    transfer: Disaggregation,
) -> _Outcome:
    """A prefill-only instance: FCFS batches of prompts within the token budget, sequence
    limit and KV cache; each request is ready on a decode instance after its KV transfer.
    A prompt beyond the budget (chunked prefill) runs alone in budget-sized chunks."""
    inp, out, gen, first, finish, state = st.inp, st.out, st.gen, st.first, st.finish, st.state
    bs = sched.block_size
    res = _Outcome()
    res.ready_out = [math.nan] * len(ids)
    t = 0.0
    i = 0
    m = len(ids)
    kv_token = cost.kv_bytes_per_token
    link_free = 0.0  # when the link has sent every transfer queued so far
    while i < m and t < until:
        if ready[i] > t:
            t = ready[i]
        batch: list[int] = []
        tokens = 0
        att = 0.0
        longest = 0
        blocks = 0
        while i + len(batch) < m and ready[i + len(batch)] <= t:
            r = ids[i + len(batch)]
            L = inp[r]
            need = -(-L // bs)
            if batch and (
                tokens + L > budget
                or len(batch) >= sched.max_num_seqs
                or blocks + need > total_blocks
            ):
                break
            batch.append(r)
            tokens += L
            att += 0.5 * L * L
            blocks += need
            longest = max(longest, L)
            if tokens >= budget:
                break
        if tokens > budget:  # one long prompt, chunked
            done = 0
            dt = 0.0
            while done < tokens:
                take = min(budget, tokens - done)
                dt += cost.iteration_s(take, 1, done + take, take * done + 0.5 * take * take)
                res.iterations += 1
                done += take
        else:
            dt = cost.iteration_s(tokens, len(batch), tokens, att, cost.passes(longest))
            res.iterations += 1
        t += dt
        res.busy_s += dt
        res.peak_blocks = max(res.peak_blocks, blocks)
        res.tokens += len(batch)
        for j, r in enumerate(batch):
            gen[r] = 1
            first[r] = t
            if out[r] <= 1:
                finish[r] = t
                state[r] = _DONE
            else:  # FIFO behind the transfers before it, then its bytes at the link's rate
                size = inp[r] * kv_token
                start = max(t, link_free)
                link_free = start + transfer.serialise_s(size)
                res.ready_out[i + j] = link_free + transfer.transfer_latency_s
                res.link_transfers += 1
                res.link_bytes += size
                res.link_busy_s += max(min(link_free, until) - min(start, until), 0.0)
        i += len(batch)
    return res


# -- the whole deployment --------------------------------------------------------------------
def _drops(
    requests: LlmRequests,
    cost: IterationCost,
    sched: SchedulerConfig,
    *,
    max_context: int,
    budget: int,
    total_blocks: int,
) -> tuple[npt.NDArray[np.bool_], dict[str, int]]:
    inp, out = requests.input_tokens, requests.output_tokens
    bs = sched.block_size
    watermark = int(sched.watermark * total_blocks)
    full = inp + out - 1  # tokens a sequence holds at its last step
    too_long = inp + out > max_context
    no_room = ((full + bs - 1) // bs) > total_blocks - watermark
    over_budget = (
        np.zeros(inp.size, dtype=bool) if sched.chunked_prefill else (full > budget) & ~too_long
    )
    reasons = {
        "beyond the context window": int(too_long.sum()),
        "larger than the KV cache of one instance": int((no_room & ~too_long).sum()),
        "prompt beyond the token budget (enable chunked prefill)": int(
            (over_budget & ~no_room).sum()
        ),
    }
    return too_long | no_room | over_budget, {k: v for k, v in reasons.items() if v}


def replica_share(
    requests: LlmRequests,
    cost: IterationCost,
    scheduler: SchedulerConfig,
    *,
    max_context: int,
    replicas: int,
    simulated: int,
) -> LlmRequests:
    """The requests the first ``simulated`` of ``replicas`` colocated instances serve, exactly
    as :func:`simulate_llm_serving` deals them (round robin in arrival order over the requests
    it does not drop), with the dropped requests at the same share: served on ``simulated``
    replicas they give those replicas' run as they ran in the whole deployment. Round robin
    makes the replicas alike, so a planner prices a large deployment from a share of it."""
    if not 1 <= simulated <= replicas:
        raise InvalidSpecError("simulated", f"must be 1..{replicas} replicas", got=simulated)
    dropped, _ = _drops(
        requests, cost, scheduler, max_context=max_context,
        budget=scheduler.budget(max_context),
        total_blocks=cost.kv_capacity_tokens // scheduler.block_size,
    )  # fmt: skip
    rank = np.cumsum(~dropped) - 1  # the order simulate_llm_serving deals them in
    index = np.arange(requests.count)
    keep = np.where(dropped, index % replicas < simulated, rank % replicas < simulated)
    return requests.take(np.flatnonzero(keep))


def simulate_llm_serving(
    requests: LlmRequests,
    cost: IterationCost,
    scheduler: SchedulerConfig,
    *,
    max_context: int,
    replicas: int = 1,
    disaggregation: Disaggregation | None = None,
    price_usd_per_hour: float = 0.0,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    until_s: float | None = None,
    swap_gbps: float = DEFAULT_SWAP_GBPS,
    sources: Mapping[str, str] | None = None,
) -> LlmServingResult:
    """Serve ``requests`` on ``replicas`` instances (or the pools of ``disaggregation``) of
    ``cost.gpus`` GPUs each (module docstring). ``price_usd_per_hour`` is the whole
    deployment's; ``until_s`` stops the run (default: every request finishes)."""
    run = RunSetup.of(
        requests, cost, scheduler, max_context=max_context, replicas=replicas,
        price_usd_per_hour=price_usd_per_hour, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
        until_s=until_s, swap_gbps=swap_gbps,
    )  # fmt: skip
    arrival = requests.arrival_s
    live = np.flatnonzero(~run.dropped)
    stats: list[InstanceStats] = []
    until = run.until

    def run_pool(
        role: str, count: int, order: IntArray, ready: FloatArray, prefilled: bool
    ) -> None:
        for k in range(count):
            mine = order[k::count]
            o = run.instance(mine.tolist(), ready[k::count].tolist(), prefilled=prefilled)
            # the requests that arrived by the horizon (those after it never reached it)
            arrived = int(np.count_nonzero(arrival[mine] <= until))
            stats.append(run.stats(role, k, arrived, o))

    ready_all: FloatArray | None = None
    if disaggregation is None:
        run_pool("colocated", replicas, live, arrival[live], False)
        instances = replicas
    else:
        p, d = disaggregation.prefill_instances, disaggregation.decode_instances
        ready_all = np.full(requests.count, np.inf)
        for k in range(p):
            mine = live[k::p]
            o = _run_prefill_pool(
                mine.tolist(), arrival[mine].tolist(), run.st, cost, scheduler,
                budget=run.budget, total_blocks=run.total_blocks, until=until,
                transfer=disaggregation,
            )  # fmt: skip
            ready_all[mine] = np.asarray(o.ready_out, dtype=np.float64)
            arrived = int(np.count_nonzero(arrival[mine] <= until))
            stats.append(run.stats("prefill", k, arrived, o))
        going = np.flatnonzero(np.isfinite(ready_all))
        going = going[np.argsort(ready_all[going], kind="stable")]
        run_pool("decode", d, going, ready_all[going], True)
        instances = p + d
    return run.result(
        requests, np.arange(requests.count), stats, instances=instances,
        price_usd_per_hour=price_usd_per_hour, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
        until_s=until_s, disaggregation=disaggregation, decode_ready_s=ready_all,
        sources=sources,
    )  # fmt: skip


@dataclass(slots=True)
class RunSetup:
    """What one run of :func:`simulate_llm_serving` (or of a closed loop,
    :mod:`gpucast.simulate.llm_closed_loop`) sets up before its instances run: the checked
    limits, the requests that cannot fit, the shared per-request state."""

    cost: IterationCost
    scheduler: SchedulerConfig
    budget: int
    total_blocks: int
    until: float
    swap_s_per_block: float
    swap_blocks: int
    dropped: npt.NDArray[np.bool_]
    reasons: dict[str, int]
    st: _Shared

    @classmethod
    def of(
        cls,
        requests: LlmRequests,
        cost: IterationCost,
        scheduler: SchedulerConfig,
        *,
        max_context: int,
        replicas: int,
        price_usd_per_hour: float,
        slo_ttft_s: float | None,
        slo_tpot_s: float | None,
        until_s: float | None,
        swap_gbps: float,
    ) -> RunSetup:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise InvalidSpecError("replicas", "must be an integer >= 1", got=replicas)
        for name, value in (("slo-ttft", slo_ttft_s), ("slo-tpot", slo_tpot_s), ("until", until_s)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be > 0 seconds", got=value)
        if not (math.isfinite(price_usd_per_hour) and price_usd_per_hour >= 0):
            raise InvalidSpecError("price", "must be >= 0 US$/h", got=price_usd_per_hour)
        if not (math.isfinite(swap_gbps) and swap_gbps > 0):
            raise InvalidSpecError("swap-gbps", "must be > 0", got=swap_gbps)
        bs = scheduler.block_size
        total_blocks = cost.kv_capacity_tokens // bs
        budget = scheduler.budget(max_context)
        if budget > cost.max_tokens:
            raise InvalidSpecError(
                "max-batched-tokens",
                f"exceeds the iteration cost table ({cost.max_tokens} tokens)",
                got=budget,
                fix="build the iteration cost with max_tokens >= the token budget",
            )
        n_req = requests.count
        dropped, reasons = _drops(
            requests, cost, scheduler, max_context=max_context, budget=budget,
            total_blocks=total_blocks,
        )  # fmt: skip
        nan = math.nan
        st = _Shared(
            inp=requests.input_tokens.tolist(),
            out=requests.output_tokens.tolist(),
            gen=[0] * n_req,
            first=[nan] * n_req,
            finish=[nan] * n_req,
            state=[_DROP if d else _WAITING for d in dropped.tolist()],
            preempted=[0] * n_req,
            itl_lo=[],
            itl_hi=[],
            itl_w=[],
        )
        block_bytes = bs * cost.kv_bytes_per_token
        return cls(
            cost=cost,
            scheduler=scheduler,
            budget=budget,
            total_blocks=total_blocks,
            until=math.inf if until_s is None else float(until_s),
            swap_s_per_block=block_bytes * 8.0 / (swap_gbps * 1e9),
            swap_blocks=(
                int(scheduler.swap_space_gib * GIB // block_bytes) if block_bytes > 0 else 0
            ),
            dropped=dropped,
            reasons=reasons,
            st=st,
        )

    def instance(
        self,
        ids: list[int],
        ready: list[float],
        *,
        prefilled: bool = False,
        clients: ClientLoop | None = None,
    ) -> _Outcome:
        """One instance serving ``ids`` arriving at ``ready`` (:func:`_run_instance`)."""
        return _run_instance(
            ids, ready, self.st, self.cost, self.scheduler, budget=self.budget,
            total_blocks=self.total_blocks, prefilled=prefilled, until=self.until,
            swap_s_per_block=self.swap_s_per_block, swap_blocks=self.swap_blocks,
            clients=clients,
        )  # fmt: skip

    def stats(self, role: str, replica: int, requests: int, o: _Outcome) -> InstanceStats:
        return _stats(role, replica, requests, o, self.cost.gpus, self.total_blocks)

    def result(
        self,
        requests: LlmRequests,
        index: IntArray,
        stats: list[InstanceStats],
        *,
        instances: int,
        price_usd_per_hour: float,
        slo_ttft_s: float | None,
        slo_tpot_s: float | None,
        until_s: float | None,
        disaggregation: Disaggregation | None = None,
        decode_ready_s: FloatArray | None = None,
        sources: Mapping[str, str] | None = None,
        drop_reasons: Mapping[str, int] | None = None,
    ) -> LlmServingResult:
        """The run as a result: ``requests`` (sorted by arrival) are the setup's at ``index``
        (all of them in an open loop; those a closed loop sent, in arrival order, with the
        ``drop_reasons`` of those)."""
        st = self.st
        arrival = requests.arrival_s
        first = np.asarray(st.first, dtype=np.float64)[index]
        finish = np.asarray(st.finish, dtype=np.float64)[index]
        dropped = self.dropped[index]
        status = np.where(dropped, DROPPED, np.where(np.isfinite(finish), FINISHED, RUNNING))
        if until_s is not None:  # arriving after the horizon: never queued, so never running
            status = np.where((status == RUNNING) & (arrival > self.until), UNARRIVED, status)
        end = run_end_s(arrival, finish, bool(np.any(status == RUNNING)), until_s)
        start = float(arrival[0]) if arrival.size else 0.0
        span = max(end - start, 0.0)
        ordered = sorted(stats, key=lambda s: (s.role, s.replica))
        return LlmServingResult(
            requests=requests,
            first_token_s=first,
            finish_s=finish,
            status=status.astype(np.int64),
            preemptions=np.asarray(st.preempted, dtype=np.int64)[index],
            instances=tuple(_with_busy_fraction(s, span) for s in ordered),
            price_usd_per_hour=price_usd_per_hour,
            gpus=instances * self.cost.gpus,
            itl_lo_s=np.asarray(st.itl_lo, dtype=np.float64),
            itl_hi_s=np.asarray(st.itl_hi, dtype=np.float64),
            itl_weight=np.asarray(st.itl_w, dtype=np.float64),
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            until_s=until_s,
            kv_link_gbps=None if disaggregation is None else disaggregation.kv_link_gbps,
            decode_ready_s=decode_ready_s,
            drop_reasons=self.reasons if drop_reasons is None else drop_reasons,
            sources=sources or {},
        )


def _stats(
    role: str, replica: int, requests: int, o: _Outcome, gpus: int, total_blocks: int
) -> InstanceStats:
    return InstanceStats(
        role=role,
        replica=replica,
        gpus=gpus,
        requests=requests,
        iterations=o.iterations,
        busy_s=o.busy_s,
        busy_fraction=0.0,
        preemptions=o.preemptions,
        peak_kv_utilisation=o.peak_blocks / total_blocks if total_blocks else 0.0,
        mean_running=o.decode_seq_steps / o.decode_steps if o.decode_steps else 0.0,
        max_waiting=o.max_waiting,
        tokens=o.tokens,
        decode_steps=o.decode_steps,
        link_transfers=o.link_transfers,
        link_bytes=o.link_bytes,
        link_busy_s=o.link_busy_s,
    )


def _with_busy_fraction(s: InstanceStats, span_s: float) -> InstanceStats:
    def share(busy: float) -> float:
        return min(1.0, busy / span_s) if span_s > 0 else 0.0

    return dataclasses.replace(
        s, busy_fraction=share(s.busy_s), link_busy_fraction=share(s.link_busy_s)
    )
