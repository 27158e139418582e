"""Request arrival times as sorted float64 arrays of seconds from 0, vectorised.

Pure: the RNG is passed in. Every generator returns arrivals in ``[0, duration_s)``.

* :func:`poisson` — exponential gaps at ``rate_rps``;
* :func:`constant` — one request every ``1 / rate_rps`` (the PERSEUS load generator),
  optionally each delayed by a uniform random jitter (a client that paces with ``sleep``);
* :func:`bursty` — a Markov-modulated Poisson process: exponential sojourns alternate
  between states with their own rates (two states: calm and burst);
* :func:`from_timestamps` — replay of a trace's arrival times (e.g. the Azure LLM trace),
  optionally sped up to a target mean rate;
* :func:`from_counts` — per-interval counts (the Azure Functions per-minute format) spread
  uniformly at random inside each interval;
* :func:`busiest_window` — the stretch of a trace holding the most arrivals (what a
  capacity plan sizes for).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError

FloatArray = npt.NDArray[np.float64]


def _rate(rate_rps: float, field: str = "rate") -> float:
    if (
        isinstance(rate_rps, bool)
        or not isinstance(rate_rps, int | float)
        or not (math.isfinite(rate_rps) and rate_rps > 0)
    ):
        raise InvalidSpecError(
            field, "must be a request rate > 0 per second", got=rate_rps, fix="e.g. --rate 150"
        )
    return float(rate_rps)


def _duration(duration_s: float) -> float:
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise InvalidSpecError(
            "duration", "must be > 0 seconds", got=duration_s, fix="e.g. --duration-s 60"
        )
    return float(duration_s)


def poisson(rate_rps: float, duration_s: float, rng: np.random.Generator) -> FloatArray:
    """Poisson arrivals at ``rate_rps`` over ``duration_s``."""
    rate, duration = _rate(rate_rps), _duration(duration_s)
    expected = rate * duration
    n = int(expected + 6.0 * math.sqrt(expected) + 16)
    times = np.cumsum(rng.exponential(1.0 / rate, size=n))
    while times[-1] < duration:  # pragma: no cover - six sigma short
        more = times[-1] + np.cumsum(rng.exponential(1.0 / rate, size=n))
        times = np.concatenate([times, more])
    return times[: np.searchsorted(times, duration, side="left")]


def _jitter(times: FloatArray, jitter_s: float, rng: np.random.Generator | None) -> FloatArray:
    """``times`` each delayed by an independent uniform draw in ``[0, jitter_s)``, sorted."""
    if (
        isinstance(jitter_s, bool)
        or not isinstance(jitter_s, int | float)
        or not (math.isfinite(jitter_s) and jitter_s >= 0)
    ):
        raise InvalidSpecError(
            "jitter_s", "must be a finite number of seconds >= 0", got=jitter_s, fix="e.g. 0.002"
        )
    if jitter_s == 0:
        return times
    if rng is None:
        raise InvalidSpecError(
            "rng", "is needed when jitter_s > 0", fix="pass rng=numpy.random.default_rng(seed)"
        )
    return np.sort(times + rng.uniform(0.0, float(jitter_s), size=times.size))


def constant(
    rate_rps: float,
    duration_s: float,
    *,
    offset_s: float = 0.0,
    jitter_s: float = 0.0,
    rng: np.random.Generator | None = None,
) -> FloatArray:
    """One request every ``1 / rate_rps`` seconds, the first at ``offset_s``.

    ``jitter_s > 0`` delays each request by an independent uniform draw in
    ``[0, jitter_s)`` from ``rng`` (a client that paces with ``sleep`` and sends from a
    thread pool is late by a variable amount); requests pushed past ``duration_s`` are
    dropped. ``jitter_s = 0`` (the default) is the exact grid and needs no ``rng``.
    """
    rate, duration = _rate(rate_rps), _duration(duration_s)
    n = math.ceil((duration - offset_s) * rate)
    times = offset_s + np.arange(max(n, 0), dtype=np.float64) / rate
    times = _jitter(times, jitter_s, rng)
    return times[times < duration]


def constant_count(
    rate_rps: float,
    count: int,
    *,
    jitter_s: float = 0.0,
    rng: np.random.Generator | None = None,
) -> FloatArray:
    """``count`` requests one every ``1 / rate_rps`` seconds (a load-generator pass);
    ``jitter_s`` and ``rng`` as in :func:`constant` (every request is kept)."""
    rate = _rate(rate_rps)
    if count < 1:
        raise InvalidSpecError("requests", "must be >= 1", got=count)
    return _jitter(np.arange(count, dtype=np.float64) / rate, jitter_s, rng)


def bursty(
    rates_rps: Sequence[float],
    mean_sojourn_s: Sequence[float],
    duration_s: float,
    rng: np.random.Generator,
) -> FloatArray:
    """Markov-modulated Poisson arrivals cycling through the states in order.

    State ``i`` lasts an exponential time of mean ``mean_sojourn_s[i]`` and emits Poisson
    arrivals at ``rates_rps[i]`` (0 allowed for an off state, but not every state may be 0).
    The first state is drawn from the stationary distribution.
    """
    duration = _duration(duration_s)
    if len(rates_rps) < 2 or len(rates_rps) != len(mean_sojourn_s):
        raise InvalidSpecError("bursty", "needs >= 2 states with one rate and sojourn each")
    rates = np.asarray(rates_rps, dtype=np.float64)
    sojourn = np.asarray(mean_sojourn_s, dtype=np.float64)
    if np.any(~np.isfinite(rates)) or np.any(rates < 0) or not np.any(rates > 0):
        raise InvalidSpecError(
            "bursty rates", "must be >= 0 with at least one > 0", got=list(rates_rps)
        )
    if np.any(~np.isfinite(sojourn)) or np.any(sojourn <= 0):
        raise InvalidSpecError("bursty sojourns", "must be > 0 s", got=list(mean_sojourn_s))
    k = len(rates)
    state = int(rng.choice(k, p=sojourn / sojourn.sum()))
    t = 0.0
    chunks: list[FloatArray] = []
    while t < duration:
        end = min(duration, t + float(rng.exponential(sojourn[state])))
        if rates[state] > 0:
            n = int(rng.poisson(rates[state] * (end - t)))
            if n:
                chunks.append(np.sort(rng.uniform(t, end, size=n)))
        t, state = end, (state + 1) % k
    return np.concatenate(chunks) if chunks else np.zeros(0)


def bursty_mean_rate(rates_rps: Sequence[float], mean_sojourn_s: Sequence[float]) -> float:
    """Long-run mean rate of :func:`bursty`."""
    r = np.asarray(rates_rps, dtype=np.float64)
    s = np.asarray(mean_sojourn_s, dtype=np.float64)
    return float((r * s).sum() / s.sum())


def from_timestamps(
    timestamps_s: npt.ArrayLike,
    *,
    duration_s: float | None = None,
    target_rate_rps: float | None = None,
) -> FloatArray:
    """A trace's arrival times shifted to start at 0 (sorted); optionally time-scaled so the
    mean rate is ``target_rate_rps``, and cut at ``duration_s``."""
    times: FloatArray = np.sort(np.asarray(timestamps_s, dtype=np.float64))  # our own copy
    if times.size == 0:
        raise InvalidSpecError("trace", "has no arrivals", fix="check the trace file")
    if not np.all(np.isfinite(times)):
        raise InvalidSpecError("trace", "has non-finite timestamps")
    times -= times[0]  # in place from here: a 10 M-request trace is held once
    if target_rate_rps is not None:
        rate = _rate(target_rate_rps)
        span = times[-1]
        if times.size < 2 or span <= 0:
            raise InvalidSpecError("trace", "needs two distinct timestamps to rescale")
        times *= (times.size - 1) / span / rate
    if duration_s is not None:
        end = int(np.searchsorted(times, _duration(duration_s), side="left"))
        if end < times.size:
            times = times[:end].copy()
    times.setflags(write=False)  # owned and read-only: a result keeps it without a copy
    return times


def rescaled(times_s: npt.ArrayLike, rate_rps: float, duration_s: float) -> FloatArray:
    """Sorted arrival times time-scaled to a mean of ``rate_rps`` and repeated end to end
    (one mean gap apart) until they cover ``duration_s``: the same process at another rate,
    e.g. a trace offered faster in a saturation search."""
    rate, duration = _rate(rate_rps), _duration(duration_s)
    t = np.asarray(times_s, dtype=np.float64)
    if t.size == 0:
        raise InvalidSpecError("arrivals", "are empty", fix="give at least one request")
    base = from_timestamps(t, target_rate_rps=rate) if t.size > 1 and t[-1] > t[0] else t - t[0]
    period = float(base[-1]) + 1.0 / rate
    reps = int(duration // period) + 1
    tiled = (base[None, :] + period * np.arange(reps)[:, None]).ravel()
    return tiled[tiled < duration]


def busiest_window(times_s: npt.ArrayLike, window_s: float) -> tuple[int, int]:
    """``(lo, hi)``: the arrivals ``times_s[lo:hi]`` of sorted times that fall in the
    ``window_s``-second window ``[times_s[lo], times_s[lo] + window_s)`` holding the most of
    them (the earliest such window). A busiest window can always start at an arrival: one
    starting elsewhere slides right to its first arrival and loses none."""
    window = _duration(window_s)
    t = np.asarray(times_s, dtype=np.float64)
    if t.size == 0:
        raise InvalidSpecError("arrivals", "are empty", fix="give at least one request")
    ends = np.searchsorted(t, t + window, side="left")
    lo = int(np.argmax(ends - np.arange(t.size)))
    return lo, int(ends[lo])


def from_counts(
    counts: npt.ArrayLike,
    interval_s: float,
    rng: np.random.Generator,
    *,
    scale: float = 1.0,
) -> FloatArray:
    """Arrivals from per-interval counts (e.g. invocations per minute), uniform inside each
    interval; ``scale`` multiplies the counts (rounded stochastically)."""
    c = np.asarray(counts, dtype=np.float64) * scale
    if c.ndim != 1 or np.any(~np.isfinite(c)) or np.any(c < 0):
        raise InvalidSpecError("counts", "must be a 1-D array of counts >= 0")
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise InvalidSpecError("interval_s", "must be > 0", got=interval_s)
    whole = np.floor(c)
    n = (whole + (rng.random(c.size) < (c - whole))).astype(np.int64)
    starts = np.repeat(np.arange(c.size, dtype=np.float64) * interval_s, n)
    return np.sort(starts + rng.uniform(0.0, interval_s, size=starts.size))
