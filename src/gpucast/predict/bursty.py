"""Spot markets as they are: revocations that come in storms, and the waits for capacity.

Pure: numbers in, numbers out (numpy and scipy). The files are parsed by
:mod:`gpucast.store.datasets.preemption`; the records they give live in
:mod:`gpucast.domain.preemption`.

* :class:`MarkovModulatedLifetime` — a two-state (calm/storm) Markov-modulated hazard, a
  :class:`~gpucast.predict.revocation.CorrelatedLifetime`: every node of one market shares the
  state path within a simulated run, so nodes die together when a storm comes. One node on
  its own (``sample``/``survival``) has the stationary marginal, computed exactly: the
  survival ``pi exp((Q - Lambda) t) 1`` of a reversible two-state chain is a mixture of two
  exponentials with positive weights (the symmetrised generator's spectrum).
* :func:`fit_mmpp` / :class:`MMPPModel` (kind ``"mmpp"``) — a two-state Poisson hidden Markov
  model on the revocations per tick of a node-count trace, with exposure (node-hours at risk)
  per tick, fitted by Baum–Welch from several seeded starts. A trace without revocations, or
  one that a single state explains as well (BIC), falls back to a constant hazard and says so.
* :class:`CapacityGaps` (kind ``"capacity-gaps"``) — how long a revoked node's market stays
  short of capacity: Kaplan–Meier on the trace's gaps (a gap still open at the trace's end is
  right-censored) with an exponential tail beyond the last observed recovery.
* :class:`PiecewiseHazardLifetime` — a user-given piecewise-constant hazard (a
  :class:`~gpucast.domain.preemption.HazardSpec`), on the node's age or on the run's clock,
  sampled by inverting the cumulative hazard; :class:`PiecewiseHazardModel` (kind
  ``"piecewise-hazard"``) fits one on censored lifetimes (events / exposure per age bin).
* :func:`fit_lifetimes` — instance-lifetime records into the existing
  :class:`~gpucast.predict.revocation.RevocationModel` (Weibull / Kaplan–Meier per GPU and
  region).

Randomness comes only from the ``numpy.random.Generator`` passed in: same seed, same draws.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.preemption import (
    HazardSpec,
    InstanceLifetime,
    check_gap_s,
    instance_lifetimes_frame,
    revocations_and_exposure,
)
from gpucast.domain.units import format_amount
from gpucast.predict.base import Estimator, register
from gpucast.predict.revocation import EmpiricalLifetime, RevocationModel

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_H = 3600.0
#: Baum–Welch runs every start this many iterations, then only the best :data:`_KEEP`.
_PRUNE_AFTER = 15
_KEEP = 2
#: Continuations beyond an environment's path stop after this many sojourns (then the mean
#: hazard finishes the draw); reached only with hazards that almost never fire.
_MAX_CONTINUATION_SOJOURNS = 10_000


def _cap(t: FloatArray, cap_s: float | None) -> FloatArray:
    return t if cap_s is None else np.minimum(t, cap_s)


def _check_cap(cap_s: float | None) -> None:
    if cap_s is not None and not (math.isfinite(cap_s) and cap_s > 0):
        raise InvalidSpecError(
            "cap_s", "must be a number of seconds > 0 or None", got=cap_s, fix="e.g. 86400"
        )


def _check_rng_args(n: int, what: str = "n") -> int:
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise InvalidSpecError(what, "must be a whole number >= 0", got=n)
    return int(n)


def _row_keys(matrix: FloatArray) -> npt.NDArray[np.complex128]:
    """``matrix`` (rows non-decreasing) flattened into one sorted array of ``row + 1j * value``.

    numpy orders complex numbers lexicographically (real part, then imaginary), so one
    ``searchsorted`` answers a query in any row exactly: no rounding, unlike an offset per row.
    """
    rows = np.arange(matrix.shape[0], dtype=np.float64)[:, None]
    return np.asarray((rows + 1j * matrix).reshape(-1), dtype=np.complex128)


def _row_count_le(
    keys: npt.NDArray[np.complex128], width: int, rows: IntArray, values: FloatArray
) -> IntArray:
    """For each i: how many entries of row ``rows[i]`` of the matrix behind ``keys`` (from
    :func:`_row_keys`, ``width`` columns) are <= ``values[i]``."""
    found = np.searchsorted(keys, rows + 1j * values, side="right")
    return np.asarray(found - rows * width, dtype=np.int64)


# -- the Markov-modulated hazard -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class MMPPPath:
    """One calm/storm state path per run (what :meth:`MarkovModulatedLifetime.environment`
    draws): segment ``j`` of run ``r`` is ``[edges_s[r, j], edges_s[r, j + 1])`` with hazard
    ``hazard_per_s[r, j]``; ``cum_hazard[r, j]`` is the cumulative hazard at ``edges_s[r, j]``.
    Every run's path reaches past ``horizon_s``; ``next_storm[r]`` is the state after it."""

    edges_s: FloatArray
    storm: BoolArray
    hazard_per_s: FloatArray
    cum_hazard: FloatArray
    next_storm: BoolArray
    horizon_s: float
    #: search keys over ``edges_s[:, 1:]`` and ``cum_hazard[:, 1:]`` (see :func:`_row_keys`)
    edge_keys: npt.NDArray[np.complex128] = field(init=False, repr=False)
    cum_keys: npt.NDArray[np.complex128] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "edge_keys", _row_keys(self.edges_s[:, 1:]))
        object.__setattr__(self, "cum_keys", _row_keys(self.cum_hazard[:, 1:]))

    @property
    def runs(self) -> int:
        return int(self.edges_s.shape[0])

    def storm_fraction(self, until_s: float | None = None) -> FloatArray:
        """Per run: the share of ``[0, until_s]`` (default: the horizon) spent in a storm."""
        end = self.horizon_s if until_s is None else until_s
        if end <= 0:
            return np.zeros(self.runs)
        lo = np.minimum(self.edges_s[:, :-1], end)
        hi = np.minimum(self.edges_s[:, 1:], end)
        return np.asarray(((hi - lo) * self.storm).sum(axis=1) / end, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkovModulatedLifetime:
    """A hazard that switches between calm and storm (a two-state Markov-modulated Poisson
    process): ``hazard_calm_per_hour`` / ``hazard_storm_per_hour`` revocations per node-hour,
    calm and storm spells lasting ``calm_mean_h`` / ``storm_mean_h`` hours on average
    (exponentially distributed). ``cap_s`` ends every lifetime (e.g. GCE's 24 h).

    Implements :class:`~gpucast.predict.revocation.CorrelatedLifetime`.
    """

    hazard_calm_per_hour: float
    hazard_storm_per_hour: float
    calm_mean_h: float
    storm_mean_h: float
    cap_s: float | None = None
    source: str = "markov-modulated hazard"

    def __post_init__(self) -> None:
        for name in ("hazard_calm_per_hour", "hazard_storm_per_hour"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InvalidSpecError(
                    name, "must be a revocation rate >= 0 per hour", got=v, fix="e.g. 0.02"
                )
        for name in ("calm_mean_h", "storm_mean_h"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InvalidSpecError(name, "must be a mean duration > 0 hours", got=v)
        _check_cap(self.cap_s)

    # -- summaries ---------------------------------------------------------------------------
    @property
    def storm_fraction(self) -> float:
        """Long-run share of time in a storm."""
        return self.storm_mean_h / (self.calm_mean_h + self.storm_mean_h)

    @property
    def mean_hazard_per_hour(self) -> float:
        """Long-run revocations per node-hour (ignoring the cap)."""
        p = self.storm_fraction
        return (1 - p) * self.hazard_calm_per_hour + p * self.hazard_storm_per_hour

    @property
    def is_constant(self) -> bool:
        return self.hazard_calm_per_hour == self.hazard_storm_per_hour

    def _rates_per_s(self) -> tuple[float, float, float, float]:
        """(calm->storm, storm->calm, calm hazard, storm hazard), all per second."""
        return (
            1.0 / (self.calm_mean_h * _H),
            1.0 / (self.storm_mean_h * _H),
            self.hazard_calm_per_hour / _H,
            self.hazard_storm_per_hour / _H,
        )

    def _spectrum(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(sqrt(pi), eigenvalues, eigenvectors) of the symmetrised sub-generator.

        ``Q - Lambda`` of a two-state chain is reversible: with ``D = diag(pi)``,
        ``S = D^(1/2) (Q - Lambda) D^(-1/2)`` is symmetric, so
        ``exp((Q - Lambda) t) = D^(-1/2) V exp(W t) V^T D^(1/2)`` with real ``W <= 0``.
        """
        a, b, h0, h1 = self._rates_per_s()
        sqrt_pi = np.sqrt(np.array([b, a]) / (a + b))
        off = math.sqrt(a * b)
        _, v = np.linalg.eigh(np.array([[-a - h0, off], [off, -b - h1]]))
        # the eigenvalues in closed form, free of cancellation: the most negative one, and the
        # other from det = a h1 + b h0 + h0 h1 (exactly 0 when nothing is ever revoked)
        fast = -0.5 * (a + h0 + b + h1) - math.hypot(0.5 * (a + h0 - b - h1), off)
        slow = (a * h1 + b * h0 + h0 * h1) / fast
        return sqrt_pi, np.array([fast, slow]), v

    def _mixture(self, storm_probability: float | None) -> tuple[FloatArray, FloatArray]:
        """Survival as ``sum_k weight_k exp(-rate_k t)`` for a node whose start finds a storm
        with ``storm_probability`` (None: the stationary share)."""
        sqrt_pi, w, v = self._spectrum()
        if storm_probability is None:
            p = sqrt_pi**2
        else:
            q = float(storm_probability)
            if not 0 <= q <= 1:
                raise InvalidSpecError("storm_probability", "must be in [0, 1]", got=q)
            p = np.array([1 - q, q])
        weights = (p / sqrt_pi) @ v * (sqrt_pi @ v)
        return np.asarray(weights, dtype=np.float64), np.asarray(-w, dtype=np.float64)

    def survival_given(self, t_s: npt.ArrayLike, storm_probability: float) -> FloatArray:
        """P(alive ``t_s`` after its start) for a node started when the market is in a storm
        with probability ``storm_probability`` (e.g. the filtered state of a live trace)."""
        return self._survival(t_s, storm_probability)

    def _survival(self, t_s: npt.ArrayLike, storm_probability: float | None) -> FloatArray:
        t = np.maximum(np.asarray(t_s, dtype=np.float64), 0.0)
        weights, rates = self._mixture(storm_probability)
        exponent = np.where(rates[:, None] > 0, -rates[:, None] * t.reshape(1, -1), 0.0)
        s = np.clip((weights[:, None] * np.exp(exponent)).sum(axis=0), 0.0, 1.0).reshape(t.shape)
        if self.cap_s is not None:
            s = np.where(t >= self.cap_s, 0.0, s)
        return np.asarray(s, dtype=np.float64)

    # -- LifetimeDistribution --------------------------------------------------------------
    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        """Stationary marginal: P(a node started at a random time lives ``t_s``)."""
        return self._survival(t_s, None)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """``n`` independent lifetimes from the stationary marginal (a two-exponential mixture:
        one uniform picks the component, one Exp(1) its lifetime)."""
        n = _check_rng_args(n)
        weights, rates = self._mixture(None)
        u = rng.random(n)
        e = rng.standard_exponential(n)
        rate = np.where(u < weights[0], rates[0], rates[1])
        with np.errstate(over="ignore"):  # a rate near 0: a lifetime of inf, as it should be
            t = np.where(rate > 0, e / np.where(rate > 0, rate, 1.0), np.inf)
        return _cap(np.asarray(t, dtype=np.float64), self.cap_s)

    def median_s(self) -> float:
        """Median of the stationary marginal (inf when more than half never die)."""
        return self.quantile_s(0.5)

    def quantile_s(self, q: float, storm_probability: float | None = None) -> float:
        """The ``q`` quantile of the lifetime (stationary, or given the storm probability)."""
        from scipy import optimize

        if not 0 < q < 1:
            raise InvalidSpecError("q", "must be in (0, 1)", got=q)

        def f(t: float) -> float:
            return float(self._survival(np.array([t]), storm_probability)[0]) - (1 - q)

        if self.cap_s is not None and f(np.nextafter(self.cap_s, 0)) > 0:
            return float(self.cap_s)
        hi = 3600.0
        while f(hi) > 0:
            hi *= 2
            if hi > 1e15:
                return math.inf
        return float(optimize.brentq(f, 0.0, hi, xtol=1e-6, rtol=1e-12))

    # -- CorrelatedLifetime ------------------------------------------------------------------
    def environment(self, rng: np.random.Generator, runs: int, horizon_s: float) -> MMPPPath:
        """Per run, alternating exponential calm/storm spells from a stationary start, to past
        ``horizon_s``. Cost: runs x (spells per horizon) floats."""
        runs = _check_rng_args(runs, "runs")
        if not (math.isfinite(horizon_s) and horizon_s >= 0):
            raise InvalidSpecError("horizon_s", "must be a number of seconds >= 0", got=horizon_s)
        a, b, h0, h1 = self._rates_per_s()
        mean_s = np.array([1.0 / a, 1.0 / b])
        hazard = np.array([h0, h1])
        start_storm = (rng.random(runs) < self.storm_fraction).astype(np.int64)
        block = max(4, 2 * math.ceil(1.25 * horizon_s / (mean_s.sum())) + 4)
        blocks: list[FloatArray] = []
        total = np.zeros(runs)
        done = 0
        while True:
            states = (start_storm[:, None] + done + np.arange(block)[None, :]) % 2
            lengths = rng.standard_exponential((runs, block)) * mean_s[states]
            blocks.append(lengths)
            done += block
            total = total + lengths.sum(axis=1)
            if runs == 0 or float(total.min()) > horizon_s:
                break
        lengths = np.concatenate(blocks, axis=1)
        edges = np.concatenate([np.zeros((runs, 1)), np.cumsum(lengths, axis=1)], axis=1)
        k = int((edges > horizon_s).argmax(axis=1).max()) if runs else 1
        edges = edges[:, : k + 1]
        states = (start_storm[:, None] + np.arange(k)[None, :]) % 2
        hazard_per_s = hazard[states]
        cum = np.concatenate(
            [np.zeros((runs, 1)), np.cumsum(hazard_per_s * np.diff(edges, axis=1), axis=1)],
            axis=1,
        )
        return MMPPPath(
            edges_s=edges,
            storm=states.astype(bool),
            hazard_per_s=hazard_per_s,
            cum_hazard=cum,
            next_storm=((start_storm + k) % 2).astype(bool),
            horizon_s=float(horizon_s),
        )

    def sample_at(
        self,
        rng: np.random.Generator,
        start_s: FloatArray,
        run: npt.NDArray[np.int64],
        env: Any,
    ) -> FloatArray:
        """Lifetimes of nodes requested at ``start_s`` in runs ``run`` of ``env``.

        One Exp(1) draw per node, ``E``; the node dies when the run's cumulative hazard has
        grown by ``E`` since ``start_s`` (the piecewise-linear cumulative hazard inverted with
        a vectorised binary search). A node outliving its run's drawn path continues on its own
        copy of the chain from the path's last state (exact for the node; from there on it no
        longer shares storms with the others).
        """
        if not isinstance(env, MMPPPath):
            raise InvalidSpecError(
                "env", "must come from this distribution's environment()", got=type(env).__name__
            )
        start = np.asarray(start_s, dtype=np.float64).reshape(-1)
        runs = np.asarray(run, dtype=np.int64).reshape(-1)
        if start.shape != runs.shape:
            raise InvalidSpecError("sample_at", "start_s and run must have the same length")
        if start.size and not (np.all(np.isfinite(start)) and start.min() >= 0):
            raise InvalidSpecError("start_s", "must be finite seconds >= 0")
        if runs.size and (runs.min() < 0 or runs.max() >= env.runs):
            raise InvalidSpecError("run", f"must index the {env.runs} runs of the environment")
        e = rng.standard_exponential(start.size)
        out = np.empty(start.size)
        if start.size == 0:
            return out
        k_last = env.edges_s.shape[1] - 1
        last_edge = env.edges_s[runs, k_last]
        total = env.cum_hazard[runs, k_last]
        inside = start < last_edge
        if start.any():
            j = np.minimum(_row_count_le(env.edge_keys, k_last, runs, start), k_last - 1)
            at_start = env.cum_hazard[runs, j] + env.hazard_per_s[runs, j] * np.maximum(
                start - env.edges_s[runs, j], 0.0
            )
            target = at_start + e
        else:  # all requested when the paths begin (a job's first servers): nothing to find
            target = e
        found = inside & (target < total)
        if found.any():
            r, tg = runs[found], target[found]
            k = np.minimum(_row_count_le(env.cum_keys, k_last, r, tg), k_last - 1)
            death = env.edges_s[r, k] + (tg - env.cum_hazard[r, k]) / env.hazard_per_s[r, k]
            out[found] = death - start[found]
        rest = np.flatnonzero(~found)
        if rest.size:
            residual = np.where(inside[rest], target[rest] - total[rest], e[rest])
            death = self._continue(
                rng,
                from_s=last_edge[rest],
                storm=env.next_storm[runs[rest]],
                residual=residual,
                active_from_s=np.maximum(start[rest], last_edge[rest]),
                stop_s=start[rest] + (math.inf if self.cap_s is None else self.cap_s),
            )
            out[rest] = death - start[rest]
        return _cap(np.maximum(out, 0.0), self.cap_s)

    def _continue(
        self,
        rng: np.random.Generator,
        *,
        from_s: FloatArray,
        storm: BoolArray,
        residual: FloatArray,
        active_from_s: FloatArray,
        stop_s: FloatArray,
    ) -> FloatArray:
        """Death times on each node's own continuation of the chain after ``from_s``: the
        hazard counts from ``active_from_s`` until the Exp(1) ``residual`` is used up."""
        out = np.full(from_s.size, np.inf)
        a, b, h0, h1 = self._rates_per_s()
        if h0 == 0 and h1 == 0:
            return out
        mean_s = np.array([1.0 / a, 1.0 / b])
        hazard = np.array([h0, h1])
        t = from_s.copy()
        state = storm.astype(np.int64)
        left = residual.copy()
        todo = np.arange(from_s.size)
        for _ in range(_MAX_CONTINUATION_SOJOURNS):
            if todo.size == 0:
                return out
            s = state[todo]
            seg_end = t[todo] + rng.standard_exponential(todo.size) * mean_s[s]
            begin = np.maximum(t[todo], active_from_s[todo])
            used = hazard[s] * np.maximum(seg_end - begin, 0.0)
            dies = (hazard[s] > 0) & (used >= left[todo])
            hit = todo[dies]
            out[hit] = begin[dies] + left[hit] / hazard[s][dies]
            left[todo] -= np.where(dies, 0.0, used)
            t[todo] = seg_end
            state[todo] = 1 - s
            todo = todo[~dies & (seg_end < stop_s[todo])]
        mean_hazard = self.mean_hazard_per_hour / _H
        out[todo] = np.maximum(t[todo], active_from_s[todo]) + left[todo] / mean_hazard
        return out


# -- fitting a Poisson hidden Markov model on a node-count trace ----------------------------


def _mul(x: FloatArray, y: FloatArray) -> FloatArray:
    """Batched 2x2 products; matrices are laid out (2, 2, ...) so each entry is contiguous.
    ``y`` has the full batch shape (``x`` may broadcast against it)."""
    out = np.empty(y.shape)
    out[0, 0] = x[0, 0] * y[0, 0] + x[0, 1] * y[1, 0]
    out[0, 1] = x[0, 0] * y[0, 1] + x[0, 1] * y[1, 1]
    out[1, 0] = x[1, 0] * y[0, 0] + x[1, 1] * y[1, 0]
    out[1, 1] = x[1, 0] * y[0, 1] + x[1, 1] * y[1, 1]
    return out


#: Tick blocks of the prefix-product scan (see :func:`_prefix`).
_BLOCK = 16


def _rescaled(prod: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``prod`` divided by its largest entry per matrix, and the log of that entry."""
    scale = np.maximum(np.maximum(prod[0, 0], prod[0, 1]), np.maximum(prod[1, 0], prod[1, 1]))
    return prod / scale, np.log(scale)


def _prefix(m: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Prefix products ``m[:, :, 0] @ ... @ m[:, :, t]`` of 2x2 matrices laid out
    (2, 2, T, R), each rescaled so its largest entry is 1, and the logs of the scales taken
    out (Rabiner's scaling, applied to products).

    Blocked: the products within blocks of :data:`_BLOCK` ticks are formed side by side for
    all blocks, the blocks' totals are scanned the same way (recursively), and each block is
    then multiplied by the product of the blocks before it — about 2 log16(T) vectorised steps
    of Python, instead of one per tick.
    """
    n = m.shape[2]
    if n <= 2 * _BLOCK:
        p = np.empty_like(m)
        logs = np.zeros(m.shape[2:])
        p[:, :, 0], logs[0] = _rescaled(m[:, :, 0])
        for t in range(1, n):
            p[:, :, t], step = _rescaled(_mul(p[:, :, t - 1], m[:, :, t]))
            logs[t] = logs[t - 1] + step
        return p, logs
    blocks = -(-n // _BLOCK)
    rest = m.shape[3:]
    padded = np.zeros((2, 2, blocks * _BLOCK, *rest))
    padded[0, 0, n:] = padded[1, 1, n:] = 1.0  # identities after the last tick
    padded[:, :, :n] = m
    # (2, 2, position in block, block, ...): each step below reads contiguous memory
    mm = np.ascontiguousarray(np.swapaxes(padded.reshape(2, 2, blocks, _BLOCK, *rest), 2, 3))
    inner = np.empty_like(mm)
    inner_logs = np.zeros(mm.shape[2:])
    inner[:, :, 0], inner_logs[0] = _rescaled(mm[:, :, 0])
    for j in range(1, _BLOCK):
        inner[:, :, j], step = _rescaled(_mul(inner[:, :, j - 1], mm[:, :, j]))
        inner_logs[j] = inner_logs[j - 1] + step
    totals_p, totals_logs = _prefix(inner[:, :, -1])
    totals_logs = totals_logs + np.cumsum(inner_logs[-1], axis=0)
    before = np.empty_like(totals_p)  # the product of all blocks before block b
    before[:, :, 0] = np.eye(2).reshape(2, 2, *([1] * len(rest)))
    before[:, :, 1:] = totals_p[:, :, :-1]
    before_logs = np.zeros_like(totals_logs)
    before_logs[1:] = totals_logs[:-1]
    out, step = _rescaled(_mul(before[:, :, None], inner))
    logs = before_logs[None] + inner_logs + step
    out = np.swapaxes(out, 2, 3).reshape(2, 2, blocks * _BLOCK, *rest)
    return out[:, :, :n], np.swapaxes(logs, 0, 1).reshape(blocks * _BLOCK, *rest)[:n]


def _suffix(m: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Suffix products ``m[:, :, t] @ ... @ m[:, :, -1]`` (rescaled, as :func:`_prefix`):
    transposed, they are the prefix products of the transposed matrices in reverse order."""
    p, logs = _prefix(m[:, :, ::-1].transpose(1, 0, *range(2, m.ndim)))
    return p[:, :, ::-1].transpose(1, 0, *range(2, m.ndim)), logs[::-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Posterior:
    gamma: FloatArray  # (2, T, R): P(state at t | all data)
    xi: FloatArray  # (2, 2, R): expected transitions i -> j, summed over ticks
    filtered: FloatArray  # (2, T, R): P(state at t | data up to t)
    log_likelihood: FloatArray  # (R,)


def _posterior(
    y: FloatArray,
    x_h: FloatArray,
    lam: FloatArray,
    trans: FloatArray,
    p0: FloatArray,
    const: float,
    *,
    backward: bool = True,
) -> _Posterior:
    """E-step of a two-state Poisson HMM for R parameter sets at once.

    ``y``/``x_h``: revocations and node-hours per tick (T,); ``lam`` (2, R) hazards per
    node-hour; ``trans`` (2, 2, R) per-tick transition probabilities; ``p0`` (2, R) the
    state probabilities at tick 0. The forward and backward variables are products of the
    matrices ``trans[i, j] * emission_t[j]`` (:func:`_prefix`, :func:`_suffix`).
    """
    lam = np.maximum(lam, 1e-300)
    log_e = y[None, :, None] * np.log(lam)[:, None, :] - lam[:, None, :] * x_h[None, :, None]
    emax = np.maximum(log_e[0], log_e[1])  # (T, R); emissions are scaled by it
    e = np.exp(log_e - emax[None])  # (2, T, R)
    alpha0 = p0 * e[:, 0]
    total0 = alpha0[0] + alpha0[1]
    filtered = np.empty_like(e)
    filtered[:, 0] = alpha0 / total0
    loglik = np.log(total0) + emax.sum(axis=0) + const
    xi = np.zeros((2, 2, p0.shape[1]))
    if y.size == 1:
        return _Posterior(gamma=filtered, xi=xi, filtered=filtered, log_likelihood=loglik)
    m = trans[:, :, None, :] * e[None, :, 1:, :]  # (2, 2, T-1, R): trans[i, j] e_t[j]
    fwd, fwd_logs = _prefix(m)
    f0 = filtered[:, 0]
    alpha = f0[0][None, None] * fwd[0] + f0[1][None, None] * fwd[1]  # (2, T-1, R)
    sums = alpha[0] + alpha[1]
    filtered[:, 1:] = alpha / sums[None]
    loglik = loglik + np.log(sums[-1]) + fwd_logs[-1]
    if not backward:
        return _Posterior(gamma=filtered, xi=xi, filtered=filtered, log_likelihood=loglik)
    bwd, _ = _suffix(m)
    beta = np.ones_like(e)
    beta[:, :-1] = bwd[:, 0] + bwd[:, 1]  # (suffix product) @ 1
    beta /= (beta[0] + beta[1])[None]
    g = filtered * beta
    gamma = g / (g[0] + g[1])[None]
    # xi_t(i, j) ~ filtered_{t-1}(i) trans(i, j) e_t(j) beta_t(j), normalised per tick
    x = filtered[:, None, :-1] * m * beta[None, :, 1:]
    x /= (x[0, 0] + x[0, 1] + x[1, 0] + x[1, 1])[None, None]
    return _Posterior(gamma=gamma, xi=x.sum(axis=2), filtered=filtered, log_likelihood=loglik)


@dataclass(frozen=True, slots=True, kw_only=True)
class MMPPFit:
    """A fitted :class:`MarkovModulatedLifetime` and how the fit went."""

    lifetime: MarkovModulatedLifetime
    log_likelihood: float
    constant_log_likelihood: float
    #: True when the fit fell back to a constant hazard (see ``lifetime.source`` for why).
    constant: bool
    iterations: int
    converged: bool
    ticks: int
    events: int
    exposure_node_h: float
    gap_s: float

    def to_dict(self) -> dict[str, Any]:
        life = self.lifetime
        return {
            "hazard_calm_per_hour": life.hazard_calm_per_hour,
            "hazard_storm_per_hour": life.hazard_storm_per_hour,
            "calm_mean_h": life.calm_mean_h,
            "storm_mean_h": life.storm_mean_h,
            "cap_s": life.cap_s,
            "source": life.source,
            "log_likelihood": self.log_likelihood,
            "constant_log_likelihood": self.constant_log_likelihood,
            "constant": self.constant,
            "iterations": self.iterations,
            "converged": self.converged,
            "ticks": self.ticks,
            "events": self.events,
            "exposure_node_h": self.exposure_node_h,
            "gap_s": self.gap_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MMPPFit:
        lifetime = MarkovModulatedLifetime(
            hazard_calm_per_hour=float(data["hazard_calm_per_hour"]),
            hazard_storm_per_hour=float(data["hazard_storm_per_hour"]),
            calm_mean_h=float(data["calm_mean_h"]),
            storm_mean_h=float(data["storm_mean_h"]),
            cap_s=None if data["cap_s"] is None else float(data["cap_s"]),
            source=str(data["source"]),
        )
        return cls(
            lifetime=lifetime,
            log_likelihood=float(data["log_likelihood"]),
            constant_log_likelihood=float(data["constant_log_likelihood"]),
            constant=bool(data["constant"]),
            iterations=int(data["iterations"]),
            converged=bool(data["converged"]),
            ticks=int(data["ticks"]),
            events=int(data["events"]),
            exposure_node_h=float(data["exposure_node_h"]),
            gap_s=float(data["gap_s"]),
        )


def _events_inputs(
    revocations: npt.ArrayLike, exposure_node_h: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    y = np.asarray(revocations, dtype=np.float64).reshape(-1)
    x = np.asarray(exposure_node_h, dtype=np.float64).reshape(-1)
    if y.shape != x.shape or y.size == 0:
        raise InvalidSpecError(
            "revocations", "needs one count and one exposure per tick, at least one tick"
        )
    if not (np.all(np.isfinite(y)) and np.all(y >= 0) and np.all(y == np.round(y))):
        raise InvalidSpecError("revocations", "must be whole numbers >= 0 per tick")
    if not (np.all(np.isfinite(x)) and np.all(x >= 0)):
        raise InvalidSpecError("exposure_node_h", "must be node-hours >= 0 per tick")
    bad = np.flatnonzero((y > 0) & (x == 0))
    if bad.size:
        raise InvalidSpecError(
            f"revocations[{int(bad[0])}]",
            "a tick with revocations needs nodes at risk (exposure > 0)",
        )
    return y, x


def _constant_fit(
    hazard_per_hour: float,
    why: str,
    *,
    loglik: float,
    ticks: int,
    events: int,
    exposure_h: float,
    gap_s: float,
    cap_s: float | None,
    iterations: int = 0,
) -> MMPPFit:
    span_h = max(ticks * gap_s / _H, 1e-9)
    lifetime = MarkovModulatedLifetime(
        hazard_calm_per_hour=hazard_per_hour,
        hazard_storm_per_hour=hazard_per_hour,
        calm_mean_h=span_h,
        storm_mean_h=span_h,
        cap_s=cap_s,
        source=f"constant hazard {hazard_per_hour:.3g}/h fitted on {ticks} ticks of "
        f"{gap_s:g} s ({events} revocations in {format_amount(exposure_h)} node-h): {why}",
    )
    return MMPPFit(
        lifetime=lifetime,
        log_likelihood=loglik,
        constant_log_likelihood=loglik,
        constant=True,
        iterations=iterations,
        converged=True,
        ticks=ticks,
        events=events,
        exposure_node_h=exposure_h,
        gap_s=gap_s,
    )


def fit_mmpp_events(
    revocations: npt.ArrayLike,
    exposure_node_h: npt.ArrayLike,
    gap_s: float,
    *,
    restarts: int = 6,
    max_iter: int = 400,
    tol: float = 1e-6,
    seed: int = 0,
    cap_s: float | None = None,
) -> MMPPFit:
    """Fit a two-state Poisson HMM: revocations at tick t ~ Poisson(hazard[state_t] x
    exposure_t), the state a Markov chain per tick of ``gap_s`` seconds.

    Baum–Welch (EM) from ``restarts`` seeded starts run side by side (after a few
    iterations only the best two go on); the best likelihood wins. In the per-tick model a
    state holds for whole ticks, so a spell that lasts ``1 / p`` ticks on average (``p`` its
    per-tick leaving probability) is read back as a continuous-time spell of mean
    ``gap_s / p``: that keeps the storm frequency, the share of time in storm and the
    revocations per storm of the fit, also when a storm lasts a single tick (mass revocations
    within one tick of the trace, which no continuous chain sampled at the ticks can give).
    Falls back to a constant hazard (said in ``source``) when there is no revocation
    (Jeffreys: 0.5 / exposure) or when BIC prefers one state.
    """
    from scipy import special

    y, x = _events_inputs(revocations, exposure_node_h)
    gap = check_gap_s(gap_s)
    _check_cap(cap_s)
    if restarts < 1 or max_iter < 1 or not tol > 0:
        raise InvalidSpecError("fit_mmpp", "needs restarts >= 1, max_iter >= 1 and tol > 0")
    ticks, events, exposure_h = y.size, int(y.sum()), float(x.sum())
    if exposure_h <= 0:
        raise InvalidSpecError(
            "counts",
            "no node was running in the trace (no exposure)",
            fix="pass a trace with at least one running node",
        )
    at_risk = x > 0
    const = float(np.sum(y[at_risk] * np.log(x[at_risk]) - special.gammaln(y[at_risk] + 1)))

    def constant(rate: float, why: str, loglik: float, iterations: int = 0) -> MMPPFit:
        return _constant_fit(
            rate,
            why,
            loglik=loglik,
            ticks=ticks,
            events=events,
            exposure_h=exposure_h,
            gap_s=gap,
            cap_s=cap_s,
            iterations=iterations,
        )

    if events == 0:
        rate = 0.5 / exposure_h
        return constant(
            rate, "no revocations, so Jeffreys' 0.5 / exposure", -rate * exposure_h + const
        )
    mean_rate = events / exposure_h
    loglik1 = float(events * math.log(mean_rate) - mean_rate * exposure_h) + const

    rng = np.random.default_rng(seed)
    lam = np.stack(
        [
            mean_rate * np.exp(rng.uniform(-3.0, -0.3, restarts)),
            mean_rate * np.exp(rng.uniform(0.5, 3.0, restarts)),
        ]
    )  # (2, R)
    p01 = rng.uniform(0.002, 0.1, restarts)
    p10 = rng.uniform(0.02, 0.5, restarts)
    trans = np.array([[1 - p01, p01], [p10, 1 - p10]])  # (2, 2, R)
    p0 = np.full((2, restarts), 0.5)
    last = np.full(restarts, -np.inf)
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):
        post = _posterior(y, x, lam, trans, p0, const)
        ll = post.log_likelihood
        if np.all(np.abs(ll - last) <= tol * np.maximum(1.0, np.abs(ll))):
            converged = True
            break
        if iterations == _PRUNE_AFTER and ll.size > _KEEP:
            # the starts that are behind by now rarely catch up: keep the leaders only
            keep = np.argsort(np.where(np.isfinite(ll), ll, -np.inf))[-_KEEP:]
            lam, trans, p0, ll = lam[:, keep], trans[:, :, keep], p0[:, keep], ll[keep]
            post = _Posterior(
                gamma=post.gamma[:, :, keep],
                xi=post.xi[:, :, keep],
                filtered=post.filtered[:, :, keep],
                log_likelihood=ll,
            )
        last = ll
        weight_y = (post.gamma * y[None, :, None]).sum(axis=1)
        weight_x = (post.gamma * x[None, :, None]).sum(axis=1)
        lam = np.where(weight_x > 0, weight_y / np.where(weight_x > 0, weight_x, 1.0), lam)
        lam = np.maximum(lam, mean_rate * 1e-9)
        trans = post.xi / post.xi.sum(axis=1, keepdims=True)
        trans = np.clip(trans, 1e-12, 1 - 1e-12)
        trans /= trans.sum(axis=1, keepdims=True)
        p0 = post.gamma[:, 0]
    else:  # the likelihood of the parameters the last M-step gave
        ll = _posterior(y, x, lam, trans, p0, const).log_likelihood
    if not np.any(np.isfinite(ll)):
        return constant(mean_rate, "the two-state fit failed (no finite likelihood)", loglik1)
    best = int(np.nanargmax(np.where(np.isfinite(ll), ll, np.nan)))
    loglik2 = float(ll[best])
    lam_b, trans_b = lam[:, best], trans[:, :, best]
    calm, storm = (0, 1) if lam_b[0] <= lam_b[1] else (1, 0)
    h_calm, h_storm = float(lam_b[calm]), float(lam_b[storm])
    p_cs, p_sc = float(trans_b[calm, storm]), float(trans_b[storm, calm])
    n_obs = int(at_risk.sum())
    bic_gain = 2 * (loglik2 - loglik1) - 3 * math.log(max(n_obs, 2))
    if bic_gain <= 0 or h_storm <= h_calm * (1 + 1e-6):
        why = (
            f"one state explains the trace as well (BIC; log-lik {loglik2:.1f} with two states "
            f"vs {loglik1:.1f})"
        )
        return constant(mean_rate, why, loglik1, iterations)
    calm_mean_h = gap / p_cs / _H
    storm_mean_h = gap / p_sc / _H
    lifetime = MarkovModulatedLifetime(
        hazard_calm_per_hour=h_calm,
        hazard_storm_per_hour=h_storm,
        calm_mean_h=calm_mean_h,
        storm_mean_h=storm_mean_h,
        cap_s=cap_s,
        source=(
            f"MMPP fitted on {ticks} ticks of {gap:g} s ({events} revocations in "
            f"{format_amount(exposure_h)} node-h): calm {h_calm:.3g}/h for {calm_mean_h:.3g} h, "
            f"storm {h_storm:.3g}/h for {storm_mean_h:.3g} h "
            f"(log-lik {loglik2:.1f} vs {loglik1:.1f} constant)"
            + ("" if converged else f"; EM stopped after {iterations} iterations")
        ),
    )
    return MMPPFit(
        lifetime=lifetime,
        log_likelihood=loglik2,
        constant_log_likelihood=loglik1,
        constant=False,
        iterations=iterations,
        converged=converged,
        ticks=ticks,
        events=events,
        exposure_node_h=exposure_h,
        gap_s=gap,
    )


def fit_mmpp(
    counts: npt.ArrayLike,
    gap_s: float,
    *,
    restarts: int = 6,
    max_iter: int = 400,
    tol: float = 1e-6,
    seed: int = 0,
    cap_s: float | None = None,
) -> MMPPFit:
    """Fit a :class:`MarkovModulatedLifetime` on a node-count trace (running nodes per tick
    of ``gap_s`` seconds): a drop of k is k revocations, ``counts[t - 1] * gap_s`` the
    exposure (see :class:`~gpucast.domain.preemption.NodeCountTrace`); then
    :func:`fit_mmpp_events`."""
    revocations, exposure_s = revocations_and_exposure(counts, gap_s)
    return fit_mmpp_events(
        revocations,
        exposure_s / _H,
        gap_s,
        restarts=restarts,
        max_iter=max_iter,
        tol=tol,
        seed=seed,
        cap_s=cap_s,
    )


def storm_probability(
    lifetime: MarkovModulatedLifetime, counts: npt.ArrayLike, gap_s: float
) -> FloatArray:
    """Per tick of a node-count trace: P(storm | the trace up to that tick), under
    ``lifetime`` (the forward filter of the per-tick hidden Markov model :func:`fit_mmpp_events`
    fits: a spell of mean ``m`` is left with probability ``min(gap_s / m, 1)`` per tick)."""
    revocations, exposure_s = revocations_and_exposure(counts, gap_s)
    gap = check_gap_s(gap_s)
    p_cs = min(gap / (lifetime.calm_mean_h * _H), 1.0)
    p_sc = min(gap / (lifetime.storm_mean_h * _H), 1.0)
    trans = np.array([[1 - p_cs, p_cs], [p_sc, 1 - p_sc]])[:, :, None]
    lam = np.array([[lifetime.hazard_calm_per_hour], [lifetime.hazard_storm_per_hour]])
    p = p_cs / (p_cs + p_sc)
    post = _posterior(
        revocations.astype(np.float64),
        exposure_s / _H,
        lam,
        trans,
        np.array([[1 - p], [p]]),
        0.0,
        backward=False,
    )
    return np.asarray(post.filtered[1, :, 0], dtype=np.float64)


@register
class MMPPModel(Estimator):
    """A :class:`MarkovModulatedLifetime` fitted on a node-count trace (:func:`fit_mmpp`)."""

    kind = "mmpp"
    schema_version = 1

    def __init__(
        self,
        *,
        restarts: int = 6,
        max_iter: int = 400,
        tol: float = 1e-6,
        seed: int = 0,
        cap_s: float | None = None,
    ) -> None:
        if restarts < 1 or max_iter < 1 or not tol > 0:
            raise InvalidSpecError("mmpp", "needs restarts >= 1, max_iter >= 1 and tol > 0")
        _check_cap(cap_s)
        self.restarts = restarts
        self.max_iter = max_iter
        self.tol = tol
        self.seed = seed
        self.cap_s = cap_s
        self._fit: MMPPFit | None = None

    @property
    def is_fitted(self) -> bool:
        return self._fit is not None

    def _options(self) -> dict[str, Any]:
        return {
            "restarts": self.restarts,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "seed": self.seed,
            "cap_s": self.cap_s,
        }

    def fit(self, counts: npt.ArrayLike, gap_s: float) -> Self:
        """Fit on running nodes per tick of ``gap_s`` seconds."""
        self._fit = fit_mmpp(counts, gap_s, **self._options())
        return self

    def fit_events(
        self, revocations: npt.ArrayLike, exposure_node_h: npt.ArrayLike, gap_s: float
    ) -> Self:
        """Fit on revocations and node-hours at risk per tick."""
        self._fit = fit_mmpp_events(revocations, exposure_node_h, gap_s, **self._options())
        return self

    @property
    def result(self) -> MMPPFit:
        self._require_fitted()
        assert self._fit is not None
        return self._fit

    def distribution(self) -> MarkovModulatedLifetime:
        return self.result.lifetime

    @property
    def source(self) -> str:
        return self.result.lifetime.source

    @property
    def log_likelihood(self) -> float:
        return self.result.log_likelihood

    def storm_probability(self, counts: npt.ArrayLike, gap_s: float) -> FloatArray:
        """P(storm | the trace so far) per tick of ``counts`` under the fitted model."""
        return storm_probability(self.distribution(), counts, gap_s)

    def _state(self) -> dict[str, Any]:
        return {"options": self._options(), "fit": self.result.to_dict()}

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(**dict(state["options"]))
            model._fit = MMPPFit.from_dict(dict(state["fit"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataFormatError("mmpp model", f"bad state: {exc}", fix="refit it") from None
        return model


# -- capacity gaps --------------------------------------------------------------------------


def _kaplan_meier(times: FloatArray, observed: BoolArray) -> tuple[FloatArray, FloatArray]:
    """(event times, survival just after each), ties of events and censorings: censored at
    ``t`` are still at risk at ``t``."""
    event_times = np.unique(times[observed])
    if event_times.size == 0:
        return event_times, event_times.copy()
    sorted_times = np.sort(times)
    at_risk = sorted_times.size - np.searchsorted(sorted_times, event_times, side="left")
    died = np.sort(times[observed])
    deaths = np.searchsorted(died, event_times, side="right") - np.searchsorted(
        died, event_times, side="left"
    )
    surv = np.cumprod(1.0 - deaths / at_risk)
    return event_times, np.minimum.accumulate(surv)


@register
class CapacityGaps(Estimator):
    """How long a market stays short of capacity after a revocation, from a trace's gaps.

    Kaplan–Meier on the gaps (a gap still open when the trace ended is right-censored at its
    length so far). Beyond the last observed recovery — where censored gaps leave survival
    mass that the data cannot place — the survival continues as an exponential whose rate is
    Jeffreys' 0.5 / (the gap-seconds observed beyond that point) (else 0.5 / all gap-seconds):
    long and uncertain, as the data are.
    """

    kind = "capacity-gaps"
    schema_version = 1

    def __init__(self) -> None:
        self._fitted_state: dict[str, Any] | None = None

    @property
    def is_fitted(self) -> bool:
        return self._fitted_state is not None

    def fit(self, gaps_s: npt.ArrayLike, observed: npt.ArrayLike | None = None) -> Self:
        """``gaps_s``: one gap per drop; ``observed``: False where the gap was still open at
        the end of the trace (default: all observed)."""
        gaps = np.asarray(gaps_s, dtype=np.float64).reshape(-1)
        seen = (
            np.ones(gaps.size, dtype=bool)
            if observed is None
            else np.asarray(observed, dtype=bool).reshape(-1)
        )
        if gaps.size == 0:
            raise InvalidSpecError(
                "capacity gaps",
                "needs at least one gap (the trace has no drop in its node count)",
                fix="use a trace with revocations, or give the gap as a number of seconds",
            )
        if seen.shape != gaps.shape:
            raise InvalidSpecError("observed", "needs one flag per gap")
        if not (np.all(np.isfinite(gaps)) and gaps.min() >= 0):
            raise InvalidSpecError("gaps_s", "must be finite seconds >= 0")
        times, surv = _kaplan_meier(gaps, seen)
        tail_start = float(times[-1]) if times.size else 0.0
        tail_mass = float(surv[-1]) if surv.size else 1.0
        beyond = float(np.maximum(gaps - tail_start, 0.0).sum())
        total = float(gaps.sum())
        exposure = beyond if beyond > 0 else total
        tail_mean_s = exposure / 0.5 if exposure > 0 else math.inf
        self._fitted_state = {
            "km_times_s": [float(t) for t in times],
            "km_survival": [float(s) for s in surv],
            "tail_start_s": tail_start,
            "tail_mass": tail_mass,
            "tail_mean_s": tail_mean_s if math.isfinite(tail_mean_s) else None,
            "n": int(gaps.size),
            "recovered": int(seen.sum()),
            "median_observed_s": float(np.median(gaps)),
        }
        return self

    def _fitted(self) -> dict[str, Any]:
        self._require_fitted()
        assert self._fitted_state is not None
        return self._fitted_state

    def _km(self) -> EmpiricalLifetime:
        st = self._fitted()
        return EmpiricalLifetime(
            times_s=tuple(st["km_times_s"]), survival_after=tuple(st["km_survival"]), cap_s=None
        )

    @property
    def source(self) -> str:
        st = self._fitted()
        censored = st["n"] - st["recovered"]
        tail = (
            "all recovered"
            if st["tail_mass"] <= 0
            else f"beyond {st['tail_start_s'] / 60:.0f} min: exponential tail, mean "
            f"{(st['tail_mean_s'] or math.inf) / 60:.0f} min (Jeffreys)"
        )
        return (
            f"capacity gaps: Kaplan–Meier on {st['n']} gaps ({st['recovered']} recovered, "
            f"{censored} still open at the trace's end); {tail}"
        )

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """``n`` gaps in seconds: inverse Kaplan–Meier, then the exponential tail."""
        st = self._fitted()
        n = _check_rng_args(n)
        out = self._km().sample(rng, n)
        e = rng.standard_exponential(n)
        mean = st["tail_mean_s"]
        tail = st["tail_start_s"] + (e * mean if mean is not None else np.inf)
        return np.asarray(np.where(np.isinf(out), tail, out), dtype=np.float64)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        """P(the gap lasts longer than ``t_s``)."""
        st = self._fitted()
        t = np.asarray(t_s, dtype=np.float64)
        s = self._km().survival(t)
        mean = st["tail_mean_s"]
        beyond = t > st["tail_start_s"]
        if mean is not None:
            decay = np.exp(-np.maximum(t - st["tail_start_s"], 0.0) / mean)
            s = np.where(beyond, st["tail_mass"] * decay, s)
        return np.asarray(s, dtype=np.float64)

    def median_s(self) -> float:
        st = self._fitted()
        times = np.asarray(st["km_times_s"], dtype=np.float64)
        surv = np.asarray(st["km_survival"], dtype=np.float64)
        below = np.flatnonzero(surv <= 0.5)
        if below.size:
            return float(times[below[0]])
        mean = st["tail_mean_s"]
        if mean is None:
            return math.inf
        return float(st["tail_start_s"] + mean * math.log(st["tail_mass"] / 0.5))

    def _state(self) -> dict[str, Any]:
        return dict(self._fitted())

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        keys = (
            "km_times_s",
            "km_survival",
            "tail_start_s",
            "tail_mass",
            "tail_mean_s",
            "n",
            "recovered",
            "median_observed_s",
        )
        missing = [k for k in keys if k not in state]
        if missing:
            raise DataFormatError(
                "capacity-gaps model", f"bad state: missing {', '.join(missing)}", fix="refit it"
            )
        model = cls()
        model._fitted_state = {k: state[k] for k in keys}
        try:
            model._km()
        except (InvalidSpecError, TypeError, ValueError) as exc:
            raise DataFormatError(
                "capacity-gaps model", f"bad state: {exc}", fix="refit it"
            ) from None
        return model


# -- piecewise-constant hazards -------------------------------------------------------------

#: What a piecewise hazard's hours count from: the node's age, or the run's clock (a hazard
#: shared by every node of the run, e.g. a known busy period).
CLOCKS = ("age", "run")


@dataclass(frozen=True, slots=True, kw_only=True)
class PiecewiseHazardLifetime:
    """Hazard ``hazard_per_hour[i]`` from hour ``start_h[i]`` on (the last one for ever).

    ``clock="age"``: hours since the node started (e.g. a higher hazard in a VM's first hour);
    the nodes are independent. ``clock="run"``: hours since the run started, shared by all of
    its nodes; ``sample``/``survival`` then describe a node started at the run's start.
    Sampling inverts the cumulative hazard with one Exp(1) draw per node.
    """

    start_h: tuple[float, ...]
    hazard_per_hour: tuple[float, ...]
    clock: str = "age"
    cap_s: float | None = None
    source: str = "piecewise hazard"

    def __post_init__(self) -> None:
        HazardSpec(start_h=self.start_h, hazard_per_hour=self.hazard_per_hour)  # validates
        if self.clock not in CLOCKS:
            raise InvalidSpecError("clock", f"must be one of {', '.join(CLOCKS)}", got=self.clock)
        _check_cap(self.cap_s)

    @classmethod
    def from_spec(
        cls, spec: HazardSpec, *, clock: str = "age", cap_s: float | None = None
    ) -> PiecewiseHazardLifetime:
        return cls(
            start_h=tuple(spec.start_h),
            hazard_per_hour=tuple(spec.hazard_per_hour),
            clock=clock,
            cap_s=cap_s,
            source=spec.source if clock == "age" else f"{spec.source} (on the run's clock)",
        )

    def _table(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        edges = np.asarray(self.start_h, dtype=np.float64) * _H
        rate = np.asarray(self.hazard_per_hour, dtype=np.float64) / _H
        cum = np.concatenate([[0.0], np.cumsum(rate[:-1] * np.diff(edges))])
        return edges, rate, cum

    def cumulative_hazard(self, t_s: npt.ArrayLike) -> FloatArray:
        """H(t): expected revocations of one node by ``t_s`` (on the distribution's clock)."""
        t = np.maximum(np.asarray(t_s, dtype=np.float64), 0.0)
        edges, rate, cum = self._table()
        i = np.searchsorted(edges, t, side="right") - 1
        with np.errstate(invalid="ignore"):
            h = cum[i] + np.where(rate[i] > 0, rate[i] * (t - edges[i]), 0.0)
        return np.asarray(h, dtype=np.float64)

    def _inverse(self, target: FloatArray) -> FloatArray:
        """The time at which H reaches ``target`` (inf when it never does)."""
        edges, rate, cum = self._table()
        # the last segment whose start the target has reached: with ties (zero-rate segments
        # leave the cumulative hazard flat) the last of them, so only the final segment can
        # have a zero rate here (the target is then never reached)
        i = np.searchsorted(cum, target, side="right") - 1
        r = rate[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(r > 0, edges[i] + (target - cum[i]) / np.where(r > 0, r, 1.0), np.inf)
        return np.asarray(t, dtype=np.float64)

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        n = _check_rng_args(n)
        return _cap(self._inverse(rng.standard_exponential(n)), self.cap_s)

    def survival(self, t_s: npt.ArrayLike) -> FloatArray:
        t = np.asarray(t_s, dtype=np.float64)
        s = np.exp(-self.cumulative_hazard(t))
        if self.cap_s is not None:
            s = np.where(t >= self.cap_s, 0.0, s)
        return np.asarray(s, dtype=np.float64)

    def environment(self, rng: np.random.Generator, runs: int, horizon_s: float) -> None:
        """Nothing to draw: the hazard's path is the same in every run."""
        _check_rng_args(runs, "runs")
        return None

    def sample_at(
        self,
        rng: np.random.Generator,
        start_s: FloatArray,
        run: npt.NDArray[np.int64],
        env: Any,
    ) -> FloatArray:
        """Lifetimes of nodes requested at ``start_s`` (on the run's clock)."""
        start = np.asarray(start_s, dtype=np.float64).reshape(-1)
        e = rng.standard_exponential(start.size)
        if self.clock == "age":
            return _cap(self._inverse(e), self.cap_s)
        death = self._inverse(self.cumulative_hazard(start) + e)
        return _cap(np.maximum(death - start, 0.0), self.cap_s)


@register
class PiecewiseHazardModel(Estimator):
    """A piecewise-constant hazard on node age, fitted on censored lifetimes: in each age bin
    ``[breaks_h[i], breaks_h[i + 1])`` the revocations there over the node-hours spent there
    (the maximum-likelihood piecewise-exponential model). A bin no node reached keeps the
    previous bin's hazard; without any revocation the hazard is Jeffreys' 0.5 / exposure."""

    kind = "piecewise-hazard"
    schema_version = 1

    def __init__(
        self,
        *,
        breaks_h: tuple[float, ...] = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0),
        cap_s: float | None = None,
    ) -> None:
        HazardSpec(start_h=tuple(breaks_h), hazard_per_hour=tuple(0.0 for _ in breaks_h))
        _check_cap(cap_s)
        self.breaks_h = tuple(float(b) for b in breaks_h)
        self.cap_s = cap_s
        self._hazard: tuple[float, ...] | None = None
        self._source = ""

    @property
    def is_fitted(self) -> bool:
        return self._hazard is not None

    def fit(self, duration_s: npt.ArrayLike, observed: npt.ArrayLike | None = None) -> Self:
        """``duration_s`` per node; ``observed`` False where the node was not revoked
        (right-censored; default all revoked)."""
        d = np.asarray(duration_s, dtype=np.float64).reshape(-1)
        seen = (
            np.ones(d.size, dtype=bool)
            if observed is None
            else np.asarray(observed, dtype=bool).reshape(-1)
        )
        if d.size == 0 or seen.shape != d.shape:
            raise InvalidSpecError("lifetimes", "need one duration and one flag per node, >= 1")
        if not (np.all(np.isfinite(d)) and d.min() >= 0):
            raise InvalidSpecError("duration_s", "must be finite seconds >= 0")
        edges = np.asarray(self.breaks_h) * _H
        upper = np.append(edges[1:], np.inf)
        exposure_h = np.clip(d[:, None] - edges[None, :], 0.0, (upper - edges)[None, :]).sum(0) / _H
        bins = np.searchsorted(edges, d, side="right") - 1
        events = np.bincount(bins[seen], minlength=edges.size).astype(np.float64)
        total_h, total_events = float(exposure_h.sum()), int(events.sum())
        if total_h <= 0:
            raise InvalidSpecError("duration_s", "the nodes spent no time alive (all 0 s)")
        if total_events == 0:
            rate = 0.5 / total_h
            hazard = [rate] * edges.size
            why = f"no revocations: Jeffreys' 0.5 / {total_h:.0f} node-h in every bin"
        else:
            hazard = []
            for i in range(edges.size):
                if exposure_h[i] > 0:
                    hazard.append(float(events[i] / exposure_h[i]))
                else:
                    hazard.append(hazard[-1] if hazard else total_events / total_h)
            why = f"{total_events} revocations in {total_h:.0f} node-h"
        self._hazard = tuple(float(h) for h in hazard)
        self._source = f"piecewise hazard fitted on {d.size} lifetimes ({why})"
        return self

    def spec(self) -> HazardSpec:
        self._require_fitted()
        assert self._hazard is not None
        return HazardSpec(start_h=self.breaks_h, hazard_per_hour=self._hazard, source=self._source)

    def distribution(self) -> PiecewiseHazardLifetime:
        return PiecewiseHazardLifetime.from_spec(self.spec(), clock="age", cap_s=self.cap_s)

    def _state(self) -> dict[str, Any]:
        spec = self.spec()
        return {
            "breaks_h": list(self.breaks_h),
            "cap_s": self.cap_s,
            "hazard_per_hour": list(spec.hazard_per_hour),
            "source": self._source,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            model = cls(breaks_h=tuple(state["breaks_h"]), cap_s=state["cap_s"])
            hazard = tuple(float(h) for h in state["hazard_per_hour"])
            HazardSpec(start_h=model.breaks_h, hazard_per_hour=hazard)
            source = str(state["source"])
        except (KeyError, TypeError, ValueError, InvalidSpecError) as exc:
            raise DataFormatError(
                "piecewise-hazard model", f"bad state: {exc}", fix="refit it"
            ) from None
        model._hazard = hazard
        model._source = source
        return model


# -- instance lifetimes ---------------------------------------------------------------------


def fit_lifetimes(
    records: Iterable[InstanceLifetime],
    *,
    method: str = "weibull",
    min_events: int = 3,
    cap_s: float | None = None,
) -> RevocationModel:
    """A :class:`~gpucast.predict.revocation.RevocationModel` (Weibull and Kaplan–Meier per GPU
    and region, censoring respected) fitted on instance-lifetime records; a record without a
    GPU or region counts as ``unknown``. ``cap_s``: a forced end of every lifetime, if the
    provider has one (GCE preemptible: 86400); default none."""
    frame = instance_lifetimes_frame(records)
    if frame.empty:
        raise InvalidSpecError(
            "lifetimes", "need at least one record", fix="pass the rows of a lifetimes CSV"
        )
    return RevocationModel(method=method, min_events=min_events, cap_s=cap_s).fit(frame)
