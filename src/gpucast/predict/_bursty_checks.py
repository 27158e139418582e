"""What the parts of :mod:`gpucast.predict.bursty` share: the array types, the hour, a
lifetime's cap (:func:`_cap`, :func:`_check_cap`) and the check of a draw count
(:func:`_check_rng_args`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_H = 3600.0


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
