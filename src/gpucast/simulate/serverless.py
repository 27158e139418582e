"""Serverless keep-alive simulator over per-bin invocation counts (issue #19), vectorised.

The input is what the Azure Functions 2019 trace records: invocations of each function in each
minute (``counts[f, t]``, any bin width ``bin_s``). Each function has one instance; an
invocation bin is cold when the instance is not loaded at it (then its first invocation pays
``cold_s``, the others in the bin find it loaded), and a policy decides after each busy bin
when the instance is loaded during the idle bins that follow: the idle offsets ``[pre, keep)``
(:class:`~gpucast.domain.serverless.KeepAlivePolicy`). Loaded idle bins are warm-but-idle
memory-time (``memory_gib`` each). An instance holds ``instance_gpus`` GPUs (a language model split
over several: all of them are loaded, billed and kept warm together), so every GPU-second it
bills is its instance-seconds times them. Everything is computed over the flat array of busy
bins
(``np.nonzero(counts)``): no loop over functions or invocations; the histogram policy loops
over its update periods only (24 for a day of hourly updates).

Warm-up (``warmup_s``, both simulators): the first bins are simulated like the others -- the
policy's histograms, forecasts and loaded instances (the pool's cache) are built through them
-- but nothing in them is counted: invocations, cold starts, swaps, latency, loaded and
warm-but-idle time, GPU-seconds billed all come from the bins after it. Without one, every
function starts unloaded at the first bin, so its first call is a cold start whatever the
policy (a rarely called function's own p99); a production day does not start cold.

Rejected calls (``rejected``, both simulators and :func:`slo_standing`): requests every
deployment refuses at arrival (an LLM request beyond the model's context window). They start
no instance and are no invocation, but count in every latency percentile and SLO share as
infinitely late (:func:`with_rejected`: one case at +inf); the mean and max are over the calls
served.

Pure: numbers in, numbers out (no files, no clock).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serverless import KeepAlivePolicy
from gpucast.domain.units import count_of
from gpucast.simulate.stages import gpus_needed

FloatArray = npt.NDArray[np.float64]
#: int64, or int32 over the busy bins (:func:`busy_bins`: 4 bytes an index, not 8)
IntArray = npt.NDArray[np.signedinteger[Any]]
#: the margin around a forecast idle time (the paper's ARIMA margin)
OOB_MARGIN = 0.15
#: what a serverless bill charges (:meth:`ServerlessResult.bill_s`)
BILLINGS: tuple[str, ...] = ("instance", "execution")

__all__ = [
    "BILLINGS",
    "BusyBins",
    "KeepAliveWindows",
    "PoolResult",
    "ServerlessResult",
    "busy_bins",
    "function_percentiles",
    "keep_alive_windows",
    "latency_summary",
    "rejected_after",
    "service_quantiles",
    "simulate_gpu_pool",
    "simulate_keep_alive",
    "slo_standing",
    "warmup_bins",
    "weighted_percentiles",
    "with_rejected",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerlessResult:
    """Cold starts, latency and memory-time of a keep-alive policy, per function and in total.

    ``wasted_memory_gib_s``: memory held loaded while idle; ``loaded_s``: time loaded (busy
    bins plus loaded idle bins); ``busy_s``: invocations x execution time; ``cold_start_s``:
    time spent cold-starting -- all of them seconds of one instance, which holds
    ``instance_gpus`` GPUs (None: one), so the GPU-seconds billed (:attr:`billed_s`,
    :attr:`instance_s`) are those times its GPUs. ``latency_s``: invocation-weighted
    p50/p95/p99/mean/max of execution (+ cold start when cold). All of them count only the
    bins after the warm-up (``warmup_s``, a whole number of bins); ``horizon_s`` is the whole
    table's time.
    """

    functions: tuple[str, ...]
    invocations: IntArray
    cold_starts: IntArray
    wasted_memory_gib_s: FloatArray
    loaded_s: FloatArray
    busy_s: FloatArray
    cold_start_s: FloatArray
    latency_s: dict[str, float]
    bin_s: float
    horizon_s: float
    policy: KeepAlivePolicy
    warmup_s: float = 0.0
    #: per function, the time it was loaded while idle (``wasted_memory_gib_s / memory_gib``)
    idle_s: FloatArray | None = None
    #: per function, the GPUs one instance holds (None: one each)
    instance_gpus: FloatArray | None = None
    #: per function, the calls rejected at arrival after the warm-up (module docstring; None:
    #: none), not among ``invocations`` but in ``latency_s``'s percentiles as infinitely late
    rejected: IntArray | None = None

    @property
    def gpus(self) -> FloatArray:
        """The GPUs of each function's instance."""
        if self.instance_gpus is None:
            return np.ones(len(self.functions))
        return self.instance_gpus

    @property
    def measured_s(self) -> float:
        """The time counted: the horizon after the warm-up."""
        return self.horizon_s - self.warmup_s

    @property
    def cold_start_rate(self) -> float:
        total = int(self.invocations.sum())
        return float(self.cold_starts.sum()) / total if total else math.nan

    @property
    def billed_s(self) -> float:
        """Execution plus cold-start GPU-seconds (each instance's GPUs): what a per-second
        serverless bill charges."""
        return float(self.gpus @ (self.busy_s + self.cold_start_s))

    @property
    def instance_s(self) -> float:
        """GPU-seconds while an instance is loaded (busy and warm-but-idle bins, at least the
        execution when a bin's calls run longer than it) plus the cold starts, times the
        instance's GPUs: what GPU serverless platforms bill, the keep-alive window included."""
        return float(self.gpus @ (np.maximum(self.loaded_s, self.busy_s) + self.cold_start_s))

    def bill_s(self, billing: str) -> float:
        """GPU-seconds billed: ``instance`` (:attr:`instance_s`) or ``execution``
        (:attr:`billed_s`: execution and cold starts only, a per-request bill)."""
        if billing not in BILLINGS:
            raise InvalidSpecError("billing", f"must be one of {', '.join(BILLINGS)}", got=billing)
        return self.instance_s if billing == "instance" else self.billed_s

    def app_cold_start_pct(self, q: float = 75.0) -> float:
        """The ``q``-th percentile over invoked functions of each one's cold-start percentage
        (the paper's "3rd quartile of application cold-start %")."""
        invoked = self.invocations > 0
        if not invoked.any():
            return math.nan
        pct = 100.0 * self.cold_starts[invoked] / self.invocations[invoked]
        return float(np.percentile(pct, q))

    def to_dict(self) -> dict[str, object]:
        return {
            "policy": self.policy.kind,
            "policy_text": self.policy.describe(),
            "functions": len(self.functions),
            "horizon_s": self.horizon_s,
            "warmup_s": self.warmup_s,
            "measured_s": self.measured_s,
            "invocations": int(self.invocations.sum()),
            "cold_starts": int(self.cold_starts.sum()),
            "cold_start_rate": self.cold_start_rate,
            # the 75th percentile over the simulated units (functions, or apps with --unit
            # app: the result's ``unit``) of each one's cold-start percentage; the paper's
            # "3rd quartile of application cold-start %" when the unit is the app
            "unit_cold_start_pct_p75": self.app_cold_start_pct(75.0),
            "latency_s": dict(self.latency_s),
            "billed_gpu_s": self.billed_s,
            "wasted_memory_gib_s": float(self.wasted_memory_gib_s.sum()),
            "loaded_s": float(self.loaded_s.sum()),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepAliveWindows:
    """After busy bin ``k``, the instance is loaded during idle offsets ``[pre[k], keep[k])``."""

    pre: IntArray
    keep: IntArray


@dataclass(frozen=True, slots=True, kw_only=True)
class BusyBins:
    """The busy bins of a ``(functions, bins)`` count table, sorted by function then time:
    ``gap[k]`` idle bins before busy bin ``k`` since the function's previous one (-1 at its
    first), ``rank[k]`` its position among the function's busy bins, ``first``/``last`` the
    function's first/last busy bin."""

    func: IntArray
    time: IntArray
    gap: IntArray
    rank: IntArray
    first: npt.NDArray[np.bool_]
    last: npt.NDArray[np.bool_]


def busy_bins(counts: npt.ArrayLike) -> BusyBins:
    """:class:`BusyBins` of ``counts`` (``np.nonzero``: no loop), as int32 (4 bytes a busy
    bin, not 8: a table has fewer than 2^31 functions and bins)."""
    func, time = (a.astype(np.int32) for a in np.nonzero(np.asarray(counts)))
    n = func.size
    first = np.ones(n, dtype=bool)
    first[1:] = func[1:] != func[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = func[1:] != func[:-1]
    starts = np.flatnonzero(first).astype(np.int32)
    rank = np.arange(n, dtype=np.int32) - np.repeat(starts, np.diff(np.append(starts, n)))
    gap = np.full(n, -1, dtype=np.int32)
    gap[1:] = time[1:] - time[:-1] - 1
    gap[first] = -1
    return BusyBins(func=func, time=time, gap=gap, rank=rank, first=first, last=last)


def warmup_bins(warmup_s: float, bin_s: float, n_bins: int) -> int:
    """Bins of a ``warmup_s`` warm-up (rounded up to whole bins); at least one bin must follow
    it."""
    if isinstance(warmup_s, bool) or not (math.isfinite(warmup_s) and warmup_s >= 0):
        raise InvalidSpecError("warmup", "must be a duration >= 0", got=warmup_s)
    n = math.ceil(warmup_s / bin_s - 1e-9) if warmup_s > 0 else 0
    if n >= n_bins:
        raise InvalidSpecError(
            "warmup",
            f"must be shorter than the trace ({n_bins * bin_s / 3600:g} h: {n_bins:,} bins "
            f"of {bin_s:g} s), leaving some of it to count",
            got=warmup_s,
            fix="shorten --warmup (e.g. --warmup 1h on a day)",
        )
    return n


def _bins(seconds: float, bin_s: float) -> int:
    return max(1, math.ceil(seconds / bin_s - 1e-9))


def _forecast(
    gap: IntArray, rank: IntArray, history: int
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Per busy bin, the mean of the function's last ``history`` idle times (those ending at
    it and before), and whether it has that many."""
    sums = np.cumsum(np.where(gap >= 0, gap, 0)).astype(np.float64)
    lagged = np.zeros_like(sums)
    if sums.size > history:
        lagged[history:] = sums[:-history]
    return (sums - lagged) / history, rank >= history


def _around(forecast: FloatArray, margin: float) -> tuple[IntArray, IntArray]:
    """The window ``margin`` either side of a forecast idle time: pre-warm at the floor of the
    low side, keep through the ceiling of the high side (at least one bin after pre-warm)."""
    pre = np.floor(forecast * (1.0 - margin)).astype(np.int64)
    keep = np.ceil(forecast * (1.0 + margin)).astype(np.int64) + 1
    return pre, np.maximum(keep, pre + 1)


def _histogram_windows(
    func: IntArray,
    time: IntArray,
    gap: IntArray,
    rank: IntArray,
    n_functions: int,
    policy: KeepAlivePolicy,
    bin_s: float,
) -> KeepAliveWindows:
    """Hybrid-histogram windows, each from the idle times seen before its update period."""
    n_range = _bins(policy.range_s, bin_s)
    update = _bins(policy.update_s, bin_s)
    period = time // update
    n_periods = int(period.max()) + 1 if period.size else 0
    known = gap >= 0  # the gap ending at busy bin k is known from period[k] on
    order = np.argsort(period, kind="stable")
    bounds = np.searchsorted(period[order], np.arange(n_periods + 1))
    hist = np.zeros((n_functions, n_range + 1), dtype=np.int64)  # last column: out of range
    pre_by = np.zeros((n_periods, n_functions), dtype=np.int64)
    keep_by = np.zeros((n_periods, n_functions), dtype=np.int64)
    oob_by = np.zeros((n_periods, n_functions), dtype=bool)
    head_q, tail_q = policy.head_percentile / 100.0, policy.tail_percentile / 100.0
    for p in range(n_periods):
        in_range = hist[:, :n_range]
        n_in = in_range.sum(axis=1)
        n_all = n_in + hist[:, n_range]
        cdf = np.cumsum(in_range, axis=1)
        head_bin = np.argmax(cdf >= np.maximum(1, np.ceil(head_q * n_in))[:, None], axis=1)
        tail_bin = np.argmax(cdf >= np.maximum(1, np.ceil(tail_q * n_in))[:, None], axis=1)
        mean = n_in / n_range
        spread = np.sqrt(
            np.maximum(0.0, (in_range.astype(np.float64) ** 2).sum(axis=1) - n_in * mean)
            / max(1, n_range - 1)
        )
        cv = np.where(n_in > 0, spread / np.where(mean > 0, mean, 1.0), 0.0)
        certain = (n_all >= policy.min_samples) & (cv >= policy.cv_threshold)
        pre = np.floor(head_bin * (1.0 - policy.margin)).astype(np.int64)
        keep = np.ceil((tail_bin + 1) * (1.0 + policy.margin)).astype(np.int64)
        pre_by[p] = np.where(certain, pre, 0)
        keep_by[p] = np.where(certain, np.maximum(keep, pre + 1), n_range)
        oob_by[p] = (n_all > 0) & (
            hist[:, n_range] >= policy.max_out_of_range_fraction * np.maximum(n_all, 1)
        )
        rows = order[bounds[p] : bounds[p + 1]]
        rows = rows[known[rows]]
        np.add.at(hist, (func[rows], np.minimum(gap[rows], n_range)), 1)
    pre, keep = pre_by[period, func], keep_by[period, func]
    # idle times mostly beyond the range: the paper forecasts the next one (ARIMA); here the
    # mean of the last ones, with the paper's 15% margin either side
    forecast, enough = _forecast(gap, rank, policy.history)
    oob = oob_by[period, func] & enough
    f_pre, f_keep = _around(forecast, OOB_MARGIN)
    return KeepAliveWindows(pre=np.where(oob, f_pre, pre), keep=np.where(oob, f_keep, keep))


def _prewarm_windows(
    gap: IntArray, rank: IntArray, policy: KeepAlivePolicy, bin_s: float
) -> KeepAliveWindows:
    """Windows around the forecast idle time (mean of the last ``history`` ones)."""
    forecast, known = _forecast(gap, rank, policy.history)
    pre, keep = _around(forecast, policy.margin)
    fixed = _bins(policy.keep_alive_s, bin_s)
    return KeepAliveWindows(pre=np.where(known, pre, 0), keep=np.where(known, keep, fixed))


def keep_alive_windows(
    func: IntArray,
    time: IntArray,
    gap: IntArray,
    rank: IntArray,
    n_functions: int,
    policy: KeepAlivePolicy,
    bin_s: float,
) -> KeepAliveWindows:
    """The loaded window after each busy bin (sorted by function, then time) under ``policy``.

    ``gap[k]``: idle bins between busy bin ``k - 1`` and ``k`` of the same function (-1 at a
    function's first); ``rank[k]``: ``k``'s position among its function's busy bins."""
    if policy.kind == "fixed":
        keep = _bins(policy.keep_alive_s, bin_s)
        return KeepAliveWindows(
            pre=np.zeros(func.size, dtype=np.int64), keep=np.full(func.size, keep, dtype=np.int64)
        )
    if policy.kind == "histogram":
        return _histogram_windows(func, time, gap, rank, n_functions, policy, bin_s)
    return _prewarm_windows(gap, rank, policy, bin_s)


def weighted_percentiles(
    values: FloatArray, weights: FloatArray, qs: Sequence[float]
) -> list[float]:
    """The ``qs`` percentiles of ``values`` each counted ``weights`` times (NaN if none)."""
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if values.size == 0:
        return [math.nan for _ in qs]
    order = np.argsort(values, kind="stable")
    values, cum = values[order], np.cumsum(weights[order])
    total = cum[-1]
    idx = np.searchsorted(cum, np.asarray(qs) / 100.0 * total, side="left")
    return [float(values[min(i, values.size - 1)]) for i in idx]


def service_quantiles(samples: Sequence[npt.ArrayLike], points: int = 64) -> FloatArray:
    """``(functions, points)``: each function's service times (e.g. every request of an LLM
    trace) at ``points`` equally likely mid-quantiles, ``(k + 0.5) / points``, each one of
    the samples; a function without samples gets NaN (callers fill it with its mean)."""
    out = np.full((len(samples), points), np.nan)
    q = (np.arange(points) + 0.5) / points
    for i, values in enumerate(samples):
        arr = np.asarray(values, dtype=np.float64)
        if arr.size:
            out[i] = np.quantile(arr, q, method="inverted_cdf")
    return out


def _call_table(
    run: FloatArray,
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    spread: FloatArray | None,
) -> tuple[FloatArray, FloatArray]:
    """``(functions, len(cases) x K)`` latencies and call weights: each case's extra on each
    of a function's K equally likely service times (``spread``; one, ``run``, without it)."""
    n_f = run.size
    table = run[:, None] if spread is None else np.where(np.isnan(spread), run[:, None], spread)
    k = table.shape[1]
    values, weights = [], []
    for extra, calls in cases:
        add = np.broadcast_to(np.asarray(extra, dtype=np.float64), (n_f,))
        n = np.broadcast_to(np.asarray(calls, dtype=np.float64), (n_f,))
        values.append(table + add[:, None])
        weights.append(np.repeat((n / k)[:, None], k, axis=1))
    return np.concatenate(values, axis=1), np.concatenate(weights, axis=1)


def latency_summary(
    run: FloatArray,
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    *,
    spread: FloatArray | None = None,
    qs: Sequence[float] = (50.0, 95.0, 99.0),
) -> dict[str, float]:
    """Invocation-weighted latency of calls that each take their function's service time plus
    an extra: ``cases`` are ``(extra_s, calls)`` per function (e.g. ``(0, warm calls)``,
    ``(cold_s, cold starts)``). ``run``: mean service time per function; ``spread``:
    ``(functions, K)`` service times at K equally likely points (:func:`service_quantiles`),
    when a function's calls differ (tokens of LLM requests); without it every call of a
    function takes ``run``. Returns ``p{q}`` for ``qs``, ``mean`` (exact, from ``run``) and
    ``max``; a case at +inf (:func:`with_rejected`) counts in the percentiles as infinitely
    late, while the mean and max are over the calls served (finite extras)."""
    table, weight = _call_table(run, cases, spread)
    v, w = table.ravel(), weight.ravel()
    mean_num = served = 0.0  # exact, from each function's mean service time
    for extra, calls in cases:
        add = np.broadcast_to(np.asarray(extra, dtype=np.float64), run.shape)
        n = np.where(np.isfinite(add), np.broadcast_to(np.asarray(calls, np.float64), run.shape), 0)
        mean_num += float((n * np.where(np.isfinite(add), run + add, 0.0)).sum())
        served += float(n.sum())
    total = float(w.sum())
    out = dict(zip((f"p{q:g}" for q in qs), weighted_percentiles(v, w, qs), strict=True))
    out["mean"] = mean_num / served if served else math.nan
    finite = (w > 0) & np.isfinite(v)
    out["max"] = float(v[finite].max()) if total and finite.any() else math.nan
    return out


def with_rejected(
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]], rejected: npt.ArrayLike | None
) -> tuple[tuple[npt.ArrayLike, npt.ArrayLike], ...]:
    """``cases`` and the ``rejected`` calls per function (refused at arrival: module
    docstring) as one more case at +inf; ``cases`` alone when there are none."""
    if rejected is None or not np.any(np.asarray(rejected)):
        return tuple(cases)
    return (*cases, (math.inf, rejected))


def slo_standing(
    run: FloatArray,
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    *,
    percentile: float,
    slo_s: float,
    spread: FloatArray | None = None,
) -> tuple[float, float]:
    """The invocation-weighted latency at ``percentile`` (:func:`latency_summary`'s rule) and
    the share of calls within ``slo_s`` (NaN, NaN without calls): ``simulate serverless --slo``."""
    v, w = _call_table(run, cases, spread)
    total = float(w.sum())
    if total <= 0:
        return math.nan, math.nan
    at = latency_summary(run, cases, spread=spread, qs=(percentile,))[f"p{percentile:g}"]
    return at, float(w[v <= slo_s + 1e-12].sum()) / total


def function_percentiles(
    run: FloatArray,
    cases: Sequence[tuple[npt.ArrayLike, npt.ArrayLike]],
    *,
    spread: FloatArray | None = None,
    qs: Sequence[float] = (99.0,),
) -> FloatArray:
    """``(len(qs), functions)``: each function's own latency percentiles over its own calls,
    the calls of :func:`latency_summary` (same ``run``, ``cases`` and ``spread``, same rule:
    the smallest latency whose cumulative share of the calls reaches ``q``) but not pooled
    over functions; NaN for a function without calls. Where :func:`latency_summary` lets the
    busy functions speak for all, this shows a rarely called function whose calls are mostly
    cold starts. Vectorised: one sort of a ``(functions, len(cases) x K)`` table."""
    n_f = run.size
    v, w = _call_table(run, cases, spread)
    order = np.argsort(v, axis=1, kind="stable")
    v, cum = np.take_along_axis(v, order, axis=1), np.cumsum(np.take_along_axis(w, order, 1), 1)
    total = cum[:, -1] if cum.size else np.zeros(n_f)
    out = np.full((len(qs), n_f), np.nan)
    called = total > 0
    rows = np.flatnonzero(called)
    for i, q in enumerate(qs):
        # the first point whose cumulative calls reach q% (zero-weight points never cross it)
        at = (cum[called] < (q / 100.0 * total[called])[:, None]).sum(axis=1)
        out[i, called] = v[rows, np.minimum(at, v.shape[1] - 1)]
    return out


def rejected_after(rejected: npt.ArrayLike | None, shape: tuple[int, ...], n_warm: int) -> IntArray:
    """Per function, the calls of a ``(functions, bins)`` ``rejected`` table (module
    docstring; None: none) after the first ``n_warm`` bins, as invocations are counted."""
    if rejected is None:
        return np.zeros(shape[0], dtype=np.int64)
    table = np.asarray(rejected)
    if table.shape != shape or (table.size and table.min() < 0):
        raise InvalidSpecError("rejected", f"must be a {shape} table of counts >= 0")
    return np.asarray(table[:, n_warm:].sum(axis=1), dtype=np.int64)


def _per_function(name: str, value: npt.ArrayLike, n: int) -> FloatArray:
    arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)).astype(np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        bad = int(np.flatnonzero(~(np.isfinite(arr) & (arr >= 0)))[0])
        raise InvalidSpecError(f"{name} of function {bad}", "must be finite and >= 0")
    return arr


def _instance_gpus(value: npt.ArrayLike, n: int) -> FloatArray:
    """The GPUs of each function's instance: whole numbers >= 1 (as floats, to weigh seconds)."""
    arr = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)).astype(np.float64)
    bad = ~(np.isfinite(arr) & (arr >= 1) & (arr == np.round(arr)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidSpecError(
            f"instance_gpus of function {i}", "must be an integer >= 1", got=float(arr[i])
        )
    return arr


def simulate_keep_alive(
    counts: npt.ArrayLike,
    *,
    policy: KeepAlivePolicy,
    exec_s: npt.ArrayLike,
    cold_s: npt.ArrayLike,
    memory_gib: npt.ArrayLike,
    functions: Sequence[str] | None = None,
    exec_spread: FloatArray | None = None,
    warmup_s: float = 0.0,
    instance_gpus: npt.ArrayLike = 1,
    rejected: npt.ArrayLike | None = None,
) -> ServerlessResult:
    """Cold starts, latency and warm-idle memory-time of ``policy`` (module docstring).

    ``counts``: ``(functions, bins)`` invocations per bin of ``policy.bin_s`` seconds;
    ``exec_s`` (mean), ``cold_s``, ``memory_gib`` (all of an instance's GPUs),
    ``instance_gpus`` (the GPUs an instance holds): per function (or one value for all);
    ``exec_spread``: each function's service times at equally likely points when its calls
    differ (:func:`latency_summary`); ``warmup_s``: the first bins simulated but not counted
    (:func:`warmup_bins`); ``rejected``: ``(functions, bins)`` calls refused at arrival
    (module docstring).
    """
    table = np.asarray(counts)
    if table.ndim != 2:
        raise InvalidSpecError("counts", "must be a (functions, bins) table", got=table.shape)
    if table.size and (not np.issubdtype(table.dtype, np.integer) or table.min() < 0):
        raise InvalidSpecError("counts", "must be integers >= 0")
    n_f, n_t = table.shape
    bin_s = policy.bin_s
    run = _per_function("exec_s", exec_s, n_f)
    cold_cost = _per_function("cold_s", cold_s, n_f)
    mem = _per_function("memory_gib", memory_gib, n_f)
    gpus = _instance_gpus(instance_gpus, n_f)
    names = tuple(functions) if functions is not None else tuple(f"f{i}" for i in range(n_f))
    if len(names) != n_f:
        raise InvalidSpecError("functions", f"must name all {n_f} functions", got=len(names))
    n_warm = warmup_bins(warmup_s, bin_s, n_t)

    b = busy_bins(table)
    func, time, gap, rank, first, last = b.func, b.time, b.gap, b.rank, b.first, b.last
    n = func.size

    win = keep_alive_windows(func, time, gap, rank, n_f, policy, bin_s)
    prev_pre = np.zeros(n, dtype=np.int64)
    prev_keep = np.zeros(n, dtype=np.int64)
    prev_pre[1:], prev_keep[1:] = win.pre[:-1], win.keep[:-1]
    cold = first | (gap < prev_pre) | (gap >= prev_keep)
    # idle offset j after a busy bin at t is bin t + 1 + j, counted from the warm-up's end on:
    # j >= n_warm - t - 1 (the previous busy bin of k is at time[k] - gap[k] - 1)
    lo = np.maximum(prev_pre, n_warm - time + gap)
    idle_loaded = np.where(first, 0, np.maximum(0, np.minimum(gap, prev_keep) - lo))
    tail = (n_t - 1) - time
    lo_tail = np.maximum(win.pre, n_warm - time - 1)
    idle_loaded = idle_loaded + np.where(
        last, np.maximum(0, np.minimum(tail, win.keep) - lo_tail), 0
    )
    counted = time >= n_warm

    invocations = table[:, n_warm:].sum(axis=1).astype(np.int64)
    cold_starts = np.bincount(func, weights=cold & counted, minlength=n_f).astype(np.int64)
    idle_bins = np.bincount(func, weights=idle_loaded, minlength=n_f)
    n_busy = np.bincount(func, weights=counted, minlength=n_f).astype(np.float64)
    refused = rejected_after(rejected, table.shape, n_warm)
    latency = latency_summary(
        run,
        with_rejected(((0.0, invocations - cold_starts), (cold_cost, cold_starts)), refused),
        spread=exec_spread,
    )
    return ServerlessResult(
        functions=names,
        invocations=invocations,
        cold_starts=cold_starts,
        wasted_memory_gib_s=idle_bins * bin_s * mem,
        loaded_s=(idle_bins + n_busy) * bin_s,
        busy_s=invocations * run,
        cold_start_s=cold_starts * cold_cost,
        latency_s=latency,
        bin_s=bin_s,
        horizon_s=n_t * bin_s,
        policy=policy,
        warmup_s=n_warm * bin_s,
        idle_s=np.asarray(idle_bins * bin_s, dtype=np.float64),
        instance_gpus=gpus,
        rejected=refused if refused.any() else None,
    )


# -- several models multiplexed on a GPU pool, swapped over PCIe (Torpor-style) ---------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolResult:
    """Functions sharing a pool of ``gpus`` GPUs whose memory caches their models (LRU), every
    model kept in host memory and swapped in over PCIe on a miss (Torpor, Yu et al.).

    ``swaps``: misses served from host memory, ``swap_s`` the seconds they took;
    ``cold_starts``: a function's first call (loaded from storage), ``cold_start_s`` the
    seconds those loads took; ``oversubscribed_bins``: bins whose busy
    models alone exceed the pool's memory (they time-share it, swapping more than counted).
    Compute: ``busy_gpu_s`` is the execution GPU-seconds of all calls (each call's time x
    the GPUs of its function's instance), ``peak_busy_gpu_s``
    the largest of one bin; ``overloaded_bins`` are the bins whose execution alone exceeds
    ``gpus`` x ``bin_s``. Under overload the work queues from bin to bin, which ``latency_s``
    (execution plus swap or cold start, no queueing) does not model: :attr:`latency_modelled`
    is False and ``to_dict`` gives no latency. All of them count only the bins after the
    warm-up (``warmup_s``); ``horizon_s`` is the whole table's time."""

    invocations: IntArray
    swaps: IntArray
    cold_starts: IntArray
    swap_s: FloatArray
    latency_s: dict[str, float]
    capacity_gib: float
    cold_start_s: FloatArray
    oversubscribed_bins: int
    bin_s: float
    horizon_s: float
    gpus: int
    busy_gpu_s: float
    peak_busy_gpu_s: float
    overloaded_bins: int
    warmup_s: float = 0.0

    @property
    def measured_s(self) -> float:
        """The time counted: the horizon after the warm-up."""
        return self.horizon_s - self.warmup_s

    @property
    def latency_modelled(self) -> bool:
        """Whether ``latency_s`` holds: no bin needs more GPU-seconds than the pool has."""
        return self.overloaded_bins == 0

    @property
    def gpus_needed(self) -> int:
        """GPUs the busiest bin's execution needs, each busy all of the bin."""
        return gpus_needed(self.peak_busy_gpu_s, self.bin_s)

    @property
    def gpu_hours(self) -> float:
        """What the pool is billed: its GPUs over the horizon after the warm-up, and at least
        the execution GPU-hours (an overloaded pool runs past the horizon to serve them)."""
        return max(self.gpus * self.measured_s, self.busy_gpu_s) / 3600.0

    @property
    def warnings(self) -> tuple[str, ...]:
        bins = round(self.measured_s / self.bin_s)
        out = []
        if self.overloaded_bins:
            out.append(
                f"the pool of {count_of(self.gpus, 'GPU')} is compute-overloaded in "
                f"{self.overloaded_bins:,} of {bins:,} bins of {self.bin_s:g} s: execution "
                f"alone needs {self.busy_gpu_s / 3600.0:,.1f} GPU-hours and {self.gpus_needed:,} "
                "GPUs in the busiest bin (each busy all of it); billed at least the execution "
                "GPU-hours, latency not modelled (calls queue); size it with --pool-gpus "
                f"{self.gpus_needed}"
            )
        if self.oversubscribed_bins:
            out.append(
                f"in {self.oversubscribed_bins:,} of {bins:,} bins the models called exceed the "
                f"pool's {self.capacity_gib:g} GiB: they time-share it, swapping more often than "
                "the one swap per model per bin counted"
            )
        return tuple(out)

    def to_dict(self) -> dict[str, object]:
        total = int(self.invocations.sum())
        return {
            "gpus": self.gpus,
            "capacity_gib": self.capacity_gib,
            "warmup_s": self.warmup_s,
            "invocations": total,
            "swaps": int(self.swaps.sum()),
            "swap_rate": float(self.swaps.sum()) / total if total else math.nan,
            "cold_starts": int(self.cold_starts.sum()),
            "swap_time_s": float(self.swap_s.sum()),
            "cold_start_time_s": float(self.cold_start_s.sum()),
            "latency_s": dict(self.latency_s) if self.latency_modelled else None,
            "latency_modelled": self.latency_modelled,
            "busy_gpu_hours": self.busy_gpu_s / 3600.0,
            "overloaded_bins": self.overloaded_bins,
            "gpus_needed": self.gpus_needed,
            "gpu_hours": self.gpu_hours,
            "oversubscribed_bins": self.oversubscribed_bins,
            "warnings": list(self.warnings),
        }


def simulate_gpu_pool(
    counts: npt.ArrayLike,
    *,
    gpus: int,
    capacity_gib: float,
    memory_gib: npt.ArrayLike,
    swap_s: npt.ArrayLike,
    cold_s: npt.ArrayLike,
    exec_s: npt.ArrayLike,
    bin_s: float = 60.0,
    exec_spread: FloatArray | None = None,
    warmup_s: float = 0.0,
    instance_gpus: npt.ArrayLike = 1,
    rejected: npt.ArrayLike | None = None,
) -> PoolResult:
    """Swaps and latency of functions multiplexed on ``gpus`` GPUs with ``capacity_gib`` of
    GPU memory in all; a function's model runs on ``instance_gpus`` of them (per function, or
    one value for all), its calls' execution weighed by them.

    Bin by bin: the models called in the bin are made resident (a first call loads from
    storage, ``cold_s``; a later miss swaps in from host memory, ``swap_s`` -- the weights over
    PCIe); when resident models exceed the capacity, the least recently used ones not called
    in the bin are evicted. One loop over bins, vectorised over functions inside each. Each
    bin's execution GPU-seconds (calls x ``exec_s``) are compared with ``gpus`` x ``bin_s``
    (:class:`PoolResult`: overloaded bins, the GPUs needed, what is billed). The first
    ``warmup_s`` fill the cache but are not counted, and ``rejected`` calls count as
    infinitely late (module docstring).
    """
    table = np.asarray(counts)
    if table.ndim != 2 or (table.size and table.min() < 0):
        raise InvalidSpecError("counts", "must be a (functions, bins) table of counts >= 0")
    if not (math.isfinite(capacity_gib) and capacity_gib > 0):
        raise InvalidSpecError("capacity_gib", "must be > 0", got=capacity_gib)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InvalidSpecError("pool-gpus", "must be an integer >= 1", got=gpus)
    n_f, n_t = table.shape
    n_warm = warmup_bins(warmup_s, bin_s, n_t)
    mem = _per_function("memory_gib", memory_gib, n_f)
    swap = _per_function("swap_s", swap_s, n_f)
    cold_cost = _per_function("cold_s", cold_s, n_f)
    run = _per_function("exec_s", exec_s, n_f)
    per_call = _instance_gpus(instance_gpus, n_f)
    too_big = np.flatnonzero((mem > capacity_gib) | (per_call > gpus))
    if too_big.size:
        i = int(too_big[0])
        raise InvalidSpecError(
            f"memory_gib of function {i}",
            f"needs {mem[i]:g} GiB on {count_of(per_call[i], 'GPU')}, more than the pool's "
            f"{capacity_gib:g} GiB on {count_of(gpus, 'GPU')}",
            fix="a larger pool (more GPUs), GPUs with more memory or a smaller model",
        )
    minute, func = (a.astype(np.int64) for a in np.nonzero(table.T))
    bounds = np.searchsorted(minute, np.arange(n_t + 1))
    resident = np.zeros(n_f, dtype=bool)
    seen = np.zeros(n_f, dtype=bool)
    last_used = np.full(n_f, -1, dtype=np.int64)
    swapped = np.zeros(n_f, dtype=np.int64)
    first = np.zeros(n_f, dtype=np.int64)
    used = 0.0
    over = 0
    for t in range(n_t):
        called = func[bounds[t] : bounds[t + 1]]
        if called.size == 0:
            continue
        missing = called[~resident[called]]
        if t >= n_warm:
            first[missing[~seen[missing]]] += 1
            swapped[missing[seen[missing]]] += 1
        seen[called] = True
        resident[missing] = True
        used += float(mem[missing].sum())
        last_used[called] = t
        if used > capacity_gib + 1e-9:  # summation order may add an ulp
            keep = np.zeros(n_f, dtype=bool)
            keep[called] = True
            victims = np.flatnonzero(resident & ~keep)
            victims = victims[np.argsort(last_used[victims], kind="stable")]
            freed = np.cumsum(mem[victims])
            n_out = int(np.searchsorted(freed, used - capacity_gib - 1e-12, side="left")) + 1
            n_out = min(n_out, victims.size)
            resident[victims[:n_out]] = False
            used -= float(freed[n_out - 1]) if n_out else 0.0
            if used > capacity_gib + 1e-9 and t >= n_warm:
                over += 1
    refused = rejected_after(rejected, table.shape, n_warm)
    table = table[:, n_warm:]
    invocations = table.sum(axis=1).astype(np.int64)
    busy = (run * per_call) @ table  # execution GPU-seconds per bin after the warm-up
    overloaded = int(np.count_nonzero(busy > gpus * bin_s * (1.0 + 1e-12)))
    latency = latency_summary(
        run,
        with_rejected(
            ((0.0, invocations - swapped - first), (swap, swapped), (cold_cost, first)), refused
        ),
        spread=exec_spread,
    )
    return PoolResult(
        invocations=invocations,
        swaps=swapped,
        cold_starts=first,
        swap_s=swapped * swap,
        cold_start_s=first * cold_cost,
        latency_s=latency,
        capacity_gib=capacity_gib,
        oversubscribed_bins=over,
        bin_s=bin_s,
        horizon_s=n_t * bin_s,
        gpus=gpus,
        busy_gpu_s=float(busy.sum()),
        peak_busy_gpu_s=float(busy.max(initial=0.0)),
        overloaded_bins=overloaded,
        warmup_s=n_warm * bin_s,
    )
