"""GPU-to-GPU speed variability and what it does to a synchronous job.

Nominally identical GPUs differ in speed (manufacturing spread under power management). Each
GPU of a job gets one speed factor ``f`` -- its step time over the median GPU's -- drawn once
(the spread is a property of the chip, not noise that averages out over steps):

* with probability ``1 - outlier_share``: ``ln f ~ Normal(0, sigma_log)``;
* with probability ``outlier_share``: ``f = edge + y``, ``edge`` the upper whisker of the core
  (``exp(2.698 sigma_log)``, where a box plot's whiskers end) and ``y`` a generalised Pareto
  excess (shape ``outlier_shape``, scale ``outlier_scale``) truncated at
  ``outlier_max_factor``. Shape -1 (the default) is the uniform on ``[edge, max]``; a fit on
  measured GPUs estimates both from the excesses over the edge (peaks over threshold). With
  many outliers measured (at least :data:`MIN_EMPIRICAL`) the excesses' own quantiles are the
  tail instead (``outlier_quantiles``): no parametric shape stands between a large fleet's
  measurement and its slowest GPUs.

A synchronous data-parallel step waits for its slowest GPU, so an ``n``-GPU job runs
``max_i f_i`` times slower than one median GPU; asynchronous workers each run at their own
speed, so the job's throughput scales with ``mean(1 / f_i)``. :meth:`SpeedVariability.
expected_max` is ``E[max of n]`` in closed form (``int (1 - F(x)^n) dx``); with straggler-aware
placement -- rent ``m = ceil(n / (1 - k))`` GPUs, drop the slowest ``m - n`` -- the job runs at
the ``n``-th order statistic of ``m`` (:meth:`expected_order_stat`, the regularised incomplete
beta of ``F``).

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError

FloatArray = npt.NDArray[np.float64]
#: Where a box plot's upper whisker ends for a normal core: Q3 + 1.5 IQR = 2.698 sigma.
WHISKER_Z = 2.698
#: Outliers needed to fit their tail's shape (fewer: uniform up to the slowest measured).
MIN_EXCESSES = 10
#: Outliers from which their empirical quantiles, not a fitted shape, are the tail.
MIN_EMPIRICAL = 200
#: The slowest a GPU is modelled, as a factor of the median GPU's step time.
MAX_OUTLIER_FACTOR = 10.0
#: Quantiles kept of an empirical tail (at probabilities 0, 1/(K-1), ..., 1).
EMPIRICAL_QUANTILES = 201
_GRID = 4001


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedVariability:
    """The per-GPU speed-factor distribution of the module docstring."""

    sigma_log: float
    outlier_share: float = 0.0
    outlier_max_factor: float = 1.0
    outlier_shape: float = -1.0
    #: None: ``outlier_max_factor - edge`` (with shape -1: uniform up to the maximum)
    outlier_scale: float | None = None
    #: the excesses' quantiles at evenly spaced probabilities 0..1 (empty: the Pareto shape)
    outlier_quantiles: tuple[float, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.sigma_log) and 0.0 <= self.sigma_log <= 1.0):
            raise InvalidSpecError("sigma_log", "must be in [0, 1]", got=self.sigma_log)
        if not (math.isfinite(self.outlier_share) and 0.0 <= self.outlier_share < 0.5):
            raise InvalidSpecError("outlier_share", "must be in [0, 0.5)", got=self.outlier_share)
        if not (
            math.isfinite(self.outlier_max_factor)
            and 1.0 <= self.outlier_max_factor <= MAX_OUTLIER_FACTOR
        ):
            raise InvalidSpecError(
                "outlier_max_factor", "must be in [1, 10]", got=self.outlier_max_factor
            )
        if not (math.isfinite(self.outlier_shape) and -1.0 <= self.outlier_shape <= 1.0):
            raise InvalidSpecError("outlier_shape", "must be in [-1, 1]", got=self.outlier_shape)
        if self.outlier_scale is not None and not (
            math.isfinite(self.outlier_scale) and self.outlier_scale > 0
        ):
            raise InvalidSpecError("outlier_scale", "must be > 0", got=self.outlier_scale)
        if self.outlier_quantiles:
            q = np.asarray(self.outlier_quantiles, dtype=np.float64)
            if (
                q.size < 2
                or not np.all(np.isfinite(q))
                or q[0] < 0
                or np.any(np.diff(q) < 0)
                or q[-1] <= 0
            ):
                raise InvalidSpecError(
                    "outlier_quantiles", "must be >= 2 finite, non-decreasing excesses >= 0",
                    fix="refit: gpucast fit variability",
                )  # fmt: skip

    @property
    def edge(self) -> float:
        """Where the outliers start: the core's upper whisker (never above the outlier max)."""
        return min(math.exp(WHISKER_Z * self.sigma_log), self.outlier_max_factor)

    @property
    def has_outliers(self) -> bool:
        return self.outlier_share > 0 and self.outlier_max_factor > self.edge

    @property
    def _scale(self) -> float:
        if self.outlier_scale is not None:
            return self.outlier_scale
        return max(self.outlier_max_factor - self.edge, 1e-12)

    def _probabilities(self) -> FloatArray:
        return np.linspace(0.0, 1.0, len(self.outlier_quantiles))

    def _excess_cdf(self, y: FloatArray) -> FloatArray:
        """The generalised Pareto CDF of an excess ``y >= 0`` (untruncated), or the empirical
        one (interpolated between the kept quantiles)."""
        if self.outlier_quantiles:
            q = np.asarray(self.outlier_quantiles, dtype=np.float64)
            return np.asarray(np.interp(y, q, self._probabilities(), left=0.0, right=1.0))
        xi, sigma = self.outlier_shape, self._scale
        y = np.maximum(y, 0.0)
        if abs(xi) < 1e-9:
            return np.asarray(1.0 - np.exp(-y / sigma), dtype=np.float64)
        base = np.maximum(1.0 + xi * y / sigma, 0.0)
        with np.errstate(divide="ignore"):
            return np.asarray(1.0 - base ** (-1.0 / xi), dtype=np.float64)

    def _excess_quantile(self, q: FloatArray) -> FloatArray:
        if self.outlier_quantiles:
            kept = np.asarray(self.outlier_quantiles, dtype=np.float64)
            return np.asarray(np.interp(q, self._probabilities(), kept))
        xi, sigma = self.outlier_shape, self._scale
        if abs(xi) < 1e-9:
            return np.asarray(-sigma * np.log1p(-q), dtype=np.float64)
        return np.asarray(sigma / xi * ((1.0 - q) ** (-xi) - 1.0), dtype=np.float64)

    def _tail_cdf(self, x: FloatArray) -> FloatArray:
        """The outliers' CDF: the excess over the edge, truncated at the maximum."""
        top = self._excess_cdf(np.asarray([self.outlier_max_factor - self.edge]))[0]
        y = np.clip(x - self.edge, 0.0, self.outlier_max_factor - self.edge)
        return np.asarray(self._excess_cdf(y) / max(top, 1e-300), dtype=np.float64)

    def _support(self) -> tuple[float, float]:
        low = math.exp(-8.0 * self.sigma_log)
        high = max(math.exp(8.0 * self.sigma_log), self.outlier_max_factor)
        return low, high

    def cdf(self, x: npt.ArrayLike) -> FloatArray:
        """``P(f <= x)``."""
        xa = np.asarray(x, dtype=np.float64)
        from scipy.special import ndtr  # (loaded when a spread is used)

        with np.errstate(divide="ignore"):
            z = np.log(np.maximum(xa, 1e-300))
        core = ndtr(z / self.sigma_log) if self.sigma_log > 0 else (xa >= 1.0).astype(np.float64)
        if not self.has_outliers:
            return np.asarray(core, dtype=np.float64)
        tail = self._tail_cdf(xa)
        p = self.outlier_share
        return np.asarray((1.0 - p) * core + p * tail, dtype=np.float64)

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> FloatArray:
        """Speed factors of ``size`` GPUs."""
        core = np.exp(self.sigma_log * rng.standard_normal(size))
        if not self.has_outliers:
            return np.asarray(core, dtype=np.float64)
        out = rng.random(size) < self.outlier_share
        top = self._excess_cdf(np.asarray([self.outlier_max_factor - self.edge]))[0]
        tail = self.edge + self._excess_quantile(rng.random(size) * top)
        tail = np.minimum(tail, self.outlier_max_factor)
        return np.asarray(np.where(out, tail, core), dtype=np.float64)

    def _grid(self) -> tuple[FloatArray, FloatArray]:
        low, high = self._support()
        x = np.linspace(low, high, _GRID)
        if self.has_outliers:  # resolve the core finely too
            core = np.exp(np.linspace(-8.0 * self.sigma_log, 8.0 * self.sigma_log, _GRID))
            x = np.union1d(x, core)
        return x, self.cdf(x)

    def expected_max(self, n: npt.ArrayLike) -> FloatArray:
        """``E[max of n factors]``: how much slower a synchronous ``n``-GPU job runs."""
        return self.expected_order_stat(n, n)

    def expected_order_stat(
        self, n: npt.ArrayLike, m: npt.ArrayLike, *, per_unit: int = 1
    ) -> FloatArray:
        """``E[n-th smallest of m factors]`` (``n <= m``): the slowest GPU kept when the
        fastest ``n`` of ``m`` rented ones run the job. With ``per_unit`` > 1 the ``m`` are
        units (nodes) of that many GPUs, each as slow as its slowest GPU: factors drawn from
        ``F ** per_unit``."""
        if isinstance(per_unit, bool) or int(per_unit) != per_unit or per_unit < 1:
            raise InvalidSpecError("gpus per node", "must be a whole number >= 1", got=per_unit)
        na = np.atleast_1d(np.asarray(n, dtype=np.float64))
        ma = np.atleast_1d(np.asarray(m, dtype=np.float64))
        na, ma = np.broadcast_arrays(na, ma)
        if np.any(na < 1) or np.any(ma < na):
            raise InvalidSpecError("n", "need 1 <= n <= m GPUs")
        if self.sigma_log == 0 and not self.has_outliers:
            return np.ones(na.shape)
        from scipy.special import betainc

        x, F = self._grid()
        if per_unit > 1:
            F = F ** int(per_unit)
        keys, inverse = np.unique(
            np.stack([na.ravel(), ma.ravel()], axis=1), axis=0, return_inverse=True
        )
        out = np.empty(len(keys))
        for i, (k, mm) in enumerate(keys):
            # P(X_(k:m) <= x) = I_F(k, m - k + 1)
            g = betainc(k, mm - k + 1.0, F)
            out[i] = x[0] + np.trapezoid(1.0 - g, x)
        return np.asarray(out[inverse.reshape(-1)].reshape(na.shape), dtype=np.float64)

    def busy_share(self, slowdown: npt.ArrayLike) -> FloatArray:
        """``E[f] / slowdown`` (at most 1): the share of a step paced at ``slowdown`` that
        the mean GPU computes -- its peers finish early and wait on the slowest."""
        mean = float(self.expected_order_stat(1, 1)[0])
        return np.asarray(np.minimum(mean / np.asarray(slowdown, dtype=np.float64), 1.0))

    def expected_inverse(self) -> float:
        """``E[1 / f]``: an asynchronous worker's mean relative speed."""
        if self.sigma_log == 0 and not self.has_outliers:
            return 1.0
        x, F = self._grid()
        density_mass = np.diff(F)
        mid = 0.5 * (x[1:] + x[:-1])
        return float(np.sum(density_mass / mid) / max(F[-1] - F[0], 1e-12))

    def slowdown(
        self,
        n: npt.ArrayLike,
        *,
        sync: npt.ArrayLike,
        exclude: float = 0.0,
        gpus_per_node: int = 1,
    ) -> FloatArray:
        """The step-time multiplier of ``n``-GPU jobs: ``E[max]`` where ``sync``, ``1 / E[1/f]``
        elsewhere. Excluding the slowest ``exclude`` share works by whole nodes of
        ``gpus_per_node`` GPUs (what a cloud lets one release): the job probes
        ``rented_nodes(n / gpus_per_node, exclude)`` nodes and keeps the fastest, a node as
        fast as its slowest GPU -- the order statistic of the nodes' maxima."""
        if not (math.isfinite(exclude) and 0.0 <= exclude < 1.0):
            raise InvalidSpecError("exclude-slowest", "must be in [0, 1)", got=exclude)
        na = np.asarray(n, dtype=np.float64)
        gpn = int(gpus_per_node)
        nodes = np.ceil(na / gpn - 1e-9)
        m = rented_nodes(nodes, exclude)
        sync_factor = (
            self.expected_order_stat(na, na)
            if exclude == 0
            else self.expected_order_stat(nodes, m, per_unit=gpn)
        )
        async_factor = 1.0 / self.expected_inverse()
        return np.asarray(np.where(np.asarray(sync, dtype=bool), sync_factor, async_factor))

    @classmethod
    def fit(cls, factors: npt.ArrayLike, *, source: str = "") -> SpeedVariability:
        """From measured per-GPU factors (step time over the median's): the core's spread by
        the median absolute deviation of ``ln f``; factors beyond the core's upper whisker are
        outliers: their share, their largest as the maximum (the model never puts a GPU
        slower than the slowest measured), and -- with at least :data:`MIN_EXCESSES` of them --
        a generalised Pareto fit of their excesses over the edge (else uniform)."""
        f = np.asarray(factors, dtype=np.float64)
        if f.ndim != 1 or f.size < 3 or not np.all(np.isfinite(f) & (f > 0)):
            raise InvalidSpecError(
                "factors", "need at least 3 finite per-GPU speed factors > 0", got=int(f.size)
            )
        f = f / np.median(f)
        z = np.log(f)
        sigma = min(float(1.4826 * np.median(np.abs(z))), 1.0)
        edge = math.exp(WHISKER_Z * sigma)
        out = f > edge
        share = float(np.mean(out))
        top = min(float(f.max()), MAX_OUTLIER_FACTOR) if out.any() else 1.0
        shape, scale = -1.0, None
        quantiles: tuple[float, ...] = ()
        if int(out.sum()) >= MIN_EMPIRICAL:
            probs = np.linspace(0.0, 1.0, EMPIRICAL_QUANTILES)
            quantiles = tuple(float(v) for v in np.quantile(f[out] - edge, probs))
        elif int(out.sum()) >= MIN_EXCESSES:
            from scipy.stats import genpareto

            c, _, s = genpareto.fit(f[out] - edge, floc=0.0)
            shape, scale = float(np.clip(c, -1.0, 1.0)), float(s)
        return cls(
            sigma_log=sigma,
            outlier_share=min(share, 0.49),
            outlier_max_factor=max(top, 1.0),
            outlier_shape=shape,
            outlier_scale=scale,
            outlier_quantiles=quantiles,
            source=source,
        )

    def to_dict(self) -> dict[str, float | str | list[float] | None]:
        return {
            "sigma_log": self.sigma_log,
            "outlier_share": self.outlier_share,
            "outlier_max_factor": self.outlier_max_factor,
            "outlier_shape": self.outlier_shape,
            "outlier_scale": self.outlier_scale,
            "outlier_quantiles": list(self.outlier_quantiles),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SpeedVariability:
        try:
            return cls(
                sigma_log=float(data["sigma_log"]),  # type: ignore[arg-type]
                outlier_share=float(data.get("outlier_share", 0.0)),  # type: ignore[arg-type]
                outlier_max_factor=float(data.get("outlier_max_factor", 1.0)),  # type: ignore[arg-type]
                outlier_shape=float(data.get("outlier_shape", -1.0)),  # type: ignore[arg-type]
                outlier_scale=None
                if data.get("outlier_scale") is None
                else float(data["outlier_scale"]),  # type: ignore[arg-type]
                outlier_quantiles=tuple(
                    float(v)
                    for v in data.get("outlier_quantiles") or ()  # type: ignore[attr-defined]
                ),
                source=str(data.get("source", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidSpecError("gpu variability", f"malformed ({exc})") from None


#: How long the nodes started beside a job to drop the slowest (``exclude``) are billed
#: after their start-up: a minute of the job's steps ranks them, and a minute is the least
#: most clouds bill (AWS, GCP, Azure per-second billing after the first minute).
PROBE_S = 60.0


def rented_nodes(nodes: npt.ArrayLike, exclude: float) -> FloatArray:
    """Nodes probed to keep ``nodes`` after dropping the slowest ``exclude`` share:
    ``ceil(nodes / (1 - exclude))`` (``nodes`` when nothing is excluded)."""
    na = np.asarray(nodes, dtype=np.float64)
    return np.asarray(np.maximum(np.ceil(na / (1.0 - exclude) - 1e-9), na), dtype=np.float64)


def run_slowdowns(
    variability: SpeedVariability,
    rng: np.random.Generator,
    runs: int,
    n_gpus: int,
    *,
    sync: bool,
    exclude: float = 0.0,
    gpus_per_node: int = 1,
) -> FloatArray:
    """One draw per GPU for each of ``runs`` jobs of ``n_gpus`` on nodes of
    ``gpus_per_node``: the job's slowdown -- the slowest GPU when ``sync``, else
    ``1 / mean(1 / f)``. With ``exclude``, each job probes :func:`rented_nodes` nodes and
    keeps the fastest (a node paced by its slowest GPU when ``sync``, by its GPUs' mean speed
    otherwise)."""
    if runs < 1 or n_gpus < 1:
        raise InvalidSpecError("runs", "need >= 1 run and >= 1 GPU")
    if not (math.isfinite(exclude) and 0.0 <= exclude < 1.0):
        raise InvalidSpecError("exclude-slowest", "must be in [0, 1)", got=exclude)
    gpn = max(1, min(int(gpus_per_node), n_gpus))
    nodes = math.ceil(n_gpus / gpn)
    rented = int(rented_nodes(nodes, exclude))
    out = np.empty(runs)
    chunk = max(1, 2_000_000 // (rented * gpn))  # bounded memory for thousands of GPUs
    for start in range(0, runs, chunk):
        f = variability.sample(rng, (min(chunk, runs - start), rented, gpn))
        if rented > nodes:
            pace = f.max(axis=2) if sync else 1.0 / np.mean(1.0 / f, axis=2)
            keep = np.argpartition(pace, nodes - 1, axis=1)[:, :nodes]
            f = np.take_along_axis(f, keep[:, :, None], axis=1)
        f = f.reshape(f.shape[0], -1)
        out[start : start + f.shape[0]] = f.max(axis=1) if sync else 1.0 / np.mean(1.0 / f, axis=1)
    return out
