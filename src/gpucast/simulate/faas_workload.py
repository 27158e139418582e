"""Synthetic Azure-Functions-like workloads: per-minute invocation counts with the published
characteristics (Shahrad et al., "Serverless in the Wild", USENIX ATC'20), vectorised.

What is drawn comes in as a :class:`~gpucast.domain.serverless.FaasMix` (the rows of
``catalog/data/faas_workload.csv``, each with its source):

- invocation frequency: ``share_at_most_hourly`` of functions invoked once per hour or less on
  average, ``share_at_most_per_minute`` once per minute or less, the rest up to
  ``max_per_day``; log-uniform inside each band;
- triggers in the paper's shares of functions; timers, 15.6% of functions but 2.0% of the
  invocations, are drawn more likely among rarely invoked functions (probability ``~
  rate^-alpha``, ``alpha`` solved so that their expected share of invocations is
  ``timer_invocation_share``: :func:`timer_propensity`) -- drawn independently of the rates
  they carried 14% of the invocations;
- inter-arrival regularity (the paper's Fig. 6: timers periodic, CV 0; a share of the other
  functions near-periodic, a share burstier than Poisson, CV > 1):

  * ``periodic``: every timer function (a schedule of whole minutes, started with a normal
    jitter of ``timer_jitter_s``) and ``periodic_share`` of the others (jitter
    ``periodic_jitter_cv`` x the period); arrivals are ``phase + k x period + jitter``, not a
    renewal process, so the jitter does not accumulate;
  * ``bursty``: ``bursty_share`` of the non-timer functions, gamma renewal processes with CV
    log-uniform in ``[1, bursty_cv_max]`` (shape ``1 / CV^2``);
  * ``poisson``: the rest (CV 1);
- average execution time log-normal (the paper's fit).

Functions invoked at most once a minute get individual arrivals (ragged flat arrays, binned by
``np.bincount``; renewal draws are topped up in rounds until each function's arrivals pass the
horizon); busier ones get per-minute counts: a periodic one its schedule's exact count per
minute, a Poisson one Poisson counts, a bursty one Poisson counts of a gamma intensity per
minute. Randomness comes in as a ``numpy`` Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serverless import FaasMix

MINUTES_PER_DAY = 1440
#: most functions one synthetic workload may have
MAX_FUNCTIONS = 1_000_000
#: the arrival patterns a function is drawn with
PATTERNS: tuple[str, ...] = ("periodic", "poisson", "bursty")
#: most top-up rounds of renewal draws (each round draws what the remaining horizon needs)
_MAX_ROUNDS = 64

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class FaasWorkload:
    """``counts[f, m]``: invocations of function ``f`` in minute ``m`` (int32: 4 bytes per
    function-minute); per function its trigger, arrival pattern, mean rate (per day), nominal
    inter-arrival CV and average execution time (s)."""

    counts: npt.NDArray[np.int32]
    trigger: npt.NDArray[np.str_]
    pattern: npt.NDArray[np.str_]
    rate_per_day: FloatArray
    iat_cv: FloatArray
    duration_s: FloatArray


def rate_bands(mix: FaasMix) -> tuple[tuple[float, float, float], ...]:
    """(share of functions, lowest, highest invocations per day) of each rate band."""
    return (
        (mix.share_at_most_hourly, 1.0, 24.0),
        (mix.share_at_most_per_minute - mix.share_at_most_hourly, 24.0, 1440.0),
        (1.0 - mix.share_at_most_per_minute, 1440.0, mix.max_per_day),
    )


def _group_cumsum(owner: IntArray, values: FloatArray) -> FloatArray:
    """Cumulative sums of ``values`` within runs of equal ``owner`` (sorted by owner)."""
    total = np.cumsum(values)
    first = np.ones(owner.size, dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    starts = np.flatnonzero(first)
    before = np.concatenate([[0.0], total[:-1]])[starts]
    out: FloatArray = total - np.repeat(before, np.diff(np.append(starts, owner.size)))
    return out


def _scheduled(
    period: FloatArray, jitter: FloatArray, minutes: int, rng: np.random.Generator
) -> tuple[IntArray, FloatArray]:
    """Arrival minutes ``phase + k x period + N(0, jitter)`` per function (owner, time)."""
    draws = np.ceil(minutes / period).astype(np.int64) + 2
    owner = np.repeat(np.arange(period.size), draws)
    k = np.arange(owner.size) - np.repeat(np.cumsum(draws) - draws, draws)
    phase = rng.random(period.size) * period
    t = phase[owner] + (k - 1) * period[owner] + rng.standard_normal(owner.size) * jitter[owner]
    return owner, t


def _renewal(
    mean_iat: FloatArray, cv: FloatArray, minutes: int, rng: np.random.Generator
) -> tuple[IntArray, FloatArray]:
    """Gamma renewal arrivals (mean ``mean_iat``, CV ``cv``) over ``[0, minutes)``, each
    function started at a random point of a mean residual life (owner, time)."""
    n = mean_iat.size
    shape = 1.0 / cv**2
    start = -rng.random(n) * mean_iat * (1.0 + cv**2)
    total = start.copy()
    owners: list[IntArray] = []
    gaps: list[FloatArray] = []
    active = np.arange(n)
    for _ in range(_MAX_ROUNDS):
        if active.size == 0:
            break
        left = (minutes - total[active]) / mean_iat[active]
        draws = np.ceil(1.2 * left + 3.0 * cv[active] * np.sqrt(np.maximum(left, 1.0)) + 4)
        owner = np.repeat(active, draws.astype(np.int64))
        gap = rng.gamma(shape[owner]) / shape[owner] * mean_iat[owner]
        owners.append(owner)
        gaps.append(gap)
        total += np.bincount(owner, weights=gap, minlength=n)
        active = active[total[active] < minutes]
    if not owners:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    owner = np.concatenate(owners)
    order = np.argsort(owner, kind="stable")  # rounds stay in order within a function
    owner, gap = owner[order], np.concatenate(gaps)[order]
    return owner, start[owner] + _group_cumsum(owner, gap)


def timer_propensity(
    rate_day: FloatArray, timer_share: float, invocation_share: float
) -> FloatArray:
    """Per function, the probability that it is a timer: ``min(1, c x rate^-alpha)``, ``c``
    making the mean ``timer_share`` (the timers' share of functions) and ``alpha >= 0`` making
    the timers' expected share of the invocations ``invocation_share`` (``alpha = 0``: triggers
    independent of rates, when that already gives no more than ``invocation_share``). Both by
    bisection (monotone), vectorised over the functions."""
    rate = np.asarray(rate_day, dtype=np.float64)
    if rate.size == 0 or timer_share <= 0:
        return np.zeros(rate.size)
    log_rate = np.log(rate)

    def probs(alpha: float) -> FloatArray:
        lo, hi = -60.0, 60.0  # log c
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            mean = np.minimum(1.0, np.exp(mid - alpha * log_rate)).mean()
            lo, hi = (mid, hi) if mean < timer_share else (lo, mid)
        out: FloatArray = np.minimum(1.0, np.exp(0.5 * (lo + hi) - alpha * log_rate))
        return out

    def share(alpha: float) -> float:
        return float((probs(alpha) * rate).sum() / rate.sum())

    if share(0.0) <= invocation_share:
        return probs(0.0)
    lo, hi = 0.0, 8.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if share(mid) < invocation_share else (mid, hi)
    return probs(hi)


def _draw_triggers(
    rate_day: FloatArray, mix: FaasMix, rng: np.random.Generator
) -> npt.NDArray[np.str_]:
    """Triggers in the paper's shares of functions, timers among the rarely invoked so that
    they carry their published share of the invocations (:func:`timer_propensity`)."""
    shares = dict(mix.trigger_shares)
    total = sum(shares.values())
    timer_share = shares.pop("timer", 0.0) / total
    timer = rng.random(rate_day.size) < timer_propensity(
        rate_day, timer_share, mix.timer_invocation_share
    )
    names = np.array(list(shares))
    probs = np.array(list(shares.values()))
    other = names[rng.choice(names.size, size=rate_day.size, p=probs / probs.sum())]
    return np.where(timer, "timer", other)


def generate_faas_workload(
    n_functions: int, rng: np.random.Generator, *, mix: FaasMix, minutes: int = MINUTES_PER_DAY
) -> FaasWorkload:
    """``n_functions`` functions over ``minutes`` minutes drawn from ``mix`` (module
    docstring)."""
    if isinstance(n_functions, bool) or not 1 <= n_functions <= MAX_FUNCTIONS:
        raise InvalidSpecError(
            "synthetic", f"must be an integer in [1, {MAX_FUNCTIONS:,}]", got=n_functions
        )
    if isinstance(minutes, bool) or not 1 <= minutes <= 14 * MINUTES_PER_DAY:
        raise InvalidSpecError("minutes", "must be in [1, 20160] (14 days)", got=minutes)
    bands = rate_bands(mix)
    shares = np.array([b[0] for b in bands])
    band = rng.choice(len(bands), size=n_functions, p=shares / shares.sum())
    lo = np.log(np.array([b[1] for b in bands]))[band]
    hi = np.log(np.array([b[2] for b in bands]))[band]
    rate_day = np.exp(lo + (hi - lo) * rng.random(n_functions))
    trigger = _draw_triggers(rate_day, mix, rng)
    timer = trigger == "timer"
    u = rng.random(n_functions)
    periodic = timer | (u < mix.periodic_share)
    bursty = ~periodic & (u >= 1.0 - mix.bursty_share)
    bursty_cv = np.exp(rng.random(n_functions) * np.log(mix.bursty_cv_max))
    cv = np.where(
        periodic,
        np.where(timer, 0.0, mix.periodic_jitter_cv),
        np.where(bursty, bursty_cv, 1.0),
    )
    pattern = np.where(periodic, "periodic", np.where(bursty, "bursty", "poisson"))
    duration = rng.lognormal(mix.duration_mu, mix.duration_sigma, size=n_functions)

    rate_min = rate_day / MINUTES_PER_DAY
    # a timer's schedule is a whole number of minutes when it fires at most once a minute
    whole = timer & (rate_min <= 1.0)
    rate_min = np.where(whole, 1.0 / np.maximum(1.0, np.round(1.0 / rate_min)), rate_min)
    rate_day = rate_min * MINUTES_PER_DAY

    counts = np.zeros((n_functions, minutes), dtype=np.int32)
    sparse = rate_min <= 1.0
    cells: list[IntArray] = []
    idx = np.flatnonzero(sparse & periodic)
    if idx.size:
        period = 1.0 / rate_min[idx]
        jitter = np.where(timer[idx], mix.timer_jitter_s / 60.0, mix.periodic_jitter_cv * period)
        owner, t = _scheduled(period, jitter, minutes, rng)
        ok = (t >= 0) & (t < minutes)
        cells.append(idx[owner[ok]] * minutes + t[ok].astype(np.int64))
    idx = np.flatnonzero(sparse & ~periodic)
    if idx.size:
        owner, t = _renewal(1.0 / rate_min[idx], cv[idx], minutes, rng)
        ok = (t >= 0) & (t < minutes)
        cells.append(idx[owner[ok]] * minutes + t[ok].astype(np.int64))
    if cells:  # in place: a bincount would be a second (functions x minutes) table
        np.add.at(counts.reshape(-1), np.concatenate(cells), 1)
    idx = np.flatnonzero(~sparse & periodic)
    if idx.size:  # a schedule faster than a minute: its exact count in each minute
        edges = np.arange(minutes + 1)[None, :] * rate_min[idx, None]
        edges = np.floor(edges + rng.random(idx.size)[:, None])
        counts[idx] = np.diff(edges, axis=1).astype(np.int32)
    idx = np.flatnonzero(~sparse & ~periodic)
    if idx.size:
        lam = np.broadcast_to(rate_min[idx, None], (idx.size, minutes))
        k = 1.0 / np.maximum(cv[idx], 1.0) ** 2
        intensity = rng.gamma(k[:, None], 1.0 / k[:, None], size=(idx.size, minutes))
        mod = np.where(bursty[idx, None], intensity, 1.0)
        counts[idx] = rng.poisson(lam * mod)
    return FaasWorkload(
        counts=counts,
        trigger=trigger,
        pattern=pattern,
        rate_per_day=rate_day,
        iat_cv=cv,
        duration_s=duration,
    )


def arrival_cv(counts: npt.ArrayLike) -> FloatArray:
    """Per function, the CV of the gaps between its busy minutes (NaN with fewer than 3
    busy minutes): the paper's inter-arrival CV at the trace's one-minute resolution."""
    table = np.asarray(counts)
    func, time = np.nonzero(table)
    n_f = table.shape[0]
    same = func[1:] == func[:-1]
    gap = (time[1:] - time[:-1]).astype(np.float64)[same]
    owner = func[1:][same]
    n = np.bincount(owner, minlength=n_f).astype(np.float64)
    s1 = np.bincount(owner, weights=gap, minlength=n_f)
    s2 = np.bincount(owner, weights=gap**2, minlength=n_f)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / n
        var = np.maximum(0.0, s2 / n - mean**2)
        cv = np.sqrt(var) / mean
    return np.where(n >= 2, cv, np.nan)
