"""The two-state (calm/storm) Markov-modulated hazard of :mod:`gpucast.predict.bursty`:
:class:`MarkovModulatedLifetime` (its exact stationary marginal, its shared state paths,
:class:`MMPPPath`, and draws conditioned on them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict._bursty_checks import (
    _H,
    BoolArray,
    FloatArray,
    IntArray,
    _cap,
    _check_cap,
    _check_rng_args,
)

#: Continuations beyond an environment's path stop after this many sojourns (then the mean
#: hazard finishes the draw); reached only with hazards that almost never fire.
_MAX_CONTINUATION_SOJOURNS = 10_000


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
