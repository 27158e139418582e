"""What :func:`gpucast.simulate.llm_serving.simulate_llm_serving` returns: each instance's
load and KV cache (:class:`InstanceStats`), a disaggregated deployment's KV link
(:class:`KvLinkLoad`) and the run (:class:`LlmServingResult`: per-request times, summaries,
SLO attainment, costs and rates over time).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.llm_serving import LlmRequests
from gpucast.domain.units import count_of, usd_per_million
from gpucast.simulate._llm_serving_stats import (
    DROPPED,
    FINISHED,
    PERCENTILE_RULE,
    PERCENTILES,
    RUNNING,
    UNARRIVED,
    FloatArray,
    IntArray,
    mixture_quantiles,
    offered_rps,
    run_end_s,
    summary,
)

#: A KV link busy this share of the time simulated bounds the run (transfers queue).
LINK_BOUND_UTILISATION = 0.9


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
            # none decoded (a prefill instance, one-token outputs): None, JSON null, as the
            # CLI's --json writes it (a NaN read null there and NaN from to_dict())
            "mean_running": self.mean_running if self.decode_steps else None,
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
        served (each finished request counts the share of its first-token-to-finish time
        inside the window: the requests finishing per second, also under overload, where a
        request's wait in the queue is not service), those within the SLOs, output tokens
        (the first at its TTFT, the others spread evenly to the finish) and prompt tokens (at
        the first token). Disaggregated, a request's stretch and its
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
            decoding = first
            if self.decode_ready_s is not None:
                ready = self.decode_ready_s
                decoding = np.where(np.isfinite(ready), ready, first)
            # a request counts over its decode, not from its arrival: under overload the
            # queue's waiting requests were counted as served (QA 40 I #1: 28.7 req/s served
            # beside 3,555 output tokens/s of 256-token requests, 13.9 req/s)
            decode_share = _share_inside(decoding, finish, fin, lo, hi)
            served = decode_share
            decode = (self.requests.output_tokens - 1) * decode_share
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
            "mean_batch_size": float(np.mean(runs)) if runs else None,  # no decode step ran
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
