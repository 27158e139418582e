"""Embedding-cache hit rate as a function of cache size, from a reuse histogram.

Input: what ``dlrm_datasets`` publishes per window of embedding lookups (one training batch):
the lookups ``L``, the distinct rows ``N`` they touch, and per reuse bucket ``(lo, hi]`` the
share of the distinct rows looked up that many times and the share of the lookups they take.
:class:`EmbeddingLocalityModel` fits the distribution of the per-row lookup count ``k``:

* within each bucket a power law ``P(k) ~ k^-a`` over the bucket's integers, ``a`` solved so
  the bucket's mean count is ``lookups_share / rows_share x L / N`` (what the two shares
  imply);
* a bucket whose row share is too small to carry that ratio (rounded to 3 decimals, share
  < :data:`RELIABLE_ROWS_SHARE`) gets ``a = 2`` (a constant lookup share per doubling of
  ``k``, what the published tails show) and its rows from its lookups; the open last bucket
  ``(lo+`` runs up to ``lo x 2^(its lookups share / the previous bucket's)``, continuing the
  lookups per doubling.

Hit rates for a cache of ``C = f N`` rows over the window, lookups in random order (the
independent-reference assumption; the first lookup of a row is always a miss):

* **LRU** -- Che's approximation on a finite window: a row with ``k`` lookups has ``k - 1``
  re-references, each a hit when the gap since its previous lookup is shorter than the
  characteristic window ``T``; gaps between ``k`` random positions in ``L`` are
  ``L Beta(1, k)``, so ``P(hit) = 1 - (1 - x)^k`` with ``x = T / L``, and ``T`` holds ``C``
  distinct rows: ``sum_k P(k) (1 - (1 - x)^k) = f``. Hit rate
  ``sum_k P(k) (k - 1) (1 - (1 - x)^k) / sum_k P(k) k``.
* **LFU** with per-row frequency counters over all rows (FBGEMM's ``CacheAlgorithm.LFU``
  keeps one per table row): at time ``tau`` through the window a row's running count is
  ``Binomial(k, tau)`` and the cache holds the ``C`` rows of highest count; a lookup hits when
  the row's earlier count (``Binomial(k - 1, tau)``) is above the cache's threshold (or at
  it, for the share of those rows the cache holds). The threshold is evaluated at the
  midpoints of :data:`LFU_TIME_STEPS` steps and the hit probability integrated exactly over
  each step (incomplete beta functions): a midpoint average of it misses most of a hot row's
  first-lookup miss, which falls in the window's first instants (``P(no earlier lookup) =
  (1 - tau)^(k - 1)``), and so read above the ceiling ``1 - N / L`` (2022 window at a 99%
  cache: 92.197% against 92.150%).

Both are validated against exact LRU/LFU replays of synthetic streams drawn to match each
published file (``benchmarks/embedding_cache.py``; :mod:`gpucast.simulate.embedding_cache`).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt
import pandas as pd

from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.predict.base import Estimator, register

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Policy = Literal["lru", "lfu"]
POLICIES: tuple[Policy, ...] = ("lru", "lfu")

#: Row shares below this (the files round to 3 decimals) do not carry a bucket's mean count.
RELIABLE_ROWS_SHARE = 0.01
#: Power-law exponent of a bucket whose mean cannot be read from the shares.
TAIL_EXPONENT = 2.0
#: Wider buckets are represented by this many log-spaced counts (narrower ones: every count).
POINTS_PER_BUCKET = 48
#: The open last bucket spans at most this many doublings.
MAX_OPEN_DOUBLINGS = 12
#: Time steps over the window at which the LFU cache's contents are evaluated.
LFU_TIME_STEPS = 64
_COLUMNS = ("reuse_min", "reuse_max", "rows_share", "lookups_share")


def _bucket_grid(lo: int, hi: int) -> tuple[FloatArray, FloatArray]:
    """Representative counts in ``(lo, hi]`` and how many integers each stands for."""
    if hi - lo <= POINTS_PER_BUCKET:
        k = np.arange(lo + 1, hi + 1, dtype=np.float64)
        return k, np.ones_like(k)
    edges = np.unique(np.round(np.geomspace(lo + 0.5, hi + 0.5, POINTS_PER_BUCKET + 1)))
    width = np.diff(edges)
    keep = width > 0
    k = np.clip(np.round(np.sqrt(edges[:-1] * edges[1:])[keep]), lo + 1, hi)
    return k, width[keep]


def _power_weights(k: FloatArray, span: FloatArray, a: float) -> FloatArray:
    logw = -a * np.log(k) + np.log(span)
    w: FloatArray = np.exp(logw - logw.max())
    return w / float(w.sum())


def _solve_exponent(k: FloatArray, span: FloatArray, mean: float) -> float:
    """The exponent whose power law over ``k`` has this mean (clipped to what it can reach)."""
    lo, hi = -20.0, 20.0
    for _ in range(80):  # bisection: the mean falls as the exponent grows
        mid = 0.5 * (lo + hi)
        if float(_power_weights(k, span, mid) @ k) > mean:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _binomial_sf_integral(
    theta: FloatArray, n: FloatArray, lo: FloatArray, hi: FloatArray
) -> FloatArray:
    """``integral of P(Binomial(n, t) > theta) dt`` from ``lo`` to ``hi`` (broadcast): that
    probability is ``I_t(theta + 1, n - theta)`` (regularised incomplete beta), whose
    antiderivative is ``t I_t(a, b) - a / (a + b) I_t(a + 1, b)``."""
    from scipy.special import betainc

    some = theta < n
    a = theta + 1.0
    b = np.where(some, n - theta, 1.0)

    def antiderivative(t: FloatArray) -> FloatArray:
        return t * betainc(a, b, t) - a / (a + b) * betainc(a + 1.0, b, t)  # type: ignore[no-any-return]

    return np.asarray(np.where(some, antiderivative(hi) - antiderivative(lo), 0.0))


def _binomial_pmf_integral(
    theta: FloatArray, n: FloatArray, lo: FloatArray, hi: FloatArray
) -> FloatArray:
    """``integral of P(Binomial(n, t) = theta) dt`` from ``lo`` to ``hi`` (broadcast):
    ``(I_hi(theta + 1, n - theta + 1) - I_lo(...)) / (n + 1)``."""
    from scipy.special import betainc

    some = theta <= n
    a = theta + 1.0
    b = np.where(some, n - theta + 1.0, 1.0)
    return np.asarray(np.where(some, (betainc(a, b, hi) - betainc(a, b, lo)) / (n + 1.0), 0.0))


@register
class EmbeddingLocalityModel(Estimator):
    """Per-row lookup-count distribution of one window; LRU/LFU hit rate vs cache size."""

    kind = "embedding_locality"
    schema_version = 1

    def __init__(self) -> None:
        self._counts: FloatArray | None = None
        self._weights: FloatArray | None = None
        self._exponents: list[float] = []
        self._bucket_lows: list[int] = []
        self._unique_rows = 0
        self._lookups = 0

    @property
    def is_fitted(self) -> bool:
        return self._counts is not None

    def fit(self, histogram: pd.DataFrame, *, lookups: int, unique_rows: int) -> Self:
        """Fit on one window's reuse buckets (columns ``reuse_min``, ``reuse_max`` (inf for
        the open last bucket), ``rows_share``, ``lookups_share``: what
        :func:`gpucast.store.datasets.dlrm_locality.read_dlrm_locality` returns per trace)."""
        missing = [c for c in _COLUMNS if c not in histogram.columns]
        if missing:
            raise InvalidInputError(
                f"locality histogram lacks column(s) {', '.join(missing)}",
                fix="pass one trace's rows of read_dlrm_locality(...).histogram",
            )
        if not (0 < unique_rows <= lookups):
            raise InvalidSpecError(
                "unique_rows", "must be > 0 and <= lookups", got=(unique_rows, lookups)
            )
        ordered = histogram.sort_values("reuse_min")
        lows = ordered["reuse_min"].to_numpy(dtype=np.float64)
        highs = ordered["reuse_max"].to_numpy(dtype=np.float64)
        rows = ordered["rows_share"].to_numpy(dtype=np.float64)
        looks = ordered["lookups_share"].to_numpy(dtype=np.float64)
        shares = np.concatenate([rows, looks])
        if len(lows) == 0 or not np.all(np.isfinite(shares)) or np.any(shares < 0):
            raise InvalidInputError(
                "locality histogram: shares must be finite and >= 0 with at least one bucket",
                fix="pass one trace's rows of read_dlrm_locality(...).histogram",
            )
        if looks.sum() <= 0:
            raise InvalidInputError("locality histogram: lookups shares sum to 0", fix="check it")
        if np.any(np.diff(lows) <= 0) or np.any(~np.isfinite(highs[:-1])):
            raise InvalidInputError(
                "locality histogram: buckets must be contiguous, ascending, only the last open",
                fix="pass one trace's rows of read_dlrm_locality(...).histogram",
            )
        mean_reuse = lookups / unique_rows
        looks = looks / looks.sum()
        counts: list[FloatArray] = []
        weights: list[FloatArray] = []
        exponents: list[float] = []
        for i, (lo_f, hi_f) in enumerate(zip(lows, highs, strict=True)):
            lo = int(lo_f)
            if looks[i] <= 0:
                exponents.append(math.nan)
                continue
            if math.isinf(hi_f):
                prev = looks[i - 1] if i > 0 and looks[i - 1] > 0 else looks[i]
                doublings = min(max(looks[i] / prev, 1.0), MAX_OPEN_DOUBLINGS)
                hi = round(max(lo, 1) * 2.0**doublings)
            else:
                hi = int(hi_f)
            k, span = _bucket_grid(lo, hi)
            if rows[i] >= RELIABLE_ROWS_SHARE:
                target = float(np.clip(looks[i] / rows[i] * mean_reuse, k[0], k[-1]))
                a = _solve_exponent(k, span, target)
                row_share = rows[i]
            else:
                a = TAIL_EXPONENT
                w = _power_weights(k, span, a)
                row_share = looks[i] * mean_reuse / float(w @ k)
            counts.append(k)
            weights.append(_power_weights(k, span, a) * row_share)
            exponents.append(a)
        all_w = np.concatenate(weights)
        self._counts = np.concatenate(counts)
        self._weights = all_w / all_w.sum()
        self._exponents = exponents
        self._bucket_lows = [int(v) for v in lows]
        self._unique_rows = int(unique_rows)
        self._lookups = int(lookups)
        return self

    # ------------------------------------------------------------------ fitted quantities
    def _fitted(self) -> tuple[FloatArray, FloatArray]:
        self._require_fitted()
        assert self._counts is not None and self._weights is not None
        return self._counts, self._weights

    @property
    def unique_rows(self) -> int:
        """Distinct rows in the fitted window (``C = cache_fraction x unique_rows``)."""
        self._require_fitted()
        return self._unique_rows

    def mean_reuse(self) -> float:
        """Lookups per distinct row of the fitted distribution (the file's ``Avg col size``
        up to the rounding of its shares)."""
        k, w = self._fitted()
        return float(w @ k)

    def count_distribution(self) -> tuple[FloatArray, FloatArray]:
        """Representative per-row lookup counts and the share of distinct rows at each."""
        k, w = self._fitted()
        return k.copy(), w.copy()

    def compulsory_miss_rate(self) -> float:
        """Misses no cache avoids within the window: first lookups, ``1 / mean reuse``."""
        return 1.0 / self.mean_reuse()

    # ------------------------------------------------------------------------ predictions
    def hit_rate(self, cache_fraction: npt.ArrayLike, *, policy: Policy = "lru") -> FloatArray:
        """Hit rate over the window of a cache holding ``cache_fraction`` of its distinct
        rows (array in, array out)."""
        k, w = self._fitted()
        f = np.asarray(cache_fraction, dtype=np.float64)
        if f.size and not (np.all(np.isfinite(f)) and np.all(f >= 0)):
            raise InvalidSpecError("cache_fraction", "must be finite and >= 0", got=f.tolist())
        if policy not in POLICIES:
            raise InvalidSpecError("policy", f"must be one of {', '.join(POLICIES)}", got=policy)
        f = np.minimum(f, 1.0)
        hits = self._lru(k, w, f) if policy == "lru" else self._lfu(k, w, f)
        # the ceiling (every lookup but a row's first) is what both reach at f = 1 in exact
        # arithmetic; the sums reach it up to their last bits, which this holds them to
        return np.minimum(hits, 1.0 - self.compulsory_miss_rate())

    @staticmethod
    def _lru(k: FloatArray, w: FloatArray, f: FloatArray) -> FloatArray:
        # occupancy(x) = sum w (1 - (1-x)^k) rises from 0 to 1; bisect x in log space per f
        flat = f.reshape(-1)
        lo = np.full(flat.shape, -60.0)
        hi = np.zeros(flat.shape)
        for _ in range(70):
            mid = 0.5 * (lo + hi)
            x = np.exp(mid)
            occ = -np.expm1(np.outer(np.log1p(-np.minimum(x, 1 - 1e-16)), k)) @ w
            below = occ < flat
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        x = np.minimum(np.exp(0.5 * (lo + hi)), 1 - 1e-16)
        p_hit = -np.expm1(np.outer(np.log1p(-x), k))
        hits = p_hit @ (w * (k - 1.0)) / float(w @ k)
        hits = np.where(flat >= 1.0, float(w @ (k - 1.0)) / float(w @ k), hits)
        hits = np.where(flat <= 0.0, 0.0, hits)
        return hits.reshape(f.shape)

    @staticmethod
    def _lfu(k: FloatArray, w: FloatArray, f: FloatArray) -> FloatArray:
        from scipy.stats import binom

        flat = f.reshape(-1)
        # time through the window (midpoints); a row's count at tau is Binomial(k, tau)
        tau = (np.arange(LFU_TIME_STEPS) + 0.5) / LFU_TIME_STEPS
        kk, tt = k[None, None, :], tau[None, :, None]

        def occupancy(theta: FloatArray) -> FloatArray:  # rows with count >= theta
            return binom.sf(theta[..., None] - 1, kk, tt) @ w  # type: ignore[no-any-return]

        # per (f, tau): the smallest count theta >= 1 with occupancy(theta + 1) < f
        lo = np.ones((flat.size, tau.size))
        hi = np.full((flat.size, tau.size), float(k.max()) + 1.0)
        while np.any(hi - lo > 0):
            mid = np.floor(0.5 * (lo + hi))
            fits = occupancy(mid + 1.0) < flat[:, None]
            hi = np.where(fits, mid, hi)
            lo = np.where(fits, lo, mid + 1.0)
        theta = lo
        above, at_or_above = occupancy(theta + 1.0), occupancy(theta)
        share_at = np.clip(
            (flat[:, None] - above) / np.maximum(at_or_above - above, 1e-300), 0.0, 1.0
        )
        # a lookup at tau finds the row cached when its earlier count (Binomial(k - 1, tau))
        # is above theta, or at theta for the share of those rows the cache holds; theta and
        # that share held over each time step, the probability integrated over it exactly
        th = theta[..., None]
        edges = np.arange(LFU_TIME_STEPS + 1) / LFU_TIME_STEPS
        lo_t, hi_t = edges[None, :-1, None], edges[None, 1:, None]
        n = kk - 1.0
        p_hit = _binomial_sf_integral(th, n, lo_t, hi_t) + share_at[..., None] * (
            _binomial_pmf_integral(th, n, lo_t, hi_t)
        )
        hits = p_hit.sum(axis=1) @ (w * k) / float(w @ k)
        hits = np.where(flat <= 0.0, 0.0, hits)
        return np.asarray(hits, dtype=np.float64).reshape(f.shape)

    def sample_row_counts(self, n_rows: int) -> IntArray:
        """Integer lookup counts for about ``n_rows`` rows that reproduce the fitted shares of
        rows and of lookups per reuse bucket (deterministic): rows are assigned to the
        representative counts by systematic rounding of ``share x n_rows`` (so a count whose
        expected rows are below one still appears at its frequency), then the counts in each
        bucket are scaled (within its edges) so the bucket keeps its share of lookups."""
        k, w = self._fitted()
        if n_rows < 1:
            raise InvalidSpecError("n_rows", "must be >= 1", got=n_rows)
        cum = np.floor(np.concatenate([[0.0], np.cumsum(w * n_rows)]) + 0.5)
        n = np.diff(cum).astype(np.int64)
        counts = np.repeat(k, n)
        lows = np.asarray(self._bucket_lows, dtype=np.float64)
        bucket = np.searchsorted(lows, counts, side="left") - 1
        target_share = np.bincount(
            np.searchsorted(lows, k, side="left") - 1, weights=w * k, minlength=len(lows)
        ) / float(w @ k)
        total = counts.sum()
        have = np.bincount(bucket, weights=counts, minlength=len(lows))
        scale = np.where(have > 0, target_share * total / np.maximum(have, 1e-300), 1.0)
        upper = np.append(lows[1:], np.inf)
        scaled = np.clip(np.round(counts * scale[bucket]), lows[bucket] + 1, upper[bucket])
        return scaled.astype(np.int64)

    # ---------------------------------------------------------------------------- JSON
    def _state(self) -> dict[str, Any]:
        k, w = self._fitted()
        return {
            "counts": k.tolist(),
            "weights": w.tolist(),
            "exponents": [None if math.isnan(a) else a for a in self._exponents],
            "bucket_lows": list(self._bucket_lows),
            "unique_rows": self._unique_rows,
            "lookups": self._lookups,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any]) -> Self:
        try:
            k = np.asarray(state["counts"], dtype=np.float64)
            w = np.asarray(state["weights"], dtype=np.float64)
            exps = [math.nan if a is None else float(a) for a in state["exponents"]]
            unique_rows, lookups = int(state["unique_rows"]), int(state["lookups"])
            bucket_lows = [int(v) for v in state["bucket_lows"]]
        except (KeyError, TypeError, ValueError):
            raise InvalidInputError(
                "embedding_locality model state is malformed", fix="refit it"
            ) from None
        if k.ndim != 1 or k.shape != w.shape or k.size == 0 or np.any(k < 1) or np.any(w < 0):
            raise InvalidInputError("embedding_locality model state is malformed", fix="refit it")
        model = cls()
        model._counts, model._weights, model._exponents = k, w, exps
        model._unique_rows, model._lookups = unique_rows, lookups
        model._bucket_lows = bucket_lows
        return model


# ------------------------------------------------------------------------------ Zipf law
#: Ranks below this are represented one by one; above it in log-spaced bins.
ZIPF_EXACT_RANKS = 4096
#: Log-spaced bins over the ranks above :data:`ZIPF_EXACT_RANKS`.
ZIPF_BINS = 4096


def _power_integral(lo: FloatArray, hi: FloatArray, s: float) -> FloatArray:
    """``integral of x^-s dx`` from ``lo`` to ``hi`` (elementwise)."""
    if abs(s - 1.0) < 1e-12:
        return np.asarray(np.log(hi / lo), dtype=np.float64)
    return np.asarray((hi ** (1.0 - s) - lo ** (1.0 - s)) / (1.0 - s), dtype=np.float64)


class ZipfLocality:
    """Lookups drawn independently from a Zipf law over a table's ``rows``: the ``i``-th
    hottest row with probability ``i^-s / sum_j j^-s`` (``s = 0``: uniform). Steady state of a
    long stream: no compulsory misses (unlike :class:`EmbeddingLocalityModel`'s finite
    window), the cache share is a share of the table's rows.

    * **LRU** -- Che's approximation: the characteristic time ``T`` solves
      ``sum_i (1 - exp(-p_i T)) = C``; hit rate ``sum_i p_i (1 - exp(-p_i T))``.
    * **LFU** with per-row counters: the ``C`` most probable rows, ``sum_{i <= C} p_i``.

    The ranks above :data:`ZIPF_EXACT_RANKS` are summed in :data:`ZIPF_BINS` log-spaced bins
    (each row of a bin at the bin's mean probability); pure arithmetic, nothing to fit."""

    def __init__(self, *, rows: int, exponent: float) -> None:
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise InvalidSpecError("rows", "must be an integer >= 1", got=rows)
        if not (math.isfinite(exponent) and exponent >= 0):
            raise InvalidSpecError("zipf exponent", "must be a number >= 0", got=exponent)
        self.rows = rows
        self.exponent = float(exponent)
        exact = np.arange(1, min(rows, ZIPF_EXACT_RANKS) + 1, dtype=np.float64)
        counts = [np.ones_like(exact)]
        mass = [exact**-self.exponent]
        if rows > ZIPF_EXACT_RANKS:
            edges = np.unique(
                np.round(np.geomspace(ZIPF_EXACT_RANKS + 0.5, rows + 0.5, ZIPF_BINS + 1))
            )
            lo, hi = edges[:-1], edges[1:]
            counts.append(hi - lo)
            mass.append(_power_integral(lo, hi, self.exponent))
        self._rows_per_bin = np.concatenate(counts)  # hottest first
        total = np.concatenate(mass)
        self._p = total / total.sum() / self._rows_per_bin  # per row of each bin

    def hit_rate(self, cache_fraction: npt.ArrayLike, *, policy: Policy = "lru") -> FloatArray:
        """Steady-state hit rate of a cache holding ``cache_fraction`` of the table's rows
        (array in, array out)."""
        f = np.asarray(cache_fraction, dtype=np.float64)
        if f.size and not (np.all(np.isfinite(f)) and np.all(f >= 0)):
            raise InvalidSpecError("cache_fraction", "must be finite and >= 0", got=f.tolist())
        if policy not in POLICIES:
            raise InvalidSpecError("policy", f"must be one of {', '.join(POLICIES)}", got=policy)
        flat = np.minimum(f.reshape(-1), 1.0)
        n, p = self._rows_per_bin, self._p
        if policy == "lfu":
            rows_cum = np.concatenate([[0.0], np.cumsum(n)])
            mass_cum = np.concatenate([[0.0], np.cumsum(n * p)])
            hits = np.interp(flat * self.rows, rows_cum, mass_cum)
        else:
            cache = flat * self.rows
            lo = np.full(flat.shape, -80.0)
            hi = np.full(flat.shape, 80.0)
            for _ in range(100):  # bisect log T: occupancy rises with T
                mid = 0.5 * (lo + hi)
                occupancy = -np.expm1(-np.outer(np.exp(mid), p)) @ n
                below = occupancy < cache
                lo = np.where(below, mid, lo)
                hi = np.where(below, hi, mid)
            t = np.exp(0.5 * (lo + hi))
            hits = -np.expm1(-np.outer(t, p)) @ (n * p)
        hits = np.where(flat >= 1.0, 1.0, np.where(flat <= 0.0, 0.0, hits))
        return np.asarray(hits, dtype=np.float64).reshape(f.shape)
