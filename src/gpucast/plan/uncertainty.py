"""The step-time model's own uncertainty as a distribution of the run's speed factor.

Every candidate's training time comes with an interval (``train_ratio_lower`` ..
``train_ratio_upper`` times the central value; :mod:`gpucast.plan.evaluate`): the roofline's
``value / (1 + h) .. value * (1 + h)`` (``h`` = 0.5 uncalibrated, 0.1-0.4 calibrated) on the
compute, +-25% on exposed collectives, a parameter server's stations at the PS model's 10th /
90th percentile log residuals (its queueing network solved again at each end). We read that
interval as the **10th and 90th percentiles** of a multiplicative factor ``F`` on the
training time, with the model's value as the **median**, and give ``F`` a *two-piece
lognormal* distribution::

    ln F ~ N(0, sigma_lo^2) below 0,  N(0, sigma_hi^2) above,
    sigma_lo = -ln(lower) / z90,  sigma_hi = ln(upper) / z90,  z90 = 1.2816

(one lognormal when the interval is symmetric in log space, as the roofline's is; e.g.
+-50% gives sigma 0.316). ``F`` is one draw per run: the model's error is systematic
(a wrong efficiency is wrong for the whole job), not noise that averages out over steps.

* On-demand plans: ``P(meet) = P(startup + train x F <= deadline)``, in closed form
  (:func:`p_factor_at_most`).
* Spot plans: the Monte Carlo splits its runs evenly over :func:`strata` (the factor's
  quantiles at ``(j + 0.5) / k``, stratified sampling) and simulates each stratum's runs that
  much slower or faster (:func:`gpucast.plan.risk.simulate_spot`).

Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: the standard normal's quantile function (the standard library's: scipy.special alone
#: costs a planning run a quarter of a second of imports)
_STANDARD = NormalDist()
#: z-score of the 90th percentile of a standard normal.
Z90 = _STANDARD.inv_cdf(0.9)
_ERFC = np.frompyfunc(math.erfc, 1, 1)


#: ``math.erfc`` is exactly 2.0 at or below the first and exactly 0.0 at or above the second
#: (the tails are far below half a unit in the last place), so only the rows between call it
_ERFC_TWO, _ERFC_ZERO = -10.0, 40.0


def ndtr(z: npt.ArrayLike) -> FloatArray:
    """The standard normal CDF, elementwise (``math.erfc``: exact to the last bits; the
    saturated tails are filled in without calling it, to the same bits)."""
    za = np.asarray(z, dtype=np.float64)
    x = -za / math.sqrt(2.0)
    out = np.where(x <= _ERFC_TWO, 2.0, 0.0)
    mid = ~((x <= _ERFC_TWO) | (x >= _ERFC_ZERO))  # nan stays here: erfc(nan) is nan
    if mid.all():
        out = np.asarray(_ERFC(x), dtype=np.float64)
    elif mid.any():
        out[mid] = _ERFC(x[mid])
    return np.asarray(0.5 * out, dtype=np.float64)


def ndtri(p: npt.ArrayLike) -> FloatArray:
    """The standard normal quantile, elementwise (0 < p < 1)."""
    pa = np.asarray(p, dtype=np.float64)
    return np.asarray(np.vectorize(_STANDARD.inv_cdf, otypes=[np.float64])(pa), dtype=np.float64)


#: Strata of the speed factor per simulated plan (runs are split evenly over them). Odd, so
#: the middle stratum is the median itself (factor 1): with a skewed interval the median run
#: is then the model's central value, not a mix of the two strata around it.
SPOT_STRATA = 11


def sigmas(ratio_lower: npt.ArrayLike, ratio_upper: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(sigma below the median, sigma above) of ``ln F`` from the interval's ratios."""
    lo = np.asarray(ratio_lower, dtype=np.float64)
    hi = np.asarray(ratio_upper, dtype=np.float64)
    s_lo = np.maximum(-np.log(np.minimum(lo, 1.0)), 0.0) / Z90
    s_hi = np.maximum(np.log(np.maximum(hi, 1.0)), 0.0) / Z90
    return np.asarray(s_lo, dtype=np.float64), np.asarray(s_hi, dtype=np.float64)


def p_factor_at_most(
    x: npt.ArrayLike, ratio_lower: npt.ArrayLike, ratio_upper: npt.ArrayLike
) -> FloatArray:
    """``P(F <= x)`` (vectorised); ``x <= 0`` gives 0, a zero-width interval a step at 1."""
    xa = np.asarray(x, dtype=np.float64)
    s_lo, s_hi = sigmas(ratio_lower, ratio_upper)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log(np.where(xa > 0, xa, 1.0))
        s = np.where(z < 0, s_lo, s_hi)
        p = np.where(s > 0, ndtr(z / np.where(s > 0, s, 1.0)), np.where(z >= 0, 1.0, 0.0))
    p = np.where(xa > 0, p, 0.0)
    return np.asarray(np.where(np.isnan(xa), 0.0, p), dtype=np.float64)


def p_meet_deadline(
    deadline_s: float,
    startup_s: float,
    train_s: npt.ArrayLike,
    ratio_lower: npt.ArrayLike,
    ratio_upper: npt.ArrayLike,
) -> FloatArray:
    """``P(startup + train x F <= deadline)`` for on-demand plans (vectorised)."""
    t = np.asarray(train_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(t > 0, (deadline_s - startup_s) / t, np.inf)
    return p_factor_at_most(x, ratio_lower, ratio_upper)


def quantile(p: npt.ArrayLike, ratio_lower: float, ratio_upper: float) -> FloatArray:
    """The factor's quantiles at probabilities ``p`` (0 < p < 1)."""
    z = ndtri(np.asarray(p, dtype=np.float64))
    s_lo, s_hi = sigmas(ratio_lower, ratio_upper)
    return np.asarray(np.exp(np.where(z < 0, z * s_lo, z * s_hi)), dtype=np.float64)


def strata(ratio_lower: float, ratio_upper: float, k: int = SPOT_STRATA) -> tuple[float, ...]:
    """``k`` equally likely speed factors (quantiles at ``(j + 0.5) / k``)."""
    k = max(int(k), 1)
    if k == 1 or (ratio_lower >= 1.0 and ratio_upper <= 1.0):
        return (1.0,)
    return tuple(float(f) for f in quantile((np.arange(k) + 0.5) / k, ratio_lower, ratio_upper))
