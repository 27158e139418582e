"""The statuses a request of :mod:`gpucast.simulate.llm_serving` ends a run in and the
statistics of per-request times: the percentiles every summary reports and how they are
taken (:func:`tail_percentiles`, :data:`PERCENTILE_RULE`), the offered load, the run's end
and quantiles of a mixture of runs (:func:`mixture_quantiles`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


IntArray = npt.NDArray[np.int64]


#: Status of a request at the end of a run.
FINISHED, DROPPED, RUNNING, UNARRIVED = 0, 1, 2, 3


#: Percentiles every summary reports.
PERCENTILES = (50.0, 90.0, 95.0, 99.0)


#: How a TTFT / TPOT / latency percentile is taken (:func:`tail_percentiles`), in words.
PERCENTILE_RULE = (
    "nearest rank over the requests that arrived (TPOT: those of at least 2 output tokens), "
    "a request that never reached the figure counting as infinitely late: pNN <= an SLO "
    "exactly when NN% of the requests meet it"
)


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
